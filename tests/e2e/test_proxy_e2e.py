"""End to end: a real litellm proxy with budget_hook in front of a provider-like local upstream.

What a client sends goes through the proxy's auth, budget_hook's pre-call hook, the router and the
OpenAI provider code to the fake provider (``fake_provider.py``), which records every payload and
rejects what a real provider would reject. Nothing here calls the hook directly.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from budget_hook.counting import TokenCounter
from budget_hook.trimming import content_hash
from budget_hook.trimming.structure import pairing_problems

from ..conftest import DATA, conversation_request
from .conftest import proxy_config, write_config
from .harness import start_proxy, upstream_payloads, wait_for_lines, wait_for_record

pytestmark = pytest.mark.e2e

COUNTER = TokenCounter.for_model("gpt-4o")


def chat(proxy, body: dict, key: str = "sk-default", headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}/v1/chat/completions", json=body, timeout=60,
                      headers={"authorization": f"Bearer {key}", **(headers or {})})


def payloads_for(upstream, marker: str) -> list[dict]:
    """Upstream payloads whose messages contain ``marker`` (each test tags its request)."""
    return [p["body"] for p in upstream_payloads(upstream) if marker in json.dumps(p["body"].get("messages"))]


def tagged(request: dict, marker: str) -> dict:
    """Tag the latest user message (never trimmed) so the test can find its payload upstream."""
    messages = [dict(m) for m in request["messages"]]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    content = messages[last_user]["content"]
    messages[last_user]["content"] = f"{content}\n[{marker}]" if isinstance(content, str) else content + [
        {"type": "text", "text": f"[{marker}]"}]
    return {**request, "messages": messages}


def filler_conversation(turns: int, words: int, marker: str) -> dict:
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn}: " + "lorem ipsum dolor sit amet " * words})
        messages.append({"role": "assistant", "content": f"answer {turn}: " + "consectetur adipiscing elit " * words})
    messages.append({"role": "user", "content": f"final question [{marker}]"})
    return {"model": "small", "messages": messages}


# --- trimming ------------------------------------------------------------------------------------------


def test_over_budget_tool_conversation_reaches_upstream_trimmed_valid_and_within_window(proxy, upstream):
    request = tagged({**conversation_request(DATA / "conversations/taubench_airline_04.json"), "model": "agent"},
                     "e2e-tools")
    assert COUNTER.count_request(request).total > 9_000  # over the 8,000-token window

    response = chat(proxy, request)

    assert response.status_code == 200, response.text
    [forwarded] = payloads_for(upstream, "e2e-tools")
    assert pairing_problems(forwarded["messages"]) == []           # every tool result has its call
    tokens = COUNTER.count_request(forwarded).total
    assert tokens <= 8000 - 1200 - 400                               # within the budget, so within the window
    assert response.json()["usage"]["prompt_tokens"] < 8000         # and the provider agrees
    # Kept: the system prompt and the whole latest turn, verbatim.
    assert forwarded["messages"][0] == request["messages"][0]
    last_user = max(i for i, m in enumerate(request["messages"]) if m["role"] == "user")
    tail = request["messages"][last_user:]
    assert forwarded["messages"][-len(tail):] == tail
    # Headers tell the client what happened.
    headers = response.headers
    assert headers["x-budget-decision"] == "trimmed"
    assert int(headers["x-budget-tokens-before"]) == COUNTER.count_request(request).total
    assert int(headers["x-budget-tokens-after"]) == tokens
    assert headers["x-budget-input-budget"] == "6400" and headers["x-budget-window"] == "8000"
    assert int(headers["x-budget-dropped-messages"]) > 0


def test_success_record_lists_every_dropped_message_with_provider_usage(proxy, upstream):
    request = tagged({**conversation_request(DATA / "conversations/sweagent_05.json"), "model": "agent"}, "e2e-log")
    response = chat(proxy, request)
    assert response.status_code == 200, response.text
    call_id = response.headers["x-litellm-call-id"]

    record = wait_for_record(proxy, call_id)

    assert record["outcome"] == "success" and record["model_group"] == "agent"
    decision = record["decision"]
    assert decision["action"] == "trimmed" and decision["window"] == 8000
    assert decision["tokens_before"] == COUNTER.count_request(request).total
    [forwarded] = payloads_for(upstream, "e2e-log")
    assert decision["tokens_after"] == COUNTER.count_request(forwarded).total == record["estimated_prompt_tokens"]
    assert record["provider_prompt_tokens"] == response.json()["usage"]["prompt_tokens"]
    for action in decision["actions"]:
        original = request["messages"][action["index"]]
        assert action["role"] == original["role"]
        assert action["content_hash"] == content_hash(original)
        if action["action"] == "dropped":
            assert original not in forwarded["messages"]
    assert decision["actions"], "the request was over budget: something must have been compacted or dropped"
    # No prompt content in the record by default.
    assert "lorem" not in json.dumps(record) and "dropped_content" not in decision
    first_text = request["messages"][1]["content"][:60]
    assert first_text not in json.dumps(record)


def test_decision_reaches_the_standard_logging_payload(proxy, upstream):
    response = chat(proxy, filler_conversation(10, 60, "e2e-slo"))
    assert response.status_code == 200, response.text
    call_id = response.headers["x-litellm-call-id"]

    [line] = wait_for_lines(proxy.extra["standard_log"], call_id)

    carried = line["metadata"]["spend_logs_metadata"]["budget_hook"]
    assert carried["action"] == "trimmed" and carried["dropped_turns"]
    assert carried["tokens_before"] > carried["tokens_after"]


# --- blocking ------------------------------------------------------------------------------------------


def test_an_oversized_first_prompt_is_cut_in_the_middle_rather_than_every_later_turn_blocked(proxy, upstream):
    """Gemini CLI sends its session context and the user's first prompt as one message and exits on a block:
    that opening message keeps its head and tail, with a marker, and the later turn reaches the provider."""
    first = "SESSION CONTEXT start. " + "the user's long first prompt " * 700 + " END of the first prompt."
    body = {"model": "small", "messages": [
        {"role": "user", "content": first}, {"role": "assistant", "content": "Understood, working on it."},
        {"role": "user", "content": "and now the next step [e2e-first-prompt]"}]}
    assert COUNTER.count_request(body).total > 3200

    response = chat(proxy, body)

    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    [forwarded] = payloads_for(upstream, "e2e-first-prompt")
    opening = forwarded["messages"][0]["content"]
    assert opening.startswith("SESSION CONTEXT start.") and opening.endswith("END of the first prompt.")
    assert "[budget_hook: message shortened" in opening and "removed from the middle" in opening
    assert forwarded["messages"][1:] == body["messages"][1:]
    assert COUNTER.count_request(forwarded).total <= int(response.headers["x-budget-input-budget"])


def test_impossible_request_gets_a_clear_400_and_never_reaches_the_upstream(proxy, upstream):
    body = {"model": "small", "messages": [{"role": "user", "content": "e2e-block " + "word " * 6000}]}

    response = chat(proxy, body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "context_length_exceeded" in error["message"]
    assert "This model's maximum context length is 4000 tokens" in error["message"]
    assert "'small'" in error["message"] and "output reserve 600" in error["message"]
    assert "Shorten the latest message" in error["message"]
    assert error["provider_specific_fields"]["code"] == "context_length_exceeded"
    facts = error["provider_specific_fields"]["budget_hook"]
    assert facts["window"] == 4000 and facts["budget"] == 3200 and facts["tokens_before"] > 6000
    assert payloads_for(upstream, "e2e-block") == []
    assert response.headers["x-budget-decision"] == "blocked"

    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["outcome"] == "failure" and record["decision"]["block"]["kind"] == "cannot_fit"


def test_max_tokens_that_leaves_no_room_is_blocked_with_both_numbers(proxy, upstream):
    body = {"model": "small", "max_tokens": 3900, "messages": [{"role": "user", "content": "e2e-reserve hello"}]}

    response = chat(proxy, body)

    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "max_tokens" in message and "3900" in message and "4000" in message
    assert "the request has" in message
    assert payloads_for(upstream, "e2e-reserve") == []


def test_streaming_request_is_trimmed_and_streamed(proxy, upstream):
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    body = filler_conversation(10, 60, "e2e-stream")

    with client.chat.completions.with_streaming_response.create(
        model="small", messages=body["messages"], stream=True, stream_options={"include_usage": True}
    ) as response:
        assert response.headers["x-budget-decision"] == "trimmed"
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("ok: ")
    [forwarded] = payloads_for(upstream, "e2e-stream")
    assert forwarded["stream"] is True and len(forwarded["messages"]) < len(body["messages"])
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["outcome"] == "success" and record["decision"]["dropped_turns"]


def test_streaming_request_that_cannot_fit_gets_the_same_400(proxy, upstream):
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="small", stream=True, messages=[{"role": "user", "content": "e2e-stream-block " + "word " * 6000}])
    assert "context_length_exceeded" in caught.value.message
    assert "This model's maximum context length is 4000 tokens" in caught.value.message
    assert payloads_for(upstream, "e2e-stream-block") == []


# --- model limits --------------------------------------------------------------------------------------


def test_window_discovered_from_the_upstream_is_used(proxy, upstream):
    response = chat(proxy, {**filler_conversation(14, 60, "e2e-discovered"), "model": "discovered"})
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-window"] == "6000"
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["window_source"].startswith("router")


def test_group_window_is_the_minimum_over_its_deployments(proxy, upstream):
    for attempt in range(4):  # the router picks either deployment; the budget must fit the smaller one
        response = chat(proxy, {**filler_conversation(10, 40, f"e2e-mixed-{attempt}"), "model": "mixed"})
        assert response.status_code == 200, response.text
        assert response.headers["x-budget-window"] == "4000"
        assert int(response.headers["x-budget-tokens-after"]) <= 3200


def test_router_alias_resolves_to_its_groups_window(proxy, upstream):
    response = chat(proxy, {**filler_conversation(10, 60, "e2e-alias"), "model": "alias-small"})
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-window"] == "4000" and response.headers["x-budget-decision"] == "trimmed"


def test_wildcard_group_uses_the_window_of_the_model_requested(proxy, upstream):
    response = chat(proxy, {**filler_conversation(10, 60, "e2e-wild"), "model": "wild/gpt-4o-4k"})
    assert response.status_code == 200, response.text
    # The wildcard expands to openai/gpt-4o-4k, whose 4,000-token window the router discovered upstream.
    assert response.headers["x-budget-window"] == "4000" and response.headers["x-budget-decision"] == "trimmed"
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    # the requested name is the client's text: the record names the operator's wildcard group instead
    assert record["model_group"] == "wild/*" and record["decision"]["counting_model"] == "wild/*"


# --- modes and policy ----------------------------------------------------------------------------------


def test_shadow_mode_forwards_untouched_and_logs_what_it_would_do(proxy, upstream):
    body = {**filler_conversation(10, 60, "e2e-shadow"), "model": "shadowed"}
    response = chat(proxy, body)
    # The untouched request is over the 4,000-token window: the provider itself rejects it.
    assert response.status_code == 400
    assert "maximum context length is 4000" in response.json()["error"]["message"]
    [forwarded] = payloads_for(upstream, "e2e-shadow")
    assert forwarded["messages"] == body["messages"]
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["outcome"] == "failure"
    assert record["decision"]["mode"] == "shadow" and record["decision"]["action"] == "would_trim"
    assert record["decision"]["dropped_turns"], "shadow mode reports the turns it would have dropped"
    assert "ContextWindowExceeded" in record["error"] or "context" in record["error"].lower()


def test_shadow_mode_fitting_request_passes_with_headers(proxy, upstream):
    response = chat(proxy, {"model": "shadowed", "messages": [{"role": "user", "content": "e2e-shadow-ok"}]})
    assert response.status_code == 200
    assert response.headers["x-budget-decision"] == "pass" and response.headers["x-budget-mode"] == "shadow"


@pytest.mark.parametrize("key", ["sk-strict", "sk-strict-by-id"])
def test_team_override_caps_the_budget(proxy, upstream, key):
    marker = f"e2e-team-{key}"
    body = filler_conversation(6, 30, marker)
    default = chat(proxy, {**body, "messages": body["messages"]}, key="sk-default")
    strict = chat(proxy, tagged(body, "strict"), key=key)
    assert default.status_code == strict.status_code == 200
    assert int(default.headers["x-budget-tokens-after"]) > 1500
    assert strict.headers["x-budget-input-budget"] == "1500"
    assert int(strict.headers["x-budget-tokens-after"]) <= 1500
    record = wait_for_record(proxy, strict.headers["x-litellm-call-id"])
    team = "strict" if key == "sk-strict" else "team-by-id"
    assert f"teams[{team}]" in record["decision"]["policy_sources"]
    assert record["team_id"] in ("team-7f3a", "team-by-id")


def test_admin_metadata_tightens_but_cannot_loosen(proxy, upstream):
    team = chat(proxy, filler_conversation(6, 30, "e2e-team-meta"), key="sk-team-meta")
    assert team.status_code == 200 and team.headers["x-budget-input-budget"] == "1000"
    # Key metadata asking for shadow mode is looser than the config's enforce: ignored and reported
    # (LiteLLM lets non-admin users write their own keys' metadata; metadata_policy: trust allows it).
    key = chat(proxy, filler_conversation(10, 60, "e2e-key-meta"), key="sk-meta-shadow")
    assert key.headers["x-budget-mode"] == "enforce" and key.headers["x-budget-decision"] == "trimmed"
    record = wait_for_record(proxy, key.headers["x-litellm-call-id"])
    assert record["decision"]["ignored_metadata_settings"] == ["key_metadata.mode"]


def test_key_override_pins_the_first_user_message(proxy, upstream):
    body = filler_conversation(10, 60, "e2e-pinned")
    response = chat(proxy, body, key="sk-pinned")
    assert response.status_code == 200
    [forwarded] = payloads_for(upstream, "e2e-pinned")
    assert forwarded["messages"][1] == body["messages"][1]  # the task statement survives
    assert len(forwarded["messages"]) < len(body["messages"])


def test_client_cannot_loosen_policy_but_may_tighten_it(proxy, upstream):
    body = filler_conversation(10, 60, "e2e-loosen")
    body["metadata"] = {"budget_hook": {"mode": "off", "max_input_tokens": 999_999}}
    loosened = chat(proxy, body)
    assert loosened.status_code == 200
    assert loosened.headers["x-budget-decision"] == "trimmed" and loosened.headers["x-budget-input-budget"] == "3200"
    record = wait_for_record(proxy, loosened.headers["x-litellm-call-id"])
    assert record["decision"]["ignored_client_settings"] == ["metadata.budget_hook.mode"]

    tightened = chat(proxy, filler_conversation(10, 60, "e2e-tighten"), headers={"x-budget-max-input-tokens": "800"})
    assert tightened.status_code == 200 and tightened.headers["x-budget-input-budget"] == "800"
    assert int(tightened.headers["x-budget-tokens-after"]) <= 800

    for value in ("lots", "\u00b2".encode("latin-1"), "9" * 5000):  # "²" passes str.isdigit() but not int()
        bad = chat(proxy, filler_conversation(2, 5, "e2e-bad-cap"), headers={"x-budget-max-input-tokens": value})
        assert bad.status_code == 400 and "x-budget-max-input-tokens" in bad.json()["error"]["message"]
    assert payloads_for(upstream, "e2e-bad-cap") == []


def test_failure_record_of_a_trimmed_request_carries_the_dropped_turns(proxy, upstream):
    body = filler_conversation(10, 60, "e2e-upstream-fail FAIL_UPSTREAM")
    response = chat(proxy, body)
    assert response.status_code >= 500
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["outcome"] == "failure" and record["decision"]["action"] == "trimmed"
    assert record["decision"]["dropped_turns"] and "error" in record
    assert payloads_for(upstream, "FAIL_UPSTREAM")[0]["messages"][0]["role"] == "system"


def test_malformed_messages_get_a_400_naming_the_field(proxy, upstream):
    response = chat(proxy, {"model": "small", "messages": [{"role": "user", "content": 42}]})
    assert response.status_code == 400
    assert "messages[0].content" in response.json()["error"]["message"]


def test_misconfigured_admin_metadata_is_skipped_and_the_rest_enforced(proxy, upstream):
    response = chat(proxy, filler_conversation(10, 60, "e2e-bad-meta"), key="sk-bad-meta")
    assert response.status_code == 200
    assert response.headers["x-budget-decision"] == "trimmed"  # enforcement stays on
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    warning = record["decision"]["warnings"][0]  # the setting named, its value never quoted
    assert warning.startswith("key_metadata.budget_hook ignored") and "max_input_token" in warning


def test_broken_policy_stops_start_up_with_a_clear_message(workdir, upstream):
    settings = {"mode": "enforse", "teams": {"ml": {"max_input_token": 5}}, "output_reserve_min": 900,
                "output_reserve_max": 100}
    config = write_config(workdir / "broken", proxy_config(upstream.port, settings))

    process = start_proxy(config, log_dir=config.parent, expect_failure=True, timeout=90)

    assert process.popen.returncode != 0
    stderr = process.stderr()
    assert "callback_settings.budget_hook.mode: Input should be 'enforce', 'shadow' or 'off'" in stderr
    assert "callback_settings.budget_hook.teams.ml.max_input_token: unknown setting; did you mean max_input_tokens?" in stderr


def test_inconsistent_policy_stops_start_up(workdir, upstream):
    config = write_config(workdir / "inconsistent", proxy_config(upstream.port, {
        "teams": {"ml": {"output_reserve_min": 900, "output_reserve_max": 100}}}))
    process = start_proxy(config, log_dir=config.parent, expect_failure=True, timeout=90)
    assert process.popen.returncode != 0
    assert "teams[ml]: output reserve bounds must satisfy 0 <= min <= max" in process.stderr()
