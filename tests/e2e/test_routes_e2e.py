"""Routes that used to reach a provider unbudgeted, through a real proxy (issue 20, item 3).

* ``/v1/responses/compact`` and ``/openai/v1/responses/compact`` (call type ``acompact_responses``) forwarded
  30,002 tokens to a 16k deployment: now budgeted as ``/v1/responses``;
* ``/vllm/...`` and ``/azure/...`` pass-throughs with a router model call ``llm_router.allm_passthrough_route``
  directly and never reach the pre-call hook (9,002 tokens to a 4k deployment): now decided per router
  attempt in ``async_pre_call_deployment_hook``; so is LiteLLM's priority queue ``/queue/chat/completions``,
  which skips the pre-call hook too;
* ``/gemini/v1beta/models/{model}:generateContent`` carries the model only in its URL (1.1M tokens reached a
  1,048,576-token model): now budgeted against that model's window (here ``learnlm-1.5-pro-experimental``,
  32,767 tokens in LiteLLM's model map, which keeps the test small).

For every case: nothing over the window reaches the stand-in provider (counted its own way), no 5xx, a clean
400 naming the overflow or a trimmed request the provider accepts.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
import tiktoken

from budget_hook.counting.encodings import vendored_tokenizer_dir

from . import fake_provider
from .harness import upstream_payloads

pytestmark = pytest.mark.e2e

AUTH = {"authorization": "Bearer sk-default"}
WINDOWS = {"gpt-4o-4k": 4000, "learnlm-1.5-pro-experimental": 32767}


@pytest.fixture(scope="module", autouse=True)
def provider_counting():
    """The stand-in provider's own count, in this process (its functions, its encoding)."""
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(vendored_tokenizer_dir()))
    fake_provider.ENCODING = tiktoken.get_encoding("o200k_base")


def post(proxy, path: str, body: dict, headers: dict | None = None) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}{path}", json=body, timeout=120, headers={**AUTH, **(headers or {})})


def sent(upstream, marker: str) -> list[dict]:
    """What reached the provider carrying ``marker``: its path and body."""
    return [p for p in upstream_payloads(upstream) if marker in json.dumps(p["body"])]


def provider_tokens(payload: dict) -> tuple[int, int]:
    """(tokens the provider counts, its window) for one recorded payload."""
    path, body = payload["path"].split("?")[0], payload["body"]
    if path.endswith(("GenerateContent", "generateContent")):
        model = path.rsplit("/", 1)[-1].split(":")[0]
        reserve = (body.get("generationConfig") or {}).get("maxOutputTokens") or 0
        return fake_provider.gemini_prompt(body) + reserve, WINDOWS[model]
    if "/responses" in path:
        return fake_provider.responses_prompt(body) + (body.get("max_output_tokens") or 0), WINDOWS[body["model"]]
    reserve = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return fake_provider.count_prompt(body) + reserve, WINDOWS[body.get("model") or "gpt-4o-4k"]


def assert_within_windows(upstream, marker: str) -> list[dict]:
    payloads = sent(upstream, marker)
    for payload in payloads:
        tokens, window = provider_tokens(payload)
        assert tokens <= window, f"{payload['path']}: {tokens} tokens reached a {window}-token model"
    return payloads


def assert_clean_overflow(response: httpx.Response) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:500])
    assert "budget_hook blocked this request (context_length_exceeded)" in response.text
    assert response.headers["content-type"].startswith("application/json")


def long_text(marker: str, words: int = 9000) -> str:
    return "word " * words + f"[{marker}]"


def conversation(marker: str, turns: int = 12, words: int = 60) -> list[dict]:
    """Chat turns well over 4,000 tokens together, each small: trimmable."""
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn}: " + "lorem ipsum dolor sit amet " * words})
        messages.append({"role": "assistant", "content": f"answer {turn}: " + "consectetur adipiscing elit " * words})
    messages.append({"role": "user", "content": f"final question [{marker}]"})
    return messages


