"""A stored prompt (the proxy's ``prompts:`` registry) is budgeted wherever LiteLLM fills it in (a real proxy).

The proxy fills a chat call's top-level ``prompt_id`` in before the hooks, where it is counted. Two other ways
reached ``litellm.completion()``, which fills the template in after both hooks (a review on 2026-12-06, with a
~12k-token template applied twice): a ``prompt_id`` on ``/v1/completions`` (the proxy leaves it to the call), and
one in a fallback target the router merges into the fallback call (``fallbacks`` in the router's own format, or
``router_settings_override``): 3,912 tokens counted, 27,929 sent to a 16k window. The first is a 400 naming the
field; the second is refused by the attempt's check, so only the failing first deployment is ever called.
"""

from __future__ import annotations

import json

import pytest

from .harness import model_entry, payloads_with, post, serve_config, start_fake_provider, wait_for_record

pytestmark = pytest.mark.e2e
WINDOW = 16000


def words(count: int, tag: str) -> str:
    return " ".join(f"{tag}{index % 97} value" for index in range(count))


TEMPLATE = "System: You are the operator's assistant. " + words(4000, "rule")  # ~12k tokens


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stored_prompts")
    upstream = start_fake_provider(folder, {"gpt-4o-16k": WINDOW, "gpt-4o-16k-down": WINDOW})
    api_base = f"http://127.0.0.1:{upstream.port}/v1"
    config = {
        "model_list": [model_entry("chat16", "openai/gpt-4o-16k", api_base, WINDOW),
                       model_entry("down", "openai/gpt-4o-16k-down", api_base, WINDOW)],
        "prompts": [{"prompt_id": "bigsys", "litellm_params": {
            "prompt_id": "bigsys", "prompt_integration": "dotprompt",
            "dotprompt_content": "---\nname: bigsys\n---\n" + TEMPLATE + "\n"}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def test_a_chat_calls_stored_prompt_is_filled_in_before_the_check_and_counted(proxy):
    """The control: the same prompt at the top level of a chat call reaches the count (the proxy fills it in)."""
    process, upstream = proxy
    marker = "e2e-stored-chat"
    response = post(process, "/v1/chat/completions", {
        "model": "chat16", "max_tokens": 100, "prompt_id": "bigsys",
        "messages": [{"role": "user", "content": f"[{marker}] " + words(1300, "q")}]})
    record = wait_for_record(process, response.headers["x-litellm-call-id"])
    assert record["decision"]["tokens_before"] > 12_000  # the template's text was counted
    assert all("rule5 value" in json.dumps(body) for body in payloads_with(upstream, marker))
    assert response.status_code in (200, 400), response.text  # trimmed to fit, or refused: never a provider overflow


def test_a_stored_prompt_on_completions_is_a_400_naming_it(proxy):
    process, upstream = proxy
    marker = "e2e-stored-completions"
    response = post(process, "/v1/completions", {"model": "chat16", "max_tokens": 100, "prompt_id": "bigsys",
                                                 "prompt": f"[{marker}] " + words(1300, "q")})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "prompt_id" and "/chat/completions" in response.text
    assert payloads_with(upstream, marker) == []


@pytest.mark.parametrize("extra, field", [
    ({"fallbacks": [{"down": [{"model": "chat16", "prompt_id": "bigsys"}]}]}, "fallbacks[0].down[0].prompt_id"),
    ({"router_settings_override": {"fallbacks": [{"down": [{"model": "chat16", "prompt_id": "bigsys"}]}]}},
     "router_settings_override.fallbacks[0].down[0].prompt_id"),
], ids=["fallbacks-router-format", "router-settings-override"])
def test_a_stored_prompt_in_a_fallback_target_never_reaches_the_provider(proxy, extra, field):
    """LiteLLM fills the target's stored prompt in for the fallback call alone (a review: 3,912 tokens counted, 27,929
    sent): a 400 naming it before routing, in the router's format and a settings override as LiteLLM reads them."""
    process, upstream = proxy
    marker = f"e2e-stored-fallback-{next(iter(extra))}"
    response = post(process, "/v1/chat/completions", {
        "model": "down", "max_tokens": 100, **extra,
        "messages": [{"role": "user", "content": f"[{marker}] " + words(1300, "q")}]})
    assert response.status_code == 400, response.text
    assert field in response.text and payloads_with(upstream, marker) == []
