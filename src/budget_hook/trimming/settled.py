"""What one trim of some messages left (``Settled``), and a per-process memo of growth-anchor trims.

The requests of a growing conversation between two growth anchors (``engine.growth_anchor``) all trim the
same prefix, the anchor's, and forward it plus what they added. That trim is a function of the prefix and of
the settings; of the request itself it sees only ``needed`` (what the request needs, the budget less what
was added), and only through a few moves: a stage runs only while the messages are over ``needed``, and the
newest tool results (and what the stage could not make room with) are cut to ``needed``. A trim that made
none of those moves holds for every ``needed`` in a range (``Settled.low`` to ``high``): the next requests of
the conversation, which need less as they add more, reuse it instead of trimming the prefix again.

The memo is a cache of a pure function: a request gets the same answer with or without it (tested), on any
process. It is keyed by what determines the trim: each message as counted (``TokenCounter.count_key``: its
text's length and hash, its other fields, the tokenizer profile), the counts, the target, the room, the
policy and the indexes the shape protects; a message the counter does not key (media) means no memo. It
holds at most ``MAX_ENTRIES`` trims, each at most ``MAX_EDITED_CHARS`` characters of rewritten contents (8
million characters per process at the very worst), least recently used evicted first; ``COUNT_CACHE``
configured to 0 turns it off. It keeps contents only: each request's rewritten messages are built on its own
messages, as new objects (``fresh``), so nothing a proxy does to one forwarded request reaches another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..counting import TokenCounter
from ..counting.cache import COUNT_CACHE, CountCache
from .report import MessageAction, Notice
from .trim_policy import TrimPolicy

MAX_ENTRIES = 32
MAX_EDITED_CHARS = 256 * 1024


@dataclass(frozen=True)
class Settled:
    """The outcome of one trim of ``kept`` messages: which live, their counts and rewritten versions, what was
    done to each (``actions``, content hashes not yet taken), the notice, and the ``needed`` values it holds
    for (``low <= needed < high``; ``reusable`` False: it holds for its own request only)."""

    kept: int
    alive: tuple[bool, ...]
    tokens: tuple[int, ...]
    #: the new content of each rewritten message (a reduction changes nothing else)
    edited: Mapping[int, Any]
    actions: tuple[MessageAction, ...]
    notice: Notice | None
    dropped_turns: tuple[int, ...]
    total: int
    #: one of the request's newest tool results was cut (then an anchor's trim cannot stay)
    newest_cut: bool
    low: int = 0
    high: int = 0
    reusable: bool = False

    def holds_for(self, needed: int) -> bool:
        return self.reusable and self.low <= needed < self.high


ANCHOR_TRIMS = CountCache(max_entries=MAX_ENTRIES)


def memo_key(counter: TokenCounter, messages: Sequence[Mapping[str, Any]], per_message: Sequence[int], total: int,
             target: int, room: int, policy: TrimPolicy, sets: tuple[frozenset[int], ...]) -> int | None:
    """What determines the trim of ``messages`` (None: a message the counter does not key, or the memo is off)."""
    if COUNT_CACHE.max_entries <= 0 or not room:
        return None
    keys = []
    for message in messages:
        key = counter.count_key(message)
        if key is None:
            return None
        keys.append(key)
    return hash(("anchor", type(counter).__name__, counter.model, counter.method, tuple(keys), tuple(per_message),
                 total, target, room, policy, sets))


def recall(key: int | None, needed: int) -> Settled | None:
    found = ANCHOR_TRIMS.get(key) if key is not None else None
    return found if found is not None and found.holds_for(needed) else None


def remember(key: int | None, settled: Settled) -> None:
    if key is None or not settled.reusable:
        return
    chars = 0
    for content in settled.edited.values():
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list) and all(isinstance(p, Mapping) and p.get("type") == "text" for p in content):
            chars += sum(len(str(p.get("text", ""))) for p in content)
        else:
            return  # media kept beside the text: not worth holding
    if chars <= MAX_EDITED_CHARS:
        ANCHOR_TRIMS.put(key, settled)


def fresh(content: Any) -> Any:
    """A rewritten content to forward: a string as it is, a list of parts as new part objects."""
    return content if isinstance(content, str) else \
        [dict(part) if isinstance(part, dict) else part for part in content] if isinstance(content, list) else content
