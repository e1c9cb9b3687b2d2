"""One request's decision, as facts: what happens to it and every number behind it.

Actions: ``pass`` (fits), ``trimmed``, ``blocked``; in shadow mode ``would_trim`` / ``would_block`` with
the original request forwarded; ``skipped`` when the operator's mode is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..budget import ModelLimits
from ..learning import Calibration
from ..policy import ResolvedPolicy
from ..shapes.inputs import InputsResult
from ..trimming import TrimReport

Action = Literal["pass", "trimmed", "blocked", "would_trim", "would_block", "skipped"]
#: why a request is blocked: it cannot fit, its own output allowance leaves no room, it is malformed
#: (or the client's input to the gateway is), or nobody knows the model's window
BlockKind = Literal["cannot_fit", "output_reserve", "malformed", "unknown_window", "unreadable"]


@dataclass(frozen=True)
class BlockReason:
    kind: BlockKind
    message: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    #: the request field at fault (``messages[3].content``) for malformed input
    param: str | None = None

    @property
    def code(self) -> str:
        # Only a real overflow says context_length_exceeded: agent frameworks react to it by compacting
        # and retrying, which cannot help a malformed request or a model whose window nobody knows.
        return {"malformed": "invalid_request", "unknown_window": "model_window_unknown",
                "unreadable": "content_not_countable"}.get(self.kind, "context_length_exceeded")


@dataclass(frozen=True)
class Decision:
    action: Action
    mode: str
    model_group: str
    limits: ModelLimits
    resolved: ResolvedPolicy
    #: what to forward: the caller's body itself unless the decision enforced a trim
    request: Mapping[str, Any]
    report: TrimReport | None = None
    block: BlockReason | None = None
    warnings: tuple[str, ...] = ()
    #: /embeddings and /completions: per-input counts, and the per-input budget terms
    inputs: InputsResult | None = None
    input_budget: Mapping[str, Any] | None = None
    #: how the counts were calibrated (learned correction, provider count)
    calibration: Calibration = field(default_factory=Calibration)
    #: the estimate lies within its measured error of the budget and the policy asks the provider then:
    #: the adapter asks, and decides again with the provider's count
    wants_provider_count: bool = False
    #: how the tokens were counted (``how``: exact, offline tokenizer, estimate, provider; the method, the
    #: estimate's factor, the learned correction, the provider's count)
    count: Mapping[str, Any] | None = None
    #: the request holds content the gateway cannot see (a reference, an unreadable part, server-held history):
    #: what the provider bills for it says nothing of the count, so its usage teaches no correction
    unseen: bool = False

    @property
    def tokens_before(self) -> int | None:
        if self.report:
            return self.report.tokens_before
        if self.inputs:
            if not self.inputs.truncated:
                return self.inputs.total
            original = {o.index or 0: o.tokens for o in self.inputs.over}
            return sum(original.get(i, t) for i, t in enumerate(self.inputs.tokens))
        return self.block.facts.get("tokens_before") if self.block else None

    @property
    def tokens_after(self) -> int | None:
        if self.report:
            return self.report.tokens_after
        if self.inputs:
            return self.inputs.total
        if self.block is None:
            return None
        # a block forwards nothing; what trimming reached, else the request as it came
        value = self.block.facts.get("tokens_after_trimming", self.block.facts.get("tokens_before"))
        return value if isinstance(value, int) else None


def shadowed(action: Action, mode: str) -> Action:
    """In shadow mode a trim or block is only reported: ``would_trim`` / ``would_block``."""
    if mode != "shadow":
        return action
    return {"trimmed": "would_trim", "blocked": "would_block"}.get(action, action)  # type: ignore[return-value]
