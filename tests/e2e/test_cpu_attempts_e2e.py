"""Each request is decided once, through a real proxy (issue 25): the per-attempt re-check recognises the body the
router forwards when only its ``tools`` list was rebuilt, and still decides again when a deployment merges tools.

LiteLLM's router rebuilds ``kwargs["tools"]`` as a new list of the same items on every attempt
(``Router._merge_tools_from_deployment``); a deployment's own ``litellm_params.tools`` are put in front of the
client's. The record says how many attempts were decided again (``decided_again``): none for the first, one for
the second, whose forwarded tools (and token count) differ from what the pre-call hook decided.

The proxy also has an operator's masking guardrail (LiteLLM's content filter, asked for by name): it edits the
messages in place after the pre-call hook, so a request whose blocked words it masks is decided again.
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from .harness import MASTER_KEY, serve_config, start_fake_provider, upstream_payloads, wait_for_record

pytestmark = pytest.mark.e2e

CLIENT_TOOL = {"type": "function", "function": {"name": "run", "description": "Run a shell command.",
                                                "parameters": {"type": "object", "properties": {
                                                    "cmd": {"type": "string"}}, "required": ["cmd"]}}}
DEPLOYMENT_TOOL = {"type": "function", "function": {
    "name": "search_docs", "description": "Search the operator's documentation. " * 20,
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cpu_attempts")
    upstream = start_fake_provider(folder, {"gpt-4o-8k": 8000, "claude-sonnet-4-5-8k": 8000, "gpt-4o-8k-down": 8000})
    api_base = f"http://127.0.0.1:{upstream.port}/v1"
    params = {"model": "openai/gpt-4o-8k", "api_base": api_base, "api_key": "fake-key"}
    config = {
        "model_list": [
            {"model_name": "tooled", "litellm_params": params, "model_info": {"max_input_tokens": 8000}},
            {"model_name": "merged", "litellm_params": {**params, "tools": [DEPLOYMENT_TOOL]},
             "model_info": {"max_input_tokens": 8000}},
            # a group whose own guardrail masks words, and one that cannot be reached: a fallback from it runs the
            # guardrail in the attempt's hook
            {"model_name": "guarded", "litellm_params": {**params, "guardrails": ["mask-words"]},
             "model_info": {"max_input_tokens": 8000}},
            {"model_name": "down", "litellm_params": {**params, "api_base": "http://127.0.0.1:9/v1"},
             "model_info": {"max_input_tokens": 8000}},
            # the provider answers every call with a 500
            {"model_name": "failing", "litellm_params": {**params, "model": "openai/gpt-4o-8k-down"},
             "model_info": {"max_input_tokens": 8000}},
            {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-sonnet-4-5-8k", "api_key": "fake-key",
                                                        "api_base": f"http://127.0.0.1:{upstream.port}"},
             "model_info": {"max_input_tokens": 8000}},
        ],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
        "guardrails": [{"guardrail_name": "mask-words", "litellm_params": {
            "guardrail": "litellm_content_filter", "mode": "pre_call", "default_on": False,
            "blocked_words": [{"keyword": "darn", "action": "MASK"}]}}],
    }
    yield from serve_config(folder, config, upstream)


def send(proxy, group: str, marker: str) -> tuple[httpx.Response, dict]:
    body = {"model": group, "max_tokens": 50, "tools": [CLIENT_TOOL],
            "messages": [{"role": "system", "content": "You run commands."},
                         {"role": "user", "content": f"{marker}: list the files"}]}
    response = httpx.post(f"{proxy.base_url}/v1/chat/completions", json=body, timeout=60,
                          headers={"authorization": f"Bearer {MASTER_KEY}"})
    assert response.status_code == 200, response.text
    return response, wait_for_record(proxy, response.headers["x-litellm-call-id"])


def test_tools_passing_through_the_router_are_decided_once(proxy):
    process, upstream = proxy
    marker = f"once-{uuid.uuid4().hex[:8]}"
    _, record = send(process, "tooled", marker)
    decision = record["decision"]
    assert decision["action"] == "pass"
    assert "decided_again" not in decision, decision  # the attempt's rebuilt tools list: the first decision stands
    assert "attempts" not in decision
    [payload] = [p for p in upstream_payloads(upstream) if marker in str(p["body"])]
    assert [t["function"]["name"] for t in payload["body"]["tools"]] == ["run"]


def test_tools_a_deployment_merges_in_are_decided_again(proxy):
    process, upstream = proxy
    marker = f"merged-{uuid.uuid4().hex[:8]}"
    _, record = send(process, "merged", marker)
    decision = record["decision"]
    assert decision["decided_again"] == 1, decision  # the attempt carries tools the pre-call hook never counted
    [payload] = [p for p in upstream_payloads(upstream) if marker in str(p["body"])]
    assert [t["function"]["name"] for t in payload["body"]["tools"]] == ["search_docs", "run"]


@pytest.mark.parametrize(("route", "body"), [
    ("/v1/messages", {"model": "claude", "max_tokens": 50, "system": "You run commands.",
                      "tools": [{"name": "run", "description": "Run a shell command.",
                                 "input_schema": CLIENT_TOOL["function"]["parameters"]}],
                      "messages": [{"role": "user", "content": "MARK: list the files"}]}),
    ("/v1/responses", {"model": "tooled", "max_output_tokens": 50, "instructions": "You run commands.",
                       "tools": [{"type": "function", **CLIENT_TOOL["function"]}],
                       "input": [{"role": "user", "content": "MARK: list the files"}]}),
])
def test_tools_on_the_other_routes_are_decided_once(proxy, route, body):
    process, _ = proxy
    marker = f"route-{uuid.uuid4().hex[:8]}"
    body = json.loads(json.dumps(body).replace("MARK", marker))
    response = httpx.post(f"{process.base_url}{route}", json=body, timeout=60,
                          headers={"authorization": f"Bearer {MASTER_KEY}"})
    assert response.status_code == 200, response.text
    decision = wait_for_record(process, response.headers["x-litellm-call-id"])["decision"]
    assert decision["action"] == "pass" and "decided_again" not in decision, decision


def long_history(route: str, marker: str) -> dict:
    text = " ".join(f"{marker} line {i} of the build log, nothing to see" for i in range(120))
    if route == "/v1/messages":
        messages: list = [{"role": "user", "content": f"{marker}: fix the build"}]
        for step in range(12):
            messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{step}", "name": "run",
                                                            "input": {"cmd": "make"}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{step}", "content": text}]}]
        messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "and now?"}]
        return {"model": "claude", "max_tokens": 50, "messages": messages,
                "tools": [{"name": "run", "input_schema": CLIENT_TOOL["function"]["parameters"]}]}
    if route == "/v1/responses":
        items: list = [{"role": "user", "content": f"{marker}: fix the build"}]
        for step in range(12):
            items += [{"type": "function_call", "call_id": f"c{step}", "name": "run", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": f"c{step}", "output": text}]
        items.append({"role": "user", "content": "and now?"})
        return {"model": "tooled", "max_output_tokens": 50, "input": items,
                "tools": [{"type": "function", **CLIENT_TOOL["function"]}]}
    messages = [{"role": "user", "content": f"{marker}: fix the build"}]
    for step in range(12):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": f"c{step}", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{step}", "content": text}]
    messages.append({"role": "user", "content": "and now?"})
    return {"model": "tooled", "max_tokens": 50, "messages": messages, "tools": [CLIENT_TOOL]}


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_a_trimmed_request_is_decided_once(proxy, route):
    process, _ = proxy
    marker = f"trim-{uuid.uuid4().hex[:8]}"
    response = httpx.post(f"{process.base_url}{route}", json=long_history(route, marker), timeout=60,
                          headers={"authorization": f"Bearer {MASTER_KEY}"})
    assert response.status_code == 200, response.text
    decision = wait_for_record(process, response.headers["x-litellm-call-id"])["decision"]
    assert decision["action"] == "trimmed", decision
    assert "decided_again" not in decision, decision  # the trimmed body, forwarded as decided


def test_a_guardrail_that_rewrites_the_messages_in_place_after_the_count_is_decided_again(proxy):
    """The content filter writes ``[KEYWORD_REDACTED]`` over each blocked word in the very message dicts the
    pre-call hook counted: 3,000 words of 1 token became 18,000 tokens in an 8,000 window, and reached the provider
    as the first decision stood. The attempt now sees the new strings and refuses it with the window's error."""
    process, upstream = proxy
    marker = f"mask-{uuid.uuid4().hex[:8]}"
    body = {"model": "tooled", "max_tokens": 50, "guardrails": ["mask-words"],
            "messages": [{"role": "user", "content": f"{marker} " + "darn " * 3000}]}
    response = httpx.post(f"{process.base_url}/v1/chat/completions", json=body, timeout=60,
                          headers={"authorization": f"Bearer {MASTER_KEY}"})
    assert response.status_code == 400, response.text
    assert "context" in response.text.lower(), response.text
    assert [p for p in upstream_payloads(upstream) if marker in str(p["body"])] == []


