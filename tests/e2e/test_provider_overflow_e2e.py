"""End to end: a provider's own overflow, and Responses chains (issue 22, items 2 and 3).

A stand-in provider (tests/e2e/fake_provider.py ``--chains``: it holds each response's conversation and counts a
``previous_response_id``'s chain, as OpenAI does) behind a real proxy:

* ``liar`` / ``claude-liar``: the proxy's config says 100,000 tokens, the provider serves 4,000, so budget_hook
  forwards and the provider refuses. LiteLLM alone passes that on as ``code: "400"`` (a plain HTTP 400 on a
  stream, OpenAI's format on Gemini's route); the client must see what our own block looks like on each route:
  OpenAI's ``context_length_exceeded`` (chat, streamed too; /v1/responses), a streamed Responses call's
  ``response.failed`` event, Anthropic's ``prompt is too long: N tokens > M maximum``, Gemini's own error
  (checked with the openai, anthropic and google-genai SDKs, openai-agents and the Vercel AI SDK);
* ``chain`` (8,000 tokens, true): a request naming ``previous_response_id`` is counted as the chain this gateway
  saw (the provider's billed input + output of that response) + its new input; over the budget it is refused
  with budget_hook's own block (a new chain or a compaction is the remedy); an id the gateway never saw is
  counted by its new input and the record says ``chain: unknown``;
* the record of each request carries the call id and the response id the client got.
"""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from .conftest import write_config
from .harness import Process, model_entry, start_fake_provider, start_proxy, wait_for_record

pytestmark = pytest.mark.e2e

HEADERS = {"authorization": "Bearer sk-default"}
BIG = "e2e-provider-overflow " + "word " * 6000  # about 6,000 tokens: under 100,000, over 4,000


def config(upstream: Process) -> dict:
    api_base = f"http://127.0.0.1:{upstream.port}"
    return {
        "model_list": [
            model_entry("liar", "openai/gpt-4o-4k", f"{api_base}/v1", 100000),
            model_entry("claude-liar", "anthropic/claude-sonnet-4-5-4k", api_base, 100000),
            model_entry("chain", "openai/gpt-4o-8k", f"{api_base}/v1", 8000),
        ],
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {"mode": "enforce", "learning": {"enabled": False}}},
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth", "allow_unmanaged_response_ids": True},
    }


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("provider-overflow")
    (folder / "proxy").mkdir()
    upstream = start_fake_provider(folder, {"gpt-4o-4k": 4000, "gpt-4o-8k": 8000, "claude-sonnet-4-5-4k": 4000},
                                   flags=["--chains"])
    try:
        process = start_proxy(write_config(folder / "proxy", config(upstream)), log_dir=folder / "proxy")
        try:
            yield process
        finally:
            process.stop()
    finally:
        upstream.stop()


def post(proxy: Process, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}{path}", json=body, headers=HEADERS, timeout=60)


def sse(proxy: Process, path: str, body: dict) -> tuple[httpx.Response, str]:
    with httpx.stream("POST", f"{proxy.base_url}{path}", json=body, headers=HEADERS, timeout=60) as response:
        return response, response.read().decode()


def events(text: str) -> list[dict]:
    return [json.loads(line.removeprefix("data: ")) for line in text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def settled(proxy: Process, call_id: str) -> dict:
    import time

    for _ in range(100):  # the success/failure callback runs after the response
        record = wait_for_record(proxy, call_id)
        if record.get("outcome"):
            return record
        time.sleep(0.1)
    return record


CHAT = {"model": "liar", "messages": [{"role": "user", "content": BIG}]}
RESPONSES = {"model": "liar", "input": BIG}


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_overflow_on_chat_reads_as_context_length_exceeded(proxy, stream):
    response = post(proxy, "/v1/chat/completions", {**CHAT, "stream": stream})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"], error["param"]) == ("context_length_exceeded", "invalid_request_error",
                                                              "messages")
    assert "This model's maximum context length is 4000 tokens" in error["message"]
    assert response.headers["x-budget-decision"] == "pass"  # what budget_hook decided: forwarded
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert record["outcome"] == "failure" and record["decision"]["action"] == "pass"


