"""Content that is not plain text is never counted below what it costs, nor silently guessed at."""

from __future__ import annotations

import base64
import zlib

import pytest

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.counting.media import FILE_TOKENS_PER_PDF_PAGE, pdf_page_count, unreadable
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy import load_settings
from budget_hook.shapes import SHAPES

GPT = TokenCounter.for_model("gpt-4o")
CLAUDE = TokenCounter.for_model("claude-sonnet-4-5")


def pdf(pages: int, *, object_stream: bool = False, escaped: bool = False) -> str:
    page = b"<< /Type /P#61ge /Parent 2 0 R >>" if escaped else b"<< /Type /Page /Parent 2 0 R >>"
    objects = b"\n".join(page for _ in range(pages))
    if object_stream:
        packed = zlib.compress(objects)
        body = b"%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n" + packed + b"\nendstream\n"
    else:
        body = b"%PDF-1.4\n" + objects
    return "data:application/pdf;base64," + base64.b64encode(body + b"\n%%EOF").decode()


@pytest.mark.parametrize("kind", ["plain", "object_stream", "escaped_names", "both"])
def test_pdf_pages_are_counted_however_they_are_written(kind):
    data = pdf(200, object_stream=kind in ("object_stream", "both"), escaped=kind in ("escaped_names", "both"))
    assert pdf_page_count(data) == 200
    body = {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": data}}]}]}
    assert GPT.count_request(body).total >= 200 * FILE_TOKENS_PER_PDF_PAGE


def test_a_page_tree_count_is_used_when_page_objects_are_not_visible():
    raw = b"%PDF-1.7\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 150 >> endobj\n%%EOF"
    assert pdf_page_count("data:application/pdf;base64," + base64.b64encode(raw).decode()) == 150


def test_a_pdf_whose_pages_cannot_be_found_is_flagged():
    data = "data:application/pdf;base64," + base64.b64encode(b"%PDF-1.7\n% nothing here\n").decode()
    assert unreadable({"type": "file", "file": {"file_data": data}}) == "a PDF whose pages cannot be counted"
    assert unreadable({"type": "file", "file": {"file_id": "file-abc"}}).startswith("a file referenced by id")
    assert unreadable({"type": "file", "file": {"file_data": pdf(3)}}) is None


def test_a_text_file_is_counted_as_the_text_it_carries():
    text = "def handler(event):\n    return {'status': 200, 'body': event}\n" * 800
    data = "data:text/plain;base64," + base64.b64encode(text.encode()).decode()
    body = {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": data}}]}]}
    assert GPT.count_request(body).total >= GPT.count_text(text)


def anthropic(document: dict) -> dict:
    return {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "document", **document}, {"type": "text", "text": "summarise"}]}]}


def test_every_anthropic_document_source_is_counted_by_what_it_carries():
    text = "The quarterly report shows revenue growth across all regions. " * 600
    as_content = anthropic({"source": {"type": "content", "content": [{"type": "text", "text": text}]}})
    as_text = anthropic({"source": {"type": "text", "media_type": "text/plain", "data": text}})
    shape = SHAPES.get("anthropic")
    assert shape.count(as_content, CLAUDE) >= CLAUDE.count_text(text)
    assert abs(shape.count(as_content, CLAUDE) - shape.count(as_text, CLAUDE)) < 50
    small = anthropic({"source": {"type": "content", "content": "short"}})
    assert shape.count(small, CLAUDE) < 200


def decide_with(shape: str, body: dict, **settings):
    limits = ModelLimits(200_000, "test", "anthropic/claude-sonnet-4-5" if shape == "anthropic" else "gpt-4o")
    return decide(BudgetRequest(SHAPES.get(shape), body, "g", limits), load_settings(settings))


@pytest.mark.parametrize("shape, body, path", [
    ("anthropic", anthropic({"source": {"type": "url", "url": "https://example.com/report.pdf"}}),
     "messages[0].content[0]"),
    ("anthropic", anthropic({"source": {"type": "file", "file_id": "file_011"}}), "messages[0].content[0]"),
    ("chat", {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}]},
     "messages[0].content[0]"),
    ("responses", {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-abc"}]}]},
     "input[0].content[0]"),
])
def test_content_referenced_by_id_or_url_is_flagged_and_blocked_when_the_policy_says_so(shape, body, path):
    estimated = decide_with(shape, body)
    assert estimated.action == "pass" and any(path in w for w in estimated.warnings)
    blocked = decide_with(shape, body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.kind == "unreadable" and blocked.block.param == path
    assert blocked.block.code == "content_not_countable" and "send the content inline" in blocked.block.message


def test_audio_and_video_cost_at_least_their_duration_at_the_lowest_bitrates():
    from budget_hook.counting.media import audio_tokens

    one_minute_speech = base64.b64encode(b"\x00" * 750 * 60).decode()  # 6 kbit/s for 60 s
    assert audio_tokens(one_minute_speech) >= 32 * 60  # Gemini bills 32 tokens per second of audio
    video = "data:video/mp4;base64," + base64.b64encode(b"\x00" * 12_500 * 30).decode()  # 100 kbit/s, 30 s
    body = {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": video}}]}]}
    assert GPT.count_request(body).total >= 263 * 30  # 263 tokens per second of video
    audio_file = "data:audio/ogg;base64," + one_minute_speech
    body = {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": audio_file}}]}]}
    assert GPT.count_request(body).total >= 32 * 60
