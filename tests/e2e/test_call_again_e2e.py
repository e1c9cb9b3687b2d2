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

LiteLLM 1.103 also took a /v1/responses router attempt for a call outside the router (it looks for ``model_group``
in ``metadata``; the router puts it in ``litellm_metadata``), and sent a refused fallback attempt to the provider
again, without the hooks, for its deployment's ``num_retries``: 12,011 tokens reached an 8,000-token deployment
twice. A Responses call takes no refusal in its kwargs, so the gateway forwards every request with a ``retry_policy``
of its own that grants LiteLLM's client wrapper no retry (the router's retries follow the router's policy); a
client's ``retry_policy``, which asked for the same re-send, is a 400 naming it.
"""

from __future__ import annotations

import json

import httpx
import pytest

from .harness import MASTER_KEY, model_entry, payloads_with, serve_config, start_fake_provider

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
    upstream = start_fake_provider(folder, {"llama-8k": WINDOW, "gpt-4o-8k": WINDOW, "gpt-4o-32k-down": 32000},
                                   flags=["--chains"])
    base = f"http://127.0.0.1:{upstream.port}/v1"
    config = {
        "model_list": [model_entry("bridged", "groq/llama-8k", base, WINDOW),
                       # /v1/messages reaches it as a Responses call (LiteLLM's adapter), retried by its own setting
                       model_entry("gpt", "openai/gpt-4o-8k", base, WINDOW, num_retries=2),
                       # a 32k group that answers 500, falling back to the 8k one (retried by its own setting)
                       *(model_entry(name, "openai/gpt-4o-32k-down", base, 32000) for name in ("big", "big-off"))],
        "router_settings": {"fallbacks": [{"big": ["gpt"]}, {"big-off": ["gpt"]}]},
        # the operator's retries: LiteLLM 1.103 retried the bridge's refused inner call without the hooks
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 2},
        # a group the plugin leaves alone, whose fallback goes to one it budgets
        "callback_settings": {"budget_hook": {"models": {"big-off": {"mode": "off"}}}},
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


def big_input(tag: str) -> str:
    return f"[{tag}] " + " ".join(f"w{index % 97} lorem" for index in range(4000))  # about 12,000 tokens


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"model": "big", "max_output_tokens": 100}),
    ("/v1/responses", {"model": "big", "max_output_tokens": 100, "stream": True}),
    ("/v1/messages", {"model": "big", "max_tokens": 100}),
    ("/chat/completions", {"model": "big", "max_tokens": 100}),
    ("/v1/responses", {"model": "big-off", "max_output_tokens": 100}),
], ids=["responses", "responses-streamed", "messages", "chat", "responses-from-a-group-left-alone"])
def test_a_fallback_attempt_refused_as_over_its_window_never_reaches_the_provider(proxy, path, body):
    """The 32k group fails; the router falls back to the 8k deployment, whose attempt the plugin refuses. On the
    code before, LiteLLM 1.103 sent that refused Responses attempt to the 8k deployment twice (its ``num_retries``)
    without the hooks; /v1/messages reaches it as a Responses call too. A review of the fix: so it did from a group
    whose ``mode`` is off (the request was let through undecided, without the gateway's policy)."""
    process, upstream = proxy
    tag = f"e2e-retry-policy-{path.rsplit('/', 1)[-1]}-{body['model']}-{'stream' if body.get('stream') else 'once'}"
    content = big_input(tag)
    sent = {**body, "input": content} if path == "/v1/responses" else \
        {**body, "messages": [{"role": "user", "content": content}]}
    response = post(process, path, sent)
    assert response.status_code != 200 or "response.failed" in response.text or "error" in response.text
    models = [p.get("model") for p in payloads_with(upstream, tag)]
    assert models and set(models) == {"gpt-4o-32k-down"}, models  # the 32k group was tried, the 8k one never


RETRY_POLICY = {"DefaultRetries": 3}


@pytest.mark.parametrize("path, body, field", [
    ("/v1/responses", {**RESPONSES, "model": "gpt", "retry_policy": RETRY_POLICY}, "retry_policy"),
    ("/v1/messages", {**MESSAGES, "model": "gpt", "retry_policy": RETRY_POLICY}, "retry_policy"),
    ("/chat/completions", {**MESSAGES, "model": "bridged", "retry_policy": RETRY_POLICY}, "retry_policy"),
    ("/v1/responses", {**RESPONSES, "model": "big", "fallbacks": [{"model": "gpt", "retry_policy": RETRY_POLICY}]},
     "fallbacks[0].retry_policy"),
    ("/v1/responses", {**RESPONSES, "model": "big",
                       "context_window_fallbacks": [{"big": [{"model": "gpt", "retry_policy": RETRY_POLICY}]}]},
     "context_window_fallbacks[0].big[0].retry_policy"),
    # a review of the fix: null merged over the gateway's policy takes it away; LiteLLM reads the first key of an
    # entry in the router's format, whatever else the entry holds (both sent the refused body twice on 1.103)
    ("/v1/responses", {**RESPONSES, "model": "big", "fallbacks": [{"model": "gpt", "retry_policy": None}]},
     "fallbacks[0].retry_policy"),
    ("/v1/responses", {**RESPONSES, "model": "big",
                       "fallbacks": [{"big": [{"model": "gpt", "retry_policy": RETRY_POLICY}], "x": 1}]},
     "fallbacks[0].big[0].retry_policy"),
    # a second review: from a group whose mode is off (or shadow), whose decision never read the body
    ("/v1/responses", {**RESPONSES, "model": "big-off", "fallbacks": [{"model": "gpt", "retry_policy": RETRY_POLICY}]},
     "fallbacks[0].retry_policy"),
])
def test_a_client_s_retry_policy_is_a_400_naming_it(proxy, path, body, field):
    """LiteLLM's client wrapper reads a call's ``retry_policy`` before its ``num_retries``: a client's would send a
    refused call again without the hooks (it did on LiteLLM 1.103), in any fallback target too."""
    process, upstream = proxy
    tag = f"e2e-client-retry-policy-{field}-{path.rsplit('/', 1)[-1]}-{len(json.dumps(body))}"
    marked = {**body, "input": f"[{tag}] hi"} if "input" in body else \
        {**body, "messages": [{"role": "user", "content": f"[{tag}] hi"}]}
    response = post(process, path, marked)
    assert response.status_code == 400, response.text
    assert field in response.text and "router_settings" in response.text
    assert not payloads_with(upstream, tag)


@pytest.mark.parametrize("path, body", [("/v1/responses", {**RESPONSES, "model": "gpt"}),
                                        ("/v1/messages", {**MESSAGES, "model": "gpt"}),
                                        ("/chat/completions", {**MESSAGES, "model": "gpt"})])
def test_the_gateway_s_own_retry_policy_is_accepted_and_reaches_no_provider(proxy, path, body):
    """A client may send the policy the gateway sets (it grants no retry); neither reaches the provider."""
    process, upstream = proxy
    tag = f"e2e-own-retry-policy-{path.rsplit('/', 1)[-1]}-{body['model']}"
    marked = {**body, "retry_policy": {"DefaultRetries": 0}}
    marked = {**marked, "input": f"[{tag}] hi"} if "input" in body else \
        {**marked, "messages": [{"role": "user", "content": f"[{tag}] hi"}]}
    response = post(process, path, marked)
    assert response.status_code == 200, response.text
    sent = payloads_with(upstream, tag)
    assert sent and not any("retry_policy" in json.dumps(p) or "DefaultRetries" in json.dumps(p) for p in sent)
