"""Audio and file parts: conservative estimates from what the request carries (documented in the README).

Contract: ``audio_tokens(data)`` and ``file_tokens(file)`` never return less than their floor, never
raise, and never decode more than the PDF they are given. ``file_text(file)`` is the text of a text file
sent inline (counted as text by the counter). ``unreadable(part)`` says why a part's size cannot be known
(content referenced by id or URL, a PDF whose pages cannot be counted), or None.

PDFs are billed per page, so pages are counted robustly: page objects and page-tree ``/Count`` values,
also inside compressed object streams (PDF 1.5) and with ``#xx`` escapes in names decoded (``/P#61ge``
is ``/Page``), inflating at most ``MAX_INFLATED_BYTES`` in all.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping
from typing import Any

from . import images

_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_PDF_PAGES_COUNT = re.compile(rb"/Type\s*/Pages(?![a-zA-Z])(?:(?!>>).){0,400}?/Count\s+(\d{1,9})"
                              rb"|/Count\s+(\d{1,9})(?:(?!>>).){0,400}?/Type\s*/Pages(?![a-zA-Z])", re.S)
_PDF_NAME_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
_PDF_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\n?endstream", re.S)
#: decompressed PDF streams inspected per file, at most (a zip bomb stops here)
MAX_INFLATED_BYTES = 64 << 20
#: media types of files counted as their text
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml", "application/javascript")

#: Audio and file estimates (documented in the README; conservative on purpose). Providers bill audio and
#: video per second (Gemini: 32 tokens per second of audio, 263 per second of video; OpenAI's audio models
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
    payload = data.partition(",")[2] if data.startswith("data:") else data
    return len(payload) * 3 // 4


def audio_tokens(data: Any) -> int:
    """Conservative estimate for an ``input_audio`` part from its encoded size."""
    return max(AUDIO_MIN_TOKENS, math.ceil(_base64_size(data) / AUDIO_BYTES_PER_TOKEN))


def file_tokens(file: Mapping[str, Any], *, pdf_page_tokens: int = FILE_TOKENS_PER_PDF_PAGE,
                pdf_min_tokens: int = FILE_MIN_TOKENS) -> int:
    """Conservative estimate for a ``file`` part: PDF pages when countable (``pdf_page_tokens`` each: the
    provider's price), audio and video by their duration at the lowest bitrate, else by size."""
    data = file.get("file_data")
    if not isinstance(data, str):
        return FILE_REFERENCE_TOKENS
    if data.startswith("data:audio/"):
        return max(AUDIO_MIN_TOKENS, math.ceil(_base64_size(data) / AUDIO_BYTES_PER_TOKEN))
    if data.startswith("data:video/"):
        return max(FILE_MIN_TOKENS, math.ceil(_base64_size(data) / VIDEO_BYTES_PER_TOKEN))
    pages = pdf_page_count(data)
    if pages:
        return max(pdf_min_tokens, pages * pdf_page_tokens)
    return max(FILE_MIN_TOKENS, math.ceil(_base64_size(data) / FILE_BYTES_PER_TOKEN))


def file_text(file: Mapping[str, Any]) -> str | None:
    """The text of a text file sent inline (``data:text/plain;base64,...``), None for anything else."""
    data = file.get("file_data")
    if not isinstance(data, str) or not data.startswith("data:"):
        return None
    media_type = data[5:].partition(";")[0].partition(",")[0].strip().lower()
    if not media_type.startswith(_TEXT_TYPES):
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
        if not isinstance(data, str):
            return "a file referenced by id or URL: its content is not in the request"
        if file_text(file) is None and data.startswith(("data:application/pdf", "JVBER")) and not pdf_page_count(data):
            return "a PDF whose pages cannot be counted"
    return None


def pdf_page_count(data: str) -> int | None:
    """Pages of a base64 PDF; None if not a PDF or no page can be found."""
    raw = images.decode_data_url(data)
    if not raw or not raw.startswith(b"%PDF"):
        return None
    chunks = [raw, *_inflated_streams(raw)]
    pages = counted = 0
    for chunk in chunks:
        chunk = _PDF_NAME_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), chunk) if b"#" in chunk else chunk
        pages += len(_PDF_PAGE.findall(chunk))
        for match in _PDF_PAGES_COUNT.finditer(chunk):
            counted = max(counted, int(match.group(1) or match.group(2)))
    return max(pages, counted) or None


def _inflated_streams(raw: bytes) -> list[bytes]:
    """The FlateDecode streams of a PDF, inflated (object streams hide page objects there)."""
    out: list[bytes] = []
    budget = MAX_INFLATED_BYTES
    for match in _PDF_STREAM.finditer(raw):
        if budget <= 0:
            break
        inflater = zlib.decompressobj()
        try:
            data = inflater.decompress(match.group(1), budget)
        except zlib.error:
            continue
        budget -= len(data)
        out.append(data)
    return out
