"""Work a client can force onto the gateway: every regex over client data is linear (and audited), every
decompression is bounded, and what scales with the request is weighed so it is decided in the thread pool.

Behaviour only, never wall time: bounds are checked on what the code consumed or produced (bytes inflated,
characters fed to a pattern, items walked, the thread that ran the work). ``bench/hostile_cpu.py`` measures
the times.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import importlib
import json
import pkgutil
import re
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import budget_hook
from budget_hook.counting import TokenCounter, images, media, profiles, resolve_tokenizer
from budget_hook.counting.profiles import MAX_MODEL_NAME_CHARS, model_key
from budget_hook.proxy import offload, windows
from budget_hook.proxy.offload import ITEM_WEIGHT, Offloader, approximate_size, other_size

PACKAGE = Path(budget_hook.__file__).parent


def pdf_url(raw: bytes) -> str:
    return "data:application/pdf;base64," + base64.b64encode(raw).decode()


def object_stream_pdf(payload: bytes) -> bytes:
    return (b"%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n"
            + zlib.compress(payload, 9) + b"\nendstream\nendobj\n%%EOF")


@pytest.fixture(autouse=True)
def _fresh_scans():
    media._SCANS.clear()
    yield
    media._SCANS.clear()


# --- decompression: bounded by ratio and size ----------------------------------------------------------


class _InflateMeter:
    """Wraps ``zlib.decompressobj`` as ``media`` uses it: counts every byte any inflater produced."""

    def __init__(self) -> None:
        self.produced = 0
        self.original = zlib.decompressobj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        meter, inner = self, self.original(*args, **kwargs)

        class Metered:
            def decompress(self, data: Any, max_length: int = 0) -> bytes:
                out = inner.decompress(data, max_length)
                meter.produced += len(out)
                return out

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)
        return Metered()


@pytest.fixture
def inflate_meter(monkeypatch):
    meter = _InflateMeter()
    monkeypatch.setattr(media.zlib, "decompressobj", meter)
    return meter


BOMBS = {
    "4 MiB of /Count 1 (the reported 10 KB PDF)": b"/Count 1 " * ((4 << 20) // 9),
    "64 MiB of /Type/Page": b"/Type/Page " * ((64 << 20) // 11),
    "page-tree nodes": b"<</Type/Pages/Count 7>>" * 200_000,
}


@pytest.mark.parametrize("name", BOMBS)
def test_a_pdf_bomb_inflates_no_more_than_its_bound_and_is_counted_conservatively(name, inflate_meter):
    raw = object_stream_pdf(BOMBS[name])
    scan = media.pdf_pages(pdf_url(raw))
    bound = media.inflate_budget(len(raw))
    assert bound == min(media.MAX_INFLATED_BYTES, max(media.MIN_INFLATED_BYTES, media.INFLATE_RATIO * len(raw)))
    assert inflate_meter.produced <= bound and scan.inflated <= bound
    assert not scan.complete  # the bound stopped it: never taken for the whole PDF
    part = {"type": "file", "file": {"file_data": pdf_url(raw)}}
    assert media.unreadable(part).startswith("a PDF whose pages cannot be counted")
    tokens = media.file_tokens(part["file"])
    assert tokens >= media.FILE_REFERENCE_TOKENS and tokens >= scan.pages * media.FILE_TOKENS_PER_PDF_PAGE


def test_many_bomb_streams_share_one_bound_and_only_one_stream_is_held_at_a_time(inflate_meter, monkeypatch):
    stream = zlib.compress(b"/Type/Page " * 100_000, 9)
    raw = b"%PDF-1.5\n" + (b"1 0 obj\n<< /Filter /FlateDecode >>\nstream\n" + stream + b"\nendstream\n") * 2000
    held = []
    read = media._PageCounter.read
    monkeypatch.setattr(media._PageCounter, "read", lambda self, chunk: (held.append(len(chunk)), read(self, chunk))[1])
    scan = media.pdf_pages(pdf_url(raw))
    assert inflate_meter.produced <= media.MAX_INFLATED_BYTES and not scan.complete
    # the PDF's own bytes, then one stream at a time: never more than one stream's inflated text held
    assert held[0] == len(raw) and max(held[1:]) <= 100_000 * 11 and sum(held[1:]) <= media.MAX_INFLATED_BYTES


def test_stream_keywords_and_tree_nodes_are_bounded_too(monkeypatch):
    spam = b"%PDF-1.5\n" + b"stream\nx\x9c" * 50_000
    attempts = []
    inflate = media._inflate
    monkeypatch.setattr(media, "_inflate", lambda *a: (attempts.append(1), inflate(*a))[1])
    assert not media.pdf_pages(pdf_url(spam)).complete
    assert len(attempts) <= 64 + len(spam) // media.BYTES_PER_STREAM
    nodes = b"%PDF-1.4\n" + b"<</Type/Pages/Count 3>>" * (media.MAX_PAGE_TREE_NODES + 1)
    assert not media.pdf_pages(pdf_url(nodes)).complete


def test_pages_are_still_found_in_every_way_they_were():
    pages = b"".join(b"<< /Type /Page /Parent 2 0 R >>\n" for _ in range(40))
    escaped = pages.replace(b"/Page ", b"/P#61g#65 ").replace(b"/Type", b"/T#79pe")
    spaced = pages.replace(b"/Type /Page", b"/Type\r\n\t\x00  \n/Page")
    for raw in (b"%PDF-1.4\n" + pages, object_stream_pdf(escaped), object_stream_pdf(spaced)):
        scan = media.pdf_pages(pdf_url(raw))
        assert (scan.pages, scan.complete) == (40, True)
    tree = b"%PDF-1.7\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 150 >> endobj\n"
    reversed_tree = b"%PDF-1.7\n2 0 obj << /Count 150 /Kids [3 0 R] /Type /Pages >> endobj\n"
    outline = b"%PDF-1.7\n<< /Type /Pages /Count 2 >> << /Type /Outlines /Count 900 >> << /Type /PageLabel >>"
    assert [media.pdf_page_count(pdf_url(raw)) for raw in (tree, reversed_tree, outline)] == [150, 150, 2]


def test_a_fake_stream_keyword_cannot_hide_the_real_stream():
    """``stream`` inside a string before the real one used to swallow it (the data ran to the next ``endstream``)."""
    real = zlib.compress(b"<< /Type /Page >>\n" * 30)
    raw = (b"%PDF-1.5\n1 0 obj\n<< /Title (a stream\n) /Type /ObjStm /N 30 /First 0 /Filter /FlateDecode >>\nstream\n"
           + real + b"\nendstream\nendobj\n%%EOF")
    assert media.pdf_page_count(pdf_url(raw)) == 30


_PDF_TOKENS = st.sampled_from([b"<< /Type /Page >>", b"/Type", b"/Page", b"/Pages", b"/Count 12", b">>", b"<<", b"#61",
                               b"stream\n", b"endstream", b"x\x9c", b" ", b"\n", b"/ObjStm", b"/First 3", b"%%EOF"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_PDF_TOKENS, st.binary(max_size=24)), max_size=60),
       st.lists(st.lists(_PDF_TOKENS, max_size=40), max_size=4), st.integers(0, 40))
def test_pdf_page_count_never_raises_never_exceeds_its_bounds_never_misses_a_plain_page(junk, streams, plain):
    raw = b"%PDF-1.5\n" + b"".join(junk) + b" " + b"<< /Type /Page /Parent 2 0 R >>\n" * plain
    for stream in streams:
        raw += b"obj << /Type /ObjStm >>\nstream\n" + zlib.compress(b"".join(stream) * 50) + b"\nendstream\n"
    scan = media.pdf_pages(pdf_url(raw))
    assert scan is not None and scan.inflated <= media.inflate_budget(len(raw)) and scan.pages >= plain
    assert media.pdf_page_count(pdf_url(raw)) in (None, scan.pages)
    tokens = media.file_tokens({"file_data": pdf_url(raw)})
    assert tokens >= media.FILE_MIN_TOKENS and tokens >= scan.pages * media.FILE_TOKENS_PER_PDF_PAGE
    if not scan.complete:
        assert tokens >= media.FILE_REFERENCE_TOKENS


def test_a_jpeg_without_a_size_marker_is_not_searched_byte_by_byte():
    for fill in (b"\x00", b"\xff", b"\xff\xd0", b"\xff\xe0\x00\x02"):
        data = b"\xff\xd8" + fill * ((1 << 20) // len(fill))
        assert images._jpeg_size(data) is None  # unknown: priced at the worst case
    sof = b"\xff\xd8" + b"\xff\xe0\x00\x10" + b"\x00" * 14 + b"\x00" * 5000 + b"\xff\xc0\x00\x11\x08\x01\xe0\x02\x80"
    assert images._jpeg_size(sof + b"\x00" * 16) == (640, 480)


# --- tokenizers: no text makes one fail -----------------------------------------------------------------


class PanicException(BaseException):
    """What pyo3 raises when tiktoken's Rust code panics (a ``BaseException``: ``except Exception`` misses it)."""


