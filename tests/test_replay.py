"""``budget-hook replay``: captured traffic decided offline, as the proxy would, and summarised."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from budget_hook import replay
from budget_hook.cli import main

CONFIG = {"model_list": [{"model_name": "small", "litellm_params": {"model": "openai/gpt-4o"},
                          "model_info": {"max_input_tokens": 2000}},
                         {"model_name": "small", "litellm_params": {"model": "openai/gpt-4o"},
                          "model_info": {"max_input_tokens": 1500}}],
          "callback_settings": {"budget_hook": {"mode": "enforce", "teams": {"tight": {"max_input_tokens": 600}}}}}


def _traffic(path, turns: int = 8) -> None:
    lines, messages = [], [{"role": "system", "content": "You help."}, {"role": "user", "content": "the task"}]
    for turn in range(turns):
        messages = messages + [{"role": "assistant", "content": f"answer {turn} " + "detail " * 100},
                               {"role": "user", "content": f"question {turn}"}]
        lines.append({"model": "small", "route": "/v1/chat/completions", "team": "tight",
                      "body": {"model": "small", "max_tokens": 100, "messages": messages}})
    lines.append({"model": "small", "max_tokens": 100, "messages": [{"role": "user", "content": "word " * 3000}]})
    lines.append({"model": "small", "route": "/v1/messages", "body": {"model": "small", "max_tokens": 50,
                                                                    "messages": [{"role": "user", "content": "hi"}]}})
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n{broken\n", encoding="utf-8")


def test_replay_decides_like_the_proxy_and_summarises_per_group_and_team(tmp_path):
    path = tmp_path / "traffic.jsonl"
    _traffic(path)
    items = replay.load_items(path)
    rows = replay.replay(items, CONFIG)
    assert [r["action"] for r in rows][-3:] == ["blocked", "pass", "unreadable"]
    assert rows[0]["window"] == 1500  # the minimum over the group's deployments
    summary = {(s["model_group"], s["team"]): s for s in replay.summarise(rows)}
    tight = summary[("small", "tight")]
    assert tight["requests"] == 8 and tight["trimmed"] >= 3 and tight["tokens_saved"] > 0
    assert 0 <= tight["cache_stable_share"] <= 1  # consecutive trimmed turns measured for prefix stability
    assert summary[("small", "")]["blocked"] == 1


def test_a_policy_change_is_shown_next_to_the_current_one(tmp_path, capsys):
    path = tmp_path / "traffic.jsonl"
    _traffic(path, turns=3)
    config = tmp_path / "litellm_config.yaml"
    config.write_text(json.dumps(CONFIG), encoding="utf-8")  # JSON is YAML
    assert main(["replay", "--config", str(config), "--set", "mode=shadow", "--json", str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    current, changed = report["current policy"], report["with mode=shadow"]
    assert any(r["action"] == "blocked" for r in current["requests"])
    assert not any(r["action"] == "blocked" for r in changed["requests"])
    assert any(r["action"] == "would_block" for r in changed["requests"])
    assert main(["replay", "--config", str(config), "--set", "nonsense", str(path)]) == 1


MARKER = ("... (litellm_truncated skipped 900 chars. Truncation is a DB storage safeguard. Full, untruncated data is "
          "logged to logging callbacks (OTEL, Datadog, etc.). To increase the truncation limit, set "
          "`MAX_STRING_LENGTH_PROMPT_IN_DB` in your env.) ...")


def _spend_rows() -> list[dict]:
    """Rows as LiteLLM's ``/spend/logs`` lists them (newest first), bodies as strings as some exports hold them."""
    big = {"model": "small", "max_tokens": 100, "messages": [{"role": "user", "content": "w " * 300 + MARKER + " end"}]}
    return [
        {"request_id": "r3", "call_type": "anthropic_messages", "model_group": "small", "startTime": "2026-11-24T10:00:03",
         "proxy_server_request": json.dumps({"model": "small", "max_tokens": 50,
                                             "messages": [{"role": "user", "content": "hi"}]}),
         "team_id": "tight", "metadata": {}},
        {"request_id": "r2", "call_type": "acompletion", "model_group": "small", "startTime": "2026-11-24T10:00:02",
         "proxy_server_request": {}, "metadata": {}},
        {"request_id": "r1", "call_type": "acompletion", "model_group": "small", "startTime": "2026-11-24T10:00:01",
         "proxy_server_request": big, "team_id": None,
         "metadata": json.dumps({"user_api_key_team_id": "tight",
                                 "spend_logs_metadata": {"budget_hook": {"action": "trimmed", "tokens_before": 9}}})},
    ]