def test_the_openai_sdk_classifies_a_provider_overflow(proxy):
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**CHAT)
    assert caught.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(**RESPONSES)
    assert caught.value.code == "context_length_exceeded"


def test_a_streamed_responses_provider_overflow_is_a_response_failed_event(proxy):
    response, text = sse(proxy, "/v1/responses", {**RESPONSES, "stream": True})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    sent = events(text)
    assert [e["type"] for e in sent] == ["response.created", "response.failed"]
    assert sent[0]["response"]["model"] == "liar"
    assert sent[-1]["response"]["error"]["code"] == "context_length_exceeded"
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    failed = [e for e in client.responses.create(**RESPONSES, stream=True) if e.type == "response.failed"]
    assert failed and failed[0].response.error.code == "context_length_exceeded"


@pytest.mark.parametrize("stream", [False, True])
def test_a_provider_overflow_on_v1_messages_reads_as_anthropic_s_own(proxy, stream):
    client = anthropic.Anthropic(base_url=proxy.base_url, api_key="sk-default", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="claude-liar", max_tokens=100, messages=[{"role": "user", "content": BIG}],
                               stream=stream)
    assert caught.value.status_code == 400
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    message = caught.value.body["error"]["message"]
    assert message.startswith("prompt is too long: ") and " tokens > 4000 maximum." in message


@pytest.mark.parametrize("path", [":generateContent", ":streamGenerateContent?alt=sse"])
def test_a_provider_overflow_on_gemini_s_route_reads_as_gemini_s_own(proxy, path):
    body = {"contents": [{"role": "user", "parts": [{"text": BIG}]}]}
    response = post(proxy, f"/v1beta/models/liar{path}", body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"].startswith("The input token count (") and "allowed (4000)." in error["message"]


def test_google_genai_sees_gemini_s_invalid_argument_for_a_provider_overflow(proxy):
    from google import genai
    from google.genai import errors

    client = genai.Client(api_key="sk-default", http_options={"base_url": proxy.base_url, "api_version": "v1beta"})
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="liar", contents=BIG)
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    assert "exceeds the maximum number of tokens allowed (4000)" in caught.value.message


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_openai_agents_sees_the_overflow_code_of_a_provider_overflow(proxy, responses):
    import asyncio

    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, set_tracing_disabled
    from agents.models._retry_runtime import get_error_code, get_status_code

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key="sk-default", max_retries=0)
    model = (OpenAIResponsesModel if responses else OpenAIChatCompletionsModel)(model="liar", openai_client=client)
    with pytest.raises(Exception) as caught:
        asyncio.run(Runner.run(Agent(name="e2e", model=model), BIG))
    assert (get_status_code(caught.value), get_error_code(caught.value)) == (400, "context_length_exceeded")


