"""End to end: a request to Claude that sets no output allowance is budgeted with the one LiteLLM will send.

Anthropic's API requires ``max_tokens``, so LiteLLM fills one in for Claude deployments when a chat request sets
none. An attack review (2026-12-06) found two ways what it sends differed from what budget_hook reserved:

* LiteLLM reads the model's maximum output from a model-map entry that every deployment of the model shares,
  and the last one registered writes it: a 20,000-token group whose deployment says 2,000 sent 64,000;
* with a thinking budget, LiteLLM sends that budget plus 4,096: 34,096 where 8,192 was reserved, in a
  40,000-token window.

Both are reserved now as LiteLLM sends them. Real processes on 127.0.0.1: the provider stand-in and a litellm proxy
with budget_hook, stopped by their PID.
"""

from __future__ import annotations

import pytest

from .harness import MASTER_KEY, Process, model_entry, payloads_with, serve_config, start_fake_provider

pytestmark = pytest.mark.e2e

SONNET = "claude-sonnet-4-5-20250929"
BEDROCK = "us.anthropic.claude-3-7-sonnet-20250219-v1:0"
AWS = {"aws_access_key_id": "fake", "aws_secret_access_key": "fake", "aws_region_name": "us-east-1"}
#: an application inference profile (the usual way to serve Claude on Bedrock with cost tags): no model in its name
ARN = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("filled_output")
    upstream = start_fake_provider(folder, {SONNET: 200_000, BEDROCK: 200_000})
    base = f"http://127.0.0.1:{upstream.port}"
    sonnet, bedrock = f"anthropic/{SONNET}", f"bedrock/{BEDROCK}"
    config = {
        # two groups of one model: the one registered last writes the model's shared entry
        "model_list": [model_entry("claude-small", sonnet, base, 20_000, model_info={"max_output_tokens": 2_000}),
                       model_entry("claude-big", sonnet, base, 200_000, model_info={"max_output_tokens": 64_000}),
                       model_entry("claude37", bedrock, base, 40_000, api_key=None, **AWS),
                       model_entry("claude37-wide", bedrock, base, 200_000, api_key=None, **AWS),
                       model_entry("profile", f"bedrock/converse/{ARN}", base, 40_000, api_key=None, **AWS)],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def chat(servers: tuple[Process, Process], body: dict):
    import httpx

    proxy, _ = servers
    return httpx.post(f"{proxy.base_url}/v1/chat/completions", json=body, timeout=120,
                      headers={"authorization": f"Bearer {MASTER_KEY}"})


def words(count: int, marker: str) -> str:
    return " ".join(f"word{i}" for i in range(count)) + f" [{marker}]"


def test_the_maximum_output_litellm_reads_for_the_model_is_reserved(servers):
    """claude-big, registered after claude-small, wrote 64,000 into the model's shared entry: LiteLLM sends that to
    claude-small too, which no request fits beside in 20,000 tokens. The client is told to set ``max_tokens``."""
    response = chat(servers, {"model": "claude-small", "messages": [{"role": "user", "content": words(2500, "small")}]})
    assert response.status_code == 400 and response.headers["x-budget-decision"] == "blocked", response.text
    assert "64000" in response.text and "max_tokens" in response.text
    assert payloads_with(servers[1], "[small]") == []
    response = chat(servers, {"model": "claude-small", "max_tokens": 2000,
                              "messages": [{"role": "user", "content": words(2500, "explicit")}]})
    assert response.status_code == 200, response.text
    [sent] = payloads_with(servers[1], "[explicit]")
    assert sent["max_tokens"] == 2000


def test_a_thinking_budget_is_reserved_with_the_answer_litellm_adds_to_it(servers):
    body = {"model": "claude37", "thinking": {"type": "enabled", "budget_tokens": 30_000},
            "messages": [{"role": "user", "content": words(4500, "thinks")}]}
    response = chat(servers, body)
    # 34,096 (the budget and 4,096) reserved of 40,000: the 25,727-token request cannot fit; it never reaches it
    assert response.status_code == 400 and response.headers["x-budget-decision"] == "blocked", response.text
    assert response.headers["x-budget-input-budget"] == str(40_000 - 34_096 - 2_000)
    assert payloads_with(servers[1], "[thinks]") == []


def test_a_thinking_budget_that_fits_reaches_the_provider_as_the_client_asked(servers):
    body = {"model": "claude37-wide", "thinking": {"type": "enabled", "budget_tokens": 30_000},
            "messages": [{"role": "user", "content": words(300, "wide")}]}
    chat(servers, body)  # the stand-in records a Converse body, and answers that it serves chat only
    [sent] = payloads_with(servers[1], "[wide]")
    assert sent["inferenceConfig"]["maxTokens"] == 34_096  # what LiteLLM sends alone
    assert sent["additionalModelRequestFields"]["thinking"]["budget_tokens"] == 30_000


def test_a_thinking_budget_is_reserved_for_a_model_not_named_claude(servers):
    """An attack review of 2026-12-07: LiteLLM sends a thinking budget plus 4,096 for every Bedrock Converse model (an
    ARN gets every parameter), while the reserve was taken only for names read as Claude: 27,821 input tokens and
    34,096 of output reached a 40,000-token window. The allowance is reserved for the ARN too."""
    body = {"model": "profile", "thinking": {"type": "enabled", "budget_tokens": 30_000},
            "messages": [{"role": "user", "content": words(4500, "arn-thinks")}]}
    response = chat(servers, body)
    assert response.status_code == 400 and response.headers["x-budget-decision"] == "blocked", response.text
    assert response.headers["x-budget-input-budget"] == str(40_000 - 34_096 - 2_000)
    assert payloads_with(servers[1], "[arn-thinks]") == []
    # without thinking nothing is filled in for it: the policy's reserve, and the request fits (it reaches the stand-in,
    # which answers Bedrock's Converse path with a 404: it serves no Bedrock call)
    response = chat(servers, {"model": "profile", "messages": [{"role": "user", "content": words(4500, "arn-plain")}]})
    assert response.headers["x-budget-decision"] == "pass", response.text
    [sent] = payloads_with(servers[1], "[arn-plain]")
    assert "maxTokens" not in sent.get("inferenceConfig", {})
