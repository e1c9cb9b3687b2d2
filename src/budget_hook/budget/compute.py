"""The input budget of a request: window - output reserve - safety margin, optionally capped lower.

Contract: ``compute_budget(window, requested_output_tokens=..., policy=...)`` returns a frozen ``Budget``
carrying every term, or raises ``OutputReserveTooLargeError`` when the output reserve (usually the
request's own ``max_tokens``) leaves no room for any input. ``Budget.check(tokens)`` returns a
``BudgetCheck`` with the counted tokens and how far over the budget they are.

Why subtract the output reserve: Anthropic rejects a request whose input + ``max_tokens`` exceeds the
window, and OpenAI reserves the completion inside the context window too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..counting.rendered import with_extra_body
from ..errors import MalformedRequestError, OutputReserveTooLargeError, PolicyError
from ..knobs import check_bounds, knob


@dataclass(frozen=True)
class BudgetPolicy:
    """Operator knobs for the budget. Defaults: reserve 15% of the window within [500, 4096]; margin 5%."""

    output_reserve_ratio: float = knob(0.15, ge=0, lt=1, doc="output reserve as a share of the window, when the "
                                       "request sets no max_tokens")
    output_reserve_min: int = knob(500, ge=0, doc="lower bound of that reserve")
    output_reserve_max: int = knob(4096, ge=0, doc="upper bound of that reserve")
    safety_margin_ratio: float = knob(0.05, ge=0, lt=1, doc="share of the window kept free for counting error")
    max_input_tokens: int | None = knob(None, gt=0, doc="a hard cap on input tokens below the model window "
                                           "(team or key policy)")
    clamp_max_tokens: bool = knob(False, doc="before cutting input, lower a request's oversized max_tokens (down "
                                             "to max_tokens_floor) to leave the input room")
    max_tokens_floor: int = knob(4096, ge=1, doc="clamp_max_tokens never lowers max_tokens below this")

    def __post_init__(self) -> None:
        check_bounds(self)
        if self.output_reserve_max < self.output_reserve_min:
            raise PolicyError(
                f"output reserve bounds must satisfy 0 <= min <= max, got min={self.output_reserve_min} "
                f"max={self.output_reserve_max}"
            )


@dataclass(frozen=True)
class Budget:
    """Every term of the budget, so a decision can explain itself."""

    window: int
    output_reserve: int
    output_reserve_source: str  # "request" (max_tokens / max_completion_tokens) or "policy"
    safety_margin: int
    cap: int | None
    budget: int

    def check(self, tokens: int) -> BudgetCheck:
        return BudgetCheck(budget=self, counted_tokens=tokens, over_by=max(0, tokens - self.budget))

    def as_dict(self) -> dict[str, Any]:
        # what ``dataclasses.asdict`` gives, without its recursive deep copy (every field is a scalar)
        return {"window": self.window, "output_reserve": self.output_reserve,
                "output_reserve_source": self.output_reserve_source, "safety_margin": self.safety_margin,
                "cap": self.cap, "budget": self.budget}


@dataclass(frozen=True)
class BudgetCheck:
    budget: Budget
    counted_tokens: int
    over_by: int

    @property
    def fits(self) -> bool:
        return self.over_by == 0

    def as_dict(self) -> dict[str, Any]:
        return {**self.budget.as_dict(), "counted_tokens": self.counted_tokens, "over_by": self.over_by}


#: the request fields that carry an output allowance. LiteLLM maps them onto one another across providers
#: (all three reach Anthropic as ``max_tokens``), so shapes with output reserve the largest one present.
OUTPUT_TOKEN_FIELDS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def requested_output_tokens(request: Mapping[str, Any], fields: tuple[str, ...] = OUTPUT_TOKEN_FIELDS, *,
                            lenient: bool = False) -> int | None:
    """The output allowance a request asks for: the largest of its output-token ``fields`` present, at the
    top level or in ``extra_body`` (which LiteLLM merges into the provider request); each request shape
    declares its own fields.

    The largest, because which one reaches the provider depends on the provider mapping (LiteLLM maps
    both to Anthropic's single ``max_tokens``), and reserving less than what is sent would let input +
    output overflow the window. A number is read as the provider reads it (``3000.0`` is 3,000; a fraction
    rounds up), and so is a numeric string (``"3000"``: servers such as vLLM accept it). Returns None when
    absent (or null); raises ``MalformedRequestError`` naming the field for anything else (a boolean, a
    negative, non-finite or non-numeric value, more than ``MAX_OUTPUT_TOKENS``): never a default instead.
    ``lenient``: such a value is skipped instead (an operator's deployment parameters, which no client sends).
    """
    values = []
    for prefix, source in with_extra_body(request):
        for key in fields:
            try:
                tokens = output_tokens(_field(source, key), prefix + key)
            except MalformedRequestError:
                if not lenient:
                    raise
                continue
            if tokens is not None:
                values.append(tokens)
    return max(values) if values else None


def with_output_tokens(request: Mapping[str, Any], fields: tuple[str, ...], value: int) -> dict[str, Any]:
    """A copy of ``request`` whose output-token ``fields`` (top level and ``extra_body``) above ``value`` are
    ``value``: what ``clamp_max_tokens`` forwards. The caller's request is not touched."""
    def lowered(source: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(source)
        for path in fields:
            current = _tokens(_field(out, path))
            if current is not None and current > value:
                out = _set_field(out, path.split("."), value)
        return out

    result = lowered(request)
    if isinstance(request.get("extra_body"), Mapping):
        result["extra_body"] = lowered(request["extra_body"])
    return result


#: the fields that ask for thinking, each of which LiteLLM may turn into an output allowance
#: (``thinking_output_tokens``; read on every attempt by ``proxy.attempts.asks_more_output``)
THINKING_FIELDS = ("thinking", "reasoning_effort", "reasoning")
#: the thinking budget LiteLLM gives Claude for each ``reasoning_effort``
#: (``DEFAULT_REASONING_EFFORT_*_THINKING_BUDGET``; the Responses API's ``reasoning.effort`` reaches it so)
EFFORT_THINKING_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096, "xhigh": 8192, "max": 16384}
#: what LiteLLM adds to a thinking budget as Claude's allowance when a request sets none (``DEFAULT_MAX_TOKENS``)
THINKING_ANSWER_TOKENS = 4096


def thinking_output_tokens(request: Mapping[str, Any]) -> int | None:
    """The allowance LiteLLM sends Claude for a request that sets none but asks for thinking: the thinking budget
    (``thinking.budget_tokens``, or a ``reasoning_effort`` / ``reasoning.effort``'s, LiteLLM's default budgets)
    plus 4,096 (``update_optional_params_with_thinking_tokens``: Anthropic, Bedrock, Vertex AI, Databricks). None: no
    budget read. An attack review (2026-12-06): a budget of 30,000 sent 34,096 where 8,192 was reserved."""
    budgets = []
    for _, source in with_extra_body(request):
        thinking = source.get(THINKING_FIELDS[0])
        if isinstance(thinking, Mapping) and thinking.get("type") in (None, "enabled", "adaptive"):
            # adaptive thinking on a model without it is sent as the medium effort's budget (LiteLLM 1.108)
            budget = _tokens(thinking.get("budget_tokens")) or (EFFORT_THINKING_BUDGETS["medium"]
                                                               if thinking.get("type") == "adaptive" else 0)
            if budget:
                budgets.append(budget)
        for effort in (source.get(name) for name in THINKING_FIELDS[1:]):
            effort = effort.get("effort") if isinstance(effort, Mapping) else effort  # {"effort": "max"} as well
            if isinstance(effort, str) and effort in EFFORT_THINKING_BUDGETS:
                budgets.append(EFFORT_THINKING_BUDGETS[effort])
    return min(MAX_OUTPUT_TOKENS, max(budgets) + THINKING_ANSWER_TOKENS) if budgets else None


def _set_field(source: Mapping[str, Any], names: list[str], value: int) -> dict[str, Any]:
    head, *rest = names
    return {**source, head: _set_field(source[head], rest, value) if rest else value}


def _field(source: Mapping[str, Any], path: str) -> Any:
    """``source[path]``, where a dotted path reads nested objects (``generationConfig.maxOutputTokens``)."""
    value: Any = source
    for name in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value


#: the largest output allowance read as a number (no provider takes more: their limits are 32-bit)
MAX_OUTPUT_TOKENS = 2**31 - 1
#: a numeric string as servers that accept one read it (``"3000"``, ``" 3000.0 "``, ``"3e3"``)
_NUMERIC = re.compile(r"\s*\+?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?\s*")


def output_tokens(value: Any, path: str) -> int | None:
    """An output allowance as a whole number of tokens (None when absent or null), or
    ``MalformedRequestError`` naming ``path``. The message describes the value without quoting it."""
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) > 40 or not _NUMERIC.fullmatch(value):
            raise _bad_output(path, "a string that is not a number")
        number: Decimal | float = Decimal(value.strip())
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad_output(path, "a boolean" if isinstance(value, bool) else f"a JSON {_json_type(value)}")
    else:
        number = value
    if isinstance(number, float) and not math.isfinite(number):
        raise _bad_output(path, "a number that is not finite (Infinity or NaN)")
    if number < 0:
        raise _bad_output(path, "a negative number")
    if number > MAX_OUTPUT_TOKENS:
        raise _bad_output(path, f"a number over {MAX_OUTPUT_TOKENS}")
    return math.ceil(number)


def _json_type(value: Any) -> str:
    return "object" if isinstance(value, Mapping) else "array" if isinstance(value, list) else "value of another type"


def _bad_output(path: str, got: str) -> MalformedRequestError:
    return MalformedRequestError(path, f"expected a whole number of output tokens from 0 to {MAX_OUTPUT_TOKENS} "
                                 f"(a number or a numeric string), got {got}")


def _tokens(value: Any) -> int | None:
    """An output allowance already validated by ``requested_output_tokens`` (None for anything else)."""
    try:
        return output_tokens(value, "")
    except MalformedRequestError:
        return None


def safety_margin(window: int, policy: BudgetPolicy) -> int:
    """The tokens of the window kept free for counting error."""
    return math.ceil(window * policy.safety_margin_ratio)


def compute_budget(window: int, *, requested_output_tokens: int | None = None,
                   policy: BudgetPolicy = BudgetPolicy(), reserve_source: str = "request") -> Budget:
    """``reserve_source`` says where ``requested_output_tokens`` comes from (the request, or the value
    LiteLLM fills in for it)."""
    if window <= 0:
        raise PolicyError(f"model window must be positive, got {window}")
    if requested_output_tokens is not None:
        reserve, source = requested_output_tokens, reserve_source
    else:
        reserve = math.ceil(window * policy.output_reserve_ratio)
        reserve = min(max(reserve, policy.output_reserve_min), policy.output_reserve_max)
        source = "policy"
    margin = safety_margin(window, policy)
    budget = window - reserve - margin
    if policy.max_input_tokens is not None:
        budget = min(budget, policy.max_input_tokens)
    terms = Budget(window, reserve, source, margin, policy.max_input_tokens, budget)
    if budget <= 0:
        who = {"request": "the request's max_tokens", "litellm_default": "the max_tokens LiteLLM sends for this model "
               "when the request sets none"}.get(source, "the policy's output reserve")
        raise OutputReserveTooLargeError(
            f"the output reserve of {reserve} tokens ({who}) plus the safety margin of {margin} leaves no "
            f"input budget: this model's maximum context length is {window} tokens; "
            f"lower max_tokens well below {window - margin} or use a model with a larger context window",
            {**terms.as_dict(), "budget": budget},
        )
    return terms
