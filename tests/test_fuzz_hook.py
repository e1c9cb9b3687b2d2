"""Fuzzing the pre-call hook: nothing a client sends may crash it, hang it, or reach its fail-open path.

Every input must end in one of: forwarded (the same or a trimmed body), or a clear HTTP 400 naming what
is wrong. Never another exception (the proxy would answer 500), never the plugin's own failure path
(``action: error``, which would forward an unchecked request), never more than a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.budget import ModelLimits
from budget_hook.policy.settings import load_settings
from budget_hook.proxy import BudgetHookHTTPError, BudgetHookPlugin

CALL_TYPES = ("acompletion", "anthropic_messages", "aresponses", "atext_completion", "aembedding", "agenerate_content",
              "pass_through_endpoint")


def plugin(window: int = 4000, model: str = "gpt-4o", **policy) -> BudgetHookPlugin:
    instance = BudgetHookPlugin(load_settings({"log_to_stderr": False, "fail_mode": "closed", **policy}))
    instance.model_limits = lambda group: ModelLimits(window, "fuzz", model)  # type: ignore[method-assign]
    return instance


PLUGINS = {"gpt": plugin(), "claude": plugin(model="anthropic/claude-sonnet-4-5"), "unknown": plugin(model="no-such-model"),
           "old images": plugin(1000, drop_old_images=True)}


class _Timeout(Exception):
    pass


def run(data, call_type: str = "acompletion", which: str = "gpt", seconds: int = 30):
    """The hook's outcome: ("forwarded", body) or ("rejected", error). Anything else fails the test."""
    def expire(*_):
        raise _Timeout(f"the hook took more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        if isinstance(data, dict):
            data.setdefault("litellm_call_id", f"fuzz-{id(data)}")
        out = asyncio.run(PLUGINS[which].async_pre_call_hook(UserAPIKeyAuth(), None, data, call_type))
    except BudgetHookHTTPError as error:
        assert error.status_code == 400, f"{error.status_code}: {error.message}"
        assert error.message and len(error.message) < 4000
        if error.error_code == "invalid_request":  # malformed input: the message names the field
            assert error.param and error.param in error.message, error.message
        return "rejected", error
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if isinstance(data, dict):
        for key in ("metadata", "litellm_metadata"):
            record = data.get(key, {}).get("budget_hook") if isinstance(data.get(key), dict) else None
            if isinstance(record, dict) and record.get("action") == "error":
                pytest.fail(f"client input reached the plugin's failure path: {record.get('error')}")
    return "forwarded", out


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                      st.text(max_size=50))
json_values = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=20)
roles = st.one_of(st.sampled_from(["user", "assistant", "system", "tool", "developer", "function"]), json_values)
part = st.one_of(
    json_values,
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "input_text", "tool_result", "tool_use",
                                                    "image", "thinking", "input_image", "file", "weird"])},
                          optional={"text": json_values, "image_url": json_values, "content": json_values,
                                    "id": json_values, "tool_use_id": json_values, "source": json_values}),
)
message = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={"role": roles, "content": st.one_of(json_values, st.lists(part, max_size=4)),
                                        "tool_calls": st.one_of(json_values, st.lists(st.fixed_dictionaries(
                                            {}, optional={"id": json_values, "type": json_values,
                                                          "function": json_values}), max_size=3)),
                                        "tool_call_id": json_values, "name": json_values}),
)
gemini_part = st.one_of(json_values, st.fixed_dictionaries({}, optional={
    "text": json_values, "functionCall": json_values, "functionResponse": json_values, "inlineData": json_values,
    "thoughtSignature": json_values}))
gemini_content = st.one_of(json_values, st.fixed_dictionaries({}, optional={
    "role": st.one_of(st.sampled_from(["user", "model"]), json_values),
    "parts": st.one_of(gemini_part, st.lists(gemini_part, max_size=4))}))