# --- /responses/compact --------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "stream", "marker"), [
    ("/v1/responses/compact", False, "e2e-compact"),
    ("/v1/responses/compact", True, "e2e-compact-stream"),
    ("/openai/v1/responses/compact", False, "e2e-compact-openai"),
    ("/responses/compact", False, "e2e-compact-bare"),
])
def test_an_oversized_compaction_is_refused_before_the_provider(proxy, upstream, path, stream, marker):
    body = {"model": "small", "input": [{"role": "user", "content": long_text(marker)}],
            **({"stream": True} if stream else {})}
    response = post(proxy, path, body)
    # a compaction is one JSON answer (the Responses API does not stream it): a plain 400 even when asked to stream
    assert_clean_overflow(response)
    assert json.loads(response.text)["error"]["code"] == "context_length_exceeded"
    assert sent(upstream, marker) == []


def test_a_long_conversation_is_trimmed_for_its_compaction(proxy, upstream):
    items = [{"role": m["role"], "content": m["content"]} for m in conversation("e2e-compact-trim")]
    response = post(proxy, "/v1/responses/compact", {"model": "small", "input": items})
    assert response.status_code == 200, response.text[:500]
    [payload] = assert_within_windows(upstream, "e2e-compact-trim")
    assert payload["path"].endswith("/responses/compact") and len(payload["body"]["input"]) < len(items)


# --- pass-throughs that call the router directly ----------------------------------------------------------

VLLM, AZURE = "/vllm/v1/chat/completions", "/azure/openai/deployments/azure-small/chat/completions?api-version=2024-10-21"


@pytest.mark.parametrize(("path", "model", "stream"), [
    (VLLM, "vllm-small", False), (VLLM, "vllm-small", True), (AZURE, None, False), (AZURE, None, True)])
def test_a_router_model_pass_through_over_its_window_gets_a_clean_400(proxy, upstream, path, model, stream):
    marker = f"e2e-pt-{'vllm' if model else 'azure'}-{stream}"
    body = {"messages": [{"role": "user", "content": long_text(marker)}], **({"model": model} if model else {}),
            **({"stream": True} if stream else {})}
    response = post(proxy, path, body)
    assert_clean_overflow(response)
    assert sent(upstream, marker) == []


@pytest.mark.parametrize(("path", "model"), [(VLLM, "vllm-small"), (AZURE, None)])
def test_a_router_model_pass_through_is_trimmed_for_its_deployment(proxy, upstream, path, model):
    marker = f"e2e-pt-trim-{'vllm' if model else 'azure'}"
    messages = conversation(marker)
    body = {"messages": messages, **({"model": model} if model else {})}
    response = post(proxy, path, body)
    assert response.status_code == 200, response.text[:500]
    assert response.json()["choices"][0]["message"]["content"].startswith("ok:")
    [payload] = assert_within_windows(upstream, marker)
    forwarded = payload["body"]["messages"]
    assert len(forwarded) < len(messages) and forwarded[-1]["content"] == messages[-1]["content"]
    assert "metadata" not in payload["body"] and "litellm_metadata" not in payload["body"]  # nothing of ours


def test_a_streamed_router_model_pass_through_is_trimmed_and_streamed(proxy, upstream):
    response = post(proxy, VLLM, {"model": "vllm-small", "stream": True, "messages": conversation("e2e-pt-stream")})
    assert response.status_code == 200, response.text[:500]
    assert "data: " in response.text and "[DONE]" in response.text
    assert len(assert_within_windows(upstream, "e2e-pt-stream")) == 1


def test_a_fitting_router_model_pass_through_is_forwarded_untouched(proxy, upstream):
    body = {"model": "vllm-small", "messages": [{"role": "user", "content": "hello [e2e-pt-fits]"}], "max_tokens": 50}
    response = post(proxy, VLLM, body)
    assert response.status_code == 200, response.text[:500]
    [payload] = sent(upstream, "e2e-pt-fits")
    assert payload["body"]["messages"] == body["messages"] and payload["body"]["max_tokens"] == 50


# --- LiteLLM's priority queue (no pre-call hook either) -----------------------------------------------


def test_the_priority_queue_is_budgeted_per_attempt(proxy, upstream):
    blocked = post(proxy, "/queue/chat/completions", {"model": "small", "priority": 0,
                                                      "messages": [{"role": "user", "content": long_text("e2e-q")}]})
    assert blocked.status_code == 400 and "context_length_exceeded" in blocked.text, blocked.text[:500]
    assert sent(upstream, "e2e-q]") == []
    trimmed = post(proxy, "/queue/chat/completions", {"model": "small", "priority": 0,
                                                      "messages": conversation("e2e-q-trim")})
    assert trimmed.status_code == 200, trimmed.text[:500]
    assert len(assert_within_windows(upstream, "e2e-q-trim")) == 1