def test_a_fallback_groups_own_guardrail_runs_before_the_attempts_check(proxy):
    """A fallback group's model-level guardrail runs in the attempt's hook (``CustomGuardrail``), and LiteLLM calls
    the callbacks in list order: the proxy loads the plugin before the guardrails, so the masking filter ran after
    the check and 3,011 counted tokens reached the fallback as 24,008 (a fifth attack review). The plugin now keeps
    itself the last callback, and the attempt it sees is the masked one: refused, nothing reaches the provider."""
    process, upstream = proxy
    marker = f"fallback-mask-{uuid.uuid4().hex[:8]}"
    for _ in range(2):  # the first request of a proxy moves the plugin last; every later one finds it there
        body = {"model": "down", "max_tokens": 50, "fallbacks": ["guarded"],
                "messages": [{"role": "user", "content": f"{marker} " + "darn " * 3000}]}
        response = httpx.post(f"{process.base_url}/v1/chat/completions", json=body, timeout=60,
                              headers={"authorization": f"Bearer {MASTER_KEY}"})
        # LiteLLM answers with the first group's error (its connection error, a 500) and the fallback's refusal, in
        # its own words (1.103 "Error doing the fallback", 1.108 "Fallback to guarded also failed")
        assert response.status_code != 200, response.text
        assert "budget_hook blocked this request (context_length_exceeded): model group 'guarded'" in response.text
        assert [p for p in upstream_payloads(upstream) if marker in str(p["body"])] == []


