"""The trimmer cuts only what must go (issue 19): the frontier a graded cut really covers, room a later move
frees given back to the newest results, no unit dropped for the room when it would overshoot it, the growth
anchor's prefix kept, and long older user messages (agent observations sent as user turns) softened rather
than whole turns dropped, when asked."""

from __future__ import annotations

import json
import random

import pytest

from budget_hook.errors import CannotFitError
from budget_hook.shapes import SHAPES
from budget_hook.trimming import TrimPolicy, message_text, trim_request

from .conftest import CONVERSATIONS, conversation_request
from .test_agent_trimming import GPT, _steps, budget_of

STABLE_POLICY = dict(keep_recent_tool_results=0, drop_opening_context=False, reduce_opening_context=False,
                     shorten_assistant_messages=False, drop_latest_turn_steps=False)


def _agent_conversation(seed: int) -> dict:
    rng = random.Random(seed)
    words = ["alpha", "delta", "def", "{", "}", "x=1;", "1234", "the", "return", "\n", "\t"]
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix the bug " * 5}]
    for number in range(8):
        call = {"id": f"c{number}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{number}",
                      "content": " ".join(rng.choice(words) for _ in range(rng.randint(50, 1500)))}]
    messages.append({"role": "user", "content": "and now?"})
    return {"model": "gpt-4o", "messages": messages}


@pytest.mark.parametrize("seed", range(6))
def test_a_cut_that_covers_the_next_request_does_not_move(seed):
    """A grid over budgets and rooms (deterministic, beside the hypothesis property in ``test_agent_trimming``):
    when the next request is computed at the same growth anchor and the previous forwarded request plus the
    next steps fits, it is a prefix of the next forwarded request; and the anchor stays for most of them (it
    moves only once the conversation has outgrown the room)."""
    request = _agent_conversation(seed)
    checked = same = 0
    for ratio in (0.1, 0.2, 0.5):
        policy = TrimPolicy(cache_step_ratio=ratio, **STABLE_POLICY)
        for sizes in ([40], [300], [120, 80]):
            steps = _steps(sizes)
            later = {**request, "messages": [*request["messages"], *steps]}
            total = GPT.count_request(later).total
            for percent in range(20, 92, 3):
                budget = budget_of(int(total * percent / 100))
                try:
                    first = trim_request(request, counter=GPT, budget=budget, policy=policy)
                    second = trim_request(later, counter=GPT, budget=budget, policy=policy)
                except CannotFitError:
                    continue
                extended = {**request, "messages": [*first.request["messages"], *steps]}
                if not first.report.changed or GPT.count_request(extended).total > budget.budget:
                    continue
                checked += 1
                anchor = first.report.anchor if first.report.anchor is not None else len(request["messages"])
                if second.report.anchor != anchor:
                    continue
                same += 1
                kept = first.request["messages"]
                assert second.request["messages"] == [*kept, *steps], (ratio, sizes, percent)
    assert checked > 50 and same / checked > 0.8, (same, checked)


def _image_user() -> dict:
    return {"role": "user", "content": [{"type": "text", "text": "alpha"},
                                        {"type": "image_url", "image_url": {"url": "https://example.com/s.png"}}]}


def _call(number: int) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{number}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}


