"""The decision record: one typed value per request, read by the headers, the logs and the metadata.

``DecisionRecord.build(decision, request)`` turns a ``Decision`` into the facts an operator sees; the
adapter keeps it by call id and derives everything from its fields (``headers()`` for ``x-budget-*``,
``as_dict()`` for the JSON log line and LiteLLM's metadata). Nothing is read back by string keys, and
the per-action counts derive from the trimming ladder (``trimming.ladder``), so a new rung's action is
counted, never a ``KeyError``. Content is referenced by index, size and hash, never stored, unless the
operator turned on ``log_dropped_content``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..learning import learnable, mocked, server_loop, teacher_of
from ..trimming import REMOVING_ACTIONS, action_counts
from .decision import Action, Decision
from .privacy import shown_action, shown_role, shown_source
from .request import BudgetRequest, Caller

#: a decision's action, or ``error``: the plugin's own failure (``DecisionRecord.failure``)
RecordAction = Literal[Action, "error"]
#: a record lists at most this many actions; the rest are counted (``actions_omitted``), never dropped silently
MAX_LISTED_ACTIONS = 100
#: a warning or message in a record is cut to this many characters (they can quote client-chosen ids)
MAX_TEXT_CHARS = 500


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 20] + f"... ({len(text)} chars)"


@dataclass(frozen=True)
class DecisionRecord:
    action: RecordAction
    model_group: Any
    mode: str | None = None
    window: int | None = None
    window_source: str | None = None
    counting_model: str | None = None
    policy_sources: tuple[str, ...] = ()
    tokens_before: int | None = None
    tokens_after: int | None = None
    client_max_input_tokens: int | None = None
    client_cap_applied: bool | None = None
    ignored_client_settings: tuple[str, ...] = ()
    ignored_metadata_settings: tuple[str, ...] = ()
    #: count method (``exact``, ``o200k_base x1.20``)
    method: str | None = None
    #: how the count was made: exact, offline tokenizer, estimate (its factor), provider; learned correction
    count: Mapping[str, Any] | None = None
    #: every term of the budget (window, output reserve and its source, margin, cap, budget)
    budget: Mapping[str, Any] | None = None
    target: int | None = None
    #: messages touched per action kind (every kind of ``trimming.REDUCTIONS``)
    counts: Mapping[str, int] | None = None
    dropped_turns: tuple[int, ...] | None = None
    actions: tuple[Mapping[str, Any], ...] | None = None
    #: touched messages beyond the first ``MAX_LISTED_ACTIONS`` (counted in ``counts``, not listed)
    actions_omitted: int = 0
    protected_tokens: Mapping[str, int] | None = None
    notes: tuple[str, ...] = ()
    #: what the notice in the forwarded request told the model (``messages``, ``tokens`` dropped)
    notice: Mapping[str, int] | None = None
    #: the growth anchor a trim was computed at: the messages (items) from this native index on were added
    #: since an earlier request's trim and are forwarded verbatim (None: trimmed afresh)
    anchor: int | None = None
    inputs: Mapping[str, Any] | None = None
    block: Mapping[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    team_id: str | None = None
    team_alias: str | None = None
    key_alias: str | None = None
    #: only with ``log_dropped_content``: the original text of every touched message
    dropped_content: tuple[Mapping[str, Any], ...] | None = None
    #: attempts the router sent to another deployment than the first decision assumed, each decided again
    attempts: tuple[Mapping[str, Any], ...] = ()
    #: router attempts decided again because the first decision did not cover them (0: none was)
    decided_again: int = 0
    #: the operator asked for content in logs (``log_dropped_content``): provider error texts are kept too
    log_content: bool = False
    #: our uncorrected estimate of what was forwarded, and whether its usage can teach a correction (no
    #: server-side content in it): what the success callback compares the provider's count with
    estimate_forwarded: int | None = None
    learnable: bool = False
    #: what the provider bills for it is one prompt it served (not a batch of inputs, each budgeted alone, billed as
    #: their sum; not a mocked answer, billed by the client): the deployment's window holds that much
    proves_window: bool = False
    #: who would teach what the provider answers (a hash of the caller's key), and whether the request
    #: itself contains overflow wording (an error quoting it back must teach nothing): asked only when the
    #: call fails, and set then by the adapter (``proxy.outcomes.quoted``)
    teacher: str | None = None
    quotes_overflow: bool = False
    #: the client sent a router of its own (``user_config``, forwarded in shadow mode): the deployment ids its
    #: answers carry are the client's to choose, so they teach nothing
    routed_by_client: bool = False
    #: the request's own headers take the place of the ``anthropic-beta`` a deployment of its group sends for its window
    #: (``ModelLimits.client_beta``): the window the provider applied was the request's, so its error teaches none
    client_beta: bool = False
    #: the plugin's own failure: what it was and what the fail mode did
    error: str | None = None
    fail_mode: str | None = None
    #: the metrics label of the group (the adapter's: only names from the operator's configuration)
    metrics_group: str | None = None
    #: a Responses request continuing a stored response (``previous_response_id``): the chain the provider holds
    #: as this gateway saw it (``held`` tokens, counted in ``tokens_before``), or ``{"state": "unknown"}``
    chain: Mapping[str, Any] | None = None

    @classmethod
    def build(cls, decision: Decision, request: BudgetRequest | None = None, *,
              quotes_overflow: bool = False) -> DecisionRecord:
        """The record of ``decision``; ``request`` adds the caller and, if asked, the touched content;
        ``quotes_overflow``: the request contains overflow wording (``learning.quotes_overflow``)."""
        resolved = decision.resolved
        caller = request.caller if request is not None else Caller()
        shown = request.shown_group if request is not None else None
        values: dict[str, Any] = dict(
            action=decision.action, mode=decision.mode, model_group=decision.model_group,
            window=decision.limits.window, window_source=decision.limits.source if shown is None
            else shown_source(decision.limits.source),  # a hidden name: no text derived from it
            counting_model=decision.limits.counting_model if shown is None else shown,
            policy_sources=tuple(resolved.sources), metrics_group=request.metrics_group if request else None,
            tokens_before=decision.tokens_before, tokens_after=decision.tokens_after,
            ignored_client_settings=resolved.ignored_client_settings,
            ignored_metadata_settings=resolved.ignored_metadata_settings,
            warnings=tuple(_cut(w) for w in (*resolved.warnings, *decision.warnings)),
            team_id=caller.team_id, team_alias=caller.team_alias, key_alias=caller.key_alias,
            teacher=teacher_of(caller.key_hash, caller.team_id), quotes_overflow=quotes_overflow,
            routed_by_client=request is not None and "user_config" in request.body,
            client_beta=decision.limits.client_beta,
            log_content=resolved.policy.log_dropped_content,
            count=dict(decision.count) if decision.count is not None else None,
        )
        forwarded = decision.tokens_after if decision.mode == "enforce" else decision.tokens_before
        if forwarded is not None and decision.action not in ("blocked", "skipped"):
            values["estimate_forwarded"] = round(forwarded / decision.calibration.factor)
            values["learnable"] = request is not None and not decision.unseen and learnable(request.body)
            values["proves_window"] = (decision.inputs is None or len(decision.inputs.tokens) <= 1) and \
                request is not None and not mocked(request.body) and not server_loop(request.body)
        if resolved.client_max_input_tokens is not None:
            values.update(client_max_input_tokens=resolved.client_max_input_tokens,
                          client_cap_applied=resolved.client_cap_applied)
        report = decision.report
        if report is not None:
            listed = report.actions[:MAX_LISTED_ACTIONS]
            values.update(method=report.method, budget=report.budget.as_dict(), target=report.target,
                          counts=action_counts(report.actions), dropped_turns=tuple(report.dropped_turns),
                          actions=tuple(shown_action(a.as_dict()) for a in listed), notes=tuple(report.notes),
                          actions_omitted=len(report.actions) - len(listed))
            if report.changed:
                values["protected_tokens"] = dict(report.protected_tokens)
            if report.notice is not None:
                values["notice"] = report.notice.as_dict()
            if report.anchor is not None:
                values["anchor"] = report.anchor
            if resolved.policy.log_dropped_content and report.actions and request is not None:
                shape = request.shape
                touched = getattr(shape, "touched_content", None)
                values["dropped_content"] = tuple(
                    {"index": a.index, "role": shown_role(a.role), "action": a.action,
                     "content": touched(request.body, a) if touched else ""}
                    for a in report.actions)
        inputs = decision.inputs
        if inputs is not None:
            values.update(budget=dict(decision.input_budget or {}), inputs={
                "field": inputs.field, "count": len(inputs.tokens), "limit": inputs.limit,
                "largest": max(inputs.tokens, default=0),
                "over": [{"index": o.index, "tokens": o.tokens, "over_by": o.over_by} for o in inputs.over[:100]],
                "truncated": list(inputs.truncated)})
        block = decision.block
        if block is not None:
            values["block"] = {"kind": block.kind, "code": block.code, "message": _cut(block.message),
                               "param": block_param(block, request.shape if request is not None else None),
                               "facts": dict(block.facts)}
            if values.get("budget") is None and "budget" in block.facts:
                values["budget"] = {k: block.facts[k] for k in ("window", "output_reserve", "output_reserve_source",
                                                                "safety_margin", "cap", "budget") if k in block.facts}
        return cls(**values)

    @classmethod
    def failure(cls, *, model_group: Any, error: str, fail_mode: str, request: BudgetRequest | None = None
                ) -> DecisionRecord:
        """The record of the plugin's own failure on a request (``model_group`` when there is no ``request``:
        the adapter's label for it, never a name the operator did not configure)."""
        caller = request.caller if request is not None else None
        if request is not None:
            model_group = request.shown_group or request.model_group
        return cls(action="error", model_group=model_group, error=error, fail_mode=fail_mode,
                   team_id=caller.team_id if caller else None, team_alias=caller.team_alias if caller else None,
                   metrics_group=request.metrics_group if request is not None else None)

    @property
    def dropped_messages(self) -> int:
        return sum(n for kind, n in (self.counts or {}).items() if kind in REMOVING_ACTIONS)

    @property
    def edited_messages(self) -> int:
        return sum(n for kind, n in (self.counts or {}).items() if kind not in REMOVING_ACTIONS)

    def as_dict(self, *, content: bool = True) -> dict[str, Any]:
        """The JSON record (logs, LiteLLM metadata): unset optional facts are left out. ``content=False``
        leaves out ``dropped_content`` (for LiteLLM's spend logs, which reach every logging integration)."""
        record: dict[str, Any] = {"action": self.action}
        if self.action == "error":
            record.update(fail_mode=self.fail_mode, model_group=self.model_group, error=self.error,
                          team_id=self.team_id, team_alias=self.team_alias)
            return record
        record.update(mode=self.mode, model_group=self.model_group, window=self.window,
                      window_source=self.window_source, counting_model=self.counting_model,
                      policy_sources=list(self.policy_sources), tokens_before=self.tokens_before,
                      tokens_after=self.tokens_after)
        if self.client_max_input_tokens is not None:
            record.update(client_max_input_tokens=self.client_max_input_tokens,
                          client_cap_applied=self.client_cap_applied)
        for name in ("ignored_client_settings", "ignored_metadata_settings"):
            if getattr(self, name):
                record[name] = list(getattr(self, name))
        if self.method is not None:
            record["method"] = self.method
        if self.count is not None:
            record["count"] = dict(self.count)
        if self.estimate_forwarded is not None:
            record.update(estimate_forwarded=self.estimate_forwarded, learnable=self.learnable)
        if self.budget is not None:
            record["budget"] = dict(self.budget)
        if self.counts is not None:
            # the action entries are shared, not copied: a long trim reports hundreds of them, and the record
            # is frozen (nothing writes to them)
            record.update(target=self.target, counts=dict(self.counts), dropped_turns=list(self.dropped_turns or ()),
                          actions=list(self.actions or ()))
            if self.actions_omitted:
                record["actions_omitted"] = self.actions_omitted
        if self.protected_tokens is not None:
            record["protected_tokens"] = dict(self.protected_tokens)
        if self.notes:
            record["notes"] = list(self.notes)
        if self.notice is not None:
            record["notice"] = dict(self.notice)
        if self.anchor is not None:
            record["anchor"] = self.anchor
        if self.inputs is not None:
            record["inputs"] = dict(self.inputs)
        if self.block is not None:
            record["block"] = dict(self.block)
        if self.chain is not None:
            record["chain"] = dict(self.chain)
        if self.warnings:
            record["warnings"] = list(self.warnings)
        moved = [dict(a) for a in self.attempts if self.moved(a)]
        if moved:
            record["attempts"] = moved
        if self.decided_again:
            record["decided_again"] = self.decided_again
        record.update(team_id=self.team_id, team_alias=self.team_alias, key_alias=self.key_alias)
        if content and self.dropped_content is not None:
            record["dropped_content"] = [dict(c) for c in self.dropped_content]
        return record

    def moved(self, attempt: Mapping[str, Any]) -> bool:
        """An attempt the record lists: one the router sent to a deployment other than the one the first decision
        assumed (another group or another window), or one decided differently. An ordinary request re-checked
        on its own group's deployment (a ``/v1/messages`` body LiteLLM translated, a group whose deployments
        share a window) is the first decision again: not listed."""
        return (attempt.get("model_group"), attempt.get("window"), attempt.get("action")) != \
            (self.model_group, self.window, self.action)

    def headers(self) -> dict[str, str]:
        """``x-budget-*`` response headers summarising the decision (every one of ``BUDGET_HEADERS`` that
        applies; none negative: a budget the output allowance leaves no room for reads 0)."""
        headers = {"x-budget-decision": self.action, "x-budget-mode": self.mode or ""}
        for name, value in (("x-budget-tokens-before", self.tokens_before),
                            ("x-budget-tokens-after", self.tokens_after), ("x-budget-window", self.window)):
            if value is not None:
                headers[name] = str(value)
        if self.budget is not None and self.budget.get("budget") is not None:
            headers["x-budget-input-budget"] = str(max(0, int(self.budget["budget"])))
        if self.counts is not None or self.inputs is not None or self.block is not None:
            headers["x-budget-dropped-messages"] = str(self.dropped_messages)
            headers["x-budget-edited-messages"] = str(self.edited_messages)
        if self.method:
            headers["x-budget-count-method"] = self.method
        elif self.count is not None:
            headers["x-budget-count-method"] = str(self.count.get("method") or "")
        return {k: v for k, v in headers.items() if v}


