"""The shape of a chat conversation: turns, tool-call groups and pairing checks.

Contract: pure functions over a list of OpenAI chat messages (already validated by ``counting``).

* ``split_turns(messages)`` cuts the conversation into turns: a turn starts at each ``user`` message and
  runs to the next one; messages before the first user message form a preamble turn. A turn therefore
  always carries an assistant ``tool_calls`` message together with all of its ``tool`` results, so a
  trimmer that drops whole turns cannot orphan a tool result.
* ``pairing_problems(messages)`` lists every violation of the providers' rule: each ``tool`` message
  answers a ``tool_calls`` id of the assistant message before it (tool results in between allowed), and
  every such id is answered. It is used to tell a request that arrived broken from one we broke.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
