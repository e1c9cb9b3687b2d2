"""Counting matches what providers bill, on published and recorded ground truth."""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import replace

import pytest

from budget_hook.counting import TokenCounter
from budget_hook.counting.images import anthropic_image_tokens, image_dimensions, openai_tile_tokens
from budget_hook.counting.media import audio_tokens, file_tokens
from budget_hook.counting.profiles import resolve_tokenizer
from budget_hook.errors import MalformedRequestError
from budget_hook.providers.openai import GPT5_TOOLS_OVERHEAD, OPENAI_TOKENS_PER_FUNCTION, OPENAI_TOOLS_OVERHEAD

from .conftest import load_json

COOKBOOK = load_json("peer_cases/openai_cookbook_counts.json")["cases"]
HMARR = load_json("peer_cases/openai_chat_tokens_api_counts.json")
ANY_OF = {"TEST_CASES[24]", "TEST_CASES[25]", "TEST_CASES[26]", "TEST_CASES[27]"}


def cookbook_counter(model: str) -> TokenCounter:
    """The counter without the tool terms fitted on recent bills (``OPENAI_TOOLS_OVERHEAD``, per function,
    unrendered schema text): the cookbook's rendering alone, which these older published counts measured."""
    profile = resolve_tokenizer(model)
    gpt5 = GPT5_TOOLS_OVERHEAD if model.startswith("gpt-5") else 0
    return TokenCounter(replace(profile, tools_request_overhead=gpt5, tokens_per_function=0), model=model)


def tool_margin(case) -> int:
    """What the fitted tool terms add on top of the cookbook's rendering for ``case`` (0 without tools)."""
    return (TokenCounter.for_model(case["model"]).count_request(case).total
            - cookbook_counter(case["model"]).count_request(case).total)


@pytest.mark.parametrize("case", [c for c in COOKBOOK if c["name"] != "section6_old/gpt-3.5-turbo"], ids=lambda c: c["name"])
def test_openai_cookbook_counts(case):
    # (section6_old/gpt-3.5-turbo was printed while that alias still pointed at the 0301 snapshot.)
    assert cookbook_counter(case["model"]).count_request(case).total == case["expected_token_count"]


def test_recent_bills_add_a_bounded_tool_margin():
    """Real requests billed in 2025-26 carry 1-58 tokens more per tool request than the cookbook's rendering
    (tests/data/usage): the default counter adds 20 per request and 16 per function (plus schema text the
    rendering leaves out), never less than the published counts."""
    with_tools = [c for c in COOKBOOK + HMARR if c.get("tools") or c.get("functions")]
    assert with_tools
    for case in with_tools:
        functions = len(case.get("tools") or case.get("functions") or [])
        margin = tool_margin(case)
        assert OPENAI_TOOLS_OVERHEAD + OPENAI_TOKENS_PER_FUNCTION * functions <= margin, case["name"]
        assert margin <= OPENAI_TOOLS_OVERHEAD + OPENAI_TOKENS_PER_FUNCTION * functions + 120, case["name"]


@pytest.mark.parametrize("case", [c for c in HMARR if c["name"] not in ANY_OF], ids=lambda c: c["name"])
def test_real_api_counts_with_legacy_functions(case):
    assert cookbook_counter(case["model"]).count_request(case).total == case["expected_token_count"]


@pytest.mark.parametrize("case", [c for c in HMARR if c["name"] in ANY_OF], ids=lambda c: c["name"])
def test_any_of_schemas_over_count_by_at_most_three(case):
    # anyOf/const rendering is not published; we over-count by 1-3 tokens, never under.
    got = cookbook_counter(case["model"]).count_request(case).total
    assert case["expected_token_count"] <= got <= case["expected_token_count"] + 3


LITELLM = [c for c in load_json("peer_cases/litellm_token_counter.json") if c["name"].startswith("MESSAGES_")]


