"""``budget-hook replay``: captured traffic decided offline, as the proxy would, and summarised."""

from __future__ import annotations

import json

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
