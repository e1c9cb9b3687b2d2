"""What a trim did: one ``MessageAction`` per touched message, the ``TrimReport``, and the markers left
in rewritten content. Content is referenced by a short hash, never stored.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..budget import Budget
from ..counting import TokenCounter
from ..counting.cache import CountCache
from ..counting.canonical import canonical_json
from ..errors import CannotFitError

#: every kind of action the trimmer can take; ``ladder.REDUCTIONS`` declares each
ActionKind = Literal["images_removed", "compacted", "dropped", "shortened"]

COMPACTED_MARKER = "[budget_hook: tool result compacted"
SOFTENED_MARKER = "[budget_hook: tool result compacted in the middle"
NOTICE_MARKER = "[budget_hook: the gateway removed"
IMAGE_REMOVED_MARKER = "[budget_hook: image removed"
#: the text an image removed by ``drop_old_images`` becomes, in every shape
IMAGE_PLACEHOLDER = f"{IMAGE_REMOVED_MARKER} by the gateway to fit the context budget]"
#: chat's, Responses' and Anthropic's image part types
_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
SHORTENED_MARKER = "[budget_hook: message shortened"
_ERROR_RESULT = re.compile(r"^\s*(error|exception|traceback|failed|failure)\b", re.IGNORECASE)


@dataclass(frozen=True)
class MessageAction:
    """One message the trimmer touched. Indexes refer to the original request."""

    action: ActionKind
    index: int
    role: str
    turn: int
    tokens_before: int
    tokens_after: int
    chars_before: int
    chars_after: int
    content_hash: str
    tool_call_id: str | None = None
    #: native shapes: the content block (Anthropic) within message ``index`` this action is about
    block: int | None = None

    def as_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for optional in ("tool_call_id", "block"):
            if data[optional] is None:
                del data[optional]
        return data


@dataclass(frozen=True)
class Notice:
    """What the model is told when messages were dropped: one user message, inserted where the first cut is
    (a shape without loose user messages merges it into a neighbouring one)."""

    text: str
    #: view index of the last kept message before the cut (None: the cut is right after the system prompt)
    after: int | None
    #: its index in the trimmed request's ``messages``
    position: int
    messages: int
    tokens: int
    #: placed before a protected prompt-cache prefix ends (a thinking turn's question: ``Removals.finish_notice``)
    rewrites_cache_prefix: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "tokens": self.tokens}


def notice_text(messages: int, tokens: int) -> str:
    noun = "message" if messages == 1 else "messages"
    return (f"{NOTICE_MARKER} {messages} earlier {noun} (~{tokens} tokens) here to fit the model's context window; "
            "ask the user for anything you need from them]")


@dataclass(frozen=True)
class TrimReport:
    model: str
    method: str
    changed: bool
    tokens_before: int
    tokens_after: int
    budget: Budget
    target: int
    actions: tuple[MessageAction, ...] = ()
    dropped_turns: tuple[int, ...] = ()
    protected_tokens: Mapping[str, int] = field(default_factory=dict)
    #: native shapes: facts about the request's own structure (a prompt-cache prefix that had to be
    #: rewritten, history held by the server that the gateway cannot see...)
    notes: tuple[str, ...] = ()
    #: the notice the forwarded request carries (None: nothing dropped, or ``notify_model`` off)
    notice: Notice | None = None
    #: the growth anchor the trim was computed at (``engine.growth_anchor``): the messages from this index on
    #: are forwarded verbatim, added since an earlier request was trimmed (None: the request trimmed afresh)
    anchor: int | None = None

    @property
    def dropped(self) -> tuple[MessageAction, ...]:
        return tuple(a for a in self.actions if a.action == "dropped")

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "method": self.method,
            "changed": self.changed,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "budget": self.budget.as_dict(),
            "target": self.target,
            "dropped_turns": list(self.dropped_turns),
            "actions": [a.as_dict() for a in self.actions],
            "protected_tokens": dict(self.protected_tokens),
            **({"notes": list(self.notes)} if self.notes else {}),
            **({"notice": self.notice.as_dict()} if self.notice else {}),
            **({"anchor": self.anchor} if self.anchor is not None else {}),
        }


@dataclass(frozen=True)
class TrimResult:
    request: Mapping[str, Any]
    report: TrimReport


#: what a content hash is taken over: ``json.dumps(message, sort_keys=True, separators=(",", ":"))``, the form
#: anyone can reproduce (non-ASCII escaped: also twice as fast to write as ``canonical_json``'s raw UTF-8)
_HASHED_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)

#: content hashes of messages seen recently: a resent history that is trimmed again drops the same
#: messages, and their SHA-256 over their JSON would otherwise be recomputed on every request
_HASHES = CountCache(max_entries=16_384)


def content_hash(message: Mapping[str, Any]) -> str:
    """Stable short hash of a message (role, content, calls), for logs that must not store content."""
    key = None
    if len(message) == 2 and isinstance(message.get("content"), str) and isinstance(message.get("role"), str):
        key = hash((message["role"], message["content"]))  # the common case, without sorting
    elif all(isinstance(value, str) for value in message.values()):
        key = hash(tuple(sorted(message.items())))  # plain-text messages: a cheap key for the memo
    if key is not None:
        cached = _HASHES.get(key)
        if cached is not None:
            return str(cached)
    digest = hashlib.sha256(_HASHED_JSON.encode(message).encode("ascii")).hexdigest()[:16]
    if key is not None:
        _HASHES.put(key, digest)
    return digest


def message_text(message: Mapping[str, Any]) -> str:
    """The text a message carries (string content or the text of its text parts)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def content_chars(message: Mapping[str, Any]) -> int:
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    if content is None:
        return 0
    return len(canonical_json(content))


