"""A router of the client's own (``user_config``) is refused, and in shadow mode teaches nothing (a real proxy).

With ``general_settings.allow_client_side_credentials: true`` LiteLLM routes a body carrying ``user_config``
through a router it builds from it. An attack review (2026-12-06): the pre-call decision budgeted the gateway's
own 20k group while 9,012 tokens reached the client's 4k deployment (here ~6,000 would reach a 1,100-token one),
and a client router naming another group's deployment id (read from ``x-litellm-model-id``) in front of its own
server taught that deployment a 1,100-token window, which then refused every tenant's 2,000-token requests for a
day. The body is a 400 naming
``user_config``; a group in shadow mode forwards it, and learns nothing from the answer.
"""

from __future__ import annotations

import httpx
import pytest

from .harness import MASTER_KEY, model_entry, payloads_with, serve_config, start_fake_provider

pytestmark = pytest.mark.e2e


def words(count: int, tag: str) -> str:
    return f"[{tag}] " + " ".join(f"w{index % 89}" for index in range(count))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("client_router")
    upstream = start_fake_provider(folder, {"gpt-4o-20k": 20000, "gpt-4o-8k": 8000, "gpt-4o-1100": 1100})
    api_base = f"http://127.0.0.1:{upstream.port}/v1"
    config = {
        "model_list": [model_entry("big", "openai/gpt-4o-20k", api_base, 20000, model_id="dep-big"),
                       model_entry("watched", "openai/gpt-4o-8k", api_base, 8000, model_id="dep-watched")],
        "general_settings": {"allow_client_side_credentials": True},
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {"models": {"watched": {"mode": "shadow"}}}},
    }
    yield from serve_config(folder, config, upstream)


def chat(process, body: dict) -> httpx.Response:
    return httpx.post(f"{process.base_url}/v1/chat/completions", json=body, timeout=60,
                      headers={"authorization": f"Bearer {MASTER_KEY}"})


def client_router(group: str, model: str, api_base: str, deployment_id: str | None = None) -> dict:
    return {"model_list": [model_entry(group, f"openai/{model}", api_base, model_id=deployment_id)]}


def test_a_router_of_the_clients_own_is_a_400_naming_it(proxy):
    process, upstream = proxy
    api_base = f"http://127.0.0.1:{upstream.port}/v1"
    response = chat(process, {"model": "big", "messages": [{"role": "user", "content": words(3000, "e2e-ucfg")}],
                              "user_config": client_router("big", "gpt-4o-1100", api_base)})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "user_config"
    assert not payloads_with(upstream, "e2e-ucfg")


def test_in_shadow_mode_what_a_client_router_answers_teaches_no_window(proxy):
    process, upstream = proxy
    api_base = f"http://127.0.0.1:{upstream.port}/v1"
    poison = chat(process, {"model": "watched", "messages": [{"role": "user", "content": words(2500, "e2e-poison")}],
                            "user_config": client_router("watched", "gpt-4o-1100", api_base, "dep-watched")})
    assert poison.status_code != 200  # the client's own 1,100-token model refused it, naming its window
    assert payloads_with(upstream, "e2e-poison")  # shadow forwarded it
    after = chat(process, {"model": "watched", "messages": [{"role": "user", "content": words(2000, "e2e-tenant")}]})
    assert after.status_code == 200, after.text
    assert after.headers["x-budget-window"] == "8000"  # not the 1,100 the client's server claimed
