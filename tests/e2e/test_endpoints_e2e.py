"""End to end on every LLM endpoint the proxy serves: /v1/messages, /v1/responses, /embeddings, /completions."""

from __future__ import annotations

import copy
import json

import httpx
import pytest

from budget_hook.counting import TokenCounter
from budget_hook.shapes.anthropic import anthropic_pairing_problems, count_anthropic
from budget_hook.shapes.responses import count_responses, responses_pairing_problems

from ..conftest import load_json
from .harness import upstream_payloads, wait_for_record

pytestmark = pytest.mark.e2e

CLAUDE = TokenCounter.for_model("anthropic/claude-sonnet-4-5-4k")
GPT = TokenCounter.for_model("gpt-4o")


def post(proxy, path: str, body: dict, key: str = "sk-default") -> httpx.Response:
    return httpx.post(f"{proxy.base_url}{path}", json=body, timeout=60, headers={"authorization": f"Bearer {key}"})


def sent(upstream, path_end: str, marker: str) -> list[dict]:
    return [p["body"] for p in upstream_payloads(upstream)
            if p["path"].rstrip("/").endswith(path_end) and marker in json.dumps(p["body"])]


def anthropic_agent(marker: str, steps: int = 5) -> dict:
    """A real pydantic-ai Anthropic request (parallel tool_use) preceded by a long earlier exchange."""
    real = copy.deepcopy(load_json("conversations/pydanticai_cassette_06.json")["original_request_anthropic"])
    history = []
    for step in range(steps):
        history += [
            {"role": "user", "content": [{"type": "text", "text": f"Earlier task {step}: check the logs."}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_old_{step}", "name": "read_log",
                                               "input": {"day": step}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_old_{step}",
                                          "content": f"log line {step}: all systems nominal\n" * 60}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"Day {step} looks fine."}]},
        ]
    real["messages"] = history + real["messages"]
    first = real["messages"][len(history)]
    first["content"] = (first["content"] + f" [{marker}]") if isinstance(first["content"], str) else \
        first["content"] + [{"type": "text", "text": f"[{marker}]"}]
    real["model"] = "claude"
    real["max_tokens"] = 1024  # the recorded 4096 would leave no room in a 4,000-token window
    real.pop("stream", None)
    return real


def test_anthropic_messages_are_trimmed_natively_and_accepted_by_a_strict_upstream(proxy, upstream):
    body = anthropic_agent("e2e-anthropic")
    assert count_anthropic(body, CLAUDE) > 4000

    response = post(proxy, "/v1/messages", body)

    assert response.status_code == 200, response.text
    assert response.json()["type"] == "message"
    assert response.headers["x-budget-decision"] == "trimmed"
    [forwarded] = sent(upstream, "/messages", "e2e-anthropic")
    assert anthropic_pairing_problems(forwarded["messages"]) == []  # and the upstream checked it too
    assert count_anthropic(forwarded, CLAUDE) <= 4000 - 1024 - 200  # max_tokens is the reserve
    assert forwarded["messages"][-3:] == body["messages"][-3:]     # the latest exchange, verbatim
    assert forwarded["tools"] == body["tools"] and forwarded.get("system") == body.get("system")
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "trimmed" and record["outcome"] == "success"
    assert record["decision"]["counting_model"] == "anthropic/claude-sonnet-4-5-4k"
    assert record["provider_prompt_tokens"] == response.json()["usage"]["input_tokens"]


def test_anthropic_streaming_is_trimmed_too(proxy, upstream):
    body = {**anthropic_agent("e2e-anthropic-stream"), "stream": True}
    with httpx.stream("POST", f"{proxy.base_url}/v1/messages", json=body, timeout=60,
                      headers={"authorization": "Bearer sk-default"}) as response:
        text = "".join(response.iter_text())
    assert response.status_code == 200, text
    assert "message_stop" in text
    [forwarded] = sent(upstream, "/messages", "e2e-anthropic-stream")
    assert count_anthropic(forwarded, CLAUDE) <= 4000 - 1024 - 200 < count_anthropic(body, CLAUDE)
    assert anthropic_pairing_problems(forwarded["messages"]) == []


