"""Model families' own tokenizers, where a package ships them for offline use (no network, no import of
litellm; each is loaded once, lazily).

* ``llama3``: Meta's Llama 3 tokenizer, the BPE file ``llama-models`` ships (read directly with tiktoken;
  the package itself is not imported);
* ``mistral``: Mistral's tokenizers from ``mistral-common``: the SentencePiece vocabulary of its v1-v7
  models and the Tekken vocabulary (loaded on first use of a Mistral group: about 0.9 s and 170 MiB per
  worker). Which one a deployment runs is not known from its name, so a text
  counts as the **most** tokens any of them gives (they differ by up to 4x on long runs of one letter or
  of newlines).

Contract: ``family_encoder(name)`` returns an object with ``encode_ordinary(text) -> list[int]`` (the
counter only uses its length), or raises ``TokenizerUnavailableError`` when the package is not installed;
``available(name)`` says which without loading anything.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import threading
from pathlib import Path
from typing import Any, Protocol

import tiktoken

from ..errors import TokenizerUnavailableError
from .encodings import SafeEncoding, safe_encode

#: Llama 3's pre-tokenizer pattern (``llama_models/llama3/tokenizer.py``)
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_PACKAGES = {"llama3": "llama_models", "mistral": "mistral_common"}
_lock = threading.Lock()


class TextEncoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def available(name: str) -> bool:
    folder = _package_dir(_PACKAGES[name]) if name in _PACKAGES else None
    if folder is None:
        return False
    if name == "llama3":
        return (folder / "llama3" / "tokenizer.model").is_file()
    return (folder / "data").is_dir()


@functools.cache
def family_encoder(name: str) -> TextEncoder:
    with _lock:
        if name == "llama3":
            return _llama3()
        if name == "mistral":
            return _Mistral()
    raise TokenizerUnavailableError(f"no offline tokenizer named {name!r}")


def _llama3() -> tiktoken.Encoding:
    folder = _package_dir("llama_models")
    path = folder / "llama3" / "tokenizer.model" if folder else None
    if path is None or not path.is_file():
        raise TokenizerUnavailableError("llama-models is not installed: Llama 3's tokenizer is not available offline")
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return SafeEncoding.of(tiktoken.Encoding(name="llama3", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks,
                                             special_tokens={}))


class _Mistral:
    """The most tokens any shipped Mistral vocabulary gives a text."""

    def __init__(self) -> None:
        folder = _package_dir("mistral_common")
        if folder is None or not (folder / "data").is_dir():
            raise TokenizerUnavailableError("mistral-common is not installed: Mistral's tokenizers are not "
                                            "available offline")
        try:
            from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer
            from mistral_common.tokens.tokenizers.tekken import Tekkenizer
        except Exception as exc:  # sentencepiece missing, or a broken install
            raise TokenizerUnavailableError(f"mistral-common cannot load its tokenizers: {exc}") from exc
        data = folder / "data"
        self.tokenizers: list[Any] = [SentencePieceTokenizer(str(data / "mistral_instruct_tokenizer_240323.model.v3"))]
        # the two Tekken files share their text vocabulary (240911 adds special tokens): one is enough
        self.tokenizers.append(Tekkenizer.from_file(str(data / "tekken_240911.json")))

    def encode_ordinary(self, text: str) -> list[int]:
        return max((safe_encode(functools.partial(tokenizer.encode, bos=False, eos=False), text)
                    for tokenizer in self.tokenizers), key=len)
