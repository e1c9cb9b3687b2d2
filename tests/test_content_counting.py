"""Content that is not plain text is never counted below what it costs, nor silently guessed at."""

from __future__ import annotations

import base64
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# --- a part priced as what LiteLLM sends for it (counting.parts.sent_as) ----------------------------------
# An attack review (2026-12-06): LiteLLM sends a PDF in an image_url to Claude as a document and to Gemini as
# inline_data, reads a file's ``format`` over its data URL's type, passes an Anthropic ``document`` part on chat
# through to Claude, and sends gs:// and Files API URLs to Gemini as file references. Priced by their ``type``, a
# 100-page PDF was 1,577-2,377 tokens against 300,023 as the PDF; the references were never flagged.

PDF_100 = pdf(100)
PDF_BODY = PDF_100.partition(",")[2]


def chat_part(part: dict) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "summarise"}, part]}]}


AS_FILE = chat_part({"type": "file", "file": {"file_data": PDF_100}})
DISGUISED = {
    "image_url_with_a_pdf": {"type": "image_url", "image_url": {"url": PDF_100}},
    "image_url_string_with_a_pdf": {"type": "image_url", "image_url": PDF_100},
    "image_url_declared_pdf": {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PDF_BODY,
                                                                  "format": "application/pdf"}},
    "file_text_declared_pdf": {"type": "file", "file": {"file_data": "data:text/plain;base64," + PDF_BODY,
                                                        "format": "application/pdf"}},
    "chat_document_part": {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                          "data": PDF_BODY}},
    # a review of the fix: Gemini reads mime_type and content_type too; Claude's tool results read the data URL's
    # own type whatever the format says; LiteLLM finds a data URL after any text (split("data:")[1])
    "image_url_mime_type_pdf": {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PDF_BODY,
                                                                   "mime_type": "application/pdf"}},
    "image_url_content_type_pdf": {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PDF_BODY,
                                                                      "content_type": "application/pdf"}},
    "image_url_pdf_declared_png": {"type": "image_url", "image_url": {"url": PDF_100, "format": "image/png"}},
    "image_url_text_before_data": {"type": "image_url", "image_url": {"url": " " + PDF_100}},
    "file_text_before_data": {"type": "file", "file": {"file_data": "x " + PDF_100}},
}


@pytest.mark.parametrize("name", DISGUISED)
@pytest.mark.parametrize("counter", [GPT, CLAUDE, TokenCounter.for_model("gemini/gemini-2.5-flash")],
                         ids=["gpt", "claude", "gemini"])
def test_a_pdf_is_priced_as_a_pdf_whatever_part_carries_it(name, counter):
    assert counter.count_request(chat_part(DISGUISED[name])).total >= counter.count_request(AS_FILE).total


@pytest.mark.parametrize("part", [
    {"type": "image_url", "image_url": {"url": "gs://bucket/book.pdf"}},
    {"type": "image_url", "image_url": {"url": "https://generativelanguage.googleapis.com/v1beta/files/abc"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/clip", "format": "video/mp4"}},
    {"type": "document", "source": {"type": "url", "url": "https://example.com/big.pdf"}},
    {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}},
], ids=["gs-pdf", "files-api", "https-declared-video", "document-url", "document-file-id"])
def test_a_file_by_reference_in_any_part_is_flagged_and_blocked_when_the_policy_says_so(part):
    body = chat_part(part)
    estimated = decide_with("chat", body)
    assert estimated.action == "pass" and any("messages[0].content[1]" in w for w in estimated.warnings)
    assert GPT.count_request(body).total >= 10_000  # FILE_REFERENCE_TOKENS
    blocked = decide_with("chat", body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.param == "messages[0].content[1]"


@pytest.mark.parametrize("part", [
    {"type": "image_url", "image_url": {"url": "gs://bucket/cat.png"}},
    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "format": "image/png"}},
], ids=["gs-image", "https-image", "data-image"])
def test_an_image_stays_an_image(part):
    body = chat_part(part)
    assert decide_with("chat", body, unreadable_content="block").action == "pass"
    assert GPT.count_request(body).total < 2_000


def test_audio_or_video_bytes_in_an_image_url_cost_their_duration():
    video = base64.b64encode(b"\x00" * 12_500 * 30).decode()  # 30 s at the lowest bitrate
    as_image = chat_part({"type": "image_url", "image_url": {"url": "data:video/mp4;base64," + video}})
    as_file = chat_part({"type": "file", "file": {"file_data": "data:video/mp4;base64," + video}})
    assert GPT.count_request(as_image).total >= GPT.count_request(as_file).total >= 263 * 30
    declared = chat_part({"type": "image_url", "image_url": {"url": "data:image/png;base64," + video,
                                                             "format": "audio/wav"}})
    assert GPT.count_request(declared).total >= 32 * 30 * 12_500 // 750


