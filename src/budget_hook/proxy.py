"""The LiteLLM proxy adapter: the only module of budget_hook that imports litellm or fastapi.

Enable it with one line in ``litellm_config.yaml``::

    litellm_settings:
      callbacks: budget_hook.proxy.plugin

and configure it under ``callback_settings: budget_hook:`` (validated when the proxy starts: a bad key
stops start-up with a message naming it). Per request, on every LLM endpoint (``/chat/completions``,
``/v1/messages``, ``/v1/responses``, ``/completions``, ``/embeddings``), each in its own format:

1. resolve the policy (config, model group, team, key, admin-set metadata; the client may only tighten);
2. find the routed group's window: the minimum ``max_input_tokens`` over its deployments as the router
   sees them, else litellm's model map for the backend name, else the policy's default (or block);
3. decide (``decision.decide_chat`` / ``decide_inputs``; large requests in a bounded thread pool, off
   the event loop): forward as is, forward trimmed, or block with HTTP 400 ``context_length_exceeded``;
   in shadow mode forward untouched;
4. record the decision under ``metadata.budget_hook`` and ``metadata.spend_logs_metadata.budget_hook``
   (``litellm_metadata`` for ``/v1/messages`` and ``/v1/responses``)
   (so LiteLLM's standard logging payload carries it to every logging integration), answer
   ``x-budget-*`` headers, and emit one JSON record per request on the ``budget_hook`` logger from the
   success or failure callback, with the provider's ``prompt_tokens`` next to our estimate.

Why hooks are defined on the class itself: the proxy only calls ``async_pre_call_hook`` and
``async_post_call_response_headers_hook`` when they are in ``vars(type(callback))``.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import logging
import re
import sys
import time
import traceback
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Mapping
from typing import Any

import litellm
from fastapi import HTTPException
from litellm.integrations.custom_logger import CustomLogger

from .count_cache import COUNT_CACHE
from .counting import TokenCounter
from .decision import ANTHROPIC_MESSAGES, CHAT, RESPONSES, Decision, ModelLimits, decide_chat, decide_inputs
from .errors import PolicyError
from .model_limits import lookup_max_input_tokens
from .models import resolve_tokenizer
from .policy import ResolvedPolicy
from .settings import PluginSettings, load_metadata_layer, load_settings
from .trimming import message_text

logger = logging.getLogger("budget_hook")

SETTINGS_NAME = "budget_hook"
#: call type -> how its body is budgeted: a conversation shape, or the field holding independent inputs
CONVERSATION_SHAPES = {
    "acompletion": CHAT, "completion": CHAT,
    "anthropic_messages": ANTHROPIC_MESSAGES,
    "aresponses": RESPONSES, "responses": RESPONSES,
}
INPUT_FIELDS = {"atext_completion": "prompt", "text_completion": "prompt", "aembedding": "input", "embedding": "input"}
#: the request key LiteLLM reads hook metadata from, per call type (see the integration notes)
_LITELLM_METADATA_CALL_TYPES = frozenset({"anthropic_messages", "aresponses", "responses"})
CLIENT_CAP_HEADER = "x-budget-max-input-tokens"
#: decision records of requests in flight, kept until their success or failure callback runs (a stream
#: may last minutes, so no time limit; the bound only guards against callbacks that never come)
IN_FLIGHT_RECORDS = 16_384
#: after a failure a record stays this long, at most this many (a retry's success or the error's
#: headers come within seconds; a record can hold hundreds of actions, so they are not kept around)
FAILED_RECORD_SECONDS = 30.0
FAILED_RECORDS_KEPT = 1024
#: how long a model group's window is reused before asking the router again (upstream discovery and
#: model edits through the admin API change it at run time)
LIMITS_TTL_SECONDS = 60.0


def metadata_key(call_type: str) -> str:
    return "litellm_metadata" if call_type in _LITELLM_METADATA_CALL_TYPES else "metadata"


class BudgetHookHTTPError(HTTPException):
    """An error the proxy turns into a clean JSON error on every endpoint, streaming included.

    A ``fastapi.HTTPException`` subclass because that is what the proxy answers with its own status
    (a plain exception becomes a 500, which clients retry) *and* reports to failure callbacks. The
    OpenAI-style attributes are read by the proxy's error formatting.
    """

    def __init__(self, status_code: int, message: str, *, type: str, code: str, param: str | None = None,
                 facts: Mapping[str, Any] | None = None) -> None:
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        detail: dict[str, Any] = {"error": message, "type": type, "code": code}
        if param:
            detail["param"] = param
        if facts:
            detail["budget_hook"] = dict(facts)
        super().__init__(status_code=status_code, detail=detail)


class _ClientInputError(Exception):
    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(message)


def _install_stderr_handler() -> None:
    # The proxy's own logging set-up does not cover third-party loggers; without a handler an operator
    # would see nothing. One handler, once, printing the JSON record as is.
    if any(getattr(h, "_budget_hook", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._budget_hook = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


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
        self._limits_cache: dict[str, tuple[float, ModelLimits]] = {}
        self._counters: dict[tuple[str, str | None], TokenCounter] = {}
        self._records: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._failed: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
        self._offload_chars = settings.offload_chars
        self._executor = ThreadPoolExecutor(max_workers=settings.counting_threads, thread_name_prefix="budget_hook")
        atexit.register(self._executor.shutdown, wait=False, cancel_futures=True)
        # At most this many large requests queued for the pool; the rest wait without blocking the loop.
        # One semaphore per event loop: an asyncio primitive binds to the loop that first waits on it.
        self._offload_slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        COUNT_CACHE.configure(settings.count_cache_entries)
        if settings.log_to_stderr:
            _install_stderr_handler()
        elif logger.level == logging.NOTSET:
            # Records are INFO; without this they would stop at the root logger's usual WARNING level.
            logger.setLevel(logging.INFO)

    # --- pre-call: decide, record, trim or block ---------------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: str) -> Any:
        if (call_type not in CONVERSATION_SHAPES and call_type not in INPUT_FIELDS) or not isinstance(data, dict):
            return None  # not an LLM input we budget (files, batches, images, audio...): untouched
        group = data.get("model")
        if not isinstance(group, str) or not group:
            return None  # no model group: the proxy itself answers this one
        key = metadata_key(call_type)
        fail_mode = self.settings.layers.base.get("fail_mode", "open")
        try:
            limits = self.model_limits(group)
            # The operator's policy first (config, then admin metadata): it decides the mode and the
            # fail mode before any client input is read, so no client input can reach fail-open.
            resolved = self._operator_policy(user_api_key_dict, group, limits)
            fail_mode = resolved.policy.fail_mode
            if resolved.policy.mode == "off":
                return None
            try:
                resolved = resolved.with_client_cap(*_client_request(data, key))
            except _ClientInputError as exc:
                if resolved.policy.mode == "enforce":
                    raise
                resolved = resolved.with_warning(f"client input ignored in shadow mode: {exc}")
            if call_type in INPUT_FIELDS:
                decide = functools.partial(decide_inputs, data, field=INPUT_FIELDS[call_type], model_group=group,
                                           limits=limits, resolved=resolved, counter=self.counter(limits))
            else:
                decide = functools.partial(decide_chat, data, model_group=group, limits=limits, resolved=resolved,
                                           counter=self.counter(limits), shape=CONVERSATION_SHAPES[call_type])
            decision = await self._run(decide, data)
            record = self._record(decision, user_api_key_dict, data)
        except _ClientInputError as exc:
            raise BudgetHookHTTPError(400, f"budget_hook: {exc}", type="invalid_request_error",
                                      code="invalid_request", param=exc.param) from None
        except Exception as exc:  # the plugin's own failure: never blame the client for it
            return self._internal_failure(exc, data, key, fail_mode, user_api_key_dict)

        self._remember(data, record)
        self._attach(data, key, record)
        if decision.action == "blocked":
            raise self._block_error(decision, call_type)
        if decision.request is data:
            return data
        forwarded = dict(decision.request)
        forwarded[key] = data[key]
        return forwarded

    async def _run(self, decide: Callable[[], Decision], data: Mapping[str, Any]) -> Decision:
        """Small requests are decided inline (a thread hop would cost more than counting them). Large ones
        go to a bounded pool so that a 1M-token request never stalls the event loop that serves every
        other client; tiktoken releases the GIL while it encodes."""
        if self._offload_chars <= 0 or approximate_size(data, self._offload_chars) < self._offload_chars:
            return decide()
        loop = asyncio.get_running_loop()
        slots = self._offload_slots.get(loop)
        if slots is None:
            slots = self._offload_slots[loop] = asyncio.Semaphore(4 * self._executor._max_workers)
        async with slots:
            return await loop.run_in_executor(self._executor, decide)

    def _operator_policy(self, user_api_key_dict: Any, group: str, limits: ModelLimits) -> ResolvedPolicy:
        layers = self.settings.layers
        resolved = layers.resolve(
            model_group=group,
            routed_groups=limits.routed_groups,
            team_id=getattr(user_api_key_dict, "team_id", None),
            team_alias=getattr(user_api_key_dict, "team_alias", None),
            key_alias=getattr(user_api_key_dict, "key_alias", None),
            key_hash=getattr(user_api_key_dict, "token", None),
        )
        if self.settings.metadata_policy == "ignore":
            return resolved
        trust = self.settings.metadata_policy == "trust"
        for label, attribute in (("team_metadata", "team_metadata"), ("key_metadata", "metadata")):
            metadata = getattr(user_api_key_dict, attribute, None)
            if not isinstance(metadata, Mapping) or SETTINGS_NAME not in metadata:
                continue
            try:
                layer = load_metadata_layer(metadata[SETTINGS_NAME], where=f"{label}.budget_hook")
            except PolicyError as exc:
                # Broken admin metadata must not switch enforcement off: skip that layer, keep the rest.
                logger.warning(json.dumps({"event": "budget_hook.metadata_ignored", "error": str(exc),
                                           "team_id": getattr(user_api_key_dict, "team_id", None),
                                           "key_alias": getattr(user_api_key_dict, "key_alias", None)}))
                resolved = resolved.with_warning(f"{label}.budget_hook ignored: {exc}")
                continue
            resolved = layers.with_metadata(resolved, layer, label=label, trust=trust)
        return resolved

    def _remember(self, data: Mapping[str, Any], record: dict[str, Any]) -> None:
        """Keep the record by call id: headers and log callbacks read it from here, never from request
        metadata, which a client can write (a forged record would otherwise reach headers and logs)."""
        call_id = data.get("litellm_call_id")
        if not isinstance(call_id, str):
            return
        self._records[call_id] = record
        self._records.move_to_end(call_id)
        while len(self._records) > IN_FLIGHT_RECORDS:
            self._records.popitem(last=False)

    def _find(self, call_id: Any) -> dict[str, Any] | None:
        record = self._records.get(call_id)
        if record is None and call_id in self._failed:
            record = self._failed[call_id][1]
        return record

    def _settle(self, call_id: Any, outcome: str) -> dict[str, Any] | None:
        """The record for a finished call. A success is final; after a failure the record stays a little
        (a retry may still succeed, and the proxy may ask for the error's headers afterwards)."""
        record = self._records.pop(call_id, None)
        if outcome == "success":
            failed = self._failed.pop(call_id, None)
            return record if record is not None else (failed[1] if failed else None)
        now = time.monotonic()
        if record is None:
            return self._failed[call_id][1] if call_id in self._failed else None
        self._failed[call_id] = (now, record)
        while self._failed and (len(self._failed) > FAILED_RECORDS_KEPT
                                or next(iter(self._failed.values()))[0] < now - FAILED_RECORD_SECONDS):
            self._failed.popitem(last=False)
        return record

    def model_limits(self, group: str) -> ModelLimits:
        now = time.monotonic()
        cached = self._limits_cache.get(group)
        if cached and now - cached[0] < LIMITS_TTL_SECONDS:
            return cached[1]
        limits = _lookup_limits(group)
        if len(self._limits_cache) > 4096:  # bounded: group names come from clients
            self._limits_cache.clear()
        self._limits_cache[group] = (now, limits)
        return limits

    def counter(self, limits: ModelLimits) -> TokenCounter:
        key = (limits.counting_model, limits.base_model)
        counter = self._counters.get(key)
        if counter is None:
            if len(self._counters) > 1024:
                self._counters.clear()
            counter = self._counters[key] = TokenCounter.for_model(key[0], base_model=key[1])
        return counter

    def _record(self, decision: Decision, user_api_key_dict: Any, data: Mapping[str, Any]) -> dict[str, Any]:
        record = decision.as_dict()
        record["team_id"] = getattr(user_api_key_dict, "team_id", None)
        record["team_alias"] = getattr(user_api_key_dict, "team_alias", None)
        record["key_alias"] = getattr(user_api_key_dict, "key_alias", None)
        if decision.resolved.policy.log_dropped_content and decision.report and decision.report.actions:
            native = data.get("messages") if isinstance(data.get("messages"), list) else data.get("input")
            record["dropped_content"] = _touched_content(decision, native if isinstance(native, list) else [])
        return record

    @staticmethod
    def _attach(data: dict, key: str, record: dict[str, Any]) -> None:
        # A fresh metadata dict: the client's own metadata object is never mutated.
        metadata = dict(data.get(key) or {}) if isinstance(data.get(key), Mapping) else {}
        spend = dict(metadata.get("spend_logs_metadata") or {}) if isinstance(metadata.get("spend_logs_metadata"), Mapping) else {}
        spend[SETTINGS_NAME] = {k: v for k, v in record.items() if k != "dropped_content"}
        metadata["spend_logs_metadata"] = spend
        metadata[SETTINGS_NAME] = record
        data[key] = metadata

    @staticmethod
    def _block_error(decision: Decision, call_type: str) -> BudgetHookHTTPError:
        block = decision.block
        assert block is not None
        message = f"budget_hook blocked this request ({block.code}): {block.message}"
        if call_type == "anthropic_messages" and block.kind == "cannot_fit":
            # Anthropic's own wording, which Claude Code and the Anthropic SDKs' users react to.
            facts = block.facts
            message = (f"prompt is too long: {facts.get('tokens_after_trimming', decision.tokens_before)} tokens > "
                       f"{facts.get('budget')} maximum. {message}")
        return BudgetHookHTTPError(
            400,
            message,
            type="invalid_request_error",
            code=block.code,
            param=block.param or ("messages" if block.kind == "cannot_fit" else "max_tokens" if block.kind == "output_reserve" else None),
            facts=block.facts,
        )

    def _internal_failure(self, exc: Exception, data: dict, key: str, fail_mode: str, user_api_key_dict: Any):
        record = {
            "action": "error",
            "fail_mode": fail_mode,
            "model_group": data.get("model"),
            "error": f"{type(exc).__name__}: {exc}",
            "team_id": getattr(user_api_key_dict, "team_id", None),
            "team_alias": getattr(user_api_key_dict, "team_alias", None),
        }
        logger.critical(json.dumps({"event": "budget_hook.internal_error", "call_id": data.get("litellm_call_id"),
                                    **record, "traceback": traceback.format_exc(limit=8)}, default=str))
        try:
            self._remember(data, record)
            self._attach(data, key, record)
        except Exception:  # pragma: no cover - metadata of an unexpected shape; forwarding matters more
            pass
        if fail_mode == "closed":
            raise BudgetHookHTTPError(
                503,
                "budget_hook could not check this request against the model's context budget, and the gateway "
                "is configured to fail closed; retry later or contact the gateway operator "
                f"(call id {data.get('litellm_call_id')})",
                type="service_unavailable",
                code="budget_check_unavailable",
            ) from None
        return None  # fail open: forward untouched

    # --- responses: headers and one log record per request -----------------------------------------

    async def async_post_call_response_headers_hook(self, data: dict, user_api_key_dict: Any, response: Any,
                                                    request_headers: Any = None, litellm_call_info: Any = None
                                                    ) -> dict[str, str] | None:
        record = self._find(data.get("litellm_call_id")) if isinstance(data, Mapping) else None
        return decision_headers(record) if record else None

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._log_outcome("success", kwargs, response_obj)

    async def async_log_failure_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._log_outcome("failure", kwargs, response_obj)

    def _log_outcome(self, outcome: str, kwargs: dict, response_obj: Any) -> None:
        try:
            call_id = kwargs.get("litellm_call_id")
            record = self._settle(call_id, outcome)
            if record is None:
                return  # not a request this plugin decided on
            entry: dict[str, Any] = {
                "event": "budget_hook.decision",
                "outcome": outcome,
                "call_id": kwargs.get("litellm_call_id"),
                **{k: record.get(k) for k in ("model_group", "team_id", "team_alias", "key_alias")},
                "decision": {k: v for k, v in record.items() if k not in ("team_id", "team_alias", "key_alias")},
            }
            if outcome == "success":
                prompt_tokens = _provider_prompt_tokens(response_obj, kwargs)
                entry["provider_prompt_tokens"] = prompt_tokens
                entry["estimated_prompt_tokens"] = record.get("tokens_after")
            else:
                exception = kwargs.get("exception")
                entry["error"] = f"{type(exception).__name__}: {exception}"[:2000] if exception else None
            logger.info(json.dumps(entry, default=str, ensure_ascii=False))
        except Exception:  # a logging problem must never affect the response
            logger.exception("budget_hook: could not write the decision record")


# --- helpers ------------------------------------------------------------------------------------------

def _client_request(data: Mapping[str, Any], key: str) -> tuple[int | None, tuple[str, ...]]:
    """The client's stricter cap, from ``metadata.budget_hook.max_input_tokens`` or a header."""
    cap: int | None = None
    ignored: list[str] = []
    metadata = data.get(key)
    asked = metadata.get(SETTINGS_NAME) if isinstance(metadata, Mapping) else None
    if asked is not None:
        if not isinstance(asked, Mapping):
            raise _ClientInputError(f"{key}.{SETTINGS_NAME}", f"{key}.{SETTINGS_NAME} must be an object such as "
                                    f'{{"max_input_tokens": 4000}}, got {type(asked).__name__}')
        for name, value in asked.items():
            if name != "max_input_tokens":
                ignored.append(f"{key}.{SETTINGS_NAME}.{name}")
                continue
            cap = _positive_int(value, f"{key}.{SETTINGS_NAME}.max_input_tokens")
    headers = (data.get("proxy_server_request") or {}).get("headers") if isinstance(data.get("proxy_server_request"), Mapping) else None
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if str(name).lower() == CLIENT_CAP_HEADER:
                header_cap = _positive_int(value, f"header {CLIENT_CAP_HEADER}")
                cap = header_cap if cap is None else min(cap, header_cap)
    return cap, tuple(ignored)


#: request keys that carry what the model reads (metadata, headers and LiteLLM's own fields are skipped)
_CONTENT_KEYS = ("messages", "input", "prompt", "system", "instructions", "tools", "functions",
                 "response_format", "text", "tool_choice")


def approximate_size(data: Mapping[str, Any], limit: int) -> int:
    """Characters of text (and token ids) a request carries, up to ``limit``: one walk over every string
    and list in the content fields, stopping as soon as the request is known to be large."""
    total = 0
    stack: list[Any] = [data.get(key) for key in _CONTENT_KEYS]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, int):
            total += 1  # a token id
        if total >= limit:
            return total
    return total


