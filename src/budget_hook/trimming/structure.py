"""The shape of a chat conversation: turns, tool-call groups and pairing checks.

Contract: pure functions over a list of OpenAI chat messages (already validated by ``counting``).

* ``split_turns(messages)`` cuts the conversation into turns: a turn starts at each ``user`` message and
  runs to the next one; messages before the first user message form a preamble turn. A turn therefore
  always carries an assistant ``tool_calls`` message together with all of its ``tool`` results, so a
  trimmer that drops whole turns cannot orphan a tool result.
* ``pairing_problems(messages)`` lists every violation of the providers' rule: each ``tool`` message
  answers a ``tool_calls`` id of the assistant message before it (tool results in between allowed), and
  every such id is answered. It is used to tell a request that arrived broken from one we broke.
* ``opening_parts(messages, ...)`` finds the opening context (the leading run before the first reply, and
  acknowledged context); ``opening_context`` is the same as one set.
* ``drop_units(messages, kept)`` lists what may leave together, oldest first, never more than a tool step:
  the tool steps (an assistant message with the results of its calls) of every turn, then an older turn's
  question with its answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .report import message_text

PROTECTED_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class Turn:
    number: int
    indexes: tuple[int, ...]


def split_turns(messages: Sequence[Mapping[str, Any]]) -> tuple[Turn, ...]:
    turns: list[list[int]] = []
    for index, message in enumerate(messages):
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(index)
    return tuple(Turn(number, tuple(indexes)) for number, indexes in enumerate(turns))


def latest_turn_start(messages: Sequence[Mapping[str, Any]]) -> int:
    """Index of the last user message (0 when there is none: then everything is the latest turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return 0


def thought_once_step(messages: Sequence[Any], start: int, thinks: Callable[[Mapping[str, Any]], bool]) -> int | None:
    """The first assistant step of the turn from ``start`` when that step alone shows its thinking (``thinks``; the
    request asks for thinking: the caller's check). Claude without interleaved thinking thinks once, at a turn's first
    step, and Anthropic refuses a turn in progress whose first step does not open with it (a tenth review: a trim
    dropped it), so that step never leaves. A turn whose every step thinks (interleaved) needs none kept."""
    steps = [i for i in range(start, len(messages)) if isinstance(messages[i], Mapping)
             and messages[i].get("role") == "assistant"]
    shown = [thinks(messages[i]) for i in steps]
    return steps[0] if shown and shown[0] and not all(shown) else None


def is_result(message: Mapping[str, Any]) -> bool:
    """Is this chat message a tool result (what ``keep_recent_tool_results`` counts)?"""
    return message.get("role") in ("tool", "function")


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    return [str(call.get("id")) for call in calls if isinstance(call, Mapping)]


def pairing_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    problems: list[str] = []
    open_ids: dict[str, int] = {}  # call id -> index of the assistant message that made it
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in open_ids:
                problems.append(f"messages[{index}] answers tool_call_id {call_id!r}, which no preceding assistant "
                                "message opened")
            else:
                del open_ids[call_id]
            continue
        for call_id, opener in open_ids.items():
            problems.append(f"messages[{opener}] tool call {call_id!r} has no tool result")
        open_ids = {}
        if role == "assistant":
            open_ids = dict.fromkeys(tool_call_ids(message), index)
        if role == "function" and index > 0 and not messages[index - 1].get("function_call"):
            problems.append(f"messages[{index}] is a function result without a preceding function_call")
    for call_id, opener in open_ids.items():
        problems.append(f"messages[{opener}] tool call {call_id!r} has no tool result")
    return problems


def opening_context(messages: Sequence[Mapping[str, Any]], *, context_min_chars: int, ack_max_chars: int
                    ) -> frozenset[int]:
    """Every index of the opening context (``opening_parts``, as one set)."""
    leading, acknowledged = opening_parts(messages, context_min_chars=context_min_chars, ack_max_chars=ack_max_chars)
    return leading | frozenset(i for pair in acknowledged for i in pair)


def opening_parts(messages: Sequence[Mapping[str, Any]], *, context_min_chars: int, ack_max_chars: int
                  ) -> tuple[frozenset[int], tuple[tuple[int, int], ...]]:
    """The messages a client sends before the work starts, which an agent needs on every turn.

    * the leading run: every message before the first assistant reply or tool result (the task, Codex's
      ``# AGENTS.md`` and ``<environment_context>`` messages, Claude Code's ``<system-reminder>`` blocks,
      system and developer messages);
    * acknowledged context: a user message of at least ``context_min_chars`` characters answered only by an
      acknowledgement (``is_acknowledgement``) and followed by a user message, with that acknowledgement:
      the files aider added to the chat ("I have *added these files to the chat*" + "Ok"), its repository
      map, a document pasted before the questions.

    Returns the leading run, and the acknowledged pairs apart: the ladder's last rung may drop those,
    oldest first, rather than refuse the request.
    """
    leading: set[int] = set()
    for index, message in enumerate(messages):
        if message.get("role") not in ("user", "system", "developer"):
            break
        leading.add(index)
    acknowledged = []
    for index in range(len(messages) - 2):
        user, reply, after = messages[index], messages[index + 1], messages[index + 2]
        if (user.get("role") == "user" and reply.get("role") == "assistant" and after.get("role") == "user"
                and index not in leading
                and len(message_text(user)) >= context_min_chars and is_acknowledgement(reply, ack_max_chars)):
            acknowledged.append((index, index + 1))
    return frozenset(leading), tuple(acknowledged)


_ACKNOWLEDGEMENT = re.compile(r"^\W*(ok|okay|sure|got it|understood|noted|acknowledged|thanks|thank you)\b",
                              re.IGNORECASE)


def is_acknowledgement(message: Mapping[str, Any], max_chars: int) -> bool:
    """A short reply that only takes note ("Ok.", "Ok, any changes I propose will be to those files."): no tool
    call, no code, at most ``max_chars`` characters, opening with a word of assent. An agent's short command
    (SWE-agent's, aider's own edits) is no acknowledgement: its observation is not context."""
    text = message_text(message)
    if message.get("tool_calls") or message.get("function_call") or len(text) > max_chars:
        return False
    content = message.get("content")
    if isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") not in ("text", None)
                                         for p in content):
        return False
    return "```" not in text and bool(_ACKNOWLEDGEMENT.match(text))


