"""What leaves a trim's request: whole units dropped (``drop_unit``), given back when a later drop freed the
room (``_restore_units``), and the notice that tells the model (``Notice``), counted exactly after every drop.
Mixed into ``state.TrimState``, which sets the state (as ``versions.Versions`` is)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..counting import TokenCounter
from .report import MessageAction, Notice, content_chars, notice_text
from .structure import Turn, Unit
from .trim_policy import TrimPolicy


class Removals:
    """Dropping and restoring units, and the notice (mixed into ``state.TrimState``)."""

    counter: TokenCounter
    messages: list
    policy: TrimPolicy
    original_tokens: tuple[int, ...]
    tokens: list[int]
    total: int
    target: int
    alive: list[bool]
    edited: dict[int, Mapping[str, Any]]
    actions: dict[int, MessageAction]
    notice_tokens: int
    dropped_messages: int
    dropped_tokens: int
    moves: int
    turns: tuple[Turn, ...]
    turn_of: list[int]
    latest_start: int
    keep: frozenset[int]
    protected: frozenset[int]
    _notice_sizes: dict[tuple[int, int], int]

    def _restore_units(self, drops: Sequence[tuple[Unit, tuple[int, ...]]]) -> None:
        """Give back, oldest first, the units of ``drops`` (each with the messages its drop took; dropped oldest
        first, to the aim) that the room the later drops freed now holds whole: so a whole-unit drop never cuts
        much past the aim (a small conversation's large second step leaves alone, its small first one comes
        back; an older history's small steps come back when the last to leave was large). Oldest first and
        only while each comes back, so the units left out stay one run (not two gaps); a unit comes back only
        where it reads as it did: a tool step only while its turn's question is kept."""
        for unit, indexes in drops:
            head = self.turns[self.turn_of[unit.indexes[0]]].indexes[0] if self.turns else None
            if self.messages[unit.indexes[0]].get("role") != "user" and (
                    head is None or head in unit.indexes or not self.alive[head]
                    or self.messages[head].get("role") != "user"):
                return
            count, tokens = len(indexes), sum(self.original_tokens[i] for i in indexes)
            notice = self._notice_for(-count, -tokens) if self.dropped_messages > count else 0
            if not indexes or self.total + tokens + notice - self.notice_tokens > self.target:
                return
            for index in indexes:
                self.alive[index] = True
                self.tokens[index] = self.original_tokens[index]
                del self.actions[index]
            if self.policy.notify_model:  # what ``drop_unit`` counted for the notice
                self.dropped_messages -= count
                self.dropped_tokens -= tokens
            self.total += tokens + notice - self.notice_tokens
            self.notice_tokens = notice
            self.moves += 1

    def _notices(self, units: Sequence[Unit]) -> Callable[[int], int]:
        """The notice's size once ``units[:j]`` are dropped on top of what already was, for any j (prefix sums of
        their alive messages and original tokens; each size counted when asked)."""
        messages, tokens = [0], [0]
        for unit in units:
            alive = [i for i in unit.indexes if self.alive[i]]
            messages.append(messages[-1] + len(alive))
            tokens.append(tokens[-1] + sum(self.original_tokens[i] for i in alive))
        return lambda j: self.notice_tokens if not j else self._notice_for(messages[j], tokens[j])

    def _notice_size(self, dropping: Iterable[int]) -> int:
        """The notice's size with ``dropping`` dropped on top of what already was."""
        if not self.policy.notify_model:
            return 0
        indexes = [i for i in dropping if self.alive[i]]
        return self._notice_for(len(indexes), sum(self.original_tokens[i] for i in indexes))

    def _notice_for(self, messages: int, tokens: int) -> int:
        """The notice's size with ``messages`` more messages of ``tokens`` tokens dropped."""
        if not self.policy.notify_model or not (messages or self.dropped_messages):
            return 0
        key = (self.dropped_messages + messages, self.dropped_tokens + tokens)
        if key not in self._notice_sizes:
            # where numbers cost by their length, the notice is counted with numbers of the same lengths (and
            # the same noun): a handful of distinct texts, counted once per process (the count cache)
            said = (key if not self.counter.prices_numbers_by_length else
                    tuple(number if number < 2 else int("2" * len(str(number))) for number in key))
            self._notice_sizes[key] = self.counter.count_message(self.notice_message(notice_text(*said)))
        return self._notice_sizes[key]

    def drop_unit(self, unit: Unit) -> tuple[int, ...]:
        """Drop the unit's messages still alive; returns them (what ``_restore_units`` gives back)."""
        dropping = tuple(index for index in unit.indexes if self.alive[index])
        if not dropping:
            return dropping
        size = self._notice_size(dropping)
        for index in dropping:
            self.drop(index)
        if self.policy.notify_model:
            # The notice the model will read is part of the request: counted exactly after every drop, so the
            # stages stop on the true total.
            self.dropped_messages += len(dropping)
            self.dropped_tokens += sum(self.original_tokens[index] for index in dropping)
            self.total += size - self.notice_tokens
            self.notice_tokens = size
        return dropping

    def drop(self, index: int) -> None:
        original = self.messages[index]
        # A message compacted earlier and then dropped is reported once, as dropped, with its
        # original size: the log says what left the request, not the intermediate state.
        self.actions[index] = MessageAction(
            action="dropped",
            index=index,
            role=original["role"],
            turn=self.turn_of[index],
            tokens_before=self.original_tokens[index],
            tokens_after=0,
            chars_before=content_chars(original),
            chars_after=0,
            content_hash="",  # hashed once, for the final actions only (``engine.trim_request``)
            tool_call_id=original.get("tool_call_id"),
        )
        self.total -= self.tokens[index]
        self.tokens[index] = 0
        self.alive[index] = False
        self.edited.pop(index, None)
        self.moves += 1

    def dropped_turns(self) -> tuple[int, ...]:
        """Turns none of whose messages is left."""
        return tuple(turn.number for turn in self.turns if not any(self.alive[i] for i in turn.indexes))

    @staticmethod
    def notice_message(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def finish_notice(self) -> Notice | None:
        """The notice for what was dropped (already counted in ``total``)."""
        if not self.notice_tokens:
            return None
        first = min(a.index for a in self.actions.values() if a.action == "dropped")
        head, rewrites = self.latest_start, False
        if head < first and self.messages[head].get("role") == "user" and self.alive[head] and any(
                self.alive[i] for i in self.keep if head < i < first):
            # a cut inside the latest turn after a message that never leaves (its opening thinking, ``View.keep``):
            # the notice follows the turn's question, so that step stays the turn's first (Anthropic refuses a
            # turn in progress that does not open with its thinking), though it lands inside a protected prefix
            first, rewrites = head + 1, any(i > head for i in self.protected)
        kept_before = [i for i in range(first) if self.alive[i]]
        return Notice(text=notice_text(self.dropped_messages, self.dropped_tokens),
                      after=kept_before[-1] if kept_before else None, position=len(kept_before),
                      messages=self.dropped_messages, tokens=self.dropped_tokens, rewrites_cache_prefix=rewrites)
