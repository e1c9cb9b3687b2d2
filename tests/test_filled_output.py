"""The output allowance LiteLLM sends when a request sets none, reserved as it will be sent (an attack review,
2026-12-06: 64,000 sent where a deployment's 2,000 was reserved; a thinking budget's 34,096 where 8,192 was)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget_hook.budget import ModelLimits, thinking_output_tokens
from budget_hook.budget.router_windows import limits_of
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy import load_settings
from budget_hook.shapes import SHAPES

CLAUDE = ModelLimits(200_000, "test", "anthropic/claude-sonnet-4-5", filled_output_tokens=8_192)
MESSAGES = [{"role": "user", "content": "hi"}]
SONNET = {"model_name": "g", "litellm_params": {"model": "anthropic/claude-sonnet-4-5"}}
GPT = {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o"}}


def decided(shape: str, body: dict, limits: ModelLimits = CLAUDE):
    return decide(BudgetRequest(SHAPES.get(shape), body, "c", limits), load_settings({}))


@pytest.mark.parametrize(("extra", "reserve"), [
    ({}, 8_192),
    ({"thinking": {"type": "enabled", "budget_tokens": 30_000}}, 34_096),
    ({"thinking": {"budget_tokens": 1_000}}, 8_192),  # under the model's own maximum: that one
    ({"reasoning_effort": "xhigh"}, 12_288),
    ({"reasoning_effort": {"effort": "max"}}, 20_480),
    ({"extra_body": {"thinking": {"type": "enabled", "budget_tokens": 20_000}}}, 24_096),
    ({"thinking": {"type": "disabled", "budget_tokens": 30_000}}, 8_192),
    ({"reasoning_effort": "none"}, 8_192),
])
def test_a_thinking_budget_is_reserved_with_the_4096_litellm_adds(extra, reserve):
    body = {"model": "c", "messages": MESSAGES, **extra}
    decision = decided("chat", body)
    assert decision.report.budget.output_reserve == reserve
    assert decision.action == "pass" and decision.request is body  # reserved, not written into the request


def test_the_responses_api_s_reasoning_effort_counts():
    decision = decided("responses", {"model": "c", "input": "hi", "reasoning": {"effort": "xhigh"}})
    assert decision.report.budget.output_reserve == 12_288


@pytest.mark.parametrize(("fields", "reserve"), [
    ({"generationConfig": {"maxOutputTokens": 100}}, 100),
    ({"generationConfig": {"max_output_tokens": 100}}, 8_192),  # the adapter drops it: Claude gets its own
    ({"config": {"temperature": 0}, "generationConfig": {"maxOutputTokens": 100}}, 8_192),  # config is read instead
    ({"config": {"maxOutputTokens": 100}}, 100),
])
def test_a_gemini_body_s_allowance_counts_for_claude_only_where_litellm_s_adapter_reads_it(fields, reserve):
    """LiteLLM's generateContent adapter reads only ``maxOutputTokens``, of ``config`` when the body has one, else of
    ``generationConfig`` (a review of the ninth attack review's fix: 100 reserved, 64,000 sent)."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], **fields}
    assert decided("gemini", body).report.budget.output_reserve == reserve
    gemini = ModelLimits(1_000_000, "test", "gemini/gemini-2.5-pro")  # Gemini's own reads every spelling
    assert decided("gemini", body, gemini).report.budget.output_reserve != 8_192


def test_the_model_map_entry_litellm_reads_is_reserved_when_larger_than_the_deployment_s():
    """LiteLLM fills Claude's in from its live model map, where every deployment of a model shares one entry (the
    last registered writes it): the larger of that and the deployment's own is reserved."""
    own = {"max_output_tokens": 2_000}
    assert limits_of("g", [SONNET], [own]).filled_output_tokens == 2_000
    assert limits_of("g", [SONNET], [{**own, "shared_output": 64_000}]).filled_output_tokens == 64_000
    assert limits_of("g", [SONNET], [{"max_output_tokens": 64_000, "shared_output": 2_000}]).filled_output_tokens \
        == 64_000
    assert limits_of("g", [GPT], [{"shared_output": 64_000}]).filled_output_tokens is None  # LiteLLM fills none in


def test_what_a_deployment_or_the_router_sends_of_its_own_is_reserved():
    """A deployment's ``litellm_params`` (the router's ``default_litellm_params`` under them) are merged into the
    call: their allowance is sent when the request sets none, whatever the provider, and Claude's thinking budget
    with the 4,096 LiteLLM adds."""
    big = {"model_name": "g", "litellm_params": {"model": "anthropic/claude-sonnet-4-5", "max_tokens": 100_000}}
    assert limits_of("g", [SONNET, big]).filled_output_tokens == 100_000
    gpt_own = {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o", "max_completion_tokens": "3000"}}
    assert limits_of("g", [GPT, gpt_own]).filled_output_tokens == 3000
    assert limits_of("g", [GPT], [{"default_params": {"max_tokens": 1500}}]).filled_output_tokens == 1500
    thinking = {"model_name": "g", "litellm_params": {"model": "anthropic/claude-sonnet-4-5",
                                                      "thinking": {"type": "enabled", "budget_tokens": 90_000}}}
    assert limits_of("g", [thinking]).filled_output_tokens == 94_096
    odd = {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o", "max_tokens": True}}
    assert limits_of("g", [odd]).filled_output_tokens is None  # not an allowance LiteLLM could send
    extra = {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o", "max_tokens": -1,
                                                   "extra_body": {"max_completion_tokens": 7_000}}}
    assert limits_of("g", [extra]).filled_output_tokens == 7_000  # merged into the body sent; the odd one skipped


def test_an_allowance_the_request_sets_is_what_is_reserved():
    decision = decided("chat", {"model": "c", "messages": MESSAGES, "max_tokens": 300,
                                "thinking": {"type": "enabled", "budget_tokens": 30_000}})
    assert decision.report.budget.output_reserve == 300 and decision.report.budget.output_reserve_source == "request"


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=14), inner, max_size=3),
                    max_leaves=12),
       st.sampled_from(["thinking", "reasoning_effort", "reasoning", "extra_body", "max_tokens"]))
