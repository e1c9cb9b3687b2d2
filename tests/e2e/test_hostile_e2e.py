"""Hostile and unlucky clients, end to end: every way past the budget, tried through a real proxy.

Each case is a request through the proxy to the fake provider, which counts every string it receives and
rejects what a real provider would. The suite asserts, for every case: nothing over the window reached
the upstream, no 5xx, no client input on the plugin's failure path.
"""

from __future__ import annotations

import json
import time

import pytest

from budget_hook.counting import TokenCounter

from .harness import upstream_payloads, wait_for_record
from .test_proxy_e2e import chat, filler_conversation, payloads_for

pytestmark = pytest.mark.e2e

COUNTER = TokenCounter.for_model("gpt-4o")


def success_record(proxy, call_id: str) -> dict:
    """The record of the attempt that succeeded (the failed first attempt logs its own record first)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        record = wait_for_record(proxy, call_id)
        if record["outcome"] == "success":
            return record
        time.sleep(0.1)
    raise AssertionError(f"no success record for {call_id}")


def test_a_fallback_to_a_smaller_deployment_is_trimmed_for_it(proxy, upstream):
    """The client names a 16k group; its deployment fails and the router falls back to the 4k group."""
    body = {**filler_conversation(12, 60, "e2e-fallback"), "model": "unstable"}
    assert COUNTER.count_request(body).total > 5000
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    sent = payloads_for(upstream, "e2e-fallback")
    assert [p["model"] for p in sent] == ["gpt-4o-16k-down", "gpt-4o-4k"]
    assert len(sent[0]["messages"]) == len(body["messages"])  # the 16k attempt got the whole request
    assert COUNTER.count_request(sent[1]).total <= 4000 and len(sent[1]["messages"]) < len(body["messages"])
    record = success_record(proxy, response.headers["x-litellm-call-id"])
    [attempt] = record["decision"]["attempts"]
    assert attempt["model_group"] == "small" and attempt["window"] == 4000 and attempt["action"] == "trimmed"


def test_a_fallback_that_cannot_fit_is_refused_not_sent(proxy, upstream):
    body = {"model": "unstable", "messages": [{"role": "user", "content": "word " * 6000 + "[e2e-fallback-big]"}]}
    response = chat(proxy, body)
    # When every fallback fails LiteLLM answers with the first deployment's own error (here the simulated
    # outage, a 500), the fallback's refusal attached; what matters: the 4k deployment was never sent it.
    assert response.status_code == 500
    assert "budget_hook blocked this request (context_length_exceeded): model group 'small'" in response.text
    assert "This model's maximum context length is 4000 tokens" in response.text
    assert [p["model"] for p in payloads_for(upstream, "e2e-fallback-big")] == ["gpt-4o-16k-down"]


def test_a_deployment_id_as_the_model_is_budgeted_against_that_deployment(proxy, upstream):
    """The router accepts a deployment id as ``model``; the plugin sees an unknown group name at first (and
    assumes the default 8,192) but checks the attempt against the deployment it really goes to."""
    body = {**filler_conversation(10, 60, "e2e-by-id"), "model": "dep-4k-1"}
    assert COUNTER.count_request(body).total > 5000
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    [sent] = payloads_for(upstream, "e2e-by-id")
    assert sent["model"] == "gpt-4o-4k" and COUNTER.count_request(sent).total <= 4000


def test_a_comma_separated_model_list_fits_the_smallest_group(proxy, upstream):
    body = {**filler_conversation(10, 60, "e2e-comma"), "model": "agent,small"}
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    sent = payloads_for(upstream, "e2e-comma")
    assert sent and all(COUNTER.count_request(p).total <= 4000 for p in sent)


@pytest.mark.parametrize("body, field", [
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-extra-body]"}],
      "extra_body": {"messages": [{"role": "user", "content": "word " * 6000 + "[e2e-extra-body]"}]}},
     "extra_body.messages"),
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-deep-schema]"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
          "x": json.loads('{"type": ["array"], "items": ' * 150 + '{"type": "string"}' + "}" * 150)}}}}]},
     "tools[0].function.parameters"),
])
def test_bodies_the_budget_cannot_vouch_for_get_a_400_and_never_reach_the_provider(proxy, upstream, body, field):
    marker = "e2e-extra-body" if "extra_body" in body else "e2e-deep-schema"
    response = chat(proxy, body)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]
    assert payloads_for(upstream, marker) == []
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "blocked" and record["decision"]["block"]["kind"] == "malformed"


def gemini(proxy, route: str, body: dict):
    import httpx

    return httpx.post(f"{proxy.base_url}{route}", json=body, timeout=60, headers={"authorization": "Bearer sk-default"})


def test_gemini_native_requests_are_budgeted_in_their_own_format(proxy, upstream):
    """A 30,000-token generateContent request used to reach a 16,000-token deployment untouched."""
    body = {"contents": [{"role": "user", "parts": [{"text": "word " * 30_000 + "[e2e-gemini]"}]}]}
    for route in ("/v1beta/models/small:generateContent", "/v1beta/models/small:streamGenerateContent"):
        response = gemini(proxy, route, body)
        assert response.status_code == 400, response.text
        assert "The input token count (" in response.text and "exceeds the maximum number of tokens allowed" in response.text
    assert not [p for p in upstream_payloads(upstream) if "e2e-gemini" in json.dumps(p)]


def test_gemini_interactions_are_refused_by_default(proxy, upstream):
    response = gemini(proxy, "/v1beta/interactions", {"model": "small", "input": "word " * 30_000})
    assert response.status_code in (400, 404), response.text
    if response.status_code == 400:
        assert "route_not_budgeted" in response.text


def test_a_gemini_conversation_is_trimmed_for_its_deployment(proxy, upstream):
    contents = []
    for turn in range(16):
        contents += [{"role": "user", "parts": [{"text": f"question {turn}: " + "lorem ipsum dolor " * 60}]},
                     {"role": "model", "parts": [{"text": f"answer {turn}: " + "consectetur elit " * 60}]}]
    contents.append({"role": "user", "parts": [{"text": "final question [e2e-gemini-trim]"}]})
    response = gemini(proxy, "/v1beta/models/small:generateContent", {"contents": contents})
    assert response.status_code == 200, response.text
    sent = [p["body"] for p in upstream_payloads(upstream) if "e2e-gemini-trim" in json.dumps(p)]
    [payload] = sent  # LiteLLM sent the trimmed conversation to the 4k deployment as a chat request
    assert COUNTER.count_request(payload).total <= 4000 and len(payload["messages"]) < len(contents)
