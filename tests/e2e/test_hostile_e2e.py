"""Hostile and unlucky clients, end to end: every way past the budget, tried through a real proxy.

Each case is a request through the proxy to the fake provider, which counts every string it receives and
rejects what a real provider would. The suite asserts, for every case: nothing over the window reached
the upstream, no 5xx, no client input on the plugin's failure path.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from budget_hook.counting import TokenCounter

from .harness import upstream_payloads, wait_for_record
from .test_proxy_e2e import chat, filler_conversation, payloads_for

pytestmark = pytest.mark.e2e

COUNTER = TokenCounter.for_model("gpt-4o")


def success_record(proxy, call_id: str) -> dict:
    """The record of the attempt that succeeded (the failed first attempt logs its own record first)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        record = wait_for_record(proxy, call_id)
        if record["outcome"] == "success":
            return record
        time.sleep(0.1)
    raise AssertionError(f"no success record for {call_id}")


def test_a_fallback_to_a_smaller_deployment_is_trimmed_for_it(proxy, upstream):
    """The client names a 16k group; its deployment fails and the router falls back to the 4k group."""
    body = {**filler_conversation(12, 60, "e2e-fallback"), "model": "unstable"}
    assert COUNTER.count_request(body).total > 5000
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    sent = payloads_for(upstream, "e2e-fallback")
    assert [p["model"] for p in sent] == ["gpt-4o-16k-down", "gpt-4o-4k"]
    assert len(sent[0]["messages"]) == len(body["messages"])  # the 16k attempt got the whole request
    assert COUNTER.count_request(sent[1]).total <= 4000 and len(sent[1]["messages"]) < len(body["messages"])
    record = success_record(proxy, response.headers["x-litellm-call-id"])
    [attempt] = record["decision"]["attempts"]
    assert attempt["model_group"] == "small" and attempt["window"] == 4000 and attempt["action"] == "trimmed"


def test_a_fallback_that_cannot_fit_is_refused_not_sent(proxy, upstream):
    body = {"model": "unstable", "messages": [{"role": "user", "content": "word " * 6000 + "[e2e-fallback-big]"}]}
    response = chat(proxy, body)
    # When every fallback fails LiteLLM answers with the first deployment's own error (here the simulated
    # outage, a 500), the fallback's refusal attached; what matters: the 4k deployment was never sent it.
    assert response.status_code == 500
    assert "budget_hook blocked this request (context_length_exceeded): model group 'small'" in response.text
    assert "This model's maximum context length is 4000 tokens" in response.text
    assert [p["model"] for p in payloads_for(upstream, "e2e-fallback-big")] == ["gpt-4o-16k-down"]


@pytest.mark.parametrize("extra, field", [
    ({"fallbacks": [{"unstable": [{"model": "small", "litellm_system_prompt": "word " * 6000}]}]},
     "fallbacks[0].unstable[0].litellm_system_prompt"),
    ({"router_settings_override": {"fallbacks": [{"model": "small", "litellm_system_prompt": "word " * 6000}]}},
     "router_settings_override.fallbacks[0].litellm_system_prompt"),
])
def test_a_prompt_parameter_in_a_fallback_target_the_router_merges_never_reaches_the_provider(proxy, upstream, extra,
                                                                                                field):
    """The router merges these fallback targets into the attempt (a review found ~6,000 tokens reaching the 4k
    deployment): a 400 naming it before routing, as LiteLLM's proxy reads them (the attempt refuses any the pre-call
    check cannot see, ``tests/test_proxy_hook.py``)."""
    marker = f"e2e-fallback-param-{len(json.dumps(extra)) % 1000}-{next(iter(extra))}"
    response = chat(proxy, {"model": "unstable", "messages": [{"role": "user", "content": f"hi [{marker}]"}], **extra})
    assert response.status_code == 400, response.text
    assert field in response.text and payloads_for(upstream, marker) == []


