"""The structure a chat-shaped request must have to be counted: a list of messages, each an object with a known
role, string or list content and a list of tool calls (``MalformedRequestError`` naming the field otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import MalformedRequestError

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def validate_messages(messages: Any) -> list[Any]:
    if messages is None:
        raise MalformedRequestError("messages", "missing")
    if not isinstance(messages, list):
        raise MalformedRequestError("messages", f"expected a list of messages, got {type(messages).__name__}")
    return messages


def validate_message(message: Any, index: int) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        raise MalformedRequestError(where, f"expected an object, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str):
        raise MalformedRequestError(f"{where}.role", "missing or not a string")
    if role not in CHAT_ROLES:
        # never quoted: a role is client text (a 400's message reaches LiteLLM's error log and the record)
        raise MalformedRequestError(f"{where}.role", f"an unknown role (expected {', '.join(sorted(CHAT_ROLES))})")
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise MalformedRequestError(
            f"{where}.content", f"expected a string, a list of parts or null, got {type(content).__name__}"
        )
    tool_calls = message.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise MalformedRequestError(f"{where}.tool_calls", f"expected a list, got {type(tool_calls).__name__}")


def empty_texts(content: Any) -> int:
    """How many texts of a message's content are empty or blank: a string content, or each text part (a Responses
    input's ``input_text`` and ``output_text`` too: LiteLLM's bridge makes them chat text parts)."""
    if isinstance(content, str):
        return int(not content.strip())
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, Mapping) and isinstance(part.get("type"), str)
               and part["type"] in _TEXT_PARTS and (not isinstance(part.get("text"), str) or not part["text"].strip()))
