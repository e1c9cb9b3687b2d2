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
from dataclasses import asdict, dataclass
from collections.abc import Mapping
from typing import Any

from .errors import OutputReserveTooLargeError, PolicyError


@dataclass(frozen=True)
class BudgetPolicy:
    """Operator knobs for the budget. Defaults: reserve 15% of the window within [500, 4096]; margin 5%."""

    output_reserve_ratio: float = 0.15
    output_reserve_min: int = 500
    output_reserve_max: int = 4096
    safety_margin_ratio: float = 0.05
    #: a hard cap on input tokens below the model window (team or key policy)
    max_input_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("output_reserve_ratio", "safety_margin_ratio"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise PolicyError(f"{name} must be in [0, 1), got {value}")
        if self.output_reserve_min < 0 or self.output_reserve_max < self.output_reserve_min:
            raise PolicyError(
                f"output reserve bounds must satisfy 0 <= min <= max, got min={self.output_reserve_min} "
                f"max={self.output_reserve_max}"
            )
        if self.max_input_tokens is not None and self.max_input_tokens <= 0:
            raise PolicyError(f"max_input_tokens must be positive, got {self.max_input_tokens}")


@dataclass(frozen=True)
class Budget:
    """Every term of the budget, so a decision can explain itself."""

    window: int
    output_reserve: int
    output_reserve_source: str  # "request" (max_tokens / max_completion_tokens) or "policy"
    safety_margin: int
    cap: int | None
    budget: int

    def check(self, tokens: int) -> "BudgetCheck":
        return BudgetCheck(budget=self, counted_tokens=tokens, over_by=max(0, tokens - self.budget))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def requested_output_tokens(request: Mapping[str, Any]) -> int | None:
    """The output allowance a request asks for: the largest of ``max_completion_tokens``, ``max_tokens``
    and ``max_output_tokens`` present.

    The largest, because which one reaches the provider depends on the provider mapping (LiteLLM maps
    both to Anthropic's single ``max_tokens``), and reserving less than what is sent would let input +
    output overflow the window. Returns None when absent; a value that is not a non-negative integer is
    left for the provider to reject (we do not guess), and is reported as None here.
    """
    values = [
        value for key in ("max_completion_tokens", "max_tokens", "max_output_tokens")
        if isinstance(value := request.get(key), int) and not isinstance(value, bool) and value >= 0
    ]
    return max(values) if values else None


def compute_budget(window: int, *, requested_output_tokens: int | None = None, policy: BudgetPolicy = BudgetPolicy()) -> Budget:
    if window <= 0:
        raise PolicyError(f"model window must be positive, got {window}")
    if requested_output_tokens is not None:
        reserve, source = requested_output_tokens, "request"
    else:
        reserve = math.ceil(window * policy.output_reserve_ratio)
        reserve = min(max(reserve, policy.output_reserve_min), policy.output_reserve_max)
        source = "policy"
    margin = math.ceil(window * policy.safety_margin_ratio)
    budget = window - reserve - margin
    if policy.max_input_tokens is not None:
        budget = min(budget, policy.max_input_tokens)
    terms = Budget(window, reserve, source, margin, policy.max_input_tokens, budget)
    if budget <= 0:
        who = "the request's max_tokens" if source == "request" else "the policy's output reserve"
        raise OutputReserveTooLargeError(
            f"the output reserve of {reserve} tokens ({who}) plus the safety margin of {margin} leaves no "
            f"input budget: this model's maximum context length is {window} tokens; "
            f"lower max_tokens well below {window - margin} or use a model with a larger context window",
            {**terms.as_dict(), "budget": budget},
        )
    return terms
