"""LiteLLM's MCP gateway runs a tool itself and calls the model again with its output: that follow-up call is decided
like any router attempt, its tool output counted and trimmed to the window (an attack review, 2026-12-07, found every
server-side loop of LiteLLM 1.103 and 1.108 checked so).

On 1.103 the follow-up on ``/v1/messages`` holds the tool result message's content as a tuple, which the plugin read
as a malformed request: every such loop was refused with a 400 (``route_guard.as_lists``).

On ``/v1/responses`` the client gets the follow-up's response, while LiteLLM's success callback carries the loop's first
call (1.103 and 1.108): the chain the provider holds under the id the client got was never stored, so a continuation
naming it was counted by its new input alone (an attack review, 2026-12-07: 17,517 tokens reached a 16,000-token
window). It is stored from the response the client gets (the post-call hook; a stream's ``response.completed``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .harness import model_entry, payloads_with, post, serve_config, start_fake_provider, upstream_payloads

pytestmark = pytest.mark.e2e
WINDOW = 16_000
SERVER = Path(__file__).parent / "proxy_support" / "report_mcp.py"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mcp_loop")
    upstream = start_fake_provider(folder, {"claude-sonnet-4-5-calls-tools": WINDOW, "gpt-4o-calls-tools": WINDOW},
                                   flags=["--chains"])  # /v1/responses holds each response's chain, as OpenAI does
    base = f"http://127.0.0.1:{upstream.port}"
    config = {
        "model_list": [model_entry("claude", "anthropic/claude-sonnet-4-5-calls-tools", base, WINDOW),
                       model_entry("gpt", "openai/gpt-4o-calls-tools", f"{base}/v1", WINDOW)],
        "mcp_servers": {"report": {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)],
                                   "env": {"REPORT_WORDS": "12000"}},  # ~36,000 tokens of tool output
                        "brief": {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)],
                                  "env": {"REPORT_WORDS": "2500"}}},  # ~7,500: the follow-up fits
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    # LiteLLM 1.108 starts stdio MCP servers only when told
    yield from serve_config(folder, config, upstream, env={"LITELLM_ENABLE_MCP_STDIO": "true"})


def test_the_follow_up_after_an_mcp_tool_ran_is_trimmed_to_the_window(proxy):
    proxy, upstream = proxy
    response = post(proxy, "/v1/messages", {
        "model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": "Fetch the report."}],
        "tools": [{"type": "mcp", "server_label": "litellm", "server_url": "litellm_proxy/mcp/report",
                   "require_approval": "never"}]}, timeout=120)
    assert response.status_code == 200, response.text[:400]
    calls = [p for p in upstream_payloads(upstream) if p["path"].endswith("/messages")]
    assert len(calls) == 2, "the first call, then the follow-up with the tool's output"
    follow_up = calls[1]["body"]
    results = [b for m in follow_up["messages"] if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"]
    assert results, "the tool ran and its output went back to the model"
    assert "removed from the middle" in str(results[0]["content"]), "cut to fit (the provider refuses over its window)"


BRIEF = {"type": "mcp", "server_label": "litellm", "server_url": "litellm_proxy/mcp/brief", "require_approval": "never"}


def completed_id(response) -> str:
    """The id of the response a client got: the body's, or a stream's last ``response.completed`` event's (LiteLLM
    streams the loop's first call's events too)."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.json()["id"]
    events = [json.loads(line[len("data: "):]) for line in response.text.splitlines()
              if line.startswith("data: ") and line != "data: [DONE]"]
    return [e["response"]["id"] for e in events if e.get("type") == "response.completed"][-1]


@pytest.mark.parametrize("stream", [False, True], ids=["once", "streamed"])
def test_a_tool_output_over_the_window_is_trimmed_on_v1_responses(proxy, stream):
    """LiteLLM 1.103 sends the follow-up of an unstreamed loop as a continuation of the first call
    (``previous_response_id`` and the tool's output alone): its new input is trimmed to what that chain leaves. (It
    was refused whole: a chain over the budget was never trimmed.)"""
    proxy, upstream = proxy
    report = {**BRIEF, "server_url": "litellm_proxy/mcp/report"}
    response = post(proxy, "/v1/responses", {"model": "gpt", "max_output_tokens": 100, "stream": stream,
                                             "input": f"Fetch the report ({stream}).", "tools": [report]}, timeout=120)
    assert response.status_code == 200, response.text[:400]
    follow_ups = [p["body"] for p in upstream_payloads(upstream) if p["path"].endswith("/responses")
                  and "mcpout" in json.dumps(p["body"])]
    assert follow_ups and "removed from the middle" in json.dumps(follow_ups[-1]), "cut to fit the window"


@pytest.mark.parametrize("stream, extra", [(False, {}), (True, {}), (True, {"messages": [{"role": "user", "content": "x"}]})],
                         ids=["once", "streamed", "streamed-messages-key"])
def test_a_continuation_of_the_answer_an_mcp_loop_gave_counts_its_chain(proxy, stream, extra):
    """(A ``messages`` key, which LiteLLM ignores on ``/v1/responses``, turned the watch of the stream off while the
    request's keys decided it: a review of the fix.)"""
    proxy, upstream = proxy
    first = post(proxy, "/v1/responses", {"model": "gpt", "max_output_tokens": 100, "stream": stream, **extra,
                                          "input": "Fetch the brief.", "tools": [BRIEF]}, timeout=120)
    assert first.status_code == 200, first.text[:400]
    calls = [p for p in upstream_payloads(upstream) if p["path"].endswith("/responses")
             and "Fetch the brief." in json.dumps(p["body"])]
    assert len(calls) >= 2, "the first call, then the follow-up with the tool's output"
    tag = f"e2e-mcp-chain-{'streamed' if stream else 'once'}-{len(extra)}"
    words = " ".join(f"more{index % 89} words" for index in range(4000))
    after = post(proxy, "/v1/responses", {"model": "gpt", "max_output_tokens": 100, "input": f"[{tag}] {words}",
                                          "previous_response_id": completed_id(first)})
    # the provider holds the follow-up's ~7,600 tokens under that id: with ~12,000 new ones, over the window
    assert after.status_code == 400, after.text[:400]
    assert "continues a stored response" in after.text
    assert not payloads_with(upstream, tag), "on the code before, it was forwarded by its new input alone"
