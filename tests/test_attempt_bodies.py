"""Bodies LiteLLM builds itself for a router attempt, decided as the JSON they stand for.

An attack review (2026-12-07) ran LiteLLM's MCP tool loop on ``/v1/messages``: on 1.103 the follow-up call after a
tool ran holds the tool results' message content as a tuple (``_build_tool_result_message``), which no JSON body
holds; the attempt's decision read it as a malformed request and every such loop was refused with a 400. (1.108
builds a list.)
"""

from __future__ import annotations

from budget_hook.budget import ModelLimits
from budget_hook.pipeline import decide
from budget_hook.pipeline.request import BudgetRequest
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.route_guard import as_lists
from budget_hook.shapes import SHAPES

ANTHROPIC = SHAPES.get("anthropic")
LIMITS = ModelLimits(16_000, "router", "anthropic/claude-sonnet-4-5")


def follow_up() -> dict:
    return {"model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
        {"role": "user", "content": ({"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py b.py"},)}]}


def test_a_tool_loop_s_tuple_content_is_decided_as_the_list_it_stands_for():
    body = follow_up()
    fixed = as_lists(body, ANTHROPIC.content_fields)
    assert fixed is not body and type(fixed["messages"][2]["content"]) is list
    assert type(body["messages"][2]["content"]) is tuple  # the call's own body is never changed
    assert fixed["messages"][0] is body["messages"][0]  # what needs nothing is shared
    decision = decide(BudgetRequest(ANTHROPIC, fixed, "claude", LIMITS), load_settings({}))
    assert decision.action == "pass"
    as_sent = decide(BudgetRequest(ANTHROPIC, body, "claude", LIMITS), load_settings({}))
    assert as_sent.action == "blocked"  # what every such loop got before


def test_a_body_of_lists_is_the_same_object():
    body = {**follow_up(), "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert as_lists(body, ANTHROPIC.content_fields) is body
    assert as_lists({"messages": ({"role": "user", "content": "hi"},)}, ("messages",))["messages"] == [
        {"role": "user", "content": "hi"}]
