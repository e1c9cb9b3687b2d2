"""What real agents keep, on the request bodies their clients really sent (``tests/data/clients``).

* Codex: the AGENTS.md / environment message and the task are opening context; when compacting is
  enough nothing is dropped (the issue: 17,473 tokens, 16,000 budget, compacting alone fit);
* aider: the files added to the chat and the repository map stay (7,636 tokens, 6,400 budget);
* Claude-Code-shaped ``/v1/messages``: the first user message (``<system-reminder>`` blocks + task) stays,
  softening the recent results comes before dropping any turn that holds them, pinning never leaves two
  ``user`` messages in a row;
* ``/v1/responses`` continuations keep a ``function_call_output`` whose call lives on the server;
* a growing conversation is cut at the same places turn after turn (stateless: any instance, same result),
  as a property: when the previous forwarded request plus the new messages fits, it is a prefix of the next.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.counting.cache import COUNT_CACHE
from budget_hook.errors import CannotFitError, MalformedRequestError
from budget_hook.shapes import SHAPES
from budget_hook.shapes.anthropic import anthropic_pairing_problems
from budget_hook.shapes.responses import responses_pairing_problems
from budget_hook.trimming import TrimPolicy, trim_request
from budget_hook.trimming.engine import growth_anchor
from budget_hook.trimming.report import NOTICE_MARKER
from budget_hook.trimming.structure import pairing_problems

from .conftest import CONVERSATIONS
from .test_trimming import conversations

CLIENTS = Path(__file__).parent / "data" / "clients"
GPT = TokenCounter.for_model("gpt-4o")
CLAUDE = TokenCounter.for_model("claude-sonnet-4-5")
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)
RESERVE = 1000
RESPONSES, CHAT, ANTHROPIC = SHAPES.get("responses"), SHAPES.get("chat"), SHAPES.get("anthropic")


def budget_of(tokens: int):
    return compute_budget(tokens + RESERVE, requested_output_tokens=RESERVE, policy=NO_MARGIN)


def client_run(name: str) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((CLIENTS / name).glob("*.json"))]


# --- Codex ----------------------------------------------------------------------------------------------


def test_codex_opening_context_stays_and_compacting_is_not_followed_by_drops():
    body = client_run("codex/cx_agentsmd")[-1]
    assert body["input"][2]["content"][0]["text"].startswith("# AGENTS.md instructions")
    total = RESPONSES.count(body, GPT)
    for share in (0.9, 0.75, 0.6, 0.45):
        result = RESPONSES.trim(body, counter=GPT, budget=budget_of(int(total * share)))
        forwarded = result.request["input"]
        assert forwarded[:4] == body["input"][:4], share  # developer x2, AGENTS.md + environment, the task
        assert responses_pairing_problems(forwarded) == []
        if result.report.dropped:  # the oldest steps of the loop go, the notice right after the task says so
            assert forwarded[4]["content"][0]["text"].startswith(NOTICE_MARKER)


def test_codex_growing_run_keeps_the_previous_forwarded_request_as_prefix():
    bodies = client_run("codex/cx_trim")
    budget = budget_of(int(RESPONSES.count(bodies[-1], GPT) * 0.75))
    forwarded = [RESPONSES.trim(body, counter=GPT, budget=budget) for body in bodies]
    trimmed = [(body, r) for body, r in zip(bodies, forwarded, strict=True) if r.report.changed]
    assert len(trimmed) >= 3
    for body, result in trimmed:
        # the output the agent has just read stays verbatim; what was cut is the oldest
        assert result.request["input"][-1] == body["input"][-1]
        assert result.report.tokens_after >= budget.budget * 0.75
    # Each turn adds 13% of this budget: keeping the newest outputs verbatim at full budget use means a
    # frontier moves almost every turn; the cut stays after the opening context and the first steps.
    for (_, earlier), (_, later) in itertools.pairwise(trimmed):
        assert later.request["input"][:4] == earlier.request["input"][:4]


# --- aider ----------------------------------------------------------------------------------------------


def _aider_request() -> dict:
    body = client_run("aider/ai_trim")[1]  # the request of the issue: 7,636 tokens
    assert body["messages"][11]["content"].startswith("I have *added these files to the chat*")
    return body


def test_aider_files_added_to_the_chat_stay_at_the_issues_budget():
    body = _aider_request()
    assert CHAT.count(body, GPT) == 7636
    result = CHAT.trim(body, counter=GPT, budget=compute_budget(8000, requested_output_tokens=1200))
    assert result.report.budget.budget == 6400 and result.report.tokens_after <= 6400
    kept = result.request["messages"]
    for index in (0, 11, 12, 13):  # system, the files + "Ok", the question
        assert body["messages"][index] in kept
    # the example turns and the history went first; then, rather than refuse, the older acknowledged
    # context (the repository map and its "Ok"), reported, with the notice
    dropped = {a.index for a in result.report.dropped}
    assert {3, 4, 7, 8} <= dropped and not dropped & {0, 1, 11, 12, 13}  # 1: the first question, leading run
    assert result.report.notice is not None and result.report.notice.messages == len(dropped)
    # nothing dropped only to reach a target below the budget
    assert result.report.tokens_after > 0.8 * 6400


def test_aider_acknowledged_context_goes_last_and_the_task_never():
    body = _aider_request()
    small = CHAT.trim(body, counter=GPT, budget=budget_of(2500))
    assert body["messages"][11] not in small.request["messages"]  # the file went, as the very last rung
    assert body["messages"][0] in small.request["messages"] and body["messages"][13] in small.request["messages"]
    # with the last rung off, the request is refused, naming the opening context and the switch
    with pytest.raises(CannotFitError) as caught:
        CHAT.trim(body, counter=GPT, budget=budget_of(2500),
                  policy=TrimPolicy(drop_opening_context=False, reduce_opening_context=False))
    assert caught.value.facts["protected_tokens"]["opening_context"] > 2500
    assert "keep_opening_context" in str(caught.value)
    # and the leading run (here the system prompt and the first example question) is never dropped: too
    # small a budget for it is refused
    with pytest.raises(CannotFitError):
        CHAT.trim(body, counter=GPT, budget=budget_of(1000))
# --- Claude-Code-shaped /v1/messages ------------------------------------------------------------------


def claude_code_body(steps: int = 5, result_chars: int = 5000) -> dict:
    reminders = [{"type": "text", "text": f"<system-reminder>\n{topic}: {topic} details " * 3 + "\n</system-reminder>"}
                 for topic in ("model", "date", "git status", "skills", "todo list")]
    messages: list[dict] = [{"role": "user", "content": [*reminders, {"type": "text", "text": "Find the failing test."}]}]
    for step in range(steps):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Reading file {step}."},
            {"type": "tool_use", "id": f"toolu_{step}", "name": "Read", "input": {"path": f"src/f{step}.py"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{step}",
             "content": "".join(f"{n:>5}  line {n} of f{step}.py\n" for n in range(result_chars // 22))}]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "The bug is in f3.py, line 12."}]})
    messages.append({"role": "user", "content": "Now fix it."})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1000, "system": "You are Claude Code.", "messages": messages}


def test_claude_code_task_stays_and_softening_comes_before_any_drop():
    body = claude_code_body()
    total = ANTHROPIC.count(body, CLAUDE)
    result = ANTHROPIC.trim(body, counter=CLAUDE, budget=budget_of(int(total * 0.5)))
    new = result.request["messages"]
    first = new[0]["content"]
    assert first[:len(body["messages"][0]["content"])] == body["messages"][0]["content"]  # task + reminders
    assert new[-1] == body["messages"][-1]
    # The oldest results are softened first; the newest the agent has just read stays verbatim (wave 2 softened
    # all five at once, the newest included).
    originals = [m["content"][0]["content"] for m in body["messages"] if m["role"] == "user"
                 and isinstance(m["content"], list) and m["content"][0].get("type") == "tool_result"]
    results = [m["content"][0]["content"] for m in new if m["role"] == "user" and isinstance(m["content"], list)
               and m["content"][0].get("type") == "tool_result"]
    assert results[-1] == originals[-1]
    assert all(a.action == "compacted" for a in result.report.actions if a.action != "dropped")


@pytest.mark.parametrize("policy", [TrimPolicy(), TrimPolicy(pin_first_user_message=True, keep_opening_context=False)],
                         ids=["opening-context", "pinned"])
def test_claude_code_cut_keeps_roles_alternating_and_tells_the_model(policy):
    body = claude_code_body(steps=8, result_chars=6000)
    total = ANTHROPIC.count(body, CLAUDE)
    result = ANTHROPIC.trim(body, counter=CLAUDE, budget=budget_of(int(total * 0.06)), policy=policy)
    new = result.request["messages"]
    assert result.report.dropped
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(new)), [m["role"] for m in new]
    assert anthropic_pairing_problems(new) == []
    first = new[0]["content"]
    assert first[:len(body["messages"][0]["content"])] == body["messages"][0]["content"]  # task + reminders
    notice = result.report.notice
    assert notice is not None and notice.messages == len(result.report.dropped)
    assert sum(NOTICE_MARKER in json.dumps(m) for m in new) == 1
    assert "Now fix it." in json.dumps(new[-1])


def _without_cache_control(value):
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    return [_without_cache_control(v) for v in value] if isinstance(value, list) else value


def _typed(message: dict) -> bool:
    """A message the user typed (a prompt), not tool results."""
    return message["role"] == "user" and any(b.get("type") == "text" and not b["text"].startswith("<system-reminder>")
                                             for b in message["content"])


@pytest.mark.parametrize("share", [0.5, 0.75])
def test_a_real_claude_code_run_is_trimmed_valid_with_its_latest_turn_and_signed_thinking_whole(share):
    """The requests Claude Code 2.1.331 really sent over three turns of a review (``cc_review``: its own Read
    and Bash output, signed thinking on every assistant message, a cache breakpoint on the last message, 22k
    tokens of system prompt and tools), each trimmed natively at a budget of half or three quarters of the last.
    Every trim is valid for Anthropic (pairs, alternation), leaves the system prompt, the tools and every kept
    thinking block as sent, keeps the latest turn verbatim wherever the older turns alone can make the room,
    and the growing run keeps its previous forwarded request as a prefix where that fits."""
    bodies = client_run("claude_code/cc_review")
    budget = compute_budget(int(ANTHROPIC.count(bodies[-1], CLAUDE) * share) + 32000, requested_output_tokens=32000,
                            policy=NO_MARGIN)
    previous, kept_prefix, trims, verbatim = None, 0, 0, 0
    for body in bodies:
        if ANTHROPIC.count(body, CLAUDE) <= budget.budget:
            previous = None
            continue
        result = ANTHROPIC.trim(body, counter=CLAUDE, budget=budget)
        trims += 1
        new = result.request
        assert result.report.tokens_after == ANTHROPIC.count(new, CLAUDE) <= budget.budget
        assert anthropic_pairing_problems(new["messages"]) == []
        assert all(a["role"] != b["role"] for a, b in itertools.pairwise(new["messages"]))
        assert {k: v for k, v in new.items() if k != "messages"} == {k: v for k, v in body.items() if k != "messages"}
        sent = [b for m in body["messages"] if m["role"] == "assistant" for b in m["content"]
                if b["type"] == "thinking"]
        assert all(b in sent for m in new["messages"] if m["role"] == "assistant" for b in m["content"]
                   if b["type"] == "thinking")
        prompts = [i for i, m in enumerate(body["messages"]) if _typed(m)]
        latest = body["messages"][prompts[-1]:]
        opening_and_latest = {**body, "messages": [body["messages"][0], *latest]}
        if len(prompts) > 1 and ANTHROPIC.count(opening_and_latest, CLAUDE) + 200 <= budget.budget:
            # the older turns alone can make the room (200 tokens for the notice): the latest one stays verbatim
            assert _without_cache_control(new["messages"][-len(latest):]) == _without_cache_control(latest)
            verbatim += 1
        forwarded = _without_cache_control(new["messages"])
        kept_prefix += previous is not None and forwarded[:len(previous)] == previous
        previous = forwarded
    assert trims >= 4 and kept_prefix >= 2 and verbatim >= 1


# --- /v1/responses continuations ----------------------------------------------------------------------


def test_previous_response_id_outputs_are_never_dropped_nor_blamed_on_the_client():
    items = [{"type": "function_call_output", "call_id": "call_srv", "output": "server-side call result " * 40}]
    for turn in range(6):
        items += [{"role": "user", "content": f"question {turn} " + "context " * 400},
                  {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"answer {turn}"}]}]
    items.append({"role": "user", "content": "and now?"})
    body = {"model": "gpt-4o", "previous_response_id": "resp_abc", "input": items}
    total = RESPONSES.count(body, GPT)
    result = RESPONSES.trim(body, counter=GPT, budget=budget_of(int(total * 0.3)),
                            policy=TrimPolicy(keep_opening_context=False))
    assert result.report.dropped
    assert items[0]["call_id"] in [i.get("call_id") for i in result.request["input"]]
    assert RESPONSES.problems(body) == [] and RESPONSES.problems(result.request) == []


# --- cache stability and statelessness ------------------------------------------------------------------


def test_the_same_request_gives_the_same_result_on_a_fresh_instance():
    body = client_run("codex/cx_trim")[-1]
    budget = budget_of(12_000)
    first = RESPONSES.trim(body, counter=GPT, budget=budget)
    COUNT_CACHE.clear()
    again = RESPONSES.trim(copy.deepcopy(body), counter=TokenCounter.for_model("gpt-4o"), budget=budget)
    assert again.request == first.request and again.report.as_dict() == first.report.as_dict()


def test_real_conversations_replayed_keep_their_prefix_most_of_the_time():
    pairs = []
    for path in [p for p in CONVERSATIONS if p.stem in ("sweagent_02", "taubench_airline_04", "miniswe_gemini3_03")]:
        messages = json.loads(path.read_text())["messages"]
        cuts = [i + 1 for i in range(len(messages) - 1) if messages[i + 1]["role"] == "assistant"
                and messages[i]["role"] != "assistant"]
        requests = [{"model": "gpt-4o", "messages": messages[:cut]} for cut in cuts]
        budget = budget_of(int(GPT.count_request(requests[-1]).total * 0.6))
        forwarded = []
        for request in requests:
            try:
                forwarded.append(trim_request(request, counter=GPT, budget=budget))
            except CannotFitError:
                forwarded.append(None)
        pairs += [(a.request["messages"], b.request["messages"]) for a, b in itertools.pairwise(forwarded)
                  if a is not None and b is not None and a.report.changed and b.report.changed]
    stable = sum(later[:len(earlier)] == earlier for earlier, later in pairs)
    # 4-18k-token budgets whose newest results are 1-2k tokens each; bench/replay.py measures the rest
    assert pairs and stable / len(pairs) >= 0.6, f"{stable} of {len(pairs)}"


def _steps(sizes: list[int]) -> list[dict]:
    steps: list[dict] = []
    for number, size in enumerate(sizes):
        call = {"id": f"step_{number}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
        steps += [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"step_{number}", "content": f"output {number} " * size}]
    return steps


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), st.lists(st.integers(1, 600), min_size=1, max_size=4), st.floats(0.2, 0.9),
       st.sampled_from([0.1, 0.2, 0.5]))
def test_when_the_next_steps_fit_on_top_of_the_last_cut_the_cut_does_not_move(request, sizes, fraction, ratio):
    """Cache stability as a property of the growth anchor: request N+1 is request N plus the agent loop's next
    steps (a tool call and its result each). When both are computed at the same anchor (the conversation grew
    less than the room since it was last trimmed afresh) and the previous forwarded request plus the new steps
    fits the budget, it is an exact prefix of the next one, whatever the rungs did: the anchor's trim is the
    same and what was added since is forwarded verbatim.

    Excluded, because they are cut only as far as each request needs: the newest results
    (``keep_recent_tool_results: 0`` here) and the last stages (opening context and task)."""
    earlier = request
    if pairing_problems(earlier["messages"]) or earlier["messages"][-1]["role"] == "assistant":
        return
    steps = _steps(sizes)
    later = {**request, "messages": [*request["messages"], *steps]}
    budget = budget_of(max(1, int(GPT.count_request(later).total * fraction)))
    policy = TrimPolicy(cache_step_ratio=ratio, keep_recent_tool_results=0, drop_opening_context=False,
                        reduce_opening_context=False)
    try:
        first = trim_request(earlier, counter=GPT, budget=budget, policy=policy)
        second = trim_request(later, counter=GPT, budget=budget, policy=policy)
    except CannotFitError:
        return
    if not first.report.changed:
        return
    def anchor(result, request):
        return len(request["messages"]) if result.report.anchor is None else result.report.anchor

    if anchor(second, later) != anchor(first, earlier):
        # grown past the room (a new anchor), or the anchor's trim cannot stay (what it must keep plus what was
        # added is over, or it had to cut its own newest results): the later request is trimmed afresh
        return
    extended = {**request, "messages": [*first.request["messages"], *steps]}
    if GPT.count_request(extended).total > budget.budget:
        return
    kept = first.request["messages"]
    assert second.request["messages"][:len(kept)] == kept
    assert second.request["messages"][len(kept):] == steps  # what was added, verbatim


_GROWTH = st.lists(st.tuples(st.sampled_from(["step", "step", "user"]), st.integers(1, 600)), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(conversations(), _GROWTH, st.floats(0.2, 0.9), st.sampled_from([0.1, 0.2, 0.5]), st.integers(0, 3),
       st.booleans())
def test_an_anchors_trim_taken_from_the_memo_is_the_trim_itself(request, growth, fraction, ratio, recent, opening):
    """The requests of a conversation between two anchors reuse the anchor's trim from a per-process memo
    (``trimming.settled``) when it holds for what they need: a cache of a pure function. Replayed request by
    request with the memo warm, every answer (the forwarded request and the whole report) is the answer of a
    process that never saw the conversation."""
    from budget_hook.trimming.settled import ANCHOR_TRIMS

    if pairing_problems(request["messages"]):
        return
    messages = list(request["messages"])
    requests = [{**request, "messages": list(messages)}]
    for number, (kind, size) in enumerate(growth):
        if kind == "user":
            messages += [{"role": "assistant", "content": f"answer {number} " * 3},
                         {"role": "user", "content": f"question {number} " * size}]
        else:
            messages += [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"g{number}", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"g{number}", "content": f"out {number} " * size}]
        requests.append({**request, "messages": list(messages)})
    budget = budget_of(max(1, int(GPT.count_request(requests[-1]).total * fraction)))
    policy = TrimPolicy(cache_step_ratio=ratio, keep_recent_tool_results=recent, drop_opening_context=opening,
                        reduce_opening_context=opening)

    def trim(body):
        try:
            result = trim_request(body, counter=GPT, budget=budget, policy=policy)
        except CannotFitError as exc:
            return str(exc)
        return result.request, result.report

    ANCHOR_TRIMS.clear()
    warm = [trim(body) for body in requests]
    for body, answer in zip(requests, warm, strict=True):
        ANCHOR_TRIMS.clear()
        assert trim(body) == answer


def _tamper(forwarded: dict) -> None:
    """What a proxy might do to a request it forwards: change its messages and their parts in place."""
    for message in forwarded.get("messages") or forwarded.get("input") or []:
        if isinstance(message, dict):
            message["tampered"] = True
            content = message.get("content")
            if isinstance(content, list):
                for part in content:
                    if isinstance(part, dict):
                        part["cache_control"] = {"type": "ephemeral"}
                content.append({"type": "text", "text": "tampered"})


def test_real_runs_replayed_with_the_memo_warm_get_the_answers_of_a_fresh_process():
    """The memo on real material: every real conversation and client run (Codex on /v1/responses, aider),
    replayed turn by turn at 50% and 75% of its last request, gets from a process that trimmed the earlier
    requests (the memo warm) the answer of a process that never saw the conversation; and the memo is used.
    What a proxy does to a forwarded request afterwards (here: every forwarded message and part changed in
    place) never reaches the next request's answer."""
    from budget_hook.trimming.settled import ANCHOR_TRIMS

    runs = []
    for path in CONVERSATIONS:
        messages = json.loads(path.read_text())["messages"]
        runs.append((CHAT, [{"model": "gpt-4o", "messages": messages[:cut]} for cut in range(2, len(messages) + 1)]))
    runs += [(RESPONSES if name.startswith("codex") else CHAT, client_run(name))
             for name in ("codex/cx_trim", "codex/cx_base", "aider/ai_trim")]
    hits = 0
    for shape, requests in runs:
        for share in (0.5, 0.75):
            budget = budget_of(max(1, int(shape.count(requests[-1], GPT) * share)))

            def trim(body, shape=shape, budget=budget):
                try:
                    result = shape.trim(body, counter=GPT, budget=budget)
                except CannotFitError as exc:
                    return str(exc)
                return result.request, result.report
            ANCHOR_TRIMS.clear()
            warm = []
            for body in requests:
                answer = trim(copy.deepcopy(body))  # each request its own objects, as parsed from the wire
                warm.append(copy.deepcopy(answer))
                if not isinstance(answer, str):
                    _tamper(answer[0])
            hits += ANCHOR_TRIMS.hits
            for body, answer in zip(requests, warm, strict=True):
                ANCHOR_TRIMS.clear()
                assert trim(body) == answer
    assert hits > 50, hits