def is_error_result(message: Mapping[str, Any]) -> bool:
    """A tool result that reports a failure: the model needs it to correct itself, so it is kept."""
    if message.get("is_error") is True:
        return True
    return bool(_ERROR_RESULT.match(message_text(message)[:200]))


def is_compacted(message: Mapping[str, Any]) -> bool:
    """Compacted to its head (a softened result, which kept its head and tail, may still be)."""
    return f"{COMPACTED_MARKER} by" in message_text(message)


def is_softened(message: Mapping[str, Any]) -> bool:
    return SOFTENED_MARKER in message_text(message)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def check_native_fit(counter: TokenCounter, budget: Budget, tokens_before: int, tokens_after: int, *,
                     remedy: str) -> None:
    """A native shape's trimmed request must hold on its own fresh count, whatever its view said."""
    if tokens_after > budget.budget:
        raise CannotFitError(
            f"{counter.model}: the trimmed request still needs {tokens_after} input tokens, over the input budget "
            f"of {budget.budget} tokens. This model's maximum context length is {budget.window} tokens. {remedy}",
            {**budget.as_dict(), "model": counter.model, "tokens_before": tokens_before,
             "tokens_after_trimming": tokens_after})


def cannot_fit(model: str, budget: Budget, before: int, after: int, protected: Mapping[str, int]) -> CannotFitError:
    parts = {"latest_turn": "latest turn", "system": "system", "tool_definitions": "tool definitions",
             "opening_context": "opening context",
             # what stays of the older history (a message no rule may drop): named only when some does
             **({"older_history": "older history"} if protected.get("older_history") else {})}
    largest = max(parts, key=lambda k: protected.get(k, 0))
    capped = f", capped at {budget.cap}" if budget.cap else ""
    remedies = ["shorten the latest message or its tool output" if protected.get("latest_turn") else "",
                "send fewer tool definitions" if protected.get("tool_definitions") else "",
                "send fewer files or a shorter system prompt" if protected.get("opening_context")
                or protected.get("system") else "",
                "start a new conversation" if protected.get("older_history") else "",
                "lower max_tokens" if budget.output_reserve else "",
                "use a model with a larger context window",
                "or an operator can let the gateway drop or reduce the opening context (drop_opening_context, "
                "reduce_opening_context, keep_opening_context)" if protected.get("opening_context") else ""]
    message = (
        f"{model or 'model'}: the request needs {after} input tokens after trimming (it had {before}), but the input "
        f"budget is {budget.budget} tokens (window {budget.window} - output reserve {budget.output_reserve} - "
        f"safety margin {budget.safety_margin}{capped}). This model's maximum "
        f"context length is {budget.window} tokens. What cannot be trimmed: "
        + ", ".join(f"{label} {protected.get(key, 0)}" for key, label in parts.items())
        + f" tokens; the largest is the {parts[largest]}. "
        + _sentence("; ".join(r for r in remedies if r))
    )
    facts = {
        **budget.as_dict(),
        "model": model,
        "tokens_before": before,
        "tokens_after_trimming": after,
        "protected_tokens": dict(protected),
    }
    return CannotFitError(message, facts)


def all_text(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) or (isinstance(content, list) and bool(content) and all(
        isinstance(p, Mapping) and p.get("type") in ("text", "input_text") and isinstance(p.get("text"), str)
        for p in content))


def is_image(part: Any) -> bool:
    kind = part.get("type") if isinstance(part, Mapping) else None
    return isinstance(kind, str) and kind in _IMAGE_PART_TYPES


def image_placeholder() -> dict[str, str]:
    """A removed image, as a chat text part."""
    return {"type": "text", "text": IMAGE_PLACEHOLDER}
