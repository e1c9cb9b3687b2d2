"""End to end: what one proxy learns from the provider, a second proxy uses; the provider's own counter.

Real processes, all on 127.0.0.1 and stopped by their PID: a Redis server (Debian's ``redis-server``),
two fake providers (``fake_provider.py``: one bills 1.3x what it counts, as a provider whose tokenizer
runs heavier than our estimate; one serves the token-counting endpoints), and two litellm proxies with
budget_hook and the *same* config, whose ``router_settings`` point LiteLLM at that Redis. What it proves:

* a correction learned from the bills the first proxy saw (``prompt_tokens`` over our estimate) is used
  by the second, which then trims a request the provider would have refused, and says so in its record;
* a window learned from the provider's overflow error on the first proxy (the config claims 16,000, the
  provider serves 4,000) makes the second proxy refuse the same request itself;
* ``provider_count: near_budget``: a /v1/messages request whose estimate is just over the budget is
  counted by the provider's ``count_tokens`` (once: a resend is served from the cache), fits, and is
  forwarded untouched; a counter slower than the timeout leaves the estimate's decision, noted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from budget_hook.budget import compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.shapes.anthropic import count_anthropic

from .conftest import write_config
from .harness import (
    Process,
    free_port,
    model_entry,
    start_fake_provider,
    start_proxy,
    upstream_payloads,
    wait_for_record,
)

pytestmark = pytest.mark.e2e

REDIS_SERVER = shutil.which("redis-server")
CLAUDE = TokenCounter.for_model("anthropic/claude-sonnet-4-5")


def start_redis(folder: Path) -> subprocess.Popen:
    port = free_port()
    log = (folder / "redis.log").open("w")
    popen = subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--protected-mode", "yes"],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    popen.port = port  # type: ignore[attr-defined]
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if client.ping():
                return popen
        except redis.ConnectionError:
            time.sleep(0.1)
    popen.kill()
    raise RuntimeError("redis-server did not start")


def stop(popen: subprocess.Popen) -> None:
    if popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            popen.kill()


def config(heavy: Process, counting: Process, slow: Process, redis_port: int) -> dict:
    heavy_base, counting_base = f"http://127.0.0.1:{heavy.port}/v1", f"http://127.0.0.1:{counting.port}"
    claude = "anthropic/claude-sonnet-4-5-4k"
    return {
        "model_list": [model_entry("learn", "openai/gpt-4o-8k", heavy_base, 8000, model_id="learn-dep"),
                       # the config claims more than the provider serves (4,000)
                       model_entry("liar", "openai/gpt-4o-4k", heavy_base, 16000, model_id="liar-dep"),
                       model_entry("claude-count", claude, counting_base, 4000, model_id="claude-count-dep"),
                       model_entry("claude-slow", claude, f"http://127.0.0.1:{slow.port}", 4000,
                                   model_id="claude-slow-dep"),
                       model_entry("responses-count", "openai/gpt-4o-4k", f"{counting_base}/v1", 4000,
                                   model_id="responses-count-dep"),
                       model_entry("gemini-count", "gemini/gemini-2.5-flash-4k", counting_base, 4000,
                                   model_id="gemini-count-dep")],
        "router_settings": {"redis_host": "127.0.0.1", "redis_port": redis_port},
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {
            "mode": "enforce",
            "learning": {"min_samples": 3, "sync_seconds": 0},
            "models": {"claude-count": {"provider_count": "near_budget"},
                       "responses-count": {"provider_count": "near_budget"},
                       "gemini-count": {"provider_count": "near_budget"},
                       "claude-slow": {"provider_count": "near_budget", "provider_count_timeout_ms": 300}},
        }},
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth"},
    }


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    if REDIS_SERVER is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed: CI must run the shared-learning tests")
        pytest.skip("redis-server is not installed (scripts/test.sh installs Debian's redis-server)")
    folder = tmp_path_factory.mktemp("learning")
    for name in ("heavy", "counting", "slow", "proxy"):
        (folder / name).mkdir()
    started: list = []
    try:
        redis_server = start_redis(folder)
        started.append(redis_server)
        heavy = start_fake_provider(folder / "heavy", {"gpt-4o-8k": 8000, "gpt-4o-4k": 4000},
                                    flags=["--bill-factor", "1.3"])
        started.append(heavy)
        counting = start_fake_provider(folder / "counting", {"claude-sonnet-4-5-4k": 4000, "gpt-4o-4k": 4000,
                                                             "gemini-2.5-flash-4k": 4000})
        started.append(counting)
        slow = start_fake_provider(folder / "slow", {"claude-sonnet-4-5-4k": 4000}, flags=["--count-delay", "2"])
        started.append(slow)
        path = write_config(folder / "proxy", config(heavy, counting, slow, redis_server.port))
        first = start_proxy(path, log_dir=folder / "proxy")
        started.append(first)
        second = start_proxy(path, log_dir=folder / "proxy")
        started.append(second)
        yield {"redis": redis_server, "heavy": heavy, "counting": counting, "slow": slow, "first": first,
               "second": second}
    finally:
        for process in reversed(started):
            process.stop() if isinstance(process, Process) else stop(process)


def chat(proxy: Process, group: str, words: int, *, turns: int = 1, tag: str = "") -> httpx.Response:
    messages = []
    for turn in range(turns):
        messages += [{"role": "user", "content": f"{tag} question {turn}: " + "lorem ipsum " * (words // turns // 2)},
                     {"role": "assistant", "content": f"answer {turn}"}]
    # turns=0: the words are the last question itself, which the gateway never cuts
    messages.append({"role": "user", "content": f"{tag} the last question" + ("" if turns else " lorem ipsum" * (words // 2))})
    return httpx.post(f"{proxy.base_url}/chat/completions", timeout=60,
                      headers={"authorization": "Bearer sk-default"},
                      json={"model": group, "max_tokens": 300, "messages": messages})


def test_a_correction_learned_on_one_proxy_is_used_by_the_other(servers):
    first, second = servers["first"], servers["second"]
    for index in range(4):  # the provider bills 1.3x what budget_hook estimates
        response = chat(first, "learn", 1000, tag=f"warm-{index}")
        assert response.status_code == 200, response.text
        record = wait_for_record(first, response.headers["x-litellm-call-id"])
        assert record["learned"]["deployment"] == "learn-dep"
        assert 1.25 <= record["learned"]["ratio"] <= 1.35, record["learned"]
    shared = redis.Redis(host="127.0.0.1", port=servers["redis"].port)
    from budget_hook.proxy.shared import _teachers

    assert sum(map(len, _teachers(shared.hgetall("budget_hook:v1:teacher_ratios:learn-dep")).values())) == 4

    # ~6,000 estimated tokens in 6 turns: fits 8,000 by the estimate, not by the provider's count (x1.3)
    response = chat(second, "learn", 6000, turns=6, tag="big")
    assert response.status_code == 200, response.text  # the provider accepted what the second proxy sent
    assert "learned x1.3" in response.headers["x-budget-count-method"]
    assert response.headers["x-budget-decision"] == "trimmed"
    record = wait_for_record(second, response.headers["x-litellm-call-id"])
    learned = record["decision"]["count"]["learned"]
    assert learned["deployment"] == "learn-dep" and learned["samples"] >= 4 and 1.25 <= learned["factor"] <= 1.35
    assert record["provider_prompt_tokens"] <= 8000 - 300


def test_without_the_correction_the_provider_refuses_that_request(servers):
    """The control: the same request straight to the provider (no gateway) is over its window."""
    heavy = servers["heavy"]
    messages = [{"role": "user", "content": "lorem ipsum " * 500} for _ in range(6)]
    response = httpx.post(f"http://127.0.0.1:{heavy.port}/v1/chat/completions", timeout=30,
                          json={"model": "gpt-4o-8k", "max_tokens": 300, "messages": messages})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"


def test_a_window_learned_from_an_overflow_error_is_used_by_the_other_proxy(servers):
    first, second = servers["first"], servers["second"]
    response = chat(first, "liar", 5000, turns=0, tag="liar-1")
    assert response.status_code == 400  # the provider's own refusal: the config claimed 16,000
    record = wait_for_record(first, response.headers.get("x-litellm-call-id") or _last_call(first))
    assert record["outcome"] == "failure" and record["learned"]["window"] == 4000
    response = chat(second, "liar", 5000, turns=0, tag="liar-2")  # one message: nothing can be trimmed
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    # refused by the gateway (its message names the group and the learned window), never sent to the provider
    assert "model group 'liar'" in message and "maximum context length is 4000 tokens" in message, message
    assert not [p for p in upstream_payloads(servers["heavy"]) if "liar-2" in str(p["body"])]


def _last_call(proxy: Process) -> str:
    from .harness import decision_records

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        failures = [r for r in decision_records(proxy) if r.get("outcome") == "failure"]
        if failures:
            return failures[-1]["call_id"]
        time.sleep(0.1)
    raise AssertionError("no failure record")


def _near_budget_messages(tag: str) -> dict:
    """A /v1/messages body of four turns whose Claude estimate is about 10% over the budget (window 4,000,
    max_tokens 200): the estimate alone would drop its oldest turns."""
    budget = compute_budget(4000, requested_output_tokens=200).budget
    words = 100
    while True:
        messages = [{"role": "user", "content": f"{tag} the task"}, {"role": "assistant", "content": "on it"}]
        for turn in range(3):
            messages += [{"role": "user", "content": f"question {turn} " + "lorem ipsum dolor " * words},
                         {"role": "assistant", "content": f"answer {turn}"}]
        body = {"model": "claude-count", "max_tokens": 200,
                "messages": [*messages, {"role": "user", "content": "the last question"}]}
        if count_anthropic(body, CLAUDE) > budget * 1.1:
            return body
        words += 10


def _stats(upstream: Process) -> dict:
    return httpx.get(f"http://127.0.0.1:{upstream.port}/stats", timeout=10).json()


def test_the_provider_count_decides_near_the_budget(servers):
    proxy, counting = servers["first"], servers["counting"]
    body = _near_budget_messages(f"near-{uuid.uuid4().hex[:8]}")
    before = _stats(counting).get("count_calls", 0)
    response = httpx.post(f"{proxy.base_url}/v1/messages", json=body, timeout=60,
                          headers={"authorization": "Bearer sk-default"})
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "pass"  # the provider's count fits: nothing trimmed
    assert "provider count" in response.headers["x-budget-count-method"]
    sent = [p["body"] for p in upstream_payloads(counting) if p["path"].endswith("/v1/messages")
            and p["body"]["messages"][0]["content"] == body["messages"][0]["content"]]
    assert sent and sent[-1]["messages"] == body["messages"]  # forwarded untouched
    assert _stats(counting)["count_calls"] == before + 1
    # the same request again: the provider's count is served from the cache
    response = httpx.post(f"{proxy.base_url}/v1/messages", json=body, timeout=60,
                          headers={"authorization": "Bearer sk-default"})
    assert response.status_code == 200 and _stats(counting)["count_calls"] == before + 1


def test_a_slow_provider_counter_leaves_the_estimate(servers):
    proxy = servers["first"]
    body = {**_near_budget_messages(f"slow-{uuid.uuid4().hex[:8]}"), "model": "claude-slow"}
    started = time.monotonic()
    response = httpx.post(f"{proxy.base_url}/v1/messages", json=body, timeout=60,
                          headers={"authorization": "Bearer sk-default"})
    assert time.monotonic() - started < 2.0  # the 2 s counter was not waited for
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"  # the estimate decided
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["count"]["how"] == "estimate"
    assert record["decision"]["count"]["provider"]["note"].startswith("timeout")


def _grow(make, count, low: float, high: float) -> dict:
    """The first body ``make(words)`` whose estimate lies in (budget * low, budget * high]."""
    budget = compute_budget(4000, requested_output_tokens=200).budget
    for words in range(50, 5000, 5):
        body = make(words)
        if budget * low < count(body) <= budget * high:
            return body
    raise AssertionError("no body in the band")


def test_the_responses_input_tokens_endpoint_is_asked_near_the_budget(servers):
    from budget_hook.shapes.responses import count_responses

    proxy, counting = servers["first"], servers["counting"]
    tag = f"resp-{uuid.uuid4().hex[:8]}"
    body = _grow(lambda words: {"model": "responses-count", "max_output_tokens": 200, "input": [
        {"role": "user", "content": f"{tag} the task"}, {"role": "assistant", "content": "on it"},
        {"role": "user", "content": "lorem ipsum dolor " * words}, {"role": "assistant", "content": "done"},
        {"role": "user", "content": "the last question"}]},
        lambda b: count_responses(b, TokenCounter.for_model("gpt-4o")), 1.0, 1.05)
    before = _stats(counting)["count_calls"]
    response = httpx.post(f"{proxy.base_url}/v1/responses", json=body, timeout=60,
                          headers={"authorization": "Bearer sk-default"})
    assert response.status_code == 200, response.text
    assert _stats(counting)["count_calls"] == before + 1
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    count = record["decision"]["count"]
    assert count["how"] == "provider" and count["provider"]["note"] == "answered"
    asked = [p["body"] for p in upstream_payloads(counting) if p["path"].endswith("/responses/input_tokens")
             and tag in str(p["body"])]
    assert asked and asked[-1]["model"] == "gpt-4o-4k" and asked[-1]["input"] == body["input"]
    assert count["provider"]["tokens"] == httpx.post(f"http://127.0.0.1:{counting.port}/v1/responses/input_tokens",
                                                     json=asked[-1], headers={"authorization": "Bearer fake-key"},
                                                     timeout=10).json()["input_tokens"]


def test_gemini_count_tokens_is_asked_with_the_deployment_key(servers):
    from budget_hook.shapes.gemini import SHAPE as GEMINI

    proxy, counting = servers["first"], servers["counting"]
    tag = f"gem-{uuid.uuid4().hex[:8]}"
    gemini_counter = TokenCounter.for_model("gemini/gemini-2.5-flash")
    body = _grow(lambda words: {"contents": [
        {"role": "user", "parts": [{"text": f"{tag} the task"}]}, {"role": "model", "parts": [{"text": "on it"}]},
        {"role": "user", "parts": [{"text": "lorem ipsum dolor " * words}]},
        {"role": "model", "parts": [{"text": "done"}]}, {"role": "user", "parts": [{"text": "the last question"}]}],
        "generationConfig": {"maxOutputTokens": 200}}, lambda b: GEMINI.count(b, gemini_counter), 1.05, 1.2)
    before = _stats(counting)["count_calls"]
    httpx.post(f"{proxy.base_url}/v1beta/models/gemini-count:generateContent", json=body, timeout=60,
               headers={"authorization": "Bearer sk-default"})
    assert _stats(counting)["count_calls"] == before + 1
    [asked] = [p for p in upstream_payloads(counting) if p["path"].endswith(":countTokens") and tag in str(p["body"])]
    assert asked["path"] == "/v1beta/models/gemini-2.5-flash-4k:countTokens"
    inner = asked["body"]["generateContentRequest"]
    assert inner["model"] == "models/gemini-2.5-flash-4k" and inner["contents"] == body["contents"]


def _learned_cli(*args: str) -> dict:
    import json
    import sys

    done = subprocess.run([sys.executable, "-m", "budget_hook.cli", "learned", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _learned_gauge(proxy: Process, deployment: str) -> float | None:
    text = httpx.get(f"{proxy.base_url}/budget_hook/metrics", headers={"authorization": "Bearer sk-default"},
                     timeout=10).text
    for line in text.splitlines():
        if line.startswith("budget_hook_learned_factor{") and f'deployment="{deployment}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_what_was_learned_is_visible_and_resettable(servers, tmp_path):
    """Issue 22, 4: the correction the first test taught (x1.3 on ``learn-dep``) shows in ``budget-hook
    learned`` (read from the proxies' Redis, with its bounds) and in the ``budget_hook_learned_factor`` gauge;
    ``budget-hook learned --reset`` deletes it, and the next request is estimated without it."""
    second = servers["second"]
    url = f"redis://127.0.0.1:{servers['redis'].port}"
    settings = tmp_path / "learning.yaml"  # the proxies' learning settings (min_samples 3), for the same figures
    settings.write_text("callback_settings:\n  budget_hook:\n    learning: {min_samples: 3, sync_seconds: 0}\n")
    for index in range(4):  # enough bills for min_samples (3), whatever ran before
        assert chat(servers["first"], "learn", 1000, tag=f"visible-{index}").status_code == 200
    shown = _learned_cli("--config", str(settings), "--redis", url)
    assert shown["bounds"]["min_factor"] == 1.0 and shown["bounds"]["max_factor"] == 1.5
    [row] = [r for r in shown["deployments"] if r["deployment"] == "learn-dep"]
    assert row["applied"] and 1.25 <= row["factor"] <= 1.35 and row["samples"] >= 4, row

    response = chat(second, "learn", 1000, tag="visible-gauge")
    assert "learned x1.3" in response.headers["x-budget-count-method"]
    gauge = None
    for _ in range(50):
        gauge = _learned_gauge(second, "learn-dep")
        if gauge is not None:
            break
        time.sleep(0.1)
    assert gauge is not None and 1.25 <= gauge <= 1.35, gauge

    reset = _learned_cli("--redis", url, "--reset", "--deployment", "learn-dep")
    assert reset["keys_deleted"] >= 1
    assert not [r for r in _learned_cli("--redis", url)["deployments"] if r["deployment"] == "learn-dep"]
    response = chat(second, "learn", 1000, tag="after-reset")
    assert response.status_code == 200
    assert "learned" not in response.headers.get("x-budget-count-method", ""), response.headers
