"""A local OpenAI-compatible upstream that behaves like a provider, for end-to-end tests (stdlib only).

    python fake_provider.py --models '{"upstream-4k": 4000}' --record payloads.jsonl

Binds 127.0.0.1 on a free port and prints ``READY <port>`` on stdout. Like a real provider it:

* lists its models with their ``context_length`` on ``GET /v1/models`` (LiteLLM discovers limits there);
* counts the prompt *independently* of budget_hook (o200k tokens of every string in the messages and
  tools, plus 4 per message: a little above OpenAI's own count, so a pass here is a real pass) and
  answers 400 ``context_length_exceeded`` with OpenAI's wording when prompt + max_tokens > window;
* rejects broken tool structure as OpenAI does (a ``tool`` message that answers no preceding
  ``tool_calls``, or a ``tool_calls`` message whose calls are not all answered);
* answers 500 when the last user message contains ``FAIL_UPSTREAM`` (to exercise failure callbacks), and
  always for a model whose name ends in ``-down`` (to exercise router fallbacks), after the window check;
* streams (SSE) when asked, with a final usage chunk;
* also serves the legacy ``/v1/completions`` (each prompt, with the ``suffix`` it is sent with, against the window),
  ``/v1/embeddings`` (each input against the window), ``/v1/responses`` (items, with
  ``function_call``/``function_call_output`` pairing, and a built-in tool's: ``custom_tool_call_output``...;
  with ``previous_response_id`` an output whose call is
  not in ``input`` is accepted, as the server holds the earlier items; streamed as the Responses API's
  events when asked) and Anthropic's ``/v1/messages`` (Anthropic's ``prompt is too long`` error,
  ``tool_use``/``tool_result`` pairing checked like the real API, and roles that must alternate: two
  ``user`` or two ``assistant`` messages in a row are a 400 ``invalid_request_error``; with ``thinking`` on, a
  turn in progress whose first assistant message does not open with its thinking block is the real API's 400).
  A Claude model whose name ends in ``-1m`` serves its window only to a request whose ``anthropic-beta`` header
  holds ``context-1m-2025-08-07``, and 200,000 tokens to any other, as Anthropic serves Claude Sonnet 4 and 4.5.
  A Claude model whose name ends in ``-calls-tools`` answers a request with tools and no ``tool_result`` yet with a
  call of its first tool (to drive a server-side tool loop: LiteLLM's MCP gateway runs the tool and calls again);
  so does any model of that name on ``/v1/responses``, with a ``function_call`` item, until the input holds an output.

* serves the providers' token-counting endpoints, counting exactly as the generate endpoint bills:
  Anthropic ``POST /v1/messages/count_tokens`` -> ``{"input_tokens": N}``, OpenAI ``POST
  /v1/responses/input_tokens`` -> ``{"object": "response.input_tokens", "input_tokens": N}``, Gemini
  ``POST /v1beta/models/{model}:countTokens`` -> ``{"totalTokens": N}``; ``--count-delay S`` makes them
  slow, ``--count-fail`` makes them answer 500; they answer 401 without the deployment's key
  (``fake-key``); ``GET /stats`` counts their calls (``count_calls``);
* ``--bill-factor F`` makes its own count F times the independent count (rounded up), everywhere it
  counts: window checks, the usage it reports, the counting endpoints (a provider whose tokenizer runs
  heavier, or lighter, than the gateway's estimate).

* ``--echo`` makes it quote client input back in its 400s, as OpenAI and Anthropic do: an unknown
  top-level key (chat: ``Unrecognized request argument supplied: <key>``; Responses: ``Unknown parameter:
  '<key>'.``; Anthropic: ``<key>: Extra inputs are not permitted``), a bad ``thinking.type``
  (``thinking.type: Input tag '<value>' found using 'type' does not match ...``) and a bad chat role
  (``Invalid value: '<role>'. Supported values are: ...``).

* ``--chains`` makes ``/v1/responses`` hold each response's conversation (its input + output tokens, by
  response id): a request naming ``previous_response_id`` is counted as that chain + its new input (the
  window checked against the sum, as OpenAI does), an unknown id is a 400 ``previous_response_not_found``.

* serves Ollama's ``/api/show`` and ``/api/generate`` (the prompt LiteLLM's ``ollama/`` renders) and Cohere's
  ``/v2/chat`` (messages, documents, tools), each counted and refused past the window in the provider's words;
* serves Gemini's ``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent`` (SSE with
  ``alt=sse``, else a JSON array), with Gemini's ``The input token count (N) exceeds the maximum number of
  tokens allowed (M).`` 400; ``/v1/responses/compact`` like ``/v1/responses`` (unstreamed); an Azure
  ``/openai/deployments/{model}/chat/completions`` whose body names no model.

Every request body it receives is appended to the ``--record`` JSONL file before any check.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import tiktoken

ENCODING = None
MODELS: dict[str, int] = {}
RECORD_PATH = ""
RECORD_LOCK = threading.Lock()
INSTANT = False  # --instant: answer at once, no counting or checks (overhead benchmarks)
BILL_FACTOR = 1.0  # --bill-factor: this provider's count is the independent count times this
COUNT_DELAY = 0.0  # --count-delay: seconds the counting endpoints wait before answering
COUNT_FAIL = False  # --count-fail: the counting endpoints answer 500
ECHO = False  # --echo: quote unknown keys and bad values back in 400s, as the real APIs do
#: --chains: ``/v1/responses`` holds each response's conversation (input + output tokens) by its id, and a
#: request naming ``previous_response_id`` is counted with the chain it continues, as OpenAI does
CHAINS: dict[str, int] | None = None
CHAINS_LOCK = threading.Lock()
_CHAT_KEYS = {"model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options", "temperature",
              "top_p", "n", "stop", "tools", "tool_choice", "parallel_tool_calls", "user", "response_format", "seed",
              "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty", "logit_bias", "reasoning_effort",
              "metadata", "store", "modalities", "audio", "prediction", "service_tier", "functions", "function_call",
              "web_search_options", "verbosity", "prompt_cache_key", "safety_identifier"}
_ANTHROPIC_KEYS = {"model", "messages", "system", "max_tokens", "stream", "temperature", "top_p", "top_k",
                   "stop_sequences", "tools", "tool_choice", "metadata", "thinking", "service_tier", "container",
                   "mcp_servers", "context_management"}
_RESPONSES_KEYS = {"model", "input", "instructions", "max_output_tokens", "stream", "tools", "tool_choice",
                   "temperature", "top_p", "previous_response_id", "store", "metadata", "reasoning", "text",
                   "truncation", "user", "include", "parallel_tool_calls", "service_tier", "background", "prompt",
                   "prompt_cache_key", "safety_identifier", "conversation", "stream_options", "max_tool_calls",
                   "top_logprobs"}


def echoed_problem(path: str, body: dict) -> str | None:
    """The 400 message a real API gives that quotes the client's own input back (``--echo``)."""
    if path.endswith("/chat/completions"):
        unknown = [k for k in body if k not in _CHAT_KEYS]
        if unknown:
            return f"Unrecognized request argument supplied: {unknown[0]}"
        for index, message in enumerate(body.get("messages") or []):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("system", "developer", "user", "assistant", "tool", "function"):
                return (f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', "
                        f"'tool', and 'developer'.")
    elif path.endswith("/messages"):
        unknown = [k for k in body if k not in _ANTHROPIC_KEYS]
        if unknown:
            return f"{unknown[0]}: Extra inputs are not permitted"
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") not in ("enabled", "disabled"):
            return (f"thinking.type: Input tag '{thinking.get('type')}' found using 'type' does not match any of "
                    f"the expected tags: 'disabled', 'enabled'")
    elif path.endswith("/embeddings"):
        unknown = [k for k in body if k not in ("model", "input", "encoding_format", "dimensions", "user")]
        if unknown:
            return f"Unrecognized request argument supplied: {unknown[0]}"
    elif path.endswith("/responses"):
        unknown = [k for k in body if k not in _RESPONSES_KEYS]
        if unknown:
            return f"Unknown parameter: '{unknown[0]}'."
    return None