@settings(max_examples=60, deadline=None)
@given(real=st.sampled_from(["application/pdf", "text/plain", "audio/wav", "video/mp4"]),
       said=st.sampled_from(["image/png", "image/jpeg", "text/plain", "application/pdf", None]),
       wrapper=st.sampled_from(["image_url", "image_url+format", "file+format"]))
def test_a_part_is_never_priced_below_the_file_it_is_sent_as(real, said, wrapper):
    """Whatever type the URL and the part claim, the price is at least the file of the type LiteLLM sends."""
    payload = PDF_BODY if real == "application/pdf" else base64.b64encode(b"note " * 4000).decode()
    actual = {"type": "file", "file": {"file_data": f"data:{real};base64,{payload}"}}
    shown = f"data:{said or real};base64,{payload}"
    part = {"image_url": {"type": "image_url", "image_url": {"url": f"data:{real};base64,{payload}"}},
            "image_url+format": {"type": "image_url", "image_url": {"url": shown, "format": real}},
            "file+format": {"type": "file", "file": {"file_data": shown, "format": real}}}[wrapper]
    for counter in (GPT, CLAUDE):
        assert counter.count_request(chat_part(part)).total >= counter.count_request(chat_part(actual)).total


def calls(call_id: str) -> dict:
    """A tool call and its result under ``call_id``."""
    return {"messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": call_id, "content": "ok"}]}


def test_a_tool_call_id_no_provider_would_make_is_counted_as_the_text_it_is():
    """Providers make ids of 9-30 characters, which the fitted framing prices; a client may send any string,
    and the provider receives it (the review's follow-up: ids were never counted)."""
    for counter in (GPT, CLAUDE):
        short = counter.count_request(calls("call_" + "a" * 24)).total
        assert counter.count_request(calls("call_" + "b" * 24)).total == short  # a real id: unchanged
        long_id = "call_" + " ".join(f"w{i}" for i in range(2000))
        assert counter.count_request(calls(long_id)).total >= short + 2 * (counter.count_text(long_id) - 24)


@pytest.mark.parametrize("shape, body, path", [
    ("responses", {"input": [{"role": "user", "content": [
        {"type": "input_text", "text": "read"}, {"type": "input_image", "image_url": "gs://bucket/book.pdf"}]}]},
     "input[0].content[1]"),
    ("anthropic", {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "read"}, {"type": "image", "source": {
            "type": "base64", "media_type": "application/pdf",
            "data": base64.b64encode(b"%PDF-1.7\n% no pages\n").decode()}}]}]}, "messages[0].content[1]"),
])
def test_every_shape_flags_what_its_parts_are_sent_as(shape, body, path):
    """The view's part is priced as what LiteLLM sends (a reference, a PDF); the shape's own check names it too."""
    estimated = decide_with(shape, body)
    assert any(path in w for w in estimated.warnings), estimated.warnings
    blocked = decide_with(shape, body, unreadable_content="block")
    assert blocked.action == "blocked" and blocked.block.param == path


def test_an_assistants_generated_images_are_priced_as_what_they_carry():
    """LiteLLM sends an assistant message's ``images`` back to Gemini as inline data (a review of the fix: a PDF
    there was not counted at all)."""
    gemini = TokenCounter.for_model("gemini/gemini-2.5-flash")
    history = [{"role": "user", "content": "draw"},
               {"role": "assistant", "content": "here", "images": [{"type": "image_url", "index": 0,
                                                                    "image_url": {"url": PDF_100}}]},
               {"role": "user", "content": "thanks"}]
    assert gemini.count_request({"messages": history}).total >= gemini.count_request(AS_FILE).total


def test_an_id_of_many_tokens_in_few_characters_is_counted():
    """A threshold in characters let 64 characters of 64 tokens pass (a review of the fix): it is in tokens."""
    for counter in (GPT, CLAUDE):
        short = counter.count_request(calls("toolu_" + "Ab3" * 8)).total
        assert counter.count_request(calls("-9" * 32)).total >= short + 2 * (counter.count_text("-9" * 32) - 24) > short


def test_a_media_type_is_read_whatever_its_case():
    """``data:AUDIO/WAV`` is the audio it says (it was priced by size, half the lowest bitrate's price)."""
    audio = base64.b64encode(b"\x00" * 750 * 100).decode()  # 100 s at 6 kbit/s
    for header in ("data:audio/wav", "data:AUDIO/WAV", "data:Audio/Wav"):
        part = {"type": "file", "file": {"file_data": f"{header};base64,{audio}"}}
        assert GPT.count_request(chat_part(part)).total >= 32 * 100, header
