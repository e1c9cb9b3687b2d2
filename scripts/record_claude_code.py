"""Record the requests the real Claude Code CLI sends during a scripted three-turn review of this repository.

    python scripts/record_claude_code.py [--out tests/data/clients/claude_code/cc_review]

Claude Code (``scripts/clients.sh`` installs it into ``.npm-clients``) runs offline with a dummy key against a
stand-in for Anthropic's ``/v1/messages`` started here on loopback. The stand-in answers from ``SCRIPT``: for
each of the three prompts, a fixed list of tool calls (``Read`` and ``Bash``, which Claude Code really runs
on a copy of this repository's ``src``, ``docs`` and ``README.md``), then a final answer; every assistant
message opens with a thinking block carrying only a signature, as Anthropic answers with thinking display
``omitted``. So the tool results are real (Claude Code's own ``Read`` and ``Bash`` output) and the way the
requests grow turn by turn is the client's own.

What is written: each main request (the ones with ``tools``), numbered in the order sent, with Claude Code's
own texts replaced by filler of the same length (its system prompt, its tools' descriptions, its
``<system-reminder>`` blocks and the reminders it appends to tool output; the device id in ``metadata``
zeroed): that text is Anthropic's, not ours to
publish, and trimming sees only its size and structure, which stay. ``--raw`` writes the bodies unchanged
(for local study only).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / ".npm-clients" / "node_modules" / ".bin" / "claude"
TRIM = "src/budget_hook/trimming"
PROMPTS = (
    "Explain how the trimming engine decides what to drop, step by step.",
    "Now explain how the Responses API shape pairs calls and outputs.",
    "Last question: how does the count cache work, and where is it invalidated?",
)


def _read(path: str) -> dict[str, Any]:
    return {"tool": "Read", "input": {"file_path": path}}  # made absolute at run time


def _bash(command: str, description: str) -> dict[str, Any]:
    return {"tool": "Bash", "input": {"command": command, "description": description}}


#: per prompt, the tool calls the stand-in makes, then its final answer
SCRIPT: dict[str, list[dict[str, Any]]] = {
    PROMPTS[0]: [
        _bash(f"ls -la {TRIM}", "List the trimming package"), _read(f"{TRIM}/engine.py"), _read(f"{TRIM}/ladder.py"),
        _bash(f"grep -n 'def settle\\|def drop_unit\\|def _first_fit' {TRIM}/*.py", "Find the key functions"),
        _read(f"{TRIM}/state.py"), _bash(f"wc -l {TRIM}/*.py", "Count lines in the trimming package"),
        _read(f"{TRIM}/settled.py"),
        {"text": "The engine counts the request once, finds the growth anchor (the earlier request of the same "
                 "conversation that was trimmed afresh), and reuses that trim plus what was added while it fits. "
                 "Otherwise the stages of the ladder run in order: older history, the latest agent loop, opening "
                 "context, the task. Within a history region, TrimState.settle softens tool results oldest first "
                 "with a graded frontier, drops the oldest units (a tool step or an older turn) only when softening "
                 "cannot fit, and compacts only when nothing droppable is left. The newest tool results stay "
                 "verbatim while older material can make the room. " * 3}],
    PROMPTS[1]: [
        _read("src/budget_hook/shapes/responses.py"), _bash("grep -rn '_pairing' src", "Find where pairing is used"),
        _read("src/budget_hook/shapes/base.py"), _read(f"{TRIM}/structure.py"),
        {"text": "Each input item becomes one view message. function_call items become assistant tool calls and "
                 "function_call_output items become tool results with the same id, so drop_units groups a call "
                 "with its outputs; built-in tools pair the same way through _pairing, and an output whose call "
                 "lives on the server is kept. " * 3}],
    PROMPTS[2]: [
        _read("src/budget_hook/counting/cache.py"), _read("src/budget_hook/counting/counter.py"),
        _bash("grep -rln 'COUNT_CACHE' src", "Find the count cache's users"),
        _bash("grep -rn count_cache_entries src docs | head -20", "Find the cache size setting"),
        _read("docs/performance.md"),
        {"text": "Counts are cached per worker by a key made of the message's role, its texts' lengths and string "
                 "hashes and the profile; the cache is a bounded LRU sized by count_cache_entries, so nothing is "
                 "invalidated explicitly: entries age out. " * 3}],
}


# --- the stand-in ----------------------------------------------------------------------------------------

def _prompt_and_step(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The latest prompt the user typed (not tool results, not reminders) and the assistant turns since."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if message.get("role") != "user" or any(b.get("type") == "tool_result" for b in blocks):
            continue
        typed = [b.get("text", "") for b in blocks if b.get("type") == "text"
                 and not b.get("text", "").startswith("<system-reminder>")]
        if typed:
            return typed[-1].strip(), sum(1 for m in messages[index + 1:] if m.get("role") == "assistant")
    return "", 0


def _events(body: dict[str, Any], item: dict[str, Any], ids: itertools.count) -> bytes:
    signature = base64.b64encode(hashlib.sha512(json.dumps(body.get("messages")).encode()).digest() * 4).decode()
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": f"msg_{next(ids):05}", "type": "message", "role": "assistant", "model": body.get("model"),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 1000, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "signature_delta", "signature": signature}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0})]
    if "text" in item:
        events += [("content_block_start", {"type": "content_block_start", "index": 1,
                                            "content_block": {"type": "text", "text": ""}}),
                   ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                            "delta": {"type": "text_delta", "text": item["text"]}})]
    else:
        events += [("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
                       "type": "tool_use", "id": f"toolu_{next(ids):05}", "name": item["tool"], "input": {}}}),
                   ("content_block_delta", {"type": "content_block_delta", "index": 1, "delta": {
                       "type": "input_json_delta", "partial_json": json.dumps(item["input"])}})]
    events += [("content_block_stop", {"type": "content_block_stop", "index": 1}),
               ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 30}, "delta": {
                   "stop_reason": "end_turn" if "text" in item else "tool_use", "stop_sequence": None}}),
               ("message_stop", {"type": "message_stop"})]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def serve(script: dict[str, list[dict[str, Any]]], received: list[tuple[str, bytes]]) -> ThreadingHTTPServer:
    lock, ids = threading.Lock(), itertools.count(1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, data: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(b'{"data": [], "has_more": false}', "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            path = self.path.split("?")[0]
            with lock:
                received.append((path, raw))
            body = json.loads(raw or b"{}")
            if path.endswith("/count_tokens"):
                self._send(json.dumps({"input_tokens": len(raw) // 4}).encode(), "application/json")
                return
            prompt, step = _prompt_and_step(body.get("messages") or [])
            steps = script.get(prompt) if body.get("tools") else None
            item = steps[step] if steps and step < len(steps) else {"text": "OK"}
            self._send(_events(body, item, ids), "text/event-stream")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# --- redaction -------------------------------------------------------------------------------------------

_WORDS = ("the", "agent", "should", "use", "tool", "file", "when", "user", "asks", "for", "a", "change", "and",
          "read", "code", "before", "editing", "it", "keep", "answers", "short", "never", "run", "commands",
          "that", "are", "not", "needed", "to", "of", "in", "with", "this", "task", "output", "each", "step")


def filler(length: int, seed: int) -> str:
    """English-like text of exactly ``length`` characters (the same for the same length and seed)."""
    rng = random.Random(length * 1_000_003 + seed)
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_WORDS) + ("." if rng.random() < 0.08 else "")
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:length]


_REMINDER = re.compile(r"^(<system-reminder>\n?)(.*?)(\n?</system-reminder>\s*)$", re.S)
#: a reminder Claude Code appends to a tool's output: the last one of the text (none opening inside it)
_TRAILING = re.compile(r"(<system-reminder>\n?)((?:(?!<system-reminder>).)*?)(\n?</system-reminder>\s*)$", re.S)


def _trailing_reminders(text: str, seed: itertools.count) -> str:
    """``text`` with the reminders appended to its end replaced by filler (the tool's own output kept)."""
    tail = ""
    while (found := _TRAILING.search(text)) is not None:
        tail = found.group(1) + filler(len(found.group(2)), next(seed)) + found.group(3) + tail
        text = text[:found.start()]
    return text + tail


def redact(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with Claude Code's own texts replaced by filler of the same length (see the module's notes)."""
    body = json.loads(json.dumps(body))
    seed = itertools.count()
    for block in body.get("system") or []:
        if isinstance(block, dict) and isinstance(block.get("text"), str) \
                and not block["text"].startswith("x-anthropic-billing-header"):
            block["text"] = filler(len(block["text"]), next(seed))

    def descriptions(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "description" and isinstance(item, str):
                    value[key] = filler(len(item), next(seed))
                else:
                    descriptions(item)
        elif isinstance(value, list):
            for item in value:
                descriptions(item)

    descriptions(body.get("tools"))
    for message in body.get("messages") or []:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            found = _REMINDER.match(block.get("text", "")) if block.get("type") == "text" else None
            if found:
                block["text"] = found.group(1) + filler(len(found.group(2)), next(seed)) + found.group(3)
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                block["content"] = _trailing_reminders(block["content"], seed)
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                for part in block["content"]:
                    if part.get("type") == "text":
                        part["text"] = _trailing_reminders(part["text"], seed)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        metadata["user_id"] = re.sub(r'("device_id":")([0-9a-f]+)', lambda m: m.group(1) + "0" * len(m.group(2)),
                                     metadata["user_id"])
    return body


# --- the run ---------------------------------------------------------------------------------------------

def record(out: Path, claude: Path, raw: bool) -> int:
    received: list[tuple[str, bytes]] = []
    with tempfile.TemporaryDirectory() as folder:
        work, home = Path(folder) / "project", Path(folder) / "home"
        work.mkdir()
        home.mkdir()
        archive = subprocess.run(["git", "archive", "HEAD", "src", "docs", "README.md"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
        script = {prompt: [{**s, "input": {**s["input"], "file_path": str(work / s["input"]["file_path"])}}
                           if s.get("tool") == "Read" else s for s in steps] for prompt, steps in SCRIPT.items()}
        server = serve(script, received)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
               "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}", "ANTHROPIC_API_KEY": "sk-test",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
               "DISABLE_TELEMETRY": "1", "IS_SANDBOX": "1"}
        try:
            for turn, prompt in enumerate(PROMPTS):
                subprocess.run([str(claude), "-p", *(["--continue"] if turn else []), "--model", "claude-sonnet-4-5",
                                "--output-format", "json", "--permission-mode", "bypassPermissions"],
                               input=prompt, capture_output=True, text=True, env=env, cwd=work, timeout=300,
                               check=True)
        finally:
            server.shutdown()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    bodies = [json.loads(data) for path, data in received if path == "/v1/messages"]
    bodies = [body for body in bodies if body.get("tools")]
    for number, body in enumerate(bodies, 1):
        (out / f"{number:04}_v1_messages.json").write_text(json.dumps(body if raw else redact(body)))
    return len(bodies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "clients" / "claude_code" / "cc_review")
    parser.add_argument("--claude", type=Path, default=CLAUDE)
    parser.add_argument("--raw", action="store_true", help="write the bodies unchanged (local study only)")
    args = parser.parse_args()
    if not args.claude.exists():
        sys.exit(f"{args.claude} not found: scripts/clients.sh installs Claude Code")
    print(f"{record(args.out, args.claude, args.raw)} requests written to {args.out}")


if __name__ == "__main__":
    main()