STATS: dict[str, int] = {"requests": 0, "accepted": 0, "rejected_window": 0, "rejected_structure": 0,
                         "count_calls": 0}


def billed(tokens: int) -> int:
    return tokens if BILL_FACTOR == 1.0 else math.ceil(tokens * BILL_FACTOR)


def _stat(name: str) -> None:
    with RECORD_LOCK:
        STATS[name] = STATS.get(name, 0) + 1


def _strings(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def count_prompt(body: dict) -> int:
    texts: list[str] = []
    _strings(body.get("messages"), texts)
    _strings(body.get("tools"), texts)
    tokens = sum(len(ENCODING.encode_ordinary(text)) for text in texts)
    return billed(tokens + 4 * len(body.get("messages") or []) + 3)


def structure_error(messages: list) -> str | None:
    pending: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (f"Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                        f"with 'tool_calls'. (messages[{index}], tool_call_id {call_id!r})")
            pending.discard(call_id)
            continue
        if pending:
            return (f"An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. The following tool_call_ids did not have response messages: "
                    f"{', '.join(sorted(pending))}")
        if role == "assistant":
            pending = {call.get("id") for call in message.get("tool_calls") or []}
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        return

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None, param: str | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/stats"):
            with RECORD_LOCK:
                return self._send(200, dict(STATS))
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": name, "object": "model", "owned_by": "fake", "context_length": window}
                    for name, window in MODELS.items()]
            self._send(200, {"object": "list", "data": data})
        else:
            self._error(404, "not found", None)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.", None)
        _stat("requests")
        if RECORD_PATH:
            with RECORD_LOCK, open(RECORD_PATH, "a", encoding="utf-8") as record:
                beta = {"anthropic_beta": self.headers["anthropic-beta"]} if "anthropic-beta" in self.headers else {}
                record.write(json.dumps({"path": self.path, "body": body, "time": time.time(), **beta}) + "\n")
        path = self.path.split("?", 1)[0].rstrip("/")  # routed by path; Gemini and Azure send a query
        if path.endswith(("/messages/count_tokens", "/responses/input_tokens", ":countTokens")):
            return self._count_tokens(path, body)
        problem = echoed_problem(path, body) if ECHO else None
        if problem and path.endswith("/messages"):
            return self._send(400, {"type": "error", "error": {"type": "invalid_request_error", "message": problem}})
        if problem:
            return self._error(400, problem, None)
        if INSTANT:
            _stat("accepted")
            usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
            return self._send(200, {"id": "chatcmpl-instant", "object": "chat.completion", "created": int(time.time()),
                                    "model": body.get("model"), "usage": usage, "choices": [{"index": 0,
                                    "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]})
        if path.endswith("/messages"):
            return self._anthropic(body)
        if path.endswith("/embeddings"):
            return self._embeddings(body)
        if path.endswith("/completions") and not path.endswith("/chat/completions"):
            return self._completions(body)
        if path.endswith("/responses"):
            return self._responses(body)
        if path.endswith("/responses/compact"):  # a compaction pass: checked like a turn, answered unstreamed
            return self._responses({**body, "stream": False})
        if path.endswith((":generateContent", ":streamGenerateContent")):
            return self._gemini(path, body)
        if path.endswith(("/api/show", "/api/generate")):
            return self._ollama(path, body)
        if path.endswith("/v2/chat"):
            return self._cohere(body)
        if not path.endswith("/chat/completions"):
            return self._error(404, f"fake provider serves chat completions only, not {self.path}", None)
        model = body.get("model") or path.partition("/deployments/")[2].split("/")[0]  # Azure: in the path
        if model not in MODELS:
            return self._error(404, f"The model `{model}` does not exist.", "model_not_found")
        messages = body.get("messages") or []
        problem = structure_error(messages)
        if problem:
            _stat("rejected_structure")
            return self._error(400, problem, None, "messages")
        window = MODELS[model]
        prompt = count_prompt(body)
        completion_reserve = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if not isinstance(completion_reserve, int) or isinstance(completion_reserve, bool):
            # as OpenAI answers it (LiteLLM 1.108 forwards a Gemini route's string maxOutputTokens as it came)
            return self._error(400, f"Invalid type for 'max_tokens': expected an integer, but got "
                                    f"{type(completion_reserve).__name__} instead.", "invalid_type", "max_tokens")
        if prompt + completion_reserve > window:
            _stat("rejected_window")
            # a model named ``...-says-2k`` misreports its window in the error (an upstream that lies)
            stated = int(model.split("-says-")[1].rstrip("k")) * 1000 if "-says-" in model else window
            return self._error(
                400,
                f"This model's maximum context length is {stated} tokens. However, you requested "
                f"{prompt + completion_reserve} tokens ({prompt} in the messages, {completion_reserve} in the "
                f"completion). Please reduce the length of the messages or completion.",
                "context_length_exceeded",
                "messages",
            )
        last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        if "FAIL_UPSTREAM" in json.dumps(last_user.get("content")) or str(model).endswith("-down"):
            return self._error(500, "The server had an error while processing your request.", "server_error")
        _stat("accepted")
        answer = f"ok: {len(messages)} messages, {prompt} prompt tokens"
        usage = {"prompt_tokens": prompt, "completion_tokens": 8, "total_tokens": prompt + 8}
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            base = {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
            chunks = [
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": answer[:10]}, "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {"content": answer[10:]}, "finish_reason": None}]},
                {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {**base, "choices": [], "usage": usage},
            ]
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True
            return None
        self._send(200, {
            "id": completion_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": usage,
        })


def _anthropic_problems(messages: list) -> str | None:
    if not messages or messages[0].get("role") != "user":
        return "messages: first message must use the \"user\" role"
    for previous, message in itertools.pairwise(messages):
        if previous.get("role") == message.get("role"):
            return (f"messages: roles must alternate between \"user\" and \"assistant\", but found multiple "
                    f"\"{message.get('role')}\" roles in a row")
    previous_uses: set = set()
    for index, message in enumerate(messages):
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        results = {b.get("tool_use_id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"}
        unexpected = results - previous_uses
        if unexpected:
            return (f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{', '.join(sorted(map(str, unexpected)))}. Each `tool_result` block must have a corresponding "
                    f"`tool_use` block in the previous message.")
        if previous_uses - results:
            return (f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(sorted(map(str, previous_uses - results)))}. Each `tool_use` block must have a "
                    f"corresponding `tool_result` block in the next message.")
        previous_uses = {b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
    return None


def _thinking_problem(body: dict) -> str | None:
    """With ``thinking`` on, the turn in progress (from the last user message that is not only tool results) must
    open with a thinking block, as Claude wrote it: the real API's own error otherwise."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return None
    messages = body.get("messages") or []
    start = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user" and not (
        isinstance(messages[i].get("content"), list) and messages[i]["content"] and all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in messages[i]["content"]))), 0)
    opening = next((i for i in range(start, len(messages)) if messages[i].get("role") == "assistant"), None)
    content = messages[opening].get("content") if opening is not None else None
    first = content[0] if isinstance(content, list) and content else {"type": "text"}
    if opening is None or first.get("type") in ("thinking", "redacted_thinking"):
        return None
    return (f"messages.{opening}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
            "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
            "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our "
            "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def _count_strings(*values) -> int:
    texts: list[str] = []
    for value in values:
        _strings(value, texts)
    return sum(len(ENCODING.encode_ordinary(text)) for text in texts)


def anthropic_prompt(body: dict) -> int:
    messages = body.get("messages") or []
    return billed(_count_strings(body.get("system"), messages, body.get("tools")) + 4 * len(messages))


def responses_prompt(body: dict) -> int:
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    return billed(_count_strings(body.get("instructions"), items, body.get("tools")) + 4 * len(items))


def gemini_prompt(body: dict) -> int:
    request = body.get("generateContentRequest") if isinstance(body.get("generateContentRequest"), dict) else body
    contents = request.get("contents") or []
    return billed(_count_strings(contents, request.get("systemInstruction") or request.get("system_instruction"),
                                 request.get("tools")) + 4 * len(contents))


def _count_tokens(self, path: str, body: dict) -> None:
    _stat("count_calls")
    key = (self.headers.get("x-api-key") or self.headers.get("x-goog-api-key")
           or (self.headers.get("authorization") or "").removeprefix("Bearer "))
    if key != "fake-key":  # the deployment's own credentials, as the real APIs require
        return self._error(401, "invalid x-api-key", "invalid_api_key")
    if COUNT_DELAY:
        time.sleep(COUNT_DELAY)
    if COUNT_FAIL:
        return self._error(500, "The server had an error while counting tokens.", "server_error")
    if path.endswith(":countTokens"):
        model = path.rsplit("/", 1)[-1].removesuffix(":countTokens")
        if model not in MODELS:
            return self._send(404, {"error": {"code": 404, "message": f"models/{model} is not found",
                                              "status": "NOT_FOUND"}})
        return self._send(200, {"totalTokens": gemini_prompt(body)})
    model = body.get("model")
    if path.endswith("/messages/count_tokens"):
        if model not in MODELS:
            return self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"model: {model}"}})
        return self._send(200, {"input_tokens": anthropic_prompt(body)})
    if model not in MODELS:
        return self._error(404, f"The model `{model}` does not exist.", "model_not_found")
    return self._send(200, {"object": "response.input_tokens", "input_tokens": responses_prompt(body)})


def _anthropic(self, body: dict) -> None:
    def error(status: int, kind: str, message: str) -> None:
        self._send(status, {"type": "error", "error": {"type": kind, "message": message}})
    model = body.get("model")
    if model not in MODELS:
        return error(404, "not_found_error", f"model: {model}")
    messages = body.get("messages") or []
    problem = _anthropic_problems(messages) or _thinking_problem(body)
    if problem:
        return error(400, "invalid_request_error", problem)
    prompt = anthropic_prompt(body)
    window = MODELS[model]
    betas = [item.strip() for item in (self.headers.get("anthropic-beta") or "").split(",")]
    if model.endswith("-1m") and "context-1m-2025-08-07" not in betas:
        window = min(window, 200_000)  # the long window needs the beta header
    max_tokens = int(body.get("max_tokens") or 0)
    if prompt > window:
        return error(400, "invalid_request_error", f"prompt is too long: {prompt} tokens > {window} maximum")
    if prompt + max_tokens > window:
        return error(400, "invalid_request_error",
                     f"input length and `max_tokens` exceed context limit: {prompt} + {max_tokens} > {window}, "
                     f"decrease input length or `max_tokens` and try again")
    message_id = f"msg_{uuid.uuid4().hex[:12]}"
    text = f"ok: {len(messages)} messages, {prompt} input tokens"
    usage = {"input_tokens": prompt, "output_tokens": 8}
    answered = any(isinstance(b, dict) and b.get("type") == "tool_result" for m in messages if isinstance(m, dict)
                   for b in (m.get("content") if isinstance(m.get("content"), list) else []))
    if model.endswith("-calls-tools") and body.get("tools") and not answered and not body.get("stream"):
        call = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}", "name": body["tools"][0]["name"], "input": {}}
        return self._send(200, {"id": message_id, "type": "message", "role": "assistant", "model": model,
                                 "content": [call], "stop_reason": "tool_use", "stop_sequence": None, "usage": usage})
    if body.get("stream"):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        events = [
            ("message_start", {"type": "message_start", "message": {"id": message_id, "type": "message", "role": "assistant",
              "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
              "usage": {"input_tokens": prompt, "output_tokens": 1}}}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
              "usage": {"output_tokens": 8}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True
        return None
    self._send(200, {"id": message_id, "type": "message", "role": "assistant", "model": model,
                     "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                     "usage": usage})
    return None


def _embeddings(self, body: dict) -> None:
    model = body.get("model")
    if model not in MODELS:
        return self._error(404, f"The model `{model}` does not exist.", "model_not_found")
    value = body.get("input")
    items = [value] if isinstance(value, str) or (isinstance(value, list) and value and isinstance(value[0], int)) else value
    window = MODELS[model]
    counts = [billed(len(item) if isinstance(item, list) else len(ENCODING.encode_ordinary(item))) for item in items]
    for count in counts:
        if count > window:
            return self._error(400, f"This model's maximum context length is {window} tokens, however you requested "
                               f"{count} tokens ({count} in your prompt; 0 for the completion). Please reduce your "
                               f"prompt; or completion length.", "context_length_exceeded", "input")
    data = [{"object": "embedding", "index": i, "embedding": [0.01, 0.02, 0.03]} for i in range(len(items))]
    self._send(200, {"object": "list", "data": data, "model": model,
                     "usage": {"prompt_tokens": sum(counts), "total_tokens": sum(counts)}})
    return None


def _completions(self, body: dict) -> None:
    """OpenAI's legacy completions: each prompt is its own request, read with the ``suffix`` (the insertion's far
    side) and the completion's allowance against the window."""
    model = body.get("model")
    if model not in MODELS:
        return self._error(404, f"The model `{model}` does not exist.", "model_not_found")
    value = body.get("prompt")
    prompts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    reserve = body.get("max_tokens") or 16
    window = MODELS[model]
    counts = [billed(_count_strings(prompt, body.get("suffix"))) for prompt in prompts]
    for count in counts:
        if count + reserve > window:
            _stat("rejected_window")
            return self._error(400, f"This model's maximum context length is {window} tokens, however you requested "
                               f"{count + reserve} tokens ({count} in your prompt; {reserve} for the completion). "
                               f"Please reduce your prompt; or completion length.", "context_length_exceeded", "prompt")
    _stat("accepted")
    choices = [{"text": " ok", "index": i, "logprobs": None, "finish_reason": "stop"} for i in range(len(prompts))]
    self._send(200, {"id": f"cmpl-{uuid.uuid4().hex[:12]}", "object": "text_completion", "created": int(time.time()),
                     "model": model, "choices": choices, "usage": {"prompt_tokens": sum(counts), "completion_tokens": 1,
                                                                    "total_tokens": sum(counts) + 1}})
    return None


def _responses(self, body: dict) -> None:
    model = body.get("model")
    if model not in MODELS:
        return self._error(404, f"The model `{model}` does not exist.", "model_not_found")
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    # an output (function_call_output, or a built-in tool's: custom_tool_call_output, local_shell_call_output...)
    # needs its call of the same tool in the input
    calls = {(item.get("type"), item.get("call_id")) for item in items if isinstance(item, dict)}
    server_side = bool(body.get("previous_response_id"))  # earlier items, calls included, live on the server
    for index, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if (isinstance(kind, str) and kind.endswith("_call_output") and "call_id" in item and not server_side
                and (kind[:-len("_output")], item.get("call_id")) not in calls):
            return self._error(400, f"No tool call found for {kind[:-len('_output')].replace('_', ' ')} output with "
                               f"call_id {item.get('call_id')}.", None, f"input[{index}]")
    prompt = responses_prompt(body)
    if CHAINS is not None and body.get("previous_response_id"):
        with CHAINS_LOCK:
            held = CHAINS.get(str(body["previous_response_id"]))
        if held is None:
            return self._error(400, f"Previous response with id '{body['previous_response_id']}' not found.",
                               "previous_response_not_found", "previous_response_id")
        prompt += held
    window = MODELS[model]
    reserve = int(body.get("max_output_tokens") or 0)
    if prompt + reserve > window:
        return self._error(400, f"Your input exceeds the context window of this model. ({prompt} + {reserve} > {window})",
                           "context_length_exceeded", "input")
    if str(model).endswith("-down"):
        return self._error(500, "The server had an error while processing your request.", "server_error")
    now = int(time.time())
    text = f"ok: {len(items)} items, {prompt} input tokens"
    message = {"type": "message", "id": f"msg_{uuid.uuid4().hex[:8]}", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    functions = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"]
    if model.endswith("-calls-tools") and functions and not any(kind and kind.endswith("_call_output") for kind, _ in calls):
        message = {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:8]}", "call_id": f"call_{uuid.uuid4().hex[:8]}",
                   "name": functions[0]["name"], "arguments": "{}", "status": "completed"}
    response = {
        "id": f"resp_{uuid.uuid4().hex[:12]}", "object": "response", "created_at": now, "status": "completed",
        "model": model, "output": [message],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
        "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": prompt, "output_tokens": 8, "total_tokens": prompt + 8,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }
    if CHAINS is not None:
        with CHAINS_LOCK:
            CHAINS[response["id"]] = prompt + 8
    if body.get("stream"):
        return _stream_response(self, response, message, text)
    self._send(200, response)
    return None


def _stream_response(self, response: dict, message: dict, text: str) -> None:
    """The Responses API's event stream for a one-message answer, as OpenAI sends it."""
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    part = {"type": "output_text", "text": "", "annotations": []}
    ids = {"item_id": message["id"], "output_index": 0}
    text_events = [
        ("response.content_part.added", {**ids, "content_index": 0, "part": part}),
        ("response.output_text.delta", {**ids, "content_index": 0, "delta": text}),
        ("response.output_text.done", {**ids, "content_index": 0, "text": text}),
        ("response.content_part.done", {**ids, "content_index": 0, "part": {**part, "text": text}}),
    ] if message["type"] == "message" else []  # a function call: the item alone
    events = [
        ("response.created", {"response": started}),
        ("response.in_progress", {"response": started}),
        ("response.output_item.added", {"output_index": 0, "item": {**message, "status": "in_progress",
                                                                     **({"content": []} if text_events else {})}}),
        *text_events,
        ("response.output_item.done", {"output_index": 0, "item": message}),
        ("response.completed", {"response": response}),
    ]
    self.send_response(200)
    self.send_header("content-type", "text/event-stream")
    self.send_header("connection", "close")
    self.end_headers()
    for number, (kind, data) in enumerate(events):
        self.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': number, **data})}\n\n".encode())
    self.wfile.flush()
    self.close_connection = True


def _gemini(self, path: str, body: dict) -> None:
    """Gemini's generateContent: the model from the path, its input checked against the window."""
    model = path.rsplit("/", 1)[-1].split(":")[0]
    if model not in MODELS:
        return self._send(404, {"error": {"code": 404, "message": f"models/{model} is not found", "status": "NOT_FOUND"}})
    prompt, window = gemini_prompt(body), MODELS[model]
    reserve = int((body.get("generationConfig") or {}).get("maxOutputTokens") or 0)
    if prompt + reserve > window:
        _stat("rejected_window")
        return self._send(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": (
            f"The input token count ({prompt}) exceeds the maximum number of tokens allowed ({window}).")}})
    _stat("accepted")
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": f"ok: {prompt} input tokens"}]},
                              "finishReason": "STOP", "index": 0}], "modelVersion": model,
              "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": 8, "totalTokenCount": prompt + 8}}
    if not path.endswith(":streamGenerateContent"):
        return self._send(200, answer)
    sse = "alt=sse" in self.path
    self.send_response(200)
    self.send_header("content-type", "text/event-stream" if sse else "application/json")
    self.send_header("connection", "close")
    self.end_headers()
    self.wfile.write((f"data: {json.dumps(answer)}\n\n" if sse else json.dumps([answer])).encode())
    self.wfile.flush()
    self.close_connection = True
    return None


