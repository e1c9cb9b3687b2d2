"""The proxy adapter, called directly (the end-to-end tests cover the same paths through a real proxy).

Here: what the e2e tests cannot reach cheaply — injected internal faults under both fail modes, unknown
windows, non-chat call types, log records, and that the caller's request is never mutated.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from types import SimpleNamespace

import pytest
from litellm.proxy._types import UserAPIKeyAuth

import budget_hook.pipeline.decider as pipeline_decide
import budget_hook.proxy.hook as proxy_module
import budget_hook.proxy.loglines as loglines
from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.hook import BudgetHookHTTPError, BudgetHookPlugin
from budget_hook.proxy.offload import approximate_size
from budget_hook.trimming.structure import pairing_problems

from .conftest import DATA, as_it_is, conversation_request


def make_plugin(window: int | None = 4000, **settings) -> BudgetHookPlugin:
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False, **settings}))
    source = "test" if window else "unknown"
    plugin.model_limits = lambda group: ModelLimits(window, source, "gpt-4o")  # type: ignore[method-assign]
    return plugin


def run_hook(plugin, data, user=None, call_type="acompletion"):
    data.setdefault("litellm_call_id", f"call-{id(data)}")  # the proxy sets it before the hooks run
    return asyncio.run(plugin.async_pre_call_hook(user or UserAPIKeyAuth(), None, data, call_type))


def decision_headers(plugin, data):
    """The x-budget-* headers of a request, from the plugin's own record of it."""
    return plugin.records.find(data["litellm_call_id"]).headers()


def headers_for(plugin, data):
    return asyncio.run(plugin.async_post_call_response_headers_hook(data, UserAPIKeyAuth(), None))


def long_chat(turns=10, words=120, marker="") -> dict:
    messages = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        messages += [{"role": "user", "content": f"q{turn} " + "lorem ipsum " * words},
                     {"role": "assistant", "content": f"a{turn} " + "dolor sit " * words}]
    messages.append({"role": "user", "content": f"last {marker}"})
    return {"model": "g", "messages": messages, "metadata": {"client": "x"}, "litellm_call_id": f"call-{marker}{turns}"}


def test_fitting_request_is_forwarded_as_it_is_with_the_decision_recorded():
    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "metadata": {"client": "x"}}
    client_metadata = data["metadata"]
    out = run_hook(make_plugin(), data)
    assert as_it_is(out, data) and "retry_policy" not in data
    assert client_metadata == {"client": "x"}, "the client's metadata object is not mutated"
    record = data["metadata"]["budget_hook"]
    assert record["action"] == "pass" and record["window"] == 4000
    assert data["metadata"]["spend_logs_metadata"]["budget_hook"]["action"] == "pass"


def test_over_budget_request_is_replaced_by_a_trimmed_copy():
    data = long_chat()
    original = copy.deepcopy(data)
    plugin = make_plugin()
    out = run_hook(plugin, data)
    assert out is not data and data["messages"] == original["messages"]
    assert len(out["messages"]) < len(data["messages"]) and pairing_problems(out["messages"]) == []
    assert out["metadata"]["budget_hook"]["action"] == "trimmed"
    headers = decision_headers(plugin, out)
    assert headers["x-budget-decision"] == "trimmed" and int(headers["x-budget-dropped-messages"]) > 0


def test_tool_conversation_trimmed_by_the_hook_keeps_pairs():
    data = {**conversation_request(DATA / "conversations/taubench_airline_04.json"), "model": "g"}
    out = run_hook(make_plugin(8000), data)
    assert pairing_problems(out["messages"]) == []
    assert out["metadata"]["budget_hook"]["tokens_after"] <= 6400


def test_block_raises_a_400_http_exception_with_openai_attributes_and_records_it():
    data = {"model": "g", "messages": [{"role": "user", "content": "word " * 6000}]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), data)
    error = caught.value
    assert error.status_code == 400 and error.type == "invalid_request_error" and error.error_code == "context_length_exceeded"
    assert "model group 'g'" in error.message and "maximum context length is 4000 tokens" in error.message
    assert error.detail["budget_hook"]["tokens_before"] > 6000
    assert data["metadata"]["budget_hook"]["action"] == "blocked"  # recorded before raising, for the failure log


def test_shadow_mode_forwards_the_original_and_records_would_trim():
    data = long_chat()
    out = run_hook(make_plugin(mode="shadow"), data)
    assert as_it_is(out, data) and out["messages"] == long_chat()["messages"]
    assert data["metadata"]["budget_hook"]["action"] == "would_trim"
    blocked = {"model": "g", "messages": [{"role": "user", "content": "word " * 6000}]}
    assert as_it_is(run_hook(make_plugin(mode="shadow"), blocked), blocked)
    assert blocked["metadata"]["budget_hook"]["action"] == "would_block"


def test_mode_off_and_other_call_types_are_untouched():
    """Mode off forwards the body as it is (with the gateway's own ``retry_policy``: a fallback may go to a group
    whose mode is not off, ``tests/test_retry_policy.py``); other call types are not even copied."""
    data = long_chat()
    snapshot = copy.deepcopy(data)
    assert as_it_is(run_hook(make_plugin(mode="off"), data), data) and data == snapshot
    for call_type in ("aimage_generation", "acreate_batch", "atranscription", "afile_content"):
        assert run_hook(make_plugin(), data, call_type=call_type) is None and data == snapshot


def test_unknown_window_uses_the_policy_default_with_a_warning_or_blocks():
    data = long_chat(turns=3, words=20)
    out = run_hook(make_plugin(None, default_max_input_tokens=100_000), data)
    record = out["metadata"]["budget_hook"]
    assert record["window"] == 100_000 and "unknown" in record["warnings"][0]
    with pytest.raises(BudgetHookHTTPError, match="context window is unknown"):
        run_hook(make_plugin(None, unknown_window="block"), long_chat(turns=3, words=20))


def test_malformed_request_gets_a_400_naming_the_field():
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), {"model": "g", "messages": [{"role": "user", "content": 42}]})
    assert caught.value.status_code == 400 and caught.value.param == "messages[0].content"
    assert caught.value.error_code == "invalid_request"


@pytest.mark.parametrize("value", ["lots", -5, 0, True, {"n": 1}])
def test_bad_client_cap_gets_a_400(value):
    data = long_chat(turns=1)
    data["metadata"] = {"budget_hook": {"max_input_tokens": value}}
    with pytest.raises(BudgetHookHTTPError, match="metadata.budget_hook.max_input_tokens must be a positive integer"):
        run_hook(make_plugin(), data)


def test_client_metadata_that_is_not_an_object_gets_a_400():
    data = {**long_chat(turns=1), "metadata": {"budget_hook": "off"}}
    with pytest.raises(BudgetHookHTTPError, match="must be an object"):
        run_hook(make_plugin(), data)


