"""References the gateway cannot see, odd output allowances and client-chosen text, through a real proxy.

* Every field by which a request pulls in content it does not carry (a cached context, a stored prompt, an
  MCP server, a container's skills or uploads, a stored item, server-held history, a file or video by id or
  URL) is refused with a 400 naming it under ``unreadable_content: block`` (a second proxy, ``refs_proxy``,
  runs the e2e config with that setting), on chat, ``/v1/messages``, ``/v1/responses`` and Gemini's route,
  and never reaches the provider; under the default ``estimate`` it costs a flat 10,000 tokens and is flagged.
* An output allowance is read as the number a server reads (``"3000"``) or refused with a 400 naming the
  field (``1e309``, ``NaN``, ``-Infinity``, negatives, booleans, 10**30): never a default, never a 500.
* A client-chosen role or model name appears in no log line, record or metric; 2,000 made-up model names
  leave a real group's series counted under its own label.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from .conftest import BUDGET_HOOK_SETTINGS, proxy_config, write_config
from .harness import decision_records, start_proxy, upstream_payloads, wait_for_record

pytestmark = pytest.mark.e2e

MARKER = "SECRET-Q9ZX-PII"
HEADERS = {"authorization": "Bearer sk-default"}
USER = {"role": "user", "content": "hi"}


@pytest.fixture(scope="module")
def refs_proxy(workdir, upstream):
    """The e2e config with ``unreadable_content: block`` for every group."""
    path = write_config(workdir / "refs", proxy_config(upstream.port, {**BUDGET_HOOK_SETTINGS,
                                                                      "unreadable_content": "block"}))
    process = start_proxy(path, log_dir=path.parent)
    yield process
    process.stop()


def send(proxy, route: str, body: dict | str) -> httpx.Response:
    if isinstance(body, str):  # raw JSON text: what no encoder of ours would write (1e309, NaN)
        return httpx.post(f"{proxy.base_url}{route}", content=body, timeout=60,
                          headers={**HEADERS, "content-type": "application/json"})
    return httpx.post(f"{proxy.base_url}{route}", json=body, timeout=60, headers=HEADERS)


def gemini_route(group: str) -> str:
    return f"/v1beta/models/{group}:generateContent"


def error_text(response: httpx.Response) -> str:
    """The message of an error in any of the formats (OpenAI, Anthropic, Gemini)."""
    error = response.json().get("error", {})
    return error.get("message", "") if isinstance(error, dict) else str(error)


def reached_upstream(upstream, marker: str) -> bool:
    return any(marker in json.dumps(p) for p in upstream_payloads(upstream))


def tag(text: str) -> dict:
    return {"role": "user", "content": f"hi [{text}]"}


# --- references -------------------------------------------------------------------------------------------

#: (case, route, body, the field a block names): each marks its request with [e2e-ref-<case>]
REFERENCES = [
    ("chat-cached", "/v1/chat/completions",
     {"model": "small", "messages": [tag("e2e-ref-chat-cached")], "cached_content": "cachedContents/abc"},
     "cached_content"),
    ("chat-prompt-id", "/v1/chat/completions",
     {"model": "small", "messages": [tag("e2e-ref-chat-prompt-id")], "prompt_id": "support-bot"}, "prompt_id"),
    ("chat-mcp", "/v1/chat/completions",
     {"model": "small", "messages": [tag("e2e-ref-chat-mcp")],
      "tools": [{"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example"}]}, "tools[0]"),
    ("chat-file-id", "/v1/chat/completions",
     {"model": "small", "messages": [{"role": "user", "content": [
         {"type": "text", "text": "summarise [e2e-ref-chat-file-id]"},
         {"type": "file", "file": {"file_id": "file-abc"}}]}]}, "messages[0].content[1]"),
    ("chat-video", "/v1/chat/completions",
     {"model": "small", "messages": [{"role": "user", "content": [
         {"type": "text", "text": "what happens [e2e-ref-chat-video]"},
         {"type": "video_url", "video_url": {"url": "https://videos.example/v.mp4"}}]}]}, "messages[0].content[1]"),
    ("chat-extra-body", "/v1/chat/completions",
     {"model": "small", "messages": [tag("e2e-ref-chat-extra-body")], "extra_body": {"cached_content": "c/1"}},
     "extra_body.cached_content"),
    ("responses-prompt", "/v1/responses",
     {"model": "small", "input": "hi [e2e-ref-responses-prompt]", "prompt": {"id": "pmpt_abc", "version": "2"}},
     "prompt"),
    ("responses-previous", "/v1/responses",
     {"model": "small", "input": "hi [e2e-ref-responses-previous]", "previous_response_id": "resp_abc"},
     "previous_response_id"),
    ("responses-item-ref", "/v1/responses",
     {"model": "small", "input": [{"type": "item_reference", "id": "msg_abc"}, tag("e2e-ref-responses-item-ref")]},
     "input[0]"),
    ("responses-file-url", "/v1/responses",
     {"model": "small", "input": [{"role": "user", "content": [
         {"type": "input_text", "text": "read [e2e-ref-responses-file-url]"},
         {"type": "input_file", "file_url": "https://files.example/a.pdf"}]}]}, "input[0].content[1]"),
    ("responses-mcp", "/v1/responses",
     {"model": "small", "input": "hi [e2e-ref-responses-mcp]",
      "tools": [{"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example"}]}, "tools[0]"),
    ("messages-mcp", "/v1/messages",
     {"model": "claude", "max_tokens": 100, "messages": [tag("e2e-ref-messages-mcp")],
      "mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "docs"}]}, "mcp_servers[0]"),
    ("messages-skills", "/v1/messages",
     {"model": "claude", "max_tokens": 100, "messages": [tag("e2e-ref-messages-skills")],
      "container": {"skills": [{"type": "anthropic", "skill_id": "pptx", "version": "latest"}]}},
     "container.skills[0]"),
    ("messages-container-upload", "/v1/messages",
     {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
         {"type": "container_upload", "file_id": "file_011"},
         {"type": "text", "text": "analyse [e2e-ref-messages-container-upload]"}]}]}, "messages[0].content[0]"),
    ("messages-files-api", "/v1/messages",
     {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
         {"type": "document", "source": {"type": "file", "file_id": "file_011"}},
         {"type": "text", "text": "summarise [e2e-ref-messages-files-api]"}]}]}, "messages[0].content[0]"),
    ("gemini-cached", gemini_route("small"),
     {"contents": [{"role": "user", "parts": [{"text": "hi [e2e-ref-gemini-cached]"}]}],
      "cachedContent": "cachedContents/abc"}, "cachedContent"),
    ("gemini-file-uri", gemini_route("small"),
     {"contents": [{"role": "user", "parts": [{"text": "read [e2e-ref-gemini-file-uri]"},
                                              {"fileData": {"fileUri": "gs://bucket/a.pdf",
                                                            "mimeType": "application/pdf"}}]}]},
     "contents[0].parts[1]"),
]


@pytest.mark.parametrize("case, route, body, field", REFERENCES)
def test_a_reference_is_refused_naming_its_field_under_block(refs_proxy, upstream, case, route, body, field):
    response = send(refs_proxy, route, body)
    assert response.status_code == 400, (case, response.status_code, response.text[:500])
    message = error_text(response)
    assert field in message and "content_not_countable" in response.text, (case, message)
    assert not reached_upstream(upstream, f"e2e-ref-{case}"), case
    record = wait_for_record(refs_proxy, response.headers["x-litellm-call-id"])
    block = record["decision"]["block"]
    assert block["kind"] == "unreadable" and block["param"] == field, block


@pytest.mark.parametrize("case, route, body, field", [
    ("chat-cached", "/v1/chat/completions",
     {"model": "codex", "messages": [tag("e2e-est-chat-cached")], "cached_content": "cachedContents/abc"},
     "cached_content"),
    ("responses-prompt", "/v1/responses",
     {"model": "codex", "input": "hi [e2e-est-responses-prompt]", "prompt": {"id": "pmpt_abc"}}, "prompt"),
    ("messages-mcp", "/v1/messages",
     {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [tag("e2e-est-messages-mcp")],
      "mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "docs"}]}, "mcp_servers[0]"),
    ("gemini-cached", gemini_route("codex"),
     {"contents": [{"role": "user", "parts": [{"text": "hi [e2e-est-gemini-cached]"}]}],
      "cachedContent": "cachedContents/abc"}, "cachedContent"),
])
def test_by_default_a_reference_costs_the_flat_estimate_and_is_flagged(proxy, upstream, case, route, body, field):
    response = send(proxy, route, body)
    assert response.status_code == 200, response.text[:500]
    assert response.headers["x-budget-decision"] == "pass"
    assert int(response.headers["x-budget-tokens-before"]) >= 10_000
    if route.startswith("/v1beta"):
        return  # LiteLLM's own success logging fails on this route (httpx_response is None): no record
    decision = wait_for_record(proxy, response.headers["x-litellm-call-id"])["decision"]
    assert decision["action"] == "pass" and decision["tokens_before"] >= 10_000, decision
    assert any(field in warning for warning in decision["warnings"]), decision["warnings"]


def test_by_default_a_reference_on_a_small_window_is_refused_as_an_overflow(proxy, upstream):
    """10,000 estimated tokens of cached context cannot fit a 4,000-token window beside anything."""
    body = {"model": "small", "messages": [tag("e2e-est-small-cached")], "cached_content": "cachedContents/abc"}
    response = send(proxy, "/v1/chat/completions", body)
    assert response.status_code == 400 and "context_length_exceeded" in response.text, response.text[:500]
    assert not reached_upstream(upstream, "e2e-est-small-cached")


# --- output allowances ------------------------------------------------------------------------------------

#: (route, a body whose output allowance is the JSON text ``{}``, the field named, what the record reserves
#: for "3000": the group's window less reserve and margin shows it)
ALLOWANCES = [
    ("/v1/chat/completions", '{{"model": "small", "max_tokens": {}, "messages": [{{"role": "user", "content": "hi"}}]}}',
     "max_tokens"),
    ("/v1/chat/completions", '{{"model": "small", "max_completion_tokens": {}, '
                             '"messages": [{{"role": "user", "content": "hi"}}]}}', "max_completion_tokens"),
    ("/v1/messages", '{{"model": "claude", "max_tokens": {}, "messages": [{{"role": "user", "content": "hi"}}]}}',
     "max_tokens"),
    ("/v1/responses", '{{"model": "small", "max_output_tokens": {}, "input": "hi"}}', "max_output_tokens"),
    (gemini_route("small"), '{{"contents": [{{"role": "user", "parts": [{{"text": "hi"}}]}}], '
                            '"generationConfig": {{"maxOutputTokens": {}}}}}', "generationConfig.maxOutputTokens"),
]


@pytest.mark.parametrize("route, template, field", ALLOWANCES)
def test_a_numeric_string_allowance_is_reserved_as_its_number(proxy, route, template, field):
    response = send(proxy, route, template.format('"3000"'))
    assert response.status_code != 500 or "budget_hook" not in response.text, response.text[:500]
    # LiteLLM 1.108's generateContent adapter makes its completion under a call id of its own, with the outer
    # request's metadata: the attempt is adopted by the record object the decision attached (records.adopt),
    # and the record is written under the call id the response carries (docs/litellm-versions.md)
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    budget = record["decision"]["budget"]
    assert budget["output_reserve"] == 3000 and budget["output_reserve_source"] == "request", budget
    assert budget["budget"] == 4000 - 3000 - 200  # window - reserve - margin (not the default reserve of 600)


@pytest.mark.parametrize("route, template, field", ALLOWANCES)
@pytest.mark.parametrize("value", ["1e309", "-1e309", "NaN", "Infinity", "-Infinity", "-5", "true",
                                   "1000000000000000000000000000000", '"lots"'])
def test_an_allowance_that_is_no_token_count_is_a_400_naming_the_field(proxy, route, template, field, value):
    response = send(proxy, route, template.format(value))
    assert response.status_code == 400, (value, response.status_code, response.text[:500])
    assert field in error_text(response), (value, error_text(response))


# --- client-chosen text -----------------------------------------------------------------------------------

def budget_hook_lines(proxy) -> str:
    return "\n".join(line for line in proxy.stderr().splitlines() if "budget_hook" in line)


def metrics(proxy) -> str:
    return httpx.get(f"{proxy.base_url}/budget_hook/metrics", headers=HEADERS, timeout=10).text


@pytest.mark.parametrize("route, body", [
    ("/v1/chat/completions", {"model": "small", "messages": [{"role": f"{MARKER}-chat", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "small", "messages": [{"role": f"{MARKER}-big" + "x" * 1_000_000,
                                                              "content": "hi"}]}),
    ("/v1/messages", {"model": "claude", "max_tokens": 10, "messages": [{"role": f"{MARKER}-msg", "content": "hi"}]}),
    ("/v1/responses", {"model": "small", "input": [{"type": "message", "role": f"{MARKER}-resp", "content": "hi"}]}),
])
def test_an_invalid_role_appears_in_no_log_line_record_or_metric(proxy, route, body):
    response = send(proxy, route, body)
    assert response.status_code == 400, response.text[:500]
    assert "role" in error_text(response) and MARKER not in error_text(response)
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["block"]["kind"] == "malformed"
    time.sleep(0.3)  # LiteLLM logs the rejection after answering
    assert MARKER not in proxy.stderr(), [line[:300] for line in proxy.stderr().splitlines() if MARKER in line]
    assert MARKER not in metrics(proxy)


def test_a_gemini_role_nobody_defined_appears_in_no_log_line_or_metric(proxy):
    body = {"contents": [{"role": f"{MARKER}-gemini", "parts": [{"text": "hi"}]},
                         {"role": "user", "parts": [{"text": "hi"}]}]}
    response = send(proxy, gemini_route("small"), body)
    assert response.status_code == 200, response.text[:300]
    time.sleep(0.3)
    assert MARKER not in proxy.stderr() and MARKER not in metrics(proxy)


def test_a_made_up_model_name_appears_in_no_record_or_metric(proxy):
    response = send(proxy, "/v1/chat/completions", {"model": f"{MARKER}-model", "messages": [USER]})
    assert response.status_code in (400, 404), response.text[:300]
    call_id = response.headers.get("x-litellm-call-id")
    if call_id:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not [r for r in decision_records(proxy) if r.get("call_id") == call_id]:
            time.sleep(0.1)
    assert MARKER not in budget_hook_lines(proxy)
    assert MARKER not in metrics(proxy)


def test_a_wildcard_match_is_recorded_under_its_pattern(proxy):
    response = send(proxy, "/v1/chat/completions", {"model": "wild/gpt-4o-4k", "messages": [tag("e2e-wild-label")]})
    assert response.status_code == 200, response.text[:300]
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["model_group"] == "wild/*" and record["decision"]["counting_model"] == "wild/*"


def test_two_thousand_made_up_model_names_leave_a_real_group_counted_under_its_own_label(refs_proxy):
    async def flood():
        limits = httpx.Limits(max_connections=32)
        async with httpx.AsyncClient(base_url=refs_proxy.base_url, headers=HEADERS, timeout=60, limits=limits) as client:
            gate = asyncio.Semaphore(32)

            async def one(index: int) -> int:
                async with gate:
                    made_up = {"model": f"{MARKER}-{index}", "messages": [USER]}
                    return (await client.post("/v1/chat/completions", json=made_up)).status_code
            return await asyncio.gather(*(one(i) for i in range(2000)))

    statuses = asyncio.run(flood())
    assert 500 not in statuses
    response = send(refs_proxy, "/v1/chat/completions", {"model": "small", "messages": [tag("e2e-metrics-real")]})
    assert response.status_code == 200, response.text[:300]
    wait_for_record(refs_proxy, response.headers["x-litellm-call-id"])
    text = ""
    for _ in range(50):  # the success callback runs after the response
        text = metrics(refs_proxy)
        if 'model_group="small",outcome="success"' in text:
            break
        time.sleep(0.1)
    assert 'budget_hook_decisions_total{action="pass",model_group="small",outcome="success",team=""} 1' in text
    assert MARKER not in text and 'model_group="other"' not in text
    labels = {line.split('model_group="')[1].split('"')[0] for line in text.splitlines() if 'model_group="' in line}
    configured = {deployment["model_name"] for deployment in proxy_config(0, {})["model_list"]}
    assert "unconfigured" in labels and labels <= configured | {"unconfigured"}, labels
    litellm_metrics = httpx.get(f"{refs_proxy.base_url}/metrics/", headers=HEADERS, timeout=10, follow_redirects=True)
    ours = [line for line in litellm_metrics.text.splitlines() if line.startswith("budget_hook_")]
    assert ours and not [line for line in ours if MARKER in line]  # LiteLLM's own series are LiteLLM's business