def test_a_memoized_trim_forwards_new_objects_each_time():
    """Rewritten results whose content is a list of parts: the memo hands each request new message and part
    objects, so a proxy changing one forwarded request in place changes nothing in the next."""
    from budget_hook.trimming.settled import ANCHOR_TRIMS

    messages = [{**m, "content": [{"type": "text", "text": m["content"] * 4}]} if m["role"] == "tool" else m
                for m in _growing_agent_loop(30)]
    budget = budget_of(16000)
    ANCHOR_TRIMS.clear()
    cuts = range(40, len(messages) + 1, 2)
    warm = []
    for end in cuts:
        result = trim_request(copy.deepcopy({"model": "gpt-4o", "messages": messages[:end]}), counter=GPT,
                              budget=budget)
        warm.append(copy.deepcopy(result.request))
        _tamper(result.request)
    assert ANCHOR_TRIMS.hits > 0
    assert any(isinstance(m["content"], list) and "compacted" in m["content"][0]["text"]
               for m in warm[-1]["messages"] if m["role"] == "tool")
    for end, forwarded in zip(cuts, warm, strict=True):
        ANCHOR_TRIMS.clear()
        assert trim_request({"model": "gpt-4o", "messages": messages[:end]}, counter=GPT,
                            budget=budget).request == forwarded