def test_a_tokenizer_that_fails_on_a_text_is_given_it_in_pieces():
    from budget_hook.counting.encodings import PIECE_CHARS, safe_encode

    seen: list[int] = []

    def fragile(text: str) -> list[int]:
        seen.append(len(text))
        if len(text) > 100_000:
            raise PanicException("StackOverflow")
        if " " * 5000 in text:
            raise ValueError("Max stack size exceeded for backtracking")
        return [1] * (len(text) // 4 + 1)

    assert len(safe_encode(fragile, "x" * 1000)) == 251  # what it can read, it reads whole
    tokens = safe_encode(fragile, " " * 300_000)
    assert seen[1] == 300_000 and max(seen[2:]) <= PIECE_CHARS and len(tokens) >= 300_000 // 4
    with pytest.raises(KeyboardInterrupt):
        safe_encode(lambda text: (_ for _ in ()).throw(KeyboardInterrupt()), "x")


@pytest.mark.parametrize("model", ["gemini/gemini-2.5-pro", "mistral/mistral-large-latest", "gpt-4o"])
@pytest.mark.parametrize("text", ["x" * 400_000, "lorem ipsum 12345 " * 20_000])
def test_truncating_an_embedding_input_counts_it_a_bounded_number_of_times(model, text, monkeypatch):
    # One letter repeated, which an estimate prices far above the tokens kept, was shrunk 5% a time, from a
    # number of the encoding's tokens it may not even hold: 35 counts and 8 million characters counted for a
    # 400,000-character input (6.6 s for a 1.1 MB one at a 627k limit; now 1.1 s, most of it the first count).
    from budget_hook.shapes import inputs

    counted: list[int] = []
    count = inputs._count
    monkeypatch.setattr(inputs, "_count", lambda item, counter: counted.append(len(item)) or count(item, counter))
    counter = TokenCounter.for_model(model)
    for limit in (8192, 60_000):
        counted.clear()
        result = inputs.check_inputs(text, field="input", counter=counter, limit=limit, truncate=True)
        assert len(counted) <= 3 and sum(counted) <= 2 * len(text), (len(counted), sum(counted))
        if result.over:  # (o200k packs the repeated letter: 50,000 tokens, under the larger limit)
            assert result.truncated == (0,) and limit * 0.95 <= result.tokens[0] <= limit


def repeated_types(depth: int, kinds: list) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):  # parsed from JSON: no object is shared, each level holds its own
        schema = json.loads(json.dumps({"type": list(kinds), "properties": {"a": schema}}))
    return schema


@pytest.mark.parametrize("kinds", [["object", "object"], ["object", "null", "object", "object"],
                                   [["object"], {"x": 1}, "object", "object"]])
def test_a_type_listed_twice_renders_its_schema_once(kinds):
    """``{"type": ["object", "object"], "properties": {...}}`` nested 20 deep rendered the properties 2^20 times: an
    attack review held the event loop 12 s (1 GB) with a 1,258-byte body. The rendering now grows with the schema."""
    from budget_hook.counting import tools

    schema = repeated_types(30, kinds)
    text = tools.render_functions([{"name": "f", "parameters": {"type": "object", "properties": {"p": schema}}}])
    assert len(text) <= 100 * 30 ** 2  # each level's items and properties once (indented by its depth)
    assert tools._render_type({"type": ["object", "null"], "properties": {"a": {"type": "string"}}}, 0) == \
        "{\n  a?: string,\n} | null"  # distinct types rendered as before


