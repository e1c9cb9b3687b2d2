"""The state one trim works on (``TrimState``): which messages live, their versions and counts, and the
moves every rung of the ladder makes (``settle``, ``reduce``, ``drop_unit``...).

It sits below the ladder, as httpx's ``_models`` sit below its client: ``ladder`` (the rungs: ``REDUCTIONS``
and ``STAGES``) works on a ``TrimState``, ``engine`` runs the stages over one; neither is imported here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from ..counting import TokenCounter
from .removals import Removals
from .report import (
    ActionKind,
    MessageAction,
    all_text,
    content_chars,
    message_text,
)
from .structure import (
    PROTECTED_ROLES,
    Unit,
    drop_units,
    is_result,
    latest_turn_start,
    opening_parts,
    split_turns,
    where_tokens,
)
from .trim_policy import TrimPolicy
from .versions import Versions


class TrimState(Versions, Removals):
    """Bookkeeping for one trim: which messages live, their current versions and token counts, and the
    rewritten versions each message could take."""

    def __init__(self, counter: TokenCounter, messages: list, tokens: list[int], total: int, target: int,
                 policy: TrimPolicy, protected: frozenset[int] = frozenset(),
                 no_edit: frozenset[int] = frozenset(), keep: frozenset[int] = frozenset(), *, room: int = 0) -> None:
        self.protected = protected
        self.no_edit = no_edit
        self.keep = keep
        self.counter = counter
        self.messages = messages
        self.original_tokens = tuple(tokens)
        self.tokens = tokens
        self.total = total
        #: what the request needs (``target``), and what the current move aims at: lower for older material
        #: in the stages that leave ``room`` for the next requests (``leaving_room``, set by ``engine``), never
        #: for the newest results
        self.needed = target
        self.target = target
        self.room = room
        self.leaving_room = False
        #: where each message starts in the history, in tokens of the request as sent (the axis frontiers are
        #: points on)
        self.positions = list(itertools.accumulate(tokens, initial=0))[:-1]
        self.policy = policy
        self.alive = [True] * len(messages)
        self.edited: dict[int, Mapping[str, Any]] = {}
        self.actions: dict[int, MessageAction] = {}  # at most one per message: its final fate
        self.notice_tokens = 0  # the notice's exact size, once anything is dropped
        self.dropped_messages = 0
        self.dropped_tokens = 0
        #: how ``needed`` shaped this trim (``settled.Settled``): the moves made, whether any was made to
        #: ``needed`` (then the trim holds for this request only), and the least ``needed`` it holds for
        self.moves = 0
        self.depends_on_needed = False
        self.needed_floor = 0
        self.needed_range = (0, 0)
        self._variants = {}
        self._marked = {}
        self._notice_sizes: dict[tuple[int, int], int] = {}
        self._graded: dict[tuple[int, int], tuple[Mapping[str, Any], int]] = {}
        self.turns = split_turns(messages)
        self.turn_of = [0] * len(messages)  # a list: cheaper to build than a dict for long histories
        for turn in self.turns:
            for index in turn.indexes:
                self.turn_of[index] = turn.number
        self.latest_start = latest_turn_start(messages)
        leading, acknowledged, self.pinned = opening_of(messages, policy)
        self.opening = leading | frozenset(i for pair in acknowledged for i in pair)
        # The latest turn is short: scan it backwards rather than the whole history.
        self.final_assistant = next(
            (i for i in range(len(messages) - 1, self.latest_start - 1, -1) if messages[i].get("role") == "assistant"),
            None,
        )
        self.units = drop_units(messages, {i for i in range(len(messages)) if self.never_touched(i) or i in keep})
        #: opening context that may go, oldest first, only when nothing else fits: the leading user messages
        #: before the task (a demonstration, AGENTS.md) and acknowledged context (files added to the chat)
        leading_users = sorted(i for i in leading if messages[i].get("role") == "user")
        self.task = leading_users[-1] if leading_users else None
        groups = [(i,) for i in leading_users[:-1]] + list(acknowledged)
        self.context_units = [Unit(group, self.turn_of[group[0]]) for group in sorted(groups)
                              if not any(i in protected or i in keep or i == self.pinned for i in group)]
        self.newest_results = self._newest_results()

    def _newest_results(self) -> frozenset[int]:
        """The ``keep_recent_tool_results`` newest tool results: a result leaves this set only when a newer one
        arrives, and then joins the end of the soften axis, after the frontier, so it stays as it was until
        the request needs the room."""
        keep = self.policy.keep_recent_tool_results
        results = [i for i, m in enumerate(self.messages) if is_result(m)]
        return frozenset(results[max(0, len(results) - keep):])

    def in_latest_turn(self, index: int) -> bool:
        return index >= self.latest_start

    def is_recent(self, index: int) -> bool:
        return index in self.newest_results

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
        """May a reduction rewrite this message?"""
        if self.never_touched(index) or not self.alive[index] or index in self.no_edit:
            return False
        return not self.in_latest_turn(index) or self.policy.edit_latest_turn_history

    def fits(self) -> bool:
        return self.total <= self.target

    def opening_reducible(self, index: int) -> bool:
        """May the last stages cut this opening-context message in the middle?"""
        return (self.alive[index] and self.messages[index].get("role") == "user"
                and index not in (self.latest_start, self.pinned) and index not in self.protected
                and index not in self.no_edit and all_text(self.messages[index]))

    def settle(self, region: Callable[[int], bool], *, drop: bool, latest: bool, edit: bool = True) -> None:
        """The least lossy cuts of one history region that fit, oldest first.

        Tool results are softened (head and tail kept) along the history, oldest first, graded: the frontier
        is a point on the axis of what softening saves, so every result before it is softened, the one it
        falls in is cut only as far as the excess needs, and everything after it stays verbatim. When
        softening the whole region cannot fit, the oldest units leave first (a tool step, or an older turn's
        question with its answer), one at a time until the rest fits, and what stays after them is softened
        only as far as it must be, and those the last drop took past the aim come back (``_restore_units``) when
        the room holds them whole. Compaction (a result's head only, long assistant messages shortened) comes
        only when nothing droppable is left, and never for the room alone (``_room_only``).

        The newest tool results (``is_recent``), and the units after the oldest of them, stay verbatim while
        the rest of the region can make the room; what is still over is then cut from them, graded to what the
        request needs (``needed``: never for the room left to the next requests), and last their steps leave,
        oldest first; a step those drops took past the need comes back when the room holds it whole
        (``_restore_units``).
        """
        policy = self.policy
        in_region = [i for i in range(len(self.messages)) if region(i)]
        candidates = [i for i in in_region if not self.is_recent(i) and self.editable(i) and self._reducible(i)] \
            if edit else []
        # the newest results that may be cut, an error among them (a long one's head and tail hold its lines that
        # matter, and it is older than the results after it)
        newest = [i for i in in_region if self.is_recent(i) and self.editable(i)
                  and (self._result_reducible(i, errors=True) or self._has_old_images(i))] \
            if edit and policy.reduce_recent_tool_results else []
        units = [u for u in self.units if u.latest == latest and all(self.alive[i] for i in u.indexes)] if drop else []
        # a turn whose step holds one of the newest results keeps its question while that step stays
        holding = {u.turn for u in units if any(self.is_recent(i) for i in u.indexes)}
        # what came after the oldest of the newest results stays with them (oldest first: it is newer)
        first_recent = min(self.newest_results, default=len(self.messages))
        older_units = [u for u in units if u.indexes[-1] < first_recent
                       and not (u.turn in holding and self.messages[u.indexes[0]].get("role") == "user")]
        light = _Lazy(partial(self.saving, level="light"))  # what softening saves, counted when asked

        # softening the region cannot fit: the oldest units leave, as few as fit
        found, rest_total = self._drop_frontier(older_units, candidates, light)
        if found is None and not self._room_only(rest_total):  # then with what stays compacted
            softened = self.total - sum(light[i] for i in candidates)  # the region softened, the newest verbatim
            found, _ = self._first_fit(self._drop_items(older_units, set(candidates)),
                                       softened - sum(self.saving(i, "heavier") for i in candidates))
        # dropping them all cannot make the room: the newest results must give anyway, and every older
        # unit goes first (each spares the newest what it frees)
        cut = math.inf if found is None else found
        gone = {i for u in older_units if self.positions[u.indexes[-1]] < cut for i in u.indexes}
        rest = [i for i in candidates if i not in gone]
        base = self.total - sum(self.tokens[i] for i in gone) + self._notice_size(gone) - self.notice_tokens
        compact = 0.0
        softened = base - sum(light[i] for i in rest)
        if softened > self.target and not self._room_only(softened):  # nothing droppable is left: compact
            found, _ = self._first_fit([(self.positions[i], partial(self.saving, i, "heavier")) for i in rest],
                                       softened)
            compact = math.inf if found is None else found

        drops = [(u, self.drop_unit(u)) for u in older_units if self.positions[u.indexes[-1]] < cut]
        for index in rest:
            if self.positions[index] < compact:
                self._apply(index, "heavy")
        self._soften_along([i for i in rest if self.positions[i] >= compact], light)
        self._restore_units(drops[:-1])  # what the last of them took past the aim comes back
        # the newest results: only as far as the request needs
        aim, leaving, self.target, self.leaving_room = self.target, self.leaving_room, self.needed, False
        before, moves = self.total, self.moves
        cut_first = frozenset(newest)
        # one of the newest results that cannot be cut (a Responses built-in tool's output, a result holding a
        # document) has its step leave in its place when newer results would be cut by at least as much as the step
        # holds: a trade of older tokens for as many of the newest, which stay verbatim the longest. Not a step larger
        # than that (a review of a first fix: a 35,000-character step left for a 3% excess), nor one holding a
        # result that can be cut instead (a parallel call's), nor a short result (under ``tool_result_min_chars``)
        early: list[tuple[Unit, tuple[int, ...]]] = []
        for index in (i for i in in_region if self.is_recent(i) and self.alive[i]) if newest else ():
            if self.fits():  # still over: the newest results, oldest first, as little as needed
                break
            if index not in cut_first:
                unit = next((u for u in units if index in u.indexes), None) \
                    if max(cut_first) > index and content_chars(self.messages[index]) >= policy.tool_result_min_chars \
                    else None
                if unit is not None and all(self.alive[i] and i not in cut_first for i in unit.indexes) \
                        and sum(self.tokens[i] for i in unit.indexes) <= self.total - self.target:
                    early.append((unit, self.drop_unit(unit)))
                continue
            if self._has_old_images(index):
                self._apply(index, "light")  # images older than the latest turn go first (drop_old_images)
            if not self.fits():
                self.reduce(index, floor=policy.tool_result_keep_chars, action="compacted")
        left = [u for u in units if any(self.alive[i] for i in u.indexes)]
        found, _ = self._first_fit(self._drop_items(left, ()), self.total)  # still over: the rest, oldest first
        # each unit with the messages it dropped (those still alive), oldest first
        last_drops = [(u, self.drop_unit(u)) for u in left if found is None or self.positions[u.indexes[-1]] < found]
        self._restore(newest)
        if not any(i in self.edited for i in newest):  # the newest whole: what the last drop overshot comes back,
            # the older units first, within the aim (a large last drop frees room one of them fits in: a review saw
            # 20% of the budget forwarded), as the first phase gives them back; the room stays the next requests'
            self.target = aim
            self._restore_units([d for d in drops if d[1] and not any(self.alive[i] for i in d[1])])
            self.target = self.needed
            self._restore_units(last_drops[:-1])
            self._restore_units(early)
        if self.moves != moves:
            self.depends_on_needed = True
        elif newest or left:  # nothing was over ``needed``: a smaller one could have been
            self.needed_floor = max(self.needed_floor, before)
        self.target, self.leaving_room = aim, leaving

    def _room_only(self, total: int) -> bool:
        """Is ``total`` over the aim only by the room left for the next requests (``leaving_room``)? Then the
        request fits its budget, and no compaction (a result's head only) is made for the room alone."""
        return self.leaving_room and total <= self.target + self.room

    def _restore(self, indexes: Iterable[int]) -> None:
        """Give back, newest first, the cuts of ``indexes`` (the newest results, cut before the steps that held
        the others left) that the room a later move freed now holds: whole, else the first that cannot come back
        whole cut again only as far as the room needs (a review saw 18% of the budget forwarded, the 2nd-newest
        result left at its floor): the minimal set of cuts, not a one-way ladder."""
        for index in sorted(indexes, reverse=True):
            if not (self.alive[index] and index in self.edited):
                continue
            excess = self.total + self.original_tokens[index] - self.tokens[index] - self.target
            if excess <= 0:
                self.total += self.original_tokens[index] - self.tokens[index]
                self.tokens[index] = self.original_tokens[index]
                del self.edited[index]
                del self.actions[index]
                self.moves += 1
                continue
            if self.actions[index].action == "compacted":  # graded by ``reduce``: cut again, less, and the room
                # left is this newer result's (the older ones stay as they are)
                message, tokens = self.graded(index, needed=excess, floor=self.policy.tool_result_keep_chars,
                                              action="compacted")
                if self.total - self.tokens[index] + tokens <= self.target:
                    self.rewrite(index, message, "compacted", tokens, grow=True)
                return

    def _soften_along(self, indexes: list[int], light: Mapping[int, int]) -> None:
        """Soften ``indexes`` (in position order) up to the smallest frontier on the axis of what softening
        saves whose cuts really cover the excess: every one before the frontier whole, the one it falls in
        graded (head and tail kept, never under the softened size), the rest verbatim. (A growing conversation
        keeps its trimmed prefix by the growth anchor, ``engine.growth_anchor``, not by rounding cuts.)"""
        if self.fits():
            return
        excess = self.total - self.target
        plan, saved = self._soften_plan(indexes, light, excess)
        frontier = excess
        while saved < excess:  # the cuts fall short (the floors): further, while that frees more
            wider, more = self._soften_plan(indexes, light, frontier + excess)
            if more <= saved:
                break
            frontier, plan, saved = frontier + excess, wider, more
        for index, version in plan:
            if version is None:
                self._apply(index, "light")
            else:
                self.rewrite(index, version[0], version[2], version[1])

    def _soften_plan(self, indexes: list[int], light: Mapping[int, int], frontier: int
                     ) -> tuple[list[tuple[int, tuple[Mapping[str, Any], int, ActionKind] | None]], int]:
        """The cuts that soften ``indexes`` up to ``frontier`` tokens saved (each whole, None, or the graded
        version of the one the frontier falls in) and what they really save."""
        plan: list[tuple[int, tuple[Mapping[str, Any], int, ActionKind] | None]] = []
        saved = 0
        floor = self.policy.tool_result_soft_keep_chars
        for index in indexes:
            if saved >= frontier:
                break
            if not light[index]:
                continue
            version = self.variant(index, "light")
            if saved + light[index] <= frontier or version is None or version[2] not in ("compacted", "shortened") \
                    or len(message_text(self.messages[index])) <= floor:
                plan.append((index, None))
                saved += light[index]
                continue
            key = (index, frontier - saved)
            if key not in self._graded:
                self._graded[key] = self.graded(index, needed=frontier - saved, floor=floor, action=version[2])
            cut = self._graded[key]
            if cut[1] < self.tokens[index]:
                plan.append((index, (*cut, version[2])))
                saved += self.tokens[index] - cut[1]
        return plan, saved

    def _apply(self, index: int, level: str) -> None:
        version = self.variant(index, level)
        if version is not None:
            self.rewrite(index, version[0], version[2], version[1])

    def _first_fit(self, items: Sequence[tuple[int, Callable[[], int]]], total: int) -> tuple[float | None, int]:
        """The first frontier (the end of an item: a position and what taking it saves, in position order) at
        which ``total``, less the savings of every item before it, fits the target, and that total; (None, the
        total with every item taken) when none does. Leaving room (aiming ``room`` below the budget), it stops
        short of an item that would overshoot the aim by more than the room once the rest is within the budget:
        the room is not worth a unit that large (a function of the prefix still: the aim and room, not what the
        request needs)."""
        if total <= self.target:
            return 0.0, total
        saved, frontier = 0, 0.0
        for position, saving in items:
            value = saving()
            if self.leaving_room and total - saved <= self.target + self.room \
                    and total - saved - value < self.target - self.room:
                return frontier, total - saved
            saved, frontier = saved + value, position + 1
            if total - saved <= self.target:
                return frontier, total - saved
        return None, total - saved

    def _drop_frontier(self, units: list[Unit], candidates: Collection[int], light: Mapping[int, int]
                       ) -> tuple[float | None, int]:
        """``_first_fit`` over ``units`` at the light level (each saves what it holds softened, less the notice's
        growth) from the total with every candidate softened, found from the newest unit back: the walk stops
        where no older frontier can be the answer (a total over the aim by more than the room and the notice,
        which is all an older frontier could give back), so only the candidates that stay, and a band of the
        room, are softened to know it (``light``, lazy). Exact: a unit's softened size is never negative (the
        region's candidates are not edited yet)."""
        cands = set(candidates)
        notice = self._notices(units)
        last = len(units)
        in_units = {i for unit in units for i in unit.indexes}
        totals = {last: self.total - sum(light[i] for i in cands if i not in in_units)
                  - sum(self.tokens[i] for i in in_units) + notice(last) - self.notice_tokens}
        threshold = self.target + (self.room if self.leaving_room else 0)
        start = last
        while start and totals[start] - notice(start) <= threshold:
            start -= 1
            softened = sum(self.tokens[i] - (light[i] if i in cands else 0) for i in units[start].indexes)
            totals[start] = totals[start + 1] + softened - (notice(start + 1) - notice(start))
        if not start and totals[0] <= self.target:
            return 0.0, totals[0]
        frontier = 0.0 if not start else self.positions[units[start - 1].indexes[-1]] + 1
        for j in range(max(start - 1, 0), last):
            if j >= start and self.leaving_room and totals[j] <= self.target + self.room \
                    and totals[j + 1] < self.target - self.room:
                return frontier, totals[j]
            frontier = self.positions[units[j].indexes[-1]] + 1
            if totals[j + 1] <= self.target:
                return frontier, totals[j + 1]
        return None, totals[last]

    def _drop_items(self, units: list[Unit], candidates: Collection[int]) -> list[tuple[int, Callable[[], int]]]:
        """Each unit at its last message's position, with what dropping it (and every unit before it) saves over
        keeping it compacted, the notice's growth included."""
        notice = self._notices(units)

        def saving_of(j: int, unit: Unit) -> Callable[[], int]:
            def saving() -> int:
                kept = sum(self.tokens[i] - (self.saving(i, "heavy") if i in candidates else 0) for i in unit.indexes)
                return kept - (notice(j + 1) - notice(j))
            return saving
        return [(self.positions[unit.indexes[-1]], saving_of(j, unit)) for j, unit in enumerate(units)]

    def rewrite(self, index: int, new_message: Mapping[str, Any], action: ActionKind,
                new_tokens: int | None = None, *, grow: bool = False) -> None:
        """Make ``new_message`` the message's version, with its action, count and the total: only when it is
        smaller than the current version (a cut), or with ``grow`` only when it is larger (a cut given back in
        part, ``_restore``); otherwise the message stays as it is."""
        if new_tokens is None:
            new_tokens = self.counter.count_message(new_message, index=index)
        if (new_tokens <= self.tokens[index]) if grow else (new_tokens >= self.tokens[index]):
            return  # would not save anything (or, growing, give anything back): leave the message as it is
        original = self.messages[index]
        self.actions[index] = MessageAction(
            action=action,
            index=index,
            role=original["role"],
            turn=self.turn_of[index],
            tokens_before=self.original_tokens[index],
            tokens_after=new_tokens,
            chars_before=content_chars(original),
            chars_after=content_chars(new_message),
            content_hash="",  # hashed once, for the final actions only (``engine.trim_request``)
            tool_call_id=original.get("tool_call_id"),
        )
        self.total -= self.tokens[index] - new_tokens
        self.tokens[index] = new_tokens
        self.edited[index] = new_message
        self.moves += 1

    def reduce(self, index: int, *, floor: int, action: ActionKind, needed: int | None = None) -> None:
        """Keep the message's head and tail, cutting ``needed`` tokens (by default the remaining excess); never
        below ``floor`` characters (``Versions.graded``)."""
        if len(message_text(self.messages[index])) <= floor or self.total <= self.target:
            return
        if needed is None:
            needed = self.total - self.target
        new_message, new_tokens = self.graded(index, needed=needed, floor=floor, action=action)
        self.rewrite(index, new_message, action, new_tokens)

    def protected_tokens(self, *, fixed_tokens: int, tools_tokens: int) -> dict[str, int]:
        """Where the remaining tokens sit, for the error message and the report."""
        return where_tokens(self.messages, [self.tokens[i] if alive else None for i, alive in enumerate(self.alive)],
                            latest_start=self.latest_start, opening=self.opening | {self.pinned},
                            fixed_tokens=fixed_tokens, tools_tokens=tools_tokens)


class _Lazy(dict[int, int]):
    """A mapping whose values are computed on first access (``TrimState.settle``'s softening savings)."""

    def __init__(self, compute: Callable[[int], int]) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, key: int) -> int:
        value = self[key] = self.compute(key)
        return value


def opening_of(messages: Sequence[Mapping[str, Any]], policy: TrimPolicy
               ) -> tuple[frozenset[int], tuple[tuple[int, int], ...], int | None]:
    """What ``policy`` keeps of the opening of ``messages``: the leading run and the acknowledged pairs
    (``structure.opening_parts``, none with ``keep_opening_context`` off), and the pinned first user message
    (None without ``pin_first_user_message``)."""
    leading, acknowledged = (opening_parts(messages, context_min_chars=policy.context_min_chars,
                                           ack_max_chars=policy.ack_max_chars)
                             if policy.keep_opening_context else (frozenset(), ()))
    pinned = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None) \
        if policy.pin_first_user_message else None
    return leading, acknowledged, pinned
