"""Native /v1/messages trimming: the same priorities and invariants, in Anthropic's own terms."""

from __future__ import annotations

import copy
import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError
from budget_hook.shapes.anthropic import CACHE_PREFIX_NOTE, anthropic_pairing_problems, count_anthropic, trim_anthropic
from budget_hook.trimming import COMPACTED_MARKER, TrimPolicy

from .conftest import load_json

CLAUDE = TokenCounter.for_model("anthropic/claude-sonnet-4-5")
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)
REAL = [case["request"] for case in load_json("peer_cases/pydantic_ai_cassette_api_usage.json")
        if case.get("api") == "anthropic_messages" and isinstance(case.get("request", {}).get("messages"), list)]
CASSETTES = [load_json(f"conversations/pydanticai_cassette_0{n}.json")["original_request_anthropic"] for n in (6, 7, 8)]


def budget_for(body, fraction: float):
    total = count_anthropic(body, CLAUDE)
    reserve = body.get("max_tokens", 1024)
    return compute_budget(max(2, int(total * fraction)) + reserve, requested_output_tokens=reserve, policy=NO_MARGIN)


def check(body, budget, policy=TrimPolicy()):
    snapshot = copy.deepcopy(body)
    try:
        result = trim_anthropic(body, counter=CLAUDE, budget=budget, policy=policy)
    except CannotFitError:
        assert body == snapshot
        return None
    assert body == snapshot, "the input is never mutated"
    new = result.request
    if not result.report.changed:
        assert new is body
        return result
    assert result.report.tokens_after == count_anthropic(new, CLAUDE) <= budget.budget
    if not anthropic_pairing_problems(body["messages"]):
        assert anthropic_pairing_problems(new["messages"]) == []
    # system, tools and every other option untouched; the latest user message verbatim
    assert {k: v for k, v in new.items() if k != "messages"} == {k: v for k, v in body.items() if k != "messages"}
    starts = [i for i, m in enumerate(body["messages"]) if m["role"] == "user" and _is_turn_start(m)]
    if starts:
        # verbatim, or merged whole with the kept user text and the notice (Anthropic's roles alternate)
        latest = body["messages"][starts[-1]]
        if latest not in new["messages"]:
            blocks = _blocks(latest["content"])
            assert any(any(_blocks(m["content"])[i:i + len(blocks)] == blocks for i in range(len(m["content"])))
                       for m in new["messages"] if m["role"] == "user")
    # roles alternate wherever the client's did: the trim never makes two messages of one role neighbours
    def pairs(messages):
        return sum(1 for a, b in itertools.pairwise(messages) if a["role"] == b["role"])
    assert pairs(new["messages"]) <= pairs(body["messages"])
    # signed thinking blocks are never edited: each one still present is byte-identical
    original_thinking = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
                         if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")]
    for message in new["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"):
                assert block in original_thinking
    # every action names a native message (and block) and its role
    for action in result.report.actions:
        assert body["messages"][action.index]["role"] == action.role
    return result


def _blocks(content):
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _is_turn_start(message):
    """A user message that answers no tool call (one carrying tool results continues the exchange)."""
    content = message["content"]
    return isinstance(content, str) or not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def test_real_material_is_present():
    assert len(REAL) > 200 and len(CASSETTES) == 3


@settings(max_examples=int(os.environ.get("BUDGET_HOOK_EXAMPLES", 150)), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(REAL + CASSETTES), st.floats(0.05, 1.1))
def test_invariants_on_real_anthropic_requests(body, fraction):
    check(body, budget_for(body, fraction))


def agent(turns: int = 6, result_chars: int = 4000, thinking: bool = False, cache_first: bool = False,
          error_at: int | None = None) -> dict:
    task: dict = {"type": "text", "text": "Fix the failing test in the repository."}
    if cache_first:  # a prompt-cache breakpoint on the task: the prefix up to it must not be rewritten
        task["cache_control"] = {"type": "ephemeral"}
    messages = [{"role": "user", "content": [task]}]
    for step in range(turns):
        assistant = [{"type": "text", "text": f"Step {step}: reading file {step}."},
                     {"type": "tool_use", "id": f"toolu_{step}", "name": "read_file", "input": {"path": f"f{step}.py"}}]
        if thinking:
            assistant.insert(0, {"type": "thinking", "thinking": f"I should read f{step}.py " * 20, "signature": "sig" * 20})
        messages.append({"role": "assistant", "content": assistant})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{step}", "content": f"line {step}\n" * (result_chars // 7)}
        if step == error_at:
            result = {**result, "is_error": True, "content": "Traceback: " + "x" * result_chars}
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Found it."}]})
    messages.append({"role": "user", "content": "Great, now summarise the fix."})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are a coding agent.",
            "tools": [{"name": "read_file", "description": "Read a file", "input_schema": {"type": "object",
                       "properties": {"path": {"type": "string"}}, "required": ["path"]}}], "messages": messages}