class CountingDict(dict):
    """A dict that counts the entries a walk reads from it."""

    read = 0

    def values(self):
        CountingDict.read += len(self)
        return super().values()

    def items(self):
        CountingDict.read += len(self)
        return super().items()


def test_inlining_references_reads_a_bounded_number_of_entries():
    """The walk that adds what ``$ref`` inlining adds counted objects, not the entries it read: 3,000 objects of 320
    entries each, 55-118 ms of the event loop from a 5.6 KB body. Objects and entries now share one bound."""
    from budget_hook.counting import tools

    wide = CountingDict({f"k{i}": CountingDict({"type": "string"}) for i in range(320)}, **{"$ref": "#/$defs/D0"})
    middle = CountingDict(properties=CountingDict({f"p{i}": CountingDict({"$ref": "#/$defs/Leaf"}) for i in range(30)}))
    top = CountingDict(properties=CountingDict({f"q{i}": CountingDict({"$ref": "#/$defs/Mid"}) for i in range(30)}))
    schema = CountingDict(type="object", properties=CountingDict(x=CountingDict({"$ref": "#/$defs/D0"})),
                          **{"$defs": CountingDict(D0=top, Mid=middle, Leaf=wide)})
    CountingDict.read = 0
    assert tools.inlined_tokens(schema, len) == tools.INLINED_CAP
    assert CountingDict.read <= 2 * tools.MAX_STEPS


def _ref_chain(levels: int, fan: int = 2) -> dict:
    """A schema whose definitions each refer ``fan`` times to the next: its inlined copies double per level."""
    defs = {f"d{i}": CountingDict({f"p{j}": CountingDict({"$ref": f"#/$defs/d{i + 1}"}) for j in range(fan)})
            for i in range(levels)}
    defs[f"d{levels}"] = CountingDict(type="string")
    return CountingDict(type="object", properties=CountingDict(x=CountingDict({"$ref": "#/$defs/d0"})),
                        **{"$defs": CountingDict(defs)})


def test_a_request_s_tools_share_one_bound_on_inlining_references():
    """An attack review (2026-12-07): six tools of 5 KB, each just under the walk's bound alone, held the event loop
    78 ms (such bodies now go to the pool: ``offload.REF_WEIGHT``), and the bound was per schema, so a thousand would
    hold a pool thread for seconds. A request's tools also share ``REQUEST_STEPS``, which a review of that fix
    checked against large real tool sets: 128 tools of a model with 15 references each are counted."""
    from budget_hook.counting import tools

    CountingDict.read = 0
    assert tools.inlined_tokens(_ref_chain(12), len) < tools.INLINED_CAP  # one alone is under the bound
    alone = CountingDict.read
    assert alone > tools.MAX_STEPS // 4
    many = tools.REQUEST_STEPS // alone + 2
    CountingDict.read = 0
    assert tools.inlined_tokens([_ref_chain(12) for _ in range(many)], len) == tools.INLINED_CAP
    assert CountingDict.read <= 2 * (tools.REQUEST_STEPS + tools.MAX_STEPS)
    assert tools.inlined_tokens([_ref_chain(12) for _ in range(6)], len) < tools.INLINED_CAP
    model = {"type": "object", "properties": {f"field_{i}": {"$ref": "#/$defs/Part"} for i in range(15)},
             "$defs": {"Part": {"type": "object", "properties": {f"p{j}": {"type": "string", "description": "x" * 40}
                                                                 for j in range(6)}}}}
    counter = TokenCounter.for_model("gpt-4o")
    assert counter._count_functions_uncached([{"name": f"f{i}", "parameters": model} for i in range(128)]) \
        < tools.INLINED_CAP


def test_references_that_nest_send_a_small_body_to_the_pool_and_a_typical_schema_stays_inline():
    """LiteLLM inlines every ``$ref``, so a schema's references weigh ``REF_WEIGHT`` each: 23 of them in 810 bytes
    (copies doubling per level) took 6.7 ms on the event loop; a pydantic tool with a few nested models stays."""
    offloader = Offloader(threads=1, offload_chars=50_000)
    nested = {"model": "g", "messages": [{"role": "user", "content": "hi"}],
              "tools": [{"type": "function", "function": {"name": "f", "parameters": json.loads(json.dumps(
                  _ref_chain(11)))}}]}
    assert len(json.dumps(nested)) < 1_000 and not offloader.inline(nested)
    pydantic = {"type": "object", "properties": {"address": {"$ref": "#/$defs/Address"},
                                                 "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
                "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}},
                          "Item": {"type": "object", "properties": {"sku": {"type": "string"},
                                                                    "price": {"$ref": "#/$defs/Money"}}},
                          "Money": {"type": "object", "properties": {"amount": {"type": "number"}}}}}
    typical = {"model": "g", "messages": [{"role": "user", "content": "order a lamp"}],
               "tools": [{"type": "function", "function": {"name": f"tool_{i}", "parameters": pydantic}}
                         for i in range(3)]}
    assert offloader.inline(typical)


def test_one_call_repeated_with_each_of_its_results_is_tokenized_once(monkeypatch):
    """Cohere v1 sends a tool call again with each of its results: a 25 KB call with 60 results was tokenized 60 times
    (86 ms of the event loop; minutes of a pool thread for a 1 MB body). It is counted once, times its results."""
    from budget_hook.counting import counter as module

    arguments = json.dumps({"code": "x = 1\n" * 5000})
    messages = [{"role": "user", "content": "run it"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "run", "arguments": arguments}}]},
                *({"role": "tool", "tool_call_id": "c", "content": "r"} for _ in range(60))]
    cohere = TokenCounter.for_model("cohere_chat/v1/command-r")
    assert cohere.profile.results_carry_call
    seen: list[int] = []
    original = module.TokenCounter._count_text
    monkeypatch.setattr(module.TokenCounter, "_count_text", lambda self, text: seen.append(len(text)) or
                        original(self, text))
    total = cohere.count_request({"model": "m", "messages": messages}).total
    assert sum(size for size in seen if size >= len(arguments)) <= 3 * len(arguments)
    one_fewer = cohere.count_request({"model": "m", "messages": messages[:-1]}).total
    assert total - one_fewer >= 5000  # still counted once for each result


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5", "mistral/mistral-small", "ollama/llama3"])
def test_a_million_spaces_are_counted_not_a_crash(model):
    """tiktoken's o200k_base and Llama 3 panicked on them (a bare 500 through the proxy), Tekken raised."""
    counter = TokenCounter.for_model(model)
    assert counter.count_request({"messages": [{"role": "user", "content": " " * (1 << 20)}]}).total > 1000


