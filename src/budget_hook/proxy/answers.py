"""How a refusal is answered, in the terms of the shape it refuses (pure; no LiteLLM).

The adapter raises every refusal as one exception type; what its body looks like is decided here, from the
shape: ``error_object`` is the shape's own error object (``Shape.error_body``: Gemini's
``{"code", "message", "status"}``), or None for OpenAI's; ``streamed_answer`` is, for a streamed call
whose API reports failures as events (a streamed ``/v1/responses`` call: ``response.failed``, what Codex
compacts on), the events to answer with, from the call id the proxy gives the error. A new shape with
its own error format declares ``error_body``; the adapter does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..shapes import Shape
from .errors import ErrorSpec, block_model_group, responses_failed_events
from .route_guard import streams_responses


def error_object(shape: Shape | None, spec: ErrorSpec) -> dict[str, Any] | None:
    """The shape's own error object for a refusal (a 400), or None: OpenAI's."""
    if shape is None or shape.error_body is None or spec.status_code != 400:
        return None
    return shape.error_body(spec.status_code, spec.message, spec.code)


def streamed_answer(shape: Shape, data: Mapping[str, Any], call_type: Any,
                    spec: ErrorSpec) -> Callable[[Any], str] | None:
    """For a streamed call answered with failure events: call id -> the SSE text; else None."""
    if not streams_responses(shape, data, call_type):
        return None
    model = block_model_group({"budget_hook": dict(spec.facts)})
    return lambda call_id: responses_failed_events(call_id, spec.code, spec.message, model)
