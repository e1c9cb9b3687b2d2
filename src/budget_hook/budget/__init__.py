"""Where the budget is computed: window - output reserve - safety margin, optionally capped lower.

* ``compute``: ``BudgetPolicy`` (the knobs), ``compute_budget`` and the ``Budget`` with every term;
* ``windows``: ``ModelLimits`` (the routed group's window and its source) and the offline model map.
"""

from .compute import (
    OUTPUT_TOKEN_FIELDS,
    THINKING_FIELDS,
    Budget,
    BudgetCheck,
    BudgetPolicy,
    compute_budget,
    requested_output_tokens,
    safety_margin,
    thinking_output_tokens,
    with_output_tokens,
)
from .windows import ModelLimits, lookup_max_input_tokens

__all__ = ["OUTPUT_TOKEN_FIELDS", "THINKING_FIELDS", "Budget", "BudgetCheck", "BudgetPolicy", "ModelLimits",
           "compute_budget", "lookup_max_input_tokens", "requested_output_tokens", "safety_margin",
           "thinking_output_tokens", "with_output_tokens"]