def test_team_and_key_from_the_auth_object_apply():
    user = UserAPIKeyAuth(team_id="t-1", team_alias="ml", key_alias="bot",
                          team_metadata={"budget_hook": {"max_input_tokens": 900}})
    out = run_hook(make_plugin(teams={"ml": {"max_input_tokens": 1200}}, match_team_alias=True), long_chat(), user=user)
    record = out["metadata"]["budget_hook"]
    assert record["budget"]["budget"] == 900 and record["team_alias"] == "ml" and record["key_alias"] == "bot"
    assert record["policy_sources"] == ["config", "teams[ml]", "team_metadata"]


def inject_fault(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("injected fault")
    monkeypatch.setattr(pipeline_decide, "decide_conversation", broken)


def test_records_are_bounded_and_failed_ones_expire(monkeypatch):
    plugin = make_plugin()
    plugin.records.in_flight = 5
    for _ in range(20):
        run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    assert len(plugin.records._records) == 5
    call_id = next(iter(plugin.records._records))
    assert log_records(plugin, "failure", {"litellm_call_id": call_id, "exception": ValueError("x")})
    assert call_id not in plugin.records._records and call_id in plugin.records._failed  # headers may still be asked for
    assert headers_for(plugin, {"litellm_call_id": call_id})["x-budget-decision"] == "pass"
    plugin.records.failed_seconds = -1.0
    other = next(iter(plugin.records._records))
    log_records(plugin, "failure", {"litellm_call_id": other, "exception": ValueError("x")})
    assert call_id not in plugin.records._failed  # expired when the next failure arrived


def test_a_long_stream_keeps_its_record_until_its_callback():
    plugin = make_plugin()
    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "long-stream"}
    run_hook(plugin, data)
    for _ in range(50):  # many other requests start and finish meanwhile
        other = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
        run_hook(plugin, other)
        log_records(plugin, "success", {"litellm_call_id": other["litellm_call_id"]})
    [record] = log_records(plugin, "success", {"litellm_call_id": "long-stream"})
    assert record["decision"]["action"] == "pass"


def test_internal_fault_fails_open_by_default(monkeypatch, caplog):
    inject_fault(monkeypatch)
    data = long_chat()
    messages = copy.deepcopy(data["messages"])
    with caplog.at_level(logging.CRITICAL, logger="budget_hook"):
        assert as_it_is(run_hook(make_plugin(), data), data)
    assert data["messages"] == messages  # forwarded untouched
    assert data["metadata"]["budget_hook"]["action"] == "error"
    [critical] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert "injected fault" in critical.getMessage()


def test_internal_fault_fails_closed_with_a_503(monkeypatch):
    inject_fault(monkeypatch)
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(fail_mode="closed"), long_chat())
    assert caught.value.status_code == 503 and "fail closed" in caught.value.message


def test_broken_admin_metadata_is_skipped_and_the_rest_enforced():
    user = UserAPIKeyAuth(metadata={"budget_hook": {"max_input_token": 5}})
    data = long_chat()
    out = run_hook(make_plugin(), data, user=user)
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed"  # not fail-open: enforcement stays on
    assert "key_metadata.budget_hook ignored" in record["warnings"][0] and "max_input_token" in record["warnings"][0]


def test_key_metadata_cannot_switch_enforcement_off_unless_trusted():
    user = UserAPIKeyAuth(key_alias="mine", metadata={"budget_hook": {"mode": "off", "max_input_tokens": 10**6}})
    out = run_hook(make_plugin(max_input_tokens=5000), long_chat(), user=user)
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed"
    assert set(record["ignored_metadata_settings"]) == {"key_metadata.mode", "key_metadata.max_input_tokens"}
    trusted = make_plugin(metadata_policy="trust")
    chat = long_chat()
    assert as_it_is(run_hook(trusted, chat, user=user), chat)  # mode off, set by a trusted admin
    ignored = make_plugin(metadata_policy="ignore")
    user = UserAPIKeyAuth(metadata={"budget_hook": {"max_input_tokens": 900}})
    assert run_hook(ignored, long_chat(), user=user)["metadata"]["budget_hook"]["budget"]["budget"] == 3200


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "9" * 5000, "12.5", " ", "-1"])
def test_odd_client_cap_headers_are_a_400_never_fail_open(value):
    data = {**long_chat(turns=1), "proxy_server_request": {"headers": {"X-Budget-Max-Input-Tokens": value}}}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), data)
    assert caught.value.status_code == 400 and "x-budget-max-input-tokens" in caught.value.message
    assert len(caught.value.message) < 300


def test_client_cap_problems_do_not_block_in_shadow_or_off_mode():
    bad = {"budget_hook": "x"}
    body = {**long_chat(), "metadata": bad}
    assert as_it_is(run_hook(make_plugin(mode="off"), body), body)
    out = run_hook(make_plugin(mode="shadow"), {**long_chat(), "metadata": bad})
    assert "client input ignored in shadow mode" in out["metadata"]["budget_hook"]["warnings"][0]


def test_team_fail_mode_applies_even_when_the_fault_comes_early(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("injected fault")
    monkeypatch.setattr(pipeline_decide, "decide_conversation", broken)
    plugin = make_plugin(teams={"strict": {"fail_mode": "closed"}}, match_team_alias=True)
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(plugin, long_chat(), user=UserAPIKeyAuth(team_alias="strict"))
    assert caught.value.status_code == 503


def test_a_forged_record_in_client_metadata_never_reaches_headers_or_logs():
    plugin = make_plugin()
    forged = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "forged-1",
              "litellm_metadata": {"budget_hook": {"action": "pass", "tokens_before": 1}}}
    assert run_hook(plugin, forged, call_type="aimage_generation") is None  # not budgeted: no record
    assert headers_for(plugin, forged) is None
    kwargs = {"litellm_call_id": "forged-1", "litellm_params": {"litellm_metadata": forged["litellm_metadata"]}}
    assert log_records(plugin, "success", kwargs) == []


def test_a_higher_client_cap_is_recorded_as_not_applied():
    data = {**long_chat(), "metadata": {"budget_hook": {"max_input_tokens": 999_999, "mode": "off"}}}
    record = run_hook(make_plugin(max_input_tokens=3000), data)["metadata"]["budget_hook"]
    assert record["client_max_input_tokens"] == 999_999 and record["client_cap_applied"] is False
    assert record["budget"]["budget"] == 3000
    assert record["ignored_client_settings"] == ["metadata.budget_hook.mode"]


def test_model_override_applies_through_a_router_alias():
    plugin = make_plugin(models={"big": {"max_input_tokens": 1000}})
    plugin.model_limits = lambda group: ModelLimits(4000, "test", "gpt-4o", routed_groups=("big",))
    record = run_hook(plugin, {**long_chat(), "model": "big-alias"})["metadata"]["budget_hook"]
    assert record["budget"]["budget"] == 1000 and "models[big]" in record["policy_sources"]