_ROLES = st.sampled_from(["user", "assistant", "tool"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_ROLES, st.integers(1, 500)), min_size=1, max_size=40), st.integers(0, 40),
       st.integers(0, 3000), st.integers(0, 2000))
def test_the_growth_anchor_is_a_function_of_the_conversation_so_far(items, cut, room, headroom):
    """The anchor of a request is found the same way in every later request of the conversation: a later
    request's anchor is never earlier, and one found within the earlier request is the earlier one's."""
    messages = [{"role": role} for role, _ in items]
    counts = [size for _, size in items]
    cut = max(1, min(cut, len(messages)))
    earlier = growth_anchor(messages[:cut], counts[:cut], room, headroom)
    later = growth_anchor(messages, counts, room, headroom)
    assert 0 < earlier <= cut and 0 < later <= len(messages)
    assert later >= earlier
    if later < cut or (later == cut and cut < len(messages)):
        assert later == earlier


def test_the_record_carries_the_notice_and_the_opening_context_size():
    from .test_proxy_hook import make_plugin, run_hook

    body = {**_aider_request(), "model": "g", "litellm_call_id": "call-aider-record"}
    out = run_hook(make_plugin(8000, output_reserve_min=1200, output_reserve_max=1200), body)
    record = out["metadata"]["budget_hook"]
    assert record["action"] == "trimmed" and record["budget"]["budget"] <= 6400
    dropped = [a for a in record["actions"] if a["action"] == "dropped"]
    assert record["notice"] == {"messages": len(dropped), "tokens": sum(a["tokens_before"] for a in dropped)}
    assert record["protected_tokens"]["opening_context"] > 4000  # the files added to the chat, kept
    forwarded = out["messages"]
    assert sum(m["content"].startswith(NOTICE_MARKER) for m in forwarded if isinstance(m["content"], str)) == 1


