"""Large requests are decided in a bounded thread pool, small ones inline (pure asyncio; no LiteLLM).

A 1M-token request must not stall the event loop that serves every other client; tiktoken releases the
GIL while it encodes. Small requests stay inline: a thread hop would cost more than counting them.

"Large" is measured in what deciding costs, not in characters alone (``approximate_size``): a base64
payload is decoded and a PDF's streams inflated (``BINARY_WEIGHT`` per character), and every message, part
or JSON value costs a walk, a hash and a cache lookup however short its text (``ITEM_WEIGHT``). So no
request whose decision takes more than about a millisecond is decided on the event loop, whatever it
carries (figures: ``bench/hostile_cpu.py``).
"""

from __future__ import annotations

import asyncio
import atexit
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any, TypeVar

from ..counting.rendered import PROMPT_FIELDS, with_extra_body
from ..counting.templated import cost_weight
from ..shapes import CONTENT_FIELDS
from ..trimming.elsewhere import TrimElsewhere, inline_trim

T = TypeVar("T")

#: one character of a payload that must be decoded (a ``data:`` URL, a ``file_data`` or ``data`` field: images,
#: PDFs, audio) counts as this many: a PDF's streams may inflate to 16 bytes per byte, a small one to 8 KiB
#: (``counting.media``), and the worst found costs ~30 characters of prose per character (``bench/hostile_cpu.py``).
#: Any image or PDF bigger than an icon is decided in the pool
BINARY_WEIGHT = 32
#: keys whose string value is base64 in every shape (chat ``file_data``, Anthropic ``source.data``, Gemini
#: ``inline_data.data``, ``input_audio.data``)
BINARY_KEYS = frozenset({"file_data", "data", "bytes"})
#: a request decided on the loop is trimmed there only with at most this share of the threshold in message text (a
#: trim may tokenize a long message's cuts a dozen times: ``trimming.elsewhere``); more is decided again in the pool
INLINE_TRIM_SHARE = 16
#: each message, part, list element or object value counts as this many characters on top of its text: a
#: one-word message costs as much to decide as ~300 characters of text (``bench/hostile_cpu.py``)
ITEM_WEIGHT = 100
#: text that does not break into short words costs up to ~20x as much per character to count as prose (one
#: tiktoken piece per run: a run of one character, CJK without spaces, base64 pasted as text, emoji): its
#: characters count this many times. Judged per ``TEXT_CHUNK`` characters by their spaces and line breaks,
#: and whitespace runs by their length
DENSE_TEXT_WEIGHT = 8
TEXT_CHUNK = 4096
#: a chunk with fewer breaks than one per this many characters is dense
CHARS_PER_BREAK = 16
#: text that is not ASCII costs more per character to count however it breaks (tiktoken: Cyrillic ~5x prose,
#: symbols and CJK ~10x): each UTF-8 byte of a character beyond its first counts this many characters more (a
#: 3-byte character weighs 13), past one such byte per ``NON_ASCII_FREE`` characters (curly quotes, dashes and
#: accents in prose cost next to nothing more)
NON_ASCII_WEIGHT = 6
NON_ASCII_FREE = 16
#: each value elsewhere in the request (metadata, headers, fields LiteLLM forwards as sent) counts as this
#: many characters, and its text one per ``OTHER_CHARS_PER_CHAR`` characters: what the search for quoted
#: overflow wording costs there next to counting text (the decision reads none of it)
OTHER_ITEM_WEIGHT = 10
OTHER_CHARS_PER_CHAR = 16
#: fields LiteLLM adds that copy the request itself (``proxy_server_request.body``): weighed once, as content
LITELLM_COPIES = frozenset({"proxy_server_request"})
#: what a configured chat template reads besides messages and tools (``counting.template_input``), in the body
#: or in ``extra_body``: rendering a character of it costs ~1 µs, ~20x counting prose (1.5 MB of
#: ``chat_template_kwargs`` held the event loop 1.6 s before they were weighed), so each counts this many
TEMPLATE_VALUES = ("chat_template_kwargs", "documents")
TEMPLATE_WEIGHT = 32
#: a schema's ``$ref`` counts as this many characters: LiteLLM inlines each one, and the walk that counts the copies
#: (``counting.tools.inlined_tokens``) may take up to ~15 ms per request where a few dozen references nest (an attack
#: review of 2026-12-07: 27 references in 1 KB); with this weight such a schema is counted in the pool
REF_WEIGHT = 2_000