def test_a_deployment_id_as_the_model_is_budgeted_against_that_deployment(proxy, upstream):
    """The router accepts a deployment id as ``model``; the plugin sees an unknown group name at first (and
    assumes the default 8,192) but checks the attempt against the deployment it really goes to."""
    body = {**filler_conversation(10, 60, "e2e-by-id"), "model": "dep-4k-1"}
    assert COUNTER.count_request(body).total > 5000
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    [sent] = payloads_for(upstream, "e2e-by-id")
    assert sent["model"] == "gpt-4o-4k" and COUNTER.count_request(sent).total <= 4000


def test_a_comma_separated_model_list_fits_the_smallest_group(proxy, upstream):
    body = {**filler_conversation(10, 60, "e2e-comma"), "model": "agent,small"}
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    sent = payloads_for(upstream, "e2e-comma")
    assert sent and all(COUNTER.count_request(p).total <= 4000 for p in sent)


@pytest.mark.parametrize("body, field", [
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-extra-body]"}],
      "extra_body": {"messages": [{"role": "user", "content": "word " * 6000 + "[e2e-extra-body]"}]}},
     "extra_body.messages"),
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-deep-schema]"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
          "x": json.loads('{"type": ["array"], "items": ' * 150 + '{"type": "string"}' + "}" * 150)}}}}]},
     "tools[0].function.parameters"),
    # LiteLLM writes these into the prompt after both hooks (an attack review: 6,000 tokens reached a 4k window)
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "litellm_system_prompt": "word " * 6000}, "litellm_system_prompt"),
    ({"model": "small", "messages": [{"role": "user", "content": f"q{i} [e2e-prompt-param]"} for i in range(5)],
      "ensure_alternating_roles": True, "assistant_continue_message": {"role": "assistant", "content": "word " * 1500}},
     "ensure_alternating_roles"),
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "initial_prompt_value": "word " * 6000, "final_prompt_value": "x", "roles": {"user": {"pre_message": "u"}}},
     "roles"),
    ({"model": "unstable", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "fallbacks": [{"model": "small", "litellm_system_prompt": "word " * 6000}]}, "fallbacks[0].litellm_system_prompt"),
    # LiteLLM fills a stored prompt in inside the call, after both hooks: variables the proxy did not take out before
    # the hook go into a deployment's own prompt_id (a fifth attack review: 15 tokens counted, 60,050 reached a 16k
    # window), and a fallbacks entry's prompt_id is filled in for the fallback call alone (3,912 counted, 27,929 sent)
    ({"model": "small", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "prompt_variables": {"text": "word " * 6000}}, "prompt_variables"),
    ({"model": "unstable", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "fallbacks": [{"model": "small", "prompt_id": "bigsys"}]}, "fallbacks[0].prompt_id"),
    # vLLM's chat template writes a client's special token in place of the tokenizer's (an attack review)
    ({"model": "vllm-small", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "chat_template_kwargs": {"enable_thinking": False, "bos_token": "word " * 6000}}, "chat_template_kwargs.bos_token"),
    # vLLM's image processor takes a client's settings in place of its own (how many tokens an image becomes)
    ({"model": "vllm-small", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "mm_processor_kwargs": {"max_pixels": 100_000_000}}, "mm_processor_kwargs"),
    ({"model": "vllm-small", "messages": [{"role": "user", "content": "hi [e2e-prompt-param]"}],
      "extra_body": {"media_io_kwargs": {"video": {"num_frames": 4096}}}}, "extra_body.media_io_kwargs"),
])
def test_bodies_the_budget_cannot_vouch_for_get_a_400_and_never_reach_the_provider(proxy, upstream, body, field):
    marker = next(m for m in ("e2e-extra-body", "e2e-prompt-param", "e2e-deep-schema") if m in json.dumps(body))
    response = chat(proxy, body)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]
    assert payloads_for(upstream, marker) == []
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "blocked" and record["decision"]["block"]["kind"] == "malformed"


