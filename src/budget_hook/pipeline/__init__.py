"""The request pipeline: one complete input in, one decision and its record out (pure).

``BudgetRequest`` (``request``) -> ``decide`` (``decider``: policy, window, the shape's count and trim) ->
``Decision`` (``decision``) -> ``DecisionRecord`` (``record``: headers, logs, metadata). ``advertise``: the
window a caller is told about (``/v1/models``, ``/model/info``).
"""

from .advertise import Advertised, advertised
from .decider import (
    InternalFailure,
    decide,
    decide_conversation,
    decide_inputs,
    decision_weight,
    estimate,
    operator_policy,
)
from .decision import BlockReason, Decision
from .record import DecisionRecord
from .request import BudgetRequest, Caller, ClientInput, ClientProblem

__all__ = ["Advertised", "BlockReason", "BudgetRequest", "Caller", "ClientInput", "ClientProblem", "Decision",
           "DecisionRecord", "InternalFailure", "advertised", "decide", "decide_conversation", "decide_inputs",
           "decision_weight", "estimate", "operator_policy"]
