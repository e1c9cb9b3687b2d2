"""Bring a chat request under its token budget: only what must go, least needed first, without breaking it.

Contract: ``trim_request(request, counter=..., budget=..., policy=...)`` returns a ``TrimResult``
(the request to forward and a ``TrimReport`` of what happened) or raises ``CannotFitError``.

* A request that fits its budget comes back as **the same object**, unchanged. The caller's request
  is never mutated: a trimmed request is a new dict with a new ``messages`` list.
* The request's material is given up region by region (``ladder.STAGES``): older history first, then the
  latest turn's agent loop, then opening context. A region is touched only when everything before it
  cannot make the room, so the agent loop in progress stays verbatim whenever older material can fit.
* **The least lossy cuts that fit** (``TrimState.settle``). In a history region, tool results are softened
  (head and tail kept) oldest first, the frontier a point on the axis of what softening saves, rounded up
  to a cache step (``cache_step_ratio`` x budget), the result it falls in cut only as far as needed;
  when softening the whole region cannot fit, the oldest units (a tool step, or an older turn's question
  with its answer) leave first, in groups that free a cache step, and what stays is softened only as far
  as it must be; compaction (a result's head) only when nothing droppable is left. The region's newest
  tool results stay verbatim while the rest can make the room, then are cut graded, then their steps go.
  Every choice is computed afresh from the request: stateless, the same on any proxy instance.
* **Cache-stable.** Positions and savings of a prefix of the conversation are the same in every later
  request, so while a growing conversation still fits with the same frontiers the previous forwarded
  request stays an exact prefix of the next (the provider's prompt cache keeps working); when it no longer
  fits, a frontier moves a whole cache step, like Anthropic's ``clear_at_least``. ``cache_step_ratio: 0``
  cuts exactly.
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
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from ..budget import Budget
from ..counting import TokenCounter
from .ladder import STAGES
from .report import TrimReport, TrimResult, cannot_fit, content_hash
from .state import TrimState
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

    cache_step = math.ceil(policy.cache_step_ratio * budget.budget)
    state = TrimState(counter, messages, list(count.per_message), count.total, target, cache_step, policy,
                      frozenset(protected), frozenset(no_edit), frozenset(keep))
    for stage in STAGES:
        if state.fits():
            break  # the budget is met: the next region, which the agent needs more, is not touched
        stage.run(state)
    notice = state.finish_notice()

    fixed = count.overhead_tokens + count.tools_tokens
    sizes = state.protected_tokens(fixed_tokens=fixed, tools_tokens=count.tools_tokens)
    if state.total > budget.budget:
        raise cannot_fit(counter.model, budget, count.total, min(state.total, count.total), sizes)

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
        actions=tuple(replace(state.actions[index], content_hash=content_hash(messages[index])) if hash_actions
                      else state.actions[index] for index in sorted(state.actions)),
        dropped_turns=state.dropped_turns(),
        protected_tokens=sizes,
        notice=notice,
    )
    return TrimResult(new_request, report)
