"""End to end: ``budget-hook replay`` over LiteLLM's spend log decides as the live proxy did.

The session proxy (tests/e2e/conftest.py) stores request bodies in its spend-log rows
(``store_prompts_in_spend_logs``), and its stand-in logger writes each row LiteLLM's spend tracking builds
(``get_logging_payload``) to a JSONL file, as an operator's export of ``LiteLLM_SpendLogs`` holds them.
Requests go through the proxy, answered (pass, trimmed, shadow's would_trim) or refused (blocked), on chat,
Responses and /v1/messages; the replay of their rows, with the proxy's own config, must reach the same
decisions. LiteLLM stores the body it forwarded: a request trimmed live is in the log already trimmed, so its
replay passes, and the row says so (``as_forwarded``, with the live decision).
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
import yaml

from budget_hook import replay
from budget_hook.cli import main

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": "Bearer sk-default"}


def history(turns: int, marker: str) -> list[dict]:
    messages = [{"role": "user", "content": f"{marker} the task"}]
    for turn in range(turns):
        messages += [{"role": "assistant", "content": f"answer {turn} " + "detail " * 120},
                     {"role": "user", "content": f"question {turn}"}]
    return messages


def _litellm_version() -> tuple[int, ...]:
    from importlib.metadata import version

    return tuple(int(part) for part in version("litellm").split(".")[:2])


def spend_rows(proxy, marker: str, count: int) -> list[dict]:
    rows: list[dict] = []
    for _ in range(100):  # the logging callbacks run after the response
        text = proxy.extra["spend_log"].read_text(encoding="utf-8") if proxy.extra["spend_log"].exists() else ""
        rows = [json.loads(line) for line in text.splitlines() if marker in line]
        if len(rows) >= count:
            break
        time.sleep(0.1)
    return rows


def test_replaying_the_spend_log_reaches_the_proxy_s_decisions(proxy, tmp_path):
    marker = "e2e-spendlog-replay"
    sent = {  # case -> (route, body)
        "a": ("/v1/chat/completions", {"model": "small", "max_tokens": 100, "messages": history(1, f"{marker}-a")}),
        "b": ("/v1/chat/completions", {"model": "small", "max_tokens": 100, "messages": history(30, f"{marker}-b")}),
        "c": ("/v1/chat/completions", {"model": "small", "max_tokens": 100,  # one 30,000-character message
                                       "messages": [{"role": "user", "content": f"{marker}-c " + "word " * 6000}]}),
        "d": ("/v1/responses", {"model": "small", "max_output_tokens": 100, "input": history(30, f"{marker}-d")}),
        "e": ("/v1/messages", {"model": "claude", "max_tokens": 100, "messages": history(1, f"{marker}-e")}),
        "f": ("/v1/chat/completions", {"model": "shadowed", "max_tokens": 100,  # shadow: forwarded as sent
                                       "messages": history(30, f"{marker}-f")}),
    }
    live, calls = {}, {}
    for case, (path, body) in sent.items():
        response = httpx.post(f"{proxy.base_url}{path}", json=body, headers=HEADERS, timeout=60)
        live[case], calls[case] = response.headers["x-budget-decision"], response.headers["x-litellm-call-id"]
    assert live == {"a": "pass", "b": "trimmed", "c": "blocked", "d": "trimmed", "e": "pass", "f": "would_trim"}
    rows = spend_rows(proxy, marker, len(sent))
    assert len(rows) == len(sent), [r.get("e2e_error") for r in rows]
    export = tmp_path / "spend_logs.json"
    export.write_text(json.dumps(rows[::-1]), encoding="utf-8")  # as /spend/logs lists them: newest first
    items = replay.load_items(export)
    config = yaml.safe_load(proxy.extra["config"].read_text(encoding="utf-8"))
    decided = {case_of(item.body): row for item, row in zip(items, replay.replay(items, config), strict=True)}
    replayed = {case: row["action"] for case, row in decided.items()}
    assert replayed == {**live, "b": "pass", "d": "pass"}  # b and d were stored as forwarded: trimmed to fit
    assert {case for case, row in decided.items() if row.get("as_forwarded")} == {"b", "d"}
    # LiteLLM 1.108 logs a request refused before any provider call (the block, c) with only allow-listed metadata
    # (tags, guardrail information): its spend-log row no longer carries spend_logs_metadata.budget_hook, so a
    # block's decision also rides as a guardrail result, which both versions log (docs/litellm-versions.md)
    assert {case: row.get("live_action") for case, row in decided.items()} == live
    by_case = {case_of(json_column(row["proxy_server_request"])): {**row, "metadata": json_column(row["metadata"])}
               for row in rows}
    guardrails = [g for g in by_case["c"]["metadata"]["guardrail_information"] if g["guardrail_name"] == "budget_hook"]
    assert [(g["guardrail_status"], g["budget_hook"]["action"]) for g in guardrails] == \
        [("guardrail_intervened", "blocked")]
    # each row is findable by the x-litellm-call-id the client got (and a forwarded one by the response id too)
    assert {case: row["metadata"]["litellm_call_id"] for case, row in by_case.items()} == calls
    assert by_case["c"]["request_id"] == calls["c"] and by_case["a"]["request_id"].startswith("chatcmpl-")
    if _litellm_version() < (1, 108):  # 1.104-1.107 cannot be installed here
        assert by_case["c"]["metadata"]["spend_logs_metadata"]["budget_hook"]["action"] == "blocked"
    else:
        assert by_case["c"]["metadata"]["spend_logs_metadata"] is None
    assert by_case["a"]["metadata"]["spend_logs_metadata"]["budget_hook"]["action"] == "pass"
    assert [case_of(item.body) for item in items] == list(sent)  # replayed in the order they were sent
    # LiteLLM cut the 30,000-character string to 2,048 in the spend log: put back as filler, and said
    assert decided["c"]["restored_chars"] > 27_000 and decided["a"]["restored_chars"] == 0
    # the CLI reads the same export, prints the table, and draws the picture
    plot = tmp_path / "replay.svg"
    assert main(["replay", "--config", str(proxy.extra["config"]), "--plot", str(plot), str(export)]) == 0
    picture = plot.read_text(encoding="utf-8")
    assert picture.startswith("<svg") and "small" in picture


def json_column(value):
    """A spend-log JSON column: stored as text."""
    return json.loads(value) if isinstance(value, str) else value


def case_of(body: dict) -> str:
    text = json.dumps(body)
    start = text.index("e2e-spendlog-replay-") + len("e2e-spendlog-replay-")
    return text[start]
