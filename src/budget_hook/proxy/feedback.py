"""What provider answers teach the gateway: the usage of a success, the overflow error of a failure.

Contract: ``provider_prompt_tokens(response, kwargs)`` is the input the provider billed (or None);
``learn_from_usage`` / ``learn_from_error`` feed ``SharedLearning`` with what one response taught, for the
deployment that answered (``deployment_id``), and return what was learned (or refused, and why) for the
log record, or None. Every ratio carries its teacher (``DecisionRecord.teacher``, a hash of the caller's
key). What is trusted, and why:

* a success's billed input: written by the provider. It teaches a ratio (not from requests with
  server-side content or a mocked answer, ``DecisionRecord.learnable``; nothing from a cached answer, billed to
  whichever deployment first served it; not from attempts the router sent elsewhere; not from usage LiteLLM
  may have computed itself, an OpenAI-format stream without ``include_usage``), and the deployment's *served
  floor*: its window is at least that (``DecisionRecord.proves_window``: not a batch of inputs, billed as their
  sum, nor a mocked answer);
* nothing from a wildcard deployment (``openai/*``: the client picks the model behind one deployment id), nor
  from a router of the client's own (``user_config``: the client picks the deployment ids);
* an overflow error: only when no part of the request quotes overflow wording
  (``DecisionRecord.quotes_overflow``: providers echo client keys and values in their 400s); when the
  prompt count it names is within ``max_sample_ratio`` of what we estimated we sent (else it is not about
  our request; an error that names no prompt count teaches no window); a window only at or above
  ``window_floor`` (served floor, ``min_window_tokens``, ``min_window_ratio`` of the configured window).
  The gateway's own refusals (``ours``) teach nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..learning import ANONYMOUS, parse_overflow
from ..pipeline import DecisionRecord
from .shared import SharedLearning


def deployment_id(kwargs: Mapping[str, Any]) -> str | None:
    """The router's id of the deployment that answered (or failed)."""
    params = kwargs.get("litellm_params")
    places = []
    if isinstance(params, Mapping):
        places += [params.get("model_info"), (params.get("metadata") or {}).get("model_info")
                   if isinstance(params.get("metadata"), Mapping) else None]
    places.append(kwargs.get("model_info"))
    for key in ("metadata", "litellm_metadata"):
        metadata = kwargs.get(key)
        if isinstance(metadata, Mapping):
            places.append(metadata.get("model_info"))
    for info in places:
        if isinstance(info, Mapping) and isinstance(info.get("id"), str) and info["id"]:
            return str(info["id"])
    standard = kwargs.get("standard_logging_object")
    if isinstance(standard, Mapping) and isinstance(standard.get("model_id"), str) and standard["model_id"]:
        return str(standard["model_id"])
    return None


def usage_from_provider(kwargs: Mapping[str, Any]) -> bool:
    """False when LiteLLM may have computed the usage itself: an OpenAI-format stream that did not ask the
    provider for usage (``stream_options.include_usage``)."""
    if not kwargs.get("stream"):
        return True
    if str(kwargs.get("call_type") or "") not in ("acompletion", "completion", "atext_completion", "text_completion"):
        return True  # Anthropic, Gemini and Responses streams carry the provider's usage
    options = kwargs.get("stream_options")
    if not isinstance(options, Mapping):
        params = kwargs.get("optional_params")
        options = params.get("stream_options") if isinstance(params, Mapping) else None
    return isinstance(options, Mapping) and bool(options.get("include_usage"))


