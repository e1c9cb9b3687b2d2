"""The OpenAI chat shape (``/chat/completions``): the view is the body itself.

Everything else is trimmed by being seen as a chat request; this shape needs no conversion and no
write-back: the trimmer's result is the request to forward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..budget import OUTPUT_TOKEN_FIELDS
from ..counting import canonical_json
from ..counting.parts import unreadable_as_sent
from ..trimming import MessageAction, message_text
from ..trimming.structure import pairing_problems, thought_once_step
from .base import CACHE_PREFIX_NOTE, ConversationShape, View, touched_item, unreadable_parts
from .references import chat_references

_CHAT_ONLY_ROLES = frozenset({"system", "developer", "tool", "function"})


def _detect(body: Mapping[str, Any]) -> bool:
    return isinstance(body.get("messages"), list)


def _problems(body: Mapping[str, Any]) -> list[str]:
    messages = body.get("messages")
    return pairing_problems(messages) if isinstance(messages, list) else []


def _unreadable_part(part: Any) -> str | None:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in ("video_url", "audio_url"):  # vLLM fetches either; its tokens count toward the model's length
        value = part.get(kind)
        url = value.get("url") if isinstance(value, Mapping) else value
        inline = isinstance(url, str) and url.startswith("data:")
        return None if inline else f"{'a video' if kind == 'video_url' else 'audio'} by URL: its content is not in " \
            "the request"
    return unreadable_as_sent(part)  # as what LiteLLM sends for it: a PDF in an image_url, a document by URL...


def _unreadable(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    return unreadable_parts(body.get("messages"), "messages", "content", _unreadable_part)


def _view(body: Mapping[str, Any]) -> View:
    """The body itself, with what a trim must leave as it is where it can: the prompt-cache prefix (up to the last
    message carrying a ``cache_control`` breakpoint, on the message or one of its parts: LiteLLM sends them to
    Claude; given up only when nothing else fits, and then the record's notes say ``cache_prefix_rewritten``), and,
    with thinking on, the latest turn's first assistant message when it alone carries ``thinking_blocks`` (Anthropic
    refuses a turn in progress that does not open with its thinking; a tenth review found a trim that dropped it), and
    the latest turn's assistant messages that carry ``thinking_blocks``, never rewritten (a fourteenth review)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return View(body)
    breakpoint_at, latest = -1, -1
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if message.get("cache_control") is not None or (isinstance(content, list) and any(
                isinstance(part, Mapping) and part.get("cache_control") is not None for part in content)):
            breakpoint_at = index
        if message.get("role") == "user":
            latest = index
    # the turn thought once, at its first step (not interleaved), with thinking on: that step stays
    opening = thought_once_step(messages, latest + 1, _shows_thinking) if latest >= 0 and _thinking_on(body) else None
    # the turn in progress's assistant messages that carry thinking go as they came (Anthropic takes the turn's
    # assistant messages back as it sent them), or leave with their step; /v1/messages freezes the same ones
    frozen = frozenset(i for i in range(latest + 1, len(messages)) if isinstance(messages[i], Mapping)
                       and messages[i].get("role") == "assistant" and _shows_thinking(messages[i]))
    return View(body, protected=frozenset(range(breakpoint_at + 1)), no_edit=frozen,
                keep=frozenset(() if opening is None else (opening,)))


def _shows_thinking(message: Mapping[str, Any]) -> bool:
    blocks = message.get("thinking_blocks")
    return isinstance(blocks, list) and bool(blocks)


def _thinking_on(body: Mapping[str, Any]) -> bool:
    """Does the request ask Claude to think (``thinking``, or a ``reasoning_effort`` LiteLLM maps to it)?"""
    thinking, effort = body.get("thinking"), body.get("reasoning_effort")
    effort = effort.get("effort") if isinstance(effort, Mapping) else effort
    return (isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")) or \
        effort not in (None, "none", "")


def _touched_content(body: Mapping[str, Any], action: MessageAction) -> str:
    message = touched_item(body, "messages", action)
    if message is None:
        return ""
    return message_text(message) or (canonical_json(message.get("content")) if message.get("content") else "")


SHAPE = ConversationShape(
    name="chat",
    call_types=frozenset({"acompletion", "completion"}),
    routes=("/chat/completions", "/v1/chat/completions"),
    metadata_key="metadata",
    output_token_fields=OUTPUT_TOKEN_FIELDS,
    content_fields=("messages", "tools", "functions", "response_format", "tool_choice", "web_search_options"),
    param="messages",
    output_param="max_tokens",
    detect=_detect,
    view=_view,
    protected_note=CACHE_PREFIX_NOTE,
    problems=_problems,
    touched_content=_touched_content,
    unreadable=_unreadable,
    references=chat_references,
)
