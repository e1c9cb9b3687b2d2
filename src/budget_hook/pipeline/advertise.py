"""The window a caller may use on a model group, as the gateway advertises it to clients (pure).

Clients that read a model's window from the gateway (``/v1/models``, ``/model/info``) compact their
history themselves when they near it; advertising the input budget the caller's policy gives, rather than
the deployment's raw window, lets them do so before the gateway has to trim.

Contract: ``advertised(model_group, limits, caller, settings)`` returns a frozen ``Advertised``: the
group's window and the input budget of a request that sets no output allowance (window - the output reserve
LiteLLM fills in, or else the policy's - the safety margin, capped by the policy's ``max_input_tokens``),
with every term. ``input_budget`` is None when the plugin changes nothing for this caller (mode ``off`` or
``shadow``: clients must see what they would see without it), when the window is unknown and the policy
blocks such requests, or when the reserve leaves no room. A broken admin metadata layer is skipped, as for
requests. Never raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..budget import ModelLimits, compute_budget
from ..errors import BudgetHookError
from ..policy import PluginSettings
from .decider import caller_policy
from .request import Caller


@dataclass(frozen=True)
class Advertised:
    """What the gateway tells a caller about one model group."""

    model_group: str
    mode: str
    window: int | None
    #: the input tokens a request may use before the gateway trims it; None: nothing to advertise
    input_budget: int | None = None
    output_reserve: int | None = None
    safety_margin: int | None = None
    cap: int | None = None
    #: where the window comes from (``ModelLimits.source``, or the policy's default)
    source: str = ""

    def facts(self) -> dict[str, Any]:
        """The ``budget_hook`` object added to each model's entry."""
        return {"window": self.window, "input_budget": self.input_budget, "output_reserve": self.output_reserve,
                "safety_margin": self.safety_margin, "max_input_tokens_cap": self.cap, "mode": self.mode,
                "window_source": self.source}


def advertised(model_group: str, limits: ModelLimits, caller: Caller, settings: PluginSettings) -> Advertised:
    try:
        policy = caller_policy(model_group, limits, caller, settings).policy
    except BudgetHookError:
        return Advertised(model_group, "unknown", limits.window, source=limits.source)
    window, source = limits.window, limits.source
    if window is None and policy.unknown_window == "default":
        window, source = policy.default_max_input_tokens, "policy default (window unknown)"
    if policy.mode != "enforce" or window is None:
        return Advertised(model_group, policy.mode, window, source=source)
    reserve = limits.filled_output_tokens
    try:
        budget = compute_budget(window, requested_output_tokens=reserve, policy=policy.budget,
                                reserve_source="litellm_default")
    except BudgetHookError:  # the reserve LiteLLM fills in leaves no room: every request without one is refused
        return Advertised(model_group, policy.mode, window, source=source)
    return Advertised(model_group, policy.mode, window, budget.budget, budget.output_reserve, budget.safety_margin,
                      budget.cap, source)
