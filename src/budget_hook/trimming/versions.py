"""The versions a message can take when trimmed: softened (head and tail), compacted (head), shortened,
images replaced, each computed once from the original with a marker whose figures are true."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..counting import TokenCounter
from ..counting.cache import COUNT_CACHE
from .report import (
    COMPACTED_MARKER,
    SHORTENED_MARKER,
    SOFTENED_MARKER,
    ActionKind,
    content_chars,
    image_placeholder,
    is_error_result,
    is_image,
    message_text,
)
from .structure import is_result
from .trim_policy import TrimPolicy

#: a rewritten message and its exact token count, with the action that produced it
Variant = tuple[Mapping[str, Any], int, ActionKind]

_SOFT = f"\n{SOFTENED_MARKER} by the gateway to fit the context budget: {{chars}} of {{total}} characters " \
        "(~{tokens} tokens) removed from the middle]\n"
_COMPACT = f"\n{COMPACTED_MARKER} by the gateway to fit the context budget: {{chars}} of {{total}} characters " \
           "(~{tokens} tokens) removed]"
_SHORTEN = f"\n{SHORTENED_MARKER} by the gateway to fit the context budget: {{chars}} of {{total}} characters " \
           "(~{tokens} tokens) removed]"
_SHORTEN_MIDDLE = f"\n{SHORTENED_MARKER} by the gateway to fit the context budget: {{chars}} of {{total}} " \
                  "characters (~{tokens} tokens) removed from the middle]\n"
#: how every marker states its claim: a number standing alone, which ``TokenCounter.renumbered`` counts by length
_CLAIM = "(~{tokens} tokens)"


class Versions:
    """The rewritten versions of a trim's messages (mixed into ``state.TrimState``, which sets the state)."""

    counter: TokenCounter
    messages: list
    original_tokens: tuple[int, ...]
    policy: TrimPolicy
    no_edit: frozenset[int]
    final_assistant: int | None
    latest_start: int
    _variants: dict[tuple[int, str], Variant | None]
    #: ``marked``'s answers, per message, head, tail and marker: the heavy level and the graded cuts ask again
    #: for what the light level (or the compaction) already counted
    _marked: dict[tuple[int, str, str, str], tuple[Mapping[str, Any], int]]

    def is_recent(self, index: int) -> bool:
        raise NotImplementedError

    def marked(self, index: int, head: str, tail: str, marker: str) -> tuple[Mapping[str, Any], int]:
        """The original message keeping ``head`` and ``tail`` of its text, with a marker between them that
        says exactly how many characters and tokens left (``marker`` formats ``chars``, ``total``,
        ``tokens``), and its token count. Parts that are not text (images, files) stay as they were.
        Computed once per message, head, tail and marker (the message's text never changes during a trim)."""
        key = (index, head, tail, marker)
        found = self._marked.get(key)
        if found is None:
            found = self._marked[key] = self._marked_uncached(index, head, tail, marker)
        return found

    def _marked_uncached(self, index: int, head: str, tail: str, marker: str) -> tuple[Mapping[str, Any], int]:
        """``marked``'s answer: the settled cut and claim are remembered across requests (``COUNT_CACHE``), by
        what determines them: the message as counted (``TokenCounter.count_key``), its count, head, tail, marker."""
        original = self.messages[index]
        count_key = self.counter.count_key(original)
        memo = None if count_key is None else hash((count_key, "marked", self.original_tokens[index], len(head),
                                                    hash(head), len(tail), hash(tail), marker))
        settled = COUNT_CACHE.get(memo) if memo is not None else None
        if settled is None:
            settled = self._settle_claim(index, head, tail, marker)
            if memo is not None:
                COUNT_CACHE.put(memo, settled)
        head_chars, tail_chars, claimed, tokens = settled
        return _build(original, marker, head[:head_chars], tail[len(tail) - tail_chars:], claimed), tokens

    def _settle_claim(self, index: int, head: str, tail: str, marker: str) -> tuple[int, int, int, int]:
        """(characters of ``head`` and of ``tail`` kept, the claim, the count) of the marked message whose claim
        is true, or as near as 12 tries get."""
        original = self.messages[index]
        original_tokens = self.original_tokens[index]
        claimed, tried = 0, set()
        # for this head and tail, the count from the claim's digits alone (``TokenCounter.renumbered``: one
        # tokenization, where the counter can promise it; the claim stands alone as "(~N tokens)")
        counts: Callable[[Mapping[str, Any], int], int] | None = None
        renumber = _CLAIM in marker
        settled = (len(head), len(tail), claimed, original_tokens)
        for _ in range(12):  # the claim is part of what is counted: settle on a number that is true
            new_message = _build(original, marker, head, tail, claimed)
            digits = len(str(claimed))
            if counts is None and renumber:
                counts = self.counter.renumbered(new_message, index=index, digits=digits)
                renumber = counts is not None
            new_tokens = counts(new_message, digits) if counts is not None else \
                self.counter.count_message(new_message, index=index)
            settled = (len(head), len(tail), claimed, new_tokens)
            saved = original_tokens - new_tokens
            if saved == claimed:
                break
            if saved in tried:  # no number is true here (999 is one token, 1000 two): cut a little more
                claimed = max(claimed, saved)
                head, tail = (head[:-4], tail) if head else (head, tail[4:])
                counts = None  # another text: counted again
                continue
            tried.add(claimed)
            claimed = max(0, saved)
        return settled

    def variant(self, index: int, level: str) -> Variant | None:
        """The message's version at ``level`` ("light": a tool result softened, old images replaced; "heavy":
        the most saving of every reduction the policy allows), computed once; None when no reduction applies
        or none would save anything."""
        key = (index, level)
        if key not in self._variants:
            options = self._light(index) + (self._heavy(index) if level == "heavy" else [])
            best = min(options, key=lambda v: v[1], default=None)
            self._variants[key] = best if best is not None and best[1] < self.original_tokens[index] else None
        return self._variants[key]

    def _light(self, index: int) -> list[Variant]:
        policy, message = self.policy, self.messages[index]
        options: list[Variant] = []
        # an error result too: softened, its head and tail hold the lines that matter (left whole, its step went whole);
        # compaction (the head alone) would lose its last lines, so it never compacts one (``_heavy``)
        if policy.soften_tool_results and self._result_reducible(index, errors=True) and not self.is_recent(index):
            text = message_text(message)
            keep, tail_chars = policy.tool_result_soft_keep_chars, policy.tool_result_soft_keep_chars // 3
            if len(text) > keep:
                tail = text[len(text) - tail_chars:] if tail_chars else ""
                options.append((*self.marked(index, text[: keep - tail_chars], tail, _SOFT), "compacted"))
        if self._user_reducible(index):
            text = message_text(message)
            keep, tail_chars = policy.tool_result_soft_keep_chars, policy.tool_result_soft_keep_chars // 3
            tail = text[len(text) - tail_chars:] if tail_chars else ""
            options.append((*self.marked(index, text[: keep - tail_chars], tail, _SHORTEN_MIDDLE), "shortened"))
        if self._has_old_images(index):
            content = message["content"]
            replaced = {**message, "content": [image_placeholder() if is_image(part) else part for part in content]}
            options.append((replaced, self.counter.count_message(replaced, index=index), "images_removed"))
        return options

    def _heavy(self, index: int) -> list[Variant]:
        policy, message = self.policy, self.messages[index]
        text = message_text(message)
        if self.is_recent(index):
            return []  # the newest results are cut only graded (``reduce``)
        if policy.compact_tool_results and self._result_reducible(index) and len(text) > policy.tool_result_keep_chars:
            return [(*self.marked(index, text[: policy.tool_result_keep_chars], "", _COMPACT), "compacted")]
        if self._assistant_reducible(index):
            return [(*self.marked(index, text[: policy.assistant_keep_chars], "", _SHORTEN), "shortened")]
        return []

    def _result_reducible(self, index: int, errors: bool = False) -> bool:
        """A tool result long enough to cut (``errors``: one that reports an error too)."""
        message = self.messages[index]
        return (is_result(message) and (errors or not is_error_result(message))
                and content_chars(message) >= self.policy.tool_result_min_chars)

    def _assistant_reducible(self, index: int) -> bool:
        policy, message = self.policy, self.messages[index]
        return (message.get("role") == "assistant" and policy.shorten_assistant_messages
                and index != self.final_assistant and len(message_text(message)) >= policy.assistant_min_chars
                and len(message_text(message)) > policy.assistant_keep_chars)

    def _user_reducible(self, index: int) -> bool:
        """A long user message of the older history (an observation an agent sends as a user turn, a pasted
        file): softened like a tool result. The opening context, the pinned first message and the latest user
        message never get here (``TrimState.editable``)."""
        message, policy = self.messages[index], self.policy
        return (policy.soften_user_messages and message.get("role") == "user" and index < self.latest_start
                and content_chars(message) >= policy.tool_result_min_chars
                and len(message_text(message)) > policy.tool_result_soft_keep_chars)

    def _has_old_images(self, index: int) -> bool:
        content = self.messages[index].get("content")
        return (self.policy.drop_old_images and index < self.latest_start and isinstance(content, list)
                and any(is_image(part) for part in content))

    def _reducible(self, index: int) -> bool:
        """Might a reduction apply (without counting anything)?"""
        policy = self.policy
        return ((self._result_reducible(index, errors=True)
                 and (policy.soften_tool_results or policy.compact_tool_results))
                or self._assistant_reducible(index) or self._user_reducible(index) or self._has_old_images(index))

    def saving(self, index: int, level: str) -> int:
        """Tokens the message's ``level`` version saves (``heavier``: the heavy version over the light one)."""
        if level == "heavier":
            return self.saving(index, "heavy") - self.saving(index, "light")
        found = self.variant(index, level)
        return self.original_tokens[index] - found[1] if found else 0

    def graded(self, index: int, *, needed: int, floor: int, action: ActionKind) -> tuple[Mapping[str, Any], int]:
        """The message keeping its head (two thirds) and tail (one third), ``needed`` tokens fewer, never below
        ``floor`` characters. A tool result at the floor of compaction is what compaction makes of it, so it
        does not change once it is no longer one of the newest and is compacted with the older ones."""
        text = message_text(self.messages[index])
        per_token = len(text) / max(1, self.original_tokens[index])
        marker = _SOFT if action == "compacted" else _SHORTEN_MIDDLE
        keep = max(floor, len(text) - int((needed + 40) * per_token))
        for _ in range(6):
            tail = keep // 3
            new_message, new_tokens = self.marked(index, text[: keep - tail], text[len(text) - tail:] if tail else "",
                                                  marker)
            saved = self.original_tokens[index] - new_tokens
            if saved >= needed or keep == floor:
                break
            keep = max(floor, keep - int((needed - saved) * per_token * 1.2) - 16)
        if keep == floor == self.policy.tool_result_keep_chars and action == "compacted":
            new_message, new_tokens = self.marked(index, text[:floor], "", _COMPACT)
        return new_message, new_tokens


def _build(original: Mapping[str, Any], marker: str, head: str, tail: str, claimed: int) -> Mapping[str, Any]:
    """``original`` with its text cut to ``head`` + the marker (claiming ``claimed`` tokens) + ``tail``; parts
    that are not text stay, after the one text part."""
    text = message_text(original)
    new_text = head + marker.format(chars=len(text) - len(head) - len(tail), total=len(text), tokens=claimed) + tail
    content = original.get("content")
    if not isinstance(content, list):
        return {**original, "content": new_text}
    texts = [p for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
    kind = texts[0].get("type", "text") if texts else "text"
    return {**original, "content": [{"type": kind, "text": new_text}, *(p for p in content if p not in texts)]}
