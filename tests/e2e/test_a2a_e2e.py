"""An A2A agent served by LiteLLM's completion bridge, through a real proxy (both versions).

An agent configured with a ``custom_llm_provider`` is answered by ``litellm.acompletion`` on the agent's model,
outside the router: no group, no deployment, no pre-call hook for the model call. A review sent 9,021 tokens through
``/a2a/{agent}/message/send`` to a 4k model. The call is now decided against the agent model's own window (here
``gpt-4``'s 8,192 from LiteLLM's model map, which the fake provider enforces too), and a block is the A2A endpoint's
own client error (HTTP 400, JSON-RPC -32602): it was an HTTP 500.
"""

from __future__ import annotations

import json
import shutil
import uuid

import httpx
import pytest

from .harness import HERE, MASTER_KEY, serve_config, start_fake_provider, upstream_payloads

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", params=[0, 2], ids=["no-retries", "num-retries-2"])
def proxy(tmp_path_factory, request):
    """``litellm_settings.num_retries`` 2: LiteLLM's client wrapper would call a refused bridge call again (the
    refusal then travels as the call's ``mock_response``, ``attempts.lasting_refusal``)."""
    folder = tmp_path_factory.mktemp("a2a")
    upstream = start_fake_provider(folder, {"gpt-4": 8192})
    config = {  # the router's own group is not the agent's: the bridge calls its model outside the router
        "model_list": [{"model_name": "small", "litellm_params": {
            "model": "openai/gpt-4", "api_key": "fake-key", "api_base": f"http://127.0.0.1:{upstream.port}/v1"}}],
        "agents": [{"agent_name": "helper", "agent_card_params": {"name": "helper", "description": "answers",
                                                                  "url": "http://127.0.0.1:9/helper", "version": "1.0"},
                    "litellm_params": {"custom_llm_provider": "openai", "model": "gpt-4", "api_key": "fake-key",
                                       "api_base": f"http://127.0.0.1:{upstream.port}/v1"}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": request.param},
        "callback_settings": {"budget_hook": {}},
        # test keys with teams (tests/e2e/proxy_support/e2e_auth.py): sk-team-meta's team caps input at 1,000
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth"},
    }
    for support in (HERE / "proxy_support").glob("*.py"):
        shutil.copy(support, folder / support.name)
    yield from serve_config(folder, config, upstream)


def send(process, text: str, key: str = MASTER_KEY) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": "message/send",
            "params": {"message": {"role": "user", "kind": "message", "messageId": uuid.uuid4().hex,
                                   "parts": [{"kind": "text", "text": text}]}}}
    return httpx.post(f"{process.base_url}/a2a/helper/message/send", json=body, timeout=60,
                      headers={"authorization": f"Bearer {key}"})


def test_an_agent_message_over_its_model_s_window_never_reaches_the_provider(proxy):
    process, upstream = proxy
    marker = f"a2a-over-{uuid.uuid4().hex[:8]}"
    response = send(process, f"[{marker}] " + "word " * 9000)
    # a client error, as LiteLLM's A2A endpoint answers one (HTTP 400, JSON-RPC invalid params): it answers any
    # exception other than LiteLLM's BadRequestError as an internal error, HTTP 500 (``attempts.bridge_refusal``)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32602, response.text
    assert "budget_hook blocked this request (context_length_exceeded)" in response.text, response.text
    assert [p for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])] == []


def test_an_agent_message_that_fits_is_answered(proxy):
    process, upstream = proxy
    marker = f"a2a-fits-{uuid.uuid4().hex[:8]}"
    response = send(process, f"[{marker}] what is two and two?")
    assert response.status_code == 200, response.text
    assert "ok: " in response.text, response.text
    assert [p for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]


def test_an_agent_message_follows_the_caller_s_team_policy(proxy):
    """The bridge's own call carries no proxy metadata: the caller the proxy authenticated for the A2A request is
    the one whose team and key policies apply (this team caps input at 1,000 tokens, under the model's 8,192)."""
    process, upstream = proxy
    marker = f"a2a-team-{uuid.uuid4().hex[:8]}"
    response = send(process, f"[{marker}] " + "word " * 3000, key="sk-team-meta")
    assert response.status_code == 400, response.text
    assert "budget_hook blocked this request (context_length_exceeded)" in response.text, response.text
    assert [p for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])] == []
