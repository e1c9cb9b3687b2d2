"""End to end: the real Claude Code and Codex CLIs recover from a block by compacting, and carry on.

Both run offline against the session's real proxy (tests/e2e/conftest.py) with a dummy key: Claude Code
2.1.331 on ``/v1/messages`` (group ``claude-sonnet-4-5``: a 100k window; Claude Code sends ``max_tokens``
32000, so the input budget is 63,000), Codex CLI 0.169.0 on streamed ``/v1/responses`` (group ``codex``: 20k,
budget 16,000). ``scripts/clients.sh`` installs both from npm into ``.npm-clients/`` (pinned in
``tests/e2e/clients/package.json``); without npm these tests skip, with npm they must run.

The scenario is the one the gateway cannot trim its way out of: a long task in the first turn (opening
context, which budget_hook keeps) and a long second turn. Together they are over the budget, so the plugin
blocks the second turn. Each CLI must read the block as a context overflow and compact:

* Claude Code reads Anthropic's ``prompt is too long: N tokens > M maximum``, sends its summarisation request
  ("CRITICAL: Respond with TEXT ONLY ...") and retries the turn on the compacted history, in the same run; and
  on ``input length and `max_tokens` exceed context limit`` (the input fits, input + max_tokens does not) it
  lowers max_tokens and retries, without compacting;
* Codex reads the streamed ``response.failed`` with code ``context_length_exceeded`` ("Codex ran out of
  room in the model's context window", not the raw JSON of a plain 400), marks its context full, and on
  the next turn compacts first ("You are performing a CONTEXT CHECKPOINT COMPACTION ...") and carries on.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import decision_records, upstream_payloads

pytestmark = [pytest.mark.e2e, pytest.mark.agent_cli]

BIN = Path(__file__).resolve().parents[2] / ".npm-clients" / "node_modules" / ".bin"
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima")


def cli(name: str) -> str:
    path = BIN / name
    if not path.exists():
        reason = f"{name} is not installed in .npm-clients (scripts/clients.sh installs it when npm is available)"
        if os.environ.get("BUDGET_HOOK_AGENT_CLIS") == "required":
            pytest.fail(reason)
        pytest.skip(reason)
    return str(path)


def words(count: int, marker: str, seed: int) -> str:
    rng = random.Random(seed)
    return f"{marker} " + " ".join(rng.choice(WORDS) for _ in range(count))


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """Only what the CLI needs: no inherited API keys, proxies or agent settings."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", **extra}