def test_unknown_window_block_is_not_called_a_context_overflow():
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(None, unknown_window="block"), long_chat(turns=1))
    assert caught.value.error_code == "model_window_unknown" and "context_length_exceeded" not in caught.value.message


def log_records(plugin, outcome, kwargs, response=None):
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(json.loads(record.getMessage()))
    proxy_module.logger.addHandler(handler)
    old_level = proxy_module.logger.level
    proxy_module.logger.setLevel(logging.INFO)
    try:
        method = plugin.async_log_success_event if outcome == "success" else plugin.async_log_failure_event
        asyncio.run(method(kwargs, response, None, None))
    finally:
        proxy_module.logger.removeHandler(handler)
        proxy_module.logger.setLevel(old_level)
    return records


class _Usage:
    prompt_tokens = 1234


class _Response:
    usage = _Usage()


def test_success_and_failure_callbacks_emit_one_json_record_each():
    plugin = make_plugin()
    data = long_chat()
    out = run_hook(plugin, data)
    call_id = data["litellm_call_id"]
    assert headers_for(plugin, data)["x-budget-decision"] == "trimmed"
    # /v1/messages and /v1/responses failures carry metadata under litellm_metadata; the plugin reads its
    # own record by call id either way.
    failure_kwargs = {"litellm_call_id": call_id, "exception": ValueError("upstream said no"),
                      "litellm_params": {"litellm_metadata": out["metadata"]}}
    [failure] = log_records(plugin, "failure", failure_kwargs)
    # a provider's message can quote the prompt: by default only its class, status and a hash are logged
    assert failure["outcome"] == "failure" and failure["error"].startswith("ValueError (status None; message sha256 ")
    assert "upstream said no" not in json.dumps(failure)
    kwargs = {"litellm_call_id": call_id, "litellm_params": {"metadata": out["metadata"]}}
    [success] = log_records(plugin, "success", kwargs, _Response())  # a retry succeeded
    assert success["event"] == "budget_hook.decision" and success["call_id"] == call_id
    assert success["provider_prompt_tokens"] == 1234
    assert success["estimated_prompt_tokens"] == out["metadata"]["budget_hook"]["tokens_after"]
    assert success["decision"]["dropped_turns"]

    # after the final success the record is released; a request the plugin did not see produces none
    assert log_records(plugin, "success", kwargs, _Response()) == []
    assert log_records(plugin, "success", {"litellm_call_id": "other", "litellm_params": {"metadata": {}}}) == []


def test_dropped_content_is_logged_only_when_asked():
    out = run_hook(make_plugin(log_dropped_content=True), long_chat())
    content = out["metadata"]["budget_hook"]["dropped_content"]
    # the first question and its answer are opening context and its turn's last step: turn 2 goes first
    assert content and content[0]["content"].startswith("q1 lorem")
    assert "dropped_content" not in out["metadata"]["spend_logs_metadata"]["budget_hook"]
    default = run_hook(make_plugin(), long_chat())
    assert "dropped_content" not in default["metadata"]["budget_hook"]


def test_hooks_are_defined_on_the_class_itself():
    # The proxy calls these only when they are in vars(type(callback)); an inherited one is skipped silently.
    for name in ("async_pre_call_hook", "async_post_call_response_headers_hook", "async_log_success_event",
                 "async_log_failure_event"):
        assert name in vars(BudgetHookPlugin), name


def test_model_limits_fall_back_to_the_model_map_outside_a_router():
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))
    limits = plugin.model_limits("gpt-4o")
    assert limits.window == 128_000 and limits.source == "model map: gpt-4o"
    unknown = plugin.model_limits("no-such-model-xyz")
    assert unknown.window is None


def anthropic_body(turns=8, words=150):
    messages = []
    for turn in range(turns):
        messages += [{"role": "user", "content": [{"type": "text", "text": f"q{turn} " + "lorem ipsum " * words}]},
                     {"role": "assistant", "content": [{"type": "text", "text": f"a{turn} " + "dolor sit " * words}]}]
    messages.append({"role": "user", "content": "last"})
    return {"model": "g", "max_tokens": 500, "messages": messages, "litellm_metadata": {"client": "x"}}


def claude_plugin(window=4000, **settings):
    plugin = make_plugin(window, **settings)
    plugin.model_limits = lambda group: ModelLimits(window, "test", "anthropic/claude-sonnet-4-5")
    return plugin


def test_anthropic_messages_are_trimmed_natively_and_recorded_under_litellm_metadata():
    data = anthropic_body()
    out = run_hook(claude_plugin(), data, call_type="anthropic_messages")
    assert out is not data and out["messages"][0]["role"] == "user" and out["messages"][-1] == data["messages"][-1]
    assert all(isinstance(m["content"], (str, list)) and "role" in m for m in out["messages"])
    record = out["litellm_metadata"]["budget_hook"]
    assert record["action"] == "trimmed" and record["counting_model"] == "anthropic/claude-sonnet-4-5"
    assert "metadata" not in out  # the right key for this call type
    assert out["litellm_metadata"]["spend_logs_metadata"]["budget_hook"]["action"] == "trimmed"


def test_anthropic_block_uses_anthropic_wording():
    data = {"model": "g", "max_tokens": 500, "messages": [{"role": "user", "content": "word " * 6000}]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(claude_plugin(), data, call_type="anthropic_messages")
    assert caught.value.message.startswith("prompt is too long: ")
    assert "tokens > 3300 maximum" in caught.value.message and "context_length_exceeded" in caught.value.message


def test_responses_are_trimmed_natively():
    items = []
    for turn in range(8):
        items += [{"role": "user", "content": f"q{turn} " + "lorem ipsum " * 150},
                  {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "dolor " * 150}]}]
    items.append({"role": "user", "content": "last"})
    data = {"model": "g", "input": items, "instructions": "be brief", "max_output_tokens": 300}
    out = run_hook(make_plugin(), data, call_type="aresponses")
    assert out["input"][-1] == items[-1] and len(out["input"]) < len(items) and out["instructions"] == "be brief"
    assert out["litellm_metadata"]["budget_hook"]["action"] == "trimmed"