def test_old_tool_results_are_compacted_in_place_keeping_block_and_id():
    body = agent()
    result = check(body, budget_for(body, 0.8))
    compacted = [a for a in result.report.actions if a.action == "compacted"]
    assert compacted and all(a.block == 0 and a.tool_call_id.startswith("toolu_") for a in compacted)
    # found by its id: the room left for the next requests may have dropped older steps before it
    [block] = [b for m in result.request["messages"] if isinstance(m["content"], list) for b in m["content"]
               if b.get("tool_use_id") == compacted[0].tool_call_id]
    assert block["type"] == "tool_result"
    assert COMPACTED_MARKER in block["content"]


def test_error_results_keep_their_head_and_tail():
    body = agent(error_at=0)
    # cut exactly to the budget, softening the old results is enough: the error result (the oldest) keeps its head
    # and tail like the others (whole, its step left whole once the room the default leaves needed it)
    result = check(body, budget_for(body, 0.9), TrimPolicy(cache_step_ratio=0))
    assert any(a.action == "compacted" for a in result.report.actions)
    error_block = body["messages"][2]["content"][0]
    sent = next(m["content"][0] for m in result.request["messages"] if isinstance(m["content"], list)
                and m["content"][0].get("tool_use_id") == error_block["tool_use_id"])
    def text(content):
        return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    original, kept = text(error_block["content"]), text(sent["content"])
    assert sent.get("is_error") is True and len(kept) < len(original)
    assert kept.startswith("Traceback: xxx") and kept.endswith(original[-100:])


def test_turns_leave_whole_and_the_first_message_stays_user():
    body = {**agent(turns=2), "messages": [
        {"role": "user", "content": "old question " * 400}, {"role": "assistant", "content": "old answer " * 400},
        *agent(turns=2)["messages"]]}
    result = check(body, budget_for(body, 0.5), TrimPolicy(keep_opening_context=False))
    assert result.report.actions and result.request["messages"][0]["role"] == "user"
    assert anthropic_pairing_problems(result.request["messages"]) == []
    # By default the old question is opening context: it stays, with its answer (its turn's last step)
    kept = check(body, budget_for(body, 0.7))
    assert kept.request["messages"][0] == body["messages"][0] and kept.report.actions
    assert kept.request["messages"][1]["content"].startswith("old answer")


def test_thinking_messages_are_never_edited():
    body = agent(thinking=True, result_chars=200)
    for message in body["messages"]:
        if message["role"] == "assistant":
            message["content"].append({"type": "text", "text": "long reasoning " * 400})
    thinking = {i for i, m in enumerate(body["messages"]) if m["role"] == "assistant"
                and any(b.get("type") == "thinking" for b in m["content"])}
    result = check(body, budget_for(body, 0.5))
    assert result is not None and result.report.changed
    actions = {a.index: a.action for a in result.report.actions}
    assert actions.keys() & thinking  # it had to touch them: each one left whole
    assert all(actions[i] == "dropped" for i in thinking if i in actions)
    assert any(a == "shortened" for a in actions.values())  # the long reply without thinking was shortened
    for index in thinking - actions.keys():  # and the ones that stay are byte-identical
        assert body["messages"][index] in result.request["messages"]
    # when only editing them could fit (no turn may leave), the request is refused, never edited
    assert check(body, budget_for(body, 0.5), TrimPolicy(drop_old_turns=False)) is None


def test_cached_prefix_is_protected_unless_it_cannot_fit_otherwise():
    body = agent(turns=6, cache_first=True)
    mild = check(body, budget_for(body, 0.8), TrimPolicy(cache_step_ratio=0))  # compaction alone is enough
    assert mild.report.notes == () and mild.report.actions
    assert mild.request["messages"][0] is body["messages"][0]
    # The task holding the breakpoint is opening context: the steps after it go, the cached prefix stays.
    hard = check(body, budget_for(body, 0.3))
    assert hard.report.notes == () and hard.report.actions
    assert hard.request["messages"][0]["content"][0] == body["messages"][0]["content"][0]
    # A breakpoint further on (the third tool result): only dropping the steps before it can fit this:
    # allowed, and said.
    later = copy.deepcopy(body)
    later["messages"][6]["content"][0]["cache_control"] = {"type": "ephemeral"}
    hard = check(later, budget_for(later, 0.1))
    assert hard.report.notes == (CACHE_PREFIX_NOTE,) and hard.report.dropped


