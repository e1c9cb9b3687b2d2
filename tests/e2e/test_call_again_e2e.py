"""A client's ``context_window_fallback_dict`` is a 400 naming it (a real proxy, a chat-bridged deployment).

An attack review (2026-12-07): on LiteLLM 1.103 a /v1/messages or /v1/responses request to a deployment served
through LiteLLM's chat bridge (Groq here; any provider without a native Messages or Responses API) is decided again
on the bridge's inner completion, which counts what the bridge adds (a ``response_format`` Groq bills as a tool).
That inner call's ``metadata`` names no ``model_group``, so LiteLLM's client wrapper answered the plugin's refusal by
calling the unwrapped function again with the dict's model: the refused body (12,014 tokens) reached the provider's
8,000-token window, and the record said ``pass``. The dict is refused at the top level and in a ``fallbacks`` entry
(an empty one is nothing), before anything reaches the provider; the same body without it is refused as over the
window. With the operator's ``num_retries`` set, LiteLLM 1.103's wrapper also retried that refused inner call
without the hooks (a review of the fix: the body reached the provider twice); the refusal now travels in the kwargs
those calls reuse (``attempts.lasting_refusal``).
"""

from __future__ import annotations

import httpx
import pytest

from .harness import MASTER_KEY, payloads_with, serve_config, start_fake_provider

pytestmark = pytest.mark.e2e

WINDOW = 8000


def schema(tag: str) -> dict:
    """A ``response_format`` of about 12,000 tokens: Groq's transformation sends it as a tool, billed as prompt."""
    words = " ".join(f"w{index % 97} lorem" for index in range(4000))
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
                                                                           "description": f"[{tag}] {words}"}}}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("call_again")
    upstream = start_fake_provider(folder, {"llama-8k": WINDOW, "gpt-4o-8k": WINDOW}, flags=["--chains"])
    config = {
        "model_list": [{"model_name": "bridged", "model_info": {"max_input_tokens": WINDOW},
                        "litellm_params": {"model": "groq/llama-8k", "api_key": "fake-key",
                                           "api_base": f"http://127.0.0.1:{upstream.port}/v1"}},
                       # /v1/messages reaches it as a Responses call (LiteLLM's adapter), retried by its own setting
                       {"model_name": "gpt", "model_info": {"max_input_tokens": WINDOW},
                        "litellm_params": {"model": "openai/gpt-4o-8k", "api_key": "fake-key", "num_retries": 2,
                                           "api_base": f"http://127.0.0.1:{upstream.port}/v1"}}],
        # the operator's retries: LiteLLM 1.103 retried the bridge's refused inner call without the hooks
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 2},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def post(process, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{process.base_url}{path}", json=body, timeout=60,
                      headers={"authorization": f"Bearer {MASTER_KEY}"})


CALL_AGAIN = {"groq/llama-8k": "groq/llama-8k", "bridged": "groq/llama-8k"}
MESSAGES = {"model": "bridged", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "bridged", "max_output_tokens": 100, "input": "hi"}


@pytest.mark.parametrize("path, body, field", [
    ("/v1/messages", {**MESSAGES, "context_window_fallback_dict": CALL_AGAIN}, "context_window_fallback_dict"),
    ("/v1/messages", {**MESSAGES, "stream": True, "context_window_fallback_dict": CALL_AGAIN},
     "context_window_fallback_dict"),
    ("/v1/responses", {**RESPONSES, "context_window_fallback_dict": CALL_AGAIN}, "context_window_fallback_dict"),
    ("/v1/messages", {**MESSAGES, "fallbacks": [{"model": "bridged", "context_window_fallback_dict": CALL_AGAIN}]},
     "fallbacks[0].context_window_fallback_dict"),
])
def test_a_dict_that_makes_litellm_call_again_is_a_400_naming_it(proxy, path, body, field):
    process, upstream = proxy
    tag = f"e2e-cwd-{path.rsplit('/', 1)[-1]}-{field.split('.')[0]}-{'stream' if body.get('stream') else 'once'}"
    response = post(process, path, {**body, "response_format": schema(tag)})
    assert response.status_code == 400, response.text
    assert field in response.text and "budget check" in response.text
    assert not payloads_with(upstream, tag)  # on the code before, the refused body reached the 8,000-token window


@pytest.mark.parametrize("path, body", [("/v1/messages", MESSAGES), ("/v1/responses", RESPONSES),
                                        ("/v1/messages", {**MESSAGES, "stream": True})])
def test_without_it_the_bridged_call_is_refused_as_over_the_window(proxy, path, body):
    process, upstream = proxy
    tag = f"e2e-cwd-control-{path.rsplit('/', 1)[-1]}-{'stream' if body.get('stream') else 'once'}"
    response = post(process, path, {**body, "response_format": schema(tag), "context_window_fallback_dict": {}})
    assert response.status_code == 400, response.text
    assert "budget_hook blocked this request" in response.text
    assert not payloads_with(upstream, tag)


@pytest.mark.parametrize("field, value", [
    ("instructions", " ".join(f"rule{index % 97} lorem" for index in range(4000))),
    ("previous_response_id", "resp_unknown"),
])
@pytest.mark.parametrize("stream", [False, True], ids=["once", "streamed"])
def test_a_responses_field_on_v1_messages_is_a_400_before_the_responses_call(proxy, field, value, stream):
    """LiteLLM forwards it into the Responses call it makes for an OpenAI deployment, which the Anthropic body's count
    never read; that inner call was refused, and LiteLLM 1.103 sent it again without the hooks for the deployment's
    ``num_retries`` (a review: 9,015 tokens reached the 8,000-token window twice). A 400 naming it, before routing."""
    process, upstream = proxy
    tag = f"e2e-resp-field-{field}-{stream}"
    response = post(process, "/v1/messages", {"model": "gpt", "max_tokens": 100, "stream": stream, field: value,
                                              "messages": [{"role": "user", "content": f"[{tag}] hi"}]})
    assert response.status_code == 400, response.text
    assert field in response.text and "/v1/responses" in response.text
    assert not payloads_with(upstream, tag)