@pytest.mark.parametrize("case", LITELLM, ids=lambda c: c["name"])
def test_litellm_api_truth_cases(case):
    got = cookbook_counter(case["model"]).count_request(case).total
    expected = case["expected_token_count"]
    if "inner_object" in case["name"]:
        # Nested-object descriptions: the API's rendering is unpublished and these cases disagree with
        # hmarr's real counts; we follow hmarr exactly and stay within 7 tokens here.
        assert abs(got - expected) <= 7
    else:
        assert expected <= got <= case.get("count_tolerate", expected)


PYDANTIC = load_json("peer_cases/pydantic_ai_cassette_api_usage.json")
GPT4O_FAMILY = ("gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "gpt-4.5-preview")


def _text_only(case) -> bool:
    request = case["request"]
    return (
        case["api"] == "openai_chat"
        and case["model"] in GPT4O_FAMILY
        and not request.get("tools")
        and all(isinstance(m.get("content"), str) and not m.get("tool_calls") for m in request["messages"])
    )


@pytest.mark.parametrize("case", [c for c in PYDANTIC if _text_only(c)], ids=lambda c: c["name"])
def test_recorded_gpt4o_family_text_requests_are_exact(case):
    assert TokenCounter.for_model(case["model"]).count_request(case["request"]).total == case["expected_token_count"]


def test_recorded_openai_tool_requests_stay_close():
    """Tool calls and tools on gpt-4o family: within 10 tokens of the billed count on every recording."""
    errors = []
    for case in PYDANTIC:
        request = case["request"]
        if case["api"] != "openai_chat" or case["model"] not in GPT4O_FAMILY or _text_only(case):
            continue
        if any(isinstance(m.get("content"), list) for m in request["messages"]):
            continue  # images: deliberately conservative, checked elsewhere
        errors.append(TokenCounter.for_model(case["model"]).count_request(request).total - case["expected_token_count"])
    assert errors and min(errors) >= -10


@pytest.mark.parametrize(
    "name, encoding, exact",
    [
        ("gpt-4o", "o200k_base", True),
        ("openai/gpt-4o", "o200k_base", True),
        ("openrouter/openai/gpt-4.1-mini", "o200k_base", True),
        ("gpt-4", "cl100k_base", True),
        ("azure/gpt-35-turbo", "cl100k_base", True),
        ("anthropic/claude-sonnet-4-5", "o200k_base", False),
        ("bedrock/us.anthropic.claude-3-5-haiku-20241022-v1:0", "o200k_base", False),
        ("gemini/gemini-2.5-pro", "o200k_base", False),
        ("ollama/llama3:8b", "llama3", False),  # Llama 3's own tokenizer, from llama-models
        ("groq/llama-3.3-70b-versatile", "llama3", False),
        ("mistral/mistral-large-latest", "mistral", False),  # Mistral's own tokenizers, from mistral-common
        ("ollama/llama2", "o200k_base", False),  # no offline tokenizer: o200k with the run-aware bound
        ("totally-unknown-model", "o200k_base", False),
        ("", "o200k_base", False),
    ],
)
def test_model_names_as_operators_write_them(name, encoding, exact):
    profile = resolve_tokenizer(name)
    assert (profile.encoding_name, profile.exact) == (encoding, exact)


def test_provider_prefix_and_azure_base_model_do_not_change_the_count():
    body = {"messages": [{"role": "user", "content": "How many tokens is this sentence?"}]}
    plain = TokenCounter.for_model("gpt-4o").count_request(body).total
    assert TokenCounter.for_model("openai/gpt-4o").count_request(body).total == plain
    assert TokenCounter.for_model("azure/my-deployment", base_model="gpt-4o").count_request(body).total == plain


def test_families_are_recognised():
    assert resolve_tokenizer("anthropic/claude-sonnet-4-5").family == "anthropic"
    assert resolve_tokenizer("vertex_ai/gemini-2.0-flash").family == "gemini"
    assert resolve_tokenizer("ollama/llama3").family == "llama"
    assert resolve_tokenizer("mistral/mistral-large-latest").family == "mistral"


def test_estimated_families_count_more_than_the_raw_encoding(gpt4o):
    body = {"messages": [{"role": "user", "content": "def f(x):\n    return x ** 2  # squares " * 50}]}
    raw = gpt4o.count_request(body).total
    for model in ("claude-sonnet-4-5", "gemini/gemini-2.5-pro", "some-unknown-model"):
        assert TokenCounter.for_model(model).count_request(body).total > raw


def test_special_token_text_is_plain_text(gpt4o):
    body = {"messages": [{"role": "user", "content": "<|endoftext|> and <|im_start|>system"}]}
    assert gpt4o.count_request(body).total > 8


def test_lone_surrogates_do_not_crash(gpt4o):
    assert gpt4o.count_request({"messages": [{"role": "user", "content": "bad \ud800 text"}]}).total > 0


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({"messages": ["hello"]}, "messages[0]"),
        ({"messages": [{"content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [42]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "assistant", "content": None, "tool_calls": "x"}]}, "messages[0].tool_calls"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x", "detail": "ultra"}}]}]},
         "messages[0].content[0].image_url.detail"),
    ],
)
def test_malformed_requests_name_the_field(gpt4o, body, field):
    with pytest.raises(MalformedRequestError) as info:
        gpt4o.count_request(body)
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_odd_parts_are_counted_not_ignored(gpt4o):
    odd = {"messages": [{"role": "user", "content": [{"type": "text", "image_url": {"url": "https://x/y.png"}}]}]}
    unknown = {"messages": [{"role": "user", "content": [{"type": "hologram", "payload": "x" * 400}]}]}
    assert gpt4o.count_request(odd).total > 10
    assert gpt4o.count_request(unknown).total > 50


