"""Fields that carry prompt text outside the messages are counted (an eleventh attack review, a real proxy).

Each request held ~18,000-27,000 tokens in one field, to a 4,000-token window, and was forwarded with a count
of 7-84 tokens: a completion's ``suffix`` (the text after the insertion point, read as prompt), a Responses
``text.format`` schema's ``description`` (the conversion for counting kept only its ``schema``), a chat request's
``web_search_options`` (LiteLLM sends them to Claude as a web search tool), and a tool parameter's ``default``
(written beside the parameter, as OpenAI's harmony format does). Each is now refused before any provider call;
the same requests with the field small pass.
"""

from __future__ import annotations

import pytest

from .harness import (
    assert_stuffed_field_refused,
    model_entry,
    post,
    serve_config,
    start_fake_provider,
    wait_for_record,
)

pytestmark = pytest.mark.e2e
WINDOW = 4000


def stuffing(tag: str) -> str:
    return " ".join(f"{tag}{index % 89} lorem" for index in range(3000))  # ~18,000 tokens


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("uncounted_fields")
    upstream = start_fake_provider(folder, {"gpt-4o-4k": WINDOW, "claude-sonnet-4-5-4k": WINDOW})
    base = f"http://127.0.0.1:{upstream.port}"
    config = {
        "model_list": [model_entry("gpt", "openai/gpt-4o-4k", base + "/v1", WINDOW),
                       model_entry("claude", "anthropic/claude-sonnet-4-5-4k", base, WINDOW)],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def completion(text: str) -> tuple[str, dict]:
    return "/v1/completions", {"model": "gpt", "max_tokens": 50, "prompt": "def add(a, b):", "suffix": text}


def responses_format(text: str) -> tuple[str, dict]:
    return "/v1/responses", {"model": "gpt", "max_output_tokens": 100, "input": "name a colour", "text": {
        "format": {"type": "json_schema", "name": "colour", "description": text,
                   "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}


def web_search(text: str) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "weather?"}], "web_search_options": {
        "search_context_size": "low", "user_location": {"type": "approximate", "approximate": {"city": text}}}}


def tool_default(text: str) -> tuple[str, dict]:
    return "/v1/chat/completions", {"model": "gpt", "max_tokens": 100, "messages": [
        {"role": "user", "content": "search"}], "tools": [{"type": "function", "function": {
            "name": "search", "description": "Search the code.", "parameters": {
                "type": "object", "properties": {"query": {"type": "string", "default": text}}}}}]}


CASES = {"suffix": completion, "text.format.description": responses_format,
         "web_search_options": web_search, "tool default": tool_default}


@pytest.mark.parametrize("name", list(CASES))
def test_a_field_carrying_the_prompt_is_counted_and_an_overflow_never_reaches_the_provider(proxy, name):
    process, upstream = proxy
    marker = f"uncounted{list(CASES).index(name)}x"
    assert_stuffed_field_refused(process, upstream, *CASES[name](stuffing(marker)), marker)


@pytest.mark.parametrize("name", list(CASES))
def test_the_same_field_small_passes(proxy, name):
    process, _ = proxy
    path, body = CASES[name]("Paris")
    response = post(process, path, body)
    record = wait_for_record(process, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "pass"
    assert record["decision"]["tokens_before"] < 1000  # a tool adds Claude's tool-use preamble
