"""End to end: what a success proves about a deployment's window comes from a prompt the provider served.

A success's billed input is the deployment's *served floor* (its window holds that much), which keeps an
overflow error from teaching a window below it. An attack review (2026-12-06) raised the floor above what
three deployments really serve, so their own overflows no longer taught their windows and the next tenants'
requests reached the provider again:

* a batch of embedding inputs, each within the window, is billed as their sum (ten 800-token inputs: 8,000
  against a 1,500-token window);
* a cached answer is logged as a success of whichever deployment the router picked (``caching_groups``): the
  bill of the group that served it first;
* a mocked answer (``mock_response``, for keys LiteLLM lets send one) carries the usage the client wrote.

Each test lets the deployment teach its window by a real overflow, then attacks, then sends the next tenant's
request: budget_hook refuses it (it never reaches the provider). Real processes on 127.0.0.1: one provider
stand-in and one litellm proxy with budget_hook, stopped by their PID.
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from .conftest import write_config
from .harness import Process, decision_records, model_entry, start_fake_provider, start_proxy, upstream_payloads

pytestmark = pytest.mark.e2e


def config(upstream: Process) -> dict:
    base = f"http://127.0.0.1:{upstream.port}/v1"

    return {
        # each configured above what it serves: what learning from overflows exists to catch
        "model_list": [model_entry("emb", "openai/text-embedding-3-small-1500", base, 3000, api_key="k",
                                   model_id="emb-dep"),
                       model_entry("ga", "openai/gpt-4o-16k", base, 16000, api_key="k", model_id="dep-a"),
                       model_entry("gb", "openai/gpt-4o-8k", base, 16000, api_key="k", model_id="dep-b"),
                       model_entry("victim", "openai/gpt-4o-16k", base, 32000, api_key="k", model_id="victim-dep")],
        "router_settings": {"caching_groups": [["ga", "gb"]]},  # the two groups share cached answers
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0,
                             "cache": True, "cache_params": {"type": "local"}},
        "callback_settings": {"budget_hook": {"mode": "enforce"}},
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth"},
    }


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served_floor")
    started: list[Process] = []
    try:
        upstream = start_fake_provider(folder, {"text-embedding-3-small-1500": 1500, "gpt-4o-16k": 16000,
                                                "gpt-4o-8k": 8000})
        started.append(upstream)
        started.append(start_proxy(write_config(folder, config(upstream)), log_dir=folder))
        yield started[-1], upstream
    finally:
        for process in reversed(started):
            process.stop()


def text(tokens: int, seed: str) -> str:
    words = (f"{seed} alpha beta gamma delta epsilon zeta eta theta iota " * (tokens // 10 + 1)).split()
    return " ".join(words[:tokens])


def send(proxy: Process, path: str, body: dict, key: str) -> tuple[httpx.Response, str]:
    call_id = str(uuid.uuid4())
    response = httpx.post(f"{proxy.base_url}{path}", json=body, timeout=120,
                          headers={"authorization": f"Bearer {key}", "x-litellm-call-id": call_id})
    return response, call_id


def settled(proxy: Process, call_id: str) -> dict:
    """The call's record once its outcome (and what it taught) is logged."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = [r for r in decision_records(proxy) if r.get("call_id") == call_id and r.get("outcome")]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no outcome for {call_id}; stderr tail:\n{proxy.stderr()[-3000:]}")


def reached(upstream: Process, seed: str) -> bool:
    return any(f"{seed} alpha" in json.dumps(p["body"]) for p in upstream_payloads(upstream))


def teach(proxy: Process, path: str, body: dict) -> None:
    """A tenant's request over the deployment's real window: the provider's overflow teaches it."""
    response, call_id = send(proxy, path, body, "sk-tenant-b")
    assert response.status_code == 400, response.text
    assert "window" in (settled(proxy, call_id).get("learned") or {}), settled(proxy, call_id)


def test_a_batch_of_inputs_billed_as_their_sum_proves_no_window(proxy):
    proxy, upstream = proxy
    teach(proxy, "/v1/embeddings", {"model": "emb", "input": text(1600, "E1")})
    attack, call_id = send(proxy, "/v1/embeddings", {"model": "emb", "input": [text(800, f"A{i}") for i in range(10)]},
                           "sk-attacker")
    assert attack.status_code == 200, attack.text
    assert settled(proxy, call_id)["provider_prompt_tokens"] >= 8000  # billed as the inputs' sum
    victim, _ = send(proxy, "/v1/embeddings", {"model": "emb", "input": text(1600, "E2")}, "sk-tenant-b")
    assert victim.status_code == 400 and victim.headers["x-budget-decision"] == "blocked"
    assert not reached(upstream, "E2")


def test_a_cached_answer_teaches_the_deployment_that_did_not_serve_it_nothing(proxy):
    proxy, upstream = proxy
    body = {"model": "ga", "max_tokens": 16, "messages": [{"role": "user", "content": text(9000, "C0")}]}
    assert send(proxy, "/v1/chat/completions", body, "sk-attacker")[0].status_code == 200  # served by dep-a (16k)
    cached, call_id = send(proxy, "/v1/chat/completions", {**body, "model": "gb"}, "sk-attacker")
    assert cached.status_code == 200 and settled(proxy, call_id).get("learned") is None  # a cache hit for dep-b (8k)
    teach(proxy, "/v1/chat/completions", {**body, "messages": [{"role": "user", "content": text(9000, "C1")}],
                                          "model": "gb"})
    victim, _ = send(proxy, "/v1/chat/completions",
                     {**body, "model": "gb", "messages": [{"role": "user", "content": text(9000, "C2")}]}, "sk-tenant-b")
    assert victim.status_code == 400 and victim.headers["x-budget-decision"] == "blocked"
    assert not reached(upstream, "C2")


def test_a_mocked_answer_s_usage_proves_no_window(proxy):
    proxy, upstream = proxy
    body = {"model": "victim", "max_tokens": 16, "messages": [{"role": "user", "content": text(20000, "M1")}]}
    teach(proxy, "/v1/chat/completions", body)
    mocked = {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "gpt-4o-16k",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
              "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 1, "total_tokens": 1_000_001}}
    attack, call_id = send(proxy, "/v1/chat/completions", {**body, "messages": [{"role": "user", "content": "hi"}],
                                                           "mock_response": mocked}, "sk-mock-tester")
    assert attack.status_code == 200, attack.text
    settled(proxy, call_id)
    victim, _ = send(proxy, "/v1/chat/completions",
                     {**body, "messages": [{"role": "user", "content": text(20000, "M2")}]}, "sk-tenant-b")
    assert victim.status_code == 400 and victim.headers["x-budget-decision"] == "blocked"
    assert not reached(upstream, "M2")