def provider_prompt_tokens(response_obj: Any, kwargs: Mapping[str, Any]) -> int | None:
    """The input tokens the provider billed: chat ``prompt_tokens``; Anthropic's ``input_tokens`` plus its
    cache reads and writes; Responses' ``input_tokens``; else LiteLLM's standard logging object."""
    usage = response_obj.get("usage") if isinstance(response_obj, Mapping) else getattr(response_obj, "usage", None)

    def field(name: str) -> Any:
        return usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)

    if usage is not None:
        value = field("prompt_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        value = field("input_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            extra = [field("cache_creation_input_tokens"), field("cache_read_input_tokens")]
            return value + sum(v for v in extra if isinstance(v, int) and not isinstance(v, bool))
    standard = kwargs.get("standard_logging_object") or {}
    value = standard.get("prompt_tokens") if isinstance(standard, Mapping) else None
    return value if isinstance(value, int) else None


def _untrusted(record: DecisionRecord) -> bool:
    """Nothing an answer says may teach: a wildcard deployment's, or one a client's own router chose."""
    return _wildcard(record) or record.routed_by_client


def _wildcard(record: DecisionRecord) -> bool:
    """The request went to a wildcard deployment (``openai/*``): one deployment id, any model the client
    names, so nothing learned from it may apply to the next request."""
    return "*" in str(getattr(record, "metrics_group", None) or "")


async def learn_from_usage(learning: SharedLearning, kwargs: Mapping[str, Any], record: DecisionRecord,
                           billed: int | None) -> dict[str, Any] | None:
    """The provider's bill next to our estimate of what was forwarded: one ratio for its deployment, and
    proof that its window holds ``billed`` tokens."""
    deployment = deployment_id(kwargs)
    if billed is None or deployment is None or not usage_from_provider(kwargs) or _untrusted(record) \
            or kwargs.get("cache_hit"):
        return None  # a cached answer was billed to whichever deployment first served it
    if record.proves_window:  # not a batch (billed as its inputs' sum), not a mocked answer (billed by the client)
        await learning.learn_served(deployment, billed)
    if not record.learnable or record.estimate_forwarded is None or record.attempts:
        return None
    ratio = await learning.learn_ratio(deployment, record.estimate_forwarded, billed, record.teacher or ANONYMOUS)
    return None if ratio is None else {"deployment": deployment, "ratio": ratio, "teacher": record.teacher,
                                       "estimate": record.estimate_forwarded, "billed": billed}


async def learn_from_error(learning: SharedLearning, kwargs: Mapping[str, Any], record: DecisionRecord, *,
                           ours: type | tuple[type, ...] = (), configured: int | None = None) -> dict[str, Any] | None:
    """A provider's overflow error names its window (and often its count of the prompt). ``configured``:
    the window the router gives the deployment that answered."""
    exception = kwargs.get("exception")
    deployment = deployment_id(kwargs)
    if exception is None or deployment is None or isinstance(exception, ours) or record.action == "blocked":
        return None  # a block never reached a provider: its error is ours, whatever class a route rebuilt
    if record.routed_by_client:
        return None  # a deployment of the client's own router: its id is the client's to choose
    if getattr(exception, "llm_provider", None) == "budget_hook":
        return None  # our own refusal of an attempt, not the provider's
    status = getattr(exception, "status_code", None)
    if isinstance(status, int) and status not in (400, 413, 422):
        return None  # an overflow is a client error; a 5xx, 401 or 429 says nothing about the window
    overflow = parse_overflow(str(getattr(exception, "message", None) or exception))
    if overflow is None:
        return None
    learned: dict[str, Any] = {"deployment": deployment, "provider": overflow.provider, "teacher": record.teacher}
    if record.quotes_overflow:
        return {**learned, "ignored": "the request itself contains overflow wording, which a provider's error "
                                      "may quote back: nothing is learned from it"}
    if _wildcard(record):
        return {**learned, "ignored": "a wildcard deployment serves whatever model the client names: what one "
                                      "model's error says is no fact about the others"}
    estimate, prompt = record.estimate_forwarded, overflow.prompt_tokens
    if prompt is not None and estimate and not record.attempts:
        limit = learning.settings.max_sample_ratio
        if not 1 / limit <= prompt / estimate <= limit:
            return {**learned, "ignored": f"the error counts {prompt} prompt tokens where {estimate} were sent: "
                                          "it is not about this request"}
    if overflow.window is not None and record.client_beta:
        learned["ignored"] = ("the request's own headers took the place of the anthropic-beta header the deployment "
                              "sends for its window: the window it names is the request's, not the deployment's")
    elif overflow.window is not None and prompt is None:
        learned["ignored"] = ("the error names no prompt count to check against what was sent: its window is "
                              "not learned")
    elif overflow.window is not None:
        floor = learning.window_refusal(deployment, overflow.window, configured)
        if floor is not None:
            learned.update(refused_window=overflow.window, floor=floor)
        else:
            source = f"{overflow.provider} overflow error, taught by {record.teacher or ANONYMOUS}"
            await learning.learn_window(deployment, overflow.window, source, configured)
            learned["window"] = overflow.window
    if prompt is not None and estimate is not None and record.learnable and not record.attempts:
        ratio = await learning.learn_ratio(deployment, estimate, prompt, record.teacher or ANONYMOUS)
        if ratio is not None:
            learned.update(ratio=ratio, estimate=estimate, billed=prompt)
    return learned