# --- images ---------------------------------------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + header
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00"


def _jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def _webp(width: int, height: int) -> bytes:
    vp8x = b"VP8X" + struct.pack("<I", 10) + b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(vp8x)) + b"WEBP" + vp8x


@pytest.mark.parametrize("maker, mime", [(_png, "png"), (_gif, "gif"), (_jpeg, "jpeg"), (_webp, "webp")])
def test_image_dimensions_from_base64_headers(maker, mime):
    url = f"data:image/{mime};base64," + base64.b64encode(maker(1024, 768)).decode()
    assert image_dimensions(url) == (1024, 768)


def test_openai_tile_formula():
    assert openai_tile_tokens(1024, 1024) == 765  # OpenAI's worked example
    assert openai_tile_tokens(2048, 4096) == 1105
    assert openai_tile_tokens(1, 1) == 255


def test_anthropic_formula_respects_resize():
    assert anthropic_image_tokens(1000, 1000) == 1477  # 1000*1000/750, +10% and 10 (measured on bills)
    assert anthropic_image_tokens(8000, 8000) <= 1697


def test_image_parts(gpt4o):
    png = "data:image/png;base64," + base64.b64encode(_png(1024, 1024)).decode()

    def body(url, detail=None):
        image = {"url": url} if detail is None else {"url": url, "detail": detail}
        return {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": image}]}]}

    base = gpt4o.count_request({"messages": [{"role": "user", "content": []}]}).total
    assert gpt4o.count_request(body(png)).total - base == 765
    assert gpt4o.count_request(body(png, "low")).total - base == 85
    # Unknown size (a URL we may not fetch): the formula's worst case, never less.
    assert gpt4o.count_request(body("https://example.com/cat.png")).total - base == 85 + 170 * 8
    claude = TokenCounter.for_model("claude-sonnet-4-5")
    claude_base = claude.count_request({"messages": [{"role": "user", "content": []}]}).total
    assert claude.count_request(body(png)).total - claude_base == anthropic_image_tokens(1024, 1024)


def test_audio_and_files_are_never_free():
    assert audio_tokens(None) >= 100
    assert audio_tokens(base64.b64encode(b"\x00" * 400_000).decode()) >= 1000
    assert file_tokens({"file_id": "file-abc"}) >= 3000
    pdf = b"%PDF-1.4\n1 0 obj <</Type /Page>> endobj\n2 0 obj <</Type /Page>> endobj\n3 0 obj <</Type /Pages>> endobj"
    data = "data:application/pdf;base64," + base64.b64encode(pdf).decode()
    assert file_tokens({"file_data": data}) == 6000


def test_what_litellm_forwards_on_chat_is_counted_top_level_system_and_thinking_blocks():
    claude = TokenCounter.for_model("anthropic/claude-sonnet-4-5")
    base = {"messages": [{"role": "user", "content": "hi"}]}
    system = "You are a meticulous reviewer. " * 400
    assert claude.count_request({**base, "system": system}).total >= claude.count_request(base).total + claude.count_text(system)
    assert claude.count_request({**base, "system": [{"type": "text", "text": system}]}).total > claude.count_text(system)
    thinking = [{"type": "thinking", "thinking": "Let me reason about this carefully. " * 300, "signature": "sig" * 50}]
    plain = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    with_thinking = {"messages": [{"role": "user", "content": "q"},
                                  {"role": "assistant", "content": "a", "thinking_blocks": thinking}]}
    assert claude.count_request(with_thinking).total >= claude.count_request(plain).total + 300 * 6


@pytest.mark.parametrize("model", ["gpt-4o", "gemini/gemini-2.5-flash", "anthropic/claude-sonnet-4-5"])
def test_an_assistant_turns_reasoning_content_is_counted(model):
    """LiteLLM forwards an assistant message's ``reasoning_content`` as is (``openai/``, ``hosted_vllm/``, whose
    templates render it) or as a Gemini thought part: 26 tokens were counted where 6,030 reached a 4k window (a fifth
    attack review). Thinking blocks that carry the same text to Claude are counted once; Gemini gets both on
    LiteLLM 1.103, so both count there."""
    counter = TokenCounter(resolve_tokenizer(model), model=model)
    reasoning = "step " * 2000
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "r"}]
    plain = counter.count_request({"messages": turns}).total
    reasoned = [turns[0], {**turns[1], "reasoning_content": reasoning}, turns[2]]
    assert counter.count_request({"messages": reasoned}).total >= plain + counter.count_text(reasoning)
    blocks = [{"type": "thinking", "thinking": reasoning, "signature": "sig"}]
    both = [turns[0], {**turns[1], "reasoning_content": reasoning, "thinking_blocks": blocks}, turns[2]]
    only_blocks = [turns[0], {**turns[1], "thinking_blocks": blocks}, turns[2]]
    extra = counter.count_request({"messages": both}).total - counter.count_request({"messages": only_blocks}).total
    assert extra >= counter.count_text(reasoning) if model.startswith("gemini") else extra == 0


