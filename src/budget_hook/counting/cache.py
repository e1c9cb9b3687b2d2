"""A bounded, thread-safe LRU of token counts keyed by content hash, shared by every counter in a process.

Why: a chat resends its whole history every turn and an agent resends hundreds of tool results, so a
gateway tokenizes the same text over and over. Keyed by what determines a message's count (its text's
length and hash, its other fields, the tokenizer profile and the framing flags), a request
whose history was seen before only tokenizes what is new. Keys hold lengths and hashes, never content.

Contract: ``COUNT_CACHE.get(key)`` / ``put(key, tokens)``; at most ``max_entries`` entries (about 170
bytes each: an int key and an int), least recently used evicted first. ``configure(max_entries)``
resizes it (0 disables caching). ``stats()`` reports size, hits and misses. Counting never depends on
the cache for correctness: a miss recounts.

Two small tuples are kept under their own keys too, for the messages a trim rewrites: a message's count
terms (``TokenCounter.renumbered``: framing and media, raw text tokens) and the settled cut and claim of a
marked version (``trimming.versions``), so that a warm re-trim neither tokenizes nor re-settles them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

DEFAULT_MAX_ENTRIES = 65_536


class CountCache:
    """The LRU itself (also used to memoise content hashes, see ``trimming.content_hash``)."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        # Lock-free on the hot path: each dict operation is atomic under the GIL. A concurrent eviction
        # between the two steps only costs the recency update; the statistics are approximate.
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        try:  # noqa: SIM105 - the hot path: contextlib.suppress costs more than the lookup
            self._entries.move_to_end(key)
        except KeyError:
            pass
        self.hits += 1
        return value

    def put(self, key: Hashable, tokens: Any) -> None:
        if self.max_entries <= 0:
            return
        with self._lock:
            self._entries[key] = tokens
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def computed(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value cached under ``key``, computed (and cached) when there is none."""
        value = self.get(key)
        if value is None:
            value = compute()
            self.put(key, value)
        return value

    def configure(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        with self._lock:
            self.max_entries = max_entries
            while len(self._entries) > max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "max_entries": self.max_entries, "hits": self.hits,
                    "misses": self.misses}

    def __len__(self) -> int:
        return len(self._entries)


COUNT_CACHE = CountCache()
