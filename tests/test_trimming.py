"""The trimmer's invariants, property-tested on generated and real conversations."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError
from budget_hook.trimming import COMPACTED_MARKER, TrimPolicy, content_hash, message_text, trim_request
from budget_hook.trimming.report import SOFTENED_MARKER
from budget_hook.trimming.structure import drop_units, is_result, latest_turn_start, opening_parts, pairing_problems

from .conftest import CONVERSATIONS, conversation_request

COUNTER = TokenCounter.for_model("gpt-4o")
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)
WORDS = ["alpha", "beta", "gamma", "delta", "def", "return", "{", "}", "x=1;", "error", "the", "file", "λ", "🙂", "1234"]
PNG_URL = "https://example.com/screenshot.png"


def budget_of(tokens: int):
    return compute_budget(tokens + 100, requested_output_tokens=100, policy=NO_MARGIN)


# --- generated conversations --------------------------------------------------------------------------

text = st.builds(lambda words, n: " ".join(words) * n, st.lists(st.sampled_from(WORDS), min_size=1, max_size=8),
                 st.integers(1, 400))


@st.composite
def conversations(draw):
    messages = [{"role": "system", "content": draw(text)} for _ in range(draw(st.integers(0, 2)))]
    call_number = 0
    for turn in range(draw(st.integers(1, 7))):
        if draw(st.booleans()) and turn == 2:
            messages.append({"role": "developer", "content": "mid-conversation instruction"})
        user_content = draw(text)
        if draw(st.integers(0, 5)) == 0:
            user_content = [{"type": "text", "text": user_content}, {"type": "image_url", "image_url": {"url": PNG_URL}}]
        messages.append({"role": "user", "content": user_content})
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                messages.append({"role": "assistant", "content": draw(text)})
                continue
            calls = []
            for _ in range(draw(st.integers(1, 3))):  # parallel calls
                call_number += 1
                calls.append({"id": f"call_{call_number}", "type": "function",
                              "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{call_number}.py"})}})
            content = draw(st.one_of(st.none(), text))
            messages.append({"role": "assistant", "content": content, "tool_calls": calls})
            for call in calls:
                result = draw(text)
                if draw(st.integers(0, 4)) == 0:
                    result = "Error: " + result
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return {"model": "gpt-4o", "messages": messages}


#: cuts exactly at the budget (no room left for the next requests)
EXACT = TrimPolicy(cache_step_ratio=0)

policies = st.builds(
    TrimPolicy,
    keep_recent_tool_results=st.integers(0, 4),
    pin_first_user_message=st.booleans(),
    edit_latest_turn_history=st.booleans(),
    tool_result_keep_chars=st.sampled_from([0, 100, 500]),
    tool_result_min_chars=st.sampled_from([0, 200, 1000]),
    drop_old_images=st.booleans(),
    keep_opening_context=st.booleans(),
    soften_tool_results=st.booleans(),
    drop_latest_turn_steps=st.booleans(),
    cache_step_ratio=st.sampled_from([0, 0.1, 0.25, 0.5]),
    notify_model=st.booleans(),
    context_min_chars=st.sampled_from([0, 500]),
    drop_opening_context=st.booleans(),
    reduce_recent_tool_results=st.booleans(),
    reduce_opening_context=st.booleans(),
    soften_user_messages=st.booleans(),
)


def check_invariants(original: dict, snapshot: dict, budget, policy: TrimPolicy, protected=(), no_edit=()):
    """Trim and assert every documented invariant; returns the result (None if it raised)."""
    try:
        result = trim_request(original, counter=COUNTER, budget=budget, policy=policy, protected=protected,
                              no_edit=no_edit)
    except CannotFitError as exc:
        assert original == snapshot  # not mutated, even on failure
        assert exc.facts["tokens_after_trimming"] > budget.budget
        assert "maximum context length" in str(exc)
        return None
    assert original == snapshot, "the caller's request was mutated"
    trimmed, report = result.request, result.report
    before = original["messages"]
    after = trimmed["messages"]
    # Fits, and the report's figure is a fresh count of what will be sent.
    fresh = COUNTER.count_request(trimmed).total
    assert fresh == report.tokens_after <= budget.budget
    if not report.changed:
        assert trimmed is original
        return result
    # Order preserved: the kept messages are the original minus the dropped, in order, and the notice
    # (when anything was dropped and the model is to be told) is a user message at the first cut.
    dropped = {a.index for a in report.actions if a.action == "dropped"}
    kept = [i for i in range(len(before)) if i not in dropped]
    if dropped and policy.notify_model:
        notice = report.notice
        assert notice is not None and notice.messages == len(dropped)
        assert notice.tokens == sum(a.tokens_before for a in report.actions if a.action == "dropped")
        assert after[notice.position] == {"role": "user", "content": notice.text}
        assert notice.position == len([i for i in kept if i < min(dropped)])
        after = after[:notice.position] + after[notice.position + 1:]
    else:
        assert report.notice is None
    assert len(kept) == len(after)
    edited = {a.index for a in report.actions if a.action != "dropped"}
    for new, index in zip(after, kept):
        old = before[index]
        assert new["role"] == old["role"] and new.get("tool_calls") == old.get("tool_calls")
        assert new.get("tool_call_id") == old.get("tool_call_id")
        if index not in edited:
            assert new is old
    # Structure: no orphans created.
    if not pairing_problems(before):
        assert pairing_problems(after) == []
    # System/developer messages unchanged; latest user message unchanged and never dropped.
    for index, old in enumerate(before):
        if old["role"] in ("system", "developer"):
            assert index in kept and index not in edited
    start = latest_turn_start(before)
    latest = [i for i in range(start, len(before))] if any(m["role"] == "user" for m in before) else []
    for index in latest:
        if not policy.drop_latest_turn_steps:
            assert index not in dropped
        if not policy.edit_latest_turn_history:
            assert index not in edited
    if latest:
        assert start not in edited and start not in dropped
    assert len(before) - 1 not in dropped  # the last message (the call being answered, the final reply) stays
    if policy.pin_first_user_message:
        first_user = next(i for i, m in enumerate(before) if m["role"] == "user")
        assert first_user in kept and first_user not in edited
    # The opening context stays verbatim: the task and system messages always, the rest unless the last rung
    # had to drop it (acknowledged context in whole pairs).
    if policy.keep_opening_context:
        leading, acknowledged = opening_parts(before, context_min_chars=policy.context_min_chars,
                                              ack_max_chars=policy.ack_max_chars)
        task = max((i for i in leading if before[i]["role"] == "user"), default=None)
        for index in leading:
            # edited only by the last stage, rather than refuse: head and tail kept, never the latest message
            assert index not in edited or (policy.reduce_opening_context and index != start
                                           and "removed from the middle" in after[kept.index(index)]["content"])
            assert index in kept or (policy.drop_opening_context and before[index]["role"] == "user"
                                     and index != task)
        for pair in acknowledged:
            assert pair[1] not in edited and (set(pair) <= dropped or not dropped.intersection(pair))
            if not policy.drop_opening_context:
                assert not dropped.intersection(pair)
    # A user message outside the opening context is edited only when softening user messages is on, before the
    # latest turn, in the middle (head and tail kept, the marker saying so).
    opening = set().union(*opening_parts(before, context_min_chars=policy.context_min_chars,
                                         ack_max_chars=policy.ack_max_chars)[1], opening_parts(
        before, context_min_chars=policy.context_min_chars, ack_max_chars=policy.ack_max_chars)[0]) \
        if policy.keep_opening_context else set()
    for index in {a.index for a in report.actions if a.action == "shortened"}:
        if before[index]["role"] == "user" and index not in opening:
            assert index < start and "removed from the middle" in message_text(after[kept.index(index)])
            assert policy.soften_user_messages or (policy.reduce_opening_context and not policy.keep_opening_context)
    # The K most recent tool results are only ever cut by the graded stage: in the middle (head and tail kept),
    # or, at its floor, to the head an older result is compacted to.
    results = [i for i, m in enumerate(before) if is_result(m)]  # tool results and legacy function ones
    if policy.keep_recent_tool_results:
        for index in results[-policy.keep_recent_tool_results:]:
            if index in edited:
                assert policy.reduce_recent_tool_results
                content = after[kept.index(index)]["content"]
                assert "compacted in the middle" in content or content.startswith(
                    message_text(before[index])[:policy.tool_result_keep_chars] + f"\n{COMPACTED_MARKER} by")
    # Least needed first: the latest turn's loop and the newest tool results are touched only once every
    # older unit that may go has gone (a unit: a tool step, or an older turn's question with its answer).
    if not protected and not no_edit and policy.drop_old_turns and policy.drop_latest_turn_steps:
        leading, acknowledged = (opening_parts(before, context_min_chars=policy.context_min_chars,
                                               ack_max_chars=policy.ack_max_chars)
                                 if policy.keep_opening_context else (frozenset(), ()))
        pinned = next((i for i, m in enumerate(before) if m["role"] == "user"), None) \
            if policy.pin_first_user_message else None
        never = {i for i, m in enumerate(before) if m["role"] in ("system", "developer") or i in leading
                 or i == pinned or (i == start and m["role"] == "user")} | {i for pair in acknowledged for i in pair}
        units = drop_units(before, never)
        newest = set(results[max(0, len(results) - policy.keep_recent_tool_results):])
        touched = dropped | edited
        if any(i > start for i in touched) and latest:
            for unit in units:
                if not unit.latest:
                    assert set(unit.indexes) <= dropped, (unit, sorted(touched))
        # a newest result is cut only when the other units of its region cannot make the room: kept verbatim,
        # with every other unit of its region dropped, the request would still be over the budget
        for region_is_latest in (False, True):
            hit = [i for i in newest & edited if (i >= start) == region_is_latest or not latest]
            # a turn whose step holds a newest result keeps its question while that step stays (a step never
            # opens the conversation without the question it answers), and what came after the oldest newest
            # result stays with them (it is newer)
            holding = {u.turn for u in units if newest.intersection(u.indexes)}
            first_recent = min(newest, default=len(before))
            left = [i for u in units if u.latest == region_is_latest and not newest.intersection(u.indexes)
                    and not (u.turn in holding and before[u.indexes[0]]["role"] == "user")
                    and u.indexes[-1] < first_recent
                    for i in u.indexes if i not in dropped]
            if hit and left:
                alive = [i for i in kept if i not in left]
                by_index = dict(zip(kept, after, strict=True))
                restored = [before[i] if i in hit else by_index[i] for i in alive]
                assert COUNTER.count_request({**original, "messages": restored}).total > budget.budget - 64
    # Protected messages are kept verbatim; no_edit messages are never rewritten; images are only
    # removed before the latest turn.
    for index in protected:
        assert index in kept and index not in edited
    for index in no_edit:
        assert index not in edited
    for action in report.actions:
        if action.action == "images_removed":
            assert policy.drop_old_images and action.index < start
    # An error result keeps its head and tail when cut (softened), never its head alone (compacted), but among the
    # newest, which the graded stage cuts as above, error or not (docs/trimming.md, "The newest results verbatim").
    newest_results = results[-policy.keep_recent_tool_results:] if policy.keep_recent_tool_results else []
    for action in report.actions:
        if action.action == "compacted" and before[action.index]["content"].startswith("Error"):
            cut = after[kept.index(action.index)]["content"] if action.index in kept else None
            assert (action.index in newest_results and policy.reduce_recent_tool_results) or (
                cut is not None and "compacted in the middle" in cut and policy.soften_tool_results
                and cut.startswith("Error") and before[action.index]["content"].endswith(cut[-50:]))
    # First non-system message is still a user message when it was one.
    def first_non_system(messages):
        return next((m["role"] for m in messages if m["role"] not in ("system", "developer")), None)
    if first_non_system(before) == "user":
        assert first_non_system(after) == "user"
    # No two assistant messages made neighbours (a step kept after its question left, a reply after a dropped
    # result): providers that require alternating roles would refuse the request.
    def assistant_neighbours(messages):
        roles = [m["role"] for m in messages if m["role"] not in ("system", "developer")]
        return sum(a == b == "assistant" for a, b in itertools.pairwise(roles))
    assert assistant_neighbours(after) <= assistant_neighbours(before)
    # Idempotent: trimming the result again changes nothing.
    if protected or no_edit:
        return result  # indexes refer to the original; re-trimming would need them remapped
    again = trim_request(trimmed, counter=COUNTER, budget=budget, policy=policy)
    assert again.request is trimmed and not again.report.changed
    return result


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), st.floats(0.05, 1.2), policies)
def test_invariants_on_generated_conversations(request, fraction, policy):
    total = COUNTER.count_request(request).total
    snapshot = copy.deepcopy(request)
    check_invariants(request, snapshot, budget_of(max(1, int(total * fraction))), policy)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), st.floats(0.05, 1.2), policies, st.data())
def test_invariants_with_a_protected_prefix_and_uneditable_messages(request, fraction, policy, data):
    """What the native shapes rely on: a prompt-cache prefix (protected) and signed-thinking messages (no_edit)."""
    total = COUNTER.count_request(request).total
    count = len(request["messages"])
    prefix = data.draw(st.integers(0, count), label="protected prefix")
    no_edit = data.draw(st.sets(st.integers(0, count - 1), max_size=count), label="no_edit")
    snapshot = copy.deepcopy(request)
    check_invariants(request, snapshot, budget_of(max(1, int(total * fraction))), policy,
                     protected=range(prefix), no_edit=no_edit)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), st.floats(0.05, 1.0), st.floats(0.05, 1.0))
def test_a_larger_budget_never_keeps_fewer_tokens(request, first, second):
    """With exact cuts (no room for the next requests, whose size grows with the budget), a larger budget keeps at least as
    much: the rungs act in one order that does not depend on the budget, and stop at the first fit."""
    total = COUNTER.count_request(request).total
    small, large = sorted((max(1, int(total * first)), max(1, int(total * second))))
    try:
        kept_small = trim_request(request, counter=COUNTER, budget=budget_of(small), policy=EXACT).report.tokens_after
    except CannotFitError:
        return
    kept_large = trim_request(request, counter=COUNTER, budget=budget_of(large), policy=EXACT).report.tokens_after
    assert kept_large >= kept_small


# --- real conversations -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONVERSATIONS, ids=lambda p: p.stem)
@pytest.mark.parametrize("fraction", [0.95, 0.7, 0.4, 0.15])
@pytest.mark.parametrize("edit_latest", [True, False])
def test_invariants_on_real_conversations(path, fraction, edit_latest):
    request = conversation_request(path)
    snapshot = copy.deepcopy(request)
    total = COUNTER.count_request(request).total
    check_invariants(request, snapshot, budget_of(int(total * fraction)), TrimPolicy(edit_latest_turn_history=edit_latest))


# --- priorities, reports and errors ---------------------------------------------------------------------


def _tool_conversation(result_chars: int = 6000, turns: int = 6) -> dict:
    messages = [{"role": "system", "content": "You are a coding agent."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"step {turn}: look at file {turn}"})
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "read", "arguments": json.dumps({"n": turn})}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": ("line of code %d\n" % turn) * (result_chars // 16)})
        messages.append({"role": "assistant", "content": f"file {turn} looks fine"})
    return {"model": "gpt-4o", "messages": messages}


def test_under_budget_returns_the_same_object():
    request = _tool_conversation(100, 2)
    result = trim_request(request, counter=COUNTER, budget=compute_budget(128_000))
    assert result.request is request and not result.report.changed and result.report.actions == ()


def test_older_results_are_softened_oldest_first_and_only_as_far_as_needed():
    # Wave 2 softened every result at once, the newest included, however small the excess (a 37,800-character
    # result the agent had just read was cut to 2,000): now the oldest go first, only as far as needed (cut
    # exactly here: the default also leaves room for the next requests), and the three newest stay verbatim
    # while older material can make the room.
    request = _tool_conversation()
    total = COUNTER.count_request(request).total
    budget = budget_of(int(total * 0.75))
    result = trim_request(request, counter=COUNTER, budget=budget, policy=EXACT)
    assert {a.action for a in result.report.actions} == {"compacted"}  # nothing dropped: compacting was enough
    results = [i for i, m in enumerate(request["messages"]) if m["role"] == "tool"]
    touched = sorted(a.index for a in result.report.actions)
    assert touched == results[:len(touched)] and len(touched) <= len(results) - 3  # the oldest, the newest kept
    by_index = dict(zip([i for i in range(len(request["messages"]))], result.request["messages"], strict=True))
    for index in touched:
        content = by_index[index]["content"]
        assert content.startswith(request["messages"][index]["content"][:400]) and COMPACTED_MARKER in content
    for index in results[-3:]:
        assert by_index[index] is request["messages"][index]
    assert 0.98 * budget.budget <= result.report.tokens_after <= budget.budget  # cut to the budget, not past it


def test_a_whole_step_dropped_past_the_need_comes_back_when_the_room_holds_it():
    # A real pydantic-ai conversation (tests/data/conversations/pydanticai_cassette_07): one question, three small
    # tool steps, the middle one the largest. Dropping steps oldest first to make 75 tokens of room took the
    # first (78 tokens) and then the second (153): forwarded at 104 tokens of a 222 budget (47%). The minimal
    # set of cuts drops the second alone and keeps the first: 182 tokens, the notice naming 2 messages.
    data = json.loads((CONVERSATIONS[0].parent / "pydanticai_cassette_07.json").read_text(encoding="utf-8"))
    request = {"model": "gpt-4o", "messages": data["messages"][:7]}
    budget = budget_of(222)
    result = trim_request(request, counter=COUNTER, budget=budget)
    dropped = sorted(a.index for a in result.report.actions if a.action == "dropped")
    assert dropped == [3, 4] and result.report.notice.messages == 2
    assert budget.budget / 2 < result.report.tokens_after == COUNTER.count_request(result.request).total <= 222
    assert [m["role"] for m in result.request["messages"]] == ["user", "assistant", "tool", "user", "assistant", "tool"]
    assert not pairing_problems(result.request["messages"])
    # without the notice (its ~35 tokens) the oldest step alone makes the room, and nothing is told
    quiet = trim_request(request, counter=COUNTER, budget=budget, policy=TrimPolicy(notify_model=False))
    assert sorted(a.index for a in quiet.report.actions if a.action == "dropped") == [1, 2]
    assert quiet.report.notice is None and len(quiet.request["messages"]) == 5
    assert quiet.report.tokens_after == COUNTER.count_request(quiet.request).total <= 222
    # and 100 tokens over, where the first step is not enough: the second leaves alone, nothing told
    quiet = trim_request(request, counter=COUNTER, budget=budget_of(197), policy=TrimPolicy(notify_model=False))
    assert sorted(a.index for a in quiet.report.actions if a.action == "dropped") == [3, 4]
    assert quiet.report.notice is None and 197 / 2 < quiet.report.tokens_after <= 197


def test_older_steps_the_last_drop_took_past_the_aim_come_back():
    # A real SWE-agent run (tests/data/conversations/sweagent_03), its 12th request (7,780 tokens) at a 6,057
    # budget, whose room leaves older history at 4,845. Its oldest steps leave oldest first: 150, 1,040 and
    # 2,196 tokens. The first two with everything after them softened are not enough; the third, taken with
    # them, lands at 4,433. The minimal set of cuts gives the first back (4,583): the two left out stay one
    # run, under one notice, and what follows is unchanged.
    messages = json.loads((CONVERSATIONS[0].parent / "sweagent_03.json").read_text(encoding="utf-8"))["messages"]
    request = {"model": "gpt-4o", "messages": messages[:24]}
    budget = budget_of(6057)
    result = trim_request(request, counter=COUNTER, budget=budget)
    assert [(a.index, a.action) for a in result.report.actions] == [(i, "dropped") for i in (4, 5, 6, 7)]
    assert result.report.notice.messages == 4 and result.report.notice.position == 4
    assert result.report.tokens_after == COUNTER.count_request(result.request).total == 4583
    forwarded = result.request["messages"]
    assert forwarded[:4] == messages[:4] and forwarded[5:] == messages[8:24] and not pairing_problems(forwarded)


def test_a_step_comes_back_only_with_its_question():
    # Older turns: a question, tool steps, an answer. Whatever the last drops overshoot, a step never comes back
    # after its question left: it would follow the previous turn's answer (two assistant messages in a row) or
    # open the conversation. (Found by a search over such conversations: without the rule this one broke.)
    messages = [{"role": "system", "content": "be brief"}]
    for turn, (steps, answer) in enumerate(zip([[20], [20, 60, 60]], [120, 120])):
        messages.append({"role": "user", "content": f"question {turn}"})
        for step, words in enumerate(steps):
            call = f"call_{turn}_{step}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "look", "arguments": "{}"}}]})
            messages.append({"role": "tool", "tool_call_id": call, "content": "result " * words})
        messages.append({"role": "assistant", "content": "answer " * answer})
    messages.append({"role": "user", "content": "and now?"})
    request = {"model": "gpt-4o", "messages": messages}
    total = COUNTER.count_request(request).total
    for policy in (EXACT, TrimPolicy()):
        result = trim_request(request, counter=COUNTER, budget=budget_of(total // 2), policy=policy)
        roles = [m["role"] for m in result.request["messages"] if m["role"] != "system"]
        assert roles[0] == "user" and not pairing_problems(result.request["messages"])
        assert all(not (a == b == "assistant") for a, b in itertools.pairwise(roles)), roles


def test_markers_state_what_was_really_removed():
    """A marker's token figure is what the rewrite saved (it used to be the result's original size)."""
    request = _tool_conversation()
    total = COUNTER.count_request(request).total
    result = trim_request(request, counter=COUNTER, budget=budget_of(int(total * 0.3)))
    checked = 0
    for action in result.report.actions:
        if action.action != "compacted":
            continue
        call_id = request["messages"][action.index]["tool_call_id"]
        text = next(m["content"] for m in result.request["messages"] if m.get("tool_call_id") == call_id)
        claimed = int(re.search(r"~(\d+) tokens\) removed", text).group(1))
        assert claimed == action.tokens_before - action.tokens_after
        removed, total_chars = map(int, re.search(r"(\d+) of (\d+) characters", text).groups())
        assert total_chars == len(request["messages"][action.index]["content"]) and 0 < removed < total_chars
        checked += 1
    assert checked


def test_turns_are_dropped_oldest_first_with_a_report():
    request = _tool_conversation(result_chars=200)
    total = COUNTER.count_request(request).total
    result = trim_request(request, counter=COUNTER, budget=budget_of(int(total * 0.6)))
    report = result.report
    # Turn 0 is the preamble (the system prompt); turn 1 holds the task, opening context: its user message
    # stays with its answer (the turn's last step), its tool step goes first; turn 2 is the first whole turn
    # dropped.
    assert report.dropped_turns[0] == 2 and list(report.dropped_turns) == sorted(report.dropped_turns)
    assert [a.index for a in report.dropped][:3] == [2, 3, 5]
    assert result.request["messages"][1] is request["messages"][1]
    for action in report.dropped:
        assert action.tokens_before > 0 and action.tokens_after == 0 and len(action.content_hash) == 16
    # Room left for the next requests: at most the room (and one unit) under the budget.
    step = math.ceil(TrimPolicy().cache_step_ratio * report.budget.budget)
    assert report.budget.budget - step - 200 <= report.tokens_after <= report.budget.budget
    data = report.as_dict()
    json.dumps(data)  # serialisable for logs
    assert data["tokens_before"] == total and data["actions"]


def test_compacting_is_idempotent_and_an_error_result_keeps_its_head_and_tail():
    # An error result is softened like the others (its head and tail hold its lines that matter), never compacted
    # to its head alone: left whole, it made its step leave whole, or the request refused (a review of 2026-12-07)
    request = _tool_conversation()
    error = request["messages"][3]["content"] = "Error: " + request["messages"][3]["content"] + "Failed: last line"
    total = COUNTER.count_request(request).total
    policy = TrimPolicy(keep_recent_tool_results=0, drop_old_turns=False)
    first = trim_request(request, counter=COUNTER, budget=budget_of(int(total * 0.5)), policy=policy)
    softened = first.request["messages"][3]["content"]
    assert softened.startswith("Error: ") and softened.endswith("Failed: last line") and len(softened) < len(error)
    assert SOFTENED_MARKER in softened and f"{COMPACTED_MARKER} by" not in softened
    compacted = [a.index for a in first.report.actions if a.action == "compacted"]
    assert compacted
    # A compacted result is never compacted again, whatever the budget asks for.
    with pytest.raises(CannotFitError):
        trim_request(first.request, counter=COUNTER, budget=budget_of(100), policy=policy)
    for index in compacted:
        assert first.request["messages"][index]["content"].count(COMPACTED_MARKER) == 1


def test_long_assistant_messages_in_the_agent_loop_are_shortened():
    messages = [{"role": "user", "content": "fix the bug"}]
    for step in range(4):
        messages.append({"role": "assistant", "content": "thinking out loud " * 400})
        messages.append({"role": "user", "content": "ok"} if step == 3 else {"role": "assistant", "content": "hm"})
    request = {"model": "gpt-4o", "messages": messages}
    total = COUNTER.count_request(request).total
    result = trim_request(request, counter=COUNTER, budget=budget_of(int(total * 0.5)), policy=TrimPolicy(drop_old_turns=False))
    assert {a.action for a in result.report.actions} == {"shortened"}


def test_cannot_fit_error_names_the_numbers():
    request = {"model": "gpt-4o", "messages": [{"role": "system", "content": "rules " * 50},
                                                {"role": "user", "content": "word " * 5000}]}
    with pytest.raises(CannotFitError) as info:
        trim_request(request, counter=COUNTER, budget=compute_budget(4000))
    facts, message = info.value.facts, str(info.value)
    assert facts["tokens_before"] == facts["tokens_after_trimming"] > facts["budget"]
    assert facts["protected_tokens"]["latest_turn"] > 5000
    for number in (facts["window"], facts["output_reserve"], facts["budget"], facts["tokens_before"]):
        assert str(number) in message
    assert "latest" in message and "larger context window" in message
    assert "older history" not in message and "new conversation" not in message  # none of it stays


def test_a_refusal_names_the_older_history_that_stays():
    """A review of 2026-12-07: a refusal listed every part that cannot be trimmed but the older history that stays
    (a message no rule may drop, such as a result whose call the server holds), and advised shortening the latest
    message when the older history was the largest part."""
    from budget_hook.trimming.report import cannot_fit

    budget = compute_budget(4000)
    error = cannot_fit("gpt-4o", budget, 9000, 8000, {"system": 100, "latest_turn": 50, "older_history": 7000})
    message = str(error)
    assert "older history 7000 tokens; the largest is the older history" in message
    assert "Start a new conversation" in message or "start a new conversation" in message
    assert error.facts["protected_tokens"]["older_history"] == 7000


def test_stress_conversation_history_fits_128k():
    """miniswe_gemini3_01 history (without its final 445k-token observation) x8 = ~253k tokens -> 128k."""
    data = json.loads(CONVERSATIONS[[p.stem for p in CONVERSATIONS].index("miniswe_gemini3_01")].read_text())
    history = data["messages"][:-1]
    request = {"model": "gpt-4o", "messages": history[:1] + history[1:] * 8}
    result = trim_request(request, counter=COUNTER, budget=compute_budget(128_000))
    assert result.report.tokens_before > 250_000 and result.report.tokens_after <= result.report.budget.budget
    assert pairing_problems(result.request["messages"]) == []


def test_a_refusal_never_claims_more_after_than_before_and_advises_only_what_would_help():
    # the notice was counted into a refused request (23,029 -> 23,056) and the message advised dropping an
    # opening context of 0 tokens and sending fewer of no tool definitions
    request = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "short question"}, {"role": "assistant", "content": "short answer"},
        {"role": "user", "content": "huge " * 5000}]}
    policy = TrimPolicy(keep_opening_context=False)
    total = COUNTER.count_request(request).total
    with pytest.raises(CannotFitError) as caught:
        trim_request(request, counter=COUNTER, budget=budget_of(total // 2), policy=policy)
    facts, message = caught.value.facts, str(caught.value)
    assert facts["tokens_after_trimming"] <= facts["tokens_before"] == total
    assert facts["protected_tokens"]["opening_context"] == 0 and facts["protected_tokens"]["tool_definitions"] == 0
    assert "drop or reduce the opening context" not in message and "send fewer tool definitions" not in message
    assert "Shorten the latest message" in message and "larger context window" in message


def test_a_marker_tells_the_truth_where_no_number_of_tokens_is_a_fixed_point():
    # "999" is one token and "1000" two: claiming either changes the count; the cut moves a little instead
    request = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": ("hello world " * 3000)[:8231]},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]}
    total = COUNTER.count_request(request).total
    result = trim_request(request, counter=COUNTER, budget=budget_of(total - 1000),
                          policy=TrimPolicy(keep_recent_tool_results=0, cache_step_ratio=0))
    [action] = result.report.actions
    claimed = int(re.search(r"~(\d+) tokens\) removed", result.request["messages"][2]["content"]).group(1))
    assert claimed == action.tokens_before - action.tokens_after


def test_softening_a_tool_result_keeps_its_images():
    image = {"type": "image_url", "image_url": {"url": "https://example.com/screenshot.png"}}
    request = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "look at the screen"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "log line\n" * 400}, image]},
        {"role": "assistant", "content": "seen"}, {"role": "user", "content": "and now?"}]}
    total = COUNTER.count_request(request).total
    result = trim_request(request, counter=COUNTER, budget=budget_of(total - 50),
                          policy=TrimPolicy(keep_recent_tool_results=0, cache_step_ratio=0))
    content = result.request["messages"][2]["content"]
    assert image in content and "removed from the middle" in content[0]["text"]


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(role=st.text(max_size=8), content=st.text() | st.lists(JSON_VALUES, max_size=3),
       extra=st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=2))
def test_a_content_hash_is_the_documented_recipe(role, content, extra):
    """docs/operations.md: ``content_hash`` is the first 16 hex digits of SHA-256 over ``json.dumps(message,
    sort_keys=True, separators=(",", ":"))``, so an operator can match a logged hash against a stored message
    (non-ASCII text and lone surrogates included); the memo of recent hashes answers the same."""
    for message in ({**extra, "role": role, "content": content},
                    {"role": role, "content": [{"type": "text", "text": (content if isinstance(content, str) else "")
                                                + "caf\u00e9 \ud800 \U0001f642"}]}):
        recipe = json.dumps(message, sort_keys=True, separators=(",", ":"))
        expected = hashlib.sha256(recipe.encode()).hexdigest()[:16]
        assert content_hash(message) == expected
        assert content_hash(dict(message)) == expected  # again, from the memo where it has a key


def test_the_task_s_last_tool_step_leaves_before_newer_steps():
    """A review of 2026-12-07: a turn's last step stayed with its question, and the task never leaves, so the last
    tool step of the task's turn outlived every newer step (the latest loop's steps went first, or a request that
    dropping it fits was refused). It is a unit of its own now, after the turn's other steps."""
    def call(i):
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "run", "arguments": json.dumps({"cmd": i})}}]}

    def result(i):
        return {"role": "tool", "tool_call_id": f"c{i}", "content": " ".join(f"r{i}_{j:05d}" for j in range(100))}
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Fix the failing test in parser.py"}, call(1), result(1), call(2), result(2),
                {"role": "user", "content": "Also: use pytest -x, not unittest."}, call(3), result(3), call(4), result(4)]
    assert [u.indexes for u in drop_units(messages, {0, 1})] == [(2, 3), (4, 5), (7, 8)]  # the task's last step too
    assert [u.indexes for u in drop_units(messages[:6], {0, 1})] == [(2, 3)]  # the latest turn's last step: never
    # a final reply as the task turn's last step stays with it (its answer)
    answered = [*messages[:6], {"role": "assistant", "content": "Fixed."}, *messages[6:]]
    assert [u.indexes for u in drop_units(answered, {0, 1})] == [(2, 3), (4, 5), (8, 9)]
    request = {"model": "gpt-4o", "messages": messages}
    for budget in (1_300, 1_600):
        out = trim_request(request, counter=COUNTER, budget=budget_of(budget)).request["messages"]
        assert [m for m in out if m in messages[6:]] == messages[6:]  # the latest loop verbatim
        assert not [m for m in out if m in messages[2:6]] and pairing_problems(out) == []
