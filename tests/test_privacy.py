"""Client-chosen strings never reach a record, a log line, an error message or a metric label.

A client chooses its roles, model name, tool names and call ids, setting keys and schema keys; each can carry
a secret or a megabyte. Records and the 400s that LiteLLM logs describe them ("an unknown role") or hash them;
metrics label only model groups the operator configured (anything else is ``unconfigured``), so made-up
names can neither show up there nor push a real group's series out.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from litellm.proxy._types import UserAPIKeyAuth

import budget_hook.proxy.hook as proxy_module
from budget_hook.budget import ModelLimits
from budget_hook.pipeline import BudgetRequest, DecisionRecord, decide
from budget_hook.pipeline.privacy import id_hash, shown_action, shown_problem, shown_role, shown_source
from budget_hook.policy.settings import load_settings
from budget_hook.proxy import BudgetHookHTTPError, BudgetHookPlugin
from budget_hook.proxy.labels import MULTIPLE, UNCONFIGURED, group_labels
from budget_hook.proxy.metrics import MAX_SERIES, Metrics
from budget_hook.shapes import SHAPES

MARKER = "SECRET-7f3a-PII"


class _Patterns:
    def route(self, name):
        return [{"model_name": "wild/*", "litellm_params": {"model": "openai/x"}}] if name.startswith("wild/") else None


class FakeRouter:
    """What ``proxy.labels`` reads of LiteLLM's router."""

    def __init__(self):
        self.model_name_to_deployment_indices = {"small": [0], "big": [1], "wild/*": [2]}
        self.model_group_alias = {"alias-small": "small"}
        self.team_model_to_deployment_indices = {("team-1", "team-model"): [3]}
        self.pattern_router = _Patterns()

    def get_routing_group(self, name):
        return object() if name == "routed" else None

    def has_model_id(self, name):
        return name == "dep-4k-1"


def plugin(window: int | None = 4000, **settings) -> BudgetHookPlugin:
    instance = BudgetHookPlugin(load_settings({"log_to_stderr": False, "fail_mode": "closed", **settings}))
    source = "test" if window else "unknown"
    instance.model_limits = lambda group: ModelLimits(window, source, group)  # type: ignore[method-assign]
    return instance


def run(instance, data, call_type="acompletion", user=None):
    data.setdefault("litellm_call_id", f"privacy-{id(data)}")
    return asyncio.run(instance.async_pre_call_hook(user or UserAPIKeyAuth(), None, data, call_type))


def logged(instance, data, outcome="failure", exception=None):
    """The JSON log line the success or failure callback writes for ``data``."""
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    proxy_module.logger.addHandler(handler)
    level = proxy_module.logger.level
    proxy_module.logger.setLevel(logging.INFO)
    try:
        kwargs = {"litellm_call_id": data["litellm_call_id"], "exception": exception}
        callback = instance.async_log_success_event if outcome == "success" else instance.async_log_failure_event
        asyncio.run(callback(kwargs, None, None, None))
    finally:
        proxy_module.logger.removeHandler(handler)
        proxy_module.logger.setLevel(level)
    return "\n".join(lines)


def everything(instance, data, error=None) -> str:
    """All the plugin writes about a request: the 400's message and detail, the record in the metadata, the
    log line, the metrics."""
    parts = [json.dumps(data.get("metadata", {}).get("budget_hook")),
             json.dumps(data.get("litellm_metadata", {}).get("budget_hook")),
             logged(instance, data), instance.metrics.render()]
    if error is not None:
        parts += [error.message, json.dumps(error.detail), json.dumps(error.to_dict())]
    return "\n".join(parts)


@pytest.fixture
def router(monkeypatch):
    monkeypatch.setattr(proxy_module, "_router", lambda: FakeRouter())
    return FakeRouter()


# --- roles and other client text in 400s ------------------------------------------------------------------

ROLE_CASES = [
    ("acompletion", {"model": "small", "messages": [{"role": MARKER, "content": "hi"}]}, "messages[0].role"),
    ("acompletion", {"model": "small", "messages": [{"role": MARKER * 40_000, "content": "hi"}]}, "messages[0].role"),
    ("anthropic_messages", {"model": "small", "max_tokens": 10, "messages": [{"role": MARKER, "content": "hi"}]},
     "messages[0].role"),
    ("aresponses", {"model": "small", "input": [{"type": "message", "role": MARKER, "content": "hi"}]},
     "input[0].role"),
]


@pytest.mark.parametrize("call_type, body, field", ROLE_CASES)
def test_an_invalid_role_is_a_400_that_quotes_nothing_the_client_chose(router, call_type, body, field):
    instance = plugin()
    with pytest.raises(BudgetHookHTTPError) as caught:
        run(instance, body, call_type)
    assert caught.value.status_code == 400 and caught.value.param == field
    assert "role" in caught.value.message and len(caught.value.message) < 1000
    assert MARKER not in everything(instance, body, caught.value)


