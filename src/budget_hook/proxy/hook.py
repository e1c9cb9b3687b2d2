"""The LiteLLM hook: turns LiteLLM's calls into one core call and the core's decision back into LiteLLM's terms.

This is the only module of budget_hook that imports litellm or fastapi, and a thin one: what it uses lives
beside it, testable without LiteLLM (``records``: the one per-call store; ``attempts``: the per-attempt
re-check; ``outcomes``: log lines, learning, metrics, a provider's overflow noted; ``answers``: each shape's
error format, and a provider's overflow answered as a block; ``chains``: Responses chains; ``client_input``,
``windows``, ``offload``, ``errors``, ``app_hooks``, ``route_guard``). Per request:

1. find the request's shape by LiteLLM's call type (``budget_hook.shapes``); others pass untouched;
2. build one ``BudgetRequest``: the body, the caller (team, key, admin metadata), the client's input,
   the routed group's limits (minimum window over its deployments, from the router);
3. ``pipeline.decide`` it (large requests in a bounded thread pool);
4. keep the ``DecisionRecord`` by call id, put it in the request's metadata (and ``spend_logs_metadata``, which
   reaches every LiteLLM logging integration), then forward the body (trimmed or not) or raise the block (HTTP 400);
5. answer ``x-budget-*`` headers and emit one JSON record per request from the success or failure
   callback, with the provider's ``prompt_tokens`` next to the estimate.

At start-up, inside the proxy: the model listings advertise each caller's budget (``proxy.model_info``), ``GET
/budget_hook/metrics`` is added, and the counters join prometheus_client's registry (LiteLLM's ``/metrics``).

Why hooks are defined on the class itself: the proxy only calls ``async_pre_call_hook`` and
``async_post_call_response_headers_hook`` when they are in ``vars(type(callback))``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import ProxyException

from ..budget import ModelLimits
from ..counting import templated
from ..counting.cache import COUNT_CACHE
from ..counting.profiles import resolve_tokenizer
from ..counting.validation import validate_message
from ..errors import MalformedRequestError, PolicyError
from ..learning import Calibration, teacher_of
from ..pipeline import BudgetRequest, Decision, DecisionRecord, InternalFailure, advertised, decide, decision_weight
from ..pipeline.record import BUDGET_HEADERS
from ..pipeline.request import Caller
from ..policy import PluginSettings, load_settings
from ..providers.anthropic import answer_unanswered_calls
from ..shapes import PASS_THROUGH_CALL_TYPE, SHAPES, Shape
from . import windows
from .answers import error_object, streamed_answer
from .app_hooks import expose, wrap_error_handler, wrap_routes
from .attempts import compared_fields, content_snapshot, held_size, lasting_refusal, recheck, reserved_output
from .chains import ChainStore, annotated, chained
from .client_input import SETTINGS_NAME, caller_of, read_client_input
from .errors import ErrorSpec, block_error, internal_error, unread_route_error
from .labels import labelled
from .loglines import install_stderr_handler
from .metrics import Metrics, register_with_prometheus
from .model_info import ROUTES as MODEL_INFO_ROUTES
from .model_info import advertise, groups_in, is_proxy_admin
from .offload import Offloader
from .outcomes import log_internal, log_outcome, note_overflow, remember_chain, snapshot, watch_chain
from .provider_count import ProviderCounter, decide_with_provider_count
from .records import Decided, RecordStore, attach_record
from .route_guard import (
    KnownTeams,
    current_route,
    forwarded_body,
    hookless_retry_error,
    install_path_context,
    note_a2a_caller,
    pass_through_model,
    refused_call,
)
from .shared import SharedLearning, litellm_redis
from .windows import (
    WindowCache,
    combine,
    deployment_limits,
    deployments_of,
    limits_from_router,
    listed_groups,
    model_name_error,
    serves_pass_through,
    with_learned_window,
)

logger = logging.getLogger("budget_hook")


class BudgetHookHTTPError(ProxyException):
    """An error the proxy turns into a clean JSON error on every endpoint, streaming included.

    A ``ProxyException``: the proxy passes it through as it is (an ``HTTPException`` it rebuilds, writing
    the HTTP status into ``error.code``), answers with its status, logs it as a client error (one line, no
    traceback) and reports it to failure callbacks. ``code`` stays the HTTP status the proxy reads;
    ``to_dict`` writes the provider's own ``error.code`` (``context_length_exceeded``), which OpenAI's SDK,
    openai-agents and pydantic-ai read to recognise an overflow, or the shape's own error object
    (``answers.error_object``); ``streamed``: the events a streamed call is answered with instead
    (``answers.streamed_answer``), from the call id the proxy adds to the headers.
    """

    def __init__(self, spec: ErrorSpec, headers: Mapping[str, str] | None = None, *, shape: Shape | None = None,
                 streamed: Callable[[Any], str] | None = None) -> None:
        facts = {"code": spec.code, **({"budget_hook": dict(spec.facts)} if spec.facts else {})}
        super().__init__(message=spec.message, type=spec.type, param=spec.param, code=spec.status_code,
                         openai_code=spec.code, provider_specific_fields=facts,
                         headers=dict(headers) if headers else None)
        self.status_code = spec.status_code
        self.error_code = spec.code
        self.error_body = error_object(shape, spec)
        self.streamed = streamed
        detail: dict[str, Any] = {"error": spec.message, "type": spec.type, "code": spec.code}
        if spec.param:
            detail["param"] = spec.param
        if spec.facts:
            detail["budget_hook"] = dict(spec.facts)
        self.detail = detail

    def to_dict(self) -> dict:
        if self.error_body is not None:
            return dict(self.error_body)
        return {**super().to_dict(), "code": self.error_code}


def streamed_block(error: BudgetHookHTTPError) -> Any:
    """A streamed block as its API's own failure events (``answers.streamed_answer``)."""
    from fastapi.responses import StreamingResponse

    assert error.streamed is not None
    body = error.streamed(error.headers.get("x-litellm-call-id"))
    return StreamingResponse(iter([body]), status_code=200, media_type="text/event-stream", headers=error.headers)