def _ollama(self, path: str, body: dict) -> None:
    """Ollama's ``/api/show`` (the model's context length) and ``/api/generate`` (the prompt LiteLLM's ``ollama/``
    renders: every string it carries counted, refused past the window)."""
    model = str(body.get("model") or body.get("name") or "")
    if model not in MODELS:
        return self._send(404, {"error": f"model '{model}' not found"})
    if path.endswith("/api/show"):
        return self._send(200, {"template": "{{ .Prompt }}", "details": {},
                                "model_info": {"llama.context_length": MODELS[model]}})
    prompt = billed(_count_strings(body.get("prompt"), body.get("system")))
    reserve = int((body.get("options") or {}).get("num_predict") or 0)
    if prompt + reserve > MODELS[model]:
        _stat("rejected_window")
        return self._send(400, {"error": f"the input length exceeds the context length ({prompt} > {MODELS[model]})"})
    _stat("accepted")
    return self._send(200, {"model": model, "created_at": "2026-01-01T00:00:00Z", "response": f"ok: {prompt} tokens",
                            "done": True, "done_reason": "stop", "prompt_eval_count": prompt, "eval_count": 8})


def _cohere(self, body: dict) -> None:
    """Cohere's ``/v2/chat``: messages, documents and tools counted, refused past the window."""
    model = str(body.get("model") or "")
    if model not in MODELS:
        return self._send(404, {"message": f"model '{model}' not found"})
    prompt = billed(_count_strings(body.get("messages"), body.get("documents"), body.get("tools")))
    if prompt > MODELS[model]:
        _stat("rejected_window")
        return self._send(400, {"message": f"too many tokens: total number of tokens in the prompt cannot exceed "
                                           f"{MODELS[model]} - received {prompt}. Try using a shorter prompt"})
    _stat("accepted")
    return self._send(200, {"id": uuid.uuid4().hex, "finish_reason": "COMPLETE", "message": {
        "role": "assistant", "content": [{"type": "text", "text": f"ok: {prompt} input tokens"}]},
        "usage": {"billed_units": {"input_tokens": prompt, "output_tokens": 8},
                  "tokens": {"input_tokens": prompt, "output_tokens": 8}}})