def _growing_agent_loop(steps: int) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix the bug"}]
    for number in range(steps):
        call = {"id": f"c{number}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": f"c{number}", "content": f"line {number} of output\n" * 40}]
    return messages


def test_a_growing_loop_is_forwarded_as_its_anchors_trim_plus_what_was_added():
    """Turn by turn, an agent loop over its budget: each request is the previous forwarded one plus the new
    step, verbatim (the report names the anchor), until it has grown past the room; then it is trimmed afresh
    and leaves room again. The record names the anchor too."""
    from .test_proxy_hook import make_plugin, run_hook

    messages = _growing_agent_loop(30)
    budget = budget_of(6000)
    previous, chained, fresh = None, 0, 0
    for end in range(6, len(messages) + 1, 2):
        request = {"model": "gpt-4o", "messages": messages[:end]}
        result = trim_request(request, counter=GPT, budget=budget)
        if not result.report.changed:
            continue
        forwarded = result.request["messages"]
        if result.report.anchor is None:
            fresh += 1
        else:
            chained += 1
            assert forwarded[-(end - result.report.anchor):] == messages[result.report.anchor:end]
            assert previous is not None and forwarded[:len(previous)] == previous  # the cache keeps it
        previous = forwarded
    assert chained > 2 * fresh > 0, (chained, fresh)

    body = {"model": "g", "litellm_call_id": "call-anchor-record", "messages": messages}
    record = run_hook(make_plugin(8000), body)["metadata"]["budget_hook"]
    assert record["action"] == "trimmed"
    result = trim_request({"model": "gpt-4o", "messages": messages}, counter=GPT,
                          budget=budget_of(record["budget"]["budget"]))
    assert record.get("anchor") == result.report.anchor


