"""A user's own text sent beside tool results is a user message (a fourteenth attack review).

Anthropic's tool-use docs have a user interject mid-loop by sending text after the ``tool_result`` blocks of a
user message ("IMPORTANT: stop using npm, use yarn"); Gemini clients send text parts beside ``functionResponse``
parts. The view used to join that text to the last result, so the trimmer did not see a user message there: it
left with its tool step under ``drop_latest_turn_steps`` while the older task stayed (dropped at budgets 3,000,
4,000, 5,000 and 7,000 of 8,393 tokens, kept at 6,000), where the same conversation on chat keeps it at every
budget. Now the text is a user message of its own after the results in the view, as LiteLLM's chat translation
has it: the latest turn starts there (where ``current_turn_start`` starts it for thinking), it is never dropped
nor edited, and the write-back keeps it in one native message with the results that stay, valid for Anthropic
(results first, roles alternating, no empty text block, no more cache breakpoints).
"""

from __future__ import annotations

import copy
import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError
from budget_hook.shapes import SHAPES
from budget_hook.shapes.anthropic import anthropic_pairing_problems, build_view
from budget_hook.shapes.anthropic_blocks import current_turn_start
from budget_hook.shapes.gemini import _current_turn_start
from budget_hook.trimming.structure import latest_turn_start

ANTHROPIC, CHAT, GEMINI = SHAPES.get("anthropic"), SHAPES.get("chat"), SHAPES.get("gemini")
CLAUDE = TokenCounter.for_model("anthropic/claude-sonnet-4-5")
GPT = TokenCounter.for_model("gpt-4o")
GEM = TokenCounter.for_model("gemini/gemini-2.5-pro")
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)
SAY = "IMPORTANT: stop using npm, use yarn from now on, and do not touch package-lock.json"
WORDS = ["alpha", "beta", "gamma", "delta", "file", "line", "error", "value", "result", "token", "config", "path"]


def budget_of(tokens: int, reserve: int = 100):
    return compute_budget(tokens + reserve, requested_output_tokens=reserve, policy=NO_MARGIN)


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def anthropic_body(sizes=(1500, 300, 1500, 1500, 1500, 400), say_after: int = 1) -> dict:
    """The review's conversation: a task, six Bash steps, the instruction sent after the second step's result."""
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing build."}]}]
    for step, size in enumerate(sizes):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{step}", "name": "Bash", "input": {"command": f"npm run b{step}"}}]})
        content = [{"type": "tool_result", "tool_use_id": f"toolu_{step}", "content": words(size, step)}]
        if step == say_after:
            content.append({"type": "text", "text": SAY})
        messages.append({"role": "user", "content": content})
    return {"model": "claude-sonnet-4-5", "max_tokens": 500, "system": "You are Claude Code.", "messages": messages}


