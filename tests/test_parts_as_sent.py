"""Content LiteLLM sends byte for byte like a file part, spelled so that it was priced as JSON text, by size or as a
10,000-token reference (an attack review, 2026-12-06): each spelling is checked against LiteLLM's own translation
(``anthropic_messages_pt``, ``_gemini_convert_messages_with_history``, ``_bedrock_converse_messages_pt``) and must
count at least what the plain spelling counts."""

from __future__ import annotations

import base64
import io
import zipfile
import zlib

import pytest

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy import load_settings
from budget_hook.shapes import SHAPES

GEMINI, GEMINI_MODEL = TokenCounter.for_model("gemini/gemini-2.5-flash"), "gemini-2.5-flash"
CLAUDE = TokenCounter.for_model("claude-sonnet-4-5")
BEDROCK_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
BEDROCK = TokenCounter.for_model("bedrock/" + BEDROCK_MODEL)


def pdf_b64(pages: int) -> str:
    objects = b"\n".join(b"<< /Type /Page /Parent 2 0 R >>" for _ in range(pages))
    raw = b"%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n" + zlib.compress(objects) + \
        b"\nendstream\n\n%%EOF"
    return base64.b64encode(raw).decode()


PDF = pdf_b64(100)
PDF_URL = "data:application/pdf;base64," + PDF
TEXT = "".join(f"The quick brown fox jumps over the lazy dog, said report line {i}.\n" for i in range(4000))
TEXT_B64 = base64.b64encode(TEXT.encode()).decode()


def user(part: dict) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": "summarise"}, part]}]


