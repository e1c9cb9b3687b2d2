"""A client's own ``anthropic-beta`` header sets the window of a deployment whose 1M window needs the one it sends
(an attack review, 2026-12-07; the unit tests are ``tests/test_client_beta_window.py``).

The deployment sends ``anthropic-beta: context-1m-2025-08-07`` (``extra_headers``) and is configured at 1M. LiteLLM
sends the HTTP request's own ``anthropic-beta`` in its place, and the router the body's ``extra_headers`` (whatever
they hold) in place of the deployment's, so the provider serves that request 200,000 tokens; Claude Code sends the
header on every request. A body's ``headers`` leave the deployment's header in place. The plugin held such
requests at 1M: 230,005 tokens were forwarded and refused, and the refusal taught the deployment a 200,000-token window,
which then blocked every other tenant's long requests. Now they are refused before any provider call, against
200,000, and the deployment keeps its window for requests without the header.
"""

from __future__ import annotations

import uuid

import pytest

from .harness import payloads_with, post, serve_config, start_fake_provider, upstream_payloads, wait_for_record

pytestmark = pytest.mark.e2e
ONE_M = "context-1m-2025-08-07"
CLAUDE_CODE_BETA = "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"


def long_text(tag: str) -> str:
    return " ".join(f"{tag}{index % 89} lorem" for index in range(80_000))  # 240,000 tokens (o200k), over 200,000


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("client_beta")
    upstream = start_fake_provider(folder, {"claude-sonnet-4-5-1m": 1_000_000})
    config = {
        "model_list": [{"model_name": "claude", "litellm_params": {
            "model": "anthropic/claude-sonnet-4-5-1m", "api_base": f"http://127.0.0.1:{upstream.port}",
            "api_key": "fake-key", "extra_headers": {"anthropic-beta": ONE_M}},
            "model_info": {"id": "dep-claude-1m", "base_model": "claude-sonnet-4-5", "max_input_tokens": 1_000_000}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def messages_body(tag: str) -> dict:
    return {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": long_text(tag)}]}


def send(proxy, path: str, body: dict, headers: dict | None = None):
    call_id = str(uuid.uuid4())
    response = post(proxy, path, body, timeout=300, headers={"x-litellm-call-id": call_id, **(headers or {})})
    return response, wait_for_record(proxy, call_id, timeout=30)


def test_a_request_with_its_own_beta_header_is_held_to_the_window_it_gets(proxy):
    proxy, upstream = proxy
    for tag, path, extra, headers in [
        ("cc", "/v1/messages", {}, {"anthropic-beta": CLAUDE_CODE_BETA}),  # what Claude Code sends
        ("http", "/v1/chat/completions", {}, {"anthropic-beta": "prompt-caching-2024-07-31"}),
        ("body", "/v1/chat/completions", {"extra_headers": {"anthropic-beta": "token-efficient-tools-2025-02-19"}}, {}),
        # no beta at all: the router gives the request's extra_headers in place of the deployment's whole dict
        ("trace", "/v1/messages", {"extra_headers": {"x-trace": "1"}}, {}),
    ]:
        response, record = send(proxy, path, {**messages_body(tag), **extra}, headers)
        assert response.status_code == 400, response.text[:300]
        assert record["decision"]["action"] == "blocked" and record["decision"]["window"] == 200_000
        assert "replaces the one its deployment sends" in record["decision"]["window_source"]
        assert not payloads_with(upstream, f"{tag}0 lorem"), "nothing over the window reaches the provider"


def test_requests_without_one_keep_the_deployment_s_window_and_its_own_1m_value_keeps_it(proxy):
    proxy, upstream = proxy
    response, record = send(proxy, "/v1/messages", messages_body("free"))
    assert response.status_code == 200, response.text[:300]
    assert record["decision"]["action"] == "pass" and record["decision"]["window"] == 1_000_000
    # a body's own headers: LiteLLM applies the deployment's extra_headers over them, so its 1M header stays
    response, record = send(proxy, "/v1/chat/completions", {**messages_body("hdrs"), "headers": {
        "anthropic-beta": "prompt-caching-2024-07-31"}})
    assert response.status_code == 200 and record["decision"]["window"] == 1_000_000, response.text[:300]
    response, record = send(proxy, "/v1/messages", messages_body("ownm"), {"anthropic-beta": f"{CLAUDE_CODE_BETA},{ONE_M}"})
    assert response.status_code == 200, response.text[:300]
    assert record["decision"]["window"] == 1_000_000
    sent = [p for p in upstream_payloads(upstream) if "ownm0 lorem" in str(p["body"])]
    assert sent and ONE_M in sent[0]["anthropic_beta"]
