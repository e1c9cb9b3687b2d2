"""A part is priced as what LiteLLM sends for it, whatever its ``type`` says (a real proxy, Claude and Gemini).

An attack review (2026-12-06) sent a 100-page PDF as an Anthropic ``document`` part on ``/chat/completions`` (LiteLLM
passes it to Claude as it is), inside an ``image_url`` (a document to Claude, ``inline_data`` to Gemini) and as a
``file`` whose data URL said ``text/plain`` with ``format: application/pdf`` (LiteLLM sends the format): each was
counted at 1,577-13,789 tokens and forwarded, against 258,014-300,023 for the same PDF as a file. A ``gs://`` or
Files API URL in an ``image_url`` reached Gemini as a file reference, never flagged. Here each is refused, with
``unreadable_content: block``, before anything reaches the fake provider; an image stays an image.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from .harness import MASTER_KEY, model_entry, payloads_with, serve_config, start_fake_provider

pytestmark = pytest.mark.e2e


def pdf_base64(pages: int) -> str:
    objects = b"\n".join(b"<< /Type /Page /Parent 2 0 R >>" for _ in range(pages))
    return base64.b64encode(b"%PDF-1.4\n" + objects + b"\n%%EOF").decode()


PDF = pdf_base64(100)
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("media_parts")
    upstream = start_fake_provider(folder, {"claude-sonnet-4-5-20k": 20000, "gemini-2.5-flash-32k": 32000})
    base = f"http://127.0.0.1:{upstream.port}"
    config = {
        "model_list": [
            model_entry("claude", "anthropic/claude-sonnet-4-5-20k", base, 20000),
            model_entry("gem", "gemini/gemini-2.5-flash-32k", base, 32000)],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {"unreadable_content": "block"}},
    }
    yield from serve_config(folder, config, upstream)


def send(process, group: str, marker: str, part: dict, *, in_tool_result: bool = False) -> httpx.Response:
    ask = {"type": "text", "text": f"summarise [{marker}]"}
    if in_tool_result:  # a tool's result: LiteLLM sends a PDF there to Claude as a document
        messages = [{"role": "user", "content": [ask]},
                    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                                           "function": {"name": "read", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": [part]}]
    else:
        messages = [{"role": "user", "content": [ask, part]}]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}]
    return httpx.post(f"{process.base_url}/v1/chat/completions", timeout=120,
                      headers={"authorization": f"Bearer {MASTER_KEY}"},
                      json={"model": group, "max_tokens": 100, "messages": messages, "tools": tools})


@pytest.mark.parametrize("group, part, in_tool_result, code", [
    ("claude", {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
     False, "context_length_exceeded"),
    ("claude", {"type": "image_url", "image_url": {"url": "data:application/pdf;base64," + PDF}}, True,
     "context_length_exceeded"),
    ("claude", {"type": "file", "file": {"file_data": "data:text/plain;base64," + PDF, "format": "application/pdf"}},
     False, "context_length_exceeded"),
    ("claude", {"type": "document", "source": {"type": "url", "url": "https://example.com/big.pdf"}}, False,
     "content_not_countable"),
    ("gem", {"type": "image_url", "image_url": {"url": "data:application/pdf;base64," + pdf_base64(1000)}}, False,
     "context_length_exceeded"),
    ("gem", {"type": "image_url", "image_url": {"url": "gs://bucket/book.pdf"}}, False, "content_not_countable"),
    # a review of the fix: Gemini reads mime_type too; Claude's tool results read the data URL's type, not format
    ("gem", {"type": "image_url", "image_url": {"url": "data:image/png;base64," + pdf_base64(1000),
                                                "mime_type": "application/pdf"}}, False, "context_length_exceeded"),
    ("claude", {"type": "image_url", "image_url": {"url": "data:application/pdf;base64," + PDF, "format": "image/png"}},
     True, "context_length_exceeded"),
    ("gem", {"type": "image_url", "image_url": {"url": "https://generativelanguage.googleapis.com/v1beta/files/x",
                                                "format": "application/pdf"}}, False, "content_not_countable"),
], ids=["claude-document-part", "claude-pdf-in-image-url", "claude-file-format-pdf", "claude-document-url",
        "gemini-pdf-in-image-url", "gemini-gs-reference", "gemini-pdf-by-mime-type", "claude-pdf-declared-png",
        "gemini-files-api-reference"])
def test_a_part_priced_as_what_litellm_sends_never_reaches_the_provider_over_the_window(proxy, group, part,
                                                                                         in_tool_result, code):
    process, upstream = proxy
    marker = f"e2e-media-{group}-{len(json.dumps(part)) % 10_000}-{in_tool_result}"
    response = send(process, group, marker, part, in_tool_result=in_tool_result)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code, response.text
    assert not payloads_with(upstream, marker)


def test_an_image_stays_an_image(proxy):
    process, upstream = proxy
    response = send(process, "gem", "e2e-media-png", {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + PNG}})
    assert response.status_code == 200, response.text
    assert payloads_with(upstream, "e2e-media-png")


# --- a seventh attack review (2026-12-06): content LiteLLM sends as a file, spelled so that it was priced as JSON
# text or by size (a data URL read as Claude, Gemini and Bedrock read it; Gemini's tool results' own part shapes) ---

TEXT_B64 = base64.b64encode("".join(f"The quick brown fox jumps over the lazy dog, said report line {i}.\n"
                                    for i in range(4000)).encode()).decode()


@pytest.mark.parametrize("group, part, in_tool_result", [
    ("gem", {"type": "input_file", "file_data": "data:application/pdf;base64," + pdf_base64(1000)}, True),
    ("gem", {"type": "image", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf_base64(1000)}},
     True),
    ("claude", {"type": "file", "file": {"file_data": "data:,;base64," + TEXT_B64, "format": "text/plain"}}, False),
    ("gem", {"type": "file", "file": {"file_data": "data:,;base64," + TEXT_B64, "format": "text/plain"}}, False),
], ids=["gemini-tool-result-input_file", "gemini-tool-result-image-block", "claude-text-by-format",
        "gemini-text-by-format"])
def test_content_litellm_sends_as_a_file_never_reaches_the_provider_over_the_window(proxy, group, part,
                                                                                    in_tool_result):
    process, upstream = proxy
    marker = f"e2e-parts-as-sent-{group}-{len(json.dumps(part)) % 10_000}-{in_tool_result}"
    response = send(process, group, marker, part, in_tool_result=in_tool_result)
    sent = payloads_with(upstream, marker)
    assert not sent, f"{response.status_code} {response.headers.get('x-budget-decision')}: " \
                     f"{len(json.dumps(sent[0]))} bytes upstream"