def test_embedding_input_over_the_limit_is_a_400_naming_the_input():
    plugin = make_plugin(8191)
    plugin.model_limits = lambda group: ModelLimits(8191, "test", "text-embedding-3-small")
    data = {"model": "emb", "input": ["short", "word " * 9000]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(plugin, data, call_type="aembedding")
    assert "input[1] has 9001 tokens, 810 over the limit of 8191" in caught.value.message
    assert caught.value.param == "input"
    ok = run_hook(plugin, {"model": "emb", "input": "short"}, call_type="aembedding")
    assert ok["metadata"]["budget_hook"]["action"] == "pass"


def test_embedding_truncation_only_when_the_policy_asks():
    plugin = make_plugin(8191, truncate_embedding_inputs=True)
    plugin.model_limits = lambda group: ModelLimits(8191, "test", "text-embedding-3-small")
    out = run_hook(plugin, {"model": "emb", "input": ["short", "word " * 9000]}, call_type="aembedding")
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed" and record["inputs"]["truncated"] == [1]
    assert record["tokens_before"] == 9002 and record["tokens_after"] == 8192
    assert out["input"][0] == "short" and len(out["input"][1]) < len("word " * 9000)


def test_completion_prompt_counts_against_window_minus_reserve():
    plugin = make_plugin(4000)
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(plugin, {"model": "g", "prompt": ["fine", "word " * 3800], "max_tokens": 100},
                 call_type="atext_completion")
    assert "prompt[1] has 3801 tokens, 101 over the limit of 3700" in caught.value.message and "output reserve 100" in caught.value.message
    assert run_hook(plugin, {"model": "g", "prompt": "hello"}, call_type="atext_completion")["metadata"]["budget_hook"]["action"] == "pass"


def test_drop_old_images_through_the_hook_counts_as_edited():
    png = load_png()
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"},
                                             {"type": "image_url", "image_url": {"url": png, "detail": "high"}}]}]
    for turn in range(3):
        messages += [{"role": "assistant", "content": f"answer {turn}"},
                     {"role": "user", "content": [{"type": "text", "text": f"and {turn}?"},
                                                  {"type": "image_url", "image_url": {"url": png, "detail": "high"}}]}]
    plugin = make_plugin(2200, drop_old_images=True, keep_opening_context=False)
    out = run_hook(plugin, {"model": "g", "messages": messages})
    record = out["metadata"]["budget_hook"]
    assert record["counts"]["images_removed"] >= 1 and record["action"] == "trimmed"
    assert int(decision_headers(plugin, out)["x-budget-edited-messages"]) == record["counts"]["images_removed"]


def load_png() -> str:
    import base64
    import struct
    import zlib
    width, height = 1024, 1024
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 10)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def test_large_requests_are_decided_off_the_event_loop_on_any_loop(monkeypatch):
    import threading
    seen = []
    original = proxy_module.decide

    def recording(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return original(*args, **kwargs)
    monkeypatch.setattr(proxy_module, "decide", recording)
    plugin = make_plugin(1_000_000, counting_threads=1, offload_chars=1000)

    async def batch(tag):
        bodies = [{"model": "g", "messages": [{"role": "user", "content": f"{tag} {i} " + "word " * 500}],
                   "litellm_call_id": f"{tag}-{i}"} for i in range(8)]
        await asyncio.gather(*(plugin.async_pre_call_hook(UserAPIKeyAuth(), None, b, "acompletion") for b in bodies))
        return bodies
    for tag in ("first", "second"):  # a second event loop must not trip over the first one's semaphore
        for body in asyncio.run(batch(tag)):
            assert body["metadata"]["budget_hook"]["action"] == "pass"
    assert len(seen) == 16 and all(name.startswith("budget_hook") for name in seen)
    small = run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    assert small["metadata"]["budget_hook"]["action"] == "pass" and seen[-1] == "MainThread"


@pytest.mark.parametrize("body", [
    {"system": [{"type": "text", "text": "x" * 5000}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "x" * 5000}]}]}]},
    {"tools": [{"name": "t", "description": "x" * 5000}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "x" * 5000}}]}]},
    {"input": [{"type": "function_call", "arguments": "x" * 5000}]},
    {"input": [{"type": "function_call_output", "content": None, "output": "x" * 5000}]},
    {"input": [[1] * 5000]},
])
def test_every_place_text_can_hide_counts_towards_the_offload_size(body):
    assert approximate_size(body, 4000) >= 4000


def test_approximate_size_ignores_metadata_and_stops_early():
    assert approximate_size({"metadata": {"x": "y" * 10_000}, "messages": []}, 100) == 0
    assert 100 <= approximate_size({"messages": [{"content": "x" * 50}] * 1000}, 100) < 1000  # stopped early


def test_dropped_content_of_native_shapes_is_their_real_text():
    """With log_dropped_content, /v1/messages and /v1/responses records carry the text of what left, from
    the native blocks and items (it used to be empty for /v1/messages)."""
    anthropic = anthropic_body()
    out = run_hook(claude_plugin(log_dropped_content=True), anthropic, call_type="anthropic_messages")
    content = out["litellm_metadata"]["budget_hook"]["dropped_content"]
    assert content and all(entry["content"] for entry in content)
    assert content[0]["content"].startswith("q1 lorem")  # turn 1 (opening context, its answer) stays
    assert "dropped_content" not in out["litellm_metadata"]["spend_logs_metadata"]["budget_hook"]
    items = [{"role": "user", "content": "q0 " + "lorem ipsum " * 300},
             {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "r0 " + "dolor " * 300},
             {"role": "user", "content": "last"}]
    out = run_hook(make_plugin(800, log_dropped_content=True, keep_opening_context=False), {"model": "g", "input": items},
                   call_type="aresponses")
    texts = [entry["content"] for entry in out["litellm_metadata"]["budget_hook"]["dropped_content"]]
    assert any(t.startswith("q0 lorem") for t in texts) and any(t.startswith("r0 dolor") for t in texts)


def test_responses_blocks_name_the_responses_fields():
    data = {"model": "g", "input": "word " * 6000}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), data, call_type="aresponses")
    assert caught.value.param == "input" and caught.value.error_code == "context_length_exceeded"
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), {"model": "g", "input": "hi", "max_output_tokens": 3990}, call_type="aresponses")
    assert caught.value.param == "max_output_tokens"


def test_the_plugin_listed_twice_decides_once():
    """LiteLLM runs every callbacks entry; a second pass over an already trimmed body used to overwrite the
    record (headers said pass for a request trimmed from 6k)."""
    plugin = make_plugin()
    data = long_chat()
    out = run_hook(plugin, data)
    assert out["metadata"]["budget_hook"]["action"] == "trimmed"
    assert run_hook(plugin, out) is None  # the second entry: nothing to do
    assert decision_headers(plugin, out)["x-budget-decision"] == "trimmed"
    # the same call id on a new body (a client may send x-litellm-call-id) is decided again, not skipped
    again = {**long_chat(), "litellm_call_id": out["litellm_call_id"]}
    forged = {**again, "metadata": {"budget_hook": dict(out["metadata"]["budget_hook"])}}
    assert run_hook(plugin, forged)["metadata"]["budget_hook"]["action"] == "trimmed"
    assert run_hook(plugin, again)["metadata"]["budget_hook"]["action"] == "trimmed"