def test_an_anchor_that_cut_its_own_newest_results_is_kept_once_newer_results_came():
    # A real SWE-agent run (tests/data/conversations/sweagent_03), its requests turn by turn at half the last
    # one's tokens. The anchor (8 messages) is all one agent loop, so its three results are its newest, and its
    # trim had to cut them: every later request was then trimmed afresh, each cut somewhere else (three requests
    # that could each have kept the one before; 8 of the 33 such pairs of bench/trimmers.py). For a request
    # that added results since, only the anchor's last results are still among its newest: the anchor's trim
    # with only those kept as newest (none, once three were added) is the same for every such request.
    messages = json.loads((CONVERSATIONS[0].parent / "sweagent_03.json").read_text(encoding="utf-8"))["messages"]
    budget = budget_of(4038)
    results = []
    for end in (14, 16, 18):
        result = trim_request({"model": "gpt-4o", "messages": messages[:end]}, counter=GPT, budget=budget)
        assert result.report.anchor == 8 and result.report.tokens_after <= budget.budget
        forwarded = result.request["messages"]
        assert forwarded[-(end - 8):] == messages[8:end]  # the three newest results (and all since) verbatim
        assert not pairing_problems(forwarded)
        results.append(forwarded)
    for earlier, later in itertools.pairwise(results):
        assert later[:len(earlier)] == earlier
    # two results added: the anchor's last result is still among the newest, and stays whole
    forwarded = trim_request({"model": "gpt-4o", "messages": messages[:12]}, counter=GPT, budget=budget).request["messages"]
    assert messages[7] in forwarded and forwarded[-4:] == messages[8:12]