def chat_body(sizes=(1500, 300, 1500, 1500, 1500, 400), say_after: int = 1) -> dict:
    """The same conversation as LiteLLM's chat translation has it: the instruction a user message after the result."""
    messages: list[dict] = [{"role": "system", "content": "You are Claude Code."},
                            {"role": "user", "content": "Fix the failing build."}]
    for step, size in enumerate(sizes):
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"toolu_{step}", "type": "function",
            "function": {"name": "Bash", "arguments": json.dumps({"command": f"npm run b{step}"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"toolu_{step}", "content": words(size, step)})
        if step == say_after:
            messages.append({"role": "user", "content": SAY})
    return {"model": "claude-sonnet-4-5", "max_tokens": 500, "messages": messages}


def gemini_body(sizes=(1500, 300, 1500, 1500, 1500, 400), say_after: int = 1) -> dict:
    contents: list[dict] = [{"role": "user", "parts": [{"text": "Fix the failing build."}]}]
    for step, size in enumerate(sizes):
        contents.append({"role": "model", "parts": [
            {"functionCall": {"name": "run_shell_command", "args": {"command": f"npm run b{step}"}}}]})
        parts: list[dict] = [{"functionResponse": {"name": "run_shell_command",
                                                   "response": {"output": words(size, step)}}}]
        if step == say_after:
            parts.append({"text": SAY})
        contents.append({"role": "user", "parts": parts})
    return {"systemInstruction": {"parts": [{"text": "You are Gemini CLI."}]}, "contents": contents}


def breakpoints(value) -> int:
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(breakpoints(v) for v in value.values())
    return sum(breakpoints(v) for v in value) if isinstance(value, list) else 0


def anthropic_problems(sent: dict, forwarded: dict) -> list[str]:
    """What Anthropic refuses, or what this change promises, in a forwarded ``/v1/messages`` body."""
    messages = forwarded["messages"]
    problems = list(anthropic_pairing_problems(messages))
    problems += [f"roles {a['role']} twice" for a, b in itertools.pairwise(messages) if a["role"] == b["role"]]
    for index, message in enumerate(messages):
        content = message["content"] if isinstance(message["content"], list) else []
        kinds = [block.get("type") for block in content]
        first_other = next((i for i, kind in enumerate(kinds) if kind != "tool_result"), len(kinds))
        if "tool_result" in kinds[first_other:]:
            problems.append(f"messages[{index}]: a block before a tool_result block")
        problems += [f"messages[{index}]: an empty text block" for block in content
                     if block.get("type") == "text" and not block.get("text")]
    if breakpoints(forwarded["messages"]) > breakpoints(sent["messages"]):
        problems.append("more cache_control breakpoints than sent")
    return problems


def trimmed(shape, body: dict, counter, tokens: int):
    before = copy.deepcopy(body)
    result = shape.trim(body, counter=counter, budget=budget_of(tokens))
    assert body == before  # the caller's request is never mutated
    return result


def generated_trim(shape, body: dict, counter, fraction: float):
    """The property tests' trim at ``fraction`` of the body's count (its budget beside it), or None when it cannot
    fit; each outcome is a hypothesis event."""
    budget = max(1, int(shape.count(body, counter) * fraction))
    try:
        result = trimmed(shape, body, counter, budget)
    except CannotFitError:
        event("cannot fit")
        return None, budget
    event("trimmed" if result.report.actions else "as sent")
    return result, budget


# --- the review's conversation ---------------------------------------------------------------------------------


def test_the_instruction_beside_a_result_stays_at_every_budget_as_on_chat():
    """Before: dropped at 3,000, 4,000, 5,000 and 7,000, kept at 6,000 (not monotonic); chat kept it at every one."""
    body, chat = anthropic_body(), chat_body()
    total = ANTHROPIC.count(body, CLAUDE)
    for tokens in range(2500, total + 1, 500):
        result, on_chat = trimmed(ANTHROPIC, body, CLAUDE, tokens), trimmed(CHAT, chat, GPT, tokens)
        assert SAY in json.dumps(on_chat.request["messages"])
        forwarded = result.request
        assert anthropic_problems(body, forwarded) == [], tokens
        assert result.report.tokens_after <= tokens
        said = [m for m in forwarded["messages"] if m["role"] == "user" and {"type": "text", "text": SAY} in
                (m["content"] if isinstance(m["content"], list) else [])]
        assert len(said) == 1, tokens  # kept verbatim, as a block of a user message


def test_the_latest_turn_starts_where_the_instruction_is_as_thinking_reads_it():
    body = anthropic_body()
    view = build_view(body)
    start = latest_turn_start(view.request["messages"])
    assert view.refs[start].message == current_turn_start(body["messages"]) == 4
    assert view.request["messages"][start] == {"role": "user", "content": [{"type": "text", "text": SAY}]}


def test_a_dropped_step_leaves_its_result_and_the_instruction_joins_the_user_message_before():
    """When the instruction's own step must leave (the older turn's head and last step), its tool_result block leaves;
    the text stays, merged after the user message before it, so roles still alternate."""
    body = anthropic_body(sizes=(300, 3000, 300, 300, 300, 300))
    body["messages"][1:1] = [{"role": "assistant", "content": [{"type": "text", "text": "On it."}]},
                             {"role": "user", "content": [{"type": "text", "text": "Run the steps. " + words(800, 9)}]}]
    result = trimmed(ANTHROPIC, body, CLAUDE, 2000)
    forwarded = result.request["messages"]
    assert anthropic_problems(body, result.request) == []
    assert "toolu_1" not in json.dumps(forwarded)
    assert forwarded[2]["role"] == "user" and forwarded[2]["content"][-1] == {"type": "text", "text": SAY}
    assert forwarded[3]["content"] == body["messages"][7]["content"]  # the instruction's turn goes on as sent


def test_gemini_text_beside_a_response_stays_at_every_budget():
    """Before: dropped at 3,000, 4,000 and 6,000, kept at 5,000."""
    body = gemini_body()
    total = GEMINI.count(body, GEM)
    for tokens in range(2500, total + 1, 500):
        result = trimmed(GEMINI, body, GEM, tokens)
        assert GEMINI.problems(result.request) == [], tokens
        assert result.report.tokens_after <= tokens
        said = [c for c in result.request["contents"] if c["role"] == "user" and {"text": SAY} in c["parts"]]
        assert len(said) == 1, tokens
        roles = [c["role"] for c in result.request["contents"]]
        assert all(a != b for a, b in itertools.pairwise(roles)), roles


def test_with_thinking_the_turn_the_instruction_opens_keeps_its_thinking_step_and_the_instruction():
    """Claude thinking once per turn: the instruction opens a turn (Anthropic strips earlier thinking there), so the
    first step after it keeps its signed thinking, and the instruction stays, at every budget."""
    body = anthropic_body(say_after=2)
    body["thinking"], body["max_tokens"] = {"type": "enabled", "budget_tokens": 1024}, 2000
    for index in (1, 7):  # the task's first step and the instruction's
        body["messages"][index]["content"].insert(0, {"type": "thinking", "thinking": "Run the build first. " * 30,
                                                      "signature": "c2ln" * 40})
    total = ANTHROPIC.count(body, CLAUDE)
    for tokens in range(1500, total + 1, 500):
        forwarded = trimmed(ANTHROPIC, body, CLAUDE, tokens).request
        assert anthropic_problems(body, forwarded) == [], tokens
        assert body["messages"][7] in forwarded["messages"], tokens
        assert SAY in json.dumps(forwarded["messages"]), tokens


def test_a_system_reminder_beside_an_older_result_is_read_as_a_user_message_too():
    """Claude Code's reminders beside results are user-side text, read as chat reads them: kept while older steps
    leave, and the result beside one may be compacted. Before, the result and reminder were one unit never edited, so
    they left with their step: 10 messages dropped, 15,361 tokens forwarded at a budget of 24,238; now 6 dropped,
    19,363 tokens at 24,243, the reminder kept."""
    from .test_agent_trimming import claude_code_body

    reminder = {"type": "text", "text": "<system-reminder>The file src/f2.py was modified by the user.</system-reminder>"}
    body = claude_code_body(steps=8, result_chars=6000)
    body["messages"][10]["content"].append(reminder)
    total = ANTHROPIC.count(body, CLAUDE)
    result = trimmed(ANTHROPIC, body, CLAUDE, int(total * 0.6))
    forwarded = result.request
    assert anthropic_problems(body, forwarded) == []
    assert sum(reminder in m["content"] for m in forwarded["messages"] if isinstance(m["content"], list)) == 1
    assert (10, "compacted") in {(a.index, a.action) for a in result.report.actions}
    assert result.report.tokens_after > 19000


# --- generated conversations ----------------------------------------------------------------------------------

STEP = st.tuples(st.integers(20, 900), st.sampled_from(["", "", "say", "reminder", "note"]), st.booleans())


@st.composite
def interjected(draw):
    steps = draw(st.lists(STEP, min_size=2, max_size=7))
    if not any(kind in ("say", "reminder") for _, kind, _ in steps):
        steps[draw(st.integers(0, len(steps) - 1))] = (steps[0][0], "say", False)
    breakpoint_at = draw(st.one_of(st.none(), st.integers(0, len(steps) - 1)))
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing build."}]}]
    for step, (size, kind, error) in enumerate(steps):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{step}", "name": "Bash", "input": {"command": f"step {step}"}}]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{step}", "content": words(size, step)}
        if error:
            result["is_error"] = True
        content: list[dict] = [result]
        if kind == "say":
            content.append({"type": "text", "text": f"{SAY} (said at step {step})"})
        elif kind == "reminder":
            content.append({"type": "text", "text": f"<system-reminder>todo {step}</system-reminder>"})
        elif kind == "note":
            content.append({"type": "text", "text": f"screenshot {step}"})
        if breakpoint_at == step:
            content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
        messages.append({"role": "user", "content": content})
    return {"model": "claude-sonnet-4-5", "max_tokens": 200, "system": "You are Claude Code.", "messages": messages}