def test_provider_error_text_is_logged_only_with_content_logging():
    secret = "invalid image URL https://x/ssn=123-45-6789"
    for settings, shown in (({}, False), ({"log_dropped_content": True}, True)):
        plugin = make_plugin(**settings)
        data = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
        run_hook(plugin, data)
        [failure] = log_records(plugin, "failure", {"litellm_call_id": data["litellm_call_id"],
                                                    "exception": ValueError(secret)})
        assert (secret in json.dumps(failure)) is shown
        assert failure["error"].startswith("ValueError (status None; message sha256 ")


def test_records_and_log_lines_are_bounded_whatever_the_client_sends(monkeypatch):
    plugin = make_plugin(4000)
    messages = []
    for turn in range(600):
        messages += [{"role": "user", "content": f"q{turn} " + "lorem " * 20},
                     {"role": "assistant", "content": f"a{turn} " + "ipsum " * 20}]
    junk = {f"junk-{i}-" + "x" * 200: i for i in range(2000)}
    data = {"model": "g", "messages": [*messages, {"role": "user", "content": "last"}],
            "metadata": {"budget_hook": junk}}
    out = run_hook(plugin, data)
    record = out["metadata"]["budget_hook"]
    assert record["counts"]["dropped"] > 1000 and len(record["actions"]) == 100
    assert record["actions_omitted"] == record["counts"]["dropped"] - 100
    ignored = record["ignored_client_settings"]
    assert len(ignored) == 11 and ignored[-1] == "... and 1990 more keys" and max(map(len, ignored)) < 100
    assert len(json.dumps(record)) < 40_000 and len(json.dumps(out["metadata"]["spend_logs_metadata"])) < 40_000
    [line] = log_records(plugin, "success", {"litellm_call_id": data["litellm_call_id"]})
    assert len(json.dumps(line)) < 64 * 1024
    monkeypatch.setattr(loglines, "MAX_LOG_LINE_CHARS", 2_000)
    run_hook(plugin, data := {**data, "litellm_call_id": "big"})
    [line] = log_records(plugin, "success", {"litellm_call_id": "big"})
    assert len(json.dumps(line)) < 2_000 and "truncated" in json.dumps(line)


def test_failed_records_are_purged_on_a_timer_without_further_traffic():
    plugin = make_plugin()
    plugin.records.failed_seconds = 0.05

    async def scenario():
        data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "quiet"}
        await plugin.async_pre_call_hook(UserAPIKeyAuth(), None, data, "acompletion")
        await plugin.async_log_failure_event({"litellm_call_id": "quiet", "exception": ValueError("x")}, None, None, None)
        assert plugin.records.find("quiet") is not None
        await asyncio.sleep(1.3)
        return plugin.records.find("quiet")

    assert asyncio.run(scenario()) is None


def attempt_kwargs(body, group, deployment_id="dep-1"):
    """What the router hands the deployment hook: the body, plus which deployment this attempt goes to."""
    return {**body, "model": f"openai/{group}-backend", "api_key": "secret",
            "metadata": {**body.get("metadata", {}), "model_info": {"id": deployment_id},
                         "deployment_model_name": group}}


@pytest.mark.parametrize(("call_type", "translated"), [
    ("acompletion", {"messages": [{"role": "user", "content": "word " * 8000}]}),
    ("aresponses", {"input": [{"role": "user", "content": "word " * 8000}]}),
])
def test_an_attempt_in_another_format_than_the_first_decision_is_decided_again(call_type, translated):
    """A review: ``/v1/messages`` reaches an OpenAI deployment as a chat or Responses call (and Gemini's
    generateContent as an inner completion); the decision kept no content for the attempt's fields, and the
    comparison raised (a 503 under ``fail_mode: closed``, an unchecked attempt under ``open``). Decided again: an
    8,000-token attempt on a 4k fallback is refused with the window's error."""
    plugin = claude_plugin(200_000, fail_mode="closed")
    plugin.deployment_windows.lookup = lambda key: ModelLimits(4000, "test", "gpt-4o")
    body = {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": "word " * 8000}]}
    out = run_hook(plugin, body, call_type="anthropic_messages")
    out = out if isinstance(out, dict) else body
    attempt = {**translated, "max_tokens": 50, "litellm_call_id": body["litellm_call_id"], "model": "openai/small",
               "metadata": {**out.get("litellm_metadata", {}), "model_info": {"id": "dep-small"},
                            "deployment_model_name": "small"}, "litellm_metadata": out.get("litellm_metadata")}
    with pytest.raises(Exception) as caught:
        asyncio.run(plugin.async_pre_call_deployment_hook(attempt, call_type))
    assert "budget_hook blocked this request" in str(caught.value) and "internal" not in str(caught.value)


def test_template_variables_a_fallback_entry_adds_to_its_attempt_are_decided_again():
    """A review: LiteLLM merges a client's ``fallbacks`` entry into the fallback call, so a template variable
    there (Llama 3.1's ``custom_tools``, a top-level ``documents``) reached the deployment with no decision
    counting it (12,957 tokens into a 4k window). Every field a chat template reads is compared on the attempt."""
    plugin = make_plugin(4000)
    plugin.deployment_windows.lookup = lambda key: ModelLimits(4000, "test", "gpt-4o")
    out = run_hook(plugin, long_chat(turns=2))
    call_id = out["litellm_call_id"]
    assert asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(out, "g"), "acompletion")) is None
    assert plugin.records.find(call_id).decided_again == 0
    for added in ({"chat_template_kwargs": {"custom_tools": [{"name": "t" * 900}]}},
                  {"documents": [{"text": "word " * 100}]}, {"extra_body": {"documents": [{"text": "w"}]}}):
        asyncio.run(plugin.async_pre_call_deployment_hook({**attempt_kwargs(out, "g"), **added}, "acompletion"))
    assert plugin.records.find(call_id).decided_again == 3


def test_an_attempt_on_the_deployment_the_first_decision_assumed_reuses_it():
    plugin = make_plugin(4000)
    plugin.deployment_windows.lookup = lambda key: ModelLimits(4000, "test", "gpt-4o")
    out = run_hook(plugin, long_chat())
    assert asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(out, "g"), "acompletion")) is None
    assert "attempts" not in plugin.records.find(out["litellm_call_id"]).as_dict()


def test_a_fallback_to_a_smaller_deployment_is_trimmed_again_or_refused():
    import litellm

    plugin = make_plugin(8000)
    plugin.deployment_windows.lookup = lambda key: ModelLimits(2000, "test", "gpt-4o")
    body = long_chat(turns=6, words=60)
    out = run_hook(plugin, body)
    assert out["metadata"]["budget_hook"]["action"] == "pass"  # fits the group the client named
    kwargs = attempt_kwargs(out, "small")
    trimmed = asyncio.run(plugin.async_pre_call_deployment_hook(kwargs, "acompletion"))
    assert trimmed is not None and trimmed["api_key"] == "secret" and trimmed["model"] == kwargs["model"]
    assert len(trimmed["messages"]) < len(kwargs["messages"]) and pairing_problems(trimmed["messages"]) == []
    assert TokenCounter.for_model("gpt-4o").count_request(trimmed).total <= 2000 - 500 - 100
    [attempt] = plugin.records.find(out["litellm_call_id"]).attempts
    assert attempt["model_group"] == "small" and attempt["window"] == 2000 and attempt["action"] == "trimmed"
    # a last message that cannot fit the fallback's window is refused with a context-window error
    plugin.deployment_windows = type(plugin.deployment_windows)(lambda key: ModelLimits(600, "test", "gpt-4o"))
    big = run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "word " * 1000}]})
    with pytest.raises(litellm.ContextWindowExceededError, match="maximum context length is 600 tokens"):
        asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(big, "tiny"), "acompletion"))