def test_any_thinking_or_allowance_field_is_read_without_error(value, name):
    found = thinking_output_tokens({name: value})
    assert found is None or (isinstance(found, int) and found > 4096)
    limits = limits_of("g", [{"model_name": "g", "litellm_params": {"model": "anthropic/claude-sonnet-4-5",
                                                                    name: value}}])
    assert limits.filled_output_tokens is None or limits.filled_output_tokens > 0


def test_an_attempt_asks_for_more_output_only_with_a_client_s_larger_allowance():
    """``attempts.asks_more_output``: a fallback entry's own ``max_tokens`` (merged by LiteLLM) is decided again; the
    deployment's own parameters, odd ones included (Ollama's ``max_tokens: -1``), never are; embeddings never ask."""
    from budget_hook.proxy.attempts import asks_more_output

    chat, embeddings = SHAPES.get("chat"), SHAPES.get("embeddings")
    gpt = ModelLimits(16_000, "test", "openai/gpt-4o")
    base = {"model": "g", "messages": MESSAGES, "max_tokens": 100}
    assert asks_more_output(chat, {**base, "max_tokens": 10_000}, gpt, 100, dict)
    assert asks_more_output(chat, {**base, "max_tokens": True}, gpt, 100, dict)  # the client learns which field
    assert not asks_more_output(chat, base, gpt, 100, dict)
    operator = {"max_tokens": -1, "max_completion_tokens": 4_096}
    assert not asks_more_output(chat, {**base, **operator}, gpt, 100, lambda: operator)
    assert not asks_more_output(embeddings, {"input": "x", "max_tokens": 10_000}, gpt, 0, dict)
    assert asks_more_output(chat, {**base, "thinking": {"type": "enabled", "budget_tokens": 30_000}, "max_tokens": None},
                            CLAUDE, 8_192, dict)  # Claude's allowance is then the budget and 4,096