_DECIMAL = re.compile(r"[0-9]{1,12}")


def _positive_int(value: Any, where: str) -> int:
    # ASCII digits only and a bounded length: str.isdigit() accepts "²" and int() then raises, and a
    # 5,000-digit number exceeds int()'s limit; neither may escape as anything but a 400.
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise _ClientInputError(where, f"{where} must be a positive integer (a stricter input cap), got {shown}")
    return value


def _lookup_limits(group: str) -> ModelLimits:
    """Minimum window over the group's deployments, per the router; then the model map; else unknown."""
    try:
        from litellm.proxy import proxy_server  # the router exists only once the proxy has started

        router = proxy_server.llm_router
    except Exception:  # pragma: no cover - the plugin used outside the proxy
        router = None
    deployments = []
    if router is not None:
        try:
            deployments = router.get_model_list(model_name=group) or []
        except Exception:
            deployments = []
    windows: list[tuple[int, str]] = []
    backends: list[tuple[str, str | None]] = []
    for deployment in deployments:
        params = deployment.get("litellm_params") or {}
        model_info = deployment.get("model_info") or {}
        backend = str(params.get("model") or group)
        base_model = model_info.get("base_model") or params.get("base_model")
        backends.append((backend, base_model))
        window = None
        try:
            info = router.get_router_model_info(deployment=deployment, received_model_name=group)
            window = info.get("max_input_tokens") or None
        except Exception:  # unmapped model: the router raises; fall back below
            window = None
        if not window and isinstance(model_info.get("max_input_tokens"), int):
            window = model_info["max_input_tokens"]
        if not window:
            window = lookup_max_input_tokens(base_model or backend)
        if isinstance(window, int) and window > 0:
            windows.append((window, backend))
    if not deployments:
        backends.append((group, None))
        window = lookup_max_input_tokens(group)
        if window:
            return ModelLimits(window, f"model map: {group}", group)
        return ModelLimits(None, "unknown", group)
    counting_model, base_model = _most_conservative(backends)
    routed = tuple(sorted({str(d.get("model_name")) for d in deployments if d.get("model_name")} - {group}))
    if len(windows) < len(deployments):
        # One deployment with an unknown window could be the smallest: treat the group as unknown.
        return ModelLimits(None, f"unknown for {len(deployments) - len(windows)} of {len(deployments)} deployments",
                           counting_model, base_model, len(deployments), routed)
    window, _ = min(windows)
    return ModelLimits(window, f"router: min over {len(deployments)} deployment(s)", counting_model, base_model,
                       len(deployments), routed)