def test_old_images_are_replaced_when_asked():
    png = load_json("conversations/pydanticai_cassette_08.json")["original_request_anthropic"]
    body = {**png, "messages": [*png["messages"], {"role": "assistant", "content": "noted"},
                                {"role": "user", "content": "thanks, and now?"}]}
    total = count_anthropic(body, CLAUDE)
    budget = budget_for(body, 0.9)
    result = check(body, budget, TrimPolicy(drop_old_images=True, compact_tool_results=False, drop_old_turns=False))
    assert result is not None and any(a.action == "images_removed" for a in result.report.actions), total
    text = json.dumps(result.request)
    assert '"type": "image"' not in text and "image removed" in text


def test_fitting_request_is_returned_as_is():
    body = CASSETTES[0]
    result = trim_anthropic(body, counter=CLAUDE, budget=compute_budget(200_000))
    assert result.request is body and not result.report.changed


@pytest.mark.parametrize("messages, problem", [
    ([{"role": "assistant", "content": "hi"}], "first message"),
    ([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}], "answers no tool_use"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
      {"role": "user", "content": "no result"}], "has no tool_result"),
])
def test_pairing_problems_are_found(messages, problem):
    assert problem in " ".join(anthropic_pairing_problems(messages))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(REAL + CASSETTES))
def test_the_view_counts_what_the_request_costs(body):
    from budget_hook.shapes.anthropic import build_view
    view_count = CLAUDE.count_request(build_view(body).request).total
    assert abs(view_count - count_anthropic(body, CLAUDE)) <= 0.02 * count_anthropic(body, CLAUDE) + 30


def mixed_agent() -> dict:
    body = agent(turns=6)
    tools = [{"name": f"tool_{i}", "description": "does a thing " * 20, "input_schema": {"type": "object",
              "properties": {"x": {"type": "string", "description": "value " * 10}}}} for i in range(20)]
    for message in body["messages"]:
        if message["role"] == "user" and isinstance(message["content"], list) and message["content"][0]["type"] == "tool_result":
            message["content"].append({"type": "text", "text": "<system-reminder>please also check the logs</system-reminder>"})
    return {**body, "tools": body["tools"] + tools}


def test_mixed_messages_keep_tools_in_the_count_and_the_users_text():
    body = mixed_agent()
    from budget_hook.shapes.anthropic import build_view
    total = count_anthropic(body, CLAUDE)
    assert abs(CLAUDE.count_request(build_view(body).request).total - total) <= 0.02 * total + 30  # tools counted
    result = check(body, budget_for(body, 0.8))
    if result is not None:
        kept = json.dumps(result.request)
        surviving = [m for m in body["messages"] if m in result.request["messages"]]
        for message in body["messages"]:
            if message not in surviving and message["role"] == "user" and any(
                    b.get("type") == "text" for b in message["content"] if isinstance(message["content"], list)):
                assert not any(m["content"] == message["content"] for m in result.request["messages"])
        assert kept.count("please also check the logs") == sum(
            1 for m in result.request["messages"] if "please also check the logs" in json.dumps(m))


def test_server_tool_blocks_are_never_rewritten():
    server = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x " * 300}}
    body = {"model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "search"},
        {"role": "assistant", "content": [server, {"type": "text", "text": "found " * 2000}]},
        {"role": "user", "content": "thanks"}]}
    result = check(body, budget_for(body, 0.5), TrimPolicy(drop_old_turns=False))
    assert result is None or all(a.action != "shortened" for a in result.report.actions)


def test_a_breakpoint_inside_a_tool_result_protects_the_prefix():
    body = agent(turns=10)
    body["messages"][4]["content"][0] = {**body["messages"][4]["content"][0], "content": [
        {"type": "text", "text": "line\n" * 600, "cache_control": {"type": "ephemeral"}}]}
    result = check(body, budget_for(body, 0.9), TrimPolicy(cache_step_ratio=0))
    assert result.report.actions
    assert result.request["messages"][:5] == body["messages"][:5] and result.report.notes == ()
    # leaving room for the next requests drops steps after it: the notice joins the breakpoint's message
    # after the breakpoint's block, so the cached prefix is still byte-identical
    roomy = check(body, budget_for(body, 0.9))
    assert roomy.report.dropped and roomy.report.notes == ()
    assert roomy.request["messages"][:4] == body["messages"][:4]
    assert roomy.request["messages"][4]["content"][0] == body["messages"][4]["content"][0]