@pytest.mark.parametrize(("model", "fills"), [
    ("bedrock/converse/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3", True),
    ("bedrock/converse/qwen.qwen3-32b-v1:0", True),
    ("bedrock/zai.glm-4.7", True),
    ("databricks/databricks-meta-llama-3-3-70b-instruct", True),
    ("anthropic/my-compatible-server-model", True),
    ("bedrock/converse/openai.gpt-oss-120b-1:0", False),  # LiteLLM's Converse skips gpt-oss and Nova 2
    ("bedrock/converse/us.amazon.nova-2-lite-v1:0", False),
    # a review of the fix: the provider as LiteLLM finds it, and Nova 2 only as LiteLLM spells it
    ({"model": "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1", "custom_llm_provider": "bedrock"},
     True),
    ("qwen.qwen3-32b-v1:0", True),  # no prefix: the model map's provider (bedrock_converse)
    ({"model": "databricks-meta-llama-3-3-70b-instruct", "custom_llm_provider": "databricks"}, True),
    ("bedrock/global.amazon.nova-2-lite-v1:0", True),  # LiteLLM strips us., eu., apac. only: filled
    ("openai/gpt-4o", False),
    ("hosted_vllm/Qwen/Qwen3-32B", False),
])
def test_a_thinking_request_s_filled_allowance_is_reserved_whatever_the_model(model, fills):
    """An attack review of 2026-12-07: LiteLLM sends a thinking budget plus 4,096 for any model of Anthropic's API,
    Bedrock Converse and Databricks when the request sets no allowance, while the reserve was taken for names read as
    Claude only: 34,096 sent through a Bedrock inference profile's ARN where 4,096 was reserved."""
    params = model if isinstance(model, dict) else {"model": model}
    limits = limits_of("g", [{"model_name": "g", "litellm_params": params, "model_info": {"max_input_tokens": 100_000}}])
    assert limits.fills_thinking_output is fills and limits.filled_output_tokens is None
    thinking = decided("chat", {"model": "c", "messages": MESSAGES,
                                "thinking": {"type": "enabled", "budget_tokens": 30_000}}, limits)
    effort = decided("chat", {"model": "c", "messages": MESSAGES, "reasoning_effort": "high"}, limits)
    plain = decided("chat", {"model": "c", "messages": MESSAGES}, limits)
    if fills:
        assert (thinking.report.budget.output_reserve, effort.report.budget.output_reserve) == (34_096, 8_192)
    else:
        assert thinking.report.budget.output_reserve == effort.report.budget.output_reserve
    assert plain.report.budget.output_reserve == decided("chat", {"model": "c", "messages": MESSAGES},
                                                         ModelLimits(100_000, "test", "openai/gpt-4o")).report.budget.output_reserve


def test_an_allowance_set_in_extra_body_alone_does_not_stop_litellm_s_own():
    """A review of the fix: LiteLLM fills the thinking allowance when the call's own parameters set none, and an
    ``extra_body.max_tokens`` is not one of them (Bedrock Converse keeps it in ``additionalModelRequestFields`` and still
    sends 34,096): the larger is reserved. A deployment that fills nothing keeps the request's."""
    arn = limits_of("g", [{"model_name": "g", "model_info": {"max_input_tokens": 100_000}, "litellm_params": {
        "model": "bedrock/converse/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1"}}])
    thinking = {"type": "enabled", "budget_tokens": 30_000}
    body = {"model": "c", "messages": MESSAGES, "thinking": thinking, "extra_body": {"max_tokens": 10}}
    assert decided("chat", body, arn).report.budget.output_reserve == 34_096
    assert decided("chat", {**body, "max_tokens": 10}, arn).report.budget.output_reserve == 10  # LiteLLM sends 10
    gpt = ModelLimits(100_000, "test", "openai/gpt-4o")
    assert decided("chat", body, gpt).report.budget.output_reserve == 10
    assert decided("chat", {"model": "c", "messages": MESSAGES, "extra_body": {"max_tokens": 9_000}}, CLAUDE
                   ).report.budget.output_reserve == 9_000  # above Claude's own 8,192: the larger