# --- model names: bounded before any pattern or lookup reads them --------------------------------------


class _Recorded:
    """A compiled pattern that records the length of every string it is asked to read."""

    def __init__(self, pattern: re.Pattern, lengths: list[int]) -> None:
        self.pattern, self.lengths = pattern, lengths

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.pattern, name)
        if name not in ("match", "search", "fullmatch", "sub", "subn", "findall", "finditer", "split"):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            self.lengths.append(len(args[1] if name in ("sub", "subn") else args[0]))
            return method(*args, **kwargs)
        return call


def _wrap(value: Any, lengths: list[int]) -> Any:
    if isinstance(value, re.Pattern):
        return _Recorded(value, lengths)
    if isinstance(value, tuple):
        return tuple(_wrap(item, lengths) for item in value)
    return value


@pytest.fixture
def pattern_inputs(monkeypatch):
    """Every pattern of the modules that read model names, recording what it reads."""
    lengths: list[int] = []
    for module in (profiles, windows):
        for name, value in list(vars(module).items()):
            wrapped = _wrap(value, lengths)
            if wrapped is not value:
                monkeypatch.setattr(module, name, wrapped)
    return lengths


class _Router:
    """A router that knows ``gpt-4.1`` and records every name it is asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def get_model_list(self, model_name: str) -> list[dict]:
        self.asked.append(model_name)
        if model_name != "gpt-4.1":
            return []
        return [{"model_name": "gpt-4.1", "litellm_params": {"model": "openai/gpt-4.1"}, "model_info": {"id": "d1"}}]

    def get_router_model_info(self, deployment: dict, received_model_name: str) -> dict:
        return {"max_input_tokens": 1_000_000}


HOSTILE_NAMES = ["-v1" * 16000 + "x/gpt-4.1", "us." * 20000 + "anthropic.claude-3", "-20250514" * 5000,
                 "claude-sonnet-4" + "@default" * 6000, "a," * 30000, "," * 1000, "/" * 50000, "." * 50000,
                 "gpt-4.1," * 40, "x" * 257, "g," * 10 + "x" * 300]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=lambda n: f"{n[:12]!r}x{len(n)}")
def test_a_hostile_model_name_is_never_read_by_a_pattern_nor_looked_up_beyond_the_bound(name, pattern_inputs):
    router = _Router()
    cache: windows.WindowCache = windows.WindowCache(lambda group: windows.limits_from_router(router, group))
    limits = windows.combine(name, [cache.get(group) for group in windows.listed_groups(name)])
    assert limits.window is None  # unknown: the policy's default or a block, never another group's window
    profile = resolve_tokenizer(name)
    assert profile.family == "unknown" and resolve_tokenizer(limits.counting_model).family == "unknown"
    TokenCounter.for_model(limits.counting_model).count_request({"messages": [{"role": "user", "content": "hi"}]})
    assert max(pattern_inputs, default=0) <= MAX_MODEL_NAME_CHARS
    assert len(router.asked) <= windows.MAX_LISTED_GROUPS and all(len(n) <= MAX_MODEL_NAME_CHARS for n in router.asked)
    assert all(len(key) <= 2 * MAX_MODEL_NAME_CHARS for key in cache._cache)


def test_names_within_the_bound_are_looked_up_as_before(pattern_inputs):
    router = _Router()
    assert windows.limits_from_router(router, "gpt-4.1").window == 1_000_000
    assert windows.listed_groups("gpt-4.1, small") == ["gpt-4.1", "small"]
    assert len(windows.listed_groups(",".join(["g"] * windows.MAX_LISTED_GROUPS))) == windows.MAX_LISTED_GROUPS
    assert windows.listed_groups(",") == [","]  # used to be [] (and a crash in ``combine``)
    assert model_key("us." * 60 + "anthropic.claude-3-haiku") == "claude-3-haiku"  # no recursion
    assert model_key("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0") == "claude-sonnet-4-5-20250929-v1:0"
    assert resolve_tokenizer("openai/gpt-4.1").exact
    window, note = windows.header_dependent_window("anthropic/claude-sonnet-4-20250514-v1:0@default", None,
                                                   1_000_000, {}, {})
    assert window == windows.STANDARD_CLAUDE_WINDOW and note
    assert max(pattern_inputs, default=0) <= MAX_MODEL_NAME_CHARS


_OLD_SNAPSHOT_SUFFIX = re.compile(r"([-@]\d{8}|-v\d+(:\d+)?|@default|-latest)+$")
_NAME_PIECES = st.sampled_from(["-", "@", "v", ":", "0", "7", "20250514", "-20250514", "@20250514", "-v1", "-v12",
                                ":0", "@default", "-latest", "default", "latest", "claude-sonnet-4", "x", "\u0663"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_NAME_PIECES, max_size=12).map("".join))
def test_the_linear_suffix_scan_strips_what_the_quadratic_pattern_stripped(name):
    assert windows.without_snapshot_suffixes(name) == _OLD_SNAPSHOT_SUFFIX.sub("", name)


def test_a_model_name_no_group_can_have_is_refused_by_the_hook_without_echoing_it(pattern_inputs):
    """LiteLLM's own answer to a name it does not serve runs its error redaction over the name, in quadratic time:
    the hook refuses it first, with a message of its own."""
    from litellm.proxy._types import UserAPIKeyAuth

    from budget_hook.policy.settings import load_settings
    from budget_hook.proxy.hook import BudgetHookHTTPError, BudgetHookPlugin

    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))
    for name in HOSTILE_NAMES:
        body = {"model": name, "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": f"long-{len(name)}"}
        with pytest.raises(BudgetHookHTTPError) as refused:
            asyncio.run(plugin.async_pre_call_hook(UserAPIKeyAuth(), None, body, "acompletion"))
        assert refused.value.status_code == 400 and refused.value.error_code == "invalid_model_name"
        assert len(refused.value.message) < 300 and name[:40] not in refused.value.message
    assert pattern_inputs == []  # refused before any pattern read it
    listed = ",".join(["g" * 200] * windows.MAX_LISTED_GROUPS)  # a list of sane names is no problem
    assert windows.model_name_error(listed) is None and windows.model_name_error("x" * MAX_MODEL_NAME_CHARS) is None
    assert windows.model_name_error(listed + ",g") is not None and windows.model_name_error("g," * 16) is not None


# --- offloading: what costs more than text goes to the pool --------------------------------------------


def _chat(content: Any, **extra: Any) -> dict:
    return {"model": "g", "messages": [{"role": "user", "content": content}], **extra}


HEAVY = {
    "PDF file_data": _chat([{"type": "file", "file": {"file_data": pdf_url(b"%PDF-1.4\n" + b"<< /Type /Page >>\n" * 100)}}]),
    "bare base64 file_data": _chat([{"type": "file", "file": {"file_data": "JVBER" + "A" * 2000}}]),
    "image data URL": _chat([{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + "/" * 2000}}]),
    "input_audio": _chat([{"type": "input_audio", "input_audio": {"data": "A" * 2000, "format": "wav"}}]),
    "Anthropic document": _chat([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                                 "data": "A" * 2000}}]),
    "Gemini inline_data": {"contents": [{"parts": [{"inline_data": {"mime_type": "application/pdf", "data": "A" * 2000}}]}]},
    "600 tiny messages": {"messages": [{"role": "user", "content": "ok"}] * 600},
    "CJK without spaces": _chat("\u4e2d\u6587" * 4000),
    "one character repeated": _chat("\n" * 8000),
    # an attack review: short words of symbols (10x prose per character in tiktoken) or any script but Latin
    # letters, broken by spaces often enough to read as prose, were decided on the event loop
    "symbol words": _chat(" ".join("\u2100\u2101\u2102" for _ in range(3000))),
    "Cyrillic words": _chat(" ".join("\u043f\u0440\u0438\u0432\u0435\u0442" for _ in range(2000))),
    "breaks at each chunk's head, CJK after": _chat("".join(" \n" * 128 + "\u4e2d" * 3840 for _ in range(3))),
    # an attack review: a configured chat template renders these at ~20x the cost of counting prose (1.5 MB held
    # the event loop 1.6 s)
    "chat_template_kwargs": _chat("hi", chat_template_kwargs={"date_string": "lorem ipsum " * 300}),
    "extra_body chat_template_kwargs": _chat("hi", extra_body={"chat_template_kwargs": {"d": "lorem ipsum " * 300}}),
    "template documents": _chat("hi", documents=[{"title": "t", "text": "lorem ipsum " * 300}]),
}


def test_curly_quotes_and_accents_in_prose_weigh_next_to_nothing():
    """A review of the non-ASCII weight: 40,000 characters of English with a curly apostrophe every 8 words went
    to the pool (+31% weight for +7% cost). One extra byte per ``NON_ASCII_FREE`` characters is free."""
    words = ("we\u2019ll fix the build after the tests pass and the log is clean " * 700)[:40_000]
    plain = words.replace("\u2019", "'")
    assert approximate_size(_chat(words), 10**9) == approximate_size(_chat(plain), 10**9)
    assert Offloader(threads=1, offload_chars=50_000).inline(_chat(words))


@pytest.mark.parametrize("name", HEAVY)
def test_requests_that_cost_more_than_their_characters_are_decided_in_the_pool(name):
    offloader = Offloader(threads=1, offload_chars=50_000)
    ran_on = []

    async def decide(body):
        return await offloader.run(lambda: ran_on.append(threading.current_thread().name), body)
    asyncio.run(decide(HEAVY[name]))
    assert not offloader.inline(HEAVY[name]) and ran_on[0].startswith("budget_hook")
    asyncio.run(decide(_chat("what is the weather like today? " * 300)))  # prose of the same size stays inline
    assert ran_on[1] == "MainThread"


@pytest.mark.parametrize("model", ["deepseek-chat", "mistral-large-latest"])
def test_a_vocabulary_ten_times_slower_than_tiktoken_weighs_its_requests_so(model):
    """DeepSeek's vocabulary (``tokenizers``) and Mistral's (SentencePiece) cost ~12x tiktoken per character of
    prose: prose that stays inline for a tiktoken group goes to the pool for theirs."""
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import decision_weight
    from budget_hook.pipeline.decider import counter_for

    offloader = Offloader(threads=1, offload_chars=50_000)
    prose = _chat("what is the weather like today? " * 300)
    slow, fast = ModelLimits(128_000, "test", model), ModelLimits(128_000, "test", "gpt-4o")
    for limits in (slow, fast):  # built by a first decision, which is made in the pool (test_first_load_off_the_loop)
        counter_for(limits)
    weight = decision_weight(slow)
    assert weight > 1 and decision_weight(fast) == 1
    assert offloader.inline(prose) and not offloader.inline(prose, weight=weight)


def test_work_on_a_failed_call_runs_in_the_pool_whatever_its_size():
    offloader = Offloader(threads=1, offload_chars=50_000)
    ran_on = []
    asyncio.run(offloader.run(lambda: ran_on.append(threading.current_thread().name), _chat("hi"), pool=True))
    assert ran_on[0].startswith("budget_hook")


def test_text_that_folds_to_many_times_itself_is_taken_as_quoting_at_a_bounded_cost():
    """U+FDFA folds (NFKC) to 18 characters at ~2.6 us each: 768,000 of them in metadata took 3.9 s to search
    before. Folded a piece at a time, the search stops at the first piece that grows too much."""
    from budget_hook.learning import overflow

    folded: list[int] = []
    real = overflow.unicodedata.normalize

    def counting(form: str, text: str) -> str:
        folded.append(len(text))
        return real(form, text)
    overflow.unicodedata.normalize = counting  # type: ignore[assignment]
    try:
        assert overflow.quotes_overflow({"metadata": {"note": "\ufdfa" * 768_000}})
        assert sum(folded) <= overflow.NFKC_PIECE
        folded.clear()
        japanese = "\u65e5\u672c\u8a9e\uff21\uff22\uff23 " * 15_000  # full-width letters: folded
        assert not overflow.quotes_overflow({"messages": [{"content": japanese}, {"content": japanese}]})
        folded.clear()  # past NFKC_CHARS (the texts, then their joins): taken as quoting, having folded no more
        assert overflow.quotes_overflow({"messages": [{"content": japanese * 3}, {"content": japanese * 3}]})
        assert sum(folded) <= overflow.NFKC_CHARS
        assert overflow.quotes_overflow({"messages": [{"content": japanese[:7000] + "\uff30rompt is too long"}]})
        folded.clear()  # ASCII is never folded (NFKC leaves it as it is): English with one emoji costs one piece
        english = [{"content": "the build failed again, see the log " * 300} for _ in range(20)]
        assert not overflow.quotes_overflow({"messages": [*english, {"content": "done \U0001f600"}]})
        assert sum(folded) <= 4 * overflow.NFKC_PIECE
    finally:
        overflow.unicodedata.normalize = real  # type: ignore[assignment]


def test_what_walks_the_whole_request_weighs_the_whole_request():
    """The decision reads the content fields only: a request of small content and 10,000 metadata keys is
    decided inline. The search for quoted overflow wording (asked when a call fails) walks everything: the
    same request is searched in the pool."""
    offloader = Offloader(threads=1, offload_chars=50_000)
    body = {**_chat("hi"), "metadata": {f"k{i}": i for i in range(10_000)}}
    ran_on = []

    async def work(whole: bool):
        return await offloader.run(lambda: ran_on.append(threading.current_thread().name), body, whole=whole)
    asyncio.run(work(False))
    asyncio.run(work(True))
    assert offloader.inline(body) and not offloader.inline(body, whole=True)
    assert ran_on[0] == "MainThread" and ran_on[1].startswith("budget_hook")


def test_the_size_walk_never_lists_more_items_than_fit_in_its_limit():
    listed: list[int] = []

    class Watched(list):
        def __getitem__(self, index):
            if isinstance(index, slice):
                listed.append(len(range(*index.indices(len(self)))))
            return super().__getitem__(index)

    body = {"messages": Watched([{"role": "user", "content": "x"}] * 1_000_000),
            "metadata": {"tags": Watched(range(1_000_000))}}
    assert approximate_size(body, 50_000) >= 50_000 and other_size(body, 50_000) >= 50_000
    assert max(listed) <= 50_000 // offload.OTHER_ITEM_WEIGHT + 1 and min(listed) <= 50_000 // ITEM_WEIGHT + 1


def test_typical_requests_stay_inline():
    offloader = Offloader(threads=1, offload_chars=50_000)
    messages = [{"role": "system", "content": "You are terse."}]
    for turn in range(10):
        messages += [{"role": "user", "content": f"turn {turn}: " + "tell me about the weather " * 30},
                     {"role": "assistant", "content": "It is sunny and mild today, with light winds. " * 12}]
    litellm_like = {"metadata": {"headers": {f"h{i}": "v" * 30 for i in range(15)}, **{f"user_api_key_{i}": None
                                                                                     for i in range(40)}},
                    "proxy_server_request": {"url": "http://x/v1/chat/completions", "body": {"messages": messages}}}
    assert offloader.inline({"model": "g", "messages": messages, **litellm_like})


# --- the regex audit -----------------------------------------------------------------------------------

#: Every pattern in src, where it runs and why it is linear in what it reads. A new pattern must be added
#: here (the test below says which); one the structural check flags must also say what bounds its input.
AUDITED: dict[tuple[str, str | bytes], str] = {
    ("budget_hook.budget.compute", r"\s*\+?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?\s*"):
        "fullmatch on a client's output allowance string, at most 40 characters",
    ("budget_hook.counting.runs", r"\d{2,}"): "findall over message text: one pass, no backtracking",
    ("budget_hook.counting.rendered", r"[ \t\n\r]*"): "match at one position of a call's arguments: one class, "
                                                      "one pass",
    ("budget_hook.counting.runs", r" {2,}"): "findall over message text: one pass",
    ("budget_hook.counting.runs", r"([^\s\d])\1{3,}"): "finditer over message text: a run is read once",
    ("budget_hook.counting.media", rb"/Type/Pages(?![a-zA-Z])"): "PDF bytes: a literal, then one byte",
    ("budget_hook.counting.media", rb"/Count(\d{1,9})"): "PDF bytes: a literal, at most 9 digits",
    ("budget_hook.providers.openai", r"^(chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|codex|computer-use)"):
        "match on a model name of at most MAX_MODEL_NAME_CHARS",
    ("budget_hook.providers.openai", r"^(gpt-4|gpt-3\.5|gpt-35)"): "match on a bounded model name",
    ("budget_hook.providers.gemini", r"gemini-2\.5|gemini-2-5"): "search, literals: bounded model name",
    ("budget_hook.providers.gemini", r"gemini-(2\.0|2-0|1\.5|1-5|1\.0|pro)|gemma"): "search, literals: bounded name",
    ("budget_hook.providers.open_models", r"llama[-_ ]?3"): "search, literals: bounded model name",
    ("budget_hook.providers.open_models", r"qwen2(?:\.5|-5|_5)?[-_ ]?vl"): "search, literals and one optional group: "
                                                                       "bounded model name",
    ("budget_hook.providers.openai", r"^(text-embedding-|davinci-002|babbage-002)"): "match on a bounded name",
    ("budget_hook.counting.profiles", r"^(gpt-|o\d|chatgpt)"): "match on a bounded model name",
    ("budget_hook.providers.anthropic", r"claude-(3|instant|2)|claude-(haiku|sonnet|opus)-3"): "search, literals",
    ("budget_hook.providers.anthropic", r"claude-(sonnet|opus)-4(-0|-1|-2025|$)|claude-4-|claude-(sonnet|opus)-4@"):
        "search, literals: bounded model name",
    ("budget_hook.providers.anthropic", r"claude-(haiku|sonnet|opus)-4[-.]5"): "search, literals: bounded name",
    ("budget_hook.providers.anthropic", r"claude-(haiku|sonnet|opus)-4[-.]6"): "search, literals: bounded name",
    ("budget_hook.providers.anthropic",
     r"prompt is too long:\s*(?P<prompt>\d[\d,]*)\s*tokens\s*>\s*(?P<window>\d[\d,]*)\s*maximum"):
        "provider error text cut to MAX_CHARS (4,000); a literal starts every try",
    ("budget_hook.providers.anthropic", r"input length and `?max_tokens`? exceed context limit:\s*(?P<prompt>\d[\d,]*)"
     r"\s*\+\s*\d[\d,]*\s*>\s*(?P<window>\d[\d,]*)"): "provider error text, at most 4,000 characters; literal start",
    ("budget_hook.providers.openai", r"maximum context length is\s*(?P<window>\d[\d,]*)\s*tokens.{0,40}?requested\s*"
     r"\d[\d,]*\s*tokens\s*\((?P<prompt>\d[\d,]*)\s*in (?:the messages|your prompt)"):
        "provider error text, at most 4,000 characters; literal start",
    ("budget_hook.providers.openai", r"maximum context length is\s*(?P<window>\d[\d,]*)\s*tokens.{0,60}?request has"
     r"\s*(?P<prompt>\d[\d,]*)\s*input tokens"): "provider error text, at most 4,000 characters; literal start",
    ("budget_hook.providers.openai", r"maximum context length is\s*(?P<window>\d[\d,]*)\s*tokens.{0,60}?resulted in"
     r"\s*(?P<prompt>\d[\d,]*)\s*tokens"): "provider error text, at most 4,000 characters; literal start",
    ("budget_hook.providers.openai", r"maximum context length is\s*(?P<window>\d[\d,]*)\s*tokens"):
        "provider error text, at most 4,000 characters",
    ("budget_hook.providers.gemini", r"input token count\s*\(?(?P<prompt>\d[\d,]*)\)?\s*exceeds the maximum number of "
     r"tokens allowed\s*\(?(?P<window>\d[\d,]*)\)?"): "provider error text, at most 4,000 characters",
    ("budget_hook.learning.overflow", r"""(?:^|message\\?['"]?\s*[:=]\s*\\?['"]|\s-\s|\n|\bdetail\\?['"]?\s*:\s*\\?['"])\s*$"""):
        "BOUNDED: searched on the last 60 characters before a match only",
    ("budget_hook.learning.overflow", r"(?:This model's|The model's|the model's|The)\s*$"):
        "BOUNDED: sub over at most 4,000 characters; each try starts at a literal and reads one whitespace run",
    ("budget_hook.pipeline.privacy", r"(?:messages|input|contents)\[\d+\]"): "match on the plugin's own problem text",
    ("budget_hook.pipeline.privacy", r"[:;]"): "split on the plugin's own window source",
    ("budget_hook.proxy.client_input", r"[0-9]{1,12}"): "fullmatch on a header value: at most 12 characters read",
    ("budget_hook.proxy.route_guard", r"^/gemini/(?:.*/)?((?:tuned)?[mM]odels/[^/:]+):(?:generateContent|"
     r"streamGenerateContent)$"):
        "match on a request path (anchored: one try; the path is read once, each segment once more)",
    ("budget_hook.proxy.route_guard", r"^/vertex[_-]ai/(?=[^:]*:(?:generateContent|streamGenerateContent|rawPredict|"
     r"streamRawPredict)$)[^:]*?/models/([^:]+)"): "match on a request path, anchored: the lookahead reads to the "
                                                    "first colon once, the lazy run tries a literal at each character",
    ("budget_hook.proxy.route_guard", r"^/vertex[_-]ai/(?:.*/)?(endpoints/[^/:]+):(?:generateContent|"
     r"streamGenerateContent|rawPredict|streamRawPredict)$"): "match on a request path, anchored",
    ("budget_hook.proxy.route_guard", r"^/azure(?:_ai)?/(?:.*/)?deployments/([^/]+)/(?:chat/completions|completions|"
     r"embeddings|responses)$"): "match on a request path, anchored",
    ("budget_hook.proxy.route_guard", r"^(?!/v1/a2a/discover/?$)(/v1)?/a2a/[^/]+(/message/send)?/?$"):
        "match on the request's path: anchored, one class run between literals, no nested repeat",
    ("budget_hook.proxy.route_guard", r"chat/completions$"): "search on a path: literals",
    ("budget_hook.proxy.route_guard", r"(^|/)completions$"): "search on a path: literals",
    ("budget_hook.proxy.route_guard", r"(^|/)embeddings$"): "search on a path: literals",
    ("budget_hook.proxy.route_guard", r"(^|/)responses(/compact)?$"): "search on a path: literals",
    ("budget_hook.proxy.route_guard", r"(^|/)messages$"): "search on a path: literals",
    ("budget_hook.proxy.route_guard", r":(stream)?[gG]enerateContent$"): "search on a path: literals",
    ("budget_hook.proxy.route_guard", r"/invoke(-with-response-stream)?$|:(stream)?[rR]awPredict$"):
        "search on a path: literals",
    ("budget_hook.providers.anthropic", r"claude-(sonnet-4|4-sonnet|sonnet-4[-.]5|sonnet-4[-.]6|opus-4[-.]6)$"):
        "search, literals: a bounded model name or the operator's backend",
    ("budget_hook.trimming.report", r"^\s*(error|exception|traceback|failed|failure)\b"):
        "match on the first 200 characters of a tool result",
    ("budget_hook.trimming.structure", r"^\W*(ok|okay|sure|got it|understood|noted|acknowledged|thanks|thank you)\b"):
        "match (anchored: one try, one pass of \\W* and its give-backs) on a reply of at most ack_max_chars",
    ("budget_hook.replay", r"\.\.\. \(litellm_truncated skipped (\d{1,12}) chars\. .{0,600}?\) \.\.\."):
        "BOUNDED: offline (spend logs), a 30-character literal starts every try, which reads at most 600 more",
}


def _all_modules() -> list[Any]:
    return [importlib.import_module(info.name) for info in pkgutil.walk_packages(budget_hook.__path__, "budget_hook.")]


def _compiled_in(value: Any, depth: int = 0) -> list[re.Pattern]:
    if isinstance(value, re.Pattern):
        return [value]
    if depth < 3 and isinstance(value, (tuple, list, frozenset)):
        return [p for item in value for p in _compiled_in(item, depth + 1)]
    if depth < 3 and isinstance(value, dict):
        return [p for item in value.values() for p in _compiled_in(item, depth + 1)]
    return []


_RE_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}