def held(process) -> dict[str, float]:
    """What the plugin keeps right now, from its own metrics (``records.RecordStore.held``)."""
    text = httpx.get(f"{process.base_url}/budget_hook/metrics", timeout=30,
                     headers={"authorization": f"Bearer {MASTER_KEY}"}).text
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
            if line.startswith(("budget_hook_calls_", "budget_hook_request_bytes_held"))}


@pytest.mark.parametrize("model", ["tooled,failing", "failing", "down"])
def test_a_call_that_is_over_keeps_nothing_of_its_request(proxy, model):
    """A review of memory a client can make the plugin hold. ``model: "a,b"`` (LiteLLM's batch completion) whose
    second group fails: LiteLLM attempts it once more after the call settled, and the plugin kept that attempt's
    record and request in flight for good (30 requests of 8 MB: +713 MiB, against +17 MiB without the plugin). A
    call that fails at the provider kept its request, with LiteLLM's logging object, 30 s (3.0 GB live against
    376 MiB). Now both let go of their requests once the call is over; the metrics show what is held."""
    process, _ = proxy
    for _ in range(3):
        # a retry of the failing group's call is what comes after the batch settled
        body = {"model": model, "max_tokens": 50, "num_retries": 1,
                "messages": [{"role": "user", "content": "word " * 5_000}]}
        response = httpx.post(f"{process.base_url}/v1/chat/completions", json=body, timeout=60,
                              headers={"authorization": f"Bearer {MASTER_KEY}"})
        assert response.status_code in (200, 400, 500, 502, 503), response.text
    deadline = time.monotonic() + 15
    while (now := held(process))["budget_hook_calls_holding_request"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert now["budget_hook_calls_holding_request"] == 0 and now["budget_hook_request_bytes_held"] == 0, now
