"""Bring a chat request under its token budget, in priority order, without breaking it.

Contract: ``trim_request(request, counter=..., budget=..., policy=...)`` returns a ``TrimResult``
(the request to forward and a ``TrimReport`` of what happened) or raises ``CannotFitError``.

* A request that fits its budget comes back as **the same object**, unchanged. The caller's request
  is never mutated: a trimmed request is a new dict with a new ``messages`` list.
* When over budget it trims to ``target_ratio`` of the budget (default 90%), so that a growing chat
  does not re-trim, and bust the provider's prompt cache, on every turn. The steps, and their order,
  are the table ``steps.STEPS``; this module is the state they work on.

* Never dropped or edited: system/developer messages, the pinned first user message
  (``pin_first_user_message``), and the latest turn (the last user message and everything after it).
  With ``edit_latest_turn_history`` (default on) steps 1 and 3 may also work *inside* the latest turn
  on its history — the agent loop that follows the last user message — but never on the last user
  message itself, the final assistant message, or the K most recent tool results; no message of the
  latest turn is ever dropped. Off, the latest turn is kept verbatim.
* Still over the budget (not just the target) after all steps: ``CannotFitError`` with every number.

Every affected message is reported with its original index, role, token sizes and a content hash, so
logs can reference content without storing it. Per-message counts come from one ``count_request``
pass; only rewritten messages are re-counted.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from ..budget import Budget
from ..counting import TokenCounter
from ..errors import CannotFitError
from .report import ActionKind, MessageAction, TrimReport, TrimResult, content_chars, content_hash
from .steps import STEPS
from .structure import PROTECTED_ROLES, latest_turn_start, split_turns
from .trim_policy import TrimPolicy


def trim_request(
    request: Mapping[str, Any],
    *,
    counter: TokenCounter,
    budget: Budget,
    policy: TrimPolicy = TrimPolicy(),
    protected: Collection[int] = (),
    no_edit: Collection[int] = (),
) -> TrimResult:
    """``protected``: indexes never dropped or edited, and whose turn is never dropped (e.g. a provider
    prompt-cache prefix). ``no_edit``: indexes that may leave with their whole turn but are never
    rewritten (e.g. an assistant message carrying signed thinking blocks)."""
    count = counter.count_request(request)
    messages: list[Mapping[str, Any]] = request["messages"]
    target = min(budget.budget, math.floor(budget.budget * policy.target_ratio))
    if count.total <= budget.budget:
        report = TrimReport(counter.model, count.method, False, count.total, count.total, budget, target)
        return TrimResult(request, report)

    state = TrimState(counter, messages, list(count.per_message), count.total, target, policy,
                       frozenset(protected), frozenset(no_edit))
    for step in STEPS:
        if getattr(policy, step.enabled_by):
            step.run(state)

    fixed = count.overhead_tokens + count.tools_tokens
    sizes = state.protected_tokens(fixed_tokens=fixed, tools_tokens=count.tools_tokens)
    if state.total > budget.budget:
        raise _cannot_fit(counter.model, budget, count.total, state.total, sizes)

    new_messages = [state.edited.get(i, m) for i, m in enumerate(messages) if state.alive[i]]
    new_request = {**request, "messages": new_messages}
    report = TrimReport(
        model=counter.model,
        method=count.method,
        changed=True,
        tokens_before=count.total,
        tokens_after=state.total,
        budget=budget,
        target=target,
        actions=tuple(state.actions[index] for index in sorted(state.actions)),
        dropped_turns=tuple(state.dropped_turns),
        protected_tokens=sizes,
    )
    return TrimResult(new_request, report)


class TrimState:
    """Bookkeeping for one trim: which messages live, their current versions and token counts."""

    def __init__(self, counter: TokenCounter, messages: list, tokens: list[int], total: int, target: int,
                 policy: TrimPolicy, protected: frozenset[int] = frozenset(), no_edit: frozenset[int] = frozenset()
                 ) -> None:
        self.protected = protected
        self.no_edit = no_edit
        self.counter = counter
        self.messages = messages
        self.tokens = tokens
        self.total = total
        self.target = target
        self.policy = policy
        self.alive = [True] * len(messages)
        self.edited: dict[int, Mapping[str, Any]] = {}
        self.actions: dict[int, MessageAction] = {}  # at most one per message: its final fate
        self.dropped_turns: list[int] = []
        self.turns = split_turns(messages)
        self.turn_of = [0] * len(messages)  # a list: cheaper to build than a dict for long histories
        for turn in self.turns:
            for index in turn.indexes:
                self.turn_of[index] = turn.number
        self.latest_start = latest_turn_start(messages)
        self.pinned = self._pinned_index()
        # The latest turn is short: scan it backwards rather than the whole history.
        self.final_assistant = next(
            (i for i in range(len(messages) - 1, self.latest_start - 1, -1) if messages[i].get("role") == "assistant"),
            None,
        )

    # --- classification ------------------------------------------------------------------------------

    def _pinned_index(self) -> int | None:
        if not self.policy.pin_first_user_message:
            return None
        return next((i for i, m in enumerate(self.messages) if m.get("role") == "user"), None)

    def in_latest_turn(self, index: int) -> bool:
        return index >= self.latest_start

    def never_touched(self, index: int) -> bool:
        message = self.messages[index]
        return (
            message.get("role") in PROTECTED_ROLES
            or index in self.protected
            or index == self.pinned
            or (index == self.latest_start and message.get("role") == "user")
        )

    def editable(self, index: int) -> bool:
        """May steps 1 and 3 rewrite this message?"""
        if self.never_touched(index) or not self.alive[index] or index in self.no_edit:
            return False
        return not self.in_latest_turn(index) or self.policy.edit_latest_turn_history

    def fits(self) -> bool:
        return self.total <= self.target

    # --- primitives the steps use ------------------------------------------------------------------

    def rewrite(self, index: int, new_message: dict, action: ActionKind) -> None:
        new_tokens = self.counter.count_message(new_message, index=index)
        if new_tokens >= self.tokens[index]:
            return  # would not save anything: leave the message as it is
        original = self.messages[index]
        earlier = self.actions.get(index)  # a message edited twice reports its original size
        self.actions[index] = MessageAction(
            action=action,
            index=index,
            role=original["role"],
            turn=self.turn_of[index],
            tokens_before=earlier.tokens_before if earlier else self.tokens[index],
            tokens_after=new_tokens,
            chars_before=content_chars(original),
            chars_after=content_chars(new_message),
            content_hash=content_hash(original),
            tool_call_id=original.get("tool_call_id"),
        )
        self.total -= self.tokens[index] - new_tokens
        self.tokens[index] = new_tokens
        self.edited[index] = new_message

    def drop(self, index: int) -> None:
        original = self.messages[index]
        # A message compacted in step 1 and then dropped is reported once, as dropped, with its
        # original size: the log says what left the request, not the intermediate state.
        earlier = self.actions.get(index)
        tokens_before = earlier.tokens_before if earlier else self.tokens[index]
        self.actions[index] = MessageAction(
            action="dropped",
            index=index,
            role=original["role"],
            turn=self.turn_of[index],
            tokens_before=tokens_before,
            tokens_after=0,
            chars_before=content_chars(original),
            chars_after=0,
            content_hash=content_hash(original),
            tool_call_id=original.get("tool_call_id"),
        )
        self.total -= self.tokens[index]
        self.tokens[index] = 0
        self.alive[index] = False
        self.edited.pop(index, None)

    def protected_tokens(self, *, fixed_tokens: int, tools_tokens: int) -> dict[str, int]:
        """Where the remaining tokens sit, for the error message and the report."""
        sizes = {"system": 0, "pinned": 0, "latest_turn": 0, "older_history": 0}
        for index, alive in enumerate(self.alive):
            if not alive:
                continue
            role = self.messages[index].get("role")
            if role in PROTECTED_ROLES:
                key = "system"
            elif index == self.pinned:
                key = "pinned"
            elif self.in_latest_turn(index):
                key = "latest_turn"
            else:
                key = "older_history"
            sizes[key] += self.tokens[index]
        sizes["tool_definitions"] = tools_tokens
        sizes["request_overhead"] = fixed_tokens - tools_tokens
        return sizes


def check_native_fit(counter: TokenCounter, budget: Budget, tokens_before: int, tokens_after: int, *,
                     remedy: str) -> None:
    """A native shape's trimmed request must hold on its own fresh count, whatever its view said."""
    if tokens_after > budget.budget:
        raise CannotFitError(
            f"{counter.model}: the trimmed request still needs {tokens_after} input tokens, over the input budget "
            f"of {budget.budget} tokens. This model's maximum context length is {budget.window} tokens. {remedy}",
            {**budget.as_dict(), "model": counter.model, "tokens_before": tokens_before,
             "tokens_after_trimming": tokens_after})


def _cannot_fit(model: str, budget: Budget, before: int, after: int, protected: Mapping[str, int]) -> CannotFitError:
    largest = max(("latest_turn", "system", "tool_definitions", "pinned"), key=lambda k: protected.get(k, 0))
    capped = f", capped at {budget.cap}" if budget.cap else ""
    message = (
        f"{model or 'model'}: the request needs {after} input tokens after trimming (it had {before}), but the input "
        f"budget is {budget.budget} tokens (window {budget.window} - output reserve {budget.output_reserve} - "
        f"safety margin {budget.safety_margin}{capped}). This model's maximum "
        f"context length is {budget.window} tokens. What cannot be trimmed: latest turn {protected['latest_turn']}, "
        f"system {protected['system']}, tool definitions {protected['tool_definitions']}, pinned {protected['pinned']} "
        f"tokens; the largest is the {largest.replace('_', ' ')}. Shorten the latest message or its tool output, send "
        f"fewer tool definitions, lower max_tokens, or use a model with a larger context window."
    )
    facts = {
        **budget.as_dict(),
        "model": model,
        "tokens_before": before,
        "tokens_after_trimming": after,
        "protected_tokens": dict(protected),
    }
    return CannotFitError(message, facts)