Handler._ollama = _ollama
Handler._cohere = _cohere
Handler._anthropic = _anthropic
Handler._count_tokens = _count_tokens
Handler._embeddings = _embeddings
Handler._completions = _completions
Handler._responses = _responses
Handler._gemini = _gemini


def main() -> None:
    global ENCODING, MODELS, RECORD_PATH, INSTANT, BILL_FACTOR, COUNT_DELAY, COUNT_FAIL, ECHO, CHAINS
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", required=True, help='JSON object {"model id": context window}')
    parser.add_argument("--record", default="", help="append every request body to this JSONL file")
    parser.add_argument("--instant", action="store_true", help="answer at once without counting or checks")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bill-factor", type=float, default=1.0, help="its count is the independent count x this")
    parser.add_argument("--count-delay", type=float, default=0.0, help="seconds the counting endpoints wait")
    parser.add_argument("--count-fail", action="store_true", help="the counting endpoints answer 500")
    parser.add_argument("--echo", action="store_true", help="quote unknown keys and bad values back in 400s")
    parser.add_argument("--chains", action="store_true",
                        help="/v1/responses keeps each response's conversation and counts previous_response_id's")
    args = parser.parse_args()
    ECHO = args.echo
    CHAINS = {} if args.chains else None
    BILL_FACTOR, COUNT_DELAY, COUNT_FAIL = args.bill_factor, args.count_delay, args.count_fail
    MODELS = json.loads(args.models)
    RECORD_PATH = args.record
    INSTANT = args.instant
    if not os.environ.get("TIKTOKEN_CACHE_DIR"):
        sys.exit("fake_provider: set TIKTOKEN_CACHE_DIR to litellm's vendored tokenizers (offline)")
    ENCODING = tiktoken.get_encoding("o200k_base")
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
