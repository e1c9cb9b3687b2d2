"""Content a self-hosted server reads that is not in the request as text (a fourteenth attack review, F3 and F4):
an ``audio_url`` by URL on a chat request (vLLM fetches it; its tokens count toward the model's length), and
``prompt_embeds`` on ``/v1/completions`` (vLLM reads each tensor row as a prompt token; LiteLLM forwards it as sent).
Both are unreadable content, as a ``video_url`` by URL already was: flagged and counted at an estimate, or refused
naming the field under ``unreadable_content: block``."""

from __future__ import annotations

import base64

import pytest

from budget_hook.budget import ModelLimits
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy import load_settings
from budget_hook.shapes import SHAPES

MODEL = "hosted_vllm/my-model"
#: the fewest bytes a tensor row takes (a hidden size of 512 at a byte a value: ``completions.EMBEDS_ROW_BYTES``)
EMBEDS_ROW_BYTES = 512


def decided(shape: str, body: dict, window: int = 4_000, **settings):
    return decide(BudgetRequest(SHAPES.get(shape), body, "g", ModelLimits(window, "test", MODEL)),
                  load_settings(settings))


def audio(url: str) -> dict:
    return {"model": "g", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "transcribe this"}, {"type": "audio_url", "audio_url": {"url": url}}]}]}


def embeds(size: int, **extra) -> dict:
    tensor = base64.b64encode(b"\0" * size).decode()
    return {"model": "g", "max_tokens": 10, "prompt": "", "prompt_embeds": tensor, **extra}


@pytest.mark.parametrize("part", [{"url": "https://example.com/a.wav"}, "https://example.com/a.wav"])
def test_audio_by_url_is_flagged_estimated_and_refused_under_block(part):
    body = audio("x")
    body["messages"][0]["content"][1]["audio_url"] = part
    estimated = decided("chat", body, window=200_000)
    assert estimated.action == "pass" and any("messages[0].content[1]" in w and "audio by URL" in w
                                              for w in estimated.warnings)
    assert estimated.tokens_before >= 10_000  # the flat estimate of unseen content
    assert decided("chat", body).action == "blocked"  # 10,000 estimated over a 4,000 window
    blocked = decided("chat", body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.kind == "unreadable"
    assert blocked.block.param == "messages[0].content[1]" and blocked.block.code == "content_not_countable"


def test_inline_audio_is_counted_by_its_size_and_not_flagged():
    body = audio("data:audio/wav;base64," + base64.b64encode(b"\0" * 2_000).decode())
    assert decided("chat", body, unreadable_content="block").action == "pass"


def test_prompt_embeds_are_refused_under_block_naming_the_field():
    blocked = decided("completions", embeds(2_000), unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.kind == "unreadable"
    assert blocked.block.param == "prompt_embeds" and blocked.block.code == "content_not_countable"
    inside = decided("completions", {**embeds(0), "prompt_embeds": None,
                                     "extra_body": {"prompt_embeds": "AAAA"}}, unreadable_content="block")
    assert inside.action == "blocked" and inside.block.param == "extra_body.prompt_embeds"


def test_prompt_embeds_are_counted_at_the_most_rows_their_size_holds():
    # the review: 60,000 bytes counted as nothing; now their rows at EMBEDS_ROW_BYTES a row at least
    small = decided("completions", embeds(2_000))
    assert small.action == "pass" and any("prompt_embeds" in w for w in small.warnings)
    assert small.inputs.tokens[0] >= 2_000 // EMBEDS_ROW_BYTES
    big = decided("completions", embeds(4_000 * EMBEDS_ROW_BYTES))
    assert big.action == "blocked" and big.block.kind == "cannot_fit"
    batch = decided("completions", {**embeds(0), "prompt_embeds": ["AAAA", base64.b64encode(b"\0" * 60_000).decode()]})
    assert batch.inputs.tokens[0] >= 60_000 // EMBEDS_ROW_BYTES


def test_a_completion_without_embeddings_is_not_flagged():
    plain = decided("completions", {"model": "g", "max_tokens": 10, "prompt": "hello", "prompt_embeds": None},
                    unreadable_content="block")
    assert plain.action == "pass" and not plain.warnings
