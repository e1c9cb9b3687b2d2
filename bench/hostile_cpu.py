"""Hostile CPU: what each kind of content costs the plugin to decide, per MB, and the worst a fuzzer finds.
Every figure is a ratio against baselines measured in the same run.

    python bench/hostile_cpu.py                  # all three parts
    python bench/hostile_cpu.py --fuzz 400 --seed 7

1. Per content type, a request of about ``--mb`` MB decided through the plugin's pre-call hook in process,
   inline (``offload_chars: 0``: the time is the decision's own CPU), cold (count cache and PDF scans
   cleared, every body re-parsed from JSON so no string carries a cached hash); the window is looked up as
   in the proxy (the model map: ``gpt-4.1``, 1M tokens). Per MB of request body, as a ratio against two
   baselines: tiktoken's o200k ``encode_ordinary`` over the same number of bytes of prose (``x tiktoken``),
   and ``json.loads`` of that body (what LiteLLM spends parsing it: ``x json``). ``pool`` says whether the
   Offloader decides such a request in the thread pool. The rows marked ``issue`` are the reported cases
   (issue 20), with the peak memory the decision allocates (tracemalloc).
2. Fuzz: ``--fuzz`` seeded random hostile bodies (PDF bombs, deep JSON, regex-hostile text, giant and odd
   model names, many parts, JPEGs without a size marker, data URLs full of line breaks...). The worst single
   request's decision time, per MB and absolute, and which input caused it; any internal failure.
3. The event loop: latency of small requests through the hook while hostile requests (PDF bombs, 48 KB
   model names, many tiny messages) keep arriving on the same loop, with the default offload settings.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.counting import media
from budget_hook.counting.cache import COUNT_CACHE
from budget_hook.counting.encodings import get_encoding
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.hook import BudgetHookHTTPError, BudgetHookPlugin
from budget_hook.proxy.offload import Offloader

MODEL = "gpt-4.1"
USER = UserAPIKeyAuth()
_SENTENCE = ("the quick brown fox jumps over a lazy dog while several engineers review the pull requests of "
             "their colleagues and discuss whether the new gateway counts tokens the way providers bill them")
WORDS = tuple(_SENTENCE.split())


# --- bodies -------------------------------------------------------------------------------------------


def prose(size: int, rng: random.Random) -> str:
    out, length = [], 0
    while length < size:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def code(size: int) -> str:
    sources = "".join(p.read_text() for p in sorted((ROOT / "src" / "budget_hook").rglob("*.py")))
    return (sources * (size // len(sources) + 1))[:size]


def chat(content, model: str = MODEL, **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def data_url(media_type: str, raw: bytes) -> str:
    return f"data:{media_type};base64," + base64.b64encode(raw).decode()


def png(size: int, rng: random.Random) -> bytes:
    header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (1024).to_bytes(4, "big") * 2 + b"\x08\x02\x00\x00\x00"
    return header + rng.randbytes(max(0, size - len(header)))


def pdf_plain(size: int) -> bytes:
    page = b"3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>\nendobj\n"
    return b"%PDF-1.4\n" + page * (size // len(page)) + b"%%EOF"


def pdf_flate(size: int, pattern: bytes, streams: int = 1, inflated: int = 64 << 20) -> bytes:
    """A PDF whose object streams (FlateDecode) inflate ``pattern`` to ``inflated`` bytes each, as many as fit."""
    packed = zlib.compress(pattern * (inflated // len(pattern)), 9)
    one = b"1 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n" + packed + b"\nendstream\n"
    count = max(1, min(streams, size // len(one)))
    return b"%PDF-1.5\n" + one * count + b"%%EOF"


def pdf_realistic(size: int, rng: random.Random) -> bytes:
    """Text pages: one content stream per page (compressed prose drawing operators), pages in plain objects."""
    parts, length, index = [b"%PDF-1.5\n"], 0, 0
    while length < size:
        ops = " ".join(f"BT /F1 11 Tf 72 {700 - 14 * i} Td ({prose(80, rng)}) Tj ET" for i in range(40)).encode()
        stream = zlib.compress(ops)
        obj = (b"%d 0 obj\n<< /Type /Page /Parent 2 0 R /Contents %d 0 R >>\nendobj\n" % (2 * index + 3, 2 * index + 4)
               + b"%d 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n" % (2 * index + 4, len(stream)) + stream
               + b"\nendstream\nendobj\n")
        parts.append(obj)
        length += len(obj)
        index += 1
    return b"".join(parts) + b"%%EOF"


def file_part(raw: bytes, media_type: str = "application/pdf") -> dict:
    return {"type": "file", "file": {"file_data": data_url(media_type, raw)}}


def tool_calls(size: int, rng: random.Random) -> dict:
    messages: list[dict] = [{"role": "user", "content": "go"}]
    length, index = 0, 0
    while length < size:
        calls = [{"id": f"call_{index}_{i}", "type": "function", "function": {"name": f"tool_{i}", "arguments": json.dumps(
            {"path": f"/src/{prose(20, rng)}", "lines": list(range(i, i + 10)), "options": {"recursive": True}})}}
            for i in range(8)]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": json.dumps({"ok": True, "n": i})}
                     for i, c in enumerate(calls)]
        length += len(json.dumps(messages[-9:]))
        index += 1
    return {"model": MODEL, "messages": messages}


def tiny_messages(size: int) -> dict:
    count = size // 40
    return {"model": MODEL, "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": f"ok {i}"}
                                         for i in range(count)]}


def content_types(mb: float, rng: random.Random) -> list[tuple[str, Callable[[], dict]]]:
    size = int(mb * (1 << 20))
    raw = size * 3 // 4  # base64 payloads: this many bytes make ``size`` characters
    bomb_count = b"/Count 1 " * ((4 << 20) // 9)
    return [
        ("plain text (prose)", lambda: chat(prose(size, rng))),
        ("code", lambda: chat(code(size))),
        ("base64 image (PNG)", lambda: chat([{"type": "image_url", "image_url": {"url": data_url("image/png", png(raw, rng))}}])),
        ("base64 image (JPEG, no size marker)",
         lambda: chat([{"type": "image_url", "image_url": {"url": data_url("image/jpeg", b"\xff\xd8" + b"\xff" * raw)}}])),
        ("PDF, plain objects", lambda: chat([file_part(pdf_plain(raw))])),
        ("PDF, FlateDecode text pages", lambda: chat([file_part(pdf_realistic(raw, rng))])),
        ("PDF, FlateDecode bombs (/Type/Page)", lambda: chat([file_part(pdf_flate(raw, b"/Type/Page ", 1000))])),
        ("PDF, many stream keywords", lambda: chat([file_part(b"%PDF-1.5\n" + b"stream\nx\x9c" * (raw // 9))])),
        ("audio (input_audio)", lambda: chat([{"type": "input_audio", "input_audio": {"data": base64.b64encode(rng.randbytes(raw)).decode(), "format": "wav"}}])),
        ("text without spaces (CJK)", lambda: chat("".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(size // 3)))),
        ("text: one character repeated (newline)", lambda: chat("\n" * (size // 2))),
        ("tool-call JSON", lambda: tool_calls(size, rng)),
        ("many tiny messages", lambda: tiny_messages(size)),
        ("long model name (-v1 x N)", lambda: chat("hi", model="-v1" * (size // 3) + "x/gpt-4.1")),
        ("issue: 10 KB PDF, 4 MiB of /Count 1", lambda: chat([file_part(b"%PDF-1.5\nstream\n" + zlib.compress(bomb_count, 9) + b"\nendstream\n%%EOF")])),
        ("issue: PDF, 64 MiB of /Type/Page", lambda: chat([file_part(pdf_flate(0, b"/Type/Page ", 1))])),
        ("issue: 48 KB model name", lambda: chat("hi", model="-v1" * 16000 + "x/gpt-4.1")),
    ]


# --- measuring ----------------------------------------------------------------------------------------


def make_plugin(offload_chars: int = 0) -> BudgetHookPlugin:
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False, "offload_chars": offload_chars}))
    # warm-up: the first call imports LiteLLM's proxy server (looking for its router), seconds, once
    asyncio.run(plugin.async_pre_call_hook(USER, None, {**chat("warm up"), "litellm_call_id": "warm-up"}, "acompletion"))
    return plugin


def decide_once(plugin: BudgetHookPlugin, text: str, tag: str) -> tuple[float, str]:
    """One cold decision of the body serialised as ``text``: (seconds, outcome). A body with ``max_tokens``
    and an Anthropic ``document`` goes to /v1/messages, any other to /chat/completions."""
    COUNT_CACHE.clear()
    media._SCANS.clear()
    body = json.loads(text)
    body["litellm_call_id"] = tag
    anthropic = '"type": "document"' in text[:200] and "max_tokens" in body
    start = time.perf_counter()
    try:
        out = asyncio.run(plugin.async_pre_call_hook(USER, None, body, "anthropic_messages" if anthropic else "acompletion"))
        seconds = time.perf_counter() - start
        record = (out or body).get("litellm_metadata" if anthropic else "metadata", {}).get("budget_hook", {})
        outcome = str(record.get("action") if isinstance(record, dict) else "?")
    except BudgetHookHTTPError as exc:
        seconds = time.perf_counter() - start
        outcome = f"blocked ({exc.error_code})"
    return seconds, outcome


def best(plugin: BudgetHookPlugin, text: str, repeat: int, tag: str) -> tuple[float, str]:
    runs = [decide_once(plugin, text, f"{tag}-{i}") for i in range(repeat)]
    return min(r[0] for r in runs), runs[0][1]


def peak_mib(plugin: BudgetHookPlugin, text: str) -> float:
    COUNT_CACHE.clear()
    media._SCANS.clear()
    body = json.loads(text)
    tracemalloc.start()
    try:
        asyncio.run(plugin.async_pre_call_hook(USER, None, body, "acompletion"))
    except BudgetHookHTTPError:
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def baselines(rng: random.Random, size: int) -> tuple[float, float]:
    """Seconds per MB: tiktoken o200k over prose; json.loads over a chat body of prose."""
    encoding = get_encoding("o200k_base")
    text = prose(size, rng)
    encode = min(_timed(lambda: encoding.encode_ordinary(text)) for _ in range(3))
    body = json.dumps(chat(text))
    parse = min(_timed(lambda: json.loads(body)) for _ in range(3))
    return encode / (size / 2**20), parse / (len(body) / 2**20)


def _timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def part_one(mb: float, repeat: int, rng: random.Random) -> None:
    plugin = make_plugin()
    offloader = Offloader(threads=1, offload_chars=50_000)
    per_mb_tiktoken, per_mb_json = baselines(rng, int(mb * (1 << 20)))
    print(f"1. decision time per MB of request body, cold, inline; baselines per MB: tiktoken o200k "
          f"{per_mb_tiktoken * 1000:.1f} ms, json.loads {per_mb_json * 1000:.1f} ms")
    header = (f"   {'content':40s} {'body MB':>8s} {'decision ms':>12s} {'ms/MB':>8s} {'x tiktoken':>11s} "
              f"{'x json':>7s} {'pool':>5s} {'peak MiB':>9s}  outcome")
    print(header)
    print("   " + "-" * (len(header) - 3))
    for label, build in content_types(mb, rng):
        text = json.dumps(build())
        megabytes = len(text) / 2**20
        seconds, outcome = best(plugin, text, repeat, label)
        json_seconds = min(_timed(lambda t=text: json.loads(t)) for _ in range(3))
        pooled = "yes" if not offloader.inline(json.loads(text)) else "no"
        peak = f"{peak_mib(plugin, text):9.1f}" if label.startswith("issue") else " " * 9
        per_mb = seconds / megabytes
        print(f"   {label:40s} {megabytes:8.3f} {seconds * 1000:12.1f} {per_mb * 1000:8.1f} "
              f"{per_mb / per_mb_tiktoken:10.2f}x {seconds / json_seconds:6.1f}x {pooled:>5s} {peak}  {outcome}")


# --- fuzz ---------------------------------------------------------------------------------------------


def hostile_body(rng: random.Random) -> tuple[str, dict]:
    """One random hostile body and a description of it."""
    size = rng.choice((1 << 10, 16 << 10, 128 << 10, 512 << 10, 1 << 20))
    kind = rng.choice(("pdf", "pdf", "pdf", "deep", "regex_text", "model", "model", "parts", "jpeg", "data_url",
                       "messages", "anthropic_pdf", "type_list", "refs"))
    if kind in ("pdf", "anthropic_pdf"):
        pattern = rng.choice((b"/Type/Page ", b"/Count 1 ", b"<</Type/Pages/Count 7>>", b"/Type/Pages>>", b"stream\n",
                              b"/T#79pe /P#61ge ", b"/Type" + b" " * 64 + b"/Page", b">>", b"#61#62", b"\x00" * 8))
        compressed = rng.random() < 0.7
        streams = rng.choice((1, 10, 100, 1000))
        inflated = rng.choice((1 << 16, 1 << 20, 8 << 20, 64 << 20))
        raw = pdf_flate(size * 3 // 4, pattern, streams, inflated) if compressed else \
            b"%PDF-1.4\n" + pattern * (size * 3 // 4 // len(pattern))
        description = (f"PDF ({'FlateDecode, ' + str(streams) + ' stream(s) of ' + str(inflated >> 10) + ' KiB' if compressed else 'plain'}"
                       f") of {pattern[:24]!r} repeated, {len(raw) >> 10} KiB")
        if kind == "anthropic_pdf":
            block = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                    "data": base64.b64encode(raw).decode()}, "citations": {"enabled": True}}
            return "/v1/messages document: " + description, chat([block], max_tokens=1024)
        return description, chat([file_part(raw)])
    if kind == "deep":
        depth = rng.randint(20, 95)
        schema = json.loads('{"type": "array", "items": ' * depth + '{"type": "string"}' + "}" * depth)
        tools = [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object", "properties": {"x": schema}}}}
                 for i in range(max(1, size // (40 * depth)))]
        return f"{len(tools)} tool schemas nested {depth} deep", {**chat("hi"), "tools": tools}
    if kind == "type_list":  # a type listed twice at every level (the ninth attack review: 2^depth renderings)
        depth = rng.randint(10, 40)
        schema = json.loads('{"type": ["object", "object"], "properties": {"a": ' * depth + '{"type": "string"}'
                            + "}}" * depth)
        return f"a repeated type list nested {depth} deep", {**chat("hi"), "tools": [
            {"type": "function", "function": {"name": "t", "parameters": {"type": "object", "properties": {"x": schema}}}}]}
    if kind == "refs":  # references fanning out to a wide definition (the ninth attack review: 55-118 ms)
        fan, width = rng.choice((10, 30, 60)), rng.choice((40, 320, 2000))
        leaf = {"$ref": "#/$defs/D0", **{f"k{i}": {"type": "string"} for i in range(width)}}
        defs = {"D0": {"properties": {f"q{i}": {"$ref": "#/$defs/Mid"} for i in range(fan)}},
                "Mid": {"properties": {f"p{i}": {"$ref": "#/$defs/Leaf"} for i in range(fan)}}, "Leaf": leaf}
        schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}
        return f"references fanning out {fan} x {fan} to a {width}-entry definition", {**chat("hi"), "tools": [
            {"type": "function", "function": {"name": "t", "parameters": schema}}]}
    if kind == "regex_text":
        unit = rng.choice(("1", " ", "a", "\n", "-v1", "prompt is too long: ", "/Type ", "The ", "\u0663", "🙂", "ok "))
        return f"text of {unit!r} repeated, {size >> 10} KiB", chat(unit * (size // len(unit)))
    if kind == "model":
        unit = rng.choice(("-v1", "us.", "@default", "-20250514", ",", "a,", "claude-sonnet-4", "/", ".", "-v1:0"))
        length = rng.choice((300, 48_000, size))
        name = (unit * (length // len(unit) + 1))[:length] + rng.choice(("x/gpt-4.1", "", "claude-sonnet-4-5"))
        return f"model name of {unit!r} repeated, {len(name)} chars", chat("hi", model=name)
    if kind == "parts":
        count = size // 60
        part = rng.choice(({"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                           file_part(b"%PDF-1.5\nstream\n" + zlib.compress(b"/Type/Page " * 800, 9))))
        return f"{count} parts of type {part['type']}", chat([part] * count)
    if kind == "jpeg":
        fill = rng.choice((b"\x00", b"\xff", b"\xff\xd0", b"\xff\xe0\x00\x02"))
        return f"JPEG of {fill!r} repeated, {size >> 10} KiB", chat(
            [{"type": "image_url", "image_url": {"url": data_url("image/jpeg", b"\xff\xd8" + fill * (size * 3 // 4 // len(fill)))}}])
    if kind == "data_url":
        payload = base64.b64encode(pdf_plain(size // 2)).decode()
        wrapped = "\n".join(payload[i:i + rng.choice((1, 4, 76))] for i in range(0, len(payload), 76))
        return f"PDF data URL with line breaks, {size >> 10} KiB", chat([{"type": "file", "file": {"file_data": "data:application/pdf;base64," + wrapped}}])
    return f"{size // 40} tiny messages", tiny_messages(size)


def part_two(runs: int, seed: int, per_mb_tiktoken: float) -> None:
    """Each body decided once; the worst few of each kind decided twice more and their best time kept (a
    garbage collection of LiteLLM's half a million objects can land in any single run)."""
    rng = random.Random(seed)
    plugin = make_plugin()
    offloader = Offloader(threads=1, offload_chars=50_000)  # the default threshold
    results = []  # (seconds, megabytes, inline, description, outcome, text)
    failures = []
    for index in range(runs):
        description, body = hostile_body(rng)
        text = json.dumps(body)
        seconds, outcome = decide_once(plugin, text, f"fuzz-{index}")
        if outcome in ("error", "?"):
            failures.append(description)
        results.append((seconds, len(text) / 2**20, offloader.inline(json.loads(text)), description, outcome, text))
    print(f"2. fuzz: {runs} hostile bodies (seed {seed}); internal failures: {len(failures)} {failures[:3]}; "
          f"{sum(r[2] for r in results)} of them small enough to be decided inline (default offload_chars)")
    rankings = (("longest decision", lambda r: r[0]), ("most per MB", lambda r: r[0] / r[1] if r[1] > 0.01 else 0),
                ("longest inline", lambda r: r[0] if r[2] else 0))
    for label, key in rankings:
        top = sorted(results, key=key, reverse=True)[:5]
        again = [(min(r[0], *(decide_once(plugin, r[5], f"again-{i}")[0] for i in range(2))), *r[1:]) for r in top]
        seconds, megabytes, inline, description, outcome, _ = max(again, key=key)
        per_mb = seconds / megabytes
        print(f"   {label:17s} {seconds * 1000:8.1f} ms for {megabytes:6.3f} MB ({per_mb * 1000:7.1f} ms/MB, "
              f"{per_mb / per_mb_tiktoken:5.2f}x tiktoken){' inline' if inline else ''}: {description} -> {outcome}")


# --- the event loop -----------------------------------------------------------------------------------


def small_body(index: int) -> dict:
    messages = [{"role": "system", "content": "You are terse."}]
    for turn in range(5):
        messages += [{"role": "user", "content": f"req {index} turn {turn}: " + "tell me about the weather " * 30},
                     {"role": "assistant", "content": "It is sunny and mild today, with light winds. " * 12}]
    return {"model": MODEL, "messages": messages, "litellm_call_id": f"small-{index}"}


def hostile_stream_bodies() -> list[str]:
    return [json.dumps(chat([file_part(pdf_flate(400 << 10, b"/Type/Page ", 100))])),
            json.dumps(chat("hi", model="-v1" * 16000 + "x/gpt-4.1")),
            json.dumps(tiny_messages(256 << 10)),
            json.dumps(chat([{"type": "image_url", "image_url": {"url": data_url("image/jpeg", b"\xff\xd8" + b"\xff" * (700 << 10))}}])),
            json.dumps(chat("\n" * (256 << 10))),
            json.dumps(chat([file_part(b"%PDF-1.5\nstream\n" + zlib.compress(b"/Count 1 " * ((4 << 20) // 9), 9))] * 40))]


async def latencies(plugin: BudgetHookPlugin, background: list[str], count: int = 300) -> list[float]:
    """Small requests arriving every 5 ms, latency from the planned arrival to the hook's answer (time spent
    waiting for a busy event loop counts), while one stream of ``background`` bodies keeps arriving."""
    stop = asyncio.Event()

    async def stream() -> None:
        index = 0
        while not stop.is_set():
            body = json.loads(background[index % len(background)])
            body["litellm_call_id"] = f"background-{index}"
            media._SCANS.clear()
            try:
                await plugin.async_pre_call_hook(USER, None, body, "acompletion")
            except BudgetHookHTTPError:
                pass
            index += 1
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(stream())] if background else []
    await asyncio.sleep(0.05)
    samples, interval = [], 0.005
    first = time.perf_counter() + 0.01
    for index in range(count):
        arrival = first + index * interval
        delay = arrival - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await plugin.async_pre_call_hook(USER, None, small_body(index), "acompletion")
        samples.append(time.perf_counter() - arrival)
    stop.set()
    for task in tasks:
        await task
    return samples


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def part_three(rng: random.Random) -> None:
    plugin = make_plugin(offload_chars=50_000)  # the default
    honest = [json.dumps(chat(prose(1 << 20, rng)))]
    rows = (("alone", []), ("with 1 MB prose requests", honest), ("with hostile requests", hostile_stream_bodies()))
    print("3. event loop: small requests (10 turns) through the hook every 5 ms, alone and while one stream of large "
          "requests keeps arriving on the same loop (default offload settings); hostile: a 400 KiB PDF of 100 bomb "
          "streams, a 48 KB model name, 6,500 tiny messages, a 700 KiB JPEG of fill bytes, 256 Ki newlines, "
          "40 small PDF bombs")
    results = {label: asyncio.run(latencies(plugin, bodies)) for label, bodies in rows}
    for label, samples in results.items():
        print(f"   {label:26s} p50 {pct(samples, .5):6.2f} ms  p99 {pct(samples, .99):7.2f} ms  max {pct(samples, 1):7.2f} ms")
    hostile, honest_p99 = results["with hostile requests"], pct(results["with 1 MB prose requests"], .99)
    print(f"   small-request p99 with hostile requests / with honest large ones: {pct(hostile, .99) / honest_p99:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=1.0, help="size of each part-1 request, MB")
    parser.add_argument("--repeat", type=int, default=3, help="runs per part-1 row (the best is kept)")
    parser.add_argument("--fuzz", type=int, default=300, help="hostile bodies in part 2")
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--parts", default="123", help="which parts to run (e.g. 12)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if "1" in args.parts:
        part_one(args.mb, args.repeat, rng)
    if "2" in args.parts:
        per_mb_tiktoken, _ = baselines(rng, 1 << 20)
        part_two(args.fuzz, args.seed, per_mb_tiktoken)
    if "3" in args.parts:
        part_three(rng)


if __name__ == "__main__":
    main()
