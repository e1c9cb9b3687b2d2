"""End to end with the shapes real agent clients send: what they need on every turn reaches the provider.

Each request goes through a real litellm proxy with budget_hook to the fake provider (``fake_provider.py``),
which records every payload and rejects what the real APIs reject: on ``/v1/messages`` roles that do not
alternate and unpaired ``tool_use``/``tool_result``; on ``/v1/responses`` a ``function_call_output`` whose
call is neither in ``input`` nor (with ``previous_response_id``) on the server. The assertions read what
the fake upstream really received. What they prove:

* Claude Code (``/v1/messages``): the opening ``<system-reminder>`` blocks and the task reach the provider
  in order; tool results are shortened in the middle, then old ones cut to their head, and steps are dropped
  only when that is not enough; what is dropped is announced by the gateway's notice, merged into a user
  message; roles still alternate and every ``tool_result`` answers the ``tool_use`` just before it, at every
  budget down to the one that leaves only the opening and the latest turn.
* A ``/v1/responses`` continuation (``previous_response_id``): a ``function_call_output`` whose call lives
  on the server is kept while older turns are dropped, and the request is not reported invalid.
* aider (the recorded request of the issue): the system prompt, the files added to the chat with their "Ok"
  and the question reach the provider verbatim; the repository map goes (last rung) only because the four
  together are over the budget; the forwarded request is not cut far below the budget.
* Codex CLI (a recorded session of 7 growing requests): the developer messages, the AGENTS.md/environment
  message and the task are forwarded unchanged on every turn; softening the exec outputs is enough, so no
  item is dropped; every output keeps its call; the forwarded ``input`` of a trimmed turn is (mostly) an
  exact prefix of the next one's, so the provider's prompt cache keeps working.
"""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import httpx
import pytest

from budget_hook.counting import TokenCounter
from budget_hook.shapes.anthropic import anthropic_pairing_problems, count_anthropic
from budget_hook.shapes.responses import count_responses, responses_pairing_problems
from budget_hook.trimming.report import COMPACTED_MARKER, NOTICE_MARKER

from ..conftest import load_json
from .harness import Process, upstream_payloads, wait_for_record

pytestmark = pytest.mark.e2e

CLAUDE = TokenCounter.for_model("anthropic/claude-sonnet-4-5-4k")
GPT = TokenCounter.for_model("gpt-4o")
CODEX_RUN = "clients/codex/cx_agentsmd"
#: a result cut to its head ("compacted by"), not one shortened in the middle ("compacted in the middle")
COMPACTED_HEAD_MARKER = f"{COMPACTED_MARKER} by"


def post(proxy: Process, path: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}{path}", json=body, timeout=120,
                      headers={"authorization": "Bearer sk-default", **(headers or {})})


def post_and_capture(proxy: Process, upstream: Process, path: str, body: dict,
                     headers: dict | None = None) -> tuple[httpx.Response, list[dict]]:
    """Post and return the bodies the upstream received for this request (the tests of a session run one at a
    time, so whatever the record gained meanwhile is this request's), for requests that cannot carry a tag
    without changing what the test checks is forwarded verbatim."""
    before = len(upstream_payloads(upstream))
    response = post(proxy, path, body, headers)
    return response, [p["body"] for p in upstream_payloads(upstream)[before:]]


def sent(upstream: Process, path_end: str, marker: str) -> list[dict]:
    return [p["body"] for p in upstream_payloads(upstream)
            if p["path"].rstrip("/").endswith(path_end) and marker in json.dumps(p["body"])]


def texts(content: Any) -> str:
    """All the text of a message's content (a string or blocks), for 'contains' checks."""
    return content if isinstance(content, str) else json.dumps(content)


# --- the fake provider is as strict as the real APIs (or the 200s below would prove nothing) --------------


