"""Tokens other tokenizers spend on runs of digits, spaces, one letter and scripts o200k packs tighter, as upper
bounds added to o200k's count (``TokenCounter.count_text``), and how a number's digits change a count.

* ``digit_extra(text)``: Claude and Gemini spend a token per digit where o200k packs up to three: per run of
  decimal digits (``\\d``, any script), its length less o200k's tokens for it. ASCII text is scanned with
  bytes operations (no digit: one C pass; else the runs split out in C), other text with the regex; the two
  are property-tested equal (``tests/test_cpu_paths.py``).
* ``run_aware_extra(text)``: SentencePiece, Tekken and byte-level vocabularies (see its docstring).
* ``number_tokens(digits, digits_as_tokens)``: the raw tokens of a number of ``digits`` digits standing alone
  (between characters that are neither letters nor digits) in an encoding of ``DIGIT_GROUPED``, whose
  pre-tokenizer cuts a digit run into groups of three and has every group of 1-3 digits as one token: a
  number's count depends only on its length (``TokenCounter.renumbered``).
"""

from __future__ import annotations

import math
import re

_DIGIT_RUNS = re.compile(r"\d{2,}")
_SPACE_RUN = re.compile(r" {2,}")
_LETTER_RUN = re.compile(r"([^\s\d])\1{3,}")
#: the bound's terms (tests hold it against the real Mistral and Llama 3 tokenizers on adversarial text)
SPACES_PER_TOKEN = 8
LETTERS_PER_TOKEN = 2
EXTRA_TOKENS_PER_UTF8_BYTE = 0.55
_ASCII_DIGITS = b"0123456789"
#: ASCII digits kept, every other byte a space: ``split()`` then yields the digit runs
_DIGITS_ONLY = bytes(c if 0x30 <= c <= 0x39 else 0x20 for c in range(256))
#: tiktoken encodings whose pattern splits digits as ``\p{N}{1,3}`` and whose vocabulary holds every 1-3 digit
#: string as one token (checked for all of them in ``tests/test_cpu_paths.py``)
DIGIT_GROUPED = frozenset({"o200k_base", "cl100k_base"})


def digit_extra(text: str) -> int:
    """Tokens a digit-by-digit tokenizer spends on ``text``'s digit runs beyond o200k's groups of three."""
    if text.isascii():
        data = text.encode("ascii")
        if len(data) - len(data.translate(None, _ASCII_DIGITS)) < 2:
            return 0  # a run needs two digits: most prose has none
        return sum(len(run) - -(-len(run) // 3) for run in data.translate(_DIGITS_ONLY).split())
    return digit_extra_scanned(text)


def digit_extra_scanned(text: str) -> int:
    """``digit_extra`` by the regex (the definition; any script's decimal digits)."""
    return sum(len(run) - -(-len(run) // 3) for run in _DIGIT_RUNS.findall(text))


def number_tokens(digits: int, digits_as_tokens: bool) -> int:
    """Raw tokens (with ``digit_extra``'s) of a number of ``digits`` digits standing alone, in ``DIGIT_GROUPED``."""
    return digits if digits_as_tokens else -(-digits // 3)


def run_aware_extra(text: str, *, runs: bool = True) -> int:
    """Tokens other tokenizers can spend on ``text`` beyond o200k's count, as an upper bound: SentencePiece
    vocabularies spend one token per newline or tab and one per few spaces of a run, Tekken one per two
    letters of a one-letter run, byte-level vocabularies up to one per UTF-8 byte of scripts they lack."""
    extra = text.count("\n") + text.count("\r") + text.count("\t") if runs else 0
    if "  " in text and runs:
        extra += sum(-(-len(run) // SPACES_PER_TOKEN) for run in _SPACE_RUN.findall(text))
    extra += sum(-(-len(m.group(0)) // LETTERS_PER_TOKEN) for m in _LETTER_RUN.finditer(text)) if runs else 0
    if not text.isascii():
        extra += math.ceil((len(text.encode("utf-8", "surrogatepass")) - len(text)) * EXTRA_TOKENS_PER_UTF8_BYTE)
        # characters beyond the BMP (emoji): byte fallback spends all four bytes
        extra += len(text.encode("utf-16-le", "surrogatepass")) // 2 - len(text)
    return extra