def tool_result(parts: list) -> list[dict]:
    return [{"role": "user", "content": "read it"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": parts}]


def gemini_sent(messages: list[dict]) -> list:
    from litellm.llms.vertex_ai.gemini.transformation import _gemini_convert_messages_with_history
    return _gemini_convert_messages_with_history(messages=messages, model=GEMINI_MODEL)


def claude_sent(messages: list[dict]) -> list:
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt
    return anthropic_messages_pt(messages, model="claude-sonnet-4-5", llm_provider="anthropic")


def bedrock_sent(messages: list[dict]) -> list:
    from litellm.litellm_core_utils.prompt_templates.factory import _bedrock_converse_messages_pt
    return _bedrock_converse_messages_pt(messages=messages, model=BEDROCK_MODEL, llm_provider="bedrock")


# 1. A chat tool result to Gemini: convert_to_gemini_tool_call_result reads a ``file`` or ``input_file`` part's
#    top-level file_data, else its nested ``file.file_data``, else a ``file`` that is a string, and an Anthropic
#    ``image`` block, and sends each as inline_data of its own type (the eighth review found the last three file
#    spellings counted 41-174 tokens for a PDF Gemini bills 25,820).
@pytest.mark.parametrize("part", [
    {"type": "input_file", "file_data": PDF_URL},
    {"type": "image", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}},
    {"type": "input_file", "file": {"file_data": PDF_URL}},
    {"type": "file", "file": PDF_URL},
    {"type": "file", "file": {"file_data": "data:text/plain;base64,aGk="}, "file_data": PDF_URL},
], ids=["input_file", "anthropic-image-block", "input_file-nested", "file-string", "file-top-level-data"])
def test_a_pdf_in_a_gemini_tool_result_is_priced_as_the_pdf_litellm_sends(part):
    canonical = tool_result([{"type": "file", "file": {"file_data": PDF_URL}}])
    spelled = tool_result([part])
    assert gemini_sent(spelled) == gemini_sent(canonical)  # the same function_response, PDF inline
    assert GEMINI.count_request({"messages": spelled}).total >= GEMINI.count_request({"messages": canonical}).total


# 2. A data URL as LiteLLM parses it: Anthropic and Gemini split at "data:" then ";base64," (the declared format
#    replaces the type); Bedrock takes whatever follows the one comma of any string holding "base64".
@pytest.mark.parametrize("sent, counter, file_data, media_type, payload", [
    (claude_sent, CLAUDE, "data:,;base64,", "text/plain", TEXT_B64),
    (claude_sent, CLAUDE, "data:,;base64,", "application/pdf", PDF),
    (gemini_sent, GEMINI, "data:,;base64,", "text/plain", TEXT_B64),
    (gemini_sent, GEMINI, "data:x,y;base64,", "application/pdf", PDF),
    (bedrock_sent, BEDROCK, "base64,", "application/pdf", PDF),
    (bedrock_sent, BEDROCK, "DATA:pdf;base64,", "application/pdf", PDF),
    (bedrock_sent, BEDROCK, "base64,", "text/plain", TEXT_B64),
], ids=["claude-text", "claude-pdf", "gemini-text", "gemini-pdf", "bedrock-pdf", "bedrock-upper-pdf",
        "bedrock-text"])
def test_a_data_url_is_priced_as_litellm_parses_it(sent, counter, file_data, media_type, payload):
    canonical = user({"type": "file", "file": {"file_data": f"data:{media_type};base64,{payload}"}})
    spelled = user({"type": "file", "file": {"file_data": file_data + payload, "format": media_type}})
    assert sent(spelled) == sent(canonical)  # byte for byte the same upstream
    assert counter.count_request({"messages": spelled}).total >= counter.count_request({"messages": canonical}).total


def test_a_pdf_litellm_reads_is_refused_under_block_like_its_plain_spelling():
    body = {"model": "g", "messages": user({"type": "file", "file": {"file_data": "base64," + PDF,
                                                                      "format": "application/pdf"}})}
    limits = ModelLimits(200_000, "test", "bedrock/" + BEDROCK_MODEL)
    decision = decide(BudgetRequest(SHAPES.get("chat"), body, "g", limits), load_settings({}))
    assert decision.action == "blocked"  # 300,014 tokens as data:application/pdf;base64,...; today 3,014: pass


# 3. A data URL in file_id (or a Responses input_file's file_url, which LiteLLM's bridge makes the file_id): Gemini
#    and Bedrock send ``file_id or file_data``, so the content is inline, not a reference.
@pytest.mark.parametrize("sent, counter", [(gemini_sent, GEMINI), (bedrock_sent, BEDROCK)], ids=["gemini", "bedrock"])
def test_a_data_url_in_file_id_is_priced_as_its_content(sent, counter):
    canonical = user({"type": "file", "file": {"file_data": PDF_URL}})
    spelled = user({"type": "file", "file": {"file_id": PDF_URL}})
    assert sent(spelled) == sent(canonical)
    assert counter.count_request({"messages": spelled}).total >= counter.count_request({"messages": canonical}).total


def test_a_responses_file_url_holding_a_data_url_is_priced_as_its_content():
    from litellm.responses.litellm_completion_transformation.transformation import LiteLLMCompletionResponsesConfig
    item = {"type": "input_file", "file_url": PDF_URL}
    assert LiteLLMCompletionResponsesConfig._transform_input_file_item_to_file_item(item) == \
        {"type": "file", "file": {"file_id": PDF_URL}}
    limits = ModelLimits(32_768, "test", "gemini/gemini-2.5-flash")
    decided = [decide(BudgetRequest(SHAPES.get("responses"), {"model": "g", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "x"}, part]}]}, "g", limits), load_settings({}))
        for part in (item, {"type": "input_file", "file_data": PDF_URL})]
    assert decided[0].report.tokens_before == decided[1].report.tokens_before > 25_000  # 10,008 as a reference
    assert decided[0].warnings == decided[1].warnings == ()  # its content is in the request: not flagged


# 4. (provider side not measurable offline) Bedrock Converse sends a docx as a document whose text it extracts: the
#    text is not counted here, so the document is flagged (refused under ``unreadable_content: block``).
def test_an_office_document_is_flagged_as_content_not_counted():
    text = "All work and no play makes Jack a dull boy. " * 50_000
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", f"<w:document><w:body><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body>"
                                        "</w:document>")
    mime = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    messages = user({"type": "file", "file": {"file_data": f"data:{mime};base64,"
                                                           + base64.b64encode(buf.getvalue()).decode()}})
    assert bedrock_sent(messages)[0]["content"][1]["document"]["format"] == "docx"
    limits = ModelLimits(200_000, "test", "bedrock/" + BEDROCK_MODEL)
    body = {"model": "g", "messages": messages}
    assert decide(BudgetRequest(SHAPES.get("chat"), body, "g", limits), load_settings({})).warnings[0].endswith(
        "an Office document: Bedrock and the Responses API read its text, which is not counted here")
    refused = decide(BudgetRequest(SHAPES.get("chat"), body, "g", limits), load_settings({"unreadable_content": "block"}))
    assert refused.action == "blocked"


