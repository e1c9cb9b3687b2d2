"""Work a client can force onto the gateway, through a real proxy: PDF bombs and 48 KB model names get a
clean answer (a 4xx, or the decision they deserve; never a 5xx), and while a costly request is decided
other clients are still answered.

No wall-clock thresholds: the concurrency test asserts an order (small requests answered before the
costly one), the memory test a bound on the proxy's resident memory.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import zlib

import httpx
import pytest

from .harness import rss_kib, wait_for_record
from .test_proxy_e2e import chat, payloads_for

pytestmark = pytest.mark.e2e


def pdf_part(raw: bytes) -> dict:
    return {"type": "file", "file": {"file_data": "data:application/pdf;base64," + base64.b64encode(raw).decode()}}


def flate_pdf(payload: bytes, streams: int = 1, packed: bytes | None = None) -> bytes:
    packed = packed or zlib.compress(payload, 9)
    return b"%PDF-1.5\n" + (b"1 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode >>\nstream\n" + packed
                            + b"\nendstream\nendobj\n") * streams + b"%%EOF"


BOMBS = {
    "count": flate_pdf(b"/Count 1 " * ((4 << 20) // 9)),  # the reported 10 KB PDF: 8.2 s of proxy CPU
    "pages": flate_pdf(b"/Type/Page " * ((64 << 20) // 11)),  # the reported +411 MiB
}


@pytest.mark.parametrize("bomb", BOMBS)
def test_a_pdf_bomb_is_refused_cleanly_and_costs_the_proxy_little_memory(proxy, upstream, bomb):
    marker = f"e2e-cpu-bomb-{bomb}"
    before = rss_kib(proxy.pid)
    body = {"model": "small", "messages": [{"role": "user", "content": [{"type": "text", "text": f"summarise [{marker}]"},
                                                                         pdf_part(BOMBS[bomb])]}]}
    response = chat(proxy, body)
    after = rss_kib(proxy.pid)
    # counted conservatively: the /Count bomb's pages cannot be counted within the bounds (10,000 tokens at
    # least), the other's pages found within them are far more than the 4k window
    assert response.status_code == 400, response.text
    assert "context_length_exceeded" in json.dumps(response.json()) and payloads_for(upstream, marker) == []
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "blocked"
    assert after["VmHWM"] - before["VmHWM"] < 128 * 1024  # KiB: the bound is 8 MiB inflated, one stream held


@pytest.mark.parametrize("model", ["-v1" * 16000 + "x/gpt-4.1", "wild/" + "-v1" * 16000 + "x/gpt-4.1",
                                   "us." * 16000 + "anthropic.claude-sonnet-4", "small," * 40 + "small"])
def test_a_huge_model_name_gets_a_clean_400_that_does_not_echo_it(proxy, upstream, model):
    """No group has such a name (over 256 characters, or a list of more than 16): refused by the plugin before
    anything reads it. (Left to LiteLLM, its answer for a name it does not serve runs its error-message
    redaction over the name, in quadratic time: over a minute for this one, on the event loop.)"""
    response = chat(proxy, {"model": model, "messages": [{"role": "user", "content": "hi [e2e-cpu-model]"}]})
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert "invalid_model_name" in json.dumps(error) and model[:40] not in response.text
    assert payloads_for(upstream, "e2e-cpu-model") == []
    small = chat(proxy, {"model": "small", "messages": [{"role": "user", "content": "hi [e2e-cpu-after-model]"}]})
    assert small.status_code == 200, small.text


def test_text_a_tokenizer_cannot_read_whole_is_still_answered_cleanly(proxy, upstream):
    """A million spaces made tiktoken's o200k_base panic: the proxy answered a bare 500."""
    response = chat(proxy, {"model": "small", "messages": [{"role": "user", "content": " " * (1 << 20) + "[e2e-cpu-spaces]"}]})
    assert response.status_code == 400 and "context_length_exceeded" in response.text, response.text[:300]
    assert payloads_for(upstream, "e2e-cpu-spaces") == []


def _post_raw(port: int, body: bytes) -> socket.socket:
    """Send a whole chat request on a raw socket; returns once every byte is handed to the kernel."""
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer sk-default\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=300)
    sock.sendall(head + body)
    return sock


def _status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    while sock.recv(65536):
        pass
    sock.close()
    return int(data.split(b" ", 2)[1])


def test_small_requests_are_answered_while_a_costly_request_is_decided(proxy, upstream):
    """A request of 150 distinct PDF bombs (each inflated to its bound, about 700 KiB) is decided in the
    thread pool: small requests sent after it, one after the other, are answered before it is. (Decided on
    the event loop, as before, none would be: the loop would be busy with it.)"""
    packed = zlib.compress(b"/Type/Page " * 250_000, 9)
    costly = json.dumps({"model": "small", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "summarise [e2e-cpu-costly]"},
        *[pdf_part(flate_pdf(b"", streams=16, packed=packed) + b"%% part %d" % i) for i in range(150)]]}]}).encode()
    order: list[str] = []
    lock = threading.Lock()
    statuses: dict[str, int] = {}
    sock = _post_raw(proxy.port, costly)

    def costly_answer() -> None:
        statuses["costly"] = _status(sock)
        with lock:
            order.append("costly")
    waiter = threading.Thread(target=costly_answer)
    waiter.start()
    small = 0
    with httpx.Client(base_url=proxy.base_url, timeout=60, headers={"authorization": "Bearer sk-default"}) as client:
        while waiter.is_alive() and small < 400:
            response = client.post("/v1/chat/completions", json={
                "model": "small", "messages": [{"role": "user", "content": f"hi [e2e-cpu-small-{small}]"}]})
            statuses[f"small-{small}"] = response.status_code
            with lock:
                order.append("small")
            small += 1
    waiter.join(timeout=300)
    assert statuses.pop("costly") == 400  # its pages are far more than the window: refused, never a 5xx
    assert set(statuses.values()) == {200}
    answered_first = order.index("costly")
    assert answered_first >= 3, f"only {answered_first} small requests were answered while the costly one was decided"
