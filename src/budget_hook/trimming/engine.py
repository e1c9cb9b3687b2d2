"""Bring a chat request under its token budget: only what must go, least needed first, without breaking it.

Contract: ``trim_request(request, counter=..., budget=..., policy=...)`` returns a ``TrimResult``
(the request to forward and a ``TrimReport`` of what happened) or raises ``CannotFitError``.

* A request that fits its budget comes back as **the same object**, unchanged. The caller's request
  is never mutated: a trimmed request is a new dict with a new ``messages`` list.
* The request's material is given up region by region (``ladder.STAGES``): older history first, then the
  latest turn's agent loop, then opening context. A region is touched only when everything before it
  cannot make the room, so the agent loop in progress stays verbatim whenever older material can fit.
* **The least lossy cuts that fit** (``TrimState.settle``). In a history region, tool results are softened
  (head and tail kept) oldest first, the frontier a point on the axis of what softening saves, the result
  it falls in cut only as far as needed; when softening the whole region cannot fit, the oldest units (a
  tool step, or an older turn's question with its answer) leave first, as few as fit, and what stays is
  softened only as far as it must be; compaction (a result's head) only when nothing droppable is left.
  The region's newest tool results, and what came after the oldest of them, stay verbatim while older
  material can make the room; then the newest are cut graded, then their steps go.
* **Cache-stable, statelessly: the growth anchor** (``growth_anchor``). A request of a growing conversation
  is forwarded as the trim of an earlier request of the same conversation (its *anchor*, found from the
  messages' counts alone) plus everything the client added since, verbatim: so the previous forwarded
  request is an exact prefix of the next and the provider's prompt cache keeps working. The anchor's trim
  cuts older history and the agent loop ``cache_step_ratio`` x budget below the budget, the room the
  conversation grows into (the last stages, opening context and task, only as far as the request needs);
  once the conversation has grown past that room the request becomes the new anchor and is trimmed afresh.
  Every choice is a function of the request alone, the same on any proxy instance; ``cache_step_ratio: 0``
  trims every request afresh, exactly to the budget.
* Never edited: system/developer messages, the opening context (but by the last stages), the pinned first
  user message, the latest user message, ``protected`` indexes. Never dropped: the same, but opening
  context other than the task; and ``keep`` indexes. A tool result never leaves without its call, nor a
  call without its results (``structure.drop_units``).
* When anything was dropped the request carries a ``Notice`` (a user message at the first cut, counted
  in the budget) telling the model how many messages and tokens were removed.
* Still over the budget after every stage: ``CannotFitError`` with every number.

Every affected message is reported with its original index, role, token sizes and a content hash.
Per-message counts come from one ``count_request`` pass; only rewritten messages are re-counted.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..budget import Budget
from ..counting import RequestCount, TokenCounter
from .elsewhere import check_inline
from .ladder import STAGES
from .report import TrimReport, TrimResult, cannot_fit, content_hash
from .settled import Settled, fresh, memo_key, recall, remember
from .state import TrimState, opening_of
from .structure import is_result, latest_turn_start, where_tokens
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
    hash_actions: bool = True,
) -> TrimResult:
    """``protected``: indexes never dropped or edited (e.g. a provider prompt-cache prefix). ``no_edit``:
    indexes that may leave with their unit but are never rewritten (e.g. an assistant message carrying
    signed thinking blocks). ``keep``: indexes never dropped but which may be compacted (e.g. a tool
    result whose call lives on the server). ``hash_actions``: each action names its message's
    ``content_hash`` (False: left empty, for a shape that names the native message instead)."""
    count = counter.count_request(request)
    messages: list[Mapping[str, Any]] = request["messages"]
    target = min(budget.budget, math.floor(budget.budget * policy.target_ratio))
    if count.total <= budget.budget:
        report = TrimReport(counter.model, count.method, False, count.total, count.total, budget, target)
        return TrimResult(request, report)
    check_inline(messages)  # a trim the caller's thread should not carry: it decides again elsewhere

    room = math.ceil(policy.cache_step_ratio * budget.budget)
    fixed = count.overhead_tokens + count.tools_tokens
    start = growth_anchor(messages, count.per_message, target - fixed, room)
    sets = (frozenset(protected), frozenset(no_edit), frozenset(keep))
    if start < len(messages):  # the request extends one trimmed at ``start``: that trim, plus what was added
        # the prefix counted as part of this request (its messages' shares, this request's tools and overhead)
        prefix = replace(count, per_message=count.per_message[:start])
        added = count.total - prefix.total
        anchor_sets = tuple(frozenset(i for i in indexes if i < start) for indexes in sets)
        settled = _anchor_trim(counter, prefix, messages[:start], target, target - added, room, policy, anchor_sets)
        newer = sum(1 for m in messages[start:] if is_result(m))
        still_newest = max(0, policy.keep_recent_tool_results - newer)
        if settled.newest_cut and still_newest < policy.keep_recent_tool_results:
            # the anchor had to cut its own newest results, but for this request only the last ``still_newest``
            # of them are among the newest (the rest were added since): the anchor's trim with only those kept
            # as newest, so its other results are older material (they leave first). A function of the anchor
            # and of how many results were added, so the next requests that added as many take the same trim.
            settled = _anchor_trim(counter, prefix, messages[:start], target, target - added, room,
                                   replace(policy, keep_recent_tool_results=still_newest), anchor_sets)
        # taken while the anchor's newest results (for this request) stayed whole: else the newest work is this
        # request's, and the request is trimmed afresh
        if settled.total + added <= budget.budget and not settled.newest_cut:
            leading, acknowledged, pinned = opening_of(messages, policy)
            sizes = where_tokens(messages, [settled.tokens[i] if settled.alive[i] else None for i in range(start)]
                                 + list(count.per_message[start:]), latest_start=latest_turn_start(messages),
                                 opening={*leading, *(i for pair in acknowledged for i in pair), pinned},
                                 fixed_tokens=fixed, tools_tokens=count.tools_tokens)
            return _result(request, messages, count, settled, budget, target, hash_actions, counter=counter,
                           tokens_after=settled.total + added, sizes=sizes)
    state = _settle(counter, count, messages, target, target, room, policy, *sets)
    sizes = state.protected_tokens(fixed_tokens=fixed, tools_tokens=count.tools_tokens)
    if state.total > budget.budget:
        raise cannot_fit(counter.model, budget, count.total, min(state.total, count.total), sizes)
    return _result(request, messages, count, _settled(state), budget, target, hash_actions, counter=counter,
                   tokens_after=state.total, sizes=sizes)


def growth_anchor(messages: Sequence[Mapping[str, Any]], per_message: Sequence[int], available: int,
                  room: int) -> int:
    """Where the trim of a request over its budget is computed: the end of the earlier request of the same
    conversation that was trimmed afresh (an earlier request ends before an assistant message that follows
    a user or tool message). The first request whose messages are over ``available`` (the budget less tools
    and overhead) is trimmed ``room`` below it; every later one is that trim plus what the client added,
    until the messages grew ``room`` past it: then that request is trimmed afresh. A function of the
    conversation's prefix alone, so every request of a growing conversation finds the same anchors;
    ``len(messages)``: the request itself."""
    anchor, limit, size = -1, available, 0
    for index, message in enumerate(messages):
        if index and message.get("role") == "assistant" and messages[index - 1].get("role") != "assistant" \
                and size > limit:
            anchor, limit = index, size + room
        size += per_message[index]
    return anchor if anchor > 0 and size <= limit else len(messages)


def _anchor_trim(counter: TokenCounter, count: RequestCount, messages: list, target: int, needed: int, room: int,
                 policy: TrimPolicy, sets: tuple[frozenset[int], ...]) -> Settled:
    """The trim of a growth anchor's prefix, from the memo when an earlier request of the conversation made
    it and it holds for what this one needs (``settled``)."""
    key = memo_key(counter, messages, count.per_message, count.total, target, room, policy, sets)
    found = recall(key, needed)
    if found is not None:
        return found
    state = _settle(counter, count, messages, target, needed, room, policy, *sets)
    settled = _settled(state)
    remember(key, settled)
    return settled


def _settle(counter: TokenCounter, count: RequestCount, messages: list, target: int, needed: int, room: int,
            policy: TrimPolicy, protected: frozenset[int], no_edit: frozenset[int], keep: frozenset[int]) -> TrimState:
    """Run the stages over ``messages`` while they are over ``needed`` (what the request needs); in a stage that
    leaves room (``Stage.leaves_room``) older material is cut to ``target`` less ``room``, so the next requests
    grow into the room (the newest results only as far as ``needed``: ``TrimState.settle``). Records the
    ``needed`` values the outcome holds for (``state.needed_range``)."""
    state = TrimState(counter, messages, list(count.per_message), count.total, needed, policy,
                      protected, no_edit, keep, room=room)
    roomy = target - room
    low, high = 0, count.total  # a stage runs while the messages are over ``needed``
    for stage in STAGES:
        state.target = needed
        if state.fits():
            low = state.total
            break  # the budget is met: the next region, which the agent needs more, is not touched
        high = min(high, state.total)
        if not (stage.leaves_room and room):
            state.depends_on_needed = True  # cut only as far as ``needed``
        state.target, state.leaving_room = (roomy, True) if stage.leaves_room and room else (needed, False)
        stage.run(state)
    else:
        state.depends_on_needed = True
    state.target, state.leaving_room = needed, False
    state.needed_range = (max(low, state.needed_floor), high)
    return state


def _settled(state: TrimState) -> Settled:
    low, high = state.needed_range
    # every reduction rewrites a message's content only (``versions``): the rest is the request's own
    return Settled(kept=len(state.messages), alive=tuple(state.alive), tokens=tuple(state.tokens),
                   edited={i: m["content"] for i, m in state.edited.items()},
                   actions=tuple(state.actions[i] for i in sorted(state.actions)),
                   notice=state.finish_notice(), dropped_turns=state.dropped_turns(), total=state.total,
                   newest_cut=any(i in state.actions for i in state.newest_results),
                   low=low, high=high, reusable=not state.depends_on_needed)


def _result(request: Mapping[str, Any], messages: list, count: RequestCount, settled: Settled, budget: Budget,
            target: int, hash_actions: bool, *, counter: TokenCounter, tokens_after: int,
            sizes: dict[str, int]) -> TrimResult:
    kept, notice = settled.kept, settled.notice
    edited = settled.edited
    # rewritten messages are built on this request's own (their contents new objects too: what is forwarded
    # is never shared with another request, whatever the proxy does to it afterwards)
    new_messages = [{**m, "content": fresh(edited[i])} if i in edited else m
                    for i, m in enumerate(messages[:kept]) if settled.alive[i]]
    if notice is not None:
        new_messages.insert(notice.position, TrimState.notice_message(notice.text))
    new_messages.extend(messages[kept:])
    new_request = {**request, "messages": new_messages}
    report = TrimReport(
        model=counter.model,
        method=count.method,
        changed=True,
        tokens_before=count.total,
        tokens_after=tokens_after,
        budget=budget,
        target=target,
        actions=tuple(replace(action, content_hash=content_hash(messages[action.index])) if hash_actions
                      else action for action in settled.actions),
        dropped_turns=settled.dropped_turns,
        protected_tokens=sizes,
        notice=notice,
        anchor=kept if kept < len(messages) else None,
    )
    return TrimResult(new_request, report)