def _add_routes(app: Any, plugin: BudgetHookPlugin) -> None:
    """The listings advertise budgets; ``GET /budget_hook/metrics`` authenticates as LiteLLM's ``/metrics`` does
    (any valid key, unless ``litellm_settings.require_auth_for_metrics_endpoint: false``)."""
    from fastapi import Depends
    from litellm.proxy.auth.user_api_key_auth import user_api_key_auth

    wrap_routes(app, MODEL_INFO_ROUTES, plugin._advertise)
    install_path_context(app)  # the request's route, for the hooks (proxy.route_guard)
    auth = [Depends(user_api_key_auth)] if litellm.require_auth_for_metrics_endpoint is not False else []
    app.add_api_route("/budget_hook/metrics", plugin._metrics_endpoint, methods=["GET"], dependencies=auth)


def _overflow_error(message: str, model: str, overflow: bool = True) -> Exception:
    """A refused attempt as LiteLLM's context-window error (``overflow``; the router falls back to no smaller one) or
    bad-request error, marked as ours (``llm_provider``: it teaches nothing)."""
    kind = litellm.ContextWindowExceededError if overflow else litellm.BadRequestError
    error: Exception = kind(message=message, model=model, llm_provider="budget_hook")
    return error


def _forwarded_response_id(response_id: str, decrypted: bool) -> str:
    """A Responses id as LiteLLM forwards it to the provider, by LiteLLM's own steps: its Responses-id security
    hook's decryption (``decrypted``: a top-level ``/v1/responses`` id), then its decoding of its base64 wrapping
    (``decode_previous_response_id_to_original_previous_response_id``). Raises when LiteLLM cannot read it."""
    from litellm.proxy.hooks.responses_id_security import ResponsesIDSecurity
    from litellm.responses.utils import ResponsesAPIRequestUtils

    if decrypted:
        security = ResponsesIDSecurity(general_settings_reader=dict, signing_key_reader=lambda: None)
        if security._is_encrypted_response_id(response_id):
            response_id = security._decrypt_response_id(response_id)[0]
    decoded = ResponsesAPIRequestUtils.decode_previous_response_id_to_original_previous_response_id(response_id)
    if not isinstance(decoded, str):
        raise TypeError("not a response id")
    return decoded


def _serves_pass_through(name: str) -> bool:
    return serves_pass_through(_router(), name)


def _shared_output(model: str) -> int | None:
    """The maximum output LiteLLM fills in for a Claude model (``AnthropicConfig.get_max_tokens_for_model`` reads
    ``get_max_tokens``: the live model map's entry, which the router's deployments of the model overwrite)."""
    entry = litellm.model_cost.get(model)
    value = (entry.get("max_output_tokens") or entry.get("max_tokens")) if isinstance(entry, dict) else None
    return value if isinstance(value, int) else None


