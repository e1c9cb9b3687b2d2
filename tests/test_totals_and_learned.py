"""One definition of tokens after (metrics and replay), the learned-factor gauge, and which attempts a record
lists (issue 22, 4, 5 and 8)."""

from __future__ import annotations

from types import SimpleNamespace

from budget_hook.pipeline.record import DecisionRecord, tokens_left
from budget_hook.proxy.metrics import Metrics
from budget_hook.replay import summarise


def record(action: str, before: int, after: int | None, count: dict | None = None) -> SimpleNamespace:
    return SimpleNamespace(action=action, model_group="g", metrics_group="g", team_alias=None, team_id=None,
                           tokens_before=before, tokens_after=after, estimate_forwarded=None, count=count)


def test_a_block_leaves_nothing_and_a_trim_what_trimming_left():
    assert tokens_left("blocked", 9000, 9000) == 0 and tokens_left("would_block", 9000, None) == 0
    assert tokens_left("trimmed", 9000, 1200) == 1200 and tokens_left("pass", 500, None) == 500


def test_metrics_and_replay_total_the_same_tokens_after():
    rows = [("pass", 500, 500), ("trimmed", 9000, 1200), ("blocked", 9000, 9000), ("would_block", 7000, 7000)]
    metrics = Metrics()
    for action, before, after in rows:
        metrics.observe(record(action, before, after), "success")
    text = metrics.render()
    [total] = summarise([{"model_group": "g", "team": "", "action": a, "tokens_before": b, "tokens_after": t}
                         for a, b, t in rows])
    assert f'budget_hook_tokens_after_total{{model_group="g",team=""}} {total["tokens_after"]}' in text
    assert total["tokens_after"] == 1700 and total["tokens_saved"] == 25500 - 1700


def test_the_learned_factor_is_a_gauge_per_deployment():
    metrics = Metrics()
    learned = {"factor": 1.3, "samples": 24, "deployment": "dep-1", "source": "learned"}
    metrics.observe(record("pass", 500, 500, {"factor": 1.3, "learned": learned}), "success")
    metrics.observe(record("pass", 500, 500, {"factor": 1.0}), "success")
    text = metrics.render()
    assert "# TYPE budget_hook_learned_factor gauge" in text
    assert 'budget_hook_learned_factor{deployment="dep-1",model_group="g"} 1.3' in text
    assert 'budget_hook_learned_samples{deployment="dep-1",model_group="g"} 24' in text


def test_a_record_lists_only_attempts_that_moved():
    base = DecisionRecord(action="pass", mode="enforce", model_group="small", window=4000)
    same = {"model_group": "small", "window": 4000, "action": "pass", "tokens_before": 8, "tokens_after": 8}
    moved = {**same, "model_group": "big", "window": 16000}
    assert "attempts" not in DecisionRecord(**{**base.__dict__, "attempts": (same,)}).as_dict()
    assert DecisionRecord(**{**base.__dict__, "attempts": (same, moved)}).as_dict()["attempts"] == [moved]


def test_large_counters_keep_every_digit():
    metrics = Metrics()
    metrics.observe(record("pass", 57_734_004_734, 57_734_004_734), "success")
    metrics.observe(record("pass", 9015, 9015), "success")
    assert 'budget_hook_tokens_before_total{model_group="g",team=""} 57734013749' in metrics.render()
