"""The LiteLLM hook: turns LiteLLM's calls into one core call and the core's decision back into LiteLLM's terms.

This is the only module of budget_hook that imports litellm or fastapi; what it uses (record store,
client input, router windows, thread pool, error rendering) lives beside it, testable without LiteLLM.
Per request:

1. find the request's shape by LiteLLM's call type (``budget_hook.shapes``); others pass untouched;
2. build one ``BudgetRequest``: the body, the caller (team, key, admin metadata), the client's input,
   the routed group's limits (minimum window over its deployments, from the router);
3. ``pipeline.decide`` it (large requests in a bounded thread pool);
4. keep the ``DecisionRecord`` by call id, put it in the request's metadata (and
   ``spend_logs_metadata``, which reaches every LiteLLM logging integration), then forward the body
   (trimmed or not) or raise the block as an HTTP 400;
5. answer ``x-budget-*`` headers and emit one JSON record per request from the success or failure
   callback, with the provider's ``prompt_tokens`` next to the estimate.

At start-up, inside the proxy: the model listings (``/v1/models``, ``/model/info``, ``/model_group/info``)
advertise each caller's budget (``proxy.model_info``), ``GET /budget_hook/metrics`` is added, and the counters
join prometheus_client's registry (LiteLLM's ``/metrics``) when it is installed.

Why hooks are defined on the class itself: the proxy only calls ``async_pre_call_hook`` and
``async_post_call_response_headers_hook`` when they are in ``vars(type(callback))``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import sys
import traceback
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import ProxyException

from ..budget import ModelLimits
from ..counting.cache import COUNT_CACHE
from ..errors import PolicyError
from ..learning import Calibration, quotes_overflow, teacher_of
from ..pipeline import BudgetRequest, Decision, DecisionRecord, InternalFailure, advertised, decide, estimate
from ..pipeline.record import BUDGET_HEADERS
from ..pipeline.request import Caller
from ..policy import PluginSettings, load_settings
from ..shapes import PASS_THROUGH_CALL_TYPE, SHAPES
from .app_hooks import expose, wrap_error_handler, wrap_routes
from .client_input import SETTINGS_NAME, caller_of, read_client_input
from .errors import ErrorSpec, block_error, internal_error, responses_failed_events, unread_route_error
from .feedback import deployment_id, learn_from_error, learn_from_usage, provider_prompt_tokens
from .labels import group_labels, labelled
from .loglines import bounded_line, describe_error, install_stderr_handler
from .metrics import Metrics, register_with_prometheus
from .model_info import ROUTES as MODEL_INFO_ROUTES
from .model_info import advertise, groups_in, is_proxy_admin
from .offload import Offloader
from .provider_count import ProviderCounter, group_target
from .records import RecordStore, attach_record
from .route_guard import install_path_context, pass_through_group, refused_call, streams_responses, undecided_attempt
from .shared import SharedLearning, litellm_redis
from .windows import (
    WindowCache,
    combine,
    configured_window,
    covers,
    deployment_limits,
    deployments_of,
    limits_from_router,
    listed_groups,
    model_name_error,
    with_learned_window,
)

logger = logging.getLogger("budget_hook")


class BudgetHookHTTPError(ProxyException):
    """An error the proxy turns into a clean JSON error on every endpoint, streaming included.

    A ``ProxyException``: the proxy passes it through as it is (an ``HTTPException`` it rebuilds, writing
    the HTTP status into ``error.code``), answers with its status, logs it as a client error (one line, no
    traceback) and reports it to failure callbacks. ``code`` stays the HTTP status the proxy reads;
    ``to_dict`` writes the provider's own ``error.code`` (``context_length_exceeded``), which OpenAI's SDK,
    openai-agents and pydantic-ai read to recognise an overflow.
    """

    def __init__(self, spec: ErrorSpec, headers: Mapping[str, str] | None = None) -> None:
        facts = {"code": spec.code, **({"budget_hook": dict(spec.facts)} if spec.facts else {})}
        super().__init__(message=spec.message, type=spec.type, param=spec.param, code=spec.status_code,
                         openai_code=spec.code, provider_specific_fields=facts,
                         headers=dict(headers) if headers else None)
        self.status_code = spec.status_code
        self.error_code = spec.code
        #: a streamed /v1/responses call: answered as a ``response.failed`` event (``responses_failed_stream``)
        self.streamed_responses = False
        #: a Gemini-native route: answered in Gemini's error format
        self.gemini = False
        detail: dict[str, Any] = {"error": spec.message, "type": spec.type, "code": spec.code}
        if spec.param:
            detail["param"] = spec.param
        if spec.facts:
            detail["budget_hook"] = dict(spec.facts)
        self.detail = detail

    def to_dict(self) -> dict:
        if self.gemini:  # Gemini's own error object: what google-genai's APIError reads (code, status)
            return {"code": self.status_code, "message": self.message, "status": "INVALID_ARGUMENT",
                    "details": [{"reason": self.error_code}]}
        return {**super().to_dict(), "code": self.error_code}


def responses_failed_stream(error: BudgetHookHTTPError) -> Any:
    """A streamed ``/v1/responses`` block as the Responses API's own failure events (``errors``)."""
    from fastapi.responses import StreamingResponse

    body = responses_failed_events(error.headers.get("x-litellm-call-id"), error.error_code, error.message)
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