def _source_patterns(module: Any) -> tuple[int, list[str | bytes]]:
    """(``re.compile`` calls, literal patterns of every other ``re.<function>`` call) in the module's source;
    a non-literal pattern outside ``re.compile`` cannot be audited and fails here."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    compiles, literals = 0, []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RE_CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
            if node.func.attr == "compile":
                compiles += 1
            elif isinstance(node.args[0], ast.Constant):
                literals.append(node.args[0].value)
            else:
                raise AssertionError(f"{module.__name__}: re.{node.func.attr} with a pattern that is not a literal")
    return compiles, literals


def _risks(pattern: str | bytes, flags: int = 0) -> set[str]:
    """Structures that can make a search super-linear: a repeat inside a repeat (``(a+)+``, ``(\\d{8}|x)+``), a
    lookaround inside a repeat (``(?:(?!>>).){0,400}``), an unbounded repeat in an end-anchored pattern that
    is not start-anchored (searched from every position: ``x+$``), a long bounded repeat (``.{0,600}``)."""
    from re import _constants as c
    from re import _parser as parser

    found: set[str] = set()

    def walk(items: Any, in_repeat: bool) -> tuple[bool, bool]:
        """(has a repeat, has an unbounded repeat)"""
        has_repeat = has_unbounded = False
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
                _, high, sub = av
                inner, inner_unbounded = walk(sub, in_repeat or high > 1)
                if high > 1 and inner:
                    found.add("nested repeat")
                if high > 1 and any(o in (c.ASSERT, c.ASSERT_NOT) for o, _ in sub):
                    found.add("lookaround inside a repeat")
                if high != c.MAXREPEAT and high >= 100:
                    found.add("long bounded repeat")
                has_repeat |= high > 1
                has_unbounded |= high == c.MAXREPEAT or inner_unbounded
            elif op == c.SUBPATTERN:
                sub_repeat, sub_unbounded = walk(av[3], in_repeat)
                has_repeat, has_unbounded = has_repeat or sub_repeat, has_unbounded or sub_unbounded
            elif op == c.BRANCH:
                for branch in av[1]:
                    sub_repeat, sub_unbounded = walk(branch, in_repeat)
                    has_repeat, has_unbounded = has_repeat or sub_repeat, has_unbounded or sub_unbounded
            elif op in (c.ASSERT, c.ASSERT_NOT):
                walk(av[1], in_repeat)
            elif op == c.ATOMIC_GROUP:
                walk(av, in_repeat)
        return has_repeat, has_unbounded

    parsed = parser.parse(pattern, flags)
    _, unbounded = walk(parsed, False)
    ends = any(op == c.AT and av in (c.AT_END, c.AT_END_STRING) for op, av in _flatten(parsed))
    starts = bool(parsed.data) and parsed.data[0] == (c.AT, c.AT_BEGINNING)
    if ends and unbounded and not starts:
        found.add("end-anchored unbounded repeat")
    return found


def _flatten(items: Any) -> list[tuple[Any, Any]]:
    from re import _constants as c

    out = []
    for op, av in items:
        out.append((op, av))
        if op == c.SUBPATTERN:
            out += _flatten(av[3])
        elif op == c.BRANCH:
            out += [x for branch in av[1] for x in _flatten(branch)]
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            out += _flatten(av[2])
    return out


def test_the_audit_flags_the_two_quadratic_patterns_it_replaced():
    assert "nested repeat" in _risks(r"([-@]\d{8}|-v\d+(:\d+)?|@default|-latest)+$")
    assert "lookaround inside a repeat" in _risks(rb"/Type\s*/Pages(?![a-zA-Z])(?:(?!>>).){0,400}?/Count\s+(\d{1,9})",
                                                  re.S)
    assert _risks(r"^(gpt-4|gpt-3\.5)") == set()


def test_every_regex_in_src_is_audited_and_none_can_backtrack_without_a_bound():
    seen: set[tuple[str, str | bytes]] = set()
    problems = []
    for module in _all_modules():
        compiled = {p for value in vars(module).values() for p in _compiled_in(value)}
        compiles, literals = _source_patterns(module)
        if compiles != len(compiled):
            problems.append(f"{module.__name__}: {compiles} re.compile calls, {len(compiled)} module-level patterns "
                            "(compile patterns at module level, where this audit can see them)")
        for pattern, flags in [(p.pattern, p.flags) for p in compiled] + [(p, 0) for p in literals]:
            key = (module.__name__, pattern)
            seen.add(key)
            if key not in AUDITED:
                problems.append(f"not audited: {key!r} (add it to AUDITED: where it runs, why it is linear)")
            elif _risks(pattern, flags) and not AUDITED[key].startswith("BOUNDED:"):
                problems.append(f"{key!r} {sorted(_risks(pattern, flags))}: rewrite it, or bound its input and say "
                                "so in AUDITED ('BOUNDED: ...')")
    problems += [f"audited but gone: {key!r}" for key in AUDITED if key not in seen]
    assert not problems, "\n".join(problems)


def test_the_bench_builds_its_bodies():
    """``bench/hostile_cpu.py`` stays runnable: its builders make JSON bodies the hook accepts."""
    import random
    import sys

    sys.path.insert(0, str(PACKAGE.parents[1] / "bench"))
    try:
        import hostile_cpu
    finally:
        sys.path.pop(0)
    rng = random.Random(1)
    for _, build in hostile_cpu.content_types(0.01, rng):
        assert json.loads(json.dumps(build()))["messages"]
    for _ in range(30):
        description, body = hostile_cpu.hostile_body(rng)
        assert description and json.dumps(body)
