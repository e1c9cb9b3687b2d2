"""A trim too costly for the caller's thread (pure; stdlib only).

The proxy decides small requests on its event loop. Counting a request costs about one tokenization of its text,
but trimming it may tokenize a long message's cuts a dozen times over (graded cuts, each settling its marker's
claim): an attack review (2026-12-06) spent 60-98 ms of event-loop CPU on one 46 KB tool result, 1.3-2.1 s per
MB. So a caller may say how much message text it accepts trimming on its own thread (``inline_trim``): a request
over its budget with more than that raises ``TrimElsewhere`` before any trimming, and the caller decides it again
in its pool (the counts made so far come from the count cache).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .report import content_chars

#: message text, in characters, the current caller accepts trimming on its thread (None: any)
INLINE_TRIM_CHARS: ContextVar[int | None] = ContextVar("budget_hook_inline_trim_chars", default=None)


class TrimElsewhere(Exception):
    """Not an error: this trim weighs more than the caller accepts on its thread (``INLINE_TRIM_CHARS``)."""


@contextmanager
def inline_trim(chars: int) -> Iterator[None]:
    """Within the block, a trim of more than ``chars`` characters of message text raises ``TrimElsewhere``."""
    token = INLINE_TRIM_CHARS.set(chars)
    try:
        yield
    finally:
        INLINE_TRIM_CHARS.reset(token)


def check_inline(messages: Sequence[Mapping[str, Any]]) -> None:
    """Raises ``TrimElsewhere`` when the caller set a limit and ``messages`` hold more text than it."""
    limit = INLINE_TRIM_CHARS.get()
    if limit is not None:
        total = 0
        for message in messages:
            total += content_chars(message) if isinstance(message, Mapping) else 0
            if total > limit:
                raise TrimElsewhere
