"""A self-hosted deployment's tool definitions and unreadable content, through a real proxy (a fourteenth attack
review: F1-F4, each forwarded on LiteLLM 1.103 and 1.108 with the record saying ``pass``).

* F1: text in a tool definition OpenAI's rendering does not write (a parameter's ``title``, a key beside
  ``function``) to a model whose family is not recognised (``hosted_vllm/my-model``, ``openai/my-model`` with a
  non-OpenAI ``api_base``): 18,000 tokens counted as 71, the provider received 21,022. vLLM hands the chat template
  every key of the tool, and most templates write it with ``tojson``.
* F2: a key beside ``function`` on a Qwen deployment (JSON tool rendering of the function only): counted as 195.
* F3: an ``audio_url`` by URL (vLLM fetches it): neither counted nor flagged, even under ``unreadable_content:
  block``.
* F4: ``prompt_embeds`` on ``/v1/completions`` (vLLM reads each tensor row as a prompt token): counted as zero.

Each stuffed request is now refused before any provider call; the same request small passes and is forwarded.
"""

from __future__ import annotations

import base64

import pytest

from .harness import (
    assert_stuffed_field_refused,
    model_entry,
    payloads_with,
    post,
    serve_config,
    start_fake_provider,
    wait_for_record,
)

pytestmark = pytest.mark.e2e
WINDOW = 4000
WIDE = 20_000


def stuffing(tag: str) -> str:
    return " ".join(f"{tag}{index % 89} lorem" for index in range(3000))  # ~18,000 tokens


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("self_hosted_fields")
    upstream = start_fake_provider(folder, {"my-model": WINDOW, "my-wide-model": WIDE,
                                            "Qwen/Qwen2.5-7B-Instruct": WINDOW})
    base = f"http://127.0.0.1:{upstream.port}/v1"
    config = {
        "model_list": [model_entry("vllm_plain", "hosted_vllm/my-model", base, WINDOW),
                       model_entry("compat", "openai/my-model", base, WINDOW),
                       model_entry("vllm_qwen", "hosted_vllm/Qwen/Qwen2.5-7B-Instruct", base, WINDOW),
                       model_entry("vllm_block", "hosted_vllm/my-model", base, WINDOW),
                       model_entry("vllm_wide", "hosted_vllm/my-wide-model", base, WIDE)],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {"models": {"vllm_block": {"unreadable_content": "block"}}}},
    }
    yield from serve_config(folder, config, upstream)


def tool(param: dict | None = None, outer: dict | None = None) -> dict:
    prop = {"type": "string", "description": "the query", **(param or {})}
    return {"type": "function", "function": {"name": "search", "description": "Search the code.", "parameters": {
        "type": "object", "properties": {"query": prop}, "required": ["query"]}}, **(outer or {})}


def chat(group: str, one: dict) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": group, "max_tokens": 100, "messages": [
        {"role": "user", "content": "find the bug"}], "tools": [one]}


def responses(group: str, one: dict) -> tuple[str, dict]:
    return "/v1/responses", {"model": group, "max_output_tokens": 100, "input": "find the bug", "tools": [one]}


TOOL_CASES = {
    "chat unknown param title": lambda s: chat("vllm_plain", tool(param={"title": s})),
    "chat openai-compatible param title": lambda s: chat("compat", tool(param={"title": s})),
    "chat unknown tool key": lambda s: chat("vllm_plain", tool(outer={"description": s})),
    "chat qwen tool key": lambda s: chat("vllm_qwen", tool(outer={"x-doc": s})),
    "responses unknown param title": lambda s: responses("vllm_plain", {
        "type": "function", "name": "search", "description": "Search the code.", "parameters": {
            "type": "object", "properties": {"query": {"type": "string", "title": s}}}}),
    "responses qwen tool key": lambda s: responses("vllm_qwen", {
        "type": "function", "name": "search", "parameters": {"type": "object"}, "x-doc": s}),
}


@pytest.mark.parametrize("name", list(TOOL_CASES))
def test_text_anywhere_in_a_tool_is_counted_and_an_overflow_never_reaches_the_provider(proxy, name):
    process, upstream = proxy
    marker = f"shtool{list(TOOL_CASES).index(name)}x"
    assert_stuffed_field_refused(process, upstream, *TOOL_CASES[name](stuffing(marker)), marker)


@pytest.mark.parametrize("name", list(TOOL_CASES))
def test_the_same_tool_small_passes(proxy, name):
    process, upstream = proxy
    marker = f"shsmall{list(TOOL_CASES).index(name)}x"
    path, body = TOOL_CASES[name](f"{marker} the search text")
    response = post(process, path, body)
    assert response.status_code == 200, response.text[:300]
    record = wait_for_record(process, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "pass" and record["decision"]["tokens_before"] < 1000
    assert payloads_with(upstream, marker)  # forwarded, the key with it


def audio(group: str, marker: str) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": group, "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "transcribe this"},
        {"type": "audio_url", "audio_url": {"url": f"https://example.com/{marker}.wav"}}]}]}


def embeds(group: str, marker: str, size: int) -> tuple[str, dict]:
    tensor = base64.b64encode(marker.encode() + b"\0" * size).decode()  # a 12-character marker: its own base64
    return "/v1/completions", {"model": group, "max_tokens": 10, "prompt": "", "prompt_embeds": tensor}


def reached(upstream, marker: str) -> bool:
    return bool(payloads_with(upstream, marker) or payloads_with(upstream, base64.b64encode(marker.encode()).decode()))


@pytest.mark.parametrize("case, field", [("audio", "messages[0].content[1]"), ("embeds", "prompt_embeds")])
def test_unreadable_content_is_refused_naming_its_field_under_block(proxy, case, field):
    process, upstream = proxy
    marker = f"shblock{case:>5}"[:12]
    path, body = audio("vllm_block", marker) if case == "audio" else embeds("vllm_block", marker, 2_000)
    response = post(process, path, body)
    assert response.status_code == 400, response.text[:300]
    assert field in response.text and "content_not_countable" in response.text, response.text[:300]
    assert not reached(upstream, marker)
    block = wait_for_record(process, response.headers["x-litellm-call-id"])["decision"]["block"]
    assert block["kind"] == "unreadable" and block["param"] == field, block


@pytest.mark.parametrize("case", ["audio", "embeds"])
def test_unreadable_content_is_estimated_an_overflow_refused_and_a_fitting_one_forwarded_flagged(proxy, case):
    process, upstream = proxy
    big, small = f"shbig{case:>7}"[:12], f"shsml{case:>7}"[:12]
    # the estimate is over the 4,000 window: 10,000 for audio by URL, a row per 512 bytes for 2.4 MB of embeddings
    path, body = audio("vllm_plain", big) if case == "audio" else embeds("vllm_plain", big, 2_400_000)
    response = post(process, path, body)
    assert response.status_code == 400 and response.headers["x-budget-decision"] == "blocked", response.text[:300]
    assert int(response.headers["x-budget-tokens-before"]) > WINDOW
    assert not reached(upstream, big)
    path, body = audio("vllm_wide", small) if case == "audio" else embeds("vllm_plain", small, 2_000)
    response = post(process, path, body)
    assert response.status_code == 200, response.text[:300]
    decision = wait_for_record(process, response.headers["x-litellm-call-id"])["decision"]
    assert decision["action"] == "pass" and any("estimate" in w for w in decision["warnings"]), decision
    assert reached(upstream, small)