# 5. Gemini samples a video at the ``fps`` a part's video_metadata asks (LiteLLM forwards it on the part), and bills
#    each frame (258 tokens at 2.5's default resolution): the count assumes 1 frame a second.
def test_a_videos_frame_rate_is_priced():
    video = "data:video/mp4;base64," + base64.b64encode(b"\x00" * 12_500 * 30).decode()  # 30 s, lowest bitrate
    messages = user({"type": "file", "file": {"file_data": video, "video_metadata": {"fps": 24}}})
    assert gemini_sent(messages)[0]["parts"][1]["video_metadata"] == {"fps": 24}
    assert GEMINI.count_request({"messages": messages}).total >= 24 * 258 * 30  # 7,896 today


def test_gemini_s_native_video_metadata_fps_is_priced():
    video = base64.b64encode(b"\x00" * 12_500 * 30).decode()
    body = {"contents": [{"role": "user", "parts": [{"text": "watch"}, {"inlineData": {"mimeType": "video/mp4",
                                                                                        "data": video}}]}]}
    limits = ModelLimits(2_000_000, "test", "gemini/gemini-2.5-flash")
    counted = [decide(BudgetRequest(SHAPES.get("gemini"), body, "g", limits), load_settings({})).report.tokens_before
               for body in (body, {"contents": [{**body["contents"][0], "parts": [
                   body["contents"][0]["parts"][0], {**body["contents"][0]["parts"][1], "videoMetadata": {"fps": 24}}]}]})]
    assert counted[1] >= 24 * 258 * 30 > counted[0]


@pytest.mark.parametrize("fps", [None, "x", float("nan"), float("inf"), True, 0.5, -3])
def test_a_frame_rate_that_is_not_over_one_prices_one_frame_a_second(fps):
    from budget_hook.counting.media import video_fps
    assert video_fps({"video_metadata": {"fps": fps}}) == 1.0


def test_the_common_spelling_of_a_data_url_is_read_once():
    from budget_hook.counting.parts import readings
    url = "data:image/png;base64,iVBORw0KGgo="
    assert readings(url) == [url]
    assert readings("data:Image/PNG;base64,AAAA") == ["data:Image/PNG;base64,AAAA", "data:image/png;base64,AAAA"]
    assert readings("https://example.com/a.png") == []


def test_an_anthropic_image_block_without_inline_data_is_priced_as_its_json():
    part = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    from budget_hook.counting.parts import sent_as
    assert sent_as(part) is None


# --- a review of the fix ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("part", [
    {"type": "file", "file": {"file_data": "gs://data:application/pdf;base64," + PDF}},
    {"type": "file", "file": {"file_data": "gs://b/data:,;base64," + PDF, "format": "application/pdf"}},
], ids=["own-type", "declared-type"])
def test_a_gs_prefixed_data_url_is_priced_as_the_pdf_claude_is_sent(part):
    """Claude fetches only a string starting with "http"; anything else is split at "data:" (gs:// included): 1,711
    counted, 300,014 as the PDF it is sent as."""
    canonical = user({"type": "file", "file": {"file_data": PDF_URL}})
    spelled = user(part)
    assert claude_sent(spelled) == claude_sent(canonical)  # the same 100-page PDF document
    assert CLAUDE.count_request({"messages": spelled}).total >= CLAUDE.count_request({"messages": canonical}).total


def _png(width: int, height: int) -> bytes:
    import struct
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def test_a_newline_in_the_media_type_is_read_as_bedrock_reads_it():
    """Bedrock reads the type with ``re.match(r"data:(.*?);base64", ...)``, whose ``.`` stops at a newline: the part
    is the image/jpeg it defaults to, not audio priced by size (8,354 counted, 33,954 as the images)."""
    payload = base64.b64encode(_png(1568, 1568)).decode()
    plain = [{"role": "user", "content": [{"type": "text", "text": "look"}, *[
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + payload}}] * 20]}]
    spelled = [{"role": "user", "content": [{"type": "text", "text": "look"}, *[
        {"type": "image_url", "image_url": {"url": "data:audio/mp\n3;base64," + payload}}] * 20]}]
    assert bedrock_sent(spelled) == bedrock_sent(plain)
    assert BEDROCK.count_request({"messages": spelled}).total >= BEDROCK.count_request({"messages": plain}).total


def test_an_anthropic_image_block_in_a_tool_result_is_priced_as_the_image_gemini_is_sent():
    """Gemini receives it as it receives the same image in an ``image_url``: priced so, not as its base64 text."""
    payload = base64.b64encode(_png(512, 512) + b"\x00" * 300_000).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": payload}}
    as_url = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + payload}}
    assert gemini_sent(tool_result([block])) == gemini_sent(tool_result([as_url]))
    assert GEMINI.count_request({"messages": tool_result([block])}).total == \
        GEMINI.count_request({"messages": tool_result([as_url])}).total
