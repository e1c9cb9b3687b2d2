"""Budget for requests without a conversation, shared by the per-input shapes: ``/completions`` prompts
and ``/embeddings`` inputs.

Contract: ``check_inputs(values, field=..., counter=..., limit=..., truncate=False, joined=False)`` counts
every input separately (a list of prompts is a batch: each is its own request to the model; an embedding
model limits each input) and returns an ``InputsResult``: the per-input token counts, the inputs over
``limit`` with how far over, and the value to forward. ``joined``: the deployment gets a list of string
prompts as the user messages of one chat call (LiteLLM's ``text_completion`` for any provider but the
text-completion endpoints), so they must also fit ``limit`` together, with each message's framing. Nothing is
shortened unless ``truncate`` is set explicitly (then over-limit inputs are cut to the limit and reported): a
silently truncated embedding is a wrong embedding nobody notices.

Accepted shapes, as the OpenAI API: a string, a list of strings, a list of token ids, a list of
lists of token ids. Token ids count as themselves (one token each). Anything else raises
``MalformedRequestError`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..counting import TokenCounter
from ..counting.rendered import with_extra_body
from ..errors import MalformedRequestError


@dataclass(frozen=True)
class OverLimit:
    index: int | None  # None: the single string/token-array input
    tokens: int
    over_by: int


@dataclass(frozen=True)
class InputsResult:
    field: str
    limit: int
    tokens: tuple[int, ...]
    over: tuple[OverLimit, ...]
    value: Any  # what to forward: the original object unless truncated
    truncated: tuple[int, ...] = ()
    #: the prompts as one chat call (``joined``): their tokens with each message's framing, else None
    joined: int | None = None

    @property
    def total(self) -> int:
        return sum(self.tokens) if self.joined is None else self.joined

    @property
    def over_together(self) -> bool:
        """Over only as one chat call (``joined``): each prompt fits, together they do not."""
        return self.joined is not None and bool(self.over) and self.over[0].index is None

    def describe_over(self) -> str:
        if self.over_together:
            joined = cast(int, self.joined)
            return (f"the {len(self.tokens)} {self.field}s reach this deployment as the user messages of one chat "
                    f"call (LiteLLM joins a list of prompts for a chat model): {joined} tokens together, "
                    f"{joined - self.limit} over the limit of {self.limit}")
        parts = []
        for item in self.over[:5]:
            where = self.field if item.index is None else f"{self.field}[{item.index}]"
            parts.append(f"{where} has {item.tokens} tokens, {item.over_by} over the limit of {self.limit}")
        more = f" (and {len(self.over) - 5} more)" if len(self.over) > 5 else ""
        return "; ".join(parts) + more


def _is_token_array(value: Any) -> bool:
    return (isinstance(value, list) and bool(value)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value))


def _split(value: Any, field: str) -> tuple[list[Any], bool]:
    """The individual inputs, and whether the value was a single one (string or one token array)."""
    if isinstance(value, str) or _is_token_array(value):
        return [value], True
    if isinstance(value, list) and value:
        for index, item in enumerate(value):
            if not (isinstance(item, str) or _is_token_array(item)):
                raise MalformedRequestError(f"{field}[{index}]", "expected a string or a list of token ids, got "
                                            f"{type(item).__name__}")
        return list(value), False
    raise MalformedRequestError(field, "expected a non-empty string, list of strings, list of token ids, or "
                                f"list of token-id lists, got {type(value).__name__}")


def _count(item: Any, counter: TokenCounter) -> int:
    if isinstance(item, str):
        raw = counter.count_text(item)
        return raw if counter.profile.exact else math.ceil(raw * counter.profile.safety_factor)
    return len(item)


def _truncate(item: Any, counter: TokenCounter, limit: int, counted: int) -> tuple[Any, int]:
    """``item`` (``counted`` tokens, over ``limit``) cut to the limit, with its count."""
    if not isinstance(item, str):
        return item[:limit], min(limit, len(item))
    # Estimated profiles keep proportionally fewer real tokens so the estimate lands under the limit.
    keep = limit if counter.profile.exact else int(limit / counter.profile.safety_factor)
    decode = getattr(counter.encoding, "decode", None)
    if decode is None:  # a tokenizer that cannot decode (several vocabularies at once): cut by characters
        tokens: Any = item
        keep = int(len(item) * keep / max(1, counted))
        decode = "".join
    else:
        tokens = counter.encoding.encode_ordinary(item)
    # an estimate over the limit may hold fewer of the encoding's tokens than the limit: then the whole first
    text, size = (item, counted) if keep >= len(tokens) else (decode(tokens[:keep]), None)
    keep = min(keep, len(tokens))
    size = _count(text, counter) if size is None else size
    # digits, factors and bounds: shrink until it holds, in proportion to the overshoot (a text of one letter
    # repeated, which an estimate prices far above its tokens, was cut 5% a time: dozens of counts of the whole)
    while size > limit and keep > 0:
        keep = min(int(keep * 0.95), int(keep * limit / size))
        text = decode(tokens[:keep])
        size = _count(text, counter)
    return text, size


def count_inputs(value: Any, *, field: str, counter: TokenCounter, shared: int = 0) -> list[int]:
    """The tokens of each input, each with the ``shared`` tokens it is sent with (``shared_tokens``; raises
    ``MalformedRequestError`` naming the field for a bad shape)."""
    items, _ = _split(value, field)
    return [_count(item, counter) + shared for item in items]


def shared_tokens(body: Mapping[str, Any], fields: tuple[str, ...], counter: TokenCounter) -> int:
    """The tokens of the text every input is sent with (``InputsShape.shared_fields``: a completion's ``suffix``, the
    text after the insertion point, which the provider reads as prompt), at the top level or in ``extra_body``
    (LiteLLM merges it into the body); an attack review (2026-12-07) sent a 21,000-token suffix counted as nothing. A
    value that is not text raises ``MalformedRequestError`` naming the field."""
    total = 0
    for prefix, source in with_extra_body(body):
        for name in fields:
            value = source.get(name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise MalformedRequestError(f"{prefix}{name}", f"expected a string, got {type(value).__name__}")
            total += _count(value, counter)
    return total


def check_inputs(value: Any, *, field: str, counter: TokenCounter, limit: int, truncate: bool = False,
                 joined: bool = False, shared: int = 0) -> InputsResult:
    """``shared``: the tokens every input is sent with (``shared_tokens``), counted in each one's tokens. ``truncate``
    cuts inputs sent alone (embeddings: ``shared`` is 0)."""
    if truncate and shared:
        raise ValueError("inputs sent with shared text are never truncated")
    items, single = _split(value, field)
    tokens = [_count(item, counter) + shared for item in items]
    over = tuple(OverLimit(None if single else i, t, t - limit) for i, t in enumerate(tokens) if t > limit)
    if joined and len(items) > 1 and all(isinstance(item, str) for item in items):
        profile = counter.profile
        together = sum(tokens) + len(tokens) * profile.tokens_per_message + profile.reply_priming
        return InputsResult(field, limit, tuple(tokens), over or (
            (OverLimit(None, together, together - limit),) if together > limit else ()), value, joined=together)
    if not over or not truncate:
        return InputsResult(field, limit, tuple(tokens), over, value)
    cut = [_truncate(item, counter, limit, t) if t > limit else (item, t)
           for item, t in zip(items, tokens, strict=True)]
    new_items = [item for item, _ in cut]
    truncated = tuple(i for i, t in enumerate(tokens) if t > limit)
    return InputsResult(field, limit, tuple(t for _, t in cut), over, new_items[0] if single else new_items, truncated)
