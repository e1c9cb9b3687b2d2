"""Text LiteLLM renders into the prompt besides the messages is counted (``counting.rendered``).

Compared with LiteLLM's own functions from the installed package: for ``ollama/``, ``function_call_prompt`` (the
tools appended to every system message) and ``ollama_pt`` (the prompt it sends, tool calls written again with
``json.dumps(indent=2)``); an attack review (2026-12-06) found 734 tokens counted against 9,635 sent, and 5,322
against 25,084. And the fields Cohere and self-hosted templates read into the prompt.
"""

from __future__ import annotations

import copy
import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.litellm_core_utils.prompt_templates.factory import function_call_prompt, ollama_pt

from budget_hook.counting import TokenCounter

OLLAMA = TokenCounter.for_model("ollama/llama3.1")
#: what LiteLLM 1.108's ``function_call_prompt`` also asks for (1.103 takes messages and functions only)
VERSIONED = {"model": "llama3.1", "llm_provider": "ollama", "drop_params": False} \
    if "model" in inspect.signature(function_call_prompt).parameters else {}
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120)
TOOLS = st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({
    "name": st.from_regex(r"[a-z_]{1,12}", fullmatch=True), "description": TEXT,
    "parameters": st.just({"type": "object", "properties": {"q": {"type": "string"}}})})}), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(systems=st.integers(0, 6), tools=TOOLS)
def test_ollama_tools_are_counted_as_litellm_writes_them_into_every_system_message(systems, tools):
    messages = [*({"role": "system", "content": f"rule {i}"} for i in range(systems)), {"role": "user", "content": "hi"}]
    prompt = ollama_pt("llama3.1", function_call_prompt(copy.deepcopy(messages), copy.deepcopy(tools), **VERSIONED))["prompt"]
    assert OLLAMA.count_request({"messages": messages, "tools": tools}).total >= OLLAMA.count_text(prompt)


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), TEXT, max_size=4),
                      min_size=1, max_size=4))
def test_ollama_tool_calls_are_counted_as_ollama_pt_writes_them_again(calls):
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for index, arguments in enumerate(calls):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{index}", "type": "function",
            "function": {"name": "write", "arguments": json.dumps(arguments, ensure_ascii=False)}}]},
            {"role": "tool", "tool_call_id": f"call_{index}", "content": "ok"}]
    prompt = ollama_pt("llama3.1", copy.deepcopy(messages))["prompt"]
    assert OLLAMA.count_request({"messages": messages}).total >= OLLAMA.count_text(prompt)


def test_ollama_tools_text_is_tokenized_once_for_the_requests_that_resend_it(monkeypatch):
    """The tools' text is the same on every turn of a session: its count comes from the count cache after the first."""
    tool = {"type": "function", "function": {"name": "f", "description": "a long description " * 200, "parameters": {}}}
    request = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], "tools": [tool]}
    first = OLLAMA.count_request(request)
    seen: list[int] = []
    original = OLLAMA.count_text
    monkeypatch.setattr(OLLAMA, "count_text", lambda text: seen.append(len(text)) or original(text))
    again = OLLAMA.count_request({**request, "messages": [*request["messages"], {"role": "user", "content": "more"}]})
    assert again.overhead_tokens == first.overhead_tokens
    assert max(seen, default=0) < 1000, seen  # the ~4,000-character tools text was not tokenized again


def test_ollama_chat_sends_tools_as_json_and_is_not_charged_twice():
    tool = {"type": "function", "function": {"name": "f", "description": "word " * 300, "parameters": {}}}
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    chat = TokenCounter.for_model("ollama_chat/llama3.1").count_request({"messages": messages, "tools": [tool]})
    rendered = OLLAMA.count_request({"messages": messages, "tools": [tool]})
    assert rendered.total > chat.total + 300


def test_fields_a_provider_reads_into_the_prompt_are_counted_wherever_they_are_sent():
    text = "word " * 2000
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    for counter in (TokenCounter.for_model("cohere_chat/command-r-plus"), TokenCounter.for_model("gpt-4o"),
                    TokenCounter.for_model("hosted_vllm/ibm-granite/granite-3.3-8b-instruct")):
        base = counter.count_request(plain).total
        for extra in ({"documents": [{"data": {"text": text}}]}, {"preamble": text}, {"chat_history": [
                {"role": "USER", "message": text}]}, {"chat_template_kwargs": {"date_string": text}},
                {"extra_body": {"documents": [{"text": text}]}}):
            assert counter.count_request({**plain, **extra}).total >= base + counter.count_text(text), extra


