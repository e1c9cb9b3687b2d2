"""End to end: a user's instruction sent after tool results on ``/v1/messages`` reaches the provider (the fourteenth
attack review), as the same conversation does on ``/v1/chat/completions``.

Through the session's real proxy (tests/e2e/conftest.py), to the ``claude`` group (the fake's Anthropic API, a
4,000-token window), on each LiteLLM version the suite runs with. Before the fix the review's proxy forwarded 3,987
tokens with 6 messages dropped on ``/v1/messages``, the instruction among them, while chat kept it.
"""

from __future__ import annotations

import json

import httpx
import pytest

from budget_hook.counting import TokenCounter
from budget_hook.shapes.anthropic import count_anthropic

from ..test_interjection_trim import SAY, anthropic_body, anthropic_problems, chat_body
from .harness import Process, upstream_payloads

pytestmark = pytest.mark.e2e

CLAUDE = TokenCounter.for_model("anthropic/claude-sonnet-4-5-4k")


def post(proxy: Process, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}{path}", json=body, timeout=120,
                      headers={"authorization": "Bearer sk-default"})


def sent(upstream: Process, marker: str) -> list[dict]:
    return [p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]


def test_an_instruction_after_tool_results_reaches_claude_on_messages_as_on_chat(proxy, upstream):
    body = {**anthropic_body(), "model": "claude"}
    body["messages"][0] = {"role": "user", "content": [{"type": "text", "text": "Fix the failing build. [e2e-say-msg]"}]}
    assert count_anthropic(body, CLAUDE) > 4000

    response = post(proxy, "/v1/messages", body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    assert int(response.headers["x-budget-dropped-messages"]) > 0
    [forwarded] = sent(upstream, "e2e-say-msg]")
    assert anthropic_problems(body, forwarded) == []
    assert count_anthropic(forwarded, CLAUDE) <= int(response.headers["x-budget-input-budget"])
    said = [m for m in forwarded["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            and {"type": "text", "text": SAY} in m["content"]]
    assert len(said) == 1  # kept verbatim, as a block of one user message
    assert forwarded["messages"][-1] == body["messages"][-1]  # the call being answered, as sent

    chat = {**chat_body(), "model": "claude"}
    chat["messages"][1] = {"role": "user", "content": "Fix the failing build. [e2e-say-chat]"}
    response = post(proxy, "/v1/chat/completions", chat)
    assert response.status_code == 200, response.text
    [on_chat] = sent(upstream, "e2e-say-chat]")
    assert SAY in json.dumps(on_chat)  # what chat keeps, /v1/messages keeps too
