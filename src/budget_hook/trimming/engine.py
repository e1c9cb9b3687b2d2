"""Bring a chat request under its token budget, least loss first, without breaking it.

Contract: ``trim_request(request, counter=..., budget=..., policy=...)`` returns a ``TrimResult``
(the request to forward and a ``TrimReport`` of what happened) or raises ``CannotFitError``.

* A request that fits its budget comes back as **the same object**, unchanged. The caller's request
  is never mutated: a trimmed request is a new dict with a new ``messages`` list.
* The rungs of ``steps.STEPS`` run in order; the next rung runs only while the request is over the budget
  (``target_ratio`` of it, 1 by default), so nothing is dropped when compacting was enough.
* **Cache steps.** The history is measured in tokens from its start (a message's *position*), and cut
  into steps of ``cache_step_ratio`` x budget. Inside a rung, work goes oldest first a whole step at a
  time: the rung acts on every candidate before its *frontier* (a step boundary) and checks the fit only
  there. A prefix of the conversation has the same positions in every later request, so as a
  conversation grows turn by turn the frontiers stay put until the request no longer fits, the same
  messages are cut and compacted, and the previous forwarded request stays an exact prefix of the next
  (the provider's prompt cache keeps working): frontiers move in steps, like Anthropic's
  ``clear_at_least``. It is all a function of the request: the same request gives the same result on any
  proxy instance. ``cache_step_ratio: 0`` cuts exactly at the budget.
* Never edited: system/developer messages, the opening context (``keep_opening_context``: the messages
  before the first reply, acknowledged context), the pinned first user message, the latest user message,
  ``protected`` indexes. Never dropped: the same, except that the ladder's last rung may drop opening
  context other than the task (``context_units``); and ``keep`` indexes. Messages are dropped in units
  (``structure.drop_units``): a whole turn, or a tool step (an assistant message with all its results) of a
  turn whose head stays, so a tool result is never orphaned. With ``edit_latest_turn_history`` (default
  on) compaction and shortening also work inside the latest turn's agent loop, never on its last user
  message or its final assistant message; ``drop_latest_turn_steps`` lets a late rung drop its oldest
  steps, never the last.
* When anything was dropped the request carries a ``Notice`` (a user message at the first cut, counted
  in the budget) telling the model how many messages and tokens were removed.
* Still over the budget after all rungs: ``CannotFitError`` with every number.

Every affected message is reported with its original index, role, token sizes and a content hash, so
logs can reference content without storing it. Per-message counts come from one ``count_request``
pass; only rewritten messages are re-counted.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from ..budget import Budget
from ..counting import TokenCounter
from ..errors import CannotFitError
from .report import (
    ActionKind,
    MessageAction,
    Notice,
    TrimReport,
    TrimResult,
    content_chars,
    content_hash,
    message_text,
    notice_text,
)
from .steps import STEPS
from .structure import PROTECTED_ROLES, Unit, drop_units, latest_turn_start, opening_parts, split_turns
from .trim_policy import TrimPolicy


def trim_request(
    request: Mapping[str, Any],
    *,
    counter: TokenCounter,
    budget: Budget,
    policy: TrimPolicy = TrimPolicy(),
    protected: Collection[int] = (),
    no_edit: Collection[int] = (),
    keep: Collection[int] = (),
) -> TrimResult:
    """``protected``: indexes never dropped or edited (e.g. a provider prompt-cache prefix). ``no_edit``:
    indexes that may leave with their unit but are never rewritten (e.g. an assistant message carrying
    signed thinking blocks). ``keep``: indexes never dropped but which may be compacted (e.g. a tool
    result whose call lives on the server)."""
    count = counter.count_request(request)
    messages: list[Mapping[str, Any]] = request["messages"]
    target = min(budget.budget, math.floor(budget.budget * policy.target_ratio))
    if count.total <= budget.budget:
        report = TrimReport(counter.model, count.method, False, count.total, count.total, budget, target)
        return TrimResult(request, report)

    step = math.ceil(policy.cache_step_ratio * budget.budget)
    state = TrimState(counter, messages, list(count.per_message), count.total, target, step, policy,
                      frozenset(protected), frozenset(no_edit), frozenset(keep))
    for rung in STEPS:
        if state.total <= target:
            break  # the budget is met: the next rung, which loses more, does not run
        if getattr(policy, rung.enabled_by):
            state.measure_positions()
            rung.run(state)
    notice = state.finish_notice()

    fixed = count.overhead_tokens + count.tools_tokens
    sizes = state.protected_tokens(fixed_tokens=fixed, tools_tokens=count.tools_tokens)
    if state.total > budget.budget:
        raise _cannot_fit(counter.model, budget, count.total, state.total, sizes)

    new_messages = [state.edited.get(i, m) for i, m in enumerate(messages) if state.alive[i]]
    if notice is not None:
        new_messages.insert(notice.position, state.notice_message(notice.text))
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
        notice=notice,
    )
    return TrimResult(new_request, report)


class TrimState:
    """Bookkeeping for one trim: which messages live, their current versions and token counts."""

    def __init__(self, counter: TokenCounter, messages: list, tokens: list[int], total: int, target: int, step: int,
                 policy: TrimPolicy, protected: frozenset[int] = frozenset(), no_edit: frozenset[int] = frozenset(),
                 keep: frozenset[int] = frozenset()) -> None:
        self.protected = protected
        self.no_edit = no_edit
        self.counter = counter
        self.messages = messages
        self.tokens = tokens
        self.total = total
        self.target = target
        self.step = step
        #: where each message starts in the history, in tokens as the rung about to run finds them (what cache
        #: steps are measured on). A prefix of the conversation that earlier rungs treated alike has the same
        #: positions in every later request, so the same frontier picks the same messages turn after turn.
        self.positions: list[int] = []
        self.policy = policy
        self.alive = [True] * len(messages)
        self.edited: dict[int, Mapping[str, Any]] = {}
        self.actions: dict[int, MessageAction] = {}  # at most one per message: its final fate
        self.dropped_turns: list[int] = []
        self.notice_tokens = 0  # the notice's exact size, once anything is dropped
        self.dropped_messages = 0
        self.dropped_tokens = 0
        turns = split_turns(messages)
        self.turn_sizes = [len(turn.indexes) for turn in turns]
        self.turn_of = [0] * len(messages)  # a list: cheaper to build than a dict for long histories
        for turn in turns:
            for index in turn.indexes:
                self.turn_of[index] = turn.number
        self.latest_start = latest_turn_start(messages)
        leading, acknowledged = (opening_parts(messages, context_min_chars=policy.context_min_chars,
                                               ack_max_chars=policy.ack_max_chars)
                                 if policy.keep_opening_context else (frozenset(), ()))
        self.opening = leading | frozenset(i for pair in acknowledged for i in pair)
        self.pinned = self._pinned_index()
        # The latest turn is short: scan it backwards rather than the whole history.
        self.final_assistant = next(
            (i for i in range(len(messages) - 1, self.latest_start - 1, -1) if messages[i].get("role") == "assistant"),
            None,
        )
        self.units = drop_units(messages, {i for i in range(len(messages)) if self.never_touched(i) or i in keep})
        #: opening context that may go, oldest first, only when nothing else fits: the leading user messages
        #: before the task (a demonstration, AGENTS.md) and acknowledged context (files added to the chat)
        leading_users = sorted(i for i in leading if messages[i].get("role") == "user")
        groups = [(i,) for i in leading_users[:-1]] + list(acknowledged)
        self.context_units = [Unit(group, self.turn_of[group[0]]) for group in sorted(groups)
                              if not any(i in protected or i in keep or i == self.pinned for i in group)]

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
            or index in self.opening
            or index == self.pinned
            or (index == self.latest_start and message.get("role") == "user")
        )

    def editable(self, index: int) -> bool:
        """May a rung rewrite this message?"""
        if self.never_touched(index) or not self.alive[index] or index in self.no_edit:
            return False
        return not self.in_latest_turn(index) or self.policy.edit_latest_turn_history

    def fits(self) -> bool:
        return self.total <= self.target

    def measure_positions(self) -> None:
        self.positions = list(itertools.accumulate(self.tokens, initial=0))[:-1]

    def step_start(self, index: int) -> int:
        """The start of the cache step that holds message ``index``."""
        position = self.positions[index]
        return position - position % self.step if self.step else position

    def advance(self, candidates: Iterable[tuple[int, Callable[[], None]]], *, whole: bool = False) -> None:
        """Run a rung: act on its candidates (message index, action), oldest first, one whole cache step at a
        time, until the request fits. The rung's frontier is where it stops: the end of the step holding the
        last candidate it acted on, so what a rung does to a message depends only on the message, where it
        sits and the frontier, and a longer history with the same frontier gets the same cuts."""
        frontier: float = -1
        for index, act in candidates:
            position = self.positions[index]
            if position >= frontier:
                if self.fits():
                    return
                if whole:
                    frontier = math.inf  # once started, the rung acts on every candidate
                elif self.step:
                    frontier = position - position % self.step + self.step
                else:
                    frontier = position + 1
            act()

    def current(self, index: int) -> Mapping[str, Any]:
        message: Mapping[str, Any] = self.edited.get(index, self.messages[index])
        return message

    # --- primitives the rungs use ------------------------------------------------------------------

    def rewrite(self, index: int, new_message: Mapping[str, Any], action: ActionKind,
                new_tokens: int | None = None) -> None:
        if new_tokens is None:
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

    def rewrite_with_marker(self, index: int, head: str, tail: str, marker: str, action: ActionKind) -> None:
        """Keep ``head`` and ``tail`` of the message's text, with a marker between them that says exactly how
        many characters and tokens left (``marker`` formats ``chars``, ``total`` and ``tokens``)."""
        current = self.current(index)
        text = message_text(self.messages[index])
        earlier = self.actions.get(index)
        original_tokens = earlier.tokens_before if earlier else self.tokens[index]
        removed_chars = len(text) - len(head) - len(tail)
        claimed, new_message, new_tokens = 0, current, self.tokens[index]
        for _ in range(3):  # the claim is part of what is counted: settle on a number that is true
            new_message = {**current, "content": head + marker.format(chars=removed_chars, total=len(text),
                                                                      tokens=claimed) + tail}
            new_tokens = self.counter.count_message(new_message, index=index)
            if original_tokens - new_tokens == claimed:
                break
            claimed = max(0, original_tokens - new_tokens)
        self.rewrite(index, new_message, action, new_tokens)

    def drop_unit(self, unit: Unit) -> None:
        for index in unit.indexes:
            if self.alive[index]:
                self.drop(index)
        if not unit.latest and len(unit.indexes) == self.turn_sizes[unit.turn]:
            self.dropped_turns.append(unit.turn)
        if self.policy.notify_model:
            # The notice the model will read is part of the request: counted exactly after every drop, so the
            # rungs stop on the true total.
            self.dropped_messages += sum(1 for index in unit.indexes if not self.alive[index])
            self.dropped_tokens += sum(self.actions[index].tokens_before for index in unit.indexes)
            size = self.counter.count_message(self.notice_message(notice_text(self.dropped_messages,
                                                                              self.dropped_tokens)))
            self.total += size - self.notice_tokens
            self.notice_tokens = size

    def drop(self, index: int) -> None:
        original = self.messages[index]
        # A message compacted earlier and then dropped is reported once, as dropped, with its
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

    # --- the notice ----------------------------------------------------------------------------------

    @staticmethod
    def notice_message(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def finish_notice(self) -> Notice | None:
        """The notice for what was dropped (already counted in ``total``)."""
        if not self.notice_tokens:
            return None
        first = min(a.index for a in self.actions.values() if a.action == "dropped")
        kept_before = [i for i in range(first) if self.alive[i]]
        return Notice(text=notice_text(self.dropped_messages, self.dropped_tokens),
                      after=kept_before[-1] if kept_before else None, position=len(kept_before),
                      messages=self.dropped_messages, tokens=self.dropped_tokens)

    def protected_tokens(self, *, fixed_tokens: int, tools_tokens: int) -> dict[str, int]:
        """Where the remaining tokens sit, for the error message and the report."""
        sizes = {"system": 0, "opening_context": 0, "latest_turn": 0, "older_history": 0}
        for index, alive in enumerate(self.alive):
            if not alive:
                continue
            role = self.messages[index].get("role")
            if role in PROTECTED_ROLES:
                key = "system"
            elif self.in_latest_turn(index):
                key = "latest_turn"
            elif index == self.pinned or index in self.opening:
                key = "opening_context"
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
    largest = max(("latest_turn", "system", "tool_definitions", "opening_context"), key=lambda k: protected.get(k, 0))
    capped = f", capped at {budget.cap}" if budget.cap else ""
    message = (
        f"{model or 'model'}: the request needs {after} input tokens after trimming (it had {before}), but the input "
        f"budget is {budget.budget} tokens (window {budget.window} - output reserve {budget.output_reserve} - "
        f"safety margin {budget.safety_margin}{capped}). This model's maximum "
        f"context length is {budget.window} tokens. What cannot be trimmed: latest turn {protected['latest_turn']}, "
        f"system {protected['system']}, tool definitions {protected['tool_definitions']}, opening context "
        f"{protected['opening_context']} tokens; the largest is the {largest.replace('_', ' ')}. Shorten the latest "
        f"message or its tool output, send fewer tool definitions or files, lower max_tokens, or use a model with a "
        f"larger context window (an operator can let the gateway drop the opening context: keep_opening_context)."
    )
    facts = {
        **budget.as_dict(),
        "model": model,
        "tokens_before": before,
        "tokens_after_trimming": after,
        "protected_tokens": dict(protected),
    }
    return CannotFitError(message, facts)