def test_the_fake_provider_rejects_what_the_real_apis_reject(proxy, upstream):
    """Requests that fit (the gateway forwards them untouched) but break the APIs' rules: the fake's 400s."""
    repeated = {"model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "first [e2e-fake-alternation]"}, {"role": "user", "content": "second"}]}
    response = post(proxy, "/v1/messages", repeated)
    assert response.status_code == 400
    message = response.json()["error"]["message"].replace('\\"', '"')  # LiteLLM quotes the provider's JSON body
    assert 'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row' \
        in message
    assert len(sent(upstream, "/messages", "e2e-fake-alternation")) == 1  # it was the provider's answer

    orphan = {"model": "small", "input": [{"type": "function_call_output", "call_id": "call_gone", "output": "42"},
                                          {"role": "user", "content": "and then? [e2e-fake-orphan]"}]}
    response = post(proxy, "/v1/responses", orphan)
    assert response.status_code == 400
    assert "No tool call found for function call output with call_id call_gone." in response.text
    # With previous_response_id the call lives on the server: the same input is accepted.
    response = post(proxy, "/v1/responses", {**orphan, "previous_response_id": "resp_abc"})
    assert response.status_code == 200, response.text
    assert len(sent(upstream, "/responses", "e2e-fake-orphan")) == 2
    # a built-in tool's output without its call, as OpenAI words it
    custom = {"model": "small", "input": [{"type": "custom_tool_call_output", "call_id": "call_patch", "output": "ok"},
                                          {"role": "user", "content": "and then? [e2e-fake-custom-orphan]"}]}
    response = post(proxy, "/v1/responses", custom)
    assert response.status_code == 400
    assert "No tool call found for custom tool call output with call_id call_patch." in response.text


# --- Claude Code on /v1/messages ------------------------------------------------------------------------

REMINDERS = [
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n"
    "Codebase and user instructions are shown below. Be sure to adhere to these instructions.\n"
    "Contents of /repo/CLAUDE.md (project instructions, checked into the codebase):\n\n"
    "- Run `make test` before committing.\n- Keep functions short.\n- Never edit generated files.\n"
    "</system-reminder>",
    "<system-reminder>\nThe user opened the file /repo/src/parser.py in the IDE. This may or may not be related "
    "to the current task.\n</system-reminder>",
    "<system-reminder>\nThis is a reminder that your todo list is currently empty. DO NOT mention this to the "
    "user explicitly because they are already aware.\n</system-reminder>",
]


def claude_code_session(marker: str, result_chars: tuple[int, ...] = (3800,) * 5) -> dict:
    """A Claude-Code-shaped request: the reminders and the task, an agent loop of one tool step per entry of
    ``result_chars`` (the size of its ``Read`` result), the final answer, and the user's next request (tagged
    with ``marker``)."""
    first = [{"type": "text", "text": text} for text in REMINDERS]
    first.append({"type": "text", "text": "The parser crashes on empty input. Find out why."})
    messages: list[dict] = [{"role": "user", "content": first}]
    for step, chars in enumerate(result_chars):
        tool_id = f"toolu_{marker.replace('-', '_')}_{step}"
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Let me look at part {step} of the parser."},
            {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": f"/repo/src/parser_{step}.py"}},
        ]})
        source = "".join(f"{line:>6}\tdef parse_{step}_{line}(tokens): return tokens[{line}] if tokens else None\n"
                         for line in range(chars // 60 + 1))
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                      "content": source[:chars]}]})
    messages.append({"role": "assistant", "content": [
        {"type": "text", "text": "The crash comes from indexing an empty token list in parse_0_0."}]})
    messages.append({"role": "user", "content": [{"type": "text", "text": f"Now fix it. [{marker}]"}]})
    return {"model": "claude", "max_tokens": 512, "system": "You are Claude Code, a coding agent.",
            "tools": [{"name": "Read", "description": "Read a file",
                       "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
            "messages": messages}


def tool_results(messages: list[dict]) -> list[dict]:
    return [block for message in messages if isinstance(message["content"], list) for block in message["content"]
            if block.get("type") == "tool_result"]


def assert_sound_for_anthropic(body: dict, forwarded: dict) -> None:
    """What Claude Code needs from any trimmed request, checked on what the provider received."""
    messages = forwarded["messages"]
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles  # roles strictly alternate
    assert anthropic_pairing_problems(messages) == []
    for index, message in enumerate(messages):  # every tool_result answers a tool_use just before it
        blocks = message["content"] if isinstance(message["content"], list) else []
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if results:
            previous = messages[index - 1]["content"]
            assert results <= {b.get("id") for b in previous if b.get("type") == "tool_use"}
    opening = body["messages"][0]["content"]
    assert messages[0]["role"] == "user" and messages[0]["content"][:len(opening)] == opening  # all, in order
    assert messages[-1]["role"] == "user" and "Now fix it." in texts(messages[-1]["content"])
    assert forwarded["system"] == body["system"] and forwarded["tools"] == body["tools"]


def test_claude_code_keeps_its_reminders_and_task_and_announces_what_it_drops(proxy, upstream):
    """Five ~3.8 KB results in a 4,000-token window: the newest result, the one the agent has just read, is
    cut last; the oldest steps go first, softened ones after them only as far as needed, and the model is
    told."""
    body = claude_code_session("e2e-cc")
    assert count_anthropic(body, CLAUDE) > 4000

    response = post(proxy, "/v1/messages", body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    [forwarded] = sent(upstream, "/messages", "e2e-cc]")
    assert_sound_for_anthropic(body, forwarded)
    assert count_anthropic(forwarded, CLAUDE) <= int(response.headers["x-budget-input-budget"]) == 3288
    kept = tool_results(forwarded["messages"])
    originals = tool_results(body["messages"])
    assert kept and kept[-1]["tool_use_id"] == originals[-1]["tool_use_id"]
    # what goes goes oldest first: the kept results are the newest ones
    assert [r["tool_use_id"] for r in kept] == [r["tool_use_id"] for r in originals[len(originals) - len(kept):]]
    assert int(response.headers["x-budget-dropped-messages"]) > 0
    user_texts = [texts(m["content"]) for m in forwarded["messages"] if m["role"] == "user"]
    assert sum(NOTICE_MARKER in text for text in user_texts) == 1
    assert NOTICE_MARKER in texts(forwarded["messages"][0]["content"])  # merged into the opening user message
    assert forwarded["messages"][-2] == body["messages"][-2]             # the turn's last step (the answer) stays


def test_claude_code_small_recent_results_stay_and_the_oldest_step_goes_before_any_head_only_cut(proxy, upstream):
    """Three big old results and two small recent ones: softening the old ones is not enough, so the oldest
    step goes (a whole tool step, with the notice) before any result is cut to its head; the newest stay as
    sent."""
    body = claude_code_session("e2e-cc-compact", result_chars=(3800, 3800, 3800, 600, 600))
    assert count_anthropic(body, CLAUDE) > 4000

    response = post(proxy, "/v1/messages", body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    [forwarded] = sent(upstream, "/messages", "e2e-cc-compact]")
    assert_sound_for_anthropic(body, forwarded)
    results = [json.dumps(result["content"]) for result in tool_results(forwarded["messages"])]
    assert not any(COMPACTED_HEAD_MARKER in r for r in results)
    assert results[-2:] == [json.dumps(r["content"]) for r in tool_results(body["messages"])[3:]]  # small: as sent
    assert int(response.headers["x-budget-dropped-messages"]) > 0
    assert count_anthropic(forwarded, CLAUDE) >= 0.75 * int(response.headers["x-budget-input-budget"])


@pytest.mark.parametrize("cap", [2500, 1800, 1000])  # 1,000: only the opening and the last turn fit
def test_claude_code_under_a_tight_budget_still_alternates_roles(proxy, upstream, cap):
    """The client tightens the budget until old steps must go: the provider still accepts the request (it
    rejects consecutive same-role messages), the dropped steps are announced, the opening stays."""
    marker = f"e2e-cc-cap-{cap}"
    body = claude_code_session(marker)

    response = post(proxy, "/v1/messages", body, headers={"x-budget-max-input-tokens": str(cap)})

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-input-budget"] == str(cap)
    [forwarded] = sent(upstream, "/messages", f"{marker}]")
    assert_sound_for_anthropic(body, forwarded)
    assert count_anthropic(forwarded, CLAUDE) <= cap
    assert int(response.headers["x-budget-dropped-messages"]) > 0
    notices = [m for m in forwarded["messages"] if m["role"] == "user" and NOTICE_MARKER in texts(m["content"])]
    assert len(notices) == 1 and len(notices[0]["content"]) > 1  # merged into a user message, not one of its own


# --- /v1/responses continuation -------------------------------------------------------------------------


def test_responses_continuation_keeps_the_output_whose_call_is_on_the_server(proxy, upstream):
    marker = "e2e-srv-continuation"
    items: list[dict] = [{"type": "function_call_output", "call_id": "call_srv",
                          "output": "build log: " + "compiled module ok; " * 50}]  # ~1 KB
    for turn in range(8):
        items += [
            {"role": "user", "content": f"Older question {turn}: " + "please review the design notes " * 70},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": f"Older answer {turn}: " + "the design looks sound " * 70}]},
        ]
    items.append({"role": "user", "content": f"So, does the build pass? [{marker}]"})
    body = {"model": "small", "input": items, "previous_response_id": "resp_abc"}
    assert count_responses(body, GPT) > 4000

    response = post(proxy, "/v1/responses", body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    [forwarded] = sent(upstream, "/responses", marker)
    assert forwarded["previous_response_id"] == "resp_abc"
    outputs = [i for i in forwarded["input"] if i.get("type") == "function_call_output"]
    assert outputs == [items[0]]  # the output whose call is on the server, as sent
    assert int(response.headers["x-budget-dropped-messages"]) > 0  # older turns did go
    assert any(NOTICE_MARKER in json.dumps(i) for i in forwarded["input"] if i.get("role") == "user")
    assert forwarded["input"][-1] == items[-1]
    assert count_responses(forwarded, GPT) <= int(response.headers["x-budget-input-budget"])
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["outcome"] == "success" and "server_side_history_not_counted" in record["decision"]["notes"]
    warnings = record["decision"].get("warnings") or []
    assert not any("request invalid before trimming" in warning for warning in warnings), warnings


def test_responses_built_in_tool_calls_leave_with_their_outputs(proxy, upstream):
    """Codex sends its freeform ``apply_patch`` as a ``custom_tool_call`` (and ``local_shell_call`` on
    codex-mini), answered by a ``*_output`` item with the same ``call_id``, next to its function calls. Over
    the budget, a call and its output leave together: the provider rejects an output without its call. (They
    were two unrelated items to the trimmer, and a parallel step lost the call and kept the output.)"""
    marker = "e2e-builtin-pairs"
    items: list[dict] = [{"role": "user", "content": "Refactor the parser module."}]
    for step in range(16):
        items += [
            {"type": "function_call", "call_id": f"call_sh_{step}", "name": "shell",
             "arguments": json.dumps({"command": ["cat", f"src/parser_{step}.py"]})},
            {"type": "custom_tool_call", "call_id": f"call_patch_{step}", "name": "apply_patch",
             "input": "*** Begin Patch\n*** Update File: src/parser.py\n" + "+    token = next(stream)\n" * 40},
            {"type": "function_call_output", "call_id": f"call_sh_{step}",
             "output": f"def parse_{step}(stream):\n" + "    return read(stream)  # parser line\n" * 60},
            {"type": "custom_tool_call_output", "call_id": f"call_patch_{step}",
             "output": "Success. Updated the following files:\nM src/parser.py\n" + "hunk applied; " * 40},
            {"type": "local_shell_call", "call_id": f"call_ls_{step}", "id": f"lsc_{step}", "status": "completed",
             "action": {"type": "exec", "command": ["pytest", "-q"]}},
            {"type": "local_shell_call_output", "call_id": f"call_ls_{step}", "output": "passed " * 120},
        ]
    items.append({"role": "user", "content": f"Now run the linters. [{marker}]"})
    body = {"model": "codex", "input": items, "stream": False}
    assert count_responses(body, GPT) > 20000

    response = post(proxy, "/v1/responses", body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    [forwarded] = sent(upstream, "/responses", marker)
    kept = forwarded["input"]
    assert responses_pairing_problems(kept) == []
    assert len(kept) < len(items) and int(response.headers["x-budget-dropped-messages"]) > 0
    # the newest step whole, and each pair either both kept or both gone
    assert [as_litellm_forwards(i) for i in items[-7:]] == kept[-7:]
    for call_type in ("function_call", "custom_tool_call", "local_shell_call"):
        calls = {i["call_id"] for i in kept if i.get("type") == call_type}
        outputs = {i["call_id"] for i in kept if i.get("type") == f"{call_type}_output"}
        assert calls == outputs and calls
    assert count_responses(forwarded, GPT) <= int(response.headers["x-budget-input-budget"])


# --- aider on /v1/chat/completions ----------------------------------------------------------------------


def test_aider_keeps_the_files_added_to_the_chat_and_is_not_cut_below_need(proxy, upstream):
    """The issue's request (reported there as 7,636 tokens; budget_hook counts 7,666) against the 6,400-token
    budget of an 8,000 window. The files added to the chat and their "Ok" stay verbatim, with the system prompt
    and the question."""
    request = load_json("clients/aider/ai_trim/0004_v1_chat_completions.json")
    body = {**request, "model": "agent"}
    messages = request["messages"]
    files = next(i for i, m in enumerate(messages) if m["content"].startswith("I have *added these files to the chat*"))
    repo_map = next(i for i, m in enumerate(messages) if m["content"].startswith("Here are summaries of some files"))
    assert messages[files + 1]["content"].startswith("Ok, any changes I propose")
    assert messages[repo_map + 1]["content"].startswith("Ok, I won't try and edit those files")

    response, received = post_and_capture(proxy, upstream, "/v1/chat/completions", body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    assert response.headers["x-budget-input-budget"] == "6400"
    [forwarded] = received
    kept = forwarded["messages"]
    assert kept[0] == messages[0]                                        # the system prompt
    at = kept.index(messages[files])                                     # the files, verbatim...
    assert kept[at + 1] == messages[files + 1]                           # ...with aider's "Ok, any changes..."
    assert kept[-1] == messages[-1]                                      # the question, verbatim
    # The repository map cannot stay too: system prompt + repo map + files + question (and their replies)
    # alone are over the budget, so the oldest acknowledged context goes, as the last rung, and the files stay.
    essentials = [messages[i] for i in (0, repo_map, repo_map + 1, files, files + 1, len(messages) - 1)]
    assert GPT.count_request({"model": "gpt-4o", "messages": essentials}).total > 6400
    assert messages[repo_map] not in kept
    assert sum(NOTICE_MARKER in m["content"] for m in kept if m["role"] == "user") == 1  # its own user message
    tokens_after = int(response.headers["x-budget-tokens-after"])
    assert tokens_after == GPT.count_request({**forwarded, "model": "gpt-4o"}).total
    # Measured: 7,666 -> 6,347 tokens; 9 messages dropped (the old exchange, the summary, the repo map).
    assert int(response.headers["x-budget-tokens-before"]) > 6400 >= tokens_after >= 4000


# --- Codex CLI on /v1/responses -------------------------------------------------------------------------


def codex_requests() -> list[dict]:
    """The recorded session, re-addressed to the 20k group. The fake provider never streams Responses (it
    answers JSON whatever ``stream`` says), so the copies sent here ask for no stream."""
    requests = []
    for number in range(1, 8):
        request = copy.deepcopy(load_json(f"{CODEX_RUN}/{number:04d}_v1_responses.json"))
        request.update(model="codex", stream=False)
        requests.append(request)
    return requests


def as_litellm_forwards(item: dict) -> dict:
    """LiteLLM itself leaves out the null fields of an item (a reasoning item's ``content: null``)."""
    return {key: value for key, value in item.items() if value is not None}


def test_codex_session_keeps_its_opening_and_a_stable_prefix(proxy, upstream):
    trimmed: list[list[dict]] = []
    for number, request in enumerate(codex_requests(), start=1):
        response, received = post_and_capture(proxy, upstream, "/v1/responses", request)
        assert response.status_code == 200, f"request {number}: {response.text}"
        [forwarded] = received
        items = forwarded["input"]
        # The two developer messages, the AGENTS.md/environment message and the task, exactly as sent.
        assert items[:4] == request["input"][:4], f"request {number}: the opening context changed"
        assert responses_pairing_problems(items) == [], f"request {number}"
        calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
        assert all(i["call_id"] in calls for i in items if i.get("type") == "function_call_output")
        assert count_responses(forwarded, GPT) <= int(response.headers["x-budget-input-budget"]) == 16000
        if response.headers["x-budget-decision"] == "trimmed":
            # The oldest exec outputs are softened, then the oldest steps go (with the notice); no output is
            # cut to its head, and the newest output (the one Codex has just read) is as sent.
            assert COMPACTED_HEAD_MARKER not in json.dumps(items)
            assert (NOTICE_MARKER in json.dumps(items)) == (response.headers["x-budget-dropped-messages"] != "0")
            outputs = [i for i in items if i.get("type") == "function_call_output"]
            assert outputs[-1] == as_litellm_forwards(
                [i for i in request["input"] if i.get("type") == "function_call_output"][-1]), f"request {number}"
            trimmed.append(items)
        else:
            assert items == [as_litellm_forwards(i) for i in request["input"]], f"request {number}"
    # requests 5-7 are trimmed (17,364 / 19,843 / 22,326 tokens)
    assert len(trimmed) == 3
    pairs = list(itertools.pairwise(trimmed))
    # Each request adds ~2,500 tokens (15% of this budget) of which the newest output stays verbatim, so the
    # soften frontier moves about every other request; what it moves over is the oldest outputs.
    assert all(later[:4] == earlier[:4] for earlier, later in pairs)
