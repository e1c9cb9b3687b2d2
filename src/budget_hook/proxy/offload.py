"""Large requests are decided in a bounded thread pool, small ones inline (pure asyncio; no LiteLLM).

A 1M-token request must not stall the event loop that serves every other client; tiktoken releases the
GIL while it encodes. Small requests stay inline: a thread hop would cost more than counting them.
"""

from __future__ import annotations

import asyncio
import atexit
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..shapes import SHAPES

T = TypeVar("T")

#: request keys that carry what the model reads, in any shape (metadata, headers and LiteLLM's own
#: fields are skipped)
CONTENT_FIELDS = SHAPES.content_fields()


def approximate_size(data: Mapping[str, Any], limit: int, fields: tuple[str, ...] = CONTENT_FIELDS) -> int:
    """Characters of text (and token ids) a request carries, up to ``limit``: one walk over every string
    and list in the content fields, stopping as soon as the request is known to be large."""
    total = 0
    stack: list[Any] = [data.get(key) for key in fields]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, int):
            total += 1  # a token id
        if total >= limit:
            return total
    return total


class Offloader:
    """Runs a decision inline or in the pool, by the request's size."""

    def __init__(self, *, threads: int, offload_chars: int) -> None:
        self.offload_chars = offload_chars
        self.threads = threads
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="budget_hook")
        atexit.register(self._executor.shutdown, wait=False, cancel_futures=True)
        # At most this many large requests queued for the pool; the rest wait without blocking the loop.
        # One semaphore per event loop: an asyncio primitive binds to the loop that first waits on it.
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = \
            weakref.WeakKeyDictionary()

    async def run(self, work: Callable[[], T], data: Mapping[str, Any]) -> T:
        if self.offload_chars <= 0 or approximate_size(data, self.offload_chars) < self.offload_chars:
            return work()
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(4 * self.threads)
        async with slots:
            return await loop.run_in_executor(self._executor, work)
