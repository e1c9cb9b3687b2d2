"""The README's first command serves ``litellm_config.yaml``: its worked example must do what the README says."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from .harness import start_proxy, wait_for_record

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_proxy(tmp_path_factory):
    process = start_proxy(ROOT / "litellm_config.yaml", log_dir=tmp_path_factory.mktemp("demo"))
    yield process
    process.stop()


def post(proxy, name: str, **extra) -> httpx.Response:
    body = {**json.loads((ROOT / "examples" / name).read_text()), **extra}
    return httpx.post(f"{proxy.base_url}/v1/chat/completions", json=body, timeout=60)


def test_demo_trim_example_is_trimmed_as_documented(demo_proxy):
    response = post(demo_proxy, "demo_trim.json")
    assert response.status_code == 200, response.text
    headers = response.headers
    assert (headers["x-budget-decision"], headers["x-budget-tokens-before"], headers["x-budget-tokens-after"],
            headers["x-budget-input-budget"], headers["x-budget-dropped-messages"],
            headers["x-budget-edited-messages"]) == ("trimmed", "3235", "1306", "1600", "0", "1")
    record = wait_for_record(demo_proxy, headers["x-litellm-call-id"])
    # compacting the CI log (its head and tail kept) was enough: nothing was dropped
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