def _router() -> Any:
    try:
        from litellm.proxy import proxy_server  # the router exists only once the proxy has started

        return proxy_server.llm_router
    except Exception:  # pragma: no cover - the plugin used outside the proxy
        return None


def _router_limits(group: str) -> ModelLimits:
    return limits_from_router(_router(), group)


def _router_deployment_limits(key: str) -> ModelLimits | None:
    group, _, deployment_id = key.partition("\x00")
    return deployment_limits(_router(), group, deployment_id)


@dataclass(frozen=True)
class _Decided:
    """What the pre-call decision leaves for the attempts: the record object attached to the body (an
    identity no client can forge), the request without its body, the limits and fail mode it used, and
    the content fields it forwarded (by reference: an attempt on the same objects needs no new count).
    Kept until the request succeeds, or for ``failed_seconds`` after a failure (a fallback may follow)."""

    marker: dict[str, Any]
    request: BudgetRequest
    limits: ModelLimits
    fail_mode: str
    content: Mapping[str, Any]


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
        self.records: RecordStore[DecisionRecord] = RecordStore()
        #: call id -> what the pre-call decision needs to be checked again per attempt, and the record object
        #: attached to its body (see ``_already_decided``)
        self._decided: OrderedDict[str, _Decided] = OrderedDict()
        self.deployment_windows: WindowCache[ModelLimits | None] = WindowCache(_router_deployment_limits)
        self.offloader = Offloader(threads=settings.counting_threads, offload_chars=settings.offload_chars)
        self.learning = SharedLearning(settings.learning, redis=lambda: litellm_redis(_router(), litellm))
        self.metrics = Metrics()
        register_with_prometheus(self.metrics)  # LiteLLM's /metrics, when prometheus_client is installed
        self.provider_counter = ProviderCounter()
        self._app_hooked = False
        server = sys.modules.get("litellm.proxy.proxy_server")  # inside the proxy: its routes exist by now
        if server is not None:
            with contextlib.suppress(Exception):
                _add_routes(server.app, self)
        COUNT_CACHE.configure(settings.count_cache_entries)
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

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: str) -> Any:
        if not self._app_hooked:  # once, when the proxy serves (its middleware stack is built by then)
            self._app_hooked = True
            with contextlib.suppress(Exception):
                from litellm.proxy import proxy_server

                expose(proxy_server.app, BUDGET_HEADERS)
                wrap_error_handler(proxy_server.app, ProxyException, self._restore_block)
        if not isinstance(data, dict):
            return None
        shape = SHAPES.for_call_type(call_type)
        if shape is None and call_type == PASS_THROUGH_CALL_TYPE:
            shape = SHAPES.detect(data)  # a pass-through body in a format we read is budgeted as that format
        group = data.get("model") or pass_through_group(call_type, shape)  # Gemini pass-through: in the URL
        if shape is None:
            if refused_call(call_type) and self.settings.unknown_routes == "block":  # proxy.route_guard
                raise BudgetHookHTTPError(unread_route_error(call_type))
            return None  # not an LLM input we budget (files, batches, images, audio...): untouched
        if not isinstance(group, str) or not group:
            return None  # no model group: the proxy itself answers this one
        if (bad_name := model_name_error(group)) is not None:  # a 48 KB name: refused before anything reads it
            raise BudgetHookHTTPError(bad_name)
        key = shape.metadata_key
        if self._already_decided(data, key):
            return None  # the plugin listed twice in callbacks: the second entry must not decide again
        request: BudgetRequest | None = None
        decision: Decision | None = None
        try:
            caller = caller_of(user_api_key_dict)
            limits, calibration = await self._learned(self.model_limits(group), caller)
            request = labelled(_router(), BudgetRequest(shape=shape, body=data, model_group=group, limits=limits,
                               caller=caller, client=read_client_input(data, key), calibration=calibration))
            budget_request = request
            # and whether the request quotes overflow wording anywhere (keys, metadata, headers): a provider
            # error that echoes it back must teach nothing
            decided = await self.offloader.run(lambda: (decide(budget_request, self.settings), quotes_overflow(data)),
                                               data)
            decision, quoted = decided[0], decided[1]
            if decision.wants_provider_count:
                decision = await self._with_provider_count(request, decision)
            if decision.action == "skipped":
                return None
            record = DecisionRecord.build(decision, request, quotes_overflow=quoted)
        except Exception as exc:  # the plugin's own failure: never blame the client for it
            if isinstance(exc, InternalFailure):
                fail_mode = exc.fail_mode
            elif decision is not None:
                fail_mode = decision.resolved.policy.fail_mode
            else:
                fail_mode = self.settings.base_fail_mode
            return self._internal_failure(exc, data, key, fail_mode, request)
        self.records.remember(data.get("litellm_call_id"), record)
        marker = attach_record(data, key, record)
        # the trimmed copy carries the metadata just attached (the record, and spend_logs_metadata)
        forwarded = data if decision.request is data else {**decision.request, key: data[key]}
        if decision.action != "blocked":  # a refused request makes no attempt
            content = {f: forwarded.get(f) for f in shape.content_fields}
            self._mark_decided(data, _Decided(marker, replace(request, body={}), decision.limits,
                                              decision.resolved.policy.fail_mode, content))
        if decision.action == "blocked":
            # the headers ride on the error itself: routes that answer errors their own way (Anthropic's
            # /v1/messages, /completions) never ask the response-headers hook
            error = BudgetHookHTTPError(block_error(decision, shape), headers=record.headers())
            error.streamed_responses = streams_responses(shape, data, call_type)
            error.gemini = shape.name == "gemini" and error.status_code == 400
            raise error
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
        """The estimate lies within its measured error of the budget: ask the deployment's own counter and
        decide again on its count (a timeout or an error leaves the estimate's decision, noted)."""
        groups = dict.fromkeys((request.model_group, *request.limits.routed_groups))  # a router alias too
        target = group_target([d for group in groups for d in deployments_of(_router(), group)], request.shape.name)
        calibration = request.calibration
        if target is None:
            note = f"no token counting endpoint for {request.shape.name} requests to this group's deployments"
            return replace(decision, count={**(decision.count or {}), "provider": {"note": note}})
        timeout = decision.resolved.policy.provider_count_timeout_ms / 1000
        tokens, note = await self.provider_counter.count(target, request.body, timeout)
        if tokens is None:
            calibration = replace(calibration, provider_note=note)
        else:
            ours = await self.offloader.run(lambda: estimate(request), request.body)
            calibration = replace(calibration, provider_tokens=tokens, provider_estimate=max(1, ours),
                                  provider_note=note)
        again = replace(request, calibration=calibration)
        return await self.offloader.run(lambda: decide(again, self.settings), request.body)

    async def _metrics_endpoint(self) -> Any:
        from fastapi.responses import PlainTextResponse

        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4")

    def _restore_block(self, exc: Any) -> Any:
        """A streamed ``/v1/responses`` block is answered as the Responses API's own ``response.failed``
        event (what Codex compacts on). A route that rebuilt our block as a plain ``ProxyException``
        (``error.code`` = the HTTP status, no ``x-budget-*`` headers) gets the code and headers back."""
        if isinstance(exc, BudgetHookHTTPError):
            return responses_failed_stream(exc) if exc.streamed_responses else None
        if not isinstance(getattr(exc, "headers", None), dict):
            return None
        record = self.records.find(exc.headers.get("x-litellm-call-id"))
        if record is None or record.block is None or record.action != "blocked":
            return None
        code = str(record.block.get("code") or "context_length_exceeded")
        exc.headers.update(record.headers())
        exc.to_dict = lambda: {**ProxyException.to_dict(exc), "code": code}
        return None

    def _already_decided(self, data: Mapping[str, Any], key: str) -> bool:
        """True when this very body already went through this plugin: its metadata holds the record object
        we attached (an identity no client can forge; a client may well reuse a call id)."""
        call_id = data.get("litellm_call_id")
        decided = self._decided.get(call_id) if isinstance(call_id, str) else None
        metadata = data.get(key)
        return decided is not None and isinstance(metadata, Mapping) and metadata.get(SETTINGS_NAME) is decided.marker

    def _mark_decided(self, data: Mapping[str, Any], decided: _Decided) -> None:
        call_id = data.get("litellm_call_id")
        if isinstance(call_id, str):
            self._decided[call_id] = decided
            while len(self._decided) > self.records.in_flight:
                self._decided.popitem(last=False)

    # --- every attempt: the deployment the router chose (retries, fallbacks, aliases, wildcards) -----

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict[str, Any] | None:
        """Check the request once more against the deployment this attempt goes to.

        The pre-call hook budgets against the group the client named; the router may then send the same body
        to another deployment: a retry, a fallback to another group, an alias or wildcard resolved later.
        When the attempt's deployment has the window the first decision used (and the body is the one we
        forwarded) the first decision stands; otherwise the attempt is decided again against its own window
        and policy: forwarded as is, trimmed, or refused with a context-window error the router understands.
        """
        shape = SHAPES.for_call_type(getattr(call_type, "value", call_type))
        call_id = kwargs.get("litellm_call_id")
        decided = self._decided.get(call_id) if isinstance(call_id, str) else None
        if shape is None or decided is None:  # a router pass-through, a route that skips the pre-call hook
            return await undecided_attempt(self, kwargs, getattr(call_type, "value", call_type), BudgetHookHTTPError)
        try:
            attempt = self._attempt_limits(kwargs)
            if attempt is None:
                return None
            group, limits = attempt
            same_content = all(kwargs.get(f) is decided.content.get(f) for f in shape.content_fields)
            if same_content and covers(limits, decided.limits):
                return None  # nothing differs: the first decision holds for this deployment
            # in the attempt's own format: LiteLLM may have translated the body on the way (a /v1/messages call to
            # an OpenAI deployment reaches it as a Responses call)
            request = labelled(_router(), replace(decided.request, shape=shape, body=kwargs, model_group=group,
                                                  limits=limits))
            decision = await self.offloader.run(lambda: decide(request, self.settings), kwargs)
        except Exception as exc:  # the plugin's own failure, per the fail mode of the first decision
            fail_mode = decided.fail_mode
            self._log_internal(exc, kwargs, fail_mode, decided.request)
            if fail_mode == "closed":
                raise BudgetHookHTTPError(internal_error(call_id)) from None
            return None
        self._record_attempt(call_id, decision.model_group, decision)
        if decision.action == "blocked":
            spec = block_error(decision, shape)
            raise litellm.ContextWindowExceededError(message=spec.message, model=str(kwargs.get("model")),
                                                     llm_provider="budget_hook")
        return None if decision.request is kwargs else dict(decision.request)

    def _attempt_limits(self, kwargs: Mapping[str, Any]) -> tuple[str, ModelLimits] | None:
        """The group and limits of the deployment this attempt goes to (from the router's own metadata)."""
        for key in ("metadata", "litellm_metadata"):
            metadata = kwargs.get(key)
            if not isinstance(metadata, Mapping) or not isinstance(metadata.get("model_info"), Mapping):
                continue
            deployment_id = metadata["model_info"].get("id")
            group = metadata.get("deployment_model_name") or metadata.get("model_group")
            if isinstance(deployment_id, str) and isinstance(group, str):
                limits = self.deployment_windows.get(f"{group}\x00{deployment_id}")
                # a deployment the router no longer lists: the smallest window of its group
                limits = limits if limits is not None else self.model_limits(group)
                window = self.learning.window([deployment_id]) if self.settings.learning.enabled else None
                return group, with_learned_window(limits, window)
        return None

    def _record_attempt(self, call_id: Any, group: str, decision: Decision) -> None:
        record = self.records.find(call_id)
        if record is None:
            return
        attempt = {"model_group": group, "window": decision.limits.window, "action": decision.action,
                   "tokens_before": decision.tokens_before, "tokens_after": decision.tokens_after}
        self.records.remember(call_id, dataclasses.replace(record, attempts=(*record.attempts, attempt)[-10:]))

    def _log_internal(self, exc: Exception, data: Mapping[str, Any], fail_mode: str,
                      request: BudgetRequest | None = None) -> DecisionRecord:
        cause = exc.cause if isinstance(exc, InternalFailure) else exc
        record = DecisionRecord.failure(model_group=group_labels(_router(), str(data.get("model")))[0]
                                        or data.get("model"), error=f"{type(cause).__name__}: {cause}",
                                        fail_mode=fail_mode, request=request)
        logger.critical(json.dumps({"event": "budget_hook.internal_error", "call_id": data.get("litellm_call_id"),
                                    **record.as_dict(),
                                    "traceback": "".join(traceback.format_exception(cause, limit=8))}, default=str))
        return record

    def _internal_failure(self, exc: Exception, data: dict, key: str, fail_mode: str,
                          request: BudgetRequest | None) -> None:
        record = self._log_internal(exc, data, fail_mode, request)
        try:
            self.records.remember(data.get("litellm_call_id"), record)
            attach_record(data, key, record)
        except Exception:  # pragma: no cover - metadata of an unexpected shape; forwarding matters more
            pass
        if fail_mode == "closed":
            raise BudgetHookHTTPError(internal_error(data.get("litellm_call_id"))) from None
        return  # fail open: forward untouched

    # --- responses: headers and one log record per request -----------------------------------------

    async def async_post_call_response_headers_hook(self, data: dict, user_api_key_dict: Any, response: Any,
                                                    request_headers: Any = None, litellm_call_info: Any = None
                                                    ) -> dict[str, str] | None:
        record = self.records.find(data.get("litellm_call_id")) if isinstance(data, Mapping) else None
        return record.headers() if record else None

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._log_outcome("success", kwargs, response_obj)

    async def async_log_failure_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        await self._log_outcome("failure", kwargs, response_obj)

    def _purge_later(self, call_id: Any) -> None:
        """Failed records, and what a failed request left for its attempts, leave after ``failed_seconds``
        even when no other request comes (a retry or fallback comes within that time)."""
        def purge() -> None:
            self.records.purge()
            if isinstance(call_id, str) and self.records.find(call_id) is None:
                self._decided.pop(call_id, None)
        with contextlib.suppress(RuntimeError):  # no running loop: the next failure purges
            asyncio.get_running_loop().call_later(self.records.failed_seconds + 1.0, purge)

    async def _log_outcome(self, outcome: str, kwargs: dict, response_obj: Any) -> None:
        try:
            call_id = kwargs.get("litellm_call_id")
            record = self.records.settle(call_id, outcome)
            if outcome == "success" and isinstance(call_id, str):
                self._decided.pop(call_id, None)
            if record is None:
                return  # not a request this plugin decided on
            billed = provider_prompt_tokens(response_obj, kwargs) if outcome == "success" else None
            self.metrics.observe(record, outcome, billed)
            decision = record.as_dict()
            entry: dict[str, Any] = {
                "event": "budget_hook.decision",
                "outcome": outcome,
                "call_id": call_id,
                "model_group": record.model_group, "team_id": record.team_id, "team_alias": record.team_alias,
                "key_alias": record.key_alias,
                "decision": {k: v for k, v in decision.items() if k not in ("team_id", "team_alias", "key_alias")},
            }
            if outcome == "success":
                entry.update(provider_prompt_tokens=billed, estimated_prompt_tokens=record.tokens_after)
                learned = await learn_from_usage(self.learning, kwargs, record, billed)
            else:
                entry["error"] = describe_error(kwargs.get("exception"), with_text=record.log_content)
                learned = await learn_from_error(self.learning, kwargs, record, ours=BudgetHookHTTPError,
                                                 configured=configured_window(_router(), deployment_id(kwargs)))
                self._purge_later(call_id)
            if learned is not None:
                entry["learned"] = learned
            logger.info(bounded_line(entry))
        except Exception:  # a logging problem must never affect the response
            logger.exception("budget_hook: could not write the decision record")


#: The instance the proxy loads: ``litellm_settings: callbacks: budget_hook.proxy.plugin``.
plugin = BudgetHookPlugin()