def test_a_spend_log_export_is_replayed_in_the_order_it_was_sent(tmp_path):
    path = tmp_path / "spend.json"
    path.write_text(json.dumps(_spend_rows()), encoding="utf-8")
    items = replay.load_items(path)
    assert [item.line for item in items] == [3, 2, 1]  # by startTime, oldest first
    first, no_body, messages = items
    assert first.team == "tight" and first.shape.name == "chat" and first.restored_chars == 900
    assert MARKER not in json.dumps(first.body) and len(first.body["messages"][0]["content"]) == 600 + 900 + 4
    assert first.live == {"action": "trimmed", "tokens_before": 9}
    assert no_body.problem.startswith("no request body in the spend log")
    assert messages.shape.name == "anthropic" and messages.team == "tight"
    rows = replay.replay(items, CONFIG)
    assert rows[0]["as_forwarded"] and rows[0]["live_action"] == "trimmed" and rows[0]["restored_chars"] == 900
    assert rows[1]["action"] == "unreadable"
    summary = replay.summarise(rows)[0]
    assert (summary["approximate"], summary["as_forwarded"]) == (1, 1)


def test_spend_logs_read_as_jsonl_csv_and_api_pages_alike(tmp_path):
    rows = _spend_rows()
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps({"data": rows, "total": 3}), encoding="utf-8")
    import csv

    with (tmp_path / "c.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else ("" if v is None else v)
                             for k, v in row.items()})
    bodies = [[(i.line, i.body, i.problem is None) for i in replay.load_items(tmp_path / name)]
              for name in ("a.jsonl", "b.json", "c.csv")]
    assert [[b for _, b, _ in got] for got in bodies[1:]] == [[b for _, b, _ in bodies[0]]] * 2


def test_the_plot_draws_every_run_and_marks_blocks(tmp_path, capsys):
    from budget_hook.plot import svg

    path = tmp_path / "traffic.jsonl"
    _traffic(path)
    rows = replay.replay(replay.load_items(path), CONFIG)
    picture = svg({"current": rows, "tighter": replay.replay(replay.load_items(path), CONFIG, {"max_input_tokens": 300})})
    assert picture.startswith("<svg") and picture.rstrip().endswith("</svg>")
    assert picture.count('stroke="#1f77b4"') >= 2 and picture.count('stroke="#2ca02c"') >= 2  # forwarded + budget
    assert 'stroke="#d62728"' in picture  # the blocked request's cross
    assert svg({}).startswith("<svg")


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                         st.sampled_from(["model", "body", "route", "team", "proxy_server_request", "call_type",
                                          "metadata", "model_group", "startTime", "messages", "input", "x"]),
                         inner, max_size=5), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.lists(_JSON, max_size=5))
def test_any_captured_or_spend_log_line_is_read_or_reported_never_raised(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("replay") / "traffic.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n{not json", encoding="utf-8")
    items = replay.load_items(path)
    assert len(items) == len(records) + 1
    assert sum(1 for item in items if (item.problem or "").startswith("not JSON")) == 1
    rows = replay.replay(items, CONFIG)
    assert all(row["action"] in ("pass", "trimmed", "blocked", "unreadable", "error") for row in rows)
    replay.summarise(rows)
