"""Bring a chat request under its token budget, in priority order, without breaking it.

Contract: ``trim_request(request, counter=..., budget=..., policy=...)`` returns a ``TrimResult``
(the request to forward and a ``TrimReport`` of what happened) or raises ``CannotFitError``.

* A request that fits its budget comes back as **the same object**, unchanged. The caller's request
  is never mutated: a trimmed request is a new dict with a new ``messages`` list.
* When over budget it trims to ``target_ratio`` of the budget (default 90%), so that a growing chat
  does not re-trim, and bust the provider's prompt cache, on every turn. Steps, each stopping as soon
  as the request fits the target, in an order that does not depend on the budget (so a larger budget
  never keeps fewer tokens):

  1. **compact old tool results**, oldest first: keep the head (``tool_result_keep_chars``) and a
     marker saying how much was removed. Never the ``keep_recent_tool_results`` most recent ones,
     nor small results, nor results that report an error, nor one already compacted (idempotent).
  2. **drop the oldest whole turns** (a user message and everything up to the next user message, so an
     assistant ``tool_calls`` message always leaves together with all of its results).
  3. **shorten long assistant messages** still present, oldest first (head + marker; ``tool_calls``
     are never touched).

* Never dropped or edited: system/developer messages, the pinned first user message
  (``pin_first_user_message``), and the latest turn (the last user message and everything after it).
  With ``edit_latest_turn_history`` (default on) steps 1 and 3 may also work *inside* the latest turn
  on its history — the agent loop that follows the last user message — but never on the last user
  message itself, the final assistant message, or the K most recent tool results; no message of the
  latest turn is ever dropped. Off, the latest turn is kept verbatim.
* Still over the budget (not just the target) after all steps: ``CannotFitError`` with every number.

Every affected message is reported with its original index, role, token sizes and a content hash, so
logs can reference content without storing it. Per-message counts come from one ``count_request``
pass; only rewritten messages are re-counted.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from collections.abc import Collection, Mapping
from typing import Any

from .budget import Budget
from .count_cache import CountCache
from .counting import TokenCounter, canonical_json
from .errors import CannotFitError, PolicyError
from .structure import PROTECTED_ROLES, latest_turn_start, split_turns

COMPACTED_MARKER = "[budget_hook: tool result compacted"
IMAGE_REMOVED_MARKER = "[budget_hook: image removed"
SHORTENED_MARKER = "[budget_hook: message shortened"
_ERROR_RESULT = re.compile(r"^\s*(error|exception|traceback|failed|failure)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TrimPolicy:
    """Trimmer knobs; defaults are what a production gateway should start with."""

    target_ratio: float = 0.9
    compact_tool_results: bool = True
    tool_result_keep_chars: int = 500
    tool_result_min_chars: int = 1000
    keep_recent_tool_results: int = 3
    drop_old_turns: bool = True
    pin_first_user_message: bool = False
    shorten_assistant_messages: bool = True
    assistant_keep_chars: int = 1000
    assistant_min_chars: int = 2000
    edit_latest_turn_history: bool = True
    #: step 0, off by default: replace images older than the latest turn with a short placeholder
    #: before anything else (screenshots are often the largest thing in an agent's history)
    drop_old_images: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.target_ratio <= 1:
            raise PolicyError(f"target_ratio must be in (0, 1], got {self.target_ratio}")
        for name in ("tool_result_keep_chars", "tool_result_min_chars", "keep_recent_tool_results",
                     "assistant_keep_chars", "assistant_min_chars"):
            if getattr(self, name) < 0:
                raise PolicyError(f"{name} must be >= 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class MessageAction:
    """One message the trimmer touched. Indexes refer to the original request."""

    action: str  # "images_removed" | "compacted" | "dropped" | "shortened"
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
        }


@dataclass(frozen=True)
class TrimResult:
    request: Mapping[str, Any]
    report: TrimReport


#: content hashes of messages seen recently: a resent history that is trimmed again drops the same
#: messages, and their SHA-256 over canonical JSON would otherwise be recomputed on every request
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
            return cached
    digest = hashlib.sha256(canonical_json(message).encode("utf-8", "surrogatepass")).hexdigest()[:16]
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


def _content_chars(message: Mapping[str, Any]) -> int:
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
    return COMPACTED_MARKER in message_text(message)


def trim_request(
    request: Mapping[str, Any],
    *,
    counter: TokenCounter,
    budget: Budget,
    policy: TrimPolicy = TrimPolicy(),
    protected: Collection[int] = (),
    no_edit: Collection[int] = (),
) -> TrimResult:
    """``protected``: indexes never dropped or edited, and whose turn is never dropped (e.g. a provider
    prompt-cache prefix). ``no_edit``: indexes that may leave with their whole turn but are never
    rewritten (e.g. an assistant message carrying signed thinking blocks)."""
    count = counter.count_request(request)
    messages: list[Mapping[str, Any]] = request["messages"]
    target = min(budget.budget, math.floor(budget.budget * policy.target_ratio))
    if count.total <= budget.budget:
        report = TrimReport(counter.model, count.method, False, count.total, count.total, budget, target)
        return TrimResult(request, report)

    state = _TrimState(counter, messages, list(count.per_message), count.total, target, policy,
                       frozenset(protected), frozenset(no_edit))
    if policy.drop_old_images:
        state.drop_old_images()
    if policy.compact_tool_results:
        state.compact_tool_results()
    if policy.drop_old_turns:
        state.drop_old_turns()
    if policy.shorten_assistant_messages:
        state.shorten_assistant_messages()

    fixed = count.overhead_tokens + count.tools_tokens
    protected = state.protected_tokens(fixed_tokens=fixed, tools_tokens=count.tools_tokens)
    if state.total > budget.budget:
        raise _cannot_fit(counter.model, budget, count.total, state.total, protected)

    new_messages = [state.edited.get(i, m) for i, m in enumerate(messages) if state.alive[i]]
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
        protected_tokens=protected,
    )
    return TrimResult(new_request, report)


class _TrimState:
    """Bookkeeping for one trim: which messages live, their current versions and token counts."""

    def __init__(self, counter: TokenCounter, messages: list, tokens: list[int], total: int, target: int,
                 policy: TrimPolicy, protected: frozenset = frozenset(), no_edit: frozenset = frozenset()) -> None:
        self.protected = protected
        self.no_edit = no_edit
        self.counter = counter
        self.messages = messages
        self.tokens = tokens
        self.total = total
        self.target = target
        self.policy = policy
        self.alive = [True] * len(messages)
        self.edited: dict[int, Mapping[str, Any]] = {}
        self.actions: dict[int, MessageAction] = {}  # at most one per message: its final fate
        self.dropped_turns: list[int] = []
        self.turns = split_turns(messages)
        self.turn_of = [0] * len(messages)  # a list: cheaper to build than a dict for long histories
        for turn in self.turns:
            for index in turn.indexes:
                self.turn_of[index] = turn.number
        self.latest_start = latest_turn_start(messages)
        self.pinned = self._pinned_index()
        # The latest turn is short: scan it backwards rather than the whole history.
        self.final_assistant = next(
            (i for i in range(len(messages) - 1, self.latest_start - 1, -1) if messages[i].get("role") == "assistant"),
            None,
        )

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
            or index == self.pinned
            or index == self.latest_start and message.get("role") == "user"
        )

    def editable(self, index: int) -> bool:
        """May steps 1 and 3 rewrite this message?"""
        if self.never_touched(index) or not self.alive[index] or index in self.no_edit:
            return False
        return not self.in_latest_turn(index) or self.policy.edit_latest_turn_history

    def fits(self) -> bool:
        return self.total <= self.target

    # --- steps ---------------------------------------------------------------------------------------

    def drop_old_images(self) -> None:
        """Step 0: replace image parts of messages older than the latest turn with a placeholder."""
        for index, message in enumerate(self.messages):
            if self.fits() or self.in_latest_turn(index):
                return
            content = message.get("content")
            if not self.editable(index) or not isinstance(content, list):
                continue
            replaced = [_image_placeholder(part) if _is_image(part) else part for part in content]
            if sum(1 for part in content if _is_image(part)):
                self._rewrite(index, {**message, "content": replaced}, "images_removed")

    def compact_tool_results(self) -> None:
        policy = self.policy
        results = [i for i, m in enumerate(self.messages) if m.get("role") in ("tool", "function")]
        recent = set(results[max(0, len(results) - policy.keep_recent_tool_results):])
        for index in results:
            if self.fits():
                return
            message = self.messages[index]
            if index in recent or not self.editable(index) or is_error_result(message) or is_compacted(message):
                continue
            text = message_text(message)
            original_chars = _content_chars(message)
            if original_chars < policy.tool_result_min_chars:
                continue
            head = text[: policy.tool_result_keep_chars]
            removed = original_chars - len(head)
            marker = (f"\n{COMPACTED_MARKER} by the gateway to fit the context budget: {removed} of "
                      f"{original_chars} characters (~{self.tokens[index]} tokens) removed]")
            self._rewrite(index, {**message, "content": head + marker}, "compacted")

    def drop_old_turns(self) -> None:
        protected = self.protected
        for turn in self.turns[:-1]:
            if self.fits():
                return
            if protected and not protected.isdisjoint(turn.indexes):
                continue  # a turn is dropped whole or not at all: partial drops could orphan tool results
            droppable = [i for i in turn.indexes if self.alive[i] and not self.never_touched(i)]
            if not droppable:
                continue
            for index in droppable:
                self._drop(index)
            self.dropped_turns.append(turn.number)

    def shorten_assistant_messages(self) -> None:
        policy = self.policy
        for index, message in enumerate(self.messages):
            if self.fits():
                return
            if message.get("role") != "assistant" or index == self.final_assistant or not self.editable(index):
                continue
            current = self.edited.get(index, message)
            text = message_text(current)
            if len(text) < policy.assistant_min_chars or SHORTENED_MARKER in text:
                continue
            head = text[: policy.assistant_keep_chars]
            marker = (f"\n{SHORTENED_MARKER} by the gateway to fit the context budget: "
                      f"{len(text) - len(head)} of {len(text)} characters removed]")
            self._rewrite(index, {**current, "content": head + marker}, "shortened")

    # --- primitives ----------------------------------------------------------------------------------

    def _rewrite(self, index: int, new_message: dict, action: str) -> None:
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
            chars_before=_content_chars(original),
            chars_after=_content_chars(new_message),
            content_hash=content_hash(original),
            tool_call_id=original.get("tool_call_id"),
        )
        self.total -= self.tokens[index] - new_tokens
        self.tokens[index] = new_tokens
        self.edited[index] = new_message

    def _drop(self, index: int) -> None:
        original = self.messages[index]
        # A message compacted in step 1 and then dropped is reported once, as dropped, with its
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
            chars_before=_content_chars(original),
            chars_after=0,
            content_hash=content_hash(original),
            tool_call_id=original.get("tool_call_id"),
        )
        self.total -= self.tokens[index]
        self.tokens[index] = 0
        self.alive[index] = False
        self.edited.pop(index, None)

    def protected_tokens(self, *, fixed_tokens: int, tools_tokens: int) -> dict[str, int]:
        """Where the remaining tokens sit, for the error message and the report."""
        sizes = {"system": 0, "pinned": 0, "latest_turn": 0, "older_history": 0}
        for index, alive in enumerate(self.alive):
            if not alive:
                continue
            role = self.messages[index].get("role")
            if role in PROTECTED_ROLES:
                key = "system"
            elif index == self.pinned:
                key = "pinned"
            elif self.in_latest_turn(index):
                key = "latest_turn"
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


_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})


def _is_image(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in _IMAGE_PART_TYPES


def _image_placeholder(part: Mapping[str, Any]) -> dict[str, str]:
    return {"type": "text", "text": f"{IMAGE_REMOVED_MARKER} by the gateway to fit the context budget]"}


def _cannot_fit(model: str, budget: Budget, before: int, after: int, protected: Mapping[str, int]) -> CannotFitError:
    largest = max((k for k in ("latest_turn", "system", "tool_definitions", "pinned")), key=lambda k: protected.get(k, 0))
    message = (
        f"{model or 'model'}: the request needs {after} input tokens after trimming (it had {before}), but the input "
        f"budget is {budget.budget} tokens (window {budget.window} - output reserve {budget.output_reserve} - "
        f"safety margin {budget.safety_margin}{f', capped at {budget.cap}' if budget.cap else ''}). This model's maximum "
        f"context length is {budget.window} tokens. What cannot be trimmed: latest turn {protected['latest_turn']}, "
        f"system {protected['system']}, tool definitions {protected['tool_definitions']}, pinned {protected['pinned']} "
        f"tokens; the largest is the {largest.replace('_', ' ')}. Shorten the latest message or its tool output, send "
        f"fewer tool definitions, lower max_tokens, or use a model with a larger context window."
    )
    facts = {
        **budget.as_dict(),
        "model": model,
        "tokens_before": before,
        "tokens_after_trimming": after,
        "protected_tokens": dict(protected),
    }
    return CannotFitError(message, facts)
