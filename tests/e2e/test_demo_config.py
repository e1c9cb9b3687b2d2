"""The README's first command serves ``litellm_config.yaml``: its worked example must do what the README says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from .harness import start_proxy, wait_for_record

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
#: the demo config's master key (litellm_config.yaml, general_settings.master_key; the README's first commands)
AUTH = {"authorization": "Bearer sk-demo"}


@pytest.fixture(scope="module")
def demo_proxy(tmp_path_factory):
    """The demo config as scripts/serve.sh runs it: its demo group served by scripts/demo_upstream.py."""
    folder = tmp_path_factory.mktemp("demo")
    upstream = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "demo_upstream.py"), "--port", "0"],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        port = int(upstream.stdout.readline().split()[1])
        process = start_proxy(ROOT / "litellm_config.yaml", log_dir=folder,
                              env={"BUDGET_HOOK_DEMO_UPSTREAM": f"http://127.0.0.1:{port}/v1"})
        yield process
        process.stop()
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)


def post(proxy, name: str, **extra) -> httpx.Response:
    body = {**json.loads((ROOT / "examples" / name).read_text()), **extra}
    return httpx.post(f"{proxy.base_url}/v1/chat/completions", json=body, timeout=60, headers=AUTH)


def test_demo_trim_example_is_trimmed_as_documented(demo_proxy):
    response = post(demo_proxy, "demo_trim.json")
    assert response.status_code == 200, response.text
    headers = response.headers
    assert (headers["x-budget-decision"], headers["x-budget-tokens-before"], headers["x-budget-tokens-after"],
            headers["x-budget-input-budget"], headers["x-budget-dropped-messages"],
            headers["x-budget-edited-messages"]) == ("trimmed", "3235", "1596", "1600", "0", "1")
    record = wait_for_record(demo_proxy, headers["x-litellm-call-id"])
    # cutting the CI log in the middle (its head and tail kept, only as far as needed) was enough: nothing dropped
    assert record["decision"]["dropped_turns"] == []
    [action] = record["decision"]["actions"]
    assert (action["action"], action["role"], action["index"]) == ("compacted", "tool", 3)


@pytest.mark.parametrize("stream", [False, True])
def test_demo_block_example_is_blocked_as_documented(demo_proxy, stream):
    response = post(demo_proxy, "demo_block.json", stream=stream)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert message.startswith("budget_hook blocked this request (context_length_exceeded): model group 'demo'")
    assert "needs 8447 input tokens" in message and "maximum context length is 2000 tokens" in message


SMALL = {"model": "demo", "max_tokens": 50}


@pytest.mark.parametrize("route, body", [
    ("/v1/chat/completions", {**SMALL, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/responses", {"model": "demo", "input": "hi"}),
    ("/v1/messages", {**SMALL, "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/completions", {**SMALL, "prompt": "hi"}),
])
@pytest.mark.parametrize("stream", [False, True])
def test_the_demo_answers_on_every_endpoint_streaming_included(demo_proxy, route, body, stream):
    response = httpx.post(f"{demo_proxy.base_url}{route}", json={**body, "stream": stream}, timeout=60, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "pass"
    if stream:
        assert "data:" in response.text and '"error"' not in response.text, response.text[:500]


def test_the_demo_embeddings_work_with_the_openai_sdk(demo_proxy):
    import openai

    client = openai.OpenAI(base_url=f"{demo_proxy.base_url}/v1", api_key="sk-demo", max_retries=0)
    result = client.embeddings.create(model="demo", input=["hello", "world"])
    assert [len(item.embedding) for item in result.data] == [3, 3]


@pytest.mark.parametrize("key", [None, "sk-wrong", "sk-dem"])
def test_the_demo_refuses_requests_without_its_master_key(demo_proxy, key):
    """LiteLLM's own authentication, no database: only the master key is accepted (no escape hatch is set)."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    response = httpx.post(f"{demo_proxy.base_url}/v1/chat/completions", timeout=60, headers=headers,
                          json={**SMALL, "messages": [{"role": "user", "content": "hi"}]})
    # On 1.103 and 1.108 alike: no key at all is a 500 (LiteLLM's auth error handler imports `prisma`, its database
    # client, not installed without a database, and fails on the ImportError); a key that is not the master key is
    # looked up in the database LiteLLM does not have: 400 "No connected db.".
    assert response.status_code == (500 if key is None else 400), response.text
    assert key is None or "No connected db" in response.text
    assert "x-budget-decision" not in response.headers