windows.shared_output = _shared_output


def _router() -> Any:
    try:
        from litellm.proxy import proxy_server  # the router exists only once the proxy has started

        return proxy_server.llm_router
    except Exception:  # pragma: no cover - the plugin used outside the proxy
        return None


def litellm_rewrite(shape: Shape, data: dict, limits: ModelLimits) -> dict:
    """The body as LiteLLM would send it, where what it writes after the hooks adds text: with
    ``litellm_settings.modify_params``, a chat call to Claude gets a result for each tool call left unanswered
    (``sanitize_messages_for_tool_calling``; 100 of them: 8,582 tokens counted, 11,226 sent). Written here instead
    (``providers.anthropic.answer_unanswered_calls``: each call next to its results, which trimming keeps
    together), so it is counted, trimmed and forwarded as sent, and LiteLLM finds nothing left to add. Else ``data``."""
    messages = data.get("messages")
    if not litellm.modify_params or shape.name != "chat" or not isinstance(messages, list) \
            or not limits.counting_model.startswith(SANITIZED_PROVIDERS) or resolve_tokenizer(
                limits.counting_model, base_model=limits.base_model).family != "anthropic":
        return data
    try:  # a malformed message is named by the decision's validation, at its place in the client's request
        for index, message in enumerate(messages):
            validate_message(message, index)
    except MalformedRequestError:
        return data
    answered = answer_unanswered_calls(messages)
    return data if answered is None else {**data, "messages": answered}


#: the providers whose chat calls to Claude LiteLLM writes through ``anthropic_messages_pt`` (so through
#: ``sanitize_messages_for_tool_calling``): Anthropic's API, Vertex AI, Azure AI, Bedrock's invoke route, and a
#: bare ``claude-`` name (LiteLLM's default provider for it); not Bedrock Converse or OpenRouter (rules of their own)
SANITIZED_PROVIDERS = ("anthropic/", "vertex_ai/", "azure_ai/", "bedrock/invoke/", "claude-")


def _router_limits(group: str) -> ModelLimits:
    return limits_from_router(_router(), group)


def _router_deployment_limits(key: str) -> ModelLimits | None:
    group, _, deployment_id = key.partition("\x00")
    return deployment_limits(_router(), group, deployment_id)


