"""End to end: a block reads like the provider's own overflow, carries its headers, and logs no traceback.

Through the session's real proxy (tests/e2e/conftest.py) on every budgeted route. It checks:

* OpenAI shapes (``/chat/completions``, streaming too, ``/v1/responses``, ``/completions``, ``/embeddings``):
  ``error.code == "context_length_exceeded"``, ``type: invalid_request_error``, OpenAI's sentence. Without
  the plugin's error LiteLLM writes the HTTP status (``"400"``) into ``error.code``, and ``/completions`` and
  ``/embeddings`` rebuild the error; the plugin wraps the proxy's ``ProxyException`` handler to put the code
  and headers back.
* ``/v1/messages``: Anthropic's error shape and ``prompt is too long: N tokens > M maximum``.
* every block carries the ``x-budget-*`` headers, none negative, and browsers may read them
  (``access-control-expose-headers``);
* the openai SDK (a real client library) sees ``BadRequestError`` with ``code == "context_length_exceeded"``;
* the proxy writes no traceback for a client's block.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from budget_hook.pipeline.record import BUDGET_HEADERS

from .harness import Process

pytestmark = pytest.mark.e2e

BIG = "e2e-block-shape " + "word " * 9000
HEADERS = {"authorization": "Bearer sk-default", "origin": "http://app.example"}
ROUTES = {
    "/v1/chat/completions": {"model": "small", "max_tokens": 100, "messages": [{"role": "user", "content": BIG}]},
    "/v1/responses": {"model": "small", "max_output_tokens": 100, "input": BIG},
    "/v1/completions": {"model": "small", "max_tokens": 100, "prompt": BIG},
    "/v1/embeddings": {"model": "emb", "input": [BIG]},
}


def post(proxy: Process, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}{path}", json=body, headers=HEADERS, timeout=60)


def assert_budget_headers(response: httpx.Response) -> None:
    headers = response.headers
    assert headers["x-budget-decision"] == "blocked"
    for name in BUDGET_HEADERS:
        assert name in headers, name
    for name in ("x-budget-tokens-before", "x-budget-window", "x-budget-input-budget", "x-budget-dropped-messages"):
        assert int(headers[name]) >= 0, name
    exposed = {h.strip().lower() for h in headers["access-control-expose-headers"].split(",")}
    assert set(BUDGET_HEADERS) <= exposed


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_openai_shapes_say_context_length_exceeded_with_their_headers(proxy, path):
    response = post(proxy, path, ROUTES[path])
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == ("context_length_exceeded", "invalid_request_error")
    assert "maximum context length is" in error["message"]
    assert_budget_headers(response)


def test_a_streamed_chat_block_reads_the_same(proxy):
    response = post(proxy, "/v1/chat/completions", {**ROUTES["/v1/chat/completions"], "stream": True})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"
    assert_budget_headers(response)


def test_anthropic_messages_block_uses_anthropic_s_words_and_headers(proxy):
    body = {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": BIG}]}
    response = post(proxy, "/v1/messages", body)
    assert response.status_code == 400
    payload = response.json()
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["message"].startswith("prompt is too long: ")
    assert_budget_headers(response)


def test_the_openai_sdk_classifies_a_block_as_a_context_overflow(proxy):
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**ROUTES["/v1/chat/completions"])
    assert caught.value.status_code == 400 and caught.value.code == "context_length_exceeded"


def test_blocks_write_no_traceback(proxy):
    before = proxy.stderr().count("Traceback")
    for path, body in ROUTES.items():
        post(proxy, path, body)
    assert proxy.stderr().count("Traceback") == before


def test_an_anthropic_max_tokens_block_uses_anthropic_s_second_sentence(proxy):
    """Input and max_tokens together over the window: the wording Claude Code lowers max_tokens on. The limit
    named is the window less the safety margin (4000 - 200), so that the max_tokens derived from it fits."""
    body = {"model": "claude", "max_tokens": 3990, "messages": [{"role": "user", "content": "e2e-reserve hello"}]}
    response = post(proxy, "/v1/messages", body)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith("input length and `max_tokens` exceed context limit: ") and " + 3990 > 3800," in message
    assert "decrease input length or `max_tokens` and try again" in message
    assert_budget_headers(response)


def test_a_streamed_responses_block_is_a_response_failed_event(proxy):
    """Codex compacts when a streamed turn fails with ``response.failed`` and code context_length_exceeded;
    a plain 400 would end its turn with the raw JSON."""
    body = {**ROUTES["/v1/responses"], "stream": True}
    with httpx.stream("POST", f"{proxy.base_url}/v1/responses", json=body, headers=HEADERS, timeout=60) as response:
        text = response.read().decode()
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line.removeprefix("data: ")) for line in text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events] == ["response.created", "response.failed"]
    failed = events[-1]["response"]
    assert failed["status"] == "failed" and failed["error"]["code"] == "context_length_exceeded"
    assert_budget_headers(response)


def test_the_openai_sdk_sees_the_streamed_failure(proxy):
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    stream = client.responses.create(**ROUTES["/v1/responses"], stream=True)
    failed = [event for event in stream if event.type == "response.failed"]
    assert failed and failed[0].response.error.code == "context_length_exceeded"


def test_a_gemini_native_block_reads_like_gemini_s_own(proxy):
    body = {"contents": [{"role": "user", "parts": [{"text": BIG}]}]}
    response = post(proxy, "/v1beta/models/small:generateContent", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"].startswith("The input token count (")
    assert "exceeds the maximum number of tokens allowed" in error["message"]
    assert_budget_headers(response)


def test_the_anthropic_sdk_sees_anthropic_s_overflow(proxy):
    import anthropic

    client = anthropic.Anthropic(base_url=proxy.base_url, api_key="sk-default", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="claude", max_tokens=100, messages=[{"role": "user", "content": BIG}])
    assert caught.value.status_code == 400 and "prompt is too long" in caught.value.message
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="claude", max_tokens=3990, messages=[{"role": "user", "content": "hello"}])
    assert "input length and `max_tokens` exceed context limit" in caught.value.message


def test_google_genai_sees_gemini_s_invalid_argument(proxy):
    from google import genai
    from google.genai import errors

    client = genai.Client(api_key="sk-default", http_options={"base_url": proxy.base_url, "api_version": "v1beta"})
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="small", contents=BIG)
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    assert "exceeds the maximum number of tokens allowed" in caught.value.message


def test_the_metrics_endpoint_counts_decisions(proxy):
    post(proxy, "/v1/chat/completions", ROUTES["/v1/chat/completions"])
    ok = httpx.post(f"{proxy.base_url}/v1/chat/completions", headers=HEADERS, timeout=60,
                    json={"model": "small", "messages": [{"role": "user", "content": "e2e-metrics hello"}]})
    assert ok.status_code == 200
    text = ""
    for _ in range(50):  # the success callback runs after the response
        text = httpx.get(f"{proxy.base_url}/budget_hook/metrics", headers=HEADERS, timeout=10).text
        if 'action="pass"' in text:
            break
        __import__("time").sleep(0.1)
    assert "# TYPE budget_hook_decisions_total counter" in text
    assert 'budget_hook_decisions_total{action="blocked",model_group="small",outcome="failure",team=""}' in text
    assert 'action="pass",model_group="small",outcome="success"' in text
    assert "budget_hook_provider_prompt_tokens_total{" in text and "budget_hook_tokens_before_total{" in text
    # the same series on LiteLLM's own Prometheus endpoint (callbacks: ["prometheus"])
    litellm_metrics = httpx.get(f"{proxy.base_url}/metrics/", headers=HEADERS, timeout=10, follow_redirects=True)
    assert litellm_metrics.status_code == 200, litellm_metrics.text[:300]
    assert 'budget_hook_decisions_total{action="blocked",model_group="small",outcome="failure",team=""}' \
        in litellm_metrics.text
    assert "litellm_" in litellm_metrics.text  # next to LiteLLM's own metrics
    # both need a key, as LiteLLM's /metrics does unless require_auth_for_metrics_endpoint is false
    unknown = {"authorization": "Bearer sk-unknown"}
    assert httpx.get(f"{proxy.base_url}/budget_hook/metrics", headers=unknown, timeout=10).status_code == 401


def test_v1_messages_to_an_openai_deployment_is_decided_in_the_format_it_arrives_in(proxy):
    """LiteLLM sends /v1/messages for an OpenAI deployment on as a Responses call: the attempt's check must
    read that format (it used to read it as Anthropic's, find no messages, and refuse every such request)."""
    body = {"model": "small", "max_tokens": 100, "messages": [{"role": "user", "content": "e2e-translated hello"}]}
    response = post(proxy, "/v1/messages", body)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "pass"
