"""/embeddings inputs and /completions prompts: counted one by one; over the limit is reported, never cut
silently."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget_hook.counting import TokenCounter
from budget_hook.errors import MalformedRequestError
from budget_hook.shapes.inputs import OverLimit, check_inputs

EMBEDDING = TokenCounter.for_model("text-embedding-3-small")
ESTIMATED = TokenCounter.for_model("cohere/embed-english-v3.0")


def test_embedding_models_count_exactly_with_cl100k():
    assert EMBEDDING.profile.encoding_name == "cl100k_base" and EMBEDDING.profile.exact


@pytest.mark.parametrize("value, tokens", [
    ("hello world", (2,)),
    (["hello world", "hi"], (2, 1)),
    ([15339, 1917], (2,)),             # one token array
    ([[15339, 1917], [1, 2, 3]], (2, 3)),
])
def test_every_accepted_shape_is_counted(value, tokens):
    assert check_inputs(value, field="input", counter=EMBEDDING, limit=100).tokens == tokens


@pytest.mark.parametrize("value, field", [(42, "input"), ([], "input"), (["ok", 3.5], "input[1]"), ([["a"]], "input[0]"),
                                          (None, "input"), ([True, False], "input[0]")])
def test_bad_shapes_name_the_field(value, field):
    with pytest.raises(MalformedRequestError) as caught:
        check_inputs(value, field="input", counter=EMBEDDING, limit=100)
    assert caught.value.field == field


def test_over_limit_inputs_are_reported_with_index_and_excess():
    result = check_inputs(["fine", "word " * 150, "ok"], field="input", counter=EMBEDDING, limit=100)
    [over] = result.over
    assert over.index == 1 and over.over_by == over.tokens - 100 and result.value[1] == "word " * 150
    assert "input[1] has" in result.describe_over()
    single = check_inputs("word " * 150, field="prompt", counter=EMBEDDING, limit=100)
    assert single.over[0].index is None and single.describe_over().startswith("prompt has")


inputs = st.lists(st.one_of(st.text(min_size=1, max_size=400), st.lists(st.integers(0, 100_000), min_size=1, max_size=300)),
                  min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(inputs, st.integers(1, 200), st.sampled_from([EMBEDDING, ESTIMATED]))
def test_truncation_only_cuts_what_is_over_and_always_lands_under(values, limit, counter):
    plain = check_inputs(values, field="input", counter=counter, limit=limit)
    assert {o.index for o in plain.over} == {i for i, t in enumerate(plain.tokens) if t > limit}
    assert plain.value is values and not plain.truncated
    cut = check_inputs(values, field="input", counter=counter, limit=limit, truncate=True)
    assert all(t <= limit for t in cut.tokens)
    assert set(cut.truncated) == {o.index for o in plain.over}
    for index, value in enumerate(values):
        if index not in cut.truncated:
            assert cut.value[index] is value if plain.over else cut.value is values


def test_prompts_a_chat_deployment_gets_as_one_call_must_fit_together():
    """LiteLLM's ``text_completion`` sends a list of prompts to a chat model as the user messages of one call: each
    under the limit, together over it, is over (each message's framing counted); a batch endpoint takes them one
    by one."""
    counter = TokenCounter.for_model("gpt-4o")
    prompts = ["word " * 400] * 3
    each = counter.count_text(prompts[0])
    batch = check_inputs(prompts, field="prompt", counter=counter, limit=1000)
    assert not batch.over and batch.total == 3 * each
    joined = check_inputs(prompts, field="prompt", counter=counter, limit=1000, joined=True)
    together = 3 * each + 3 * counter.profile.tokens_per_message + counter.profile.reply_priming
    assert joined.total == together and joined.over == (OverLimit(None, together, together - 1000),)
    assert joined.describe_over().startswith("the 3 prompts reach this deployment as the user messages of one chat")
    assert not check_inputs(prompts, field="prompt", counter=counter, limit=together, joined=True).over
    alone = check_inputs(["word " * 2000, "hi"], field="prompt", counter=counter, limit=1000, joined=True)
    assert alone.over[0].index == 0 and alone.describe_over().startswith("prompt[0] has")  # the prompt named
    assert not check_inputs("word " * 400, field="prompt", counter=counter, limit=1000, joined=True).over


@pytest.mark.parametrize(("backend", "params", "joins"), [
    ("anthropic/claude-sonnet-4-5", {}, True),
    ("openai/gpt-4o", {}, True),  # a chat model LiteLLM knows
    ("gpt-4o", {}, True),
    ("ollama/llama3", {}, True),
    ("azure/gpt-4o", {}, True),
    ("openai/o3-pro", {}, True),  # a Responses-only model: LiteLLM bridges the prompts as input items of one call
    ("openai/my-finetune", {}, False),  # an OpenAI-compatible server's model: the text-completion endpoint
    ("openai/deepseek-chat", {}, False),  # in the map, but not under the openai provider
    ("gpt-3.5-turbo-instruct", {}, False),
    ("hosted_vllm/llama", {}, False),
    ("together_ai/x", {}, False),
    ("text-completion-openai/x", {}, False),
    ("my-model", {"custom_llm_provider": "hosted_vllm"}, False),
])
def test_which_deployments_join_a_list_of_prompts(backend, params, joins):
    from budget_hook.budget.router_windows import joins_prompts

    assert joins_prompts(backend, params) is joins


def test_an_openai_model_is_one_call_exactly_when_litellm_takes_it_for_a_chat_model():
    """``litellm.text_completion`` keeps an ``openai/`` model on chat (one call) when it is in
    ``open_ai_chat_completion_models`` (every model-map name under the openai provider, any mode), else sends the
    prompts to the text-completion endpoint as a batch: the same answer for every name of the model map."""
    import litellm

    from budget_hook.budget.router_windows import joins_prompts
    from budget_hook.budget.windows import _model_map

    names = {name for name in _model_map() if "/" not in name} | set(litellm.open_ai_chat_completion_models)
    wrong = [n for n in names if joins_prompts(f"openai/{n}", {}) != (n in litellm.open_ai_chat_completion_models)]
    assert wrong == []


def test_the_batching_providers_are_litellms():
    import litellm

    from budget_hook.budget.router_windows import BATCHED_PROMPT_PROVIDERS

    litellms = {*litellm.openai_text_completion_compatible_providers, "text-completion-openai", "azure_text"}
    assert litellms == BATCHED_PROMPT_PROVIDERS


COMPLETION = TokenCounter.for_model("gpt-3.5-turbo-instruct")


@pytest.mark.parametrize("body", [{"prompt": ["a", "b"], "suffix": "tail " * 50},
                                  {"prompt": ["a", "b"], "extra_body": {"suffix": "tail " * 50}}])
def test_a_completions_suffix_is_counted_with_every_prompt(body):
    """The text after the insertion point is read with each prompt (an eleventh review: 21,000 tokens counted as 0)."""
    from budget_hook.shapes.inputs import shared_tokens

    shared = shared_tokens(body, ("suffix",), COMPLETION)
    assert shared >= 50
    alone = check_inputs(body["prompt"], field="prompt", counter=COMPLETION, limit=1000).tokens
    assert check_inputs(body["prompt"], field="prompt", counter=COMPLETION, limit=1000, shared=shared).tokens == \
        tuple(t + shared for t in alone)


@pytest.mark.parametrize("body, field", [({"suffix": 3}, "suffix"), ({"extra_body": {"suffix": ["x"]}},
                                                                     "extra_body.suffix")])
def test_a_suffix_that_is_not_text_names_its_field(body, field):
    from budget_hook.shapes.inputs import shared_tokens

    with pytest.raises(MalformedRequestError) as caught:
        shared_tokens({"prompt": "a", **body}, ("suffix",), COMPLETION)
    assert caught.value.field == field
