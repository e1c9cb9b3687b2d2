"""A client's ``fallbacks`` entry carries its own output allowance into the fallback call (LiteLLM merges the entry
into it: ``run_async_fallback``), through a real proxy: the attempt is decided again when it asks for more output
than the first decision reserved (a tenth attack review, 2026-12-07: 12,010 tokens + 10,000 of output reached a
16,000-token window where 100 was reserved, the content and the window being the same).

Two groups of the same model and window: ``flaky``'s deployment points at a port nothing listens on (the first
attempt fails at once), ``steady``'s at the stand-in; the fallback entry names ``steady``.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from budget_hook.counting import TokenCounter

from .harness import (
    MASTER_KEY,
    free_port,
    model_entry,
    serve_config,
    start_fake_provider,
    upstream_payloads,
    wait_for_record,
)

pytestmark = pytest.mark.e2e
WINDOW = 16_000
COUNTER = TokenCounter.for_model("gpt-4o")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fallback_allowance")
    upstream = start_fake_provider(folder, {"gpt-4o-16k": WINDOW})
    base, model = f"http://127.0.0.1:{upstream.port}/v1", "openai/gpt-4o-16k"
    config = {"model_list": [model_entry("flaky", model, f"http://127.0.0.1:{free_port()}/v1", WINDOW),
                             model_entry("steady", model, base, WINDOW),
                             model_entry("unlimited", model, base, WINDOW, max_tokens=-1)],
              "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
              "router_settings": {"disable_cooldowns": True},
              "callback_settings": {"budget_hook": {}}}
    yield from serve_config(folder, config, upstream)


def conversation(marker: str) -> list[dict]:
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    for turn in range(22):
        messages += [{"role": "user", "content": f"question {turn}: " + "lorem ipsum dolor sit amet " * 60},
                     {"role": "assistant", "content": f"answer {turn}: " + "consectetur adipiscing elit " * 60}]
    return [*messages, {"role": "user", "content": f"final question [{marker}]"}]


@pytest.mark.parametrize("route, allowance", [
    ("/v1/chat/completions", {"max_tokens": 8_000}),
    ("/v1/chat/completions", {"max_completion_tokens": 8_000}),
    ("/v1/responses", {"max_output_tokens": 8_000}),
])
def test_a_fallback_entry_s_larger_allowance_is_budgeted_for_the_fallback_call(served, route, allowance):
    proxy, upstream = served
    name = next(iter(allowance))
    marker = f"e2e-fallback-allowance-{route.rsplit('/', 1)[-1]}-{name}"
    messages = conversation(marker)
    tokens = COUNTER.count_request({"messages": messages}).total
    assert 8_500 < tokens < 14_000  # fits 16,000 with 100 of output, not with 8,000
    first = {"max_output_tokens": 100} if route == "/v1/responses" else {"max_tokens": 100}
    body = {"model": "flaky", "fallbacks": [{"model": "steady", **allowance}], **first,
            **({"input": messages[1:], "instructions": messages[0]["content"]} if route == "/v1/responses"
               else {"messages": messages})}
    response = httpx.post(f"{proxy.base_url}{route}", json=body, timeout=60,
                          headers={"authorization": f"Bearer {MASTER_KEY}"})
    assert response.status_code == 200, response.text
    [sent] = [p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]
    assert sent.get(name) == 8_000
    kept = sent.get("messages") or sent.get("input")
    assert len(kept) < len(body.get("messages") or body["input"])  # trimmed for the 8,000 it asks
    assert COUNTER.count_request({"messages": [m for m in kept if isinstance(m, dict) and "role" in m]}).total \
        + 8_000 <= WINDOW
    call_id, deadline = response.headers["x-litellm-call-id"], time.monotonic() + 10
    record = wait_for_record(proxy, call_id)
    while record["outcome"] != "success" and time.monotonic() < deadline:  # the failed attempt logs first
        time.sleep(0.1)
        record = wait_for_record(proxy, call_id)
    [attempt] = record["decision"]["attempts"]
    assert attempt["model_group"] == "steady" and attempt["action"] == "trimmed"


def test_an_operator_s_own_odd_allowance_is_no_client_s_to_fix(served):
    """A deployment's ``max_tokens: -1`` (Ollama's "unlimited") reaches every attempt: it is the operator's, already
    weighed with the group's limits, and never refuses a request (a review of the fix above: every request was)."""
    proxy, upstream = served
    marker = "e2e-operator-odd-allowance"
    response = httpx.post(f"{proxy.base_url}/v1/chat/completions", timeout=60,
                          headers={"authorization": f"Bearer {MASTER_KEY}"},
                          json={"model": "unlimited", "messages": [{"role": "user", "content": f"hi [{marker}]"}]})
    assert response.status_code == 200, response.text
    [sent] = [p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]
    assert sent["max_tokens"] == -1