def _most_conservative(backends: list[tuple[str, str | None]]) -> tuple[str, str | None]:
    """A group may mix families; count with the one whose estimate runs highest (exact counts lowest)."""
    def weight(item: tuple[str, str | None]) -> float:
        profile = resolve_tokenizer(item[0], base_model=item[1])
        return 0.0 if profile.exact else profile.safety_factor
    return max(backends, key=weight)


def _touched_content(decision: Decision, original: list) -> list[dict[str, Any]]:
    """The original text of every touched message (only with ``log_dropped_content``: it is prompt data)."""
    assert decision.report is not None
    return [
        {"index": a.index, "role": a.role, "action": a.action,
         "content": message_text(original[a.index]) or str(original[a.index].get("output", ""))}
        for a in decision.report.actions if a.index < len(original) and isinstance(original[a.index], Mapping)
    ]


def _provider_prompt_tokens(response_obj: Any, kwargs: Mapping[str, Any]) -> int | None:
    usage = getattr(response_obj, "usage", None)
    value = getattr(usage, "prompt_tokens", None) if usage is not None else None
    if isinstance(value, int):
        return value
    standard = kwargs.get("standard_logging_object") or {}
    value = standard.get("prompt_tokens") if isinstance(standard, Mapping) else None
    return value if isinstance(value, int) else None


def decision_headers(record: Mapping[str, Any]) -> dict[str, str]:
    """``x-budget-*`` response headers summarising the decision."""
    headers = {"x-budget-decision": str(record.get("action")), "x-budget-mode": str(record.get("mode", ""))}
    for name, key in (("x-budget-tokens-before", "tokens_before"), ("x-budget-tokens-after", "tokens_after"),
                      ("x-budget-window", "window")):
        if record.get(key) is not None:
            headers[name] = str(record[key])
    budget = record.get("budget")
    if isinstance(budget, Mapping) and budget.get("budget") is not None:
        headers["x-budget-input-budget"] = str(budget["budget"])
    counts = record.get("messages")
    if isinstance(counts, Mapping):
        headers["x-budget-dropped-messages"] = str(counts.get("dropped", 0))
        headers["x-budget-edited-messages"] = str(counts.get("compacted", 0) + counts.get("shortened", 0)
                                                  + counts.get("images_removed", 0))
    if record.get("method"):
        headers["x-budget-count-method"] = str(record["method"])
    return {k: v for k, v in headers.items() if v}


#: The instance the proxy loads: ``litellm_settings: callbacks: budget_hook.proxy.plugin``.
plugin = BudgetHookPlugin()