class BudgetHookPlugin(CustomLogger):
    """Token-budget enforcement for the LiteLLM proxy. The proxy builds one instance per worker."""

    def __init__(self, settings: PluginSettings | None = None) -> None:
        super().__init__()
        if settings is None:
            raw = (getattr(litellm, "callback_settings", None) or {}).get(SETTINGS_NAME)
            try:
                settings = load_settings(raw)
            except PolicyError as exc:
                # Raising here stops the proxy's start-up; say why on one line before its traceback.
                print(f"budget_hook: refusing to start: {exc}", file=sys.stderr, flush=True)
                raise
        self.settings = settings
        self.windows: WindowCache[ModelLimits] = WindowCache(_router_limits)
        #: per call id: its record, and what its attempts are checked against (``records.Decided``)
        self.records: RecordStore[DecisionRecord] = RecordStore()
        self.teams = KnownTeams()  # for the routes whose attempts name a team by its id alone (``route_guard``)
        self.deployment_windows: WindowCache[ModelLimits | None] = WindowCache(_router_deployment_limits)
        self.offloader = Offloader(threads=settings.counting_threads, offload_chars=settings.offload_chars)
        self.learning = SharedLearning(settings.learning, redis=lambda: litellm_redis(_router(), litellm))
        self.chains = ChainStore(run=self.learning._run if settings.learning.share == "auto" else None,
                                 resolve=_forwarded_response_id)
        self.metrics = Metrics(held=lambda: self.records.held())
        #: what LiteLLM writes into a body after the hooks, written in before a decision (attempts use it too)
        self.litellm_rewrite = litellm_rewrite
        register_with_prometheus(self.metrics)  # LiteLLM's /metrics, when prometheus_client is installed
        self.provider_counter = ProviderCounter()
        self._app_hooked = False
        server = sys.modules.get("litellm.proxy.proxy_server")  # inside the proxy: its routes exist by now
        if server is not None:
            with contextlib.suppress(Exception):
                _add_routes(server.app, self)
        COUNT_CACHE.configure(settings.count_cache_entries)
        templated.configure(settings.tokenizers)  # deployments counted with their own tokenizer and template
        if settings.log_to_stderr:
            install_stderr_handler(logger)
        elif logger.level == logging.NOTSET:
            # Records are INFO; without this they would stop at the root logger's usual WARNING level.
            logger.setLevel(logging.INFO)

    def model_limits(self, group: str) -> ModelLimits:
        """The routed group's limits (from the router, cached for a minute); for a comma-separated list of
        groups (LiteLLM sends the request to each), the smallest."""
        return combine(group, [self.windows.get(name) for name in listed_groups(group)])

    # --- pre-call: decide, record, trim or block ---------------------------------------------------

    def _decide_last(self) -> None:
        """Keep the plugin the last of ``litellm.callbacks``, whose pre-call and per-attempt hooks LiteLLM runs in list
        order: a guardrail (or any callback) after it changed the request after the count. The proxy loads
        ``litellm_settings.callbacks`` before the guardrails, and a fallback group's own guardrail runs in the
        attempt's hook, after the plugin's check: a masking filter there made 3,011 counted tokens 24,008 (an attack
        review). Guardrails added later (the UI, the database) are appended: the next request moves the plugin again.
        A new list, never an edit in place: LiteLLM's loop in progress keeps iterating the one it holds."""
        callbacks = litellm.callbacks
        if callbacks and callbacks[-1] is not self and any(c is self for c in callbacks):
            litellm.callbacks = [c for c in callbacks if c is not self] + [self]

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: str) -> Any:
        self._decide_last()
        if not self._app_hooked:  # once, when the proxy serves (its middleware stack is built by then)
            self._app_hooked = True
            with contextlib.suppress(Exception):
                from litellm.proxy import proxy_server

                expose(proxy_server.app, BUDGET_HEADERS)
                wrap_error_handler(proxy_server.app, ProxyException, self._restore_block)
        if not isinstance(data, dict):
            return None
        note_a2a_caller(call_type, user_api_key_dict)  # an A2A request: its bridge's calls are this caller's
        shape = SHAPES.for_call_type(call_type)
        if shape is None and call_type == PASS_THROUGH_CALL_TYPE:
            try:  # a pass-through body in a format we read is budgeted as that format
                shape = SHAPES.detect(data)
            except Exception as exc:  # a bug of ours, on whatever the client sent: the fail mode, never a 500
                return self._internal_failure(exc, data, "litellm_metadata", self.settings.base_fail_mode, None)
        # a pass-through: the model the URL names (the provider serves it whatever the body's ``model`` says: a body
        # naming gpt-4.1 had its 1M window checked), its window the provider's own (``route_guard.pass_through_model``)
        group, in_map = pass_through_model(call_type, shape, data.get("model"), _serves_pass_through) \
            or (data.get("model"), None)
        if shape is None:
            if refused_call(call_type) and self.settings.unknown_routes == "block":  # proxy.route_guard
                raise BudgetHookHTTPError(unread_route_error(call_type))
            return None  # not an LLM input we budget (files, batches, images, audio...): untouched
        if not isinstance(group, str) or not group:
            return None  # no model group: the proxy itself answers this one
        # a 48 KB name: refused before anything reads it; a client's retry_policy, in any mode (``hookless_retries``)
        if (refused := model_name_error(group) or hookless_retry_error(data, call_type)) is not None:
            raise BudgetHookHTTPError(refused)
        key = shape.metadata_key
        if self._already_decided(data, key):
            return None  # the plugin listed twice in callbacks: the second entry must not decide again
        request: BudgetRequest | None = None
        decision: Decision | None = None
        try:
            caller = caller_of(user_api_key_dict)
            self.teams.note(user_api_key_dict)
            limits, calibration = await self._learned(
                self.model_limits(group) if in_map is None else limits_from_router(None, in_map), caller)
            chain = await self.chains.lookup(shape, data)  # what the provider holds for previous_response_id
            request = labelled(_router(), BudgetRequest(shape=shape, body=data, model_group=group, limits=limits,
                               caller=caller, client=read_client_input(data, key), calibration=calibration,
                               held=(chain.held or 0) if chain is not None else 0))
            budget_request = request

            def decide_and_snapshot() -> tuple[BudgetRequest, Decision, dict[str, Any], int]:  # for attempts: what
                body = litellm_rewrite(shape, data, limits)  # it forwards, and about how many bytes that holds
                decided_on = budget_request if body is data else replace(budget_request, body=body)
                made = decide(decided_on, self.settings)
                forwarded = content_snapshot(compared_fields(shape), made.request)
                return decided_on, made, forwarded, held_size(forwarded, data)
            decided_on, made, content, size = await self.offloader.run(decide_and_snapshot, data,
                                                                       weight=decision_weight(limits))
            request = decided_on
            decision, snapped = made, made.request
            if decision.wants_provider_count:
                decision = await self._with_provider_count(request, decision)
            if decision.action == "skipped":  # undecided, but a fallback to a group that decides may follow
                return forwarded_body(data, data, key, call_type)
            decision = chained(decision, chain)
            record = annotated(DecisionRecord.build(decision, request), chain, data)
        except Exception as exc:  # the plugin's own failure: never blame the client for it
            fail_mode = exc.fail_mode if isinstance(exc, InternalFailure) else \
                decision.resolved.policy.fail_mode if decision is not None else self.settings.base_fail_mode
            self._internal_failure(exc, data, key, fail_mode, request)  # raises when it fails closed
            return forwarded_body(data, data, key, call_type)  # fail open: forwarded as it is
        marker = attach_record(data, key, record)
        # with the metadata just attached (the record, spend_logs_metadata), and the gateway's own retry_policy
        forwarded = forwarded_body(data, decision.request, key, call_type)
        if decision.action == "blocked":  # a refused request makes no attempt: nothing kept for attempts
            self.records.remember(data.get("litellm_call_id"), record)
            # the headers ride on the error itself: routes that answer errors their own way (Anthropic's
            # /v1/messages, /completions) never ask the response-headers hook
            spec = block_error(decision, shape)
            raise BudgetHookHTTPError(spec, headers=record.headers(), shape=shape,
                                      streamed=streamed_answer(shape, data, call_type, spec))
        if decision.request is not snapped:  # a provider's count decided it again
            content = content_snapshot(compared_fields(shape), decision.request)
            size = held_size(content, data)
        # whether the request quotes overflow wording is asked only if a provider's error comes
        # (``outcomes.quoted``): of the request as it is now, two levels deep (LiteLLM may pop a field it
        # forwards from the body afterwards)
        self.records.remember(data.get("litellm_call_id"), record,
                              Decided(marker, replace(request, body={}), decision.limits,
                                      decision.resolved.policy.fail_mode, content, call_type=str(call_type),
                                      chain=chain.held if chain is not None else None,
                                      prompt_id=data.get("prompt_id"), reserve=reserved_output(decision)),
                              snapshot(data), size)
        return forwarded

    async def _advertise(self, path: str, payload: Any, endpoint_args: Mapping[str, Any]) -> Any:
        """``/v1/models`` and ``/model/info`` with each group's window as this caller's policy gives it."""
        key, adverts = endpoint_args.get("user_api_key_dict"), {}
        for group in groups_in(path, payload):
            limits, _ = await self._learned(self.model_limits(group), caller_of(key))
            adverts[group] = advertised(group, limits, caller_of(key), self.settings)
        return advertise(path, payload, adverts.get, admin=is_proxy_admin(key))

    async def _learned(self, limits: ModelLimits, caller: Caller) -> tuple[ModelLimits, Calibration]:
        """The limits with the smallest window providers' errors named for these deployments, and the
        correction learned from their bills for this caller."""
        teacher = teacher_of(caller.key_hash, caller.team_id)
        correction, window = await self.learning.lookup(limits.deployment_ids, teacher)
        return with_learned_window(limits, window), Calibration(correction=correction)

    async def _with_provider_count(self, request: BudgetRequest, decision: Decision) -> Decision:
        """Decided again on the deployments' own count (``provider_count.decide_with_provider_count``)."""
        groups = dict.fromkeys((request.model_group, *request.limits.routed_groups))  # a router alias too
        deployments = [d for group in groups for d in deployments_of(_router(), group)]
        return await decide_with_provider_count(self, request, decision, deployments)

    async def _metrics_endpoint(self) -> Any:
        from fastapi.responses import PlainTextResponse

        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4")

    def _restore_block(self, exc: Any) -> Any:
        """A streamed block is answered as its API's own failure events (a streamed ``/v1/responses`` call:
        ``response.failed``, what Codex compacts on). A route that rebuilt our block as a plain
        ``ProxyException`` (``error.code`` = the HTTP status, no ``x-budget-*`` headers) is rendered as our
        own error again: the block's code and headers back (``app_hooks.wrap_error_handler``)."""
        if isinstance(exc, BudgetHookHTTPError):
            return streamed_block(exc) if exc.streamed is not None else None
        if not isinstance(getattr(exc, "headers", None), dict):
            return None
        overflow = self.records.overflow(exc.headers.get("x-litellm-call-id"))  # the provider's, rewritten
        if overflow is not None:
            found = self.records.find(exc.headers.get("x-litellm-call-id"))
            answer = BudgetHookHTTPError(overflow.spec, headers={**exc.headers, **(found.headers() if found else {})},
                                         shape=overflow.shape, streamed=overflow.streamed)
            return streamed_block(answer) if answer.streamed is not None else answer
        record = self.records.find(exc.headers.get("x-litellm-call-id"))
        if record is None or record.block is None or record.action != "blocked":
            return None
        code = str(record.block.get("code") or "context_length_exceeded")
        status = int(exc.code) if str(exc.code).isdigit() else 400
        restored = BudgetHookHTTPError(ErrorSpec(status, exc.message, exc.type, code, exc.param),
                                       headers={**exc.headers, **record.headers()})
        restored.provider_specific_fields = exc.provider_specific_fields
        return restored

    def _already_decided(self, data: Mapping[str, Any], key: str) -> bool:
        """True when this very body already went through this plugin: its metadata holds the record object
        we attached (an identity no client can forge; a client may well reuse a call id)."""
        decided = self.records.decided(data.get("litellm_call_id"))
        metadata = data.get(key)
        return decided is not None and isinstance(metadata, Mapping) and metadata.get(SETTINGS_NAME) is decided.marker

    # --- every attempt: the deployment the router chose (retries, fallbacks, aliases, wildcards) -----

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """Check the request once more against the deployment this attempt goes to (``attempts.recheck``)."""
        self._decide_last()
        try:
            return await recheck(self, kwargs, call_type, router=_router, error_type=BudgetHookHTTPError,
                                 overflow_error=_overflow_error)
        except Exception as refusal:  # raised, unless LiteLLM would send the call again without this hook
            return lasting_refusal(kwargs, call_type, refusal, retries=litellm.num_retries,
                                   router_call=getattr(litellm.utils, "_is_litellm_router_call", None),
                                   client_error=_overflow_error)

    def _internal_failure(self, exc: Exception, data: dict, key: str, fail_mode: str,
                          request: BudgetRequest | None) -> None:
        record = log_internal(exc, data, fail_mode, request, _router())
        try:
            self.records.remember(data.get("litellm_call_id"), record)
            attach_record(data, key, record)
        except Exception:  # pragma: no cover - metadata of an unexpected shape; forwarding matters more
            pass
        if fail_mode == "closed":
            raise BudgetHookHTTPError(internal_error(data.get("litellm_call_id"))) from None
        return  # fail open: forward untouched

    # --- responses: headers and one log record per request -----------------------------------------

    async def async_post_call_failure_hook(self, request_data: dict, original_exception: Exception,
                                           user_api_key_dict: Any, traceback_str: Any = None) -> None:
        """A provider's overflow on a forwarded call is answered as a block is (``outcomes.note_overflow``). The
        call is over: what it kept of its request for attempts and errors is let go (``records.release``)."""
        await note_overflow(self, request_data, original_exception, ours=BudgetHookHTTPError)
        if isinstance(request_data, Mapping):
            self.records.release(request_data.get("litellm_call_id"))

    async def async_post_call_response_headers_hook(self, data: dict, user_api_key_dict: Any, response: Any,
                                                    request_headers: Any = None, litellm_call_info: Any = None
                                                    ) -> dict[str, str] | None:
        record = self.records.find(data.get("litellm_call_id")) if isinstance(data, Mapping) else None
        return record.headers() if record else None

    async def async_post_call_success_hook(self, data: dict, user_api_key_dict: Any, response: Any) -> None:
        await remember_chain(self, "success", response)  # what the client gets (``outcomes.watch_chain``)

    def async_post_call_streaming_iterator_hook(self, user_api_key_dict: Any, response: Any, request_data: dict) -> Any:
        return watch_chain(self, response, current_route())  # a Responses stream watched; any other as it is

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._log_outcome("success", kwargs, response_obj)

    async def async_log_failure_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._log_outcome("failure", kwargs, response_obj)

    async def _log_outcome(self, outcome: str, kwargs: dict, response_obj: Any) -> None:
        await log_outcome(self, outcome, kwargs, response_obj, ours=BudgetHookHTTPError, router=_router())


#: The instance the proxy loads: ``litellm_settings: callbacks: budget_hook.proxy.plugin``.
plugin = BudgetHookPlugin()