def test_anthropic_request_that_cannot_fit_gets_anthropic_wording_and_never_reaches_upstream(proxy, upstream):
    body = {"model": "claude", "max_tokens": 512,
            "messages": [{"role": "user", "content": "e2e-anthropic-block " + "word " * 6000}]}
    response = post(proxy, "/v1/messages", body)
    assert response.status_code == 400
    text = response.text
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == "invalid_request_error"
    assert "prompt is too long: 7220 tokens > 3288 maximum. budget_hook blocked this request (context_length_exceeded)" in text
    assert sent(upstream, "/messages", "e2e-anthropic-block") == []


def responses_agent(marker: str) -> dict:
    items = []
    for step in range(6):
        items += [
            {"role": "user", "content": f"Earlier question {step}"},
            {"type": "function_call", "call_id": f"call_{step}", "name": "search", "arguments": json.dumps({"q": step})},
            {"type": "function_call_output", "call_id": f"call_{step}", "output": f"result {step}: " + "data " * 900},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"Answer {step}."}]},
        ]
    items.append({"role": "user", "content": f"Summarise everything [{marker}]"})
    return {"model": "small", "input": items, "instructions": "Be brief.", "max_output_tokens": 300,
            "tools": [{"type": "function", "name": "search", "description": "Search",
                       "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}}}]}


def test_responses_are_trimmed_natively(proxy, upstream):
    body = responses_agent("e2e-responses")
    assert count_responses(body, GPT) > 4000
    response = post(proxy, "/v1/responses", body)
    assert response.status_code == 200, response.text
    [forwarded] = sent(upstream, "/responses", "e2e-responses")
    assert responses_pairing_problems(forwarded["input"]) == []
    budget = int(response.headers["x-budget-input-budget"])
    assert count_responses(forwarded, GPT) <= budget and forwarded["input"][-1] == body["input"][-1]
    # the first question opens the conversation: it stays; the newest output is as sent; the oldest step goes
    # first (its call with its output), the notice right after the question says so
    assert forwarded["input"][0] == body["input"][0] and forwarded["input"][-3:] == body["input"][-3:]
    calls = [i["call_id"] for i in forwarded["input"] if i.get("type") == "function_call"]
    assert calls == [f"call_{n}" for n in range(6 - len(calls), 6)]
    assert forwarded["instructions"] == "Be brief."
    assert response.headers["x-budget-decision"] == "trimmed"
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "trimmed" and record["outcome"] == "success"


def test_responses_with_server_side_history_say_so(proxy, upstream):
    body = {"model": "small", "input": "e2e-responses-prev hello", "previous_response_id": "resp_unknown"}
    response = post(proxy, "/v1/responses", body)
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert "server_side_history_not_counted" in record["decision"]["notes"]


def test_embeddings_over_the_limit_are_a_400_naming_the_input(proxy, upstream):
    body = {"model": "emb", "input": ["e2e-emb-block short", "word " * 1500]}
    tokens = TokenCounter.for_model("text-embedding-3-small").count_text(body["input"][1])
    response = post(proxy, "/v1/embeddings", body)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert f"input[1] has {tokens} tokens, {tokens - 1000} over the limit of 1000" in message and "nothing was truncated" in message
    assert sent(upstream, "/embeddings", "e2e-emb-block") == []

    ok = post(proxy, "/v1/embeddings", {"model": "emb", "input": ["e2e-emb-ok", "fine"]})
    assert ok.status_code == 200, ok.text
    assert ok.headers["x-budget-decision"] == "pass" and len(ok.json()["data"]) == 2


@pytest.mark.parametrize("extra, field", [
    ({"messages": [{"role": "user", "content": "e2e-emb-messages " + "word " * 3000}]}, "messages"),
    ({"fallbacks": [{"model": "emb", "messages": [{"role": "user", "content": "e2e-emb-messages " + "word " * 3000}]}]},
     "fallbacks[0].messages"),
])
def test_messages_beside_an_embeddings_input_are_a_400_naming_them(proxy, upstream, extra, field):
    """A fourteenth attack review's lead, confirmed on 1.103 and 1.108: LiteLLM forwards ``messages`` beside ``input``
    to an OpenAI-compatible embedding server uncounted (``pass``), and vLLM's chat-style embedding request
    (``EmbeddingChatRequest``) may embed them in its place."""
    response = post(proxy, "/v1/embeddings", {"model": "emb", "input": ["e2e-emb-messages short"], **extra})
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert f"{field}: LiteLLM forwards an embedding request's messages" in message
    assert sent(upstream, "/embeddings", "e2e-emb-messages") == []


def test_a_list_of_prompts_a_chat_model_gets_as_one_call_must_fit_together(proxy, upstream):
    """An attack review: LiteLLM's text completion turns a list of prompts into the user messages of one chat call
    for any provider but the text-completion endpoints; four prompts of ~900 tokens, each under the budget,
    reached a 4k Anthropic window as one request of 3,600 tokens. They are budgeted together for such a group
    (and still one by one where the list is a batch: ``tests/test_inputs.py``; the fake provider serves no
    ``/completions``, and a failed call would cool the shared deployment down)."""
    prompts = [f"e2e-joined-{i} " + "word " * 900 for i in range(4)]
    response = post(proxy, "/v1/completions", {"model": "claude", "prompt": prompts, "max_tokens": 100})
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert "the 4 prompts reach this deployment as the user messages of one chat call" in message, message
    assert "separate requests" in message
    assert sent(upstream, "", "e2e-joined-") == []


def test_completions_prompt_over_budget_is_a_400(proxy, upstream):
    body = {"model": "small", "prompt": ["e2e-completion-block", "word " * 4000], "max_tokens": 100}
    response = post(proxy, "/v1/completions", body)
    assert response.status_code == 400
    tokens = GPT.count_text(body["prompt"][1])
    assert f"prompt[1] has {tokens} tokens, {tokens - 3700} over the limit of 3700" in response.json()["error"]["message"]
    assert sent(upstream, "", "e2e-completion-block") == []


def marked(path: str, model: str, tag: str) -> dict:
    text = f"[{tag}] say hi"
    if path.endswith(":generateContent"):
        return {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    if path == "/v1/responses":
        return {"model": model, "input": text}
    if path == "/completions":
        return {"model": model, "prompt": text, "max_tokens": 20}
    if path == "/v1/embeddings":
        return {"model": model, "input": [text]}
    return {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("path, model", [
    ("/chat/completions", "agent"), ("/v1/responses", "agent"), ("/v1/messages", "claude"),
    ("/v1/messages", "agent"), ("/completions", "agent"), ("/v1/embeddings", "emb"),
    ("/v1beta/models/agent:generateContent", "agent"),
])
def test_the_gateway_s_own_retry_policy_reaches_no_provider(proxy, upstream, path, model):
    """The pre-call hook forwards every request with a ``retry_policy`` that grants LiteLLM's client wrapper no retry
    (``bounds.gateway_parameters``): a parameter of LiteLLM's, never of the provider's request, on any route."""
    tag = f"e2e-gateway-retry-policy-{path.strip('/').replace('/', '-')}-{model}"
    response = post(proxy, path, marked(path, model, tag))
    assert response.status_code == 200, response.text
    received = [json.dumps(p["body"]) for p in upstream_payloads(upstream) if tag in json.dumps(p["body"])]
    assert received and not any("retry_policy" in body or "DefaultRetries" in body for body in received)