FORGED = {"model_info": {"id": "forged"}, "deployment_model_name": "codex", "model_group": "codex",
          "user_api_key_hash": "forged-hash", "user_api_key_team_id": "team-nobody"}


def test_a_client_s_litellm_metadata_never_names_the_queue_attempt_s_deployment(proxy, upstream):
    """The router writes a chat attempt's deployment into ``metadata``; a chat body's own ``litellm_metadata`` is the
    client's. An eleventh attack review: read first, it named the 20,000-token group for the 4,000-token deployment
    (9,069 tokens forwarded, the record saying ``codex``, ``pass``)."""
    response = post(proxy, "/queue/chat/completions", {
        "model": "small", "priority": 0, "max_tokens": 50, "litellm_metadata": FORGED,
        "messages": [{"role": "user", "content": long_text("e2e-q-forged")}]})
    assert response.status_code == 400 and "context_length_exceeded" in response.text, response.text[:500]
    assert sent(upstream, "e2e-q-forged]") == []


@pytest.mark.parametrize("key, forged", [("sk-strict-by-id", True), ("sk-strict", False)])
def test_a_team_s_cap_holds_on_the_queue(proxy, upstream, key, forged):
    """A team's ``max_input_tokens`` (1,500) applies to a queued request of ~3,000 tokens to a 20,000-token group,
    whether a forged ``litellm_metadata`` names another team (forwarded before) or the team is matched by its alias
    (LiteLLM writes no alias on this route: the team as the proxy authenticated it on another route is used)."""
    seen = post(proxy, "/v1/chat/completions", {"model": "codex", "max_tokens": 5,
                                                "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": f"Bearer {key}"})
    assert seen.status_code == 200, seen.text[:300]
    marker = f"e2e-q-cap-{key}"
    body = {"model": "codex", "priority": 0, "max_tokens": 50,
            "messages": [{"role": "user", "content": long_text(marker, words=3000)}]}
    if forged:
        body["litellm_metadata"] = FORGED
    response = post(proxy, "/queue/chat/completions", body, headers={"authorization": f"Bearer {key}"})
    assert response.status_code == 400, response.text[:500]
    assert sent(upstream, f"{marker}]") == []


# --- the Gemini pass-through: the model is in the URL -----------------------------------------------------

GEMINI = "/gemini/v1beta/models/learnlm-1.5-pro-experimental"


@pytest.mark.parametrize("action", [":generateContent", ":streamGenerateContent?alt=sse"])
def test_a_gemini_pass_through_over_its_window_is_refused_in_gemini_s_words(proxy, upstream, action):
    marker = f"e2e-gpt-{action[1:7]}"
    body = {"contents": [{"role": "user", "parts": [{"text": long_text(marker, words=40_000)}]}]}
    response = post(proxy, GEMINI + action, body, headers={"x-goog-api-key": "sk-default"})
    assert response.status_code == 400, response.text[:500]
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "exceeds the maximum number of tokens allowed" in error["message"]
    assert sent(upstream, marker) == []


@pytest.mark.parametrize("action", [":generateContent", ":streamGenerateContent?alt=sse"])
def test_a_gemini_pass_through_conversation_is_trimmed_for_the_model(proxy, upstream, action):
    marker = f"e2e-gpt-trim-{action[1:7]}"
    contents = []
    for turn in range(16):
        contents.append({"role": "user", "parts": [{"text": f"question {turn}: " + "lorem ipsum dolor " * 1500}]})
        contents.append({"role": "model", "parts": [{"text": f"answer {turn}: " + "sit amet " * 800}]})
    contents.append({"role": "user", "parts": [{"text": f"final question [{marker}]"}]})
    response = post(proxy, GEMINI + action, {"contents": contents}, headers={"x-goog-api-key": "sk-default"})
    assert response.status_code == 200, response.text[:500]
    assert "ok: " in response.text
    [payload] = assert_within_windows(upstream, marker)
    assert len(payload["body"]["contents"]) < len(contents)
    assert payload["body"]["contents"][-1] == contents[-1]
