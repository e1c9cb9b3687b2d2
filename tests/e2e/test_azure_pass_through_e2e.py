"""An Azure pass-through without a router model goes to the deployment its URL names (Azure ignores the body's
``model``): it is budgeted against that deployment's window, whatever ``model`` the client writes in the body (an
attack review, 2026-12-06: ``gpt-4.1`` in the body had its 1M window checked, and 9,000 tokens reached a 4k model)."""

from __future__ import annotations

import json

import httpx
import pytest

from .conftest import write_config
from .harness import MASTER_KEY, start_fake_provider, start_proxy, upstream_payloads

pytestmark = pytest.mark.e2e
PATH = "/azure/openai/deployments/gpt-35-turbo/chat/completions?api-version=2024-10-21"  # azure/gpt-35-turbo: 4,097


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("azure_pt")
    upstream = start_fake_provider(folder, {"gpt-35-turbo": 4097})
    config = write_config(folder / "proxy", {
        "model_list": [{"model_name": "small", "litellm_params": {
            "model": "openai/gpt-35-turbo", "api_base": f"http://127.0.0.1:{upstream.port}/v1", "api_key": "k"},
            "model_info": {"max_input_tokens": 4000}}],
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {"mode": "enforce"}},
    })
    proxy = start_proxy(config, log_dir=folder, env={"AZURE_API_BASE": f"http://127.0.0.1:{upstream.port}",
                                                     "AZURE_API_KEY": "fake-key"})
    yield proxy, upstream
    proxy.stop()
    upstream.stop()


@pytest.mark.parametrize("body_model", [None, "gpt-4.1", "not-a-model-at-all"])
def test_the_body_model_does_not_choose_the_window_of_an_azure_pass_through(served, body_model):
    proxy, upstream = served
    marker = f"e2e-azure-pt-{body_model}"
    body = {"messages": [{"role": "user", "content": "word " * 9000 + f"[{marker}]"}],
            **({"model": body_model} if body_model else {})}
    response = httpx.post(proxy.base_url + PATH, json=body, timeout=120,
                          headers={"authorization": f"Bearer {MASTER_KEY}", "api-key": "x"})
    reached = [p for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]
    assert response.status_code == 400 and reached == [], (response.status_code, response.text[:300],
                                                            [p["path"] for p in reached])