def test_an_inner_call_without_the_routers_metadata_is_decided_under_the_first_decisions_limits():
    """LiteLLM's generateContent adapter makes its inner completion without the router's metadata (no
    deployment named): what it carries is decided again under the limits of the call it belongs to, never
    forwarded unchecked (its translation of the body may differ from what was counted)."""
    import litellm

    plugin = make_plugin(4000)
    out = run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    inner = {"model": "openai/g-backend", "litellm_call_id": "inner-1", "model_info": {"id": "dep-9"},
             "metadata": {"budget_hook": out["metadata"]["budget_hook"]},
             "messages": [{"role": "user", "content": "word " * 6000}]}
    with pytest.raises(litellm.ContextWindowExceededError, match="maximum context length is 4000 tokens"):
        asyncio.run(plugin.async_pre_call_deployment_hook(inner, "acompletion"))
    fits = {**inner, "litellm_call_id": "inner-2", "messages": [{"role": "user", "content": "word " * 100}]}
    assert asyncio.run(plugin.async_pre_call_deployment_hook(fits, "acompletion")) is None


def test_a_prompt_parameter_reaching_an_attempt_is_refused_unless_its_deployment_sets_it(monkeypatch):
    """A review of the prompt-parameter check: a client's ``litellm_system_prompt`` in a fallback target of the
    router's own format (``fallbacks: [{"big": [{"model": "small", ...}]}]``), or in ``router_settings_override``,
    is merged into the attempt by the router, past the pre-call check; the attempt refuses it. The same parameter
    with the value the operator set on the deployment is the operator's, decided or not."""
    from budget_hook.proxy import hook

    router = type("Router", (), {"default_litellm_params": {"roles": {"user": {"pre_message": "u"}}}, "model_list": [
        {"model_name": "g", "model_info": {"id": "dep-op"}, "litellm_params": {
            "model": "openai/x", "ensure_alternating_roles": True, "litellm_system_prompt": "Be brief.",
            "chat_template_kwargs": {"bos_token": "<s>"}}}]})()
    monkeypatch.setattr(hook, "_router", lambda: router)
    plugin = make_plugin(4000)
    out = run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    client = {**attempt_kwargs(out, "small"), "litellm_system_prompt": "word " * 6000}
    with pytest.raises(BudgetHookHTTPError) as caught:
        asyncio.run(plugin.async_pre_call_deployment_hook(client, "acompletion"))
    assert caught.value.status_code == 400 and caught.value.param == "litellm_system_prompt"
    special = {**attempt_kwargs(out, "small"), "chat_template_kwargs": {"bos_token": "word " * 6000}}
    with pytest.raises(BudgetHookHTTPError) as caught:  # a template's special token, merged from a fallback target
        asyncio.run(plugin.async_pre_call_deployment_hook(special, "acompletion"))
    assert caught.value.status_code == 400 and caught.value.param == "chat_template_kwargs.bos_token"
    assert "special token" in caught.value.message
    operator = {**attempt_kwargs(out, "g", "dep-op"), "ensure_alternating_roles": True, "litellm_system_prompt": "Be brief.",
                "roles": {"user": {"pre_message": "u"}},  # the router's default_litellm_params are the operator's too
                "chat_template_kwargs": {"bos_token": "<s>"}}
    with pytest.raises(BudgetHookHTTPError) as caught:  # each special token compared, not the first one found
        asyncio.run(plugin.async_pre_call_deployment_hook(
            {**operator, "chat_template_kwargs": {"bos_token": "<s>", "eos_token": "word " * 6000}}, "acompletion"))
    assert caught.value.param == "chat_template_kwargs.eos_token"
    assert asyncio.run(plugin.async_pre_call_deployment_hook(operator, "acompletion")) is None
    # an attempt no pre-call decision covers (decided with the router's kwargs): the operator's pass, a client's not
    undecided = {**operator, "litellm_call_id": "never-decided", "metadata": {**operator["metadata"], "model_group": "g"}}
    assert asyncio.run(plugin.async_pre_call_deployment_hook(undecided, "acompletion")) is None
    with pytest.raises(BudgetHookHTTPError):
        asyncio.run(plugin.async_pre_call_deployment_hook({**undecided, "litellm_call_id": "never-2",
                                                           "litellm_system_prompt": "other"}, "acompletion"))


def test_a_call_again_dict_reaching_an_attempt_is_refused_unless_its_deployment_sets_it(monkeypatch):
    """``context_window_fallback_dict`` merged into an attempt from a fallback target in the router's format: LiteLLM
    1.103 would send the refused call again to its model without the hooks. The deployment's own is the operator's."""
    from budget_hook.proxy import hook

    own = {"groq/x": "groq/x-large"}
    router = type("Router", (), {"default_litellm_params": {}, "model_list": [
        {"model_name": "g", "model_info": {"id": "dep-op"}, "litellm_params": {
            "model": "openai/x", "context_window_fallback_dict": own}}]})()
    monkeypatch.setattr(hook, "_router", lambda: router)
    plugin = make_plugin(4000)
    out = run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    client = {**attempt_kwargs(out, "small"), "context_window_fallback_dict": {"openai/x": "openai/y"}}
    routed = {**client, "metadata": {**client["metadata"], "model_group": "g"}}
    with pytest.raises(BudgetHookHTTPError) as caught:  # a router attempt: the router handles what follows
        asyncio.run(plugin.async_pre_call_deployment_hook(routed, "acompletion"))
    assert caught.value.status_code == 400 and caught.value.param == "context_window_fallback_dict"
    assert "context_window_fallbacks" in caught.value.message
    # no model_group: LiteLLM 1.103 would call again with the dict, so the refusal travels in the kwargs
    bomb = asyncio.run(plugin.async_pre_call_deployment_hook(client, "acompletion"))["mock_response"]
    assert isinstance(bomb, BudgetHookHTTPError) and bomb.param == "context_window_fallback_dict"
    operator = {**attempt_kwargs(out, "g", "dep-op"), "context_window_fallback_dict": own}
    assert asyncio.run(plugin.async_pre_call_deployment_hook(operator, "acompletion")) is None


