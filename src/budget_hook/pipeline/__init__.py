"""The request pipeline: one complete input in, one decision and its record out (pure).

``BudgetRequest`` (``request``) -> ``decide`` (``decider``: policy, window, the shape's count and trim) ->
``Decision`` (``decision``) -> ``DecisionRecord`` (``record``: headers, logs, metadata).
"""

from .decider import InternalFailure, decide, decide_conversation, decide_inputs, estimate, operator_policy
from .decision import BlockReason, Decision
from .record import DecisionRecord
from .request import BudgetRequest, Caller, ClientInput, ClientProblem

__all__ = ["BlockReason", "BudgetRequest", "Caller", "ClientInput", "ClientProblem", "Decision", "DecisionRecord",
           "InternalFailure", "decide", "decide_conversation", "decide_inputs", "estimate", "operator_policy"]
