"""The latest tool result reaches the provider whole while an older step can leave (a real proxy, both versions).

A review (2026-12-07): an older result the trimmer never cuts (a traceback, an ``is_error`` result, a Responses
result reading as an error) among the three newest made the latest result be cut to 14% of its characters on chat,
``/v1/messages`` and ``/v1/responses``, while the older result went whole; and a step leaving later left the
second-newest result at its floor (18-23% of the budget forwarded). Now that older step leaves first, and what the
provider receives holds the latest result verbatim and the room is used.
"""

from __future__ import annotations

import json
import random
import uuid

import pytest

from .harness import model_entry, payloads_with, post, serve_config, start_fake_provider, wait_for_record

pytestmark = pytest.mark.e2e
WINDOW = 5000
WORDS = ["alpha", "beta", "gamma", "delta", "file", "line", "value", "result", "token", "config", "path", "module"]


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("newest_result")
    upstream = start_fake_provider(folder, {"gpt-4o-5k": WINDOW, "claude-sonnet-4-5-5k": WINDOW})
    base = f"http://127.0.0.1:{upstream.port}"
    config = {
        "model_list": [model_entry("gpt", "openai/gpt-4o-5k", base + "/v1", WINDOW),
                       model_entry("claude", "anthropic/claude-sonnet-4-5-5k", base, WINDOW)],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def chat(marker: str) -> tuple[str, dict, str]:
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent."},
                            {"role": "user", "content": f"Fix the failing build. [{marker}]"}]
    for i, (n, prefix) in enumerate([(3000, ""), (3000, "Traceback (most recent call last):\n"), (3000, ""),
                                     (1500, f"LATEST-{marker} ")]):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": prefix + words(n, i)}]
    return "/v1/chat/completions", {"model": "gpt", "max_tokens": 300, "messages": messages}, messages[-1]["content"]


def messages_api(marker: str) -> tuple[str, dict, str]:
    messages: list[dict] = [{"role": "user", "content": f"Fix the failing build. [{marker}]"}]
    latest = f"LATEST-{marker} " + words(1500, 3)
    for i, (text, extra) in enumerate([(words(3000, 0), {}), (words(3000, 1), {"is_error": True}),
                                       (words(3000, 2), {}), (latest, {})]):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "Bash",
                                                        "input": {"command": f"make {i}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                   "content": text, **extra}]}]
    return "/v1/messages", {"model": "claude", "max_tokens": 300, "system": "You are Claude Code.",
                            "messages": messages}, latest


def responses(marker: str) -> tuple[str, dict, str]:
    items: list[dict] = [{"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": f"Fix the failing build. [{marker}]"}]}]
    outputs = [words(3000, 0), "Error: build failed\n" + words(3000, 1), words(3000, 2),
               f"LATEST-{marker} " + words(1500, 3)]
    for i, output in enumerate(outputs):
        items += [{"type": "function_call", "call_id": f"call_{i}", "name": "exec_command", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"call_{i}", "output": output}]
    return "/v1/responses", {"model": "gpt", "max_output_tokens": 300, "instructions": "You are Codex.",
                             "input": items}, outputs[-1]


@pytest.mark.parametrize("build", [chat, messages_api, responses], ids=["chat", "messages", "responses"])
def test_the_latest_result_reaches_the_provider_whole_and_the_budget_is_used(proxy, build):
    process, upstream = proxy
    marker = uuid.uuid4().hex[:10]
    path, body, latest = build(marker)
    response = post(process, path, body)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    sent = payloads_with(upstream, marker)
    assert len(sent) == 1 and latest in json.dumps(sent[0], ensure_ascii=False)  # verbatim
    record = wait_for_record(process, response.headers["x-litellm-call-id"])
    decision = record["decision"]
    assert decision["tokens_after"] >= 0.95 * decision["budget"]["budget"], decision
