"""The demo's upstream: a tiny OpenAI-compatible server that answers every request with a fixed text.

    python scripts/demo_upstream.py --port 4001

Started by ``scripts/serve.sh`` for the ``demo`` group of ``litellm_config.yaml``, so the demo works on every
endpoint the gateway budgets, streaming included, without an API key. LiteLLM's ``mock_response`` falls
short there: a streamed ``/v1/responses`` call fails, a streamed ``/v1/messages`` call answers unstreamed, and
``/embeddings`` returns text where the openai SDK expects numbers. It serves ``/v1/chat/completions``,
``/v1/completions``, ``/v1/responses`` and ``/v1/embeddings`` (JSON, or server-sent events when ``stream`` is
set); LiteLLM serves ``/v1/messages`` and Gemini's routes on top of chat completions. Nothing is called.
Stdlib only; binds 127.0.0.1; prints ``READY <port>``.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "Mock answer from the demo upstream: no provider was called."


def _tokens(body: Any) -> int:
    return max(1, len(json.dumps(body)) // 4)  # a rough figure: the gateway's own count is the exact one


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        return

    def _json(self, payload: Any, status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _events(self, events: list[tuple[str | None, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events:
            prefix = f"event: {name}\n" if name else ""
            payload = data if isinstance(data, str) else json.dumps(data)
            self.wfile.write(f"{prefix}data: {payload}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            model = {"id": "gpt-4o-mini", "object": "model", "owned_by": "demo"}
            return self._json({"object": "list", "data": [model]})
        return self._json({"error": {"message": "not found", "type": "invalid_request_error"}}, 404)

    def do_POST(self) -> None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        except ValueError:
            return self._json({"error": {"message": "invalid JSON", "type": "invalid_request_error"}}, 400)
        path, model, stream = self.path.rstrip("/"), body.get("model", "gpt-4o-mini"), bool(body.get("stream"))
        prompt, created, ident = _tokens(body), int(time.time()), uuid.uuid4().hex[:12]
        usage = {"prompt_tokens": prompt, "completion_tokens": 12, "total_tokens": prompt + 12}
        if path.endswith("/chat/completions"):
            if not stream:
                return self._json({"id": f"chatcmpl-{ident}", "object": "chat.completion", "created": created,
                                   "model": model, "usage": usage, "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": ANSWER}}]})
            base = {"id": f"chatcmpl-{ident}", "object": "chat.completion.chunk", "created": created, "model": model}
            return self._events([
                (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ANSWER},
                                             "finish_reason": None}]}),
                (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                (None, {**base, "choices": [], "usage": usage}), (None, "[DONE]")])
        if path.endswith("/completions"):
            choice = {"index": 0, "text": ANSWER, "finish_reason": "stop", "logprobs": None}
            answer = {"id": f"cmpl-{ident}", "object": "text_completion", "created": created, "model": model,
                      "choices": [choice], "usage": usage}
            return self._events([(None, answer), (None, "[DONE]")]) if stream else self._json(answer)
        if path.endswith("/embeddings"):
            inputs = body.get("input")
            count = len(inputs) if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else 1
            vectors = [{"object": "embedding", "index": i, "embedding": [0.01, 0.02, 0.03]} for i in range(count)]
            return self._json({"object": "list", "model": model, "data": vectors,
                               "usage": {"prompt_tokens": prompt, "total_tokens": prompt}})
        if path.endswith("/responses"):
            return self._responses(body, model, created, ident, prompt, stream)
        return self._json({"error": {"message": f"the demo upstream does not serve {self.path}",
                                     "type": "invalid_request_error"}}, 404)

    def _responses(self, body: Any, model: str, created: int, ident: str, prompt: int, stream: bool) -> None:
        text = {"type": "output_text", "text": ANSWER, "annotations": []}
        message = {"type": "message", "id": f"msg_{ident}", "status": "completed", "role": "assistant",
                   "content": [text]}
        usage = {"input_tokens": prompt, "output_tokens": 12, "total_tokens": prompt + 12,
                 "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}
        response = {"id": f"resp_{ident}", "object": "response", "created_at": created, "status": "completed",
                    "model": model, "output": [message], "usage": usage, "error": None, "incomplete_details": None,
                    "instructions": None, "metadata": {}, "parallel_tool_calls": True, "tool_choice": "auto",
                    "tools": [], "temperature": 1.0, "top_p": 1.0, "text": {"format": {"type": "text"}}}
        if not stream:
            return self._json(response)
        started = {**response, "status": "in_progress", "output": [], "usage": None}
        pending = {**message, "status": "in_progress", "content": []}
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "sequence_number": 0, "response": started}),
            ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": 1,
                                            "output_index": 0, "item": pending}),
            ("response.content_part.added", {"type": "response.content_part.added", "sequence_number": 2,
                                             "item_id": message["id"], "output_index": 0, "content_index": 0,
                                             "part": {**text, "text": ""}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 3,
                                            "item_id": message["id"], "output_index": 0, "content_index": 0,
                                            "delta": ANSWER, "logprobs": []}),
            ("response.output_text.done", {"type": "response.output_text.done", "sequence_number": 4,
                                           "item_id": message["id"], "output_index": 0, "content_index": 0,
                                           "text": ANSWER, "logprobs": []}),
            ("response.content_part.done", {"type": "response.content_part.done", "sequence_number": 5,
                                            "item_id": message["id"], "output_index": 0, "content_index": 0,
                                            "part": text}),
            ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": 6,
                                           "output_index": 0, "item": message}),
            ("response.completed", {"type": "response.completed", "sequence_number": 7, "response": response}),
        ]
        return self._events(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
