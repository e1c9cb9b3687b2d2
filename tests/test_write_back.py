"""What a trim writes back (a tenth attack review, 2026-12-07): a turn in progress keeps opening with its thinking,
content whose view text is a rendering of it (documents, search results) or that carries citations is never rewritten,
and a chat request's prompt-cache prefix is protected as a /v1/messages one is. End to end:
``tests/e2e/test_write_back_e2e.py``."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from budget_hook.budget import ModelLimits
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy import load_settings
from budget_hook.shapes import SHAPES
from budget_hook.shapes.anthropic_blocks import current_turn_start, rewritable_block, thinking_opening
from budget_hook.shapes.chat import SHAPE as CHAT

CLAUDE = "anthropic/claude-sonnet-4-5"
OUTPUT = "lorem ipsum dolor sit amet consectetur "


def decided(shape: str, body: dict, window: int):
    limits = ModelLimits(window, "test", CLAUDE, filled_output_tokens=64_000)
    return decide(BudgetRequest(SHAPES.get(shape), body, "g", limits), load_settings({}))


def loop(steps: int, words: int, interleaved: bool) -> list[dict]:
    def thinking(step: int) -> list[dict]:
        return [{"type": "thinking", "thinking": f"step {step}: run it", "signature": "c2ln" * 30}]
    messages: list[dict] = [{"role": "user", "content": "fix the build"}]
    for step in range(steps):
        opening = thinking(step) if step == 0 or interleaved else []
        messages += [
            {"role": "assistant", "content": [*opening, {"type": "tool_use", "id": f"t{step}", "name": "sh",
                                                         "input": {"cmd": f"make {step}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{step}",
                                          "content": f"{step} " + OUTPUT * words}]}]
    return messages


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(20, 120), st.booleans(), st.integers(2_500, 9_000))
def test_a_trimmed_turn_in_progress_opens_with_its_thinking(steps, words, interleaved, window):
    """Whatever is dropped, the turn's first assistant message is the one Claude opened with its thinking (the notice
    follows the turn's question, never splitting the turn), or the request is refused: never sent as Anthropic
    refuses it."""
    body = {"max_tokens": 1_200, "thinking": {"type": "enabled", "budget_tokens": 1_024},
            "messages": loop(steps, words, interleaved)}
    decision = decided("anthropic", body, window)
    if decision.action != "trimmed":
        return
    messages = decision.request["messages"]
    first = next(m for m in messages[current_turn_start(messages):] if m["role"] == "assistant")
    assert first["content"][0]["type"] == "thinking"  # as Anthropic requires
    if not interleaved:  # Claude thought at the first step only: that one stays
        assert first["content"][1]["id"] == "t0"


def test_only_a_turn_that_thought_once_with_thinking_on_keeps_its_opening():
    thinking = {"type": "enabled", "budget_tokens": 1_024}
    once, interleaved = loop(4, 5, False), loop(4, 5, True)
    assert thinking_opening(once, 0, thinking) == 1
    assert thinking_opening(interleaved, 0, thinking) is None  # every step opens with its own: any may leave
    assert thinking_opening(once, 0, None) is None and thinking_opening(once, 0, {"type": "disabled"}) is None


def test_the_notice_of_a_cut_inside_the_latest_turn_joins_its_question():
    body = {"max_tokens": 1_200, "thinking": {"type": "enabled", "budget_tokens": 1_024},
            "messages": loop(6, 60, False)}
    decision = decided("anthropic", body, 4_000)
    assert decision.action == "trimmed"
    first = decision.request["messages"][0]
    assert first["role"] == "user" and [b["type"] for b in first["content"]] == ["text", "text"]
    assert "removed" in first["content"][1]["text"]  # the gateway's notice, after the question


def test_blocks_whose_view_text_is_not_their_own_are_never_rewritten():
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
    found = {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}]}
    assert rewritable_block({"type": "text", "text": "x"}) and rewritable_block({"type": "tool_use", "id": "a"})
    assert rewritable_block({"type": "tool_result", "content": [{"type": "text", "text": "x"}, {"type": "image"}]})
    assert not rewritable_block(document) and not rewritable_block(found)
    assert not rewritable_block({"type": "text", "text": "x", "citations": [{"cited_text": "x"}]})
    assert not rewritable_block({"type": "tool_result", "content": [{"type": "text", "text": "x"}, found]})
    assert not rewritable_block({"type": "tool_result", "content": [document]})
    assert not rewritable_block({"type": "thinking", "thinking": "x", "signature": "s"})


def test_a_result_holding_a_search_result_stays_whole_or_leaves_with_its_call():
    found = {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": OUTPUT * 80}]}
    messages = [{"role": "user", "content": "research"}]
    for step in range(5):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"s{step}", "name": "search",
                                                        "input": {}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"s{step}",
                                                   "content": [found, {"type": "text", "text": OUTPUT * 60}]}]}]
    decision = decided("anthropic", {"max_tokens": 500, "messages": messages}, 5_000)
    assert decision.action == "trimmed"
    assert {a.action for a in decision.report.actions} <= {"dropped"}
    assert json.dumps(decision.request).count('"type": "search_result"') == sum(
        1 for m in decision.request["messages"] for b in m["content"] if isinstance(b, dict)
        and b.get("type") == "tool_result")  # each kept result holds its own, once


def test_an_annotated_responses_answer_is_never_shortened():
    annotated = {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": OUTPUT * 200, "annotations": [
            {"type": "url_citation", "url": "https://example.com", "start_index": 0, "end_index": 5, "title": "e"}]}]}
    items = [{"role": "user", "content": "task"}, annotated, {"role": "user", "content": "go on"}]
    for step in range(6):
        items += [{"type": "function_call", "call_id": f"f{step}", "name": "sh", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"f{step}", "output": OUTPUT * 120}]
    decision = decided("responses", {"max_output_tokens": 500, "input": items}, 3_500)
    assert decision.action == "trimmed"
    assert "shortened" not in {a.action for a in decision.report.actions}
    assert annotated in decision.request["input"] or all(a.index != 1 or a.action == "dropped"
                                                          for a in decision.report.actions)


def test_the_chat_view_protects_the_cache_prefix_and_the_turn_s_thinking_opening():
    breakpoint_part = {"type": "text", "text": "ctx", "cache_control": {"type": "ephemeral"}}
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": [breakpoint_part]},
                {"role": "assistant", "content": "a"}, {"role": "user", "content": "task"},
                {"role": "assistant", "content": None, "thinking_blocks": [{"type": "thinking", "thinking": "t"}],
                 "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"}]
    messages += [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "d", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "d", "content": "r"}]
    view = CHAT.view({"messages": messages, "reasoning_effort": "low"})
    assert view.protected == frozenset({0, 1}) and view.keep == frozenset({4})
    assert CHAT.view({"messages": messages}).keep == frozenset()  # thinking off: nothing to open with
    message_level = [{"role": "user", "content": "a", "cache_control": {"type": "ephemeral"}}, *messages[2:4]]
    assert CHAT.view({"messages": message_level}).protected == frozenset({0})
    assert CHAT.view({"messages": messages[2:4]}).protected == frozenset()
    assert CHAT.view({"messages": messages[:4]}).keep == frozenset()  # no turn in progress
    # the turn's assistant messages that carry thinking are never rewritten (as /v1/messages freezes them)
    assert view.no_edit == frozenset({4}) and CHAT.view({"messages": messages[:4]}).no_edit == frozenset()


def test_a_chat_turn_s_thinking_steps_are_never_shortened():
    """A fourteenth review: chat shortened the text of the turn's assistant messages that carry ``thinking_blocks``
    (to 1,121 characters of 4,000), which /v1/messages never rewrites; they stay as sent or leave with their step."""
    def step(i: int) -> list[dict]:
        return [{"role": "assistant", "content": f"Step {i}: " + OUTPUT * 100, "thinking_blocks": [
                    {"type": "thinking", "thinking": f"plan {i}", "signature": "c2ln" * 30}],
                 "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "content": OUTPUT * 200}]
    messages = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Fix the build."}]
    for i in range(5):
        messages += step(i)
    body = {"model": "claude", "thinking": {"type": "enabled", "budget_tokens": 1_024}, "messages": messages}
    for window in (6_000, 9_000, 12_000):
        decision = decide(BudgetRequest(CHAT, body, "claude", ModelLimits(window, "test", CLAUDE)), load_settings({}))
        sent = {m["content"] for m in decision.request["messages"] if m.get("thinking_blocks")}
        assert sent and sent <= {m["content"] for m in messages if m.get("thinking_blocks")}, window


def test_a_notice_inside_a_protected_prefix_says_the_prefix_was_rewritten():
    """The notice joins a thinking turn's question: bytes before a later breakpoint change, and the record says so."""
    messages = loop(6, 60, False)
    messages[2]["content"][0] = {**messages[2]["content"][0], "cache_control": {"type": "ephemeral"}}
    body = {"max_tokens": 1_200, "thinking": {"type": "enabled", "budget_tokens": 1_024}, "messages": messages}
    decision = decided("anthropic", body, 4_000)
    assert decision.action == "trimmed" and "removed" in decision.request["messages"][0]["content"][-1]["text"]
    assert "cache_prefix_rewritten" in decision.report.notes