def test_room_a_later_drop_frees_goes_back_to_the_newest_result():
    """The newest result was cut while the steps holding the other newest result were still there; once they
    left, the cut was no longer needed: the result is forwarded whole (found by hypothesis: 35 -> 34 tokens,
    with the request 300 tokens under its budget)."""
    messages = [_image_user(), _call(1), {"role": "tool", "tool_call_id": "call_1", "content": "Error: alpha"},
                _image_user(), _image_user(), _image_user(), _image_user(), _call(2),
                {"role": "tool", "tool_call_id": "call_2", "content": "alpha" * 31},
                {"role": "assistant", "content": "alpha"}, {"role": "user", "content": "alpha"}]
    request = {"model": "gpt-4o", "messages": messages}
    policy = TrimPolicy(keep_recent_tool_results=2, edit_latest_turn_history=False, tool_result_keep_chars=0,
                        tool_result_min_chars=0, keep_opening_context=False, soften_tool_results=False,
                        cache_step_ratio=0, notify_model=False, drop_opening_context=False,
                        reduce_opening_context=False)
    budget = budget_of(GPT.count_request(request).total // 4)
    result = trim_request(request, counter=GPT, budget=budget, policy=policy)
    assert {a.index for a in result.report.actions if a.action == "dropped"} == {0, 1, 2, 3, 4, 5}
    assert messages[8] in result.request["messages"]  # whole
    assert all(a.action == "dropped" for a in result.report.actions)
    assert result.report.tokens_after <= budget.budget


def test_a_unit_that_would_overshoot_the_room_is_not_dropped_for_it():
    """A tool-step loop on a 267-token budget, 30 tokens over: dropping the first step fits the budget, and
    the next step would take the request far below the room left for the next requests (39% of the budget,
    as drop groups of a cache step once did): it stays, the room is made by softening instead."""
    messages = json.loads(next(p for p in CONVERSATIONS if p.stem == "pydanticai_cassette_07").read_text())["messages"]
    request = {"model": "gpt-4o", "messages": messages[:7]}
    total = GPT.count_request(request).total
    budget = budget_of(int(total * 0.9))
    result = trim_request(request, counter=GPT, budget=budget, policy=TrimPolicy())
    assert result.report.tokens_after >= budget.budget / 2
    assert [a.index for a in result.report.actions if a.action == "dropped"] == [1, 2]


def _swe_agent_request() -> dict:
    return conversation_request(next(p for p in CONVERSATIONS if p.stem == "sweagent_05"))


def _small_excess(request: dict, tokens: int = 60):
    return budget_of(GPT.count_request(request).total - tokens)


def test_observations_sent_as_user_turns_are_softened_before_turns_are_dropped():
    """SWE-agent sends each observation as a user message. With ``soften_user_messages`` a small excess is
    covered by cutting the middle out of an older observation (head and tail kept, the marker saying how
    much left), and no turn is dropped; without it the oldest turns leave. Cut exactly to the budget
    (``cache_step_ratio: 0``): the room the default leaves for the next requests is more than softening frees."""
    request = _swe_agent_request()
    messages = request["messages"]
    budget = _small_excess(request)
    softened = trim_request(request, counter=GPT, budget=budget,
                            policy=TrimPolicy(soften_user_messages=True, cache_step_ratio=0))
    assert not [a for a in softened.report.actions if a.action == "dropped"]
    edited = [a for a in softened.report.actions if a.action == "shortened"]
    assert edited and all(messages[a.index]["role"] == "user" for a in edited)
    for action in edited:
        text = message_text(softened.request["messages"][action.index])
        original = message_text(messages[action.index])
        assert "removed from the middle" in text
        assert text.startswith(original[:500]) and text.endswith(original[-300:])
    # the opening context (the demonstration, the task) and the latest user message are never softened
    latest = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert all(1 < a.index < latest for a in edited)
    assert softened.request["messages"][latest] == messages[latest]

    dropped = trim_request(request, counter=GPT, budget=budget, policy=TrimPolicy(cache_step_ratio=0))
    assert [a for a in dropped.report.actions if a.action == "dropped"]
    assert not [a for a in dropped.report.actions if a.action == "shortened"]


@pytest.mark.parametrize("shape_name", ["chat", "anthropic", "responses"])
def test_a_softened_user_message_is_written_back_in_each_shape(shape_name):
    """A softened user message is a valid message of its own shape: an ``input_text`` part on
    ``/v1/responses`` (an ``output_text`` part is only an assistant's), text blocks on ``/v1/messages``."""
    request = _swe_agent_request()
    shape = SHAPES.get(shape_name)
    if shape_name == "chat":
        body = request
    elif shape_name == "anthropic":
        system = request["messages"][0]["content"]
        body = {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": system,
                "messages": [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
                             for m in request["messages"][1:]]}
    else:
        body = {"model": "gpt-4o", "instructions": request["messages"][0]["content"],
                "input": [{"type": "message", "role": m["role"], "content": [
                    {"type": "output_text" if m["role"] == "assistant" else "input_text", "text": m["content"]}]}
                    for m in request["messages"][1:]]}
    budget = budget_of(shape.count(body, GPT) - 60)
    result = shape.trim(body, counter=GPT, budget=budget, policy=TrimPolicy(soften_user_messages=True, cache_step_ratio=0))
    assert [a for a in result.report.actions if a.action == "shortened"]
    assert not [a for a in result.report.actions if a.action == "dropped"]
    assert shape.count(result.request, GPT) <= budget.budget
    if shape_name == "responses":
        for item in result.request["input"]:
            kinds = {part["type"] for part in item["content"]}
            assert kinds == ({"output_text"} if item["role"] == "assistant" else {"input_text"}), item["role"]
    if shape_name == "anthropic":
        assert [m["role"] for m in result.request["messages"]] == [m["role"] for m in body["messages"]]
