"""End to end: the proxy's model listings advertise the window each caller's policy gives.

Through the session's real proxy (tests/e2e/conftest.py): ``small`` is a 4,000-token window, so a request
that sets no max_tokens may use 4000 - 600 (output reserve, 15%) - 200 (safety margin, 5%) = 3,200 input
tokens, and the ``strict`` team (``max_input_tokens: 1500``) 1,500. Clients that read these fields compact
before the gateway has to trim.
"""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.e2e


def get(proxy, path: str, key: str) -> dict:
    response = httpx.get(f"{proxy.base_url}{path}", headers={"authorization": f"Bearer {key}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def rows(payload: dict, field: str) -> dict[str, dict]:
    return {row[field]: row for row in payload["data"]}


@pytest.mark.parametrize("path", ["/v1/models", "/models"])
def test_the_model_list_advertises_the_input_budget(proxy, path):
    listed = rows(get(proxy, path, "sk-default"), "id")
    small = listed["small"]
    assert small["max_input_tokens"] == 3200 and small["context_length"] == 3800
    assert small["budget_hook"] == {"window": 4000, "input_budget": 3200, "output_reserve": 600, "safety_margin": 200,
                                    "max_input_tokens_cap": None, "mode": "enforce",
                                    "window_source": small["budget_hook"]["window_source"]}
    assert listed["mixed"]["budget_hook"]["window"] == 4000  # the smallest deployment of the group
    # shadow mode changes nothing a client sees: LiteLLM's own listing (the deployment's window) stays
    assert listed["shadowed"]["max_input_tokens"] == 4000 and "budget_hook" not in listed["shadowed"]


def test_each_caller_sees_its_own_policy(proxy):
    strict = rows(get(proxy, "/v1/models", "sk-strict"), "id")["small"]
    assert strict["max_input_tokens"] == 1500 and strict["budget_hook"]["max_input_tokens_cap"] == 1500
    team = rows(get(proxy, "/v1/models", "sk-team-meta"), "id")["small"]  # team metadata: max_input_tokens 1000
    assert team["max_input_tokens"] == 1000
    # key metadata asking for shadow is looser than the config: ignored for requests, and so here
    loose = rows(get(proxy, "/v1/models", "sk-meta-shadow"), "id")["small"]
    assert loose["max_input_tokens"] == 3200 and loose["budget_hook"]["mode"] == "enforce"


def test_the_anthropic_sdk_lists_the_budget_as_max_input_tokens(proxy):
    import anthropic

    client = anthropic.Anthropic(base_url=proxy.base_url, api_key="sk-strict", max_retries=0)
    models = {model.id: model for model in client.models.list(limit=1000)}
    assert models["small"].max_input_tokens == 1500


def test_model_info_lowers_max_input_tokens_except_for_admins(proxy):
    for path in ("/model/info", "/v1/model/info"):
        info = rows(get(proxy, path, "sk-default"), "model_name")["small"]["model_info"]
        assert info["max_input_tokens"] == 3200 and info["budget_hook"]["window"] == 4000
        admin = rows(get(proxy, path, "sk-admin"), "model_name")["small"]["model_info"]
        assert admin["max_input_tokens"] == 4000 and admin["budget_hook"]["input_budget"] == 3200


def test_model_group_info_carries_the_budget(proxy):
    group = rows(get(proxy, "/model_group/info", "sk-strict"), "model_group")["small"]
    assert group["max_input_tokens"] == 1500 and group["budget_hook"]["input_budget"] == 1500


def test_a_wildcard_entry_is_listed_as_litellm_lists_it(proxy):
    listed = get(proxy, "/v1/models", "sk-default")["data"]
    patterns = [row for row in listed if "*" in row["id"]]
    assert all("budget_hook" not in row for row in patterns)
