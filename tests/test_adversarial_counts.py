"""Models counted by estimate are never under-counted by adversarial text, checked against real tokenizers.

The real tokenizers come from the packages that ship them offline: mistral-common (Mistral's SentencePiece
v1/v3/v7 and both Tekken vocabularies) and llama-models (Llama 3). Mistral and Llama 3 groups are counted
with those; every other estimated family (Gemini, Llama 2, unknown) with o200k x1.30 plus the run-aware
bound, which must stay above every real tokenizer here on every string.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.counting import TokenCounter
from budget_hook.counting.family_tokenizers import _package_dir, family_encoder

mistral_data = _package_dir("mistral_common") / "data"


def _real_tokenizers() -> dict:
    from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    found = {f"mistral-{p.name}": SentencePieceTokenizer(str(p)) for p in sorted(Path(mistral_data).glob("*.model*"))}
    found.update({f"mistral-{p.name}": Tekkenizer.from_file(str(p)) for p in sorted(Path(mistral_data).glob("tekken*"))})
    return {name: (lambda t: lambda s: len(t.encode(s, bos=False, eos=False)))(tok) for name, tok in found.items()} | {
        "llama3": lambda s: len(family_encoder("llama3").encode_ordinary(s))}


REAL = _real_tokenizers()
#: the families without a tokenizer or billed usage to calibrate on (Gemini is fitted on its own bills,
#: tests/test_calibration.py, and keeps the run-aware part of the bound at a factor of 1.0)
BOUNDED = [TokenCounter.for_model(m) for m in ("ollama/llama2", "some-unknown-model", "cohere/command-r-plus")]
MISTRAL = TokenCounter.for_model("mistral/mistral-large-latest")
LLAMA3 = TokenCounter.for_model("groq/llama-3.3-70b-versatile")

ADVERSARIAL = {
    "newlines": "\n" * 12_002, "spaces": " " * 12_000, "tabs": "\t" * 5_000, "one letter": "a" * 12_000,
    "digits": "1234567890" * 1_000, "hindi": "नमस्ते दुनिया, यह एक परीक्षण वाक्य है। " * 300,
    "tamil": "வணக்கம் உலகம், இது ஒரு சோதனை வாக்கியம். " * 300, "chinese": "你好世界，这是一个测试句子。" * 500,
    "emoji": "😀🎉🚀" * 2_000, "arabic": "مرحبا بالعالم هذا اختبار " * 400, "thai": "สวัสดีชาวโลก นี่คือการทดสอบ " * 400,
    "korean": "안녕하세요 세계 이것은 테스트입니다 " * 400, "combining": "e\u0301" * 5_000, "zwj": "\u200d" * 5_000,
    "mixed whitespace": " \n \n\t " * 2_000, "code": "    def f(x):\n        return x + 1\n" * 500,
    "english": "The quick brown fox jumps over the lazy dog. " * 500, "punctuation": "!?.,;:" * 2_000,
    "one letter per line": "a\n" * 6_000, "cyrillic": "Привет мир это тест " * 500,
}


def bounded(counter: TokenCounter, text: str) -> int:
    return math.ceil(counter.count_text(text) * counter.profile.safety_factor)


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_the_bound_holds_against_every_real_tokenizer(name):
    text = ADVERSARIAL[name]
    worst = max(count(text) for count in REAL.values())
    for counter in BOUNDED:
        assert bounded(counter, text) >= worst, (counter.model, name, bounded(counter, text), worst)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["\n", " ", "\t", "a", "x", "7", ".", "न", "த", "你", "😀", "é", "e\u0301",
                                           "Ж", "ب", "the ", "{\"k\": 1}", "\r\n"]),
                          st.integers(1, 60)), min_size=1, max_size=40))
def test_the_bound_holds_on_generated_runs_and_scripts(pieces):
    text = "".join(piece * times for piece, times in pieces)
    worst = max(count(text) for count in REAL.values())
    assert bounded(BOUNDED[0], text) >= worst


def test_mistral_and_llama3_groups_are_counted_with_their_own_tokenizers():
    for text in ADVERSARIAL.values():
        mistral_real = max(count(text) for name, count in REAL.items() if name.startswith("mistral"))
        assert MISTRAL.count_text(text) >= mistral_real  # the most any Mistral vocabulary gives
        assert LLAMA3.count_text(text) == REAL["llama3"](text)
    assert MISTRAL.profile.method == "mistral x1.00" and LLAMA3.profile.method == "llama3 x1.00"


def test_a_mistral_request_of_newlines_is_counted_as_mistral_bills_it():
    """Through a Mistral group, 12,002 newlines used to count 985 (Mistral's tokenizer: 12,002)."""
    body = {"messages": [{"role": "user", "content": "\n" * 12_002}]}
    assert MISTRAL.count_request(body).total >= 12_002
    assert TokenCounter.for_model("gemini/gemini-2.5-flash").count_request(body).total >= 12_002
