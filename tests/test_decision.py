"""decide_chat: one request's decision as facts; it never raises for a client's input."""

from __future__ import annotations

import pytest

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.pipeline import DecisionRecord
from budget_hook.pipeline import decide_conversation as decide_chat
from budget_hook.policy.settings import load_settings

COUNTER = TokenCounter.for_model("gpt-4o")
LIMITS = ModelLimits(4000, "test", "gpt-4o")


def decide(request, **settings):
    resolved = load_settings(settings).layers.resolve(model_group="g")
    return decide_chat(request, model_group="g", limits=LIMITS, resolved=resolved, counter=COUNTER)


def chat(words: int, turns: int = 1, **extra) -> dict:
    messages = []
    for turn in range(turns):
        messages += [{"role": "user", "content": "lorem " * words}, {"role": "assistant", "content": "ipsum " * words}]
    return {"messages": messages + [{"role": "user", "content": "last"}], **extra}


def test_fitting_request_passes_as_the_same_object():
    request = chat(10)
    decision = decide(request)
    assert decision.action == "pass" and decision.request is request
    assert decision.tokens_before == decision.tokens_after == COUNTER.count_request(request).total


def test_over_budget_request_is_trimmed_and_the_record_lists_the_actions():
    request = chat(300, turns=8)
    decision = decide(request)
    assert decision.action == "trimmed" and decision.request is not request
    record = DecisionRecord.build(decision).as_dict()
    assert record["counts"]["dropped"] == len(record["actions"]) > 0
    assert record["tokens_after"] <= record["budget"]["budget"] == 3200


def test_max_tokens_leaving_no_room_is_a_block_that_names_both_numbers():
    request = chat(10, max_tokens=3900)
    decision = decide(request)
    assert decision.action == "blocked" and decision.block.kind == "output_reserve"
    tokens = COUNTER.count_request(request).total
    assert f"the request has {tokens} input tokens" in decision.block.message
    assert decision.block.facts["tokens_before"] == tokens and decision.tokens_before == tokens
    assert "model group 'g' (counted as gpt-4o, exact)" in decision.block.message


def test_cannot_fit_is_a_block_with_the_provider_phrase():
    decision = decide({"messages": [{"role": "user", "content": "word " * 5000}]})
    assert decision.block.kind == "cannot_fit" and decision.block.code == "context_length_exceeded"
    assert "This model's maximum context length is 4000 tokens" in decision.block.message
    assert DecisionRecord.build(decision).as_dict()["budget"]["budget"] == 3200


@pytest.mark.parametrize("request_body, field", [
    ({"messages": "hello"}, "messages"),
    ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
    ({"messages": [{"content": "no role"}]}, "messages[0].role"),
])
def test_malformed_request_is_a_block_naming_the_field(request_body, field):
    decision = decide(request_body)
    assert decision.action == "blocked" and decision.block.kind == "malformed" and decision.block.param == field
    assert decision.block.code == "invalid_request"


def test_shadow_mode_reports_what_it_would_do_and_forwards_the_original():
    request = chat(300, turns=8)
    decision = decide(request, mode="shadow")
    assert decision.action == "would_trim" and decision.request is request and decision.report.changed
    blocked = decide({"messages": [{"role": "user", "content": "word " * 5000}]}, mode="shadow")
    assert blocked.action == "would_block"


def test_mode_off_skips_without_counting():
    assert decide({"messages": "not even valid"}, mode="off").action == "skipped"


def test_unknown_window_default_or_block():
    resolved = load_settings({"default_max_input_tokens": 50_000}).layers.resolve(model_group="g")
    unknown = ModelLimits(None, "unknown", "gpt-4o")
    decision = decide_chat(chat(300, turns=8), model_group="g", limits=unknown, resolved=resolved, counter=COUNTER)
    assert decision.action == "pass" and decision.limits.window == 50_000 and decision.warnings
    resolved = load_settings({"unknown_window": "block"}).layers.resolve(model_group="g")
    decision = decide_chat(chat(1), model_group="g", limits=unknown, resolved=resolved, counter=COUNTER)
    assert decision.block.kind == "unknown_window" and "model_info.max_input_tokens" in decision.block.message