def latest_user_text(body: dict) -> list[dict]:
    """The non-result blocks of the last user message that has any (the latest user message)."""
    for message in reversed(body["messages"]):
        rest = [b for b in message["content"] if b.get("type") != "tool_result"]
        if message["role"] == "user" and rest:
            return rest
    return []  # pragma: no cover


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=interjected(), fraction=st.floats(0.3, 1.0))
def test_generated_interjections_are_kept_and_the_request_stays_valid(body, fraction):
    view = build_view(body)
    start = latest_turn_start(view.request["messages"])
    assert view.refs[start].message == current_turn_start(body["messages"])  # one reading of turns
    result, budget = generated_trim(ANTHROPIC, body, CLAUDE, fraction)
    if result is None:
        return
    forwarded = result.request
    assert anthropic_problems(body, forwarded) == []
    assert result.report.tokens_after <= budget
    latest = [{k: v for k, v in b.items() if k != "cache_control"} for b in latest_user_text(body)]
    kept = [{k: v for k, v in b.items() if k != "cache_control"}
            for m in forwarded["messages"] if m["role"] == "user" for b in m["content"]]
    assert all(block in kept for block in latest)  # the latest user message: never dropped nor edited


@pytest.mark.parametrize("say_after", [0, 2, 4])
def test_budgets_that_keep_it_form_one_range(say_after):
    """Monotonic: once a budget holds the instruction, every larger one does."""
    body = anthropic_body(say_after=say_after)
    total = ANTHROPIC.count(body, CLAUDE)
    kept = []
    for tokens in range(1000, total + 1, 250):
        try:
            kept.append(SAY in json.dumps(trimmed(ANTHROPIC, body, CLAUDE, tokens).request))
        except CannotFitError:
            kept.append(False)
    assert kept[-1] and kept == sorted(kept)


