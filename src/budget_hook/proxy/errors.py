"""The error a client gets, as plain facts (pure): status, message, type, code, param and numbers.

``block_error(decision, shape)`` renders a blocked decision in the shape's own words (Anthropic's
``prompt is too long: N tokens > M maximum`` on ``/v1/messages``) after OpenAI's, with the field at fault
named by the shape (``messages``, ``input``, ``prompt``; ``max_tokens`` / ``max_output_tokens`` when the
output allowance leaves no room). ``internal_error`` is the fail-closed answer to the plugin's own
failure. The adapter raises them as the HTTP exception LiteLLM answers with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..pipeline import Decision
from ..pipeline.bounds import prompt_parameter_remedy
from ..pipeline.record import block_param
from ..shapes import Shape


@dataclass(frozen=True)
class ErrorSpec:
    status_code: int
    message: str
    type: str
    code: str
    param: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)


def block_error(decision: Decision, shape: Shape) -> ErrorSpec:
    block = decision.block
    assert block is not None
    message = f"budget_hook blocked this request ({block.code}): {block.message}"
    if block.kind == "cannot_fit" and shape.overflow_wording is not None:
        message = f"{shape.overflow_wording(block.facts, decision.tokens_before)} {message}"
    elif block.kind == "output_reserve" and shape.reserve_wording is not None:
        message = f"{shape.reserve_wording(block.facts, decision.tokens_before)} {message}"
    param = block_param(block, shape)  # the record's block.param says the same
    return ErrorSpec(400, message, "invalid_request_error", block.code, param, block.facts)


def internal_error(call_id: Any) -> ErrorSpec:
    return ErrorSpec(
        503,
        "budget_hook could not check this request against the model's context budget, and the gateway is "
        f"configured to fail closed; retry later or contact the gateway operator (call id {call_id})",
        "service_unavailable",
        "budget_check_unavailable",
    )


def prompt_parameter_error(path: str) -> ErrorSpec:
    """An attempt carrying a LiteLLM prompt parameter its deployment does not set (``bounds.PROMPT_PARAMETERS``)."""
    return ErrorSpec(400, f"invalid request: {path}: {prompt_parameter_remedy(path)}", "invalid_request_error",
                     "invalid_request", param=path)


def unread_route_error(call_type: str) -> ErrorSpec:
    return ErrorSpec(
        400,
        f"budget_hook cannot yet check requests of this kind ({call_type}) against the model's context budget, "
        "and the gateway's policy refuses what it cannot check (unknown_routes: block); send the request through "
        "/chat/completions, /v1/messages or /v1/responses, or ask the gateway operator",
        "invalid_request_error",
        "route_not_budgeted",
    )


def block_model_group(detail: Mapping[str, Any]) -> str:
    """The model group a block names (its facts), for a shape's ``streamed_error`` (its ``model``)."""
    facts = detail.get("budget_hook") if isinstance(detail, Mapping) else None
    group = facts.get("model_group") if isinstance(facts, Mapping) else None
    return group if isinstance(group, str) else ""