def test_a_responses_request_with_a_litellm_system_prompt_is_refused_before_litellm_bridges_it(proxy, upstream):
    """/v1/responses to a chat deployment goes through LiteLLM's completion(), which reads the same parameter."""
    response = httpx.post(f"{proxy.base_url}/v1/responses", timeout=60, headers={"authorization": "Bearer sk-default"},
                          json={"model": "claude", "input": "hi [e2e-prompt-responses]",
                                "litellm_system_prompt": "word " * 6000})
    assert response.status_code == 400 and "litellm_system_prompt" in response.text, response.text
    assert not [p for p in upstream_payloads(upstream) if "e2e-prompt-responses" in json.dumps(p["body"])]


def gemini(proxy, route: str, body: dict):
    import httpx

    return httpx.post(f"{proxy.base_url}{route}", json=body, timeout=60, headers={"authorization": "Bearer sk-default"})


def test_gemini_native_requests_are_budgeted_in_their_own_format(proxy, upstream):
    """A 30,000-token generateContent request used to reach a 16,000-token deployment untouched."""
    body = {"contents": [{"role": "user", "parts": [{"text": "word " * 30_000 + "[e2e-gemini]"}]}]}
    for route in ("/v1beta/models/small:generateContent", "/v1beta/models/small:streamGenerateContent"):
        response = gemini(proxy, route, body)
        assert response.status_code == 400, response.text
        assert "The input token count (" in response.text and "exceeds the maximum number of tokens allowed" in response.text
    assert not [p for p in upstream_payloads(upstream) if "e2e-gemini" in json.dumps(p)]


def test_a_gemini_part_hiding_text_beside_a_call_is_refused_before_litellm_s_adapter(proxy, upstream):
    """``small`` is an OpenAI deployment: LiteLLM's generateContent adapter forwards a part's ``text`` before its
    ``functionCall``, so text beside a call passed uncounted (216 KB reached a 4k window). A part carries one
    datum, as Gemini itself requires: a 400 naming it, nothing upstream."""
    body = {"contents": [{"role": "user", "parts": [{"text": "what does the tool say?"}]},
                         {"role": "model", "parts": [{"text": "word " * 30_000 + "[e2e-gemini-hidden]",
                                                      "functionCall": {"name": "lookup", "args": {}}}]},
                         {"role": "user", "parts": [{"functionResponse": {"name": "lookup", "response": {}}}]}]}
    response = gemini(proxy, "/v1beta/models/small:generateContent", body)
    assert response.status_code == 400, response.text
    assert "contents[1].parts[0]" in response.text and "text and functionCall" in response.text
    assert not [p for p in upstream_payloads(upstream) if "e2e-gemini-hidden" in json.dumps(p)]


def test_gemini_interactions_are_refused_by_default(proxy, upstream):
    response = gemini(proxy, "/v1beta/interactions", {"model": "small", "input": "word " * 30_000})
    assert response.status_code in (400, 404), response.text
    if response.status_code == 400:
        assert "route_not_budgeted" in response.text


def test_a_gemini_conversation_is_trimmed_for_its_deployment(proxy, upstream):
    contents = []
    for turn in range(16):
        contents += [{"role": "user", "parts": [{"text": f"question {turn}: " + "lorem ipsum dolor " * 60}]},
                     {"role": "model", "parts": [{"text": f"answer {turn}: " + "consectetur elit " * 60}]}]
    contents.append({"role": "user", "parts": [{"text": "final question [e2e-gemini-trim]"}]})
    response = gemini(proxy, "/v1beta/models/small:generateContent", {"contents": contents})
    assert response.status_code == 200, response.text
    sent = [p["body"] for p in upstream_payloads(upstream) if "e2e-gemini-trim" in json.dumps(p)]
    [payload] = sent  # LiteLLM sent the trimmed conversation to the 4k deployment as a chat request
    assert COUNTER.count_request(payload).total <= 4000 and len(payload["messages"]) < len(contents)


def pdf_in_object_stream(pages: int) -> str:
    import base64
    import zlib

    packed = zlib.compress(b"\n".join(b"<< /Type /Page /Parent 2 0 R >>" for _ in range(pages)))
    raw = b"%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n" + packed + b"\nendstream\n%%EOF"
    return "data:application/pdf;base64," + base64.b64encode(raw).decode()