def test_a_native_shape_names_its_anchor_as_the_native_message():
    """On /v1/messages the anchor is the native message the view's anchor stands for (tool results are user
    messages there, one view message per block)."""
    chat = _growing_agent_loop(12)
    native: list[dict] = []
    for message in chat[1:]:
        if message["role"] == "assistant":
            call = message["tool_calls"][0]
            native.append({"role": "assistant", "content": [{"type": "tool_use", "id": call["id"], "name": "read",
                                                             "input": {}}]})
        elif message["role"] == "tool":
            native.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": message["tool_call_id"],
                                                        "content": message["content"]}]})
        else:
            native.append(message)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "be brief", "messages": native}
    anthropic = SHAPES.get("anthropic")
    counter = TokenCounter.for_model("claude-sonnet-4-5")
    total = anthropic.count(body, counter)
    anchored = 0
    for percent in range(50, 96, 5):  # the budgets at which the request extends an earlier trimmed one
        result = anthropic.trim(body, counter=counter, budget=budget_of(total * percent // 100))
        anchor = result.report.anchor
        if anchor is None:
            continue
        anchored += 1
        assert body["messages"][anchor]["role"] == "assistant" and anchor % 2 == 1  # a native index
        assert result.request["messages"][-(len(native) - anchor):] == native[anchor:]
    assert anchored >= 3


# --- clamp_max_tokens -------------------------------------------------------------------------------------


def _long_chat_with_max_tokens(max_tokens: int, marker: str) -> dict:
    messages = [{"role": "system", "content": "be brief"}]
    for turn in range(6):
        messages += [{"role": "user", "content": f"q{turn} " + "lorem ipsum " * 100},
                     {"role": "assistant", "content": f"a{turn} " + "dolor sit " * 100}]
    messages.append({"role": "user", "content": "last"})
    return {"model": "g", "messages": messages, "max_tokens": max_tokens, "extra_body": {"max_tokens": max_tokens},
            "litellm_call_id": f"call-clamp-{marker}"}


def test_clamp_max_tokens_lowers_an_oversized_allowance_before_any_input_is_cut():
    from .test_proxy_hook import make_plugin, run_hook

    body = _long_chat_with_max_tokens(4500, "on")
    snapshot = copy.deepcopy(body["messages"])
    tokens = CHAT.count(body, GPT)
    window = tokens + 3000  # the input fits only if the 4,500-token allowance gives way
    out = run_hook(make_plugin(window, clamp_max_tokens=True, max_tokens_floor=1000), body)
    record = out["metadata"]["budget_hook"]
    lowered = window - math.ceil(window * 0.05) - tokens
    assert out["max_tokens"] == out["extra_body"]["max_tokens"] == lowered < 4500
    assert out["messages"] == snapshot  # nothing of the input was cut
    assert record["action"] == "trimmed" and record["budget"]["output_reserve"] == lowered
    assert record["counts"]["dropped"] == record["counts"]["compacted"] == 0
    assert any("max_tokens lowered from 4500" in w for w in record["warnings"])

    # never below the floor: then the input is trimmed as usual
    floored = run_hook(make_plugin(window, clamp_max_tokens=True, max_tokens_floor=4000),
                       _long_chat_with_max_tokens(4500, "floor"))
    assert floored["max_tokens"] == 4000 and floored["metadata"]["budget_hook"]["counts"]["dropped"] > 0
    # off (the default): the allowance stays and the input is cut
    off = run_hook(make_plugin(window), _long_chat_with_max_tokens(4500, "off"))
    assert off["max_tokens"] == 4500 and off["metadata"]["budget_hook"]["counts"]["dropped"] > 0
    # shadow: decided and reported, but the request goes as sent
    shadow = run_hook(make_plugin(window, clamp_max_tokens=True, max_tokens_floor=1000, mode="shadow"),
                      _long_chat_with_max_tokens(4500, "shadow"))
    assert shadow["max_tokens"] == 4500 and shadow["metadata"]["budget_hook"]["action"] == "would_trim"


# --- Gemini: what a subagent's attack found ----------------------------------------------------------------

GEMINI, GEMINI_COUNTER = SHAPES.get("gemini"), TokenCounter.for_model("gemini-2.5-pro")


def test_gemini_text_sent_with_a_function_response_keeps_the_response():
    """The latest content answers a call and asks about it: the response must stay with the question (it
    used to be its own view turn, dropped with the call before it)."""
    big = "lorem ipsum dolor sit amet " * 400
    body = {"contents": [
        {"role": "user", "parts": [{"text": "Task: fix the bug in foo.py"}]},
        {"role": "model", "parts": [{"text": "Sure, here's my plan. " + big}]},
        {"role": "user", "parts": [{"text": "go on, and also " + big}]},
        {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"path": "foo.py"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"content": "def foo(): 1"}}},
                                   {"text": "here is the file; what is wrong?"}]},
    ]}
    total = GEMINI.count(body, GEMINI_COUNTER)
    result = GEMINI.trim(body, counter=GEMINI_COUNTER, budget=budget_of(total - 200))
    contents = result.request["contents"]
    assert contents[-1] == body["contents"][-1] and contents[-2] == body["contents"][-2]
    assert GEMINI.problems(result.request) == []