def test_a_refused_inner_completion_litellm_would_call_again_raises_on_every_call():
    """LiteLLM 1.103 answers the refusal of a completion whose ``metadata`` names no ``model_group`` (its bridges'
    inner call) by calling the unwrapped function again with the same kwargs, for the operator's ``num_retries`` (a
    review: a refused 12,014-token body reached an 8,000-token window twice) or a ``context_window_fallback_dict``:
    those kwargs carry the refusal as LiteLLM's ``mock_response``, which it raises before sending anything. Elsewhere
    the refusal is raised as before."""
    import litellm

    from budget_hook.proxy.attempts import lasting_refusal

    refusal = litellm.ContextWindowExceededError(message="budget_hook blocked", model="m", llm_provider="budget_hook")
    inner = {"model": "groq/x", "messages": [], "litellm_metadata": {"model_group": "g"}}
    assert lasting_refusal(inner, "acompletion", refusal, retries=2)["mock_response"] is refusal
    assert lasting_refusal({**inner, "num_retries": 1}, "acompletion", refusal, retries=None)["mock_response"] is refusal
    assert lasting_refusal({**inner, "context_window_fallback_dict": {"groq/x": "groq/y"}}, "acompletion", refusal,
                           retries=None)["mock_response"] is refusal
    for kwargs, call_type, retries in (
            (inner, "acompletion", None),  # nothing calls it again
            ({**inner, "num_retries": 0}, "acompletion", 2),  # the call's own 0 wins
            ({**inner, "metadata": {"model_group": "g"}}, "acompletion", 2),  # a router call: the router retries
            (inner, "aresponses", 2)):
        with pytest.raises(litellm.ContextWindowExceededError):
            lasting_refusal(kwargs, call_type, refusal, retries=retries)
    with pytest.raises(litellm.ContextWindowExceededError):  # LiteLLM raises it for every call of those kwargs
        asyncio.run(litellm.acompletion(**lasting_refusal(inner, "acompletion", refusal, retries=2)))


def test_a_refused_responses_call_litellm_will_send_again_is_said(caplog):
    """A Responses call has no exception ``mock_response``: LiteLLM 1.103 re-sends a refused router attempt of it (its
    router keeps ``model_group`` in ``litellm_metadata``, its wrapper reads ``metadata``) for a deployment's
    ``num_retries``, without the hooks (a fallback's 12,011 tokens reached an 8,000-token deployment twice). Raised,
    and said; not where LiteLLM's own test (1.108's) finds a router call."""
    import litellm

    from budget_hook.proxy.attempts import lasting_refusal

    refusal = litellm.ContextWindowExceededError(message="budget_hook blocked", model="m", llm_provider="budget_hook")
    attempt = {"model": "openai/x", "input": "hi", "litellm_metadata": {"model_group": "small"}, "num_retries": 2}
    with caplog.at_level("WARNING", logger="budget_hook"), pytest.raises(litellm.ContextWindowExceededError):
        lasting_refusal(attempt, "aresponses", refusal, retries=None)
    assert "router_settings" in caplog.text and "num_retries=2" in caplog.text
    caplog.clear()

    def reads_both(kwargs, *, is_async):  # LiteLLM 1.108's own test: it sends neither call again
        return any(isinstance(kwargs.get(k), dict) and "model_group" in kwargs[k] for k in ("metadata", "litellm_metadata"))
    inner = {"model": "groq/x", "messages": [], "litellm_metadata": {"model_group": "g"}, "num_retries": 2}
    with caplog.at_level("WARNING", logger="budget_hook"):
        for kwargs, call_type in ((attempt, "aresponses"), (inner, "acompletion")):
            with pytest.raises(litellm.ContextWindowExceededError):
                lasting_refusal(kwargs, call_type, refusal, retries=2, router_call=reads_both)
    assert "router_settings" not in caplog.text


def test_attempts_the_plugin_did_not_decide_are_left_alone():
    plugin = make_plugin()
    kwargs = attempt_kwargs({"messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "unknown"}, "g")
    assert asyncio.run(plugin.async_pre_call_deployment_hook(kwargs, "acompletion")) is None
    out = run_hook(plugin, long_chat())
    assert asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(out, "g"), "aimage_generation")) is None


def test_a_trimmed_body_carries_the_metadata_attached_to_the_request():
    out = run_hook(make_plugin(), long_chat())
    assert out["metadata"]["spend_logs_metadata"]["budget_hook"]["action"] == "trimmed"
    assert out["metadata"]["client"] == "x"


def test_routes_that_reach_a_model_in_an_unread_format_are_refused_unless_the_operator_passes_them():
    body = {"model": "g", "input": "word " * 30_000}
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), dict(body), call_type="acreate_interaction")
    assert caught.value.status_code == 400 and caught.value.error_code == "route_not_budgeted"
    assert "acreate_interaction" in caught.value.message
    assert run_hook(make_plugin(unknown_routes="pass"), dict(body), call_type="acreate_interaction") is None
    for call_type in ("aimage_generation", "atranscription", "afile_content"):  # no model window involved
        assert run_hook(make_plugin(), dict(body), call_type=call_type) is None


def test_a_pass_through_body_in_a_known_format_is_budgeted_as_that_format():
    """Against the window of the model the provider serves (the model map's; here unknown: the default), never the
    router's group of the same name (``make_plugin``'s 4,000 would not trim this at 6,000)."""
    data = {**long_chat(), "model": "g"}
    out = run_hook(make_plugin(window=100_000, default_max_input_tokens=3000), data, call_type="pass_through_endpoint")
    assert out["metadata"]["budget_hook"]["action"] == "trimmed"
    assert out["metadata"]["budget_hook"]["budget"]["window"] == 3000
    assert run_hook(make_plugin(), {"model": "g", "batch": [1, 2]}, call_type="pass_through_endpoint") is None


def test_gemini_generate_content_is_trimmed_natively():
    contents = []
    for turn in range(8):
        contents += [{"role": "user", "parts": [{"text": f"q{turn} " + "lorem ipsum " * 150}]},
                     {"role": "model", "parts": [{"text": f"a{turn} " + "dolor sit " * 150}]}]
    contents.append({"role": "user", "parts": [{"text": "last"}]})
    data = {"model": "g", "contents": contents, "systemInstruction": {"parts": [{"text": "be brief"}]},
            "generationConfig": {"maxOutputTokens": 300}}
    out = run_hook(make_plugin(), data, call_type="agenerate_content")
    assert out["contents"][-1] == contents[-1] and len(out["contents"]) < len(contents)
    assert out["contents"][0]["role"] == "user" and out["systemInstruction"] == data["systemInstruction"]
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed" and record["budget"]["output_reserve"] == 300
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(make_plugin(), {"model": "g", "contents": [{"role": "user", "parts": [{"text": "word " * 6000}]}]},
                 call_type="agenerate_content")
    assert caught.value.message.startswith("The input token count (") and caught.value.param == "contents"