def block_param(block: Any, shape: Any) -> str | None:
    """The request field a block names: its own, else the shape's (``messages``, ``input``, ``prompt``; the
    output allowance's field when that leaves no room). The HTTP error's ``param`` and the record's
    ``block.param`` both come from here."""
    if block.param:
        return str(block.param)
    if shape is None:
        return None
    field = {"cannot_fit": getattr(shape, "param", None), "output_reserve": getattr(shape, "output_param", None)}
    value = field.get(block.kind)
    return value if isinstance(value, str) else None


def tokens_left(action: str | None, tokens_before: int | None, tokens_after: int | None) -> int:
    """The one definition of "tokens after" that totals use (``budget_hook_tokens_after_total``, ``replay``'s
    ``tokens_after`` and ``tokens_saved`` = before - after): the input tokens the decision leaves for the provider.
    A block (``blocked``, or ``would_block`` in shadow mode) leaves 0: its tokens count as saved, not forwarded.
    A trim leaves what trimming left (``would_trim``: what enforcing would have left); a pass, all of it."""
    if action in ("blocked", "would_block"):
        return 0
    value = tokens_after if tokens_after is not None else tokens_before
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


#: every header ``DecisionRecord.headers`` can write (what browsers must be allowed to read)
BUDGET_HEADERS = ("x-budget-decision", "x-budget-mode", "x-budget-tokens-before", "x-budget-tokens-after",
                  "x-budget-window", "x-budget-input-budget", "x-budget-dropped-messages",
                  "x-budget-edited-messages", "x-budget-count-method")


__all__ = ["BUDGET_HEADERS", "DecisionRecord", "block_param", "tokens_left"]