def text_file(text: str) -> str:
    import base64

    return "data:text/plain;base64," + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("case, body, field", [
    ("pdf-object-stream", {"model": "small", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "summarise [e2e-pdf-object-stream]"},
        {"type": "file", "file": {"file_data": pdf_in_object_stream(200)}}]}]}, "messages"),
    ("text-file", {"model": "small", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "review [e2e-text-file]"},
        {"type": "file", "file": {"file_data": text_file("def handler(event):\n    return event\n" * 1500)}}]}]},
     "messages"),
    ("top-level-system", {"model": "small", "system": "You are a meticulous reviewer. " * 1000,
                          "messages": [{"role": "user", "content": "hi [e2e-top-level-system]"}]}, "messages"),
    ("float-max-tokens", {"model": "small", "max_tokens": 3990.0,
                          "messages": [{"role": "user", "content": "hi [e2e-float-max-tokens]"}]}, "max_tokens"),
    ("mistral-newlines", {"model": "mistral", "messages": [{"role": "user", "content": "\n" * 12_002 + "[e2e-mistral-newlines]"}]},
     "messages"),
    ("claude-without-max-tokens", {"model": "claude", "messages": [{"role": "user", "content": "hi [e2e-claude-without-max-tokens]"}]},
     "max_tokens"),
    # LiteLLM writes a 12-word placeholder over each empty text on the way to Claude, whatever its settings
    ("claude-empty-texts", {"model": "claude", "max_tokens": 50, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi [e2e-claude-empty-texts]"}, *[{"type": "text", "text": " "}] * 400]}]},
     "messages"),
])
def test_content_that_costs_more_than_it_looks_never_reaches_the_provider(proxy, upstream, case, body, field):
    """Each used to be counted far below its cost (a 200-page PDF as 3,014 tokens, 12,002 newlines through a
    Mistral group as 985, LiteLLM's own 4,096 max_tokens for Claude not reserved...) and reached the upstream."""
    response = chat(proxy, body)
    assert response.status_code == 400, (case, response.text)
    error = response.json()["error"]
    assert "context_length_exceeded" in json.dumps(error) and field in json.dumps(error)
    marker = f"[e2e-{case}]"
    assert not [p for p in upstream_payloads(upstream) if marker in json.dumps(p)], case


def test_records_stay_bounded_and_carry_no_client_text(proxy, upstream):
    body = filler_conversation(10, 60, "e2e-junk")
    body["metadata"] = {"budget_hook": {f"junk-{i}-" + "x" * 200: i for i in range(2000)}}
    response = chat(proxy, body)
    assert response.status_code == 200, response.text
    record = success_record(proxy, response.headers["x-litellm-call-id"])
    ignored = record["decision"]["ignored_client_settings"]
    assert len(ignored) == 11 and ignored[-1] == "... and 1990 more keys"
    assert len(json.dumps(record)) < 64 * 1024 and "lorem ipsum" not in json.dumps(record)


def test_the_plugin_listed_twice_decides_once(workdir, upstream):
    from .conftest import BUDGET_HOOK_SETTINGS, proxy_config, write_config
    from .harness import start_proxy

    config = proxy_config(upstream.port, BUDGET_HOOK_SETTINGS)
    config["litellm_settings"]["callbacks"] = ["budget_hook.proxy.plugin", "budget_hook.proxy.plugin"]
    path = write_config(workdir / "twice", config)
    twice = start_proxy(path, log_dir=path.parent)
    try:
        response = chat(twice, filler_conversation(10, 60, "e2e-twice"))
        assert response.status_code == 200, response.text
        assert response.headers["x-budget-decision"] == "trimmed"  # the second entry did not overwrite it
        [sent] = payloads_for(upstream, "e2e-twice")
        assert COUNTER.count_request(sent).total <= 4000
    finally:
        twice.stop()