def test_nothing_of_a_refused_or_failed_request_is_kept_beyond_its_time():
    """A blocked request makes no attempt: nothing of it is kept for later; a failed one only until its
    records expire (a fallback comes within seconds). The load test found 212 MiB kept otherwise."""
    plugin = make_plugin()
    plugin.records.failed_seconds = 0.05
    with pytest.raises(BudgetHookHTTPError):
        run_hook(plugin, {"model": "g", "messages": [{"role": "user", "content": "word " * 6000}],
                          "litellm_call_id": "refused"})
    assert plugin.records.decided("refused") is None

    async def scenario():
        data = {**long_chat(), "litellm_call_id": "failing"}
        await plugin.async_pre_call_hook(UserAPIKeyAuth(), None, data, "acompletion")
        assert plugin.records.decided("failing") is not None
        await plugin.async_log_failure_event({"litellm_call_id": "failing", "exception": ValueError("x")},
                                             None, None, None)
        await asyncio.sleep(1.3)
        return plugin.records.decided("failing") is not None

    assert asyncio.run(scenario()) is False


def test_an_attempt_on_a_deployment_the_router_no_longer_lists_uses_its_groups_window():
    plugin = make_plugin(8000)
    plugin.deployment_windows.lookup = lambda key: None  # the deployment id is not (or no longer) known
    out = run_hook(plugin, long_chat(turns=6, words=60))
    plugin.model_limits = lambda group: ModelLimits(2000, "test", "gpt-4o")  # the attempt's group is smaller
    trimmed = asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(out, "small"), "acompletion"))
    assert trimmed is not None and len(trimmed["messages"]) < len(out["messages"])


def test_an_attempt_s_deployment_is_the_router_s_and_the_other_metadata_only_lowers_its_window():
    """LiteLLM's router writes an attempt's deployment into ``metadata`` for chat, embeddings and text completions and
    into ``litellm_metadata`` for every other call; the other key may be the client's. An eleventh attack review: a
    chat body's ``litellm_metadata``, read first, named a 20,000-token group and another team on
    ``/queue/chat/completions``. The router's key names the deployment (else the first decision's holds); the other
    may only lower a known window, to that of a deployment the router lists."""
    from budget_hook.proxy.attempts import attempt_limits
    from budget_hook.proxy.route_guard import KnownTeams, _caller, router_metadata_key

    assert {router_metadata_key(c) for c in ("acompletion", "aembedding", "atext_completion")} == {"metadata"}
    assert {router_metadata_key(c) for c in ("aanthropic_messages", "aresponses", "agenerate_content")} == \
        {"litellm_metadata"}
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))
    windows = {"big": 200_000, "small": 4000, "tiny": 1000}
    listed = {"big\x00dep-big", "small\x00dep-small", "tiny\x00dep-tiny"}
    plugin.deployment_windows.lookup = lambda key: ModelLimits(windows[key.split("\x00")[0]], "t", "gpt-4o") \
        if key in listed else None
    plugin.model_limits = lambda group: ModelLimits(windows.get(group, 4000), "t", "gpt-4o")  # type: ignore[method-assign]
    routed = {"model_info": {"id": "dep-small"}, "deployment_model_name": "small", "user_api_key_hash": "h",
              "user_api_key_team_id": "team-7f3a"}
    for forged_id, forged_group in (("forged", "big"), ("dep-big", "big")):  # unknown, or a real but larger one
        forged = {"model_info": {"id": forged_id}, "deployment_model_name": forged_group,
                  "user_api_key_hash": "forged", "user_api_key_team_id": "team-nobody"}
        for call_type, kwargs in (("acompletion", {"litellm_metadata": forged, "metadata": routed}),
                                  ("agenerate_content", {"metadata": forged, "litellm_metadata": routed})):
            group, limits = attempt_limits(plugin, kwargs, router_metadata_key(call_type))
            assert (group, limits.window) == ("small", 4000), (forged_id, call_type)
    # the other key only lowers a known window, to a listed deployment's: never the group (its policy, its counter)
    tighter = {"model_info": {"id": "dep-tiny"}, "deployment_model_name": "tiny"}
    group, limits = attempt_limits(plugin, {"litellm_metadata": tighter, "metadata": routed}, "metadata")
    assert (group, limits.window) == ("small", 1000)
    unknown = ("first", ModelLimits(None, "t", "gpt-4o"))  # the first decision's, when the router's key names none
    assert attempt_limits(plugin, {"litellm_metadata": tighter}, "metadata", unknown) == unknown
    first = ("first", ModelLimits(200_000, "t", "gpt-4o"))  # an inner call: the outer call's deployment lowers it
    group, limits = attempt_limits(plugin, {"litellm_metadata": routed}, "metadata", first)
    assert (group, limits.window) == ("first", 4000)
    chat = {"litellm_metadata": {"user_api_key_hash": "forged", "user_api_key_team_id": "team-nobody"},
            "metadata": routed}
    caller = _caller(chat, router_metadata_key("acompletion"))
    assert (caller.team_id, caller.team_alias, caller.token) == ("team-7f3a", None, "h")
    # a team's alias and metadata: only as the proxy authenticated the team (a UserAPIKeyAuth), never as written
    teams = KnownTeams(size=2)
    teams.note(SimpleNamespace(team_id="team-7f3a", team_alias="lax", team_metadata=None))  # not the proxy's object
    assert _caller(chat, "metadata", teams).team_alias is None
    teams.note(UserAPIKeyAuth(api_key="sk-x", team_id="team-7f3a", team_alias="strict"))
    assert _caller(chat, "metadata", teams).team_alias == "strict"
    for index in range(3):  # bounded: the oldest team goes first
        teams.note(UserAPIKeyAuth(api_key="sk-x", team_id=f"team-{index}", team_alias=f"t{index}"))
    assert teams.get("team-7f3a") == (None, None) and teams.get("team-2")[0] == "t2"


def test_an_attempt_is_budgeted_by_the_metadata_the_router_writes_for_its_route():
    """On /v1/messages and /v1/responses the router writes ``litellm_metadata``, and ``metadata`` is the client's own
    field: a ``model_info`` the client put there must not name the attempt's deployment (a review found it read
    first)."""
    from budget_hook.proxy.attempts import attempt_limits

    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))
    windows = {"big": 200_000, "small": 4000}
    plugin.model_limits = lambda group: ModelLimits(windows[group], "test", "gpt-4o")  # type: ignore[method-assign]
    kwargs = {"metadata": {"model_info": {"id": "dep-big"}, "model_group": "big"},
              "litellm_metadata": {"model_info": {"id": "dep-small"}, "model_group": "small"}}
    group, limits = attempt_limits(plugin, kwargs, "litellm_metadata")
    assert (group, limits.window) == ("small", 4000)
    assert attempt_limits(plugin, {"metadata": kwargs["litellm_metadata"]})[0] == "small"  # chat: the router's
