"""What the plugin keeps of a request, and for how long (a review of memory a client can make it hold).

Each call keeps what its attempts are compared against (``Decided.content``) and, for a provider's error, the
request to search for quoted overflow wording (``source``). Both hold the request's own objects: free while
LiteLLM holds them too, memory of ours once the call is over. A review measured two ways a client kept them:
a batch ``model: "a,b"`` whose second group fails (LiteLLM's attempt after the call settled left a record no
callback ends: 30 requests of 8 MB kept +713 MiB, against +17 MiB without the plugin), and requests that fail at
the provider (kept 30 s with LiteLLM's logging object: 3.0 GB live against 376 MiB).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.budget import ModelLimits
from budget_hook.pipeline import BudgetRequest
from budget_hook.proxy.attempts import content_snapshot, held_size
from budget_hook.proxy.hook import BudgetHookHTTPError
from budget_hook.proxy.metrics import MAX_SERIES, Metrics
from budget_hook.proxy.outcomes import snapshot
from budget_hook.proxy.records import Decided, RecordStore

from .conftest import as_it_is
from .test_proxy_hook import attempt_kwargs, log_records, long_chat, make_plugin, run_hook

LIMITS = ModelLimits(window=1000, source="test", counting_model="gpt-4o")


def decided(content=None) -> Decided:
    return Decided({"action": "pass"}, BudgetRequest(shape=None, body={}, model_group="g", limits=LIMITS),  # type: ignore[arg-type]
                   LIMITS, "open", content if content is not None else {"messages": ((object(),), (1,))})


def test_an_attempt_litellm_makes_on_a_settled_call_is_decided_and_leaves_no_record():
    """The batch case: the call logged its outcome, then LiteLLM attempts it once more under the same call id.
    The attempt is still decided (a 6,000-token attempt on a 4k deployment is refused), but leaves no record
    behind: no callback would ever end it."""
    plugin = make_plugin(4000)
    plugin.deployment_windows.lookup = lambda key: ModelLimits(4000, "test", "gpt-4o")
    out = run_hook(plugin, long_chat(turns=2))
    call_id = out["litellm_call_id"]
    log_records(plugin, "success", {"litellm_call_id": call_id})
    assert plugin.records.settled(call_id) and plugin.records.held() == (0, 0, 0)
    late = {**attempt_kwargs(out, "g"), "messages": [{"role": "user", "content": "word " * 6000}]}
    late["metadata"].pop("budget_hook", None)
    with pytest.raises(BudgetHookHTTPError, match="maximum context length is 4000 tokens"):
        asyncio.run(plugin.async_pre_call_deployment_hook(late, "acompletion"))
    fits = {**attempt_kwargs(out, "g"), "messages": [{"role": "user", "content": "hi"}]}
    fits["metadata"].pop("budget_hook", None)
    asyncio.run(plugin.async_pre_call_deployment_hook(fits, "acompletion"))
    assert call_id not in plugin.records.in_flight_ids() and plugin.records.held() == (0, 0, 0)
    # a new request under the same call id (clients may choose theirs) is a call like any other
    run_hook(plugin, {**long_chat(turns=2), "litellm_call_id": call_id})
    assert not plugin.records.settled(call_id) and call_id in plugin.records.in_flight_ids()


def test_a_failed_call_lets_go_of_its_request_once_the_proxy_answered_it():
    """A call that failed keeps its record for the error's headers, but nothing of its request: a fallback
    coming after that is decided again in full, never compared against content no longer kept."""
    plugin = make_plugin(4000)
    plugin.deployment_windows.lookup = lambda key: ModelLimits(4000, "test", "gpt-4o")
    out = run_hook(plugin, long_chat(turns=2))
    call_id = out["litellm_call_id"]
    assert plugin.records.held()[:2] == (1, 1) and plugin.records.held()[2] > 2000
    log_records(plugin, "failure", {"litellm_call_id": call_id, "exception": ValueError("upstream 500")})
    assert plugin.records.held()[1] == 1  # a fallback may still come: compared, not decided again
    asyncio.run(plugin.async_post_call_failure_hook(out, ValueError("upstream 500"), UserAPIKeyAuth()))
    assert plugin.records.held() == (1, 0, 0) and plugin.records.find(call_id) is not None
    assert plugin.records.decided(call_id).content == {} and plugin.records.quoted(call_id)
    asyncio.run(plugin.async_pre_call_deployment_hook(attempt_kwargs(out, "g"), "acompletion"))
    assert plugin.records.find(call_id).decided_again == 1


def test_calls_let_go_of_their_requests_past_the_byte_and_age_bounds():
    store: RecordStore[str] = RecordStore(held_bytes=250)
    for index in range(4):
        store.remember(f"c{index}", f"r{index}", decided(), {"messages": ["x"]}, size=100)
    assert store.held() == (4, 2, 200)  # the two oldest let go, their records kept
    assert store.decided("c0").content == {} and store.unasked("c0") == (False, None) and store.quoted("c0")
    assert store.decided("c3").content and store.unasked("c3")[0] and store.find("c0") == "r0"
    store.settle("c3", "success")
    assert store.held() == (3, 1, 100)
    store.held_seconds = -1
    store.purge()
    assert store.held() == (3, 0, 0)
    # a call LiteLLM never settles (a stream it fails to log) leaves after its own request timeout
    store.in_flight_seconds = -1
    store.remember("c9", "r9")
    assert store.in_flight_ids() == [] and store.held() == (0, 0, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["remember", "settle-success", "settle-failure", "release", "update",
                                           "forget", "purge"]),
                          st.integers(0, 5), st.integers(0, 400)), max_size=60))
def test_the_bytes_held_are_what_the_holding_calls_hold_and_never_over_the_bound(steps):
    """Whatever order LiteLLM's callbacks come in, the total is the sum over the calls still holding their
    requests, within ``held_bytes``, and a call that let go holds nothing."""
    store: RecordStore[str] = RecordStore(in_flight=4, failed_kept=3, held_bytes=1000)
    for action, index, size in steps:
        call_id = f"c{index}"
        if action == "remember":
            store.remember(call_id, "r", decided(), {"k": "v"}, size=size)
        elif action.startswith("settle"):
            store.settle(call_id, action.split("-")[1])
        elif action == "update":
            store.update(call_id, "r2")
        else:
            getattr(store, action)(*(() if action == "purge" else (call_id,)))
        holding = list(store._held.values())
        assert store._held_total == sum(call.size for call in holding) <= store.held_bytes
        assert all(call.decided.content or call.source is not None for call in holding)
        for ids in (store.in_flight_ids(), store.failed_ids()):
            for each in ids:
                call = store._call(each)
                if each not in store._held:
                    assert call.source is None and (call.decided is None or not call.decided.content)


def test_the_snapshot_for_quoted_wording_keeps_no_litellm_object():
    class LoggingObject:  # LiteLLM's ``litellm_logging_obj``: the provider request, the exception, copies
        pass

    data = {"messages": [{"role": "user", "content": "hi"}], "metadata": {"a": 1}, "litellm_logging_obj":
            LoggingObject(), "user": "u", "temperature": 0.5}
    kept = snapshot(data)
    assert kept["litellm_logging_obj"] is None and kept["temperature"] is None  # keys are searched, not these
    assert kept["user"] == "u" and kept["metadata"] == {"a": 1} and kept["metadata"] is not data["metadata"]
    assert kept["messages"] is not data["messages"] and kept["messages"][0] is data["messages"][0]


def test_the_size_held_counts_every_text_of_the_request():
    image = "data:image/png;base64," + "A" * 1_000_000
    data = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": image}}]}],
            "metadata": {"note": "n" * 50_000}}
    size = held_size(content_snapshot(("messages",), data), data)
    assert 1_050_000 <= size <= 1_100_000


def test_metrics_show_what_the_plugin_holds_and_a_new_team_cannot_add_series_past_the_bound():
    plugin = make_plugin(4000)
    run_hook(plugin, long_chat(turns=2))
    text = plugin.metrics.render()
    assert "budget_hook_calls_in_flight 1" in text and "budget_hook_calls_holding_request 1" in text
    held = [line for line in text.splitlines() if line.startswith("budget_hook_request_bytes_held ")]
    assert held and int(held[0].split()[1]) > 2000

    class Record:
        action, tokens_before, tokens_after, estimate_forwarded, count = "pass", 10, 10, None, None
        model_group = metrics_group = "g"
        team_id = team_alias = None

    metrics = Metrics()
    for team in range(MAX_SERIES + 500):
        record = Record()
        record.team_id = f"team-{team}"
        metrics.observe(record, "success")
    text = metrics.render()
    lines = [line for line in text.splitlines() if line.startswith("budget_hook_decisions_total{")]
    assert len(lines) == MAX_SERIES + 1
    assert 'budget_hook_decisions_total{action="pass",model_group="other",outcome="success",team="other"} 500' in text


def test_a_long_error_text_is_not_parsed_as_a_python_literal_on_the_event_loop(monkeypatch):
    """``ast.literal_eval`` took 0.2-1.6 s on 256 KB of crafted provider text (the failure hook runs inline)."""
    from budget_hook.proxy import answers
    from budget_hook.proxy.answers import error_code

    parsed: list[int] = []
    literal_eval = answers.ast.literal_eval
    monkeypatch.setattr(answers.ast, "literal_eval", lambda text: parsed.append(len(text)) or literal_eval(text))
    crafted = "Error code: 400 - {" + ",".join(["{1}"] * 60_000) + "}"
    assert error_code(ValueError(crafted), crafted) is None and parsed == []
    sdk = "Error code: 400 - {'error': {'message': 'too long', 'code': 'context_length_exceeded'}}"
    assert error_code(ValueError(sdk), sdk) == "context_length_exceeded" and len(parsed) == 1


def orphaned_calls(count: int) -> list[dict]:
    """A conversation whose assistant turns each call a tool and get no result (the user just goes on)."""
    messages: list[dict] = [{"role": "user", "content": "start"}]
    for index in range(count):
        messages += [{"role": "assistant", "content": f"calling {index}", "tool_calls": [
            {"id": f"call_{index}", "type": "function", "function": {"name": "run_shell", "arguments": "{}"}}]},
            {"role": "user", "content": f"go on {index}"}]
    return messages


def test_with_modify_params_a_chat_call_to_claude_is_decided_as_litellm_rewrites_it(monkeypatch):
    """With ``litellm_settings.modify_params``, LiteLLM gives each tool call left unanswered a result sentence on
    the way to Claude (``sanitize_messages_for_tool_calling``), after every hook: 150 of them are ~4,000 tokens
    no count saw. The request is decided, and forwarded, as LiteLLM's own function rewrites it."""
    import litellm
    from litellm.litellm_core_utils.prompt_templates.factory import sanitize_messages_for_tool_calling

    from budget_hook.counting import TokenCounter

    from .test_proxy_hook import claude_plugin

    body = {"model": "claude", "max_tokens": 50, "messages": orphaned_calls(150)}
    monkeypatch.setattr(litellm, "modify_params", False)
    plain = run_hook(claude_plugin(10_000), {**body, "messages": list(body["messages"])})
    assert plain["metadata"]["budget_hook"]["action"] == "pass"
    monkeypatch.setattr(litellm, "modify_params", True)
    out = run_hook(claude_plugin(10_000), body)
    record = out["metadata"]["budget_hook"]
    assert record["tokens_before"] > plain["metadata"]["budget_hook"]["tokens_before"] + 150 * 20
    assert record["action"] == "trimmed" and record["tokens_after"] <= record["target"]
    sent = sanitize_messages_for_tool_calling(out["messages"])  # LiteLLM finds nothing left to add
    assert sent == out["messages"] and len([m for m in sent if m["role"] == "tool"]) > 10
    counter = TokenCounter.for_model("claude-sonnet-4-5")
    assert counter.count_request({"messages": sent}).total <= record["target"]
    assert body["messages"] == orphaned_calls(150)  # the client's request is never edited
    # a conversation LiteLLM leaves as it is is forwarded as it is
    fine = {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    assert as_it_is(run_hook(claude_plugin(10_000), fine), fine)