bodies = st.fixed_dictionaries(
    {"model": st.one_of(st.just("g"), json_values)},
    optional={"messages": st.one_of(json_values, st.lists(message, max_size=6)),
              "contents": st.one_of(json_values, st.lists(gemini_content, max_size=6)),
              "input": st.one_of(json_values, st.lists(st.one_of(message, part), max_size=6)),
              "prompt": json_values, "system": json_values, "instructions": json_values, "tools": json_values,
              "max_tokens": json_values, "max_completion_tokens": json_values, "max_output_tokens": json_values,
              "metadata": json_values, "litellm_metadata": json_values, "tool_choice": json_values},
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(bodies, st.sampled_from(CALL_TYPES), st.sampled_from(sorted(PLUGINS)))
def test_arbitrary_bodies_are_forwarded_or_rejected_cleanly(body, call_type, which):
    run(body, call_type, which)


def nested(depth: int):
    value: object = "deep"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def schema_nested(depth: int):
    """A JSON schema of arrays of arrays..., two levels of nesting per step."""
    value: object = {"type": "string"}
    for _ in range(depth):
        value = {"type": ["array"], "items": value}
    return value


def chat(*messages, **extra) -> dict:
    return {"model": "g", "messages": list(messages), **extra}


USER = {"role": "user", "content": "hello"}

CORPUS = {
    "messages not a list": (None, {"model": "g", "messages": "hello"}, "rejected"),
    "message without role": (None, chat({"content": "hi"}), "rejected"),
    "unknown role": (None, chat({"role": "wizard", "content": "hi"}), "rejected"),
    "content a number": (None, chat({"role": "user", "content": 42}), "rejected"),
    "content a dict": (None, chat({"role": "user", "content": {"text": "hi"}}), "rejected"),
    "content nested lists": (None, chat({"role": "user", "content": [[["hi"]]]}), None),
    "content null": (None, chat({"role": "user", "content": None}), "forwarded"),
    "part of unknown type": (None, chat({"role": "user", "content": [{"type": "hologram", "data": "x"}]}), "forwarded"),
    "tool call without id": (None, chat(USER, {"role": "assistant", "tool_calls": [{"type": "function",
                              "function": {"name": "f", "arguments": "{}"}}]}), "forwarded"),
    "non-JSON arguments": (None, chat(USER, {"role": "assistant", "tool_calls": [{"id": "a", "type": "function",
                            "function": {"name": "f", "arguments": "{not json"}}]},
                            {"role": "tool", "tool_call_id": "a", "content": "r"}), "forwarded"),
    "duplicated tool call ids": (None, chat(USER, {"role": "assistant", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "a", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"}), "forwarded"),
    "tool result without a call": (None, chat(USER, {"role": "tool", "tool_call_id": "nope", "content": "r"}), "forwarded"),
    "lone surrogates": (None, chat({"role": "user", "content": "bad \ud800 text \udfff"}), "forwarded"),
    "special tokens": (None, chat({"role": "user", "content": "<|endoftext|><|im_start|>system<|im_end|>"}), "forwarded"),
    "deeply nested content": (None, chat({"role": "user", "content": [{"type": "weird", "data": nested(400)}]}),
                              "rejected"),
    "tool schema nested 300 deep": (None, chat(USER, tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"x": schema_nested(300)}}}}]), "rejected"),
    "tool call arguments as a 300-deep object": (None, chat(USER, {"role": "assistant", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": nested(300)}}]},
        {"role": "tool", "tool_call_id": "a", "content": "r"}), "rejected"),
    "schema nested 60 deep is fine": (None, chat(USER, tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"x": schema_nested(30)}}}}]), "forwarded"),
    "max_tokens negative": (None, chat(USER, max_tokens=-5), "rejected"),
    "max_tokens huge": (None, chat(USER, max_tokens=10**15), "rejected"),
    "max_tokens a string": (None, chat(USER, max_tokens="lots"), "rejected"),
    "max_tokens a numeric string": (None, chat(USER, max_tokens="3000"), "forwarded"),
    "model not a string": (None, {"model": 5, "messages": [USER]}, "forwarded"),
    "metadata not a dict": (None, chat(USER, metadata="x"), "forwarded"),
    "client cap not an object": (None, chat(USER, metadata={"budget_hook": 5}), "rejected"),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_nasty_corpus(name):
    _, body, expected = CORPUS[name]
    outcome, _ = run(json.loads(json.dumps(body)) if "surrogate" not in name else body)
    if expected:
        assert outcome == expected, name