def test_cohere_v1s_own_message_and_tool_results_are_counted():
    """LiteLLM's Cohere v1 route sends a client's top-level ``tool_results`` and ``message`` as they are (a review of
    the fix: ~20,000 tokens counted 9 and 29)."""
    counter = TokenCounter.for_model("cohere_chat/v1/command-r-plus")
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    text = "word " * 2000
    for extra in ({"message": text}, {"tool_results": [{"call": {"name": "f"}, "outputs": [{"text": text}]}]}):
        assert counter.count_request({**plain, **extra}).total >= counter.count_request(plain).total + 2000


def test_every_shape_counts_what_litellm_bridges_to_a_chat_deployment():
    """/v1/messages and /v1/responses reach a hosted_vllm deployment through chat with their top-level ``documents``
    and ``chat_template_kwargs`` (a review of the fix: 40 counted against 10,046 on chat)."""
    from budget_hook.shapes import SHAPES

    counter = TokenCounter.for_model("hosted_vllm/ibm-granite/granite-3.3-8b-instruct")
    documents = {"documents": [{"text": "word " * 5000}], "extra_body": {"chat_template_kwargs": {"x": "word " * 500}}}
    for name, body in (("anthropic", {"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
                       ("responses", {"input": "hi"}), ("chat", {"messages": [{"role": "user", "content": "hi"}]})):
        shape = SHAPES.get(name)
        assert shape.count({**body, **documents}, counter) >= shape.count(body, counter) + 5500, name


@pytest.mark.parametrize("field", ["preamble", "chat_history", "documents", "chat_template_kwargs", "system",
                                   "extra_body"])
def test_a_rendered_field_nested_past_the_limit_is_a_400_naming_it(field):
    """Counting walks these fields (``canonical_json``): 983 levels raised RecursionError, the plugin's failure path
    (a review of the fix)."""
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, decide
    from budget_hook.policy import load_settings
    from budget_hook.shapes import SHAPES

    deep: object = "x"
    for _ in range(983):
        deep = {"a": deep}
    body = {"messages": [{"role": "user", "content": "hi"}], field: deep}
    decision = decide(BudgetRequest(SHAPES.get("chat"), body, "g", ModelLimits(8000, "t", "gpt-4o")), load_settings({}))
    assert decision.action == "blocked" and decision.block.kind == "malformed"
    assert decision.block.param.startswith(field)


def test_rendered_fields_weigh_for_the_thread_pool():
    """2 MB of ``preamble`` was counted on the event loop (1.1 s) while 2 MB of messages went to the pool."""
    from budget_hook.proxy.offload import approximate_size

    for body in ({"preamble": "word " * 400_000}, {"extra_body": {"preamble": "word " * 400_000}},
                 {"chat_history": [{"m": "x"}] * 200_000}):
        assert approximate_size(body, 1_000_000) >= 1_000_000, next(iter(body))


# --- what LiteLLM writes for particular providers (an attack review, 2026-12-06) -----------------------------------

JSON_VALUE = st.recursive(st.none() | st.booleans() | st.integers(-999, 999) | TEXT,
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                          max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(JSON_VALUE, min_size=0, max_size=8), gaps=st.lists(st.sampled_from(["", " ", "\n", "\t "]),
                                                                           min_size=8, max_size=8),
       tail=st.sampled_from(["", "{", "}", "x", " ]"]))
def test_arguments_are_split_as_litellm_splits_them_for_bedrock(values, gaps, tail):
    from litellm.litellm_core_utils.prompt_templates.common_utils import split_concatenated_json_objects

    from budget_hook.counting.rendered import split_values
    arguments = "".join(json.dumps(v, ensure_ascii=False) + gap for v, gap in zip(values, gaps, strict=False)) + tail
    try:
        json.loads(arguments)
        expected = 1
    except ValueError:
        expected = max(1, len(split_concatenated_json_objects(arguments)))
    assert split_values(arguments) == expected


def test_concatenated_arguments_are_counted_as_the_tool_calls_bedrock_is_sent():
    from litellm.litellm_core_utils.prompt_templates.factory import _bedrock_converse_messages_pt
    model = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    name = "t_" + "qzxj" * 15
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": "calling", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": name, "arguments": "{}" * 600}}]},
                {"role": "tool", "tool_call_id": "c", "content": "ok"}, {"role": "user", "content": "next"}]
    sent = _bedrock_converse_messages_pt(messages=copy.deepcopy(messages), model=model, llm_provider="bedrock")
    uses = [block["toolUse"] for m in sent for block in m["content"] if "toolUse" in block]
    assert len(uses) == 600
    counter = TokenCounter.for_model("bedrock/" + model)
    assert counter.count_request({"messages": messages}).total >= counter.count_text(json.dumps(sent))  # 1,239 before


