"""A client's own router metadata never chooses an attempt's group, its policy or its counter (a real proxy).

``/queue/chat/completions`` decides each router attempt from its metadata. The first fix of an eleventh attack
review took, of the deployments either metadata key named, the one with the smallest window, group and all; a
review of that fix named a listed deployment of a group in shadow mode with a window 100 tokens smaller, and an
18,000-token request reached the 4,000-token deployment (the record saying ``would_block`` in the shadow group).
The group is the router's now; the client's key may only lower the window.
"""

from __future__ import annotations

import pytest

from .harness import model_entry, payloads_with, post, serve_config, start_fake_provider

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forged_router_metadata")
    upstream = start_fake_provider(folder, {"gpt-4o-4k": 4000, "gpt-4o-3900": 3900})
    base = f"http://127.0.0.1:{upstream.port}/v1"
    config = {"model_list": [model_entry("strict", "openai/gpt-4o-4k", base, 4000, api_key="k", model_id="dep-strict"),
                             model_entry("lax", "openai/gpt-4o-3900", base, 3900, api_key="k", model_id="dep-lax")],
              "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
              "callback_settings": {"budget_hook": {"models": {"lax": {"mode": "shadow"}}}}}
    yield from serve_config(folder, config, upstream)


@pytest.mark.parametrize("forged", [False, True])
def test_a_queued_request_is_decided_by_its_own_group_s_policy(proxy, forged):
    process, upstream = proxy
    marker = f"forgedmeta{int(forged)}x"
    body = {"model": "strict", "priority": 0, "max_tokens": 50,
            "messages": [{"role": "user", "content": " ".join(f"{marker}{i % 89} lorem" for i in range(3000))}]}
    if forged:  # a listed deployment (ids are in /model/info) of a group in shadow mode, its window a little smaller
        body["litellm_metadata"] = {"model_info": {"id": "dep-lax"}, "deployment_model_name": "lax"}
    response = post(process, "/queue/chat/completions", body)
    assert response.status_code == 400, response.text[:300]
    assert payloads_with(upstream, marker) == []