def test_an_empty_text_on_the_way_to_claude_counts_as_the_placeholder_litellm_writes():
    """LiteLLM's ``anthropic_messages_pt`` writes ``[System: Empty message content sanitised to satisfy protocol]``
    over every empty or blank text of a user or assistant message, with or without ``modify_params`` (a review:
    1,500 empty texts counted 1,970 tokens and reached Claude as 22,513). Other families get the text as it is."""
    from litellm.litellm_core_utils.prompt_templates.factory import _EMPTY_TEXT_PLACEHOLDER

    from budget_hook.providers.anthropic import EMPTY_TEXT

    assert EMPTY_TEXT == _EMPTY_TEXT_PLACEHOLDER  # the installed LiteLLM's own
    claude, gpt = TokenCounter.for_model("claude-sonnet-4-5"), TokenCounter.for_model("gpt-4o")
    placeholder = claude.count_request({"messages": [{"role": "user", "content": EMPTY_TEXT}]}).total
    for content in ("", "  \n", [{"type": "text", "text": ""}], [{"type": "text", "text": " "}]):
        assert claude.count_request({"messages": [{"role": "user", "content": content}]}).total >= placeholder
    many = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, *[{"type": "text", "text": ""}] * 100]}]}
    assert claude.count_request(many).total > 100 * claude.count_text(EMPTY_TEXT)
    assert gpt.count_request(many).total < 300
    # a tool result, a system prompt or an assistant turn that only calls a tool is not rewritten
    calls = {"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ""}, {"role": "system", "content": ""}]}
    assert claude.count_request(calls).total < placeholder + 60