ARGS = json.dumps({"path": "notes.txt", "text": " ".join(["the quick brown fox jumps over the lazy dog"] * 130)})


def _cohere_conversation(content, role, answers, call_id="call_1"):
    return [{"role": "user", "content": "write"},
            {"role": "assistant", "content": content, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "write_file", "arguments": ARGS}}]},
            *[{"role": role, "name": "write_file", "tool_call_id": call_id, "content": "ok"} for _ in range(answers)],
            {"role": "user", "content": "done?"}]


@pytest.mark.parametrize("content, role, answers, call_id", [
    (None, "tool", 15, "call_1"), (None, "tool", 15, 7), (None, "tool", 1, "call_1")])
def test_cohere_v1_on_bedrock_results_carry_their_call_and_are_counted_so(content, role, answers, call_id):
    from litellm.litellm_core_utils.prompt_templates.factory import cohere_message_pt
    messages = _cohere_conversation(content, role, answers, call_id)
    sent = cohere_message_pt(messages=copy.deepcopy(messages))
    counter = TokenCounter.for_model("bedrock/cohere.command-r-v1:0")
    assert counter.profile.results_carry_call
    assert counter.count_request({"messages": messages}).total >= counter.count_text(json.dumps(sent))


@pytest.mark.parametrize("model, content, role, answers, call_id", [
    ("cohere_chat/v1/command-r", None, "function", 15, "call_1"),
    ("cohere_chat/v1/command-r", "Writing it.", "tool", 1, "call_1"),
    ("cohere_chat/v1/c4ai-aya-expanse-32b", None, "tool", 15, "call_1"),
    ("cohere/v1/command-r", None, "tool", 15, 7),
], ids=["function-role", "assistant-text", "aya-on-v1", "int-id"])
def test_cohere_v1_results_are_counted_as_litellm_sends_them(model, content, role, answers, call_id):
    """A review of the fix: ``function`` results carry their call too, an assistant with text keeps its calls besides
    every result, any model on the ``v1/`` route is sent so, and ids are compared with ``==``."""
    from litellm.litellm_core_utils.prompt_templates.factory import cohere_messages_pt_v2
    messages = _cohere_conversation(content, role, answers, call_id)
    sent = cohere_messages_pt_v2(copy.deepcopy(messages), model=model.split("/", 1)[1], llm_provider="cohere_chat")
    counter = TokenCounter.for_model(model)
    assert counter.count_request({"messages": messages}).total >= counter.count_text(json.dumps(sent))


@pytest.mark.parametrize("model", ["gpt-4o", "cohere_chat/command-r", "cohere/command-r-plus",
                                   "bedrock/converse/cohere.command-r-v1:0"])
def test_routes_that_do_not_repeat_calls_are_not_charged_for_them(model):
    assert not TokenCounter.for_model(model).profile.results_carry_call


def test_azure_ai_command_r_tool_results_are_counted_as_litellm_escapes_them():
    from litellm.litellm_core_utils.prompt_templates.factory import stringify_json_tool_call_content
    output = "".join(chr(c) for c in [1, 2, 3, 4, 5, 6, 7, 11, 14, 15, 16] * 600)
    messages = [{"role": "user", "content": "read"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": output}]
    sent = stringify_json_tool_call_content(copy.deepcopy(messages))[-1]["content"]
    counter = TokenCounter.for_model("azure_ai/command-r-plus")
    assert counter.count_request({"messages": messages}).per_message[-1] >= counter.count_text(sent)
