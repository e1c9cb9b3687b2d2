"""Read a provider's context-overflow error: the window it names and the prompt tokens it counted (pure).

Contract: ``parse_overflow(text)`` returns an ``Overflow`` for the overflow wordings of the providers the
gateway routes to, else None. The wording must open the provider's message (the start of the text, a
``message`` field, an exception prefix): an error that quotes client content containing such words
teaches nothing. ``window`` is the largest input the provider accepts (its context length:
an input alone can never exceed it), ``prompt_tokens`` the provider's own count of the rejected prompt,
when the message says them. Never raises; reads at most the first ``MAX_CHARS`` characters. The
patterns are ASCII-only (``re.ASCII``): no Unicode case folding (``\u212a`` is not ``k``) can make client
text match them.

``quotes_overflow(value)`` is True when any key or string in ``value`` (a request as the client sent it:
body, metadata, headers) contains a phrase an overflow wording needs (``OVERFLOW_PHRASES``, any case). A
provider's 400 may quote client input (``Unrecognized request argument supplied: <key>``, ``<key>: Extra
inputs are not permitted``, ``thinking.type: Input tag '<value>'``); the error of such a request teaches
nothing, whatever it says. One lower-casing and a few substring searches per string: linear.

Wordings (as the APIs answer them; each in its provider's record, ``providers/<name>.py``):

* Anthropic: ``prompt is too long: 210000 tokens > 200000 maximum``; ``input length and `max_tokens`
  exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again``;
* OpenAI chat / completions / embeddings: ``This model's maximum context length is 128000 tokens.
  However, you requested 130000 tokens (129000 in the messages, 1000 in the completion)``, ``... However,
  your messages resulted in 130000 tokens``, and the older
  ``..., however you requested 9000 tokens (8000 in your prompt; 1000 for the completion)``;
* Gemini: ``The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).``;
* vLLM / OpenAI-compatible servers: ``This model's maximum context length is 4096 tokens. However, you
  requested 5000 tokens (4000 in the messages, 1000 in the completion)`` (same as OpenAI), and
  ``... maximum context length is 8192 tokens and your request has 9000 input tokens``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import unicodedata
from dataclasses import dataclass
from itertools import repeat
from typing import cast
from urllib.parse import unquote_plus

from ..counting.cache import CountCache
from ..providers import PROVIDERS, OverflowWording

MAX_CHARS = 4000


@dataclass(frozen=True)
class Overflow:
    window: int | None
    prompt_tokens: int | None
    provider: str


#: every provider's wordings (``overflow`` in its record, ``providers/``), tried in ``PROVIDERS`` order
_PATTERNS: tuple[OverflowWording, ...] = tuple(wording for record in PROVIDERS for wording in record.overflow)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.replace(",", ""))
    except ValueError:
        return None
    return value if 0 < value < 10**9 else None


#: what may stand right before the wording: the start, a JSON or Python ``message`` field, an exception
#: prefix (``AnthropicException - ``), a new line. Not a quote inside other text: an error that echoes a
#: client's value (``Invalid value: '...prompt is too long: 1 tokens > 10 maximum'``) must teach nothing.
_LEAD = re.compile(r"""(?:^|message\\?['"]?\s*[:=]\s*\\?['"]|\s-\s|\n|\bdetail\\?['"]?\s*:\s*\\?['"])\s*$""")
_THIS_MODEL = re.compile(r"(?:This model's|The model's|the model's|The)\s*$")


def _anchored(text: str, start: int) -> bool:
    lead = _THIS_MODEL.sub("", text[:start])
    return bool(_LEAD.search(lead[-60:])) or not lead.strip()


def parse_overflow(text: object) -> Overflow | None:
    if not isinstance(text, str) or not text:
        return None
    text = text[:MAX_CHARS]
    for wording in _PATTERNS:
        match = wording.pattern.search(text)
        if match is None or not _anchored(text, match.start()):
            continue
        window = _int(match.group(wording.window_group)) if wording.window_group else None
        prompt = _int(match.group(wording.prompt_group)) if wording.prompt_group else None
        if window is None and prompt is None:
            continue
        return Overflow(window, prompt, wording.provider)
    return None


#: a phrase each wording above needs, lower-case: a request carrying one anywhere may have it echoed back
OVERFLOW_PHRASES = ("prompt is too long", "exceed context limit", "maximum context length", "input token count",
                    "number of tokens allowed",
                    # the other wordings LiteLLM classifies as a ContextWindowExceededError (its exception mapping's
                    # ``is_error_str_context_window_exceeded``): an error echoing one is rewritten as an overflow
                    "model's maximum context limit", "is longer than the model's context length",
                    "input tokens exceed the configured limit", "exceeds the available context size",
                    "maximum input length is")
#: strings and keys inspected per request, at most: a request with more is treated as quoting (teaches nothing)
MAX_INSPECTED = 1_000_000


#: format characters (zero-width spaces and joiners, bidi marks...) a provider may drop: removed before the search
_FORMAT_CHARS = dict.fromkeys(c for first, last in ((0xAD, 0xAD), (0x61C, 0x61C), (0x180E, 0x180E), (0x200B, 0x200F),
                                                    (0x202A, 0x202E), (0x2060, 0x206F), (0xFEFF, 0xFEFF),
                                                    (0xFFF9, 0xFFFB), (0xE0000, 0xE007F))
                              for c in range(first, last + 1))


def _forms(text: str) -> list[str]:
    """``text`` as a provider may write it back: lower-cased, and when it is not plain ASCII also NFKC-folded
    (full-width letters) without format characters; percent-decoded when it has escapes (a query string);
    decoded when it is a ``data:`` URL or JSON (tool arguments LiteLLM parses before forwarding)."""
    forms = [text]
    if not text.isascii():
        forms.append(_nfkc(text).translate(_FORMAT_CHARS))
    if "%" in text or "+" in text:
        forms.append(unquote_plus(text))
    if text.startswith("data:") and "," in text:
        with contextlib.suppress(ValueError):
            forms.append(base64.b64decode(text.partition(",")[2], validate=False).decode("utf-8", "replace"))
    if "\\u" in text and text.lstrip()[:1] in ('{', '[', '"'):
        with contextlib.suppress(ValueError, RecursionError):
            forms.append(json.dumps(json.loads(text), ensure_ascii=False))
    return [form.lower() for form in forms]


#: NFKC folds text a piece of ``NFKC_PIECE`` characters at a time, and only pieces that are not ASCII (which it
#: leaves as they are), at most ``NFKC_CHARS`` characters of them per search (joins included): a request with
#: more is taken as quoting (its error teaches nothing). A piece that grows more than ``NFKC_GROWTH`` times (U+FDFA
#: becomes 18 characters, at ~2.6 us each) makes it taken as quoting too: the fold's work stays linear in what
#: the client sent, and under ~0.6 s
NFKC_CHARS = 1_000_000
NFKC_PIECE = 1024
NFKC_GROWTH = 4
_FOLDED = threading.local()  # characters folded by the search running on this thread


class _TooCostly(Exception):
    """The fold of a request would cost more than ``NFKC_CHARS`` allow: it is taken as quoting."""


def _nfkc(text: str) -> str:
    pieces = []
    for start in range(0, len(text), NFKC_PIECE):
        piece = text[start:start + NFKC_PIECE]
        if not piece.isascii():
            _FOLDED.chars = spent = getattr(_FOLDED, "chars", 0) + len(piece)
            if spent > NFKC_CHARS:
                raise _TooCostly
            piece = unicodedata.normalize("NFKC", piece)
            if len(piece) > NFKC_GROWTH * NFKC_PIECE:
                raise _TooCostly
        pieces.append(piece)
    return "".join(pieces)


#: the shortest phrase: a plain ASCII text shorter than this holds none in any of its forms
_SHORTEST = min(len(phrase) for phrase in OVERFLOW_PHRASES)
_LONGEST = max(len(phrase) for phrase in OVERFLOW_PHRASES)
#: long texts found free of overflow wording, by length and hash (as the count cache keys texts): a resent
#: history is not searched again
CLEAN_TEXTS = CountCache(16_384)


def _quotes(text: str) -> bool:
    if text.isascii() and not ("%" in text or "+" in text or "\\u" in text or text.startswith("data:")):
        # the usual text: its only form is its lower-case (``_forms``), and it is no shorter than that
        if len(text) < _SHORTEST:
            return False
        lowered = text.lower()
        return any(phrase in lowered for phrase in OVERFLOW_PHRASES)
    return any(phrase in form for form in _forms(text) for phrase in OVERFLOW_PHRASES)


def quotes_overflow(value: object) -> bool:
    """True when a key or string anywhere in ``value`` contains an overflow phrase (any case, in any of its
    ``_forms``), alone or joined with its neighbours (LiteLLM joins text parts; a provider may quote several
    keys in a row); True too when its non-ASCII text is too much to fold (``NFKC_CHARS``)."""
    _FOLDED.chars = 0
    try:
        return _search(value)
    except _TooCostly:
        return True


def _search(value: object) -> bool:
    stack: list[tuple[object, object]] = [(value, None)]
    seen = 0
    texts: list[str] = []
    plain = True  # every text in ``texts`` is plain (``_plain``)
    # long strings already searched, and whether each is plain; objects already walked, with the texts they
    # added (LiteLLM's copy of the body, ``proxy_server_request``, holds the same objects: walked once). A
    # dict's texts do not depend on where it is (its values are under its own keys), a list's do: only dicts
    clean: dict[int, bool] = {}
    walked: dict[int, tuple[list[str], int, bool]] = {}
    short: list[str] = []  # texts and keys under ``_MEMO_CHARS`` that may hold a phrase: searched together
    push, pop = stack.append, stack.pop
    while stack:
        item, key = pop()
        kind = type(item)
        if kind is _Walked:
            assert isinstance(item, _Walked)
            walked[item.of] = (texts[item.texts:], seen - item.seen, plain)
            continue
        seen += 1
        if seen > MAX_INSPECTED:
            return True
        if kind is bytes:
            item = cast(bytes, item).decode("utf-8", "replace")
            kind = str
        if kind is str or (kind is not dict and isinstance(item, str)):
            assert isinstance(item, str)
            if len(item) < _MEMO_CHARS:
                # a short ASCII text holds no phrase (``_quotes``); one NFKC may lengthen is searched
                if len(item) >= _SHORTEST or not item.isascii():
                    short.append(item)
                if key in _TEXT_KEYS:
                    texts.append(item)
                    plain = plain and _plain(item)
                continue
            known_plain = clean.get(id(item))
            if known_plain is None:
                known = (len(item), hash(item))  # a resent history's texts were searched before
                cached = CLEAN_TEXTS.get(known)
                if cached is None:
                    if _quotes(item):
                        return True
                    cached = _PLAIN if _plain(item) else _NOT_PLAIN
                    CLEAN_TEXTS.put(known, cached)
                known_plain = clean[id(item)] = cached == _PLAIN
            if key in _TEXT_KEYS:
                texts.append(item)
                plain = plain and known_plain
        elif kind is dict or isinstance(item, dict):
            assert isinstance(item, dict)
            done = walked.get(id(item))
            if done is not None:  # the same object again: what it holds was searched, its texts are known
                texts.extend(done[0])
                plain = plain and done[2]
                seen += done[1] - 1
                if seen > MAX_INSPECTED:
                    return True
                continue
            push((_Walked(id(item), len(texts), seen - 1), None))
            # each key is an item too; a string key is searched here rather than stacked (the usual key is
            # short: nothing to search)
            seen += len(item)
            if seen > MAX_INSPECTED:
                return True
            for name in item:
                if type(name) is str or isinstance(name, str):
                    if len(name) >= _SHORTEST or not name.isascii():
                        short.append(name)
                else:
                    seen -= 1  # counted when taken from the stack
                    push((name, None))
            stack.extend(zip(reversed(item.values()), reversed(item), strict=True))
        elif kind is list or kind is tuple or isinstance(item, (list, tuple)):
            stack.extend(zip(reversed(item), repeat(key)))  # type: ignore[call-overload]
        elif isinstance(item, bytes):
            push((item.decode("utf-8", "replace"), key))
            seen -= 1  # counted when taken from the stack
    if short and _any_quotes(short):
        return True
    # the texts in order, with nothing and with a space between: a phrase split across parts LiteLLM joins
    return len(texts) > 1 and _joined_quotes(texts, plain)


def _any_quotes(texts: list[str]) -> bool:
    """``any(_quotes(t) for t in texts)``, in one search when every text is plain and none starts with
    ``data:``: then each one's only form is its lower-case, and a NUL between them (no phrase holds one)
    keeps a phrase from spanning two."""
    joined = "\x00".join(texts)
    if joined.isascii() and not ("%" in joined or "+" in joined or "\\u" in joined or joined.startswith("data:")
                                 or "\x00data:" in joined):
        lowered = joined.lower()
        return any(phrase in lowered for phrase in OVERFLOW_PHRASES)
    return any(_quotes(text) for text in texts)


def _plain(text: str) -> bool:
    """ASCII, and nothing ``_forms`` decodes (no escapes, no ``+``), nor a NUL: its one form is its lower-case."""
    return text.isascii() and not ("%" in text or "+" in text or "\\u" in text or "\x00" in text)


#: what ``CLEAN_TEXTS`` holds of a text: free of overflow wording, and plain or not
_PLAIN, _NOT_PLAIN = 1, 2


def _joined_quotes(texts: list[str], plain: bool) -> bool:
    """``_quotes`` of the texts joined (with nothing, a space, a line break), each text known not to quote;
    ``plain``: every text is (``_plain``).

    When the joined text is plain too, its one form is its lower-case, and a phrase in it that no single text
    holds crosses a boundary: it lies within the last ``_LONGEST`` characters of one text, any texts shorter
    than a phrase, and the first characters of the next. So only those ends are searched (each long text's
    middle replaced by a NUL, which no phrase holds): the same answer without joining and lower-casing the
    whole history three times. (An escape across a boundary, ``\\`` then ``u``, shows in the ends too.)"""
    if plain:
        reach = _LONGEST - 1
        ends = [text if len(text) <= 2 * reach else f"{text[:reach]}\x00{text[-reach:]}" for text in texts]
        whole = "".join(ends)
        if "\\u" not in whole and not any(joined.startswith("data:") for joined in _heads(texts)):
            return any(_quotes(joined) for joined in (whole, " ".join(ends), "\n".join(ends)))
    return any(_quotes(joined) for joined in ("".join(texts), " ".join(texts), "\n".join(texts)))


def _heads(texts: list[str]) -> tuple[str, ...]:
    """The first characters of the three joins (enough to see a ``data:`` prefix)."""
    heads = []
    for separator in ("", " ", "\n"):
        head = ""
        for index, text in enumerate(texts):
            head += (separator if index else "") + text[:8]
            if len(head) >= 8:
                break
        heads.append(head)
    return tuple(heads)


class _Walked:
    """A mark on ``quotes_overflow``'s stack: the dict ``of`` (its id) is walked once this is taken."""

    __slots__ = ("of", "seen", "texts")

    def __init__(self, of: int, texts: int, seen: int) -> None:
        self.of, self.texts, self.seen = of, texts, seen


#: strings at least this long are searched once per call, however often the request holds them
_MEMO_CHARS = 256
#: keys whose string values LiteLLM or a provider may join into one text
_TEXT_KEYS = frozenset({"text", "content", "input", "prompt", "thinking", "parts", "system", "instructions"})
