"""The ``budget-hook`` console script, run as operators run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CONVERSATIONS, conversation_request

BIN = Path(sys.executable).parent / "budget-hook"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "budget_hook.cli"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(command + list(args), input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_count_reads_stdin():
    body = {"messages": [{"role": "user", "content": "hello there"}]}
    out = run("count", "--model", "openai/gpt-4o", "-", stdin=json.dumps(body))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["encoding"] == "o200k_base" and data["tokens"] == sum(data["per_message"]) + 3


def test_trim_uses_the_model_map_window(tmp_path):
    request = conversation_request(next(p for p in CONVERSATIONS if p.stem == "taubench_airline_03"))
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    fits = run("trim", "--model", "gpt-4o", str(path))
    assert fits.returncode == 0 and json.loads(fits.stdout)["report"]["changed"] is False
    trimmed = run("trim", "--model", "gpt-4o", "--max-input-tokens", "9000", "--max-tokens", "500", str(path))
    assert trimmed.returncode == 0, trimmed.stderr
    data = json.loads(trimmed.stdout)
    assert data["report"]["changed"] and data["report"]["tokens_after"] <= data["report"]["budget"]["budget"]
    assert data["report"]["actions"] and data["request"]["messages"] != request["messages"]


def test_trim_that_cannot_fit_exits_2_with_json_error():
    body = {"messages": [{"role": "user", "content": "word " * 3000}]}
    out = run("trim", "--model", "gpt-4o", "--max-input-tokens", "1000", stdin=json.dumps(body))
    assert out.returncode == 2
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "context_length_exceeded" and error["facts"]["window"] == 1000
    assert out.stderr.startswith("budget-hook: ") and out.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "stdin, needle",
    [("{not json", "not valid JSON"), ('{"messages": [{"role": "user", "content": 5}]}', "messages[0].content")],
)
def test_malformed_input_exits_1_naming_the_field(stdin, needle):
    out = run("count", "--model", "gpt-4o", stdin=stdin)
    assert out.returncode == 1 and needle in out.stderr


def test_unknown_model_without_window_is_a_usage_error():
    out = run("trim", "--model", "my-private-model", stdin=json.dumps({"messages": []}))
    assert out.returncode == 1 and "--max-input-tokens" in out.stderr


ROOT_CONFIG = Path(__file__).resolve().parents[1] / "litellm_config.yaml"


def test_check_config_accepts_the_demo_config():
    out = run("check-config", str(ROOT_CONFIG))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["enabled"] is True and data["policy"]["mode"] == "enforce"


def test_check_config_names_the_bad_key(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("litellm_settings:\n  callbacks: budget_hook.proxy.plugin\n"
                    "callback_settings:\n  budget_hook:\n    teams:\n      ml: {max_input_token: 5}\n")
    out = run("check-config", str(path))
    assert out.returncode == 1
    assert "callback_settings.budget_hook.teams.ml.max_input_token: unknown setting; did you mean max_input_tokens?" in out.stderr


def test_check_config_warns_when_the_plugin_is_not_enabled(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("callback_settings:\n  budget_hook:\n    mode: shadow\n")
    out = run("check-config", str(path))
    assert out.returncode == 0 and json.loads(out.stdout)["enabled"] is False
    assert "does not list budget_hook.proxy.plugin" in out.stderr