#: what the decision walks: the content fields, the text rendered besides them (``rendered.PROMPT_FIELDS``, at the
#: top level or in ``extra_body``: 2 MB of ``preamble`` held the loop 1.1 s before), and each ``fallbacks`` entry
#: (read for prompt parameters: 300,000 empty entries held the loop 2.2 s; attack reviews of 2026-12-06)
WEIGHED_FIELDS = tuple(dict.fromkeys((*CONTENT_FIELDS, *PROMPT_FIELDS, "extra_body", "fallbacks")))


def approximate_size(data: Mapping[str, Any], limit: int, fields: tuple[str, ...] = WEIGHED_FIELDS) -> int:
    """What deciding the request costs, in characters of text, up to ``limit``: one walk over every string,
    list and object in the content fields (weighted as above), stopping as soon as the request is known to
    be large. The walk itself is bounded by ``limit``: it never lists more items than could fit in it. The values
    a chat template reads (``TEMPLATE_VALUES``) weigh ``TEMPLATE_WEIGHT`` times as much."""
    template = [value for _, source in with_extra_body(data)
                for value in (source.get(key) for key in TEMPLATE_VALUES) if value is not None]
    if template and fields is WEIGHED_FIELDS:
        size = TEMPLATE_WEIGHT * approximate_size({"template": template}, limit // TEMPLATE_WEIGHT + 1, ("template",))
        return size if size >= limit else size + approximate_size(data, limit - size)
    stack = [value for value in (data.get(key) for key in fields) if value is not None]
    total = -ITEM_WEIGHT * len(stack)  # the fields themselves are not items
    while stack:
        value = stack.pop()
        total += ITEM_WEIGHT
        kind = type(value)
        if kind is str:
            total += len(value) * BINARY_WEIGHT if value.startswith("data:") else text_size(value, limit - total)
        elif kind in _SCALARS:
            total += value is not None and kind is not float  # a token id counts 1
        elif isinstance(value, str):
            total += len(value) * BINARY_WEIGHT if value.startswith("data:") else text_size(value, limit - total)
        elif kind is dict or isinstance(value, Mapping):
            items = value.items() if len(value) * ITEM_WEIGHT <= limit - total else \
                islice(value.items(), (limit - total) // ITEM_WEIGHT + 1)
            for key, item in items:
                if isinstance(key, str) and len(key) > 64:  # a key is text too (a schema's property names)
                    total += text_size(key, limit - total)
                if key in BINARY_KEYS and isinstance(item, str):
                    total += ITEM_WEIGHT + len(item) * BINARY_WEIGHT
                elif key == "$ref":
                    total += REF_WEIGHT
                else:
                    stack.append(item)
        elif kind is list or isinstance(value, list | tuple):
            stack.extend(value if len(value) * ITEM_WEIGHT <= limit - total else
                         value[: (limit - total) // ITEM_WEIGHT + 1])
        elif isinstance(value, int):
            total += 1  # a token id
        if total >= limit:
            return total
    return max(total, 0)


#: values with nothing inside (the walk's fast path)
_SCALARS = frozenset({type(None), bool, int, float})


def other_size(data: Mapping[str, Any], limit: int, fields: tuple[str, ...] = WEIGHED_FIELDS) -> int:
    """The same walk over the rest of the request (metadata, headers, any other field), at ``OTHER_ITEM_WEIGHT``
    per value and ``OTHER_CHARS_PER_CHAR`` characters of its text (keys included) per character: a body of
    small content and a million metadata keys is no small request either."""
    stack = [value for key, value in data.items() if key not in fields and key not in LITELLM_COPIES]
    total = -OTHER_ITEM_WEIGHT * len(stack)
    while stack:
        value = stack.pop()
        total += OTHER_ITEM_WEIGHT
        kind = type(value)
        if kind in _SCALARS:
            pass
        elif kind is str or isinstance(value, str):
            total += len(value) // OTHER_CHARS_PER_CHAR
        elif kind is dict or isinstance(value, Mapping):
            room = (limit - total) // OTHER_ITEM_WEIGHT + 1
            keys = list(islice(value, room)) if len(value) > room else value
            try:
                chars = len("".join(keys))  # the usual keys: all strings
            except TypeError:
                chars = sum(len(key) for key in keys if isinstance(key, str))
            total += chars // OTHER_CHARS_PER_CHAR
            stack.extend(islice(value.values(), room))
        elif kind is list or isinstance(value, list | tuple):
            stack.extend(value[: (limit - total) // OTHER_ITEM_WEIGHT + 1])
        if total >= limit:
            return total
    return max(total, 0)


def text_size(text: str, room: int) -> int:
    """What counting ``text`` costs in characters of prose (see ``DENSE_TEXT_WEIGHT``), exact up to ``room``:
    a pass or two of ``str.count``, never more than about ``room`` characters read."""
    size = len(text)
    if size < 64 or size >= room:
        return size
    wide = 0 if text.isascii() else \
        max(0, len(text.encode("utf-8", "surrogatepass")) - size - size // NON_ASCII_FREE) * NON_ASCII_WEIGHT
    if size <= TEXT_CHUNK and text.count(" ") * CHARS_PER_BREAK >= size and "        " not in text \
            and "\n\n\n\n\n\n\n\n" not in text:
        return size + wide  # prose (the usual case): one pass
    dense = 0
    if "        " in text or "\n\n\n\n\n\n\n\n" in text:  # runs of whitespace: their characters, about
        dense += 2 * (text.count("  ") + text.count("\n\n"))
    for start in range(0, size, TEXT_CHUNK):
        end = min(size, start + TEXT_CHUNK)
        if _dense(text, start, end):
            dense += end - start
    return size + max(wide, min(size, dense) * (DENSE_TEXT_WEIGHT - 1))


def _dense(text: str, start: int, end: int) -> bool:
    """Fewer breaks (spaces, line breaks) than one per ``CHARS_PER_BREAK`` characters of ``text[start:end]``."""
    spaces = text.count(" ", start, end)
    return spaces * CHARS_PER_BREAK < end - start and \
        (spaces + text.count("\n", start, end)) * CHARS_PER_BREAK < end - start


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

    def inline(self, data: Mapping[str, Any], *, whole: bool = False, weight: int = 1) -> bool:
        """Whether work on a request runs on the event loop (small enough) rather than in the pool: weighed
        by its content fields, all the decision reads; ``whole``: work that walks the whole request (the
        search for quoted overflow wording) weighs the rest too (``other_size``); ``weight``: how many times
        tiktoken's cost its counter pays per character (``pipeline.decision_weight``)."""
        if self.offload_chars <= 0:
            return True
        # a configured chat template costs more per message to count, a family's own vocabulary per character
        limit = self.offload_chars // max(cost_weight(), weight)
        size = approximate_size(data, limit)
        return size < limit and (not whole or size + other_size(data, limit - size) < limit)

    async def run(self, work: Callable[[], T], data: Mapping[str, Any], *, whole: bool = False, weight: int = 1,
                  pool: bool = False) -> T:
        """``work()``, inline when the request is small (``inline``), else in the pool; ``pool``: in the pool
        whatever its size (work on a failed call, where a thread hop costs nothing next to the call)."""
        if self.offload_chars <= 0:
            return work()
        if not pool and self.inline(data, whole=whole, weight=weight):
            try:  # a trim of more text than ``INLINE_TRIM_SHARE`` of the threshold is done in the pool
                with inline_trim(self.offload_chars // INLINE_TRIM_SHARE):
                    return work()
            except TrimElsewhere:
                pass
        loop = asyncio.get_running_loop()
        slots = self._slots.get(loop)
        if slots is None:
            slots = self._slots[loop] = asyncio.Semaphore(4 * self.threads)
        async with slots:
            return await loop.run_in_executor(self._executor, work)