@st.composite
def gemini_interjected(draw):
    steps = draw(st.lists(st.tuples(st.integers(20, 900), st.booleans()), min_size=2, max_size=7))
    if not any(say for _, say in steps):
        steps[draw(st.integers(0, len(steps) - 1))] = (steps[0][0], True)
    contents: list[dict] = [{"role": "user", "parts": [{"text": "Fix the failing build."}]}]
    for step, (size, say) in enumerate(steps):
        contents.append({"role": "model", "parts": [{"functionCall": {"name": "run", "args": {"step": step}}}]})
        parts: list[dict] = [{"functionResponse": {"name": "run", "response": {"output": words(size, step)}}}]
        if say:
            parts.append({"text": f"{SAY} (said at step {step})"})
        contents.append({"role": "user", "parts": parts})
    return {"contents": contents}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=gemini_interjected(), fraction=st.floats(0.3, 1.0))
def test_generated_gemini_interjections_are_kept_and_the_request_stays_valid(body, fraction):
    view = GEMINI.view(body)
    start = latest_turn_start(view.request["messages"])
    assert view.refs[start].content == _current_turn_start(body["contents"])  # one reading of turns
    result, _ = generated_trim(GEMINI, body, GEM, fraction)
    if result is None:
        return
    contents = result.request["contents"]
    assert GEMINI.problems(result.request) == []
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(contents))
    latest = next(c for c in reversed(body["contents"]) if any("text" in p for p in c["parts"]))
    said = [p for p in latest["parts"] if "text" in p]
    kept = [p for c in contents if c["role"] == "user" for p in c["parts"]]
    assert all(part in kept for part in said)
    for entry in contents:  # responses first in a user content
        kinds = ["functionResponse" in p for p in entry["parts"]]
        assert kinds == sorted(kinds, reverse=True)