LONG = "a long passage of text about the parser " * 400
#: found by fuzzing the core (random and single-point mutations of real bodies): each reached the plugin's
#: failure path (a client value checked against a set while unhashable, a non-object entry read as one, a
#: one-object ``parts`` counted but not written back), or escaped the hook as a 500 (pass-through detection)
FOUND = {
    "gemini entry not an object": ("agenerate_content", {"model": "g", "contents": [5]}, "contents[0]"),
    "gemini entry a string after a content": ("agenerate_content", {"model": "g", "contents": [
        {"role": "user", "parts": [{"text": "hi"}]}, "hello"]}, "contents[1]"),
    "gemini parts one object, trimmed": ("agenerate_content", {"model": "g", "contents": [
        {"role": "user", "parts": {"text": LONG}}, {"role": "model", "parts": {"text": LONG}},
        {"role": "user", "parts": [{"text": "and now?"}]}]}, None),
    "anthropic block type an object": ("anthropic_messages", {"model": "g", "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": {}}]}]}, None),
    "anthropic block type a list": ("anthropic_messages", {"model": "g", "max_tokens": 100, "messages": [
        {"role": "user", "content": [{"type": ["text"], "text": "hi"}]}]}, None),
    "responses image detail an object": ("aresponses", {"model": "g", "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "https://x/a.png", "detail": {"a": 1}}]}]}, "input[0].content[0].detail"),
    "chat image detail a list": ("acompletion", chat({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": ["high"]}}]}),
        "messages[0].content[0].image_url.detail"),
    "pass-through part type an object": ("pass_through_endpoint", chat({"role": "user", "content": [
        {"type": {"a": 1}, "text": "hi"}]}), None),
    "old part type an object, old images dropped": ("acompletion", chat(
        {"role": "user", "content": "start"}, {"role": "assistant", "content": [{"type": {"a": 1}, "text": LONG}]},
        {"role": "user", "content": "and now?"}), None),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_what_fuzzing_found_is_forwarded_or_a_400_naming_the_field(name):
    call_type, body, field = FOUND[name]
    outcome, answer = run(json.loads(json.dumps(body)), call_type, "old images" if "old images" in name else "gpt")
    if field is None:
        assert outcome == "forwarded"
    else:
        assert outcome == "rejected" and answer.param == field, (outcome, answer)


def test_a_50_mb_string_is_answered_without_hanging():
    outcome, error = run(chat({"role": "user", "content": "lorem ipsum dolor sit amet " * 1_900_000}), seconds=60)
    assert outcome == "rejected" and "context_length_exceeded" in error.message


def test_100k_tiny_messages_are_answered_without_hanging():
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(100_000)]
    outcome, _ = run(chat(*messages), seconds=60)
    assert outcome in ("forwarded", "rejected")


@pytest.mark.parametrize("call_type, body", [
    ("anthropic_messages", {"model": "g", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": 5, "content": {"odd": True}}]}]}),
    ("anthropic_messages", {"model": "g", "max_tokens": "x", "system": 5, "messages": []}),
    ("aresponses", {"model": "g", "input": [{"type": "reasoning", "summary": 5}]}),
    ("aresponses", {"model": "g", "input": [{"type": "function_call_output", "call_id": None, "output": None}]}),
    ("aembedding", {"model": "g", "input": [True, False]}),
    ("aembedding", {"model": "g", "input": [[1, -2, "x"]]}),
    ("atext_completion", {"model": "g", "prompt": None}),
])
def test_nasty_inputs_on_other_endpoints(call_type, body):
    run(body, call_type)


@pytest.mark.parametrize("call_type, body, field", [
    ("acompletion", chat(USER, tools=[{"type": "function", "function": {"name": "f", "parameters": schema_nested(300)}}]),
     "tools[0].function.parameters"),
    ("anthropic_messages", {"model": "g", "max_tokens": 100, "messages": [USER],
                            "tools": [{"name": "f", "input_schema": schema_nested(300)}]}, "tools[0].input_schema"),
    ("aresponses", {"model": "g", "input": "hi", "tools": [{"type": "function", "name": "f",
                                                          "parameters": schema_nested(300)}]}, "tools[0].parameters"),
    ("aresponses", {"model": "g", "input": [{"role": "user", "content": [{"type": "input_text", "text": "x",
                                                                          "extra": nested(300)}]}]}, "input[0]"),
    ("aembedding", {"model": "g", "input": [nested(300)]}, "input[0]"),
])
def test_deep_client_data_is_a_400_naming_the_field_on_every_endpoint(call_type, body, field):
    """A 300-deep tool schema used to raise RecursionError inside the plugin, which then failed open."""
    for which in ("gpt", "claude"):
        outcome, error = run(json.loads(json.dumps(body)), call_type, which)
        assert outcome == "rejected" and error.error_code == "invalid_request" and error.param.startswith(field)
        assert "nested more than 100 levels deep" in error.message


@pytest.mark.parametrize("call_type, body, field", [
    ("acompletion", chat(USER, extra_body={"messages": [{"role": "user", "content": "word " * 6000}]}),
     "extra_body.messages"),
    ("acompletion", chat(USER, extra_body={"tools": []}), "extra_body.tools"),
    ("aresponses", {"model": "g", "input": "hi", "extra_body": {"input": "word " * 6000}}, "extra_body.input"),
    ("aembedding", {"model": "g", "input": "hi", "extra_body": {"input": ["word " * 6000]}}, "extra_body.input"),
    ("anthropic_messages", {"model": "g", "max_tokens": 10, "messages": [USER],
                            "extra_body": {"system": "word " * 6000}}, "extra_body.system"),
])
def test_content_in_extra_body_is_a_400_naming_it(call_type, body, field):
    """LiteLLM merges extra_body after the hook: content there used to replace what was counted."""
    outcome, error = run(body, call_type)
    assert outcome == "rejected" and error.param == field and "at the top level" in error.message


@pytest.mark.parametrize("call_type, body, field", [
    ("acompletion", chat(USER, litellm_system_prompt="word " * 6000), "litellm_system_prompt"),
    ("acompletion", chat(USER, ensure_alternating_roles=True), "ensure_alternating_roles"),
    ("acompletion", chat(USER, user_continue_message={"role": "user", "content": "go"}), "user_continue_message"),
    ("acompletion", chat(USER, assistant_continue_message={"role": "assistant", "content": "go"}),
     "assistant_continue_message"),
    ("acompletion", chat(USER, initial_prompt_value="word " * 6000), "initial_prompt_value"),
    ("acompletion", chat(USER, final_prompt_value="x"), "final_prompt_value"),
    ("acompletion", chat(USER, roles={"user": {"pre_message": "word " * 6000}}), "roles"),
    ("acompletion", chat(USER, bos_token="<s>"), "bos_token"),
    ("acompletion", chat(USER, eos_token="</s>"), "eos_token"),
    ("acompletion", chat(USER, fallbacks=["other", {"model": "g2", "litellm_system_prompt": "big"}]),
     "fallbacks[1].litellm_system_prompt"),
    ("aresponses", {"model": "g", "input": "hi", "litellm_system_prompt": "word " * 6000}, "litellm_system_prompt"),
    ("anthropic_messages", {"model": "g", "max_tokens": 10, "messages": [USER], "ensure_alternating_roles": True},
     "ensure_alternating_roles"),
    ("atext_completion", {"model": "g", "prompt": "hi", "litellm_system_prompt": "word " * 6000},
     "litellm_system_prompt"),
    # vLLM renders a client's special token in the chat template in place of the tokenizer's: 62 tokens counted,
    # 4,862 rendered in a 4,096 window (an attack review)
    ("acompletion", chat(USER, chat_template_kwargs={"enable_thinking": False, "bos_token": "lorem ipsum " * 600}),
     "chat_template_kwargs.bos_token"),
    ("acompletion", chat(USER, extra_body={"chat_template_kwargs": {"eos_token": "</s>"}}),
     "extra_body.chat_template_kwargs.eos_token"),
    ("acompletion", chat(USER, fallbacks=[{"model": "g2", "chat_template_kwargs": {"pad_token": "x"}}]),
     "fallbacks[0].chat_template_kwargs.pad_token"),
    # and what the server renders from the request's own fields (a review: Qwen3's template with the client's
    # chat_template_kwargs.tools, 51 tokens counted, 6,691 rendered in a 4k window)
    ("acompletion", chat(USER, chat_template_kwargs={"tools": [{"type": "function", "function": {"name": "f" * 900}}]}),
     "chat_template_kwargs.tools"),
    ("acompletion", chat(USER, extra_body={"chat_template_kwargs": {"messages": [USER]}}),
     "extra_body.chat_template_kwargs.messages"),
])
def test_a_litellm_prompt_parameter_from_the_client_is_a_400_naming_it(call_type, body, field):
    """LiteLLM writes prompt text for these after both hooks: 6,000 tokens reached a 4k window (an attack
    review). Unset or false, they are nothing."""
    outcome, error = run(body, call_type)
    assert outcome == "rejected" and error.param == field and "cannot be budgeted" in error.message
    quiet = {k: v for k, v in body.items() if k not in (field.split(".")[0], "fallbacks", "litellm_call_id", "metadata",
                                                          "litellm_metadata")}
    assert run({**quiet, "ensure_alternating_roles": False, "litellm_system_prompt": None}, call_type)[0] == "forwarded"
    # the template's other variables are the client's to set (vLLM's enable_thinking, a date)
    assert run({**quiet, "chat_template_kwargs": {"enable_thinking": False, "bos_token": None}}, call_type)[0] == \
        "forwarded"


@pytest.mark.parametrize("field, value", [("instructions", "word " * 6000), ("previous_response_id", "resp_1"),
                                          ("conversation", "conv_1"), ("prompt", {"id": "pmpt_1"}),
                                          ("text", {"format": {"type": "json_schema", "name": "x", "schema": {}}})])
def test_a_responses_field_on_v1_messages_is_a_400_naming_it(field, value):
    """LiteLLM forwards these into the Responses call it makes for /v1/messages to an OpenAI deployment, where the
    Anthropic body's count never read them; that inner call was refused, and LiteLLM 1.103 sent it again without the
    hooks when retries were set (a review: 9,015 tokens reached an 8,000-token window twice)."""
    body = {"model": "g", "max_tokens": 10, "messages": [USER], field: value}
    outcome, error = run(body, "anthropic_messages")
    assert outcome == "rejected" and error.param == field and "/v1/responses" in error.message
    assert run({**body, field: None}, "anthropic_messages")[0] == "forwarded"
    outcome, error = run({"model": "g", "input": "hi", field: value}, "aresponses")  # counted there, or refused
    assert outcome != "rejected" or "a Responses API field" not in error.message      # for reasons of its own


CALL_AGAIN = {"groq/llama-8k": "groq/llama-8k"}


@pytest.mark.parametrize("call_type, body, field", [
    ("acompletion", chat(USER, context_window_fallback_dict=CALL_AGAIN), "context_window_fallback_dict"),
    ("aresponses", {"model": "g", "input": "hi", "context_window_fallback_dict": CALL_AGAIN},
     "context_window_fallback_dict"),
    ("anthropic_messages", {"model": "g", "max_tokens": 10, "messages": [USER], "context_window_fallback_dict": CALL_AGAIN},
     "context_window_fallback_dict"),
    ("anthropic_messages", {"model": "g", "max_tokens": 10, "messages": [USER],
                            "fallbacks": [{"model": "g2", "context_window_fallback_dict": CALL_AGAIN}]},
     "fallbacks[0].context_window_fallback_dict"),
])
def test_a_dict_that_makes_litellm_call_again_without_the_hooks_is_a_400_naming_it(call_type, body, field):
    """LiteLLM 1.103 answers the plugin's refusal of its /v1/messages and /v1/responses bridges' inner completion by
    calling the unwrapped function again with ``context_window_fallback_dict``'s model: a refused 12,014-token body
    reached an 8,000-token window (an attack review). Empty, it is nothing."""
    outcome, error = run(body, call_type)
    assert outcome == "rejected" and error.param == field and "without the gateway's budget check" in error.message
    quiet = {k: v for k, v in body.items() if k not in ("fallbacks", "litellm_call_id", "metadata", "litellm_metadata")}
    assert run({**quiet, "context_window_fallback_dict": {}}, call_type)[0] == "forwarded"


@pytest.mark.parametrize("call_type, body", [
    ("acompletion", chat(USER, user_config={"model_list": [{"model_name": "g", "litellm_params": {
        "model": "openai/gpt-4o-4k", "api_base": "http://127.0.0.1:9/v1"}}]})),
    ("aresponses", {"model": "g", "input": "hi", "user_config": {}}),
    ("anthropic_messages", {"model": "g", "max_tokens": 10, "messages": [USER], "user_config": None}),
])
def test_a_router_of_the_clients_own_is_a_400_naming_it(call_type, body):
    """LiteLLM routes a body with ``user_config`` through a router built from it (with client-side credentials
    allowed): the pre-call decision budgeted the gateway's group while 9,012 tokens reached the client's 4k
    deployment, and its answers taught windows for deployment ids the client chose (an attack review)."""
    outcome, error = run(body, call_type)
    assert outcome == "rejected" and error.param == "user_config" and "router of the client's own" in error.message


def test_a_stored_prompt_an_attempt_gains_is_refused_unless_the_request_or_the_deployment_set_it():
    """A fallback target in the router's format carries its own ``prompt_id`` into the fallback call, where LiteLLM
    fills the template in (3,912 tokens counted, 27,929 sent to a 16k window)."""
    from budget_hook.pipeline.bounds import added_stored_prompt

    assert added_stored_prompt({"prompt_id": "big"}, None, dict) == "prompt_id"
    assert added_stored_prompt({"prompt_id": "big"}, "big", dict) is None  # the request's own
    assert added_stored_prompt({"prompt_id": "big"}, None, lambda: {"prompt_id": "big"}) is None  # the operator's
    assert added_stored_prompt({"prompt_id": None}, None, dict) is None


@pytest.mark.parametrize("call_type, body", [
    ("atext_completion", {"model": "g", "prompt": "hi"}),
    ("anthropic_messages", {"model": "g", "max_tokens": 10, "messages": [USER]}),
    ("agenerate_content", {"model": "g", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
])
def test_a_stored_prompt_the_proxy_does_not_fill_in_before_the_hook_is_a_400_naming_it(call_type, body):
    """``litellm.text_completion`` hands ``prompt_id`` to ``completion()``, which fills the template in after both
    hooks, and so do the bridges of /v1/messages (a 21k-token template reached a 16k window, priced as a 10k
    reference); the proxy fills it in before the hook only for chat and Responses calls."""
    outcome, error = run({**body, "prompt_id": "bigsys"}, call_type)
    assert outcome == "rejected" and error.param == "prompt_id" and "/chat/completions" in error.message
    assert run({**body, "prompt_id": None}, call_type)[0] == "forwarded"


def test_an_output_allowance_in_extra_body_or_as_a_float_is_reserved():
    from budget_hook.budget import requested_output_tokens

    assert requested_output_tokens({"max_tokens": 3000.0}) == 3000
    assert requested_output_tokens({"max_tokens": 2999.5}) == 3000
    assert requested_output_tokens({"max_tokens": 100, "extra_body": {"max_tokens": 3500}}) == 3500
    assert requested_output_tokens({"max_tokens": "3000"}) == 3000
    for bad in (float("inf"), float("nan"), True, -1, 10**30, "lots"):  # a 400 naming the field, never a default
        outcome, error = run(chat(USER, max_tokens=bad))
        assert outcome == "rejected" and error.param == "max_tokens" and error.error_code == "invalid_request"
    outcome, error = run(chat(USER, max_tokens=3990.0))
    assert outcome == "rejected" and error.param == "max_tokens"
    outcome, error = run(chat(USER, extra_body={"max_tokens": 3990}))
    assert outcome == "rejected" and error.param == "max_tokens"


def test_the_names_refused_in_chat_template_kwargs_are_what_the_counter_sets_itself_and_cannot_take():
    """The special tokens, the messages and the tools are refused there; the rest of what the counter sets itself
    (documents, the reply-opener flags) is counted as vLLM merges it, the kwargs over the request's fields."""
    from budget_hook.counting import template_input, templated
    from budget_hook.counting.template_input import template_extras
    from budget_hook.pipeline.bounds import TEMPLATE_OVERRIDES, TEMPLATE_SPECIALS

    assert TEMPLATE_SPECIALS == templated._SPECIAL_KEYS
    counted = set(template_input.TEMPLATE_FIELDS[1:])
    assert set(TEMPLATE_OVERRIDES) == {*templated._SPECIAL_KEYS, *template_input._RESERVED} - counted
    docs = [{"title": "t", "text": "the kwargs' own"}]
    extras, opener = template_extras({"documents": [{"text": "the field's"}], "add_generation_prompt": True,
                                      "chat_template_kwargs": {"documents": docs, "add_generation_prompt": False}})
    assert extras["documents"] is docs and opener is False


@pytest.mark.parametrize("kwargs", [{"add_generation_prompt": True}, {"continue_final_message": False},
                                    {"documents": [{"title": "doc", "text": "Granite's RAG pattern"}]},
                                    {"enable_thinking": False}, {"thinking": True}])
def test_what_real_clients_send_in_chat_template_kwargs_is_forwarded(kwargs):
    """Qwen's and Granite's documented requests (a review found them refused by a first version of the check)."""
    assert run(chat(USER, chat_template_kwargs=kwargs))[0] == "forwarded"
    assert run(chat(USER, extra_body={"chat_template_kwargs": kwargs}))[0] == "forwarded"
