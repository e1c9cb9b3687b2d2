"""Audio and file parts: conservative estimates from what the request carries (docs/counting.md, "Images,
audio, files").

Contract: ``audio_tokens(data)`` and ``file_tokens(file)`` never return less than their floor, never
raise, and never decode more than the PDF they are given. ``file_text(file)`` is the text of a text file
sent inline (counted as text by the counter). ``unreadable(part)`` says why a part's size cannot be known
(content referenced by id or URL, a PDF whose pages cannot be counted within the bounds below), or None.

PDFs are billed per page, so pages are counted robustly: page objects and page-tree ``/Count`` values,
also inside compressed object streams (PDF 1.5), with ``#xx`` escapes in names decoded (``/P#61ge`` is
``/Page``) and any whitespace between tokens. What one PDF may cost is bounded, and every step is linear
in the bytes it reads (no regex here can backtrack): its streams are inflated, in all, at most
``inflate_budget(size)`` bytes (``INFLATE_RATIO`` times the PDF's size, at least ``MIN_INFLATED_BYTES``,
at most ``MAX_INFLATED_BYTES``), one stream held at a time; at most ``MAX_PDF_STREAMS`` stream keywords
and ``MAX_PAGE_TREE_NODES`` page-tree nodes are examined. A PDF whose inspection hits a bound is
*incomplete*: counted at the pages found or a conservative estimate, whichever is more, and reported by
``unreadable`` (so ``unreadable_content: block`` refuses it).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import images

#: inflated bytes per PDF, at most: this many ...
MAX_INFLATED_BYTES = 8 << 20
#: ... and at most this many times the PDF's own size (a 10 KB PDF inflates at most 160 KB; legitimate
#: PDFs, fonts and images included, run well under 10x) ...
INFLATE_RATIO = 16
#: ... but at least this many (a tiny PDF whose one object stream holds its page objects)
MIN_INFLATED_BYTES = 8 << 10
#: ``stream`` keywords examined per PDF, at most this many (a 2,000-page PDF without object streams has
#: about 10,000) and one per ``BYTES_PER_STREAM`` bytes of the PDF (a real stream has two, ``stream`` and
#: ``endstream``, around its dictionary and data: it takes far more than twice that)
MAX_PDF_STREAMS = 50_000
BYTES_PER_STREAM = 64
#: page-tree nodes (``/Type /Pages`` dictionaries) paired with their ``/Count`` per PDF, at most (a tree of
#: 1,000 nodes holds 10,000 pages and more; pages are also counted as page objects, whatever this bound)
MAX_PAGE_TREE_NODES = 1_000
_MAX_COUNTS_PER_NODE = 64
#: input fed to zlib per call, growing to ``_MAX_STEP``: what zlib copies back as unused input stays small
_FIRST_STEP = 4 << 10
_MAX_STEP = 1 << 20
#: inflated text is scanned this many bytes per call: a thread scanning megabytes never holds the GIL (and
#: the event loop) for more than a fraction of a millisecond at a time
_WINDOW = 256 << 10
#: PDF scans remembered (by a digest of the PDF's bytes): a part is read by ``unreadable`` and counted
_CACHED_SCANS = 128
#: media types of Office documents (Bedrock's ``doc``, ``docx``, ``xls``, ``xlsx``; the Responses API's ``pptx``):
#: billed as the text they hold, which a compressed document's size says nothing of (7 KB held 550,000 tokens)
OFFICE_TYPES = ("application/vnd.openxmlformats-officedocument.", "application/msword", "application/vnd.ms-")
#: media types of files counted as their text
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml", "application/javascript")

#: Audio and file estimates (docs/counting.md, "Images, audio, files"; conservative on purpose). Providers bill
#: audio and video per second (Gemini: 32 tokens per second of audio, 263 per second of video; OpenAI's audio models
#: fewer), and a request carries bytes: the estimate assumes the lowest bitrates in use (6 kbit/s speech
#: codecs, 100 kbit/s video), so a second costs as few bytes as it can.
AUDIO_BYTES_PER_SECOND = 750
AUDIO_TOKENS_PER_SECOND = 32
AUDIO_BYTES_PER_TOKEN = AUDIO_BYTES_PER_SECOND / AUDIO_TOKENS_PER_SECOND  # about 23
VIDEO_BYTES_PER_SECOND = 12_500
VIDEO_TOKENS_PER_SECOND = 263
VIDEO_BYTES_PER_TOKEN = VIDEO_BYTES_PER_SECOND / VIDEO_TOKENS_PER_SECOND  # about 48
AUDIO_MIN_TOKENS = 100
FILE_TOKENS_PER_PDF_PAGE = 3_000  # Anthropic's guide: 1.5-3k text tokens per page plus the page image
FILE_BYTES_PER_TOKEN = 50
FILE_MIN_TOKENS = 3_000
FILE_REFERENCE_TOKENS = 10_000  # a file_id or URL whose content we cannot see


def _base64_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    payload = len(data) - data.find(",") - 1 if data.startswith("data:") else len(data)
    return payload * 3 // 4


def audio_tokens(data: Any) -> int:
    """Conservative estimate for an ``input_audio`` part from its encoded size."""
    return max(AUDIO_MIN_TOKENS, math.ceil(_base64_size(data) / AUDIO_BYTES_PER_TOKEN))


#: the endings of a video's URL or file id (LiteLLM's hosted_vllm ``_is_video_file`` sends such a ``file`` part to the
#: server as a ``video_url``)
VIDEO_ENDINGS = (".mp4", ".webm", ".mov", ".mkv", ".avi", ".m4v", ".mpeg", ".mpg", ".3gp")


def is_video_file(file: Mapping[str, Any]) -> bool:
    """Whether a ``file`` part is a video some server reads as one: its declared ``format``, an inline ``data:video/``
    URL, or a URL or file id ending like a video file."""
    declared, data, ident = file.get("format"), file.get("file_data"), file.get("file_id")
    return (isinstance(declared, str) and declared[:6].lower() == "video/") or \
        (isinstance(data, str) and data[:11].lower() == "data:video/") or \
        any(isinstance(value, str) and value[-6:].lower().endswith(VIDEO_ENDINGS) for value in (data, ident))


def video_fps(file: Mapping[str, Any]) -> float:
    """The frames a second Gemini samples a video at: ``video_metadata.fps``, which LiteLLM forwards (a number, or a
    string protobuf's JSON reads as one), when over its default of 1. An attack review (2026-12-06): 24 fps over
    30 s is 185,760 tokens, counted 7,898 at one frame a second."""
    meta = file.get("video_metadata")
    value = meta.get("fps") if isinstance(meta, Mapping) else None
    try:
        fps = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else 1.0
    except ValueError:
        return 1.0
    return min(fps, 1e6) if math.isfinite(fps) and fps > 1 else 1.0


def file_tokens(file: Mapping[str, Any], *, pdf_page_tokens: int = FILE_TOKENS_PER_PDF_PAGE,
                pdf_min_tokens: int = FILE_MIN_TOKENS) -> int:
    """Conservative estimate for a ``file`` part: PDF pages when countable (``pdf_page_tokens`` each: the
    provider's price), audio and video by their duration at the lowest bitrate, else by size. A PDF whose
    inspection hit a bound: its pages found or the estimate by size, whichever is more (at least
    ``FILE_REFERENCE_TOKENS``)."""
    data = file.get("file_data")
    if not isinstance(data, str) or not data:  # ``file_id or file_data``: an empty one sends the id
        return FILE_REFERENCE_TOKENS
    head = data[:16].lower()  # a media type is read whatever its case ("data:AUDIO/wav")
    if head.startswith("data:audio/"):
        return max(AUDIO_MIN_TOKENS, math.ceil(_base64_size(data) / AUDIO_BYTES_PER_TOKEN))
    if head.startswith("data:video/"):
        return max(FILE_MIN_TOKENS, math.ceil(_base64_size(data) / VIDEO_BYTES_PER_TOKEN * video_fps(file)))
    by_size = max(FILE_MIN_TOKENS, math.ceil(_base64_size(data) / FILE_BYTES_PER_TOKEN))
    scan = pdf_pages(data)
    if scan is None:
        return by_size
    by_pages = max(pdf_min_tokens, scan.pages * pdf_page_tokens) if scan.pages else 0
    if scan.complete:
        return by_pages or by_size
    return max(by_pages, by_size, FILE_REFERENCE_TOKENS)


def data_type(url: str) -> str:
    """A data URL's own media type (``data:<type>;base64,...``), lower-cased ("" when it names none)."""
    return url[5:80].partition(",")[0].partition(";")[0].strip().lower()


def file_text(file: Mapping[str, Any]) -> str | None:
    """The text of a text file sent inline (``data:text/plain;base64,...``), None for anything else."""
    data = file.get("file_data")
    if not isinstance(data, str) or not data.startswith("data:"):
        return None
    if not data_type(data).startswith(_TEXT_TYPES):
        return None
    raw = images.decode_data_url(data)
    if raw is None:
        return None
    return raw.decode("utf-8", errors="replace")


def unreadable(part: Any) -> str | None:
    """Why a content part's size cannot be known here, or None when it can."""
    if not isinstance(part, Mapping):
        return None
    if part.get("type") == "file" and isinstance(part.get("file"), Mapping):
        file = part["file"]
        data = file.get("file_data")
        if not isinstance(data, str) or not data:
            return "a file referenced by id or URL: its content is not in the request"
        if file_text(file) is None and data[:20].lower().startswith(("data:application/pdf", "jvber")):
            scan = pdf_pages(data)
            if scan is None or not scan.pages:
                return "a PDF whose pages cannot be counted"
            if not scan.complete:
                return (f"a PDF whose pages cannot be counted within the inspection bounds ({scan.pages} found; its "
                        f"streams inflate beyond {inflate_budget(scan.size)} bytes, or it has too many streams or "
                        "page-tree nodes)")
        if data_type(data).startswith(OFFICE_TYPES):
            return "an Office document: Bedrock and the Responses API read its text, which is not counted here"
    return None


# --- PDF pages ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PdfPages:
    """What a bounded inspection of one PDF found."""

    #: page objects, or the largest page-tree ``/Count``, whichever is more
    pages: int
    #: every stream was inspected within the bounds (else ``pages`` may fall short)
    complete: bool
    #: the PDF's size and the bytes inflated to read it
    size: int
    inflated: int


def inflate_budget(size: int) -> int:
    """Bytes a PDF of ``size`` bytes may inflate, in all."""
    return min(MAX_INFLATED_BYTES, max(MIN_INFLATED_BYTES, INFLATE_RATIO * size))


def pdf_page_count(data: str) -> int | None:
    """Pages of a base64 PDF; None if not a PDF or no page can be found (see ``pdf_pages``: a bounded
    inspection, so for an incomplete one these are the pages found)."""
    scan = pdf_pages(data)
    return scan.pages if scan is not None and scan.pages else None


def pdf_pages(data: str) -> PdfPages | None:
    """A bounded inspection of a base64 PDF (``data:`` URL or bare base64); None if it is not a PDF."""
    head = images.decode_data_url(data, max_bytes=1024)  # not a PDF (a zip, a video): never decoded whole
    if not head or head.find(b"%PDF", 0, 1024) < 0:
        return None
    raw = images.decode_data_url(data)
    if not raw:
        return None
    key = hashlib.blake2b(raw, digest_size=16).digest()
    with _SCANS_LOCK:
        cached = _SCANS.get(key)
    if cached is not None:
        return cached
    scan = _scan(raw)
    with _SCANS_LOCK:
        _SCANS[key] = scan
        while len(_SCANS) > _CACHED_SCANS:
            _SCANS.popitem(last=False)
    return scan


_SCANS: OrderedDict[bytes, PdfPages] = OrderedDict()
_SCANS_LOCK = threading.Lock()

#: what the page counter reads, in text with every whitespace byte removed (``_normalized``)
_PDF_PAGES_NODE = re.compile(rb"/Type/Pages(?![a-zA-Z])")
_PDF_COUNT = re.compile(rb"/Count(\d{1,9})")
_PDF_WHITESPACE = b" \t\n\r\f\v\x00"
#: the ``#xx`` escapes of the letters those names are made of (others cannot turn a name into one of them)
_PDF_ESCAPES = tuple(sorted({(f"#{ord(c):02{x}}".encode(), c.encode()) for c in "TypePagesCount" for x in "xX"}))


def _scan(raw: bytes) -> PdfPages:
    """Pages of a PDF's bytes, its streams inflated within ``inflate_budget``: linear in what it reads."""
    budget = inflate_budget(len(raw))
    pages = _PageCounter()
    pages.read(raw)
    starts, complete = _stream_starts(raw)
    inflated = 0
    with memoryview(raw) as view:
        for start in starts:
            if inflated >= budget:
                complete = False
                break
            data, cut = _inflate(view, start, budget - inflated)
            inflated += len(data)
            if data:
                pages.read(data)
            del data
            if cut:
                complete = False
                break
    return PdfPages(pages.found(), complete and pages.complete, len(raw), inflated)


def _zlib_header(cmf: int, flg: int) -> bool:
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf * 256 + flg) % 31 == 0


def _stream_starts(raw: bytes) -> tuple[list[int], bool]:
    """Where stream data may start (after each ``stream`` keyword and its end of line, where a zlib stream
    can open), and whether all were listed. A keyword inside another stream or a string is a candidate too,
    so a fake ``stream`` cannot hide the real one. Likely object streams first: they hold page objects."""
    likely: list[int] = []
    others: list[int] = []
    previous = keyword = 0
    for _ in range(min(MAX_PDF_STREAMS, 64 + len(raw) // BYTES_PER_STREAM)):
        keyword = raw.find(b"stream", keyword)
        if keyword < 0:
            return likely + others, True
        start = keyword + 6
        while start < len(raw) and start - keyword < 10 and raw[start] in b" \t\r\n":
            start += 1
        if start + 1 < len(raw) and _zlib_header(raw[start], raw[start + 1]):
            objects = raw.find(b"ObjStm", previous, keyword) >= 0 or raw.find(b"/First", previous, keyword) >= 0
            (likely if objects else others).append(start)
        previous = keyword
        keyword += 6
    return likely + others, raw.find(b"stream", keyword) < 0


def _inflate(view: memoryview, start: int, limit: int) -> tuple[bytearray, bool]:
    """The zlib stream at ``view[start:]``, inflated up to ``limit`` bytes (what inflates before an error is
    kept); and whether the limit cut it."""
    inflater = zlib.decompressobj()
    out = bytearray()
    position, step, end = start, _FIRST_STEP, len(view)
    while position < end and len(out) < limit and not inflater.eof:
        try:
            out += inflater.decompress(view[position:position + step], limit - len(out))
        except zlib.error:
            break
        position += step
        step = min(2 * step, _MAX_STEP)
    return out, len(out) >= limit and not inflater.eof


class _PageCounter:
    """Page objects and page-tree counts over the chunks of one PDF (its bytes, then each inflated stream)."""

    def __init__(self) -> None:
        self.pages = 0
        self.counted = 0
        self.nodes_left = MAX_PAGE_TREE_NODES
        self.complete = True

    def found(self) -> int:
        return max(self.pages, self.counted)

    def read(self, chunk: bytes | bytearray) -> None:
        text = _normalized(chunk)
        nodes = _count(text, b"/Type/Pages")
        # ``/Type /Page`` but not ``/Pages`` nor ``/PageLabel`` (another name run on, ``/Page1``, counts: more)
        self.pages += _count(text, b"/Type/Page") - nodes - _count(text, b"/Type/PageLabel")
        if nodes > self.nodes_left:
            self.complete = False
            return
        self.nodes_left -= nodes
        if nodes and _count(text, b"/Count"):
            counted = _tree_count(text)
            if counted is None:
                self.complete = False
            else:
                self.counted = max(self.counted, counted)


def _normalized(chunk: bytes | bytearray) -> bytes:
    """``chunk`` without whitespace, the escapes of the letters the counter reads decoded: ``/Type /P#61ge``
    reads ``/Type/Page``. (Tokens run together may over-count, never under-count.) ``_WINDOW`` at a time."""
    parts: list[bytes | bytearray] = []
    carry = b""
    for start in range(0, len(chunk), _WINDOW):
        piece = carry + chunk[start:start + _WINDOW].translate(None, _PDF_WHITESPACE)
        cut = piece.rfind(b"#", max(0, len(piece) - 2))  # an escape cut by the window waits for the next one
        carry, piece = (piece[cut:], piece[:cut]) if cut >= 0 and start + _WINDOW < len(chunk) else (b"", piece)
        if b"#" in piece:
            for escape, letter in _PDF_ESCAPES:
                piece = piece.replace(escape, letter)
        parts.append(piece)
    return b"".join(parts)


def _count(text: bytes, pattern: bytes) -> int:
    """``text.count(pattern)`` for a pattern that cannot overlap itself, ``_WINDOW`` at a time."""
    return sum(text.count(pattern, start, start + _WINDOW + len(pattern) - 1) for start in range(0, len(text), _WINDOW))


def _tree_count(text: bytes) -> int | None:
    """The largest ``/Count`` of a dictionary that is a page-tree node: a ``/Count`` with ``/Type /Pages``
    between the same two ``>>`` (before or after it). Each stretch of ``text`` is searched once. None when a
    node holds more than ``_MAX_COUNTS_PER_NODE`` counts (no real one holds more than one)."""
    best = end = 0
    for node in _PDF_PAGES_NODE.finditer(text):
        if node.start() < end:
            continue  # the same dictionary as the previous node
        start = text.rfind(b">>", end, node.start())
        start = end if start < 0 else start + 2
        end = text.find(b">>", node.end())
        end = len(text) if end < 0 else end
        if text.count(b"/Count", start, end) > _MAX_COUNTS_PER_NODE:
            return None
        best = max(best, max(map(int, _PDF_COUNT.findall(text, start, end)), default=0))
    return best
