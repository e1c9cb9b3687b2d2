"""Audio and file parts: conservative estimates from what the request carries (documented in the README).

Contract: ``audio_tokens(data)`` and ``file_tokens(file)`` never return less than their floor, never
raise, and never decode more than the PDF they are given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from . import images

_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")

#: Audio and file estimates (documented in the README; conservative on purpose).
AUDIO_BYTES_PER_TOKEN = 400  # ~10 tokens/s even for 32 kbit/s compressed audio
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


def file_tokens(file: Mapping[str, Any]) -> int:
    """Conservative estimate for a ``file`` part: PDF pages when countable, else by size."""
    data = file.get("file_data")
    if not isinstance(data, str):
        return FILE_REFERENCE_TOKENS
    pages = pdf_page_count(data)
    if pages:
        return max(FILE_MIN_TOKENS, pages * FILE_TOKENS_PER_PDF_PAGE)
    return max(FILE_MIN_TOKENS, math.ceil(_base64_size(data) / FILE_BYTES_PER_TOKEN))


def pdf_page_count(data: str) -> int | None:
    """Pages of a base64 PDF, counted from its page objects; None if not a PDF or not countable."""
    raw = images.decode_data_url(data)
    if not raw or not raw.startswith(b"%PDF"):
        return None
    return len(_PDF_PAGE.findall(raw)) or None