@dataclass(frozen=True)
class Unit:
    """Messages that leave the request together, never more than one tool step: a tool step (an assistant
    message and the results of its calls), or a turn's head with its last step (its answer)."""

    indexes: tuple[int, ...]
    turn: int
    #: a step of the latest turn's agent loop (dropped only when nothing older can make the room)
    latest: bool = False


def drop_units(messages: Sequence[Mapping[str, Any]], kept: Collection[int]) -> list[Unit]:
    """The units that may be dropped, oldest first. ``kept``: indexes that never leave (a unit holding one
    is never dropped).

    In every turn each tool step after the head is one unit, except the turn's last step, which stays with
    the head: the latest turn's is the call being answered (or the final reply), an older turn's its
    answer, and a kept head followed by the next turn's user message would make two user messages
    neighbours. An older turn whose head may go ends with one more unit, its head and its last step (the
    question and its answer), so a long turn leaves a step at a time and its question and answer last. In an
    older turn whose head never leaves (the pinned task, a kept message), a last step that is a tool step leaves
    alone, after the turn's other steps: kept, it would outlive every newer step of the history (a review: the
    task's last tool step stayed while the newest result was dropped, or the request was refused). Shapes whose
    roles must alternate merge the user messages it makes neighbours (``shapes.base.merge_new_neighbours``).
    """
    units: list[Unit] = []
    turns = split_turns(messages)
    for turn in turns:
        latest = turn is turns[-1]  # the last user message and all after it (everything when no user message)
        head = turn.indexes[0] if messages[turn.indexes[0]].get("role") == "user" else None
        steps: list[list[int]] = []
        open_calls: set[str] = set()
        previous_role = None
        for index in turn.indexes:
            message = messages[index]
            role = message.get("role")
            if index == head:
                previous_role = role
                continue
            if (role == "assistant" and previous_role != "assistant" and not open_calls) or not steps:
                steps.append([])  # a step starts at a reply once every call before it has its result
            steps[-1].append(index)
            if role == "assistant":
                open_calls.update(tool_call_ids(message))
            elif role == "tool":
                open_calls.discard(str(message.get("tool_call_id")))
            previous_role = role
        steps = [step for step in steps if step]
        last = steps.pop() if steps else []
        units.extend(Unit(tuple(step), turn.number, latest) for step in steps
                     if not any(index in kept for index in step))
        rest = ([head] if head is not None else []) + last
        if latest or not rest:
            continue
        if not any(index in kept for index in turn.indexes):
            units.append(Unit(tuple(rest), turn.number))
        elif last and not any(index in kept for index in last) and any(is_result(messages[i]) for i in last):
            units.append(Unit(tuple(last), turn.number))  # the head never leaves: its last tool step goes alone
    return units


def where_tokens(messages: Sequence[Mapping[str, Any]], tokens: Sequence[int | None], *, latest_start: int,
                 opening: Collection[int | None], fixed_tokens: int, tools_tokens: int) -> dict[str, int]:
    """Where a request's tokens sit (``tokens``: each message's, None for one dropped): system messages, the
    opening context (``opening``, the pinned message included), the latest turn (from ``latest_start``),
    older history; tool definitions and the request's own overhead."""
    sizes = {"system": 0, "opening_context": 0, "latest_turn": 0, "older_history": 0}
    for index, size in enumerate(tokens):
        if size is None:
            continue
        if messages[index].get("role") in PROTECTED_ROLES:
            key = "system"
        elif index >= latest_start:
            key = "latest_turn"
        elif index in opening:
            key = "opening_context"
        else:
            key = "older_history"
        sizes[key] += size
    sizes["tool_definitions"] = tools_tokens
    sizes["request_overhead"] = fixed_tokens - tools_tokens
    return sizes
