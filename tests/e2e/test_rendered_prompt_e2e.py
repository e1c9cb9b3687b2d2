"""Text LiteLLM renders into the prompt for Ollama and forwards to Cohere is counted (a real proxy, both versions).

An attack review (2026-12-06), against recording servers: for ``ollama/`` with tools, LiteLLM appends the tools'
text to every system message (734 tokens counted, 9,635 sent with 25 system messages) and writes earlier tool
calls again re-serialised with escaped non-ASCII (5,322 counted, 25,084 sent); Cohere's own ``documents`` went to
the provider as sent and uncounted (9 counted, ~10,000 sent). The fake provider serves Ollama's ``/api/generate``
and Cohere's ``/v2/chat``, counting every string it receives and refusing what its window cannot hold.
"""

from __future__ import annotations

import json

import httpx
import pytest

from .harness import MASTER_KEY, payloads_with, serve_config, start_fake_provider

pytestmark = pytest.mark.e2e
WINDOW = 8192
TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look a word up. " + "word " * 300,
                                         "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rendered_prompt")
    upstream = start_fake_provider(folder, {"llama3.1": WINDOW, "command-r-plus": WINDOW})
    base = f"http://127.0.0.1:{upstream.port}"
    config = {
        "model_list": [
            {"model_name": "ollama", "model_info": {"max_input_tokens": WINDOW},
             "litellm_params": {"model": "ollama/llama3.1", "api_base": base}},
            {"model_name": "cohere", "model_info": {"max_input_tokens": WINDOW},
             "litellm_params": {"model": "cohere_chat/command-r-plus", "api_base": base, "api_key": "fake-key"}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def chat(process, body: dict) -> httpx.Response:
    return httpx.post(f"{process.base_url}/v1/chat/completions", json=body, timeout=120,
                      headers={"authorization": f"Bearer {MASTER_KEY}"})


def test_ollama_tools_written_into_every_system_message_are_counted(proxy):
    process, upstream = proxy
    marker = "e2e-ollama-tools"
    messages = [*({"role": "system", "content": f"rule {index}"} for index in range(25)),
                {"role": "user", "content": f"[{marker}] look up 'budget'"}]
    response = chat(process, {"model": "ollama", "max_tokens": 100, "messages": messages, "tools": [TOOL]})
    assert response.status_code == 400, response.text  # about 9,600 tokens once LiteLLM writes the tools in
    assert "budget_hook blocked this request" in response.text
    assert payloads_with(upstream, marker) == []


def test_ollama_tool_calls_written_again_are_counted(proxy):
    process, upstream = proxy
    marker = "e2e-ollama-calls"
    messages: list[dict] = [{"role": "user", "content": f"[{marker}] write the docs"}]
    for index in range(4):  # each call writes ~40 lines of Chinese: escaped, about 5x its own tokens
        arguments = json.dumps({"path": f"doc{index}.md", "content": "预算文档第一章内容说明，\n" * 60},
                               ensure_ascii=False)
        messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": f"call_{index}", "type": "function",
                                                                           "function": {"name": "write_file",
                                                                                        "arguments": arguments}}]},
                     {"role": "tool", "tool_call_id": f"call_{index}", "content": "written"}]
    messages.append({"role": "user", "content": "and now?"})
    response = chat(process, {"model": "ollama", "max_tokens": 100, "messages": messages})
    sent = payloads_with(upstream, marker)
    assert response.status_code in (200, 400), response.text
    assert not any(p.get("prompt", "").count("Tool Calls") > 0 and response.status_code != 200 for p in sent)
    if response.status_code == 200:  # trimmed to fit what the provider received
        assert response.headers["x-budget-decision"] == "trimmed"
    assert "input length exceeds" not in response.text  # the provider never refused it


def test_cohere_documents_are_counted(proxy):
    process, upstream = proxy
    marker = "e2e-cohere-docs"
    response = chat(process, {"model": "cohere", "max_tokens": 100,
                              "messages": [{"role": "user", "content": f"[{marker}] summarise"}],
                              "documents": [{"data": {"text": "word " * 10_000}}]})
    assert response.status_code == 400, response.text
    assert "budget_hook blocked this request" in response.text
    assert payloads_with(upstream, marker) == []