def test_a_gemini_role_nobody_defined_is_recorded_as_other(router):
    contents = []
    for turn in range(12):
        contents += [{"role": f"{MARKER}-{turn}", "parts": [{"text": f"q{turn} " + "lorem ipsum " * 120}]},
                     {"role": "model", "parts": [{"text": f"a{turn} " + "dolor sit " * 120}]}]
    contents.append({"role": "user", "parts": [{"text": "last"}]})
    instance = plugin()
    data = {"model": "small", "contents": contents}
    out = run(instance, data, "agenerate_content")
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed" and {a["role"] for a in record["actions"]} <= {"other", "model"}
    assert MARKER not in everything(instance, out)


@pytest.mark.parametrize("call_type, body", [
    ("acompletion", {"model": "small", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/a.png", "detail": MARKER}}]}]}),
    ("acompletion", {"model": "small", "messages": [{"role": "user", "content": "hi"}],
                     "metadata": {"budget_hook": {"max_input_tokens": MARKER}}}),
    ("acompletion", {"model": "small", "messages": [{"role": "user", "content": "hi"}], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            MARKER: json.loads('{"items": ' * 120 + "{}" + "}" * 120)}}}}]}),
    ("aresponses", {"model": "small", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "x", MARKER: json.loads("[" * 120 + "]" * 120)}]}]}),
    ("acompletion", {"model": "small", "messages": [{"role": "user", "content": "hi"}], "max_tokens": MARKER}),
])
def test_other_client_values_are_described_never_quoted(router, call_type, body):
    instance = plugin()
    with pytest.raises(BudgetHookHTTPError) as caught:
        run(instance, body, call_type)
    assert caught.value.status_code == 400 and caught.value.param
    assert MARKER not in everything(instance, body, caught.value)


def test_client_setting_keys_are_hashed_and_known_ones_named(router):
    instance = plugin()
    data = {"model": "small", "messages": [{"role": "user", "content": "hi"}],
            "metadata": {"budget_hook": {"mode": "off", MARKER: 1, "max_input_tokens": 100}}}
    out = run(instance, data)
    ignored = out["metadata"]["budget_hook"]["ignored_client_settings"]
    assert ignored == ["metadata.budget_hook.mode", f"metadata.budget_hook.(an unknown key, sha256 {id_hash(MARKER)})"]
    assert MARKER not in everything(instance, out)


def test_tool_call_ids_and_unpaired_calls_are_hashed_or_placed(router):
    messages = [{"role": "system", "content": "s"}]
    for turn in range(8):
        call = f"{MARKER}-call-{turn}"
        messages += [{"role": "user", "content": f"q{turn} " + "lorem " * 100},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": call, "type": "function", "function": {"name": f"{MARKER}_tool", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": call, "content": "result " * 200}]
    messages += [{"role": "tool", "tool_call_id": f"{MARKER}-orphan", "content": "x"},
                 {"role": "user", "content": "last"}]
    instance = plugin()
    out = run(instance, {"model": "small", "messages": messages})
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed" and any("tool_call_id_sha256" in a for a in record["actions"])
    assert any("request invalid before trimming" in w for w in record["warnings"])
    assert MARKER not in everything(instance, out)


# --- model names ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, shown, metrics", [
    ("small", None, "small"), ("alias-small", None, "alias-small"), ("routed", None, "routed"),
    ("dep-4k-1", None, "dep-4k-1"), ("wild/gpt-4o", "wild/*", "wild/*"), (f"wild/{MARKER}", "wild/*", "wild/*"),
    (MARKER, UNCONFIGURED, UNCONFIGURED), ("small,big", None, MULTIPLE), ("small, small,small", "small", MULTIPLE),
    (f"small,{MARKER}", f"small,{UNCONFIGURED}", MULTIPLE), ("team-model", UNCONFIGURED, UNCONFIGURED),
])
def test_group_labels_come_from_the_operator_s_configuration(name, shown, metrics):
    assert group_labels(FakeRouter(), name) == (shown, metrics)


def test_group_labels_without_a_router_or_with_a_broken_one():
    assert group_labels(FakeRouter(), "team-model", "team-1") == (None, "team-model")
    assert group_labels(None, MARKER) == (None, UNCONFIGURED)  # the CLI, tests: no configuration to check

    class Broken(FakeRouter):
        def get_routing_group(self, name):
            raise RuntimeError("another LiteLLM")
    assert group_labels(Broken(), MARKER) == (UNCONFIGURED, UNCONFIGURED)


