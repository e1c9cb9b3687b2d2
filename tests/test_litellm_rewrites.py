"""What LiteLLM writes into a chat call to Claude after the hooks, written in before the decision instead.

With ``litellm_settings.modify_params``, LiteLLM's ``sanitize_messages_for_tool_calling`` gives each tool call left
without a result a result sentence. A review of the first fix found trimming undid it: LiteLLM finds a call's results
anywhere before the next assistant message, the trimmer keeps a call with the results next to it, so a turn
``[user, results]`` dropped left its calls unanswered and LiteLLM wrote 150 results no count saw (9,047 counted,
19,397 sent). ``providers.anthropic.answer_unanswered_calls`` moves each call's results next to it and answers the
rest; the properties below hold for any conversation, trimmed or not.
"""

from __future__ import annotations

import asyncio

import litellm
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.litellm_core_utils.prompt_templates.factory import sanitize_messages_for_tool_calling
from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.providers.anthropic import answer_unanswered_calls
from budget_hook.proxy.hook import BudgetHookHTTPError

from .test_proxy_hook import claude_plugin


@pytest.fixture
def modify_params(monkeypatch):
    monkeypatch.setattr(litellm, "modify_params", True)


def added_results(sent: list) -> list:
    """The tool results LiteLLM's own rewrite would add to ``sent``."""
    return [m for m in sanitize_messages_for_tool_calling(sent)
            if m.get("role") == "tool" and not any(m is s for s in sent)]


#: a conversation: user texts (some blank), assistant turns calling tools, results anywhere after their calls
steps = st.lists(st.one_of(
    st.tuples(st.just("user"), st.sampled_from(["go on", "", " ", "word " * 40])),
    st.tuples(st.just("assistant"), st.integers(0, 3)),
    st.tuples(st.just("result"), st.integers(0, 12)),
), min_size=1, max_size=40)


def conversation(plan) -> list[dict]:
    messages: list[dict] = [{"role": "user", "content": "task"}]
    made = 0
    for kind, value in plan:
        if kind == "user":
            messages.append({"role": "user", "content": value})
        elif kind == "assistant":
            calls = [{"id": ident(made + i), "type": "function",
                      "function": {"name": f"tool_{(made + i) % 3}", "arguments": '{"path": "src"}'}}
                     for i in range(value)]
            made += value
            messages.append({"role": "assistant", "content": "working", **({"tool_calls": calls} if calls else {})})
        elif made:
            messages.append({"role": "tool", "tool_call_id": ident(value % made), "content": "output " * 60})
    return messages


def ident(number: int) -> str | int:
    """A call id: a string, or now and then a number (LiteLLM matches ids as they are)."""
    return number + 1 if number % 5 == 4 else f"call_{number}"


@settings(max_examples=150, deadline=None)
@given(steps)
def test_litellm_finds_nothing_left_to_add_to_what_is_written(plan):
    litellm.modify_params = True
    try:
        messages = conversation(plan)
        answered = answer_unanswered_calls(messages)
        sent = messages if answered is None else answered
        assert added_results(sent) == []
        assert messages == conversation(plan)  # the caller's messages are never edited
        assert answer_unanswered_calls(sent) is None  # a second pass finds nothing either
    finally:
        litellm.modify_params = False


@settings(max_examples=60, deadline=None)
@given(steps, st.sampled_from([2_500, 4_000, 8_000]))
def test_a_trimmed_request_leaves_litellm_nothing_to_add(plan, window):
    """Whatever trimming drops, what is forwarded is what LiteLLM sends: no result is added after the count."""
    litellm.modify_params = True
    try:
        body = {"model": "claude", "max_tokens": 50, "messages": conversation(plan)}
        try:
            out = asyncio.run(claude_plugin(window).async_pre_call_hook(UserAPIKeyAuth(), None, body, "acompletion"))
        except BudgetHookHTTPError:
            return  # refused: nothing is sent
        sent = (out if isinstance(out, dict) else body)["messages"]
        assert added_results(sent) == []
    finally:
        litellm.modify_params = False


def test_results_after_a_user_message_stay_with_their_calls_when_trimmed(modify_params):
    """The review's case: 150 calls, their results after a user message, then a new question; 10k window."""
    calls = [{"id": f"toolu_{i}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
             for i in range(150)]
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "reading", "tool_calls": calls},
                {"role": "user", "content": "here they are"},
                *[{"role": "tool", "tool_call_id": f"toolu_{i}", "content": "line of output " * 15} for i in range(150)],
                {"role": "user", "content": "continue"}]
    body = {"model": "claude", "max_tokens": 50, "messages": messages}
    # 13,047 tokens as LiteLLM sends it (9,047 were counted once, and sent). In a 10k window the task's tool step
    # leaves whole, its calls with every result (it was refused while the pinned task's last step could not leave)
    out = asyncio.run(claude_plugin(10_000).async_pre_call_hook(UserAPIKeyAuth(), None, body, "acompletion"))
    assert out["metadata"]["budget_hook"]["tokens_before"] == 13_047
    assert [m["content"][:9] for m in out["messages"]] == ["task", "[budget_h", "here they", "continue"]
    assert added_results(out["messages"]) == []
    # in a 16k window it fits as LiteLLM sends it: every result already next to its call
    out = asyncio.run(claude_plugin(16_000).async_pre_call_hook(UserAPIKeyAuth(), None, body, "acompletion"))
    assert [m["role"] for m in out["messages"][:3]] == ["user", "assistant", "tool"]
    assert added_results(out["messages"]) == [] and body["messages"] is messages


def test_written_only_where_litellm_writes_it_and_never_over_a_malformed_message(modify_params):
    """A review of the fix: a call id that is not a string is matched as LiteLLM matches it (any value, as is);
    the rewrite applies to the providers LiteLLM sends through ``anthropic_messages_pt`` (not OpenRouter or
    Bedrock Converse, which never get that rewrite); a malformed message is left for the decision's validation to
    name at its place in the client's request."""
    from budget_hook.budget import ModelLimits
    from budget_hook.proxy.hook import litellm_rewrite
    from budget_hook.shapes import SHAPES

    chat = SHAPES.for_call_type("acompletion")
    body = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "x", "tool_calls": [
        {"id": 5, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}
    claude = ModelLimits(10_000, "test", "anthropic/claude-sonnet-4-5")
    rewritten = litellm_rewrite(chat, body, claude)
    assert rewritten["messages"][2]["tool_call_id"] == 5 and added_results(rewritten["messages"]) == []
    for model in ("openrouter/anthropic/claude-sonnet-4-5", "bedrock/converse/anthropic.claude-sonnet-4-5", "gpt-4o"):
        assert litellm_rewrite(chat, body, ModelLimits(10_000, "test", model)) is body
    bad = {"messages": [*body["messages"], {"role": "user", "content": 5}]}
    assert litellm_rewrite(chat, bad, claude) is bad
    with pytest.raises(BudgetHookHTTPError, match=r"messages\[2\]\.content"):
        asyncio.run(claude_plugin(10_000).async_pre_call_hook(UserAPIKeyAuth(), None, {**bad, "model": "claude"},
                                                              "acompletion"))
