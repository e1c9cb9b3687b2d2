"""End to end: what the records and the metrics say agrees with what the client was told (issue 22, 5 and 8).

* ``budget_hook_tokens_after_total`` counts a blocked request as 0 tokens left (its tokens were saved, as
  ``replay`` counts them: one definition, ``pipeline.record.tokens_left``);
* an ordinary request's record carries no ``attempts`` (they list attempts sent to another deployment);
* a block's record names the same ``param`` as the HTTP error body.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from budget_hook.replay import summarise

from .harness import decision_records, wait_for_record

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": "Bearer sk-default"}
BIG = "e2e-record-totals " + "word " * 9000


def metric(proxy, name: str, group: str) -> float:
    text = httpx.get(f"{proxy.base_url}/budget_hook/metrics", headers=HEADERS, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and f'model_group="{group}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def settled(proxy, call_id: str) -> dict:
    for _ in range(100):  # the failure/success callback runs after the response
        records = [r for r in decision_records(proxy) if r.get("call_id") == call_id and r.get("outcome")]
        if records:
            return records[-1]
        time.sleep(0.1)
    return wait_for_record(proxy, call_id)


def test_a_blocked_request_counts_as_saved_in_the_metrics_as_in_replay(proxy):
    before = {n: metric(proxy, n, "small") for n in ("budget_hook_tokens_before_total", "budget_hook_tokens_after_total")}
    response = httpx.post(f"{proxy.base_url}/v1/chat/completions", headers=HEADERS, timeout=60,
                          json={"model": "small", "max_tokens": 100, "messages": [{"role": "user", "content": BIG}]})
    assert response.status_code == 400
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "blocked"
    tokens = int(response.headers["x-budget-tokens-before"])
    for _ in range(50):
        if metric(proxy, "budget_hook_tokens_before_total", "small") >= before["budget_hook_tokens_before_total"] + tokens:
            break
        time.sleep(0.1)
    assert metric(proxy, "budget_hook_tokens_before_total", "small") == before["budget_hook_tokens_before_total"] + tokens
    assert metric(proxy, "budget_hook_tokens_after_total", "small") == before["budget_hook_tokens_after_total"]
    # replay's totals on the same row say the same: all of it saved
    [total] = summarise([{"model_group": "small", "team": "", "action": "blocked", "tokens_before": tokens,
                          "tokens_after": record["decision"]["tokens_after"]}])
    assert (total["tokens_after"], total["tokens_saved"]) == (0, tokens)


@pytest.mark.parametrize("route, body", [
    ("/v1/chat/completions", {"model": "small", "messages": [{"role": "user", "content": "e2e-no-attempts hi"}]}),
    # LiteLLM translates it for the OpenAI deployment: re-checked in that format, the same decision
    ("/v1/messages", {"model": "small", "max_tokens": 50, "messages": [{"role": "user", "content": "e2e hi"}]}),
    # two deployments (16k and 4k): the first decision assumed the smaller; either is no move
    ("/v1/chat/completions", {"model": "mixed", "messages": [{"role": "user", "content": "e2e-no-attempts hi"}]}),
])
def test_an_ordinary_request_lists_no_attempts(proxy, route, body):
    response = httpx.post(f"{proxy.base_url}{route}", headers=HEADERS, timeout=60, json=body)
    assert response.status_code == 200
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert "attempts" not in record["decision"], record["decision"].get("attempts")


@pytest.mark.parametrize("route, body, param", [
    ("/v1/chat/completions", {"model": "small", "max_tokens": 100, "messages": [{"role": "user", "content": BIG}]},
     "messages"),
    ("/v1/responses", {"model": "small", "max_output_tokens": 100, "input": BIG}, "input"),
])
def test_a_block_record_names_the_param_the_error_names(proxy, route, body, param):
    response = httpx.post(f"{proxy.base_url}{route}", headers=HEADERS, timeout=60, json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["block"]["param"] == param
    assert re.match(r"^[a-z_]+$", param)
