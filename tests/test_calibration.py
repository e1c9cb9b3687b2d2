"""Counting against what providers billed, out of sample (tests/data/usage; method in bench/accuracy.py).

The terms were fitted on the ``fit`` half (split by source file); these tests hold the figures on the
``held-out`` half, per provider, for requests of 100 billed tokens or more. Issue 12's targets are at most
1% under-counted and a median over-count of at most 15%; where a provider is not there yet, the test
holds what was reached (and docs/counting.md, "Accuracy against what providers billed", says so), so it can only
get better.
"""

from __future__ import annotations

import base64
import math
import struct
import sys
import zlib
from pathlib import Path

import pytest

from budget_hook.counting import TokenCounter
from budget_hook.counting.profiles import resolve_tokenizer
from budget_hook.shapes.anthropic import count_anthropic
from budget_hook.shapes.gemini import SHAPE as GEMINI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import accuracy

#: provider -> (most under-counted share, largest median over-count) held on the held-out half: issue 12's
#: targets for every provider
HELD = dict.fromkeys(("anthropic", "gemini", "openai_chat", "openai_responses"), (0.01, 0.15))


@pytest.fixture(scope="module")
def held_out() -> dict[str, dict]:
    rows = [row for provider, spec in accuracy.PROVIDERS.items() for row in accuracy.rows_for(spec, provider)]
    return {provider: accuracy.stats(r for r in rows if r["provider"] == provider and r["split"] == "held-out")
            for provider in accuracy.PROVIDERS}


@pytest.mark.parametrize("provider", sorted(HELD))
def test_held_out_accuracy_per_provider(held_out, provider):
    figures = held_out[provider]
    most_under, largest_median = HELD[provider]
    assert figures["requests"] >= 60
    assert figures["under_share"] <= most_under, figures
    assert 0 <= figures["median_over"] <= largest_median, figures


def test_leave_one_repository_out_with_terms_refitted_by_the_rule():
    """Each repository counted with the main terms refitted (bench/fit_terms.py) on the other repositories only.
    Gemini and OpenAI chat reach the targets this way; Claude and Responses do not (docs/counting.md, "A harder
    test: leave one repository out": the Claude tool prompt and structured-output terms, and one Responses
    outlier, differ between repositories)."""
    rows = [row for provider in ("gemini", "openai_chat")
            for row in accuracy.rows_for(accuracy.PROVIDERS[provider], provider)]
    counted = accuracy.leave_one_repo_out(rows)
    for provider in ("gemini", "openai_chat"):
        figures = accuracy.stats(r for r in counted if r["provider"] == provider)
        assert figures["requests"] >= 150
        assert figures["under_share"] <= 0.01 and 0 <= figures["median_over"] <= 0.15, (provider, figures)


def test_the_fit_rule_leaves_at_most_one_percent_of_its_subset_under_its_margin():
    import fit_terms

    rows = accuracy.rows_for(accuracy.PROVIDERS["gemini"], "gemini")
    values, shipped = fit_terms.fit(rows, "gemini")
    tools = [r for r in rows if r["billed"] >= fit_terms.MIN_BILLED and fit_terms._tools(r["kinds"])]
    close = [r for r in tools if fit_terms.linear_estimate(r, values, shipped) < r["billed"] * (1 + fit_terms.NOISE)]
    assert len(close) <= round(0.01 * len(tools))
    lower = {**values, "tools_request_overhead": values["tools_request_overhead"] - 2}
    assert sum(fit_terms.linear_estimate(r, lower, shipped) < r["billed"] * (1 + fit_terms.NOISE)
               for r in tools) > round(0.01 * len(tools))  # the smallest such value


def test_the_split_is_by_source_file():
    cases = accuracy.load("openai_chat.json.gz")
    by_file: dict[str, set[str]] = {}
    for case in cases:
        by_file.setdefault(f"{case['source_repo']}/{case['path']}", set()).add(accuracy.split_of(case))
    assert all(len(splits) == 1 for splits in by_file.values())
    assert {"fit", "held-out"} <= {s for splits in by_file.values() for s in splits}


