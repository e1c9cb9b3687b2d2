"""End to end: the Vercel AI SDK's default path (``openai(model)`` + ``streamText``, a streamed ``/v1/responses``
call) reads a block as the provider's own context overflow.

``tests/e2e/clients/ai_sdk_probe.mjs`` runs ``ai`` and ``@ai-sdk/openai`` (pinned in
``tests/e2e/clients/package.json``, installed into ``.npm-clients`` by ``scripts/clients.sh``) against the
session's real proxy, group ``codex`` (a 20k window). The SDK validates the ``response.created`` event
against the Responses schema (``model`` required) before it reads ``response.failed``: a block must come
out as ``APICallError`` 400 ``context_length_exceeded``, with the block's message, not as a type error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .test_agent_clis_e2e import clean_env, words

pytestmark = [pytest.mark.e2e, pytest.mark.agent_cli]

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / ".npm-clients" / "node_modules"


def ai_sdk(proxy, tmp_path: Path, prompt: str) -> dict:
    node = shutil.which("node")
    if node is None or not (MODULES / "ai").exists() or not (MODULES / "@ai-sdk" / "openai").exists():
        reason = "the AI SDK is not installed in .npm-clients (scripts/clients.sh installs it when npm is available)"
        if os.environ.get("BUDGET_HOOK_AGENT_CLIS") == "required":
            pytest.fail(reason)
        pytest.skip(reason)
    folder = tmp_path / "ai_sdk"
    folder.mkdir()
    (folder / "node_modules").symlink_to(MODULES)  # ES modules resolve from the script's folder
    shutil.copy(ROOT / "tests" / "e2e" / "clients" / "ai_sdk_probe.mjs", folder / "probe.mjs")
    (folder / "prompt.txt").write_text(prompt)
    done = subprocess.run([node, "probe.mjs", f"{proxy.base_url}/v1", "codex", "prompt.txt"], capture_output=True,
                          text=True, cwd=folder, timeout=120,
                          env=clean_env(tmp_path / "home", GATEWAY_KEY="sk-default"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_ai_sdk_stream_text_reports_a_block_as_context_length_exceeded(proxy, tmp_path):
    result = ai_sdk(proxy, tmp_path, "Remember this list: " + words(30000, "ai-sdk-e2e-block", 7))
    assert result["text"] == ""
    assert result["errors"], result
    assert all(e["name"] != "AI_TypeValidationError" for e in result["errors"]), result["errors"]
    error = result["errors"][0]
    assert error["name"] == "AI_APICallError", result["errors"]
    assert error["status"] == 400 and error["code"] == "context_length_exceeded", error
    assert "budget_hook blocked this request (context_length_exceeded)" in error["message"], error


def test_ai_sdk_stream_text_passes_when_it_fits(proxy, tmp_path):
    result = ai_sdk(proxy, tmp_path, "Say hello.")
    assert result["errors"] == [], result
    assert result["text"], result


def test_the_synthetic_events_fill_the_responses_schema(proxy):
    """Both events carry the Responses ``Response`` object's fields, the model group among them."""
    import httpx

    body = {"model": "codex", "stream": True, "input": "Remember this list: " + words(30000, "raw-events", 8)}
    response = httpx.post(f"{proxy.base_url}/v1/responses", json=body, timeout=60,
                          headers={"authorization": "Bearer sk-default"})
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert [e["type"] for e in events] == ["response.created", "response.failed"]
    for event in events:
        fields = event["response"]
        for name in ("id", "object", "created_at", "status", "model", "output", "tools", "tool_choice",
                     "parallel_tool_calls", "metadata", "error", "incomplete_details", "usage"):
            assert name in fields, (event["type"], name)
        assert isinstance(fields["model"], str)
    assert events[1]["response"]["error"]["code"] == "context_length_exceeded"
