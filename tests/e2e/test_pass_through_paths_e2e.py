"""Pass-through URLs and models read as the provider gets them, through a real proxy (an attack review, 2026-12-06;
each case reached the stand-in provider before the fix):

* **A percent-encoded ``?``, ``#`` or dot segment.** The proxy decodes the path before routing, and LiteLLM builds
  the upstream URL with httpx, which cuts it at the ``?`` or ``#`` and resolves dot segments: budget_hook read the
  decoded path, so ``...learnlm...:generateContent%3F/models/gemini-2.5-pro:generateContent`` had gemini-2.5-pro's
  1M window checked while 60,011 tokens reached a 32,767-token model, ``%23`` left no model to check at all, and
  ``/vllm/v1/chat/completions%23`` or ``/%2E`` sent 9,012 tokens to a 4k router model unchecked
  (``route_guard.sent_path``).
* **The router's window for a provider's model.** ``/openai/...`` forwards the body to OpenAI, which serves its own
  model of the body's name; budget_hook asked the router, whose group ``gpt-3.5-turbo`` (an operator's legacy name,
  served by a 128k model) lent its window: 20,014 tokens reached gpt-3.5-turbo's 16,385 (``pass_through_model``).
* **No model anywhere.** A Gemini tuned model (``tunedModels/{m}``) named none the plugin read, and the request went
  unchecked (60,000 tokens): it is budgeted as a model whose window is unknown (``unknown_window``).
* **A router model's generation endpoint in a format budget_hook cannot read** (SGLang's and TGI's ``/generate``)
  was forwarded: only endpoints known to generate nothing pass (``route_guard.NOT_GENERATING``).
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
import tiktoken

from budget_hook.counting.encodings import vendored_tokenizer_dir

from . import fake_provider
from .conftest import write_config
from .harness import MASTER_KEY, model_entry, start_fake_provider, start_proxy, upstream_payloads

pytestmark = pytest.mark.e2e
MODELS = {"gpt-35-turbo": 4097, "gpt-4o-4k": 4000, "learnlm-1.5-pro-experimental": 32767, "gpt-3.5-turbo": 16385,
          "gpt-4o-128k": 128000}
GEMINI = "/gemini/v1beta/models/learnlm-1.5-pro-experimental:generateContent"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(vendored_tokenizer_dir()))
    fake_provider.ENCODING = tiktoken.get_encoding("o200k_base")
    folder = tmp_path_factory.mktemp("pt_paths")
    upstream = start_fake_provider(folder, MODELS)
    base = f"http://127.0.0.1:{upstream.port}"
    config = write_config(folder / "proxy", {
        "model_list": [
            model_entry("vllm-small", "hosted_vllm/gpt-4o-4k", base + "/v1", 4000, api_key="k"),
            # an operator's legacy name kept working on a newer model (a common remap)
            model_entry("gpt-3.5-turbo", "openai/gpt-4o-128k", base + "/v1", 128000, api_key="k"),
        ],
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {"mode": "enforce"}},
    })
    proxy = start_proxy(config, log_dir=folder, env={
        "GEMINI_API_BASE": base, "GEMINI_API_KEY": "k", "AZURE_API_BASE": base, "AZURE_API_KEY": "k",
        "OPENAI_API_BASE": base + "/v1", "OPENAI_API_KEY": "k"})
    yield proxy, upstream
    proxy.stop()
    upstream.stop()


def post(proxy, path: str, body: dict) -> httpx.Response:
    return httpx.post(proxy.base_url + path, json=body, timeout=120,
                      headers={"authorization": f"Bearer {MASTER_KEY}", "x-goog-api-key": MASTER_KEY, "api-key": "k"})


def reached(upstream, marker: str) -> list[str]:
    return [p["path"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]


@pytest.mark.parametrize("path", [
    GEMINI + "%3F/models/gemini-2.5-pro:generateContent",  # a 1M model after the cut
    GEMINI + "%23",  # no model left to read
    GEMINI + "/%2E",
    "/gemini/v1beta/tunedModels/my-tuned-flash:generateContent",  # a tuned model: a window nobody knows
])
def test_a_gemini_pass_through_is_budgeted_for_the_model_its_url_reaches(served, path):
    proxy, upstream = served
    marker = f"e2e-ptp-{path[-12:]}"
    body = {"contents": [{"role": "user", "parts": [{"text": "word " * 40_000 + f"[{marker}]"}]}]}
    response = post(proxy, path, body)
    assert response.status_code == 400 and "exceeds the maximum number of tokens allowed" in response.text, \
        (response.status_code, response.text[:300])
    assert reached(upstream, marker) == []


@pytest.mark.parametrize("path", [
    "/vllm/v1/chat/completions%23", "/vllm/v1/chat/completions/%2E",
    "/azure/openai/deployments/gpt-35-turbo/chat/completions%3F/deployments/gpt-4.1/chat/completions"
    "?api-version=2024-10-21",
    # encoded twice: LiteLLM's handler decodes the path again and normalises it (the review of the fix)
    "/azure/openai/deployments/gpt-35-turbo/chat/completions%252F.?api-version=2024-10-21",
])
def test_an_encoded_mark_in_a_pass_through_path_hides_no_endpoint(served, path):
    proxy, upstream = served
    marker = f"e2e-ptp-chat-{len(path)}-{path[-9:]}"
    body = {"messages": [{"role": "user", "content": "word " * 9000 + f"[{marker}]"}],
            "model": "vllm-small" if path.startswith("/vllm") else "gpt-4.1"}
    response = post(proxy, path, body)
    assert response.status_code == 400 and "budget_hook blocked this request" in response.text, \
        (response.status_code, response.text[:300])
    assert reached(upstream, marker) == []


def test_a_pass_through_gets_the_window_of_the_provider_s_model_not_a_router_group_s(served):
    proxy, upstream = served
    body = {"model": "gpt-3.5-turbo", "messages": [{"role": "user", "content": "word " * 20_000 + "[e2e-ptp-map]"}]}
    response = post(proxy, "/openai/v1/chat/completions", body)
    assert response.status_code == 400 and "16385" in response.text, (response.status_code, response.text[:300])
    assert reached(upstream, "e2e-ptp-map") == []
    routed = post(proxy, "/v1/chat/completions", {**body, "messages": [{"role": "user", "content": "hi [e2e-ptp-r]"}]})
    assert routed.status_code == 200, routed.text[:300]  # the group itself is the router's, as before


def test_a_router_model_s_unread_generation_endpoint_is_refused(served):
    proxy, upstream = served
    body = {"model": "vllm-small", "text": "word " * 9000 + "[e2e-ptp-gen]"}
    response = post(proxy, "/vllm/generate", body)
    assert response.status_code == 400 and "route_not_budgeted" in response.text, \
        (response.status_code, response.text[:300])
    assert reached(upstream, "e2e-ptp-gen") == []