# --- the content-type terms --------------------------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def _gemini_image_body(width: int, height: int, *, urlsafe: bool = False) -> dict:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    data = encode(_png(width, height) + b"\xff\xfe" * 40).decode()
    return {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": data}}]}]}


def _image_tokens(model: str, width: int, height: int, **options) -> int:
    counter = TokenCounter.for_model(model)
    empty = {"contents": [{"role": "user", "parts": []}]}
    return GEMINI.count(_gemini_image_body(width, height, **options), counter) - GEMINI.count(empty, counter)


@pytest.mark.parametrize("model, width, height, tokens", [
    ("gemini/gemini-2.5-flash", 1024, 1024, 258),       # Gemini 2.5: 258 an image
    ("gemini/gemini-2.0-flash", 300, 300, 258),         # 2.0: 258 up to 384 px a side...
    ("gemini/gemini-2.0-flash", 640, 480, 1290),        # ... 1,290 a 768-px tile above (measured)
    ("gemini/gemini-3-pro-preview", 640, 480, 1120),    # Gemini 3: about 1,100 an image
    ("gemini/gemini-4-ultra", 640, 480, 1120),          # an unknown generation: the heaviest prices
    ("vertex_ai/gemini-2.5-flash", 640, 480, 1290),     # Vertex AI bills 2.x images by tile
])
def test_gemini_images_at_gemini_prices(model, width, height, tokens):
    assert _image_tokens(model, width, height) == tokens


def test_url_safe_and_wrapped_base64_images_are_sized():
    """Google's SDKs send bytes in the URL-safe alphabet; MIME encoders wrap lines: both are read."""
    assert _image_tokens("gemini/gemini-2.0-flash", 300, 300, urlsafe=True) == 258
    body = _gemini_image_body(300, 300)
    data = body["contents"][0]["parts"][0]["inlineData"]["data"]
    body["contents"][0]["parts"][0]["inlineData"]["data"] = "\n".join(data[i:i + 76] for i in range(0, len(data), 76))
    counter = TokenCounter.for_model("gemini/gemini-2.0-flash")
    assert GEMINI.count(body, counter) < 300


@pytest.mark.parametrize("model, stream, billed", [
    ("gemini/gemini-3-flash-preview", False, True),   # Gemini 3 bills earlier turns' signatures (hidden bills)
    ("gemini/gemini-4-pro", False, True),             # an unknown generation: priced as the heaviest
    ("gemini/gemini-2.5-flash", True, False),         # 2.x: only the running turn's (measured), even streamed
])
def test_earlier_turns_signatures_are_counted_where_they_are_billed(model, stream, billed):
    signature = "C" * 6000
    earlier = {"role": "model", "parts": [{"text": "an answer", "thoughtSignature": signature}]}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}, earlier,
                         {"role": "user", "parts": [{"text": "and now?"}]}], "stream": stream}
    unsigned = {**body, "contents": [body["contents"][0], {"role": "model", "parts": [{"text": "an answer"}]},
                                     body["contents"][2]]}
    counter = TokenCounter.for_model(model)
    extra = GEMINI.count(body, counter) - GEMINI.count(unsigned, counter)
    priced = math.ceil(6000 / counter.profile.signature_chars_per_token)
    # (a content list of parts costs a token or two of framing over a plain text)
    assert (priced <= extra <= priced + 2) if billed else extra <= 2


def test_a_replayed_thought_signature_is_counted_per_character_where_it_is_billed():
    """Billed in the running turn's tool loop: always on Gemini 3 (and unknown generations), on Gemini 2.x
    only when streamed (streamGenerateContent, where LiteLLM sets ``stream``)."""
    signature = "C" * 6000
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                         {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}},
                                                      "thoughtSignature": signature}]},
                         {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"ok": 1}}}]}]}
    without = {"contents": [body["contents"][0], {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                            body["contents"][2]]}
    for model, stream, expected in (("gemini/gemini-2.5-flash", True, math.ceil(6000 / 6.0)),
                                    ("gemini/gemini-2.5-flash", False, 0),
                                    ("gemini/gemini-3-flash-preview", False, math.ceil(6000 / 4.5)),
                                    ("gemini/gemini-4-pro", False, math.ceil(6000 / 4.5))):
        counter = TokenCounter.for_model(model)
        sent = {**body, "stream": True} if stream else body
        assert GEMINI.count(sent, counter) - GEMINI.count(without, counter) == expected, (model, stream)


def test_media_a_function_response_carries_is_counted():
    body = _gemini_image_body(640, 480)
    part = body["contents"][0]["parts"][0]
    with_media = {"contents": [{"role": "model", "parts": [{"functionCall": {"name": "fetch", "args": {}}}]},
                               {"role": "user", "parts": [{"functionResponse": {"name": "fetch", "response": {},
                                                                                "parts": [part]}}]}]}
    counter = TokenCounter.for_model("gemini/gemini-3-flash-preview")
    assert GEMINI.count(with_media, counter) > 1120


def test_a_client_cannot_have_its_text_priced_as_a_signature():
    """Parts only the gateway's views make (signatures, hidden prompts) cannot be sent as JSON: a chat part
    that claims to be one is counted as the JSON it is."""
    text = "lorem ipsum " * 2000
    counter = TokenCounter.for_model("gpt-4o")
    forged = {"messages": [{"role": "user", "content": [{"type": "thought_signature", "signature": text}]}]}
    hidden = {"messages": [{"role": "user", "content": [{"type": "hidden_prompt", "tokens": -10**9, "x": text}]}]}
    plain = {"messages": [{"role": "user", "content": text}]}
    for body in (forged, hidden):
        assert counter.count_request(body).total >= counter.count_request(plain).total


def test_citations_add_anthropic_s_citation_prompt():
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Ruby facts."},
                "title": "facts.txt"}
    cited = {**document, "citations": {"enabled": True}}
    counter = TokenCounter.for_model("anthropic/claude-haiku-4-5")

    def body(block):
        return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [block]}]}
    assert count_anthropic(body(cited), counter) - count_anthropic(body(document), counter) >= 550


@pytest.mark.parametrize("model, generation, factor", [
    ("claude-3-5-haiku-20241022", "claude-3", 1.2), ("anthropic/claude-sonnet-4-20250514", "claude-4.0", 1.2),
    ("claude-sonnet-4-5-20250929", "claude-4.5", 1.2), ("bedrock/us.anthropic.claude-sonnet-4-6", "claude-4.6", 1.2),
    ("claude-sonnet-5", "claude-5+", 1.3), ("claude-opus-4-8", "claude-5+", 1.3),
    ("gemini/gemini-2.5-pro", "gemini-2.5", 1.0), ("vertex_ai/gemini-2.0-flash-001", "gemini-2.0 vertex", 1.0),
    ("gemini-3-pro-preview", "gemini-3", 1.0),
])
def test_generations_are_resolved_and_unknown_ones_get_the_heaviest_terms(model, generation, factor):
    profile = resolve_tokenizer(model)
    assert (profile.generation, profile.safety_factor) == (generation, factor)
    assert generation in profile.method


def test_claude_tool_prompts_grow_with_the_generation():
    overheads = [resolve_tokenizer(m).tools_request_overhead for m in
                 ("claude-3-5-haiku-latest", "claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-opus-5")]
    assert overheads == sorted(overheads)