def test_gemini_thought_parts_and_signatures_are_never_rewritten():
    thought = {"text": "Thinking about the fix. " * 40, "thought": True, "thoughtSignature": "c2lnbmF0dXJl" * 20}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "Task: fix the bug"}]},
        {"role": "model", "parts": [thought, {"text": "The answer is long. " * 250}]},
        {"role": "user", "parts": [{"text": "more context " * 300}]},
        {"role": "model", "parts": [{"text": "Noted."}]},
        {"role": "user", "parts": [{"text": "thanks, now fix it"}]},
    ]}
    total = GEMINI.count(body, GEMINI_COUNTER)
    for share in (0.9, 0.6, 0.3):
        try:
            result = GEMINI.trim(body, counter=GEMINI_COUNTER, budget=budget_of(int(total * share)))
        except CannotFitError:
            continue
        for content in result.request["contents"]:
            for part in content["parts"]:
                assert "c2lnbmF0dXJl" not in part.get("text", "")  # a signature never leaks into text
                if part.get("thought"):
                    assert part == thought
        assert not any(a.action == "shortened" and a.index == 1 for a in result.report.actions)


@pytest.mark.parametrize("where, part", [
    ("contents[1].parts[0]", {"text": "hidden " * 50, "functionCall": {"name": "lookup", "args": {}}}),
    ("contents[2].parts[0]", {"text": "hidden " * 50, "function_response": {"name": "lookup", "response": {}}}),
    ("contents[2].parts[0].functionResponse.parts[0]", {"functionResponse": {"name": "lookup", "response": {},
                                                        "parts": [{"text": "x", "inlineData": {"data": "AA"}}]}}),
])
def test_a_gemini_part_carrying_two_data_is_refused_naming_it(where, part):
    """A part carries one datum (Gemini's ``Part.data`` oneof: Gemini itself refuses a second). Counted, such a
    part was its call or response only, while LiteLLM's generateContent adapter (any group without a native
    generateContent route) forwards its ``text`` first: a million characters passed as 42 tokens."""
    contents = [{"role": "user", "parts": [{"text": "what does the tool say?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "lookup", "args": {}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {}}}]}]
    index = int(where[9])
    contents[index] = {**contents[index], "parts": [part]}
    with pytest.raises(MalformedRequestError) as caught:
        GEMINI.count({"contents": contents}, GEMINI_COUNTER)
    assert caught.value.field == where and "this one has" in str(caught.value)


def test_an_empty_text_beside_a_gemini_call_is_no_second_datum():
    """Gemini reads ``"text": ""`` as unset (clients send it beside a call and its signature): no refusal."""
    body = {"contents": [{"role": "user", "parts": [{"text": "weather?"}]},
                         {"role": "model", "parts": [{"text": "", "functionCall": {"name": "w", "args": {}},
                                                      "thoughtSignature": "c2ln"}]},
                         {"role": "user", "parts": [{"text": "", "functionResponse": {"name": "w", "response": {}}}]}]}
    assert GEMINI.count(body, GEMINI_COUNTER) > 0
    # beside media, an empty text is unset too: Gemini reads (and bills) the image, so it is counted
    from .test_provider_undercounts import png

    image = {"inlineData": {"mimeType": "image/png", "data": png(1024, 1024).split(",", 1)[1]}}
    alone = GEMINI.count({"contents": [{"role": "user", "parts": [image]}]}, GEMINI_COUNTER)
    beside = GEMINI.count({"contents": [{"role": "user", "parts": [{"text": "", **image}]}]}, GEMINI_COUNTER)
    assert beside == alone > 200
