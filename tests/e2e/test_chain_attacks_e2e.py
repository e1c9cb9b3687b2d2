"""End to end: the ways a client tried to continue a Responses chain without its chain being counted.

One real proxy in front of a stand-in provider that holds chains (tests/e2e/fake_provider.py ``--chains``, an
8,000-token window). Each test builds a chain of ~6,000 tokens (two turns of ~3,000), then continues it with
~3,000 new tokens (over the 8,000 window) in a way an attacker found the gateway did not count:

* a client-chosen ``x-litellm-call-id`` shared by its requests (the record is "collided"): the chain must be stored
  from the provider's response all the same;
* id forms LiteLLM accepts but the gateway read differently: junk before or after the id, an id padded past 1,024
  characters, a hand-built ``litellm:`` wrapping with its parts in another order (resolved by LiteLLM's own steps);
* a fallback from a large group to the 8,000-token one (the per-attempt re-check counts the chain too);
* the chain continued through ``/v1/chat/completions`` on a deployment LiteLLM bridges to the Responses API, or
  named in ``extra_body``.

Each over-window continuation must be refused by the gateway (or never reach the provider).
"""

from __future__ import annotations

import base64
import time

import httpx
import pytest

from .conftest import write_config
from .harness import MASTER_KEY, Process, model_entry, start_fake_provider, start_proxy, upstream_payloads

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": "Bearer sk-default"}
ADMIN = {"authorization": f"Bearer {MASTER_KEY}"}


def turn(tag: str, n: int) -> str:
    return f"{tag} turn {n} " + "word " * 3000


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chain_attacks")
    (folder / "proxy").mkdir()
    up = start_fake_provider(folder, {"gpt-4o-8k": 8000}, flags=["--chains"])
    base = f"http://127.0.0.1:{up.port}/v1"
    cfg = {"model_list": [
        model_entry("chain", "openai/gpt-4o-8k", base, 8000, api_key="k"),
        model_entry("chain-chat", "openai/responses/gpt-4o-8k", base, 8000, api_key="k"),
        model_entry("big", "openai/gpt-4o-missing", base, 32000, api_key="k")],
        "router_settings": {"fallbacks": [{"big": ["chain"]}]},
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {"mode": "enforce", "learning": {"enabled": False}}},
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth", "allow_unmanaged_response_ids": True}}
    p = start_proxy(write_config(folder / "proxy", cfg), log_dir=folder / "proxy")
    yield p, up
    p.stop()
    up.stop()


def post(p: Process, body: dict, *, path: str = "/v1/responses", headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{p.base_url}{path}", json=body, headers=headers or HEADERS, timeout=60)


def two_turns(p: Process, tag: str, headers: dict | None = None) -> str:
    """A chain of ~6,000 tokens at the provider: the id of its second response."""
    a = post(p, {"model": "chain", "max_output_tokens": 100, "input": turn(tag, 1)}, headers=headers)
    assert a.status_code == 200, a.text
    time.sleep(1.5)  # the success callback stores the chain
    b = post(p, {"model": "chain", "max_output_tokens": 100, "input": turn(tag, 2),
                 "previous_response_id": a.json()["id"]}, headers=headers)
    assert b.status_code == 200, b.text
    time.sleep(1.5)
    return str(b.json()["id"])


def raw_id(p: Process, up: Process, rid: str, tag: str, headers: dict | None = None) -> str:
    """The provider's own id behind a LiteLLM id: what the provider got in a small continuation."""
    post(p, {"model": "chain", "max_output_tokens": 10, "input": tag, "previous_response_id": rid}, headers=headers)
    return str([x for x in upstream_payloads(up) if tag in str(x)][-1]["body"]["previous_response_id"])


def reached(up: Process, tag: str) -> list:
    return [x for x in upstream_payloads(up) if tag in str(x) and "previous_response_id" in str(x)]


def test_a_client_chosen_call_id_cannot_blind_the_chain_store(proxy):
    p, _ = proxy
    fixed = {**HEADERS, "x-litellm-call-id": "e2e-fixed-call-id"}
    post(p, {"model": "chain", "input": "x", "previous_response_id": "resp_nope"}, headers=fixed)  # kept a while
    second = two_turns(p, "cid", headers=fixed)
    r = post(p, {"model": "chain", "max_output_tokens": 100, "input": turn("cid", 3),
                 "previous_response_id": second}, headers=fixed)
    assert r.headers.get("x-budget-decision") == "blocked", r.text[:400]


@pytest.mark.parametrize("form", ["honest", "suffix_resp_", "prefix", "long"])
def test_id_forms_litellm_accepts_are_counted_with_their_chain(proxy, form):
    p, _ = proxy
    rid = two_turns(p, f"forge-{form}")
    sent = {"honest": rid, "suffix_resp_": rid + "resp_x", "prefix": "zz" + rid,
            "long": rid + "resp_" + "A" * 1100}[form]
    r = post(p, {"model": "chain", "max_output_tokens": 100, "input": turn(f"forge-{form}", 3),
                 "previous_response_id": sent})
    assert r.headers.get("x-budget-decision") == "blocked", (r.status_code, r.text[:400])


def test_a_reordered_litellm_id_is_read_as_litellm_forwards_it(proxy):
    p, up = proxy
    small = post(p, {"model": "chain", "max_output_tokens": 10, "input": "reorder small"}, headers=ADMIN)
    assert small.status_code == 200, small.text
    big = two_turns(p, "reorder", headers=ADMIN)
    raw_small = raw_id(p, up, small.json()["id"], "reorder peek1", ADMIN)
    raw_big = raw_id(p, up, big, "reorder peek2", ADMIN)
    forged = "resp_" + base64.b64encode(
        f"litellm:custom_llm_provider:openai;model_id:;{raw_big};response_id:{raw_small}".encode()).decode()
    r = post(p, {"model": "chain", "max_output_tokens": 100, "input": turn("reorder", 3),
                 "previous_response_id": forged}, headers=ADMIN)
    assert r.headers.get("x-budget-decision") == "blocked", r.text[:400]
    assert not reached(up, "reorder turn 3")


def test_a_fallback_attempt_counts_the_chain(proxy):
    p, up = proxy
    rid = two_turns(p, "fallback")
    r = post(p, {"model": "big", "max_output_tokens": 100, "input": turn("fallback", 3), "previous_response_id": rid})
    # the first attempt's own error is answered (the missing model); the fallback was refused by the gateway
    assert r.status_code >= 400 and "budget_hook blocked" in r.text and "stored response" in r.text, r.text[:600]
    assert not [x for x in reached(up, "fallback turn 3") if "gpt-4o-8k" in str(x)]


def test_a_chat_continuation_of_a_chain_is_counted(proxy):
    p, up = proxy
    rid = two_turns(p, "viachat")
    raw = raw_id(p, up, rid, "viachat peek")
    r = post(p, {"model": "chain-chat", "max_tokens": 100, "previous_response_id": raw,
                 "messages": [{"role": "user", "content": turn("viachat", 3)}]}, path="/v1/chat/completions")
    assert r.headers.get("x-budget-decision") == "blocked", r.text[:400]
    assert not reached(up, "viachat turn 3")


def test_an_extra_body_previous_response_id_is_counted(proxy):
    p, up = proxy
    rid = two_turns(p, "extrabody")
    raw = raw_id(p, up, rid, "extrabody peek")
    r = post(p, {"model": "chain", "max_output_tokens": 100, "input": turn("extrabody", 3),
                 "extra_body": {"previous_response_id": raw}})
    assert r.headers.get("x-budget-decision") == "blocked", r.text[:400]
    assert not reached(up, "extrabody turn 3")
