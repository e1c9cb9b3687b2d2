"""Offline access to the tiktoken encodings budget_hook counts with.

Contract: ``get_encoding(name)`` returns a ready ``tiktoken.Encoding`` without touching the network, or
raises ``TokenizerUnavailableError`` saying why. Its ``encode_ordinary`` never fails on any text
(``safe_encode``). tiktoken normally downloads its BPE files on first use;
the litellm wheel ships ``cl100k_base``, ``o200k_base`` and ``p50k_base`` under
``litellm/litellm_core_utils/tokenizers/`` in tiktoken's cache layout. We point tiktoken at that folder
(unless the operator already chose a cache with ``TIKTOKEN_CACHE_DIR``), which is what the LiteLLM proxy
itself does. The folder is located with ``importlib.util.find_spec`` so that litellm is never imported
here: importing it costs seconds and may fetch a remote cost map.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path

import tiktoken

from ..errors import TokenizerUnavailableError

#: Encodings we know the litellm wheel vendors (file name = sha1 of tiktoken's download URL).
VENDORED_ENCODINGS = {
    "cl100k_base": "9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
    "o200k_base": "fb374d419588a4632f3f557e76b4b70aebbca790",
    "p50k_base": "ec7223a39ce59f226a68acc30dc1af2788490e15",
}

_lock = threading.Lock()
#: text a tokenizer fails on is encoded in pieces of this many characters (``safe_encode``)
PIECE_CHARS = 1 << 16


def safe_encode(encode: Callable[[str], list[int]], text: str, piece: int = PIECE_CHARS) -> list[int]:
    """``encode(text)``; when the tokenizer fails on the text, its pieces of ``piece`` characters encoded one
    by one (smaller pieces for a piece that fails again; one token per UTF-8 byte, an upper bound, for 512
    characters that still fail). tiktoken's pre-tokenizer overflows its stack on a run of about a million
    spaces: o200k_base and Llama 3 raise ``PanicException`` (a ``BaseException``, which no ``except
    Exception`` catches: the request failed with a bare 500), Mistral's Tekken a ``ValueError`` (the plugin's
    failure path). Tokens of cut text differ from the whole's by about one per cut, on text no tokenizer
    could read whole."""
    try:
        return encode(text)
    except BaseException as exc:
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise  # KeyboardInterrupt, SystemExit
    if len(text) <= 512:
        return [0] * len(text.encode("utf-8", "surrogatepass"))
    piece = min(piece, max(512, len(text) // 2))
    tokens: list[int] = []
    for start in range(0, len(text), piece):
        tokens += safe_encode(encode, text[start:start + piece], piece // 8)
    return tokens


class SafeEncoding(tiktoken.Encoding):
    """A ``tiktoken.Encoding`` whose ``encode_ordinary`` never fails (``safe_encode``)."""

    @classmethod
    def of(cls, encoding: tiktoken.Encoding) -> SafeEncoding:
        safe = cls.__new__(cls)
        safe.__dict__.update(vars(encoding))
        return safe

    def encode_ordinary(self, text: str) -> list[int]:
        return safe_encode(super().encode_ordinary, text)


def vendored_tokenizer_dir() -> Path | None:
    """The litellm wheel's tokenizer folder, found without importing litellm (None if not installed)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return candidate
    return None


@functools.cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """Load encoding ``name`` offline; cached for the life of the process (encodings are immutable)."""
    if name not in VENDORED_ENCODINGS:
        raise TokenizerUnavailableError(
            f"encoding {name!r} is not available offline; available: {', '.join(sorted(VENDORED_ENCODINGS))}"
        )
    with _lock:
        cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR")
        if cache_dir is None:
            vendored = vendored_tokenizer_dir()
            if vendored is None:
                raise TokenizerUnavailableError(
                    "litellm is not installed, so its vendored tiktoken files are missing; "
                    "install the pinned litellm or set TIKTOKEN_CACHE_DIR to a folder holding "
                    f"{VENDORED_ENCODINGS[name]} ({name})"
                )
            # Same choice the LiteLLM proxy makes at start-up; keeps tiktoken off the network.
            os.environ["TIKTOKEN_CACHE_DIR"] = str(vendored)
            cache_dir = str(vendored)
        if not (Path(cache_dir) / VENDORED_ENCODINGS[name]).is_file():
            raise TokenizerUnavailableError(
                f"TIKTOKEN_CACHE_DIR={cache_dir} has no file {VENDORED_ENCODINGS[name]} for {name}; "
                "tiktoken would try to download it. Unset TIKTOKEN_CACHE_DIR to use the copy litellm ships, "
                "or copy that file there."
            )
        try:
            return SafeEncoding.of(tiktoken.get_encoding(name))
        except Exception as exc:  # tiktoken raises ValueError/OSError/requests errors
            raise TokenizerUnavailableError(f"could not load tiktoken encoding {name!r}: {exc}") from exc
