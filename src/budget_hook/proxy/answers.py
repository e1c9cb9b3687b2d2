"""How a refusal is answered, in the terms of the shape it refuses (pure; no LiteLLM).

The adapter raises every refusal as one exception type; what its body looks like is decided here, from the
shape: ``error_object`` is the shape's own error object (``Shape.error_body``: Gemini's
``{"code", "message", "status"}``), or None for OpenAI's; ``streamed_answer`` is, for a streamed call
whose API reports failures as events (``Shape.streamed_error``: a streamed ``/v1/responses`` call's
``response.failed``, what Codex compacts on), the events to answer with, from the call id the proxy gives the
error. A new shape with its own error format declares ``error_body`` / ``streamed_error``; the adapter does
not change.

A provider's own refusal of a forwarded request as too long (``provider_overflow``: LiteLLM passes it on as
``code: "400"``, streamed as a plain HTTP 400, on Gemini's route in OpenAI's format) is answered in the same
client-recognisable form as a block (``overflow_answer``): ``context_length_exceeded``, the shape's own
sentence with the provider's numbers, its error object, and for a streamed Responses call ``response.failed``.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..learning import Overflow, parse_overflow
from ..shapes import Shape
from .errors import ErrorSpec, block_model_group
from .route_guard import streams_responses


def error_object(shape: Shape | None, spec: ErrorSpec) -> dict[str, Any] | None:
    """The shape's own error object for a refusal (a 400), or None: OpenAI's."""
    if shape is None or shape.error_body is None or spec.status_code != 400:
        return None
    return shape.error_body(spec.status_code, spec.message, spec.code)


def streamed_answer(shape: Shape, data: Mapping[str, Any], call_type: Any,
                    spec: ErrorSpec) -> Callable[[Any], str] | None:
    """For a streamed call answered with failure events: call id -> the SSE text; else None. A compaction
    (``/responses/compact``) answers in one piece even when asked to stream (``route_guard.streams_responses``)."""
    events = shape.streamed_error
    if events is None or not streams_responses(shape, data, call_type):
        return None
    model = block_model_group({"budget_hook": dict(spec.facts)})
    return lambda call_id: events(call_id, spec.code, spec.message, model)


#: how a provider's error body names an overflow (OpenAI's ``code``), read from the parsed body, never a substring
#: (a provider echoes a client's own value in its message)
_OVERFLOW_CODE = "context_length_exceeded"
#: a provider's error text longer than this is not parsed for its body's ``code``
MAX_ERROR_CHARS = 256 * 1024
#: the longest error body read as the Python dict the OpenAI SDK renders (``ast.literal_eval``: ~1 ms per 1,000
#: crafted characters on the event loop, where JSON costs microseconds); real ones are a few hundred characters
MAX_LITERAL_CHARS = 4096
#: how LiteLLM starts the message of an overflow it classified (a rebuilt error keeps only the text)
_LITELLM_OVERFLOW = "litellm.ContextWindowExceededError:"
#: the remedy of a request that continues a Responses chain the provider holds (``previous_response_id``)
CHAIN_REMEDY = ("This request continues a stored response (previous_response_id) whose history the provider holds "
                "and counts: start a new chain without previous_response_id, or compact the conversation "
                "(/v1/responses/compact) and continue from the compacted input.")


@dataclass(frozen=True)
class ProviderOverflow:
    """How a call the provider refused as too long is answered: the error, its shape, its stream events."""

    spec: ErrorSpec
    shape: Shape
    streamed: Callable[[Any], str] | None = None


def provider_overflow(exception: Any) -> Overflow | None:
    """The provider's refusal of a request as longer than its window, or None. LiteLLM's
    ``ContextWindowExceededError``, a message in a provider's overflow wording (``learning.parse_overflow``:
    anchored, so a quoted client value is not one), or a provider error whose parsed body's ``code`` is
    ``context_length_exceeded`` (OpenAI's Responses API, which LiteLLM passes on as a ``BadRequestError``)."""
    if exception is None or getattr(exception, "llm_provider", None) == "budget_hook":
        return None  # our own refusal of an attempt
    status = getattr(exception, "status_code", None)
    if isinstance(status, int) and status not in (400, 413, 422):
        return None
    text = str(getattr(exception, "message", None) or exception)
    parsed = parse_overflow(text)
    if parsed is not None:
        return parsed
    named = type(exception).__name__ == "ContextWindowExceededError" or text.startswith(_LITELLM_OVERFLOW)
    if named or error_code(exception, text) == _OVERFLOW_CODE:
        return Overflow(None, None, "provider")
    return None


def error_code(exception: Any, text: str) -> Any:
    """The ``code`` of a provider's error body: the exception's parsed ``body``, else the first ``{...}`` of its
    message as JSON (or as the Python dict the OpenAI SDK renders); None: no body."""
    body = getattr(exception, "body", None)
    if not isinstance(body, Mapping):
        start = text.find("{")
        if start < 0 or len(text) > MAX_ERROR_CHARS:
            return None
        try:
            body = json.JSONDecoder().raw_decode(text, start)[0]
        except ValueError:
            end = text.rfind("}") + 1
            if end - start > MAX_LITERAL_CHARS:
                return None  # no SDK renders an error that long; parsing it would hold the event loop
            try:
                body = ast.literal_eval(text[start:end])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return None
    if not isinstance(body, Mapping):
        return None
    inner = body.get("error")
    return inner.get("code") if isinstance(inner, Mapping) else body.get("code")


def overflow_answer(shape: Shape, overflow: Overflow, model_group: str, data: Mapping[str, Any],
                    call_type: Any) -> ProviderOverflow:
    """The client's answer to a provider overflow, in the words and format of our own block: the shape's
    sentence with the provider's numbers first (Anthropic's ``prompt is too long: N tokens > M maximum``,
    Gemini's ``The input token count (N) exceeds ...``), OpenAI's ``maximum context length`` sentence,
    ``code: context_length_exceeded``, the shape's remedy (for a Responses chain: start a new one or compact)."""
    window, prompt = overflow.window, overflow.prompt_tokens
    lead = ""
    if shape.overflow_wording is not None and window is not None and prompt is not None:
        lead = shape.overflow_wording({"tokens_after_trimming": prompt, "budget": window}, prompt) + " "
    if window is not None:
        told = f"This model's maximum context length is {window} tokens" + (
            f", and the request has {prompt} input tokens" if prompt is not None else "")
    else:
        told = "The request exceeds this model's maximum context length"
    chained = isinstance(data, Mapping) and bool(data.get("previous_response_id") or data.get("conversation"))
    remedy = CHAIN_REMEDY if chained else str(getattr(shape, "remedy", "") or "")
    message = (f"{lead}{told}: the provider refused it (context_length_exceeded), after budget_hook forwarded it "
               f"within the window the gateway knows. {remedy}").strip()
    facts: dict[str, Any] = {"model_group": model_group, "refused_by": "provider"}
    facts.update({k: v for k, v in (("window", window), ("input_tokens", prompt)) if v is not None})
    spec = ErrorSpec(400, message, "invalid_request_error", "context_length_exceeded", shape.param, facts)
    return ProviderOverflow(spec, shape, streamed_answer(shape, data, call_type, spec))