def claude_code(proxy, tmp_path: Path):
    """``turn(prompt, *flags)`` runs one ``claude -p`` turn in a fresh home and working folder."""
    claude = cli("claude")
    env = clean_env(tmp_path / "home", ANTHROPIC_BASE_URL=proxy.base_url, ANTHROPIC_API_KEY="sk-default",
                    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1")
    work = tmp_path / "work"
    work.mkdir()

    def turn(prompt: str, *flags: str) -> dict:
        done = subprocess.run([claude, "-p", *flags, "--model", "claude-sonnet-4-5", "--output-format", "json"],
                              input=prompt, capture_output=True, text=True, env=env, cwd=work, timeout=300)
        return json.loads(done.stdout.strip().splitlines()[-1])

    return turn


def claude_requests(upstream, marker: str) -> list[dict]:
    return [p["body"] for p in upstream_payloads(upstream) if p["path"] == "/v1/messages"
            and p["body"].get("model") == "claude-sonnet-4-5-100k" and marker in json.dumps(p["body"]["messages"])]


def blocks(proxy) -> int:
    return sum(1 for r in decision_records(proxy) if r["decision"]["action"] == "blocked"
               and r["model_group"] == "claude-sonnet-4-5")


def test_claude_code_lowers_max_tokens_on_anthropic_s_sentence_and_carries_on(proxy, upstream, tmp_path):
    """One long turn (~73k tokens with Claude Code's ~23k of system prompt and tools): over the 63,000 budget
    that max_tokens 32000 leaves, but the input itself fits the window with room for an answer. The block
    says ``input length and `max_tokens` exceed context limit: X + 32000 > 95000``; Claude Code retries with
    max_tokens 95000 - X - 1000, which fits, in the same run: no compaction, nothing lost."""
    turn = claude_code(proxy, tmp_path)
    before = blocks(proxy)
    result = turn("Remember this list: " + words(29000, "cc-e2e-maxtokens", 6))
    assert result["is_error"] is False, result
    assert blocks(proxy) == before + 1
    sent = claude_requests(upstream, "cc-e2e-maxtokens")
    assert sent and sent[-1]["max_tokens"] < 32000  # the retry, with the lowered allowance, reached the provider
    assert not any("CRITICAL: Respond with TEXT ONLY" in json.dumps(b["messages"][-1]) for b in sent)


def test_claude_code_compacts_after_a_prompt_too_long_block_and_carries_on(proxy, upstream, tmp_path):
    """Two long turns: the first (opening context, which the gateway keeps) passes; with the second the input
    alone is too long for the window (less margin and room for an answer). The block says ``prompt is too long:
    N tokens > M maximum``; Claude Code summarises the conversation and retries the turn, in the same run."""
    turn = claude_code(proxy, tmp_path)
    first = turn("Remember this list: " + words(20000, "cc-e2e-first", 1))
    assert first["is_error"] is False, first
    before = blocks(proxy)
    second = turn("And this one: " + words(23000, "cc-e2e-second", 2), "--continue")
    assert second["is_error"] is False, second  # carried on: the turn was answered
    assert blocks(proxy) == before + 1  # the gateway refused the uncompacted turn once
    sent = claude_requests(upstream, "cc-e2e-first")  # the summarisation request carries the first turn
    assert any("CRITICAL: Respond with TEXT ONLY" in json.dumps(b["messages"][-1]) for b in sent), \
        "Claude Code did not send its summarisation request after the block"
    answered = [b for b in claude_requests(upstream, "cc-e2e-second") if "cc-e2e-second" in json.dumps(b["messages"][-1])]
    assert answered, "the second turn never reached the provider after compaction"
    assert "cc-e2e-first" not in json.dumps(answered[-1]["messages"])  # the first list was summarised away


def test_codex_compacts_on_the_streamed_failure_and_carries_on(proxy, upstream, tmp_path):
    codex = cli("codex")
    home = tmp_path / "codex_home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "codex"\nmodel_provider = "gateway"\n\n[model_providers.gateway]\nname = "budget_hook e2e"\n'
        f'base_url = "{proxy.base_url}/v1"\nenv_key = "GATEWAY_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n", encoding="utf-8")
    env = clean_env(tmp_path / "home", CODEX_HOME=str(home), GATEWAY_KEY="sk-default")
    work = tmp_path / "work"
    work.mkdir()

    def turn(prompt: str, resume: bool) -> subprocess.CompletedProcess:
        command = [codex, "exec", "--skip-git-repo-check", "-s", "read-only"]
        command += ["resume", "--last", prompt] if resume else [prompt]
        return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=work,
                              timeout=300)

    first = turn("Remember this list: " + words(4500, "cx-e2e-first", 3), resume=False)
    assert "ok:" in first.stdout + first.stderr, first.stderr[-2000:]
    second = turn("And now this one: " + words(4500, "cx-e2e-second", 4), resume=True)
    output = second.stdout + second.stderr
    # Codex read the streamed response.failed as an overflow, not as an error to print raw
    assert "ran out of room in the model's context window" in output, output[-2000:]
    assert "context_length_exceeded" not in output and "budget_hook blocked" not in output
    third = turn("Last one: " + words(1500, "cx-e2e-third", 5), resume=True)
    output = third.stdout + third.stderr
    assert "context compacted" in output and "ok:" in output, output[-2000:]
    sent = [p["body"] for p in upstream_payloads(upstream) if p["path"] == "/v1/responses"
            and p["body"].get("model") == "gpt-4o-20k"]
    compactions = [b for b in sent if "CONTEXT CHECKPOINT COMPACTION" in json.dumps(b["input"][-1])]
    assert compactions, "Codex did not send its compaction request"
    assert any("cx-e2e-third" in json.dumps(b["input"][-1]) for b in sent)


@pytest.fixture(autouse=True)
def _no_stray_cli_state(tmp_path):
    yield
    shutil.rmtree(tmp_path / "home", ignore_errors=True)