@pytest.mark.parametrize("settings", [{}, {"unknown_window": "block"}])
def test_a_made_up_model_name_reaches_no_record_message_log_or_metric(router, settings):
    instance = plugin(None, **settings)  # an unconfigured name: its window is unknown too
    data = {"model": MARKER, "messages": [{"role": "user", "content": "word " * 9000}]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run(instance, data)
    record = data["metadata"]["budget_hook"]
    assert record["model_group"] == UNCONFIGURED and record["counting_model"] == UNCONFIGURED
    assert "model group 'unconfigured'" in caught.value.message
    assert MARKER not in everything(instance, data, caught.value)
    assert 'model_group="unconfigured"' in instance.metrics.render()


def test_a_wildcard_match_is_named_by_its_pattern(router):
    instance = plugin()
    data = {"model": f"wild/{MARKER}", "messages": [{"role": "user", "content": "hi"}]}
    record = run(instance, data)["metadata"]["budget_hook"]
    assert record["model_group"] == "wild/*" and record["counting_model"] == "wild/*"
    assert record["window_source"] == "not shown"
    assert MARKER not in everything(instance, data)


def test_configured_names_are_shown_as_they_are(router):
    instance = plugin()
    data = {"model": "alias-small", "messages": [{"role": "user", "content": "word " * 9000}]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run(instance, data)
    assert "model group 'alias-small' (counted as alias-small" in caught.value.message
    assert data["metadata"]["budget_hook"]["model_group"] == "alias-small"


def test_two_thousand_made_up_names_cannot_evict_a_real_group_from_the_metrics(router):
    instance = plugin()
    for index in range(MAX_SERIES):
        data = {"model": f"{MARKER}-{index}", "messages": [{"role": "user", "content": "hi"}]}
        run(instance, data)
        logged(instance, data, "success")
    real = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}
    run(instance, real)
    logged(instance, real, "success")
    text = instance.metrics.render()
    assert 'budget_hook_decisions_total{action="pass",model_group="small",outcome="success",team=""} 1' in text
    assert f'model_group="{UNCONFIGURED}",outcome="success",team=""}} {MAX_SERIES}' in text
    assert MARKER not in text and 'model_group="other"' not in text
    assert len([line for line in text.splitlines() if line.startswith("budget_hook_decisions_total{")]) == 2


def test_metrics_label_a_record_by_its_metrics_group():
    metrics = Metrics()
    record = DecisionRecord(action="pass", model_group="wild/gpt-4o", metrics_group="wild/*", tokens_before=3,
                            tokens_after=3)
    metrics.observe(record, "success")
    assert 'model_group="wild/*"' in metrics.render() and "wild/gpt-4o" not in metrics.render()


# --- the helpers ----------------------------------------------------------------------------------------

def test_privacy_helpers():
    assert shown_role("assistant") == "assistant" and shown_role("function_call_output") == "function_call_output"
    assert shown_role(MARKER) == "other" and shown_role(None) == "other"
    action = shown_action({"index": 3, "role": MARKER, "tool_call_id": MARKER, "action": "dropped"})
    assert action == {"index": 3, "role": "other", "tool_call_id_sha256": id_hash(MARKER), "action": "dropped"}
    assert shown_problem(f"messages[4] tool call '{MARKER}' has no tool result") == \
        "messages[4]: a tool call or result without its pair"
    assert shown_problem(f"contents[2]: functionResponse '{MARKER}' answers no functionCall before it").startswith(
        "contents[2]: ")
    assert shown_problem("the first message is not a user message") == "the first message is not a user message"
    assert shown_source(f"model map: {MARKER}") == "model map"
    assert shown_source(f"router: min over 1 deployment(s); {MARKER}: 200000 without the header") == "router"
    assert shown_source(f"unknown for the listed group(s) {MARKER}") == "unknown for a listed group (names not shown)"
    assert shown_source(f"{MARKER} whatever") == "not shown"


def test_the_core_shows_the_adapter_s_name_for_a_hidden_group():
    request = BudgetRequest(SHAPES.get("chat"), {"messages": [{"role": "user", "content": "word " * 9000}]},
                            MARKER, ModelLimits(4000, f"model map: {MARKER}", MARKER), shown_group=UNCONFIGURED,
                            metrics_group=UNCONFIGURED)
    decision = decide(request, load_settings({}))
    record = DecisionRecord.build(decision, request)
    assert decision.action == "blocked" and MARKER not in decision.block.message + json.dumps(decision.block.facts)
    assert MARKER not in json.dumps(record.as_dict()) and record.metrics_group == UNCONFIGURED
    failure = DecisionRecord.failure(model_group=MARKER, error="x", fail_mode="open", request=request)
    assert failure.model_group == UNCONFIGURED and failure.metrics_group == UNCONFIGURED
