"""Text LiteLLM writes into a request after every hook, counted as it is sent (a real proxy, both versions).

On a chat call to Claude, LiteLLM's ``anthropic_messages_pt`` writes a placeholder sentence over every empty text of
a user or assistant message (always), and, with ``litellm_settings.modify_params: true`` (which this proxy sets, as
many operators of Claude deployments do), a result sentence for each tool call left unanswered. The fake provider
counts every string it receives and refuses what its window cannot hold. Before: 100 unanswered calls counted 8,582
tokens and reached a 10k window as 11,226 (the provider refused it); 900 blank texts, about 11,000 tokens once
written over, were forwarded as a few hundred.
"""

from __future__ import annotations

import json

import httpx
import pytest

from .harness import MASTER_KEY, serve_config, start_fake_provider, upstream_payloads, wait_for_record

pytestmark = pytest.mark.e2e
TOOL = "run_" + "qzxj" * 15  # 64 characters, 32 tokens


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("litellm_rewrites")
    upstream = start_fake_provider(folder, {"claude-sonnet-4-5-10k": 10000})
    config = {
        "model_list": [{"model_name": "claude", "litellm_params": {
            "model": "anthropic/claude-sonnet-4-5-10k", "api_key": "fake-key", "api_base": f"http://127.0.0.1:{upstream.port}"},
            "model_info": {"max_input_tokens": 10000}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0, "modify_params": True},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def chat(process, body: dict) -> httpx.Response:
    return httpx.post(f"{process.base_url}/v1/chat/completions", json=body, timeout=60,
                      headers={"authorization": f"Bearer {MASTER_KEY}"})


def sent(upstream, marker: str) -> list[dict]:
    return [p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]


def test_tool_calls_left_unanswered_are_counted_with_the_results_litellm_writes(proxy):
    process, upstream = proxy
    marker = "e2e-unanswered-calls"
    messages: list[dict] = [{"role": "user", "content": f"start [{marker}]"}]
    for index in range(100):  # the tool's name is in each result LiteLLM writes
        messages += [{"role": "assistant", "content": f"calling {index}", "tool_calls": [
            {"id": f"call_{index}", "type": "function", "function": {"name": TOOL, "arguments": "{}"}}]},
            {"role": "user", "content": f"go on {index}"}]
    response = chat(process, {"model": "claude", "max_tokens": 50, "messages": messages})
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    [body] = sent(upstream, marker)  # the fake provider accepted it: within its window, every result present
    results = [block for message in body["messages"] if isinstance(message["content"], list)
               for block in message["content"] if block.get("type") == "tool_result"]
    assert results and f"No result provided for tool '{TOOL}'" in json.dumps(results)
    record = wait_for_record(process, response.headers["x-litellm-call-id"])
    assert record["decision"]["tokens_before"] > 15_000  # 8,582 before


def test_blank_texts_are_counted_as_the_sentence_litellm_writes_over_them(proxy):
    process, upstream = proxy
    marker = "e2e-blank-texts"
    content = [{"type": "text", "text": f"hi [{marker}]"}, *[{"type": "text", "text": " "}] * 900]
    response = chat(process, {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": content}]})
    assert response.status_code == 400, response.text
    assert "budget_hook blocked this request (context_length_exceeded)" in response.text
    assert sent(upstream, marker) == []
