"""What LiteLLM writes into the provider's body after the hooks, per provider, counted (an attack review, 2026-12-06),
through a real proxy: whatever reaches the recording stand-in fits its window (o200k tokens of every string of the
body, a lower bound of what the provider bills).

* Bedrock Converse: a call whose ``arguments`` are concatenated JSON values (``{}{}{}...``) is sent as one ``toolUse``
  per value, each with the tool's name and id (``split_concatenated_json_objects``): 1,239 counted, 21,081 sent.
* Cohere on Bedrock (``cohere_message_pt``): every tool result carries its call's name and arguments, looked up by id,
  so fifteen results answering one call send its arguments fifteen times: 1,726 counted, 17,645 sent.
* ``azure_ai/`` command-r (``stringify_json_tool_call_content``): a tool result that is not JSON is sent as
  ``json.dumps({"result": ...})``, its control characters escaped six characters each: 9,188 counted, 21,052 sent.
"""

from __future__ import annotations

import json
import os
import random

import httpx
import pytest
import tiktoken

from .fake_provider import _strings as strings_of
from .harness import MASTER_KEY, serve_config, start_fake_provider, upstream_payloads, vendored_tokenizer_dir

pytestmark = pytest.mark.e2e
WINDOW = 16_000
NAME = "t_" + "qzxj" * 15  # 62 characters, a valid Bedrock tool name
AWS = {"aws_access_key_id": "fake", "aws_secret_access_key": "fake", "aws_region_name": "us-east-1"}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sent_as_rewritten")
    upstream = start_fake_provider(folder, {"anthropic.claude-3-5-sonnet-20240620-v1:0": WINDOW,
                                            "cohere.command-r-v1:0": WINDOW, "command-r-plus": WINDOW})
    base = f"http://127.0.0.1:{upstream.port}"
    config = {
        "model_list": [
            {"model_name": "claude-bedrock", "model_info": {"max_input_tokens": WINDOW}, "litellm_params": {
                "model": "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "api_base": base, **AWS}},
            {"model_name": "command-r", "model_info": {"max_input_tokens": WINDOW}, "litellm_params": {
                "model": "bedrock/cohere.command-r-v1:0", "api_base": base, **AWS}},
            {"model_name": "command-r-plus", "model_info": {"max_input_tokens": WINDOW}, "litellm_params": {
                "model": "azure_ai/command-r-plus", "api_base": base, "api_key": "fake-key"}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "router_settings": {"disable_cooldowns": True},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def _sent_tokens(upstream, marker) -> list[int]:
    """o200k tokens of every string of each body that reached the stand-in with ``marker``."""
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(vendored_tokenizer_dir()))
    encoding = tiktoken.get_encoding("o200k_base")
    sizes = []
    for body in (p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])):
        texts: list[str] = []
        strings_of(body, texts)
        sizes.append(sum(len(encoding.encode_ordinary(s)) for s in texts))
    return sizes


def _post(process, group, messages, tools):
    return httpx.post(f"{process.base_url}/v1/chat/completions", timeout=60,
                      headers={"authorization": f"Bearer {MASTER_KEY}"},
                      json={"model": group, "max_tokens": 100, "messages": messages, "tools": tools})


@pytest.mark.parametrize("answered", [False, True], ids=["one-result", "every-split-id-answered"])
def test_concatenated_arguments_split_into_tool_use_blocks_stay_within_the_window(proxy, answered):
    process, upstream = proxy
    marker = f"e2e-rewritten-bedrock-split-{answered}"
    calls = 600
    results = [{"role": "tool", "tool_call_id": "c" if i == 0 else f"c_{i}", "content": "ok"}
               for i in range(calls if answered else 1)]
    messages = [{"role": "user", "content": f"go [{marker}]"},
                {"role": "assistant", "content": "calling", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": NAME, "arguments": "{}" * calls}}]},
                *results, {"role": "user", "content": "next"}]
    tools = [{"type": "function", "function": {"name": NAME, "parameters": {"type": "object", "properties": {}}}}]
    response = _post(process, "claude-bedrock", messages, tools)
    assert response.status_code < 500, response.text
    assert all(size < WINDOW for size in _sent_tokens(upstream, marker))


def test_tool_results_answering_one_call_do_not_carry_its_arguments_past_the_window(proxy):
    process, upstream = proxy
    marker = "e2e-rewritten-cohere-duplicate-results"
    arguments = json.dumps({"path": "notes.txt", "text": " ".join(["the quick brown fox jumps over the lazy dog"] * 130)})
    messages = [{"role": "user", "content": f"write the notes [{marker}]"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": arguments}}]},
                *[{"role": "tool", "tool_call_id": "call_1", "content": "ok"} for _ in range(15)],
                {"role": "user", "content": "done?"}]
    tools = [{"type": "function", "function": {"name": "write_file", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}}}}]
    response = _post(process, "command-r", messages, tools)
    assert response.status_code < 500, response.text
    assert all(size < WINDOW for size in _sent_tokens(upstream, marker))


def test_a_tool_result_escaped_by_litellm_is_counted_as_sent(proxy):
    process, _ = proxy
    marker = "e2e-rewritten-azure-cohere-escapes"
    rng = random.Random(3)
    output = "".join(chr(rng.choice([1, 2, 3, 4, 5, 6, 7, 11, 14, 15, 16, 17, 18, 19, 20])) for _ in range(7000))
    messages = [{"role": "user", "content": f"read it [{marker}]"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": output}, {"role": "user", "content": "next"}]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}]
    response = _post(process, "command-r-plus", messages, tools)
    assert response.status_code != 500
    assert "maximum context length" not in response.text  # the provider's overflow: it got more than its window