@pytest.mark.agent_cli
def test_the_ai_sdk_reads_a_streamed_provider_overflow_as_context_length_exceeded(proxy, tmp_path):
    """The Vercel AI SDK's default path (``openai(model)`` + ``streamText``: a streamed ``/v1/responses`` call)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    from .test_agent_clis_e2e import clean_env

    modules = Path(__file__).resolve().parents[2] / ".npm-clients" / "node_modules"
    node = shutil.which("node")
    if node is None or not (modules / "ai").exists() or not (modules / "@ai-sdk" / "openai").exists():
        reason = "the AI SDK is not installed in .npm-clients (scripts/clients.sh installs it when npm is available)"
        if os.environ.get("BUDGET_HOOK_AGENT_CLIS") == "required":
            pytest.fail(reason)
        pytest.skip(reason)
    (tmp_path / "node_modules").symlink_to(modules)
    shutil.copy(Path(__file__).parent / "clients" / "ai_sdk_probe.mjs", tmp_path / "probe.mjs")
    (tmp_path / "prompt.txt").write_text(BIG)
    done = subprocess.run([node, "probe.mjs", f"{proxy.base_url}/v1", "liar", "prompt.txt"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120,
                          env=clean_env(tmp_path / "home", GATEWAY_KEY="sk-default"))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    error = result["errors"][0]
    assert error["name"] == "AI_APICallError", result["errors"]
    assert error["status"] == 400 and error["code"] == "context_length_exceeded", error
    assert "the provider refused it" in error["message"], error


def test_the_record_carries_the_ids_the_client_got(proxy):
    response = post(proxy, "/v1/chat/completions", {"model": "chain", "messages": [{"role": "user", "content": "hi"}]})
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert record["call_id"] == response.headers["x-litellm-call-id"]
    assert record["response_id"] == response.json()["id"]


def turn(n: int) -> str:
    return f"e2e-chain turn {n} " + "word " * 3000  # about 3,000 tokens


def test_a_chain_is_counted_as_the_provider_holds_it_and_refused_past_the_budget(proxy):
    first = post(proxy, "/v1/responses", {"model": "chain", "max_output_tokens": 100, "input": turn(1)})
    assert first.status_code == 200, first.text
    alone = int(first.headers["x-budget-tokens-before"])
    record = settled(proxy, first.headers["x-litellm-call-id"])
    assert record["response_id"] == first.json()["id"]  # the operator finds the decision by the client's id
    held = record["chain_tokens"]
    assert held == first.json()["usage"]["input_tokens"] + first.json()["usage"]["output_tokens"]
    second = post(proxy, "/v1/responses", {"model": "chain", "max_output_tokens": 100, "input": turn(2),
                                           "previous_response_id": first.json()["id"]})
    assert second.status_code == 200, second.text
    counted = int(second.headers["x-budget-tokens-before"])
    assert counted > held + alone * 0.9  # the chain + the new input, not the new input alone
    record = settled(proxy, second.headers["x-litellm-call-id"])
    assert record["decision"]["chain"]["state"] == "known" and record["decision"]["chain"]["held"] == held
    # the third turn: the chain (about 6,000) + 3,000 new is over the 8,000 window: our block, not the provider's
    third = {"model": "chain", "max_output_tokens": 100, "input": turn(3), "previous_response_id": second.json()["id"]}
    refused = post(proxy, "/v1/responses", third)
    assert refused.status_code == 400 and refused.headers["x-budget-decision"] == "blocked"
    error = refused.json()["error"]
    assert error["code"] == "context_length_exceeded" and "previous_response_id" in error["message"]
    assert "start a new chain" in error["message"]
    assert int(refused.headers["x-budget-tokens-before"]) > int(refused.headers["x-budget-input-budget"])
    _, text = sse(proxy, "/v1/responses", {**third, "stream": True})
    failed = events(text)[-1]
    assert failed["type"] == "response.failed" and failed["response"]["error"]["code"] == "context_length_exceeded"


def test_a_streamed_response_s_chain_is_stored_too(proxy):
    response, text = sse(proxy, "/v1/responses", {"model": "chain", "max_output_tokens": 100, "input": turn(4),
                                                  "stream": True})
    completed = next(e for e in events(text) if e["type"] == "response.completed")["response"]
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert record["chain_tokens"] == completed["usage"]["input_tokens"] + completed["usage"]["output_tokens"]
    second = post(proxy, "/v1/responses", {"model": "chain", "max_output_tokens": 100, "input": "e2e-chain next",
                                           "previous_response_id": completed["id"]})
    assert int(second.headers["x-budget-tokens-before"]) > record["chain_tokens"]


def test_an_unknown_chain_is_said_and_counted_by_its_new_input(proxy):
    response = post(proxy, "/v1/responses", {"model": "chain", "max_output_tokens": 100, "input": "e2e-chain hi",
                                             "previous_response_id": "resp_not_seen_by_this_gateway"})
    assert response.headers["x-budget-decision"] == "pass"  # not blocked: the provider decides
    assert int(response.headers["x-budget-tokens-before"]) < 100
    record = settled(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["chain"] == {"state": "unknown", "counted": "new input only"}
    assert "resp_not_seen" not in json.dumps(record)  # a client wrote the id: never in the record
