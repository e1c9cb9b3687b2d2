"""End to end: a self-hosted model counted as its server counts it.

A real litellm proxy in front of ``fake_vllm.py``: Llama 3's real tokenizer and a Llama 3.1 chat template
(tool results through ``tojson``, the date header), ``POST /tokenize`` with ``max_model_len``, and vLLM's
own overflow wordings. Two groups on the same deployment: ``llama`` asks the server's ``/tokenize``
(``provider_count: always``), ``llama-estimate`` estimates with the template-aware Llama 3.1 profile.

* Tool results full of tabs, newlines and quotes (each doubled by ``tojson``; the estimate without the
  template's framing was 0.74x the server's count on them): the estimate is within 5% of the server's count,
  never under it.
* Through ``llama`` an over-window agent loop is counted by the server, trimmed, and accepted.
* A single message over the window is refused by the gateway; the server never sees it.
* ``tiny`` is a second stand-in serving a small real ``tokenizer.json`` and ``tokenizer_config.json`` built
  in the test (``tests/tokenizer_files``); the gateway is given the same files (``tokenizers:``): its count
  is the server's, before and after trimming, and the trimmed request is accepted; a ``developer`` message
  counts as the ``system`` message LiteLLM turns it into.
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from budget_hook.counting import TokenCounter

from ..tokenizer_files import build
from .conftest import write_config
from .harness import Process, model_entry, start_fake_vllm, start_proxy, wait_for_record

pytestmark = pytest.mark.e2e

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WINDOW = 4096
ESTIMATE = TokenCounter.for_model(f"hosted_vllm/{MODEL}")


TINY = "org/tiny-llama"


def start_vllm(folder, model: str = MODEL, files: tuple = ()) -> Process:
    return start_fake_vllm(folder, model, WINDOW, files=files, name=f"vllm_{len(files)}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vllm")
    started: list[Process] = []
    try:
        vllm = start_vllm(folder)
        started.append(vllm)
        files = build(folder / "tiny")
        tiny = start_vllm(folder, TINY, files)
        started.append(tiny)
        model, base = f"hosted_vllm/{MODEL}", f"http://127.0.0.1:{vllm.port}/v1"
        tokenizers = {f"hosted_vllm/{TINY}": {"tokenizer": str(files[0]), "chat_template": str(files[1])}}
        config = {"model_list": [model_entry("llama", model, base, WINDOW, model_id="llama-dep"),
                                 model_entry("llama-estimate", model, base, WINDOW, model_id="llama-estimate-dep"),
                                 model_entry("llama-nowindow", model, base, model_id="llama-nowindow-dep"),
                                 model_entry("tiny", f"hosted_vllm/{TINY}", f"http://127.0.0.1:{tiny.port}/v1", WINDOW,
                                             model_id="tiny-dep")],
                  "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
                  "callback_settings": {"budget_hook": {"mode": "enforce", "tokenizers": tokenizers,
                                                        "models": {"llama": {"provider_count": "always"},
                                                                   "llama-nowindow": {"provider_count": "always"}}}},
                  "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth"}}
        proxy = start_proxy(write_config(folder / "proxy", config), log_dir=folder)
        started.append(proxy)
        yield {"vllm": vllm, "proxy": proxy, "tiny": tiny}
    finally:
        for process in reversed(started):
            process.stop()


def served(vllm: Process, tag: str, path: str = "/v1/chat/completions") -> list[dict]:
    lines = vllm.extra["record"].read_text(encoding="utf-8").splitlines()
    return [entry["body"] for entry in map(json.loads, lines) if entry["path"] == path and tag in json.dumps(entry)]


def tool_conversation(tag: str, steps: int) -> dict:
    """An agent loop whose tool outputs are tab-separated listings with quoted names (``tojson`` doubles
    every tab, newline and quote)."""
    listing = "".join(f'"f{i}"\t{i}\tx\ty\n' for i in range(60))
    messages: list[dict] = [{"role": "system", "content": "You are a shell agent."},
                            {"role": "user", "content": f"[{tag}] tidy the folder"}]
    for step in range(steps):
        call = f"call_{step}"
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": call, "type": "function", "function": {"name": "sh", "arguments": '{"cmd": "ls -l"}'}}]},
                     {"role": "tool", "tool_call_id": call, "content": listing}]
    messages.append({"role": "user", "content": "and now?"})
    return {"max_tokens": 100, "messages": messages}


def over_the_window(vllm: Process, tag: str, model: str = MODEL) -> dict:
    """The smallest such conversation the server counts over the window."""
    for steps in range(1, 40):
        body = tool_conversation(tag, steps)
        if server_count(vllm, {"messages": body["messages"]}, model) + 100 > WINDOW:
            return body
    raise AssertionError("no conversation overflows the window")


def server_count(vllm: Process, body: dict, model: str = MODEL) -> int:
    answer = httpx.post(f"http://127.0.0.1:{vllm.port}/tokenize", json={"model": model, **body}, timeout=30)
    return answer.json()["count"]


def chat(proxy: Process, group: str, body: dict) -> httpx.Response:
    return httpx.post(f"{proxy.base_url}/chat/completions", json={"model": group, **body}, timeout=60,
                      headers={"authorization": "Bearer sk-default"})


@pytest.mark.parametrize("steps", [1, 3, 5])
def test_the_estimate_follows_the_template(servers, steps):
    tag = f"estimate-{uuid.uuid4().hex[:6]}"
    body = tool_conversation(tag, steps)
    response = chat(servers["proxy"], "llama-estimate", body)
    assert response.status_code == 200, response.text
    estimated = int(response.headers["x-budget-tokens-before"])
    counted = server_count(servers["vllm"], {"messages": body["messages"]})
    assert counted <= estimated <= counted * 1.05, (estimated, counted)
    [sent] = served(servers["vllm"], tag)
    assert [m.get("content") for m in sent["messages"]] == [m["content"] for m in body["messages"]]  # untouched


def test_the_server_s_tokenize_counts_it_and_the_trimmed_request_is_accepted(servers):
    tag = f"tokenize-{uuid.uuid4().hex[:6]}"
    body = over_the_window(servers["vllm"], tag)
    response = chat(servers["proxy"], "llama", body)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    assert "provider count" in response.headers["x-budget-count-method"]
    [sent] = served(servers["vllm"], tag)
    assert server_count(servers["vllm"], {"messages": sent["messages"]}) + 100 <= WINDOW
    asked = [b for b in served(servers["vllm"], tag, "/tokenize") if b.get("add_generation_prompt")]
    assert len(asked) == 1 and asked[0]["messages"] == body["messages"]  # the body as sent, counted once
    record = wait_for_record(servers["proxy"], response.headers["x-litellm-call-id"])
    assert record["decision"]["count"]["how"] == "provider"
    assert record["decision"]["count"]["provider"]["note"] == "answered"


def test_a_request_that_cannot_fit_is_refused_before_the_server_sees_it(servers):
    tag = f"whole-{uuid.uuid4().hex[:6]}"
    body = {"max_tokens": 100, "messages": [{"role": "user", "content": f"[{tag}] " + '"x"\t\n' * 3000}]}
    response = chat(servers["proxy"], "llama", body)
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"
    assert "budget_hook blocked this request" in response.text
    assert not served(servers["vllm"], tag)


def test_the_deployment_s_own_tokenizer_counts_as_the_server_does(servers):
    tiny = servers["tiny"]
    tag = f"tiny-{uuid.uuid4().hex[:6]}"
    body = tool_conversation(tag, 1)
    response = chat(servers["proxy"], "tiny", body)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-count-method"] == "tokenizer.json+template"
    assert int(response.headers["x-budget-tokens-before"]) == server_count(tiny, {"messages": body["messages"]}, TINY)

    tag = f"tiny-over-{uuid.uuid4().hex[:6]}"
    body = over_the_window(tiny, tag, TINY)
    response = chat(servers["proxy"], "tiny", body)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    assert int(response.headers["x-budget-tokens-before"]) == server_count(tiny, {"messages": body["messages"]}, TINY)
    [sent] = served(tiny, tag)
    after = server_count(tiny, {"messages": sent["messages"]}, TINY)
    assert int(response.headers["x-budget-tokens-after"]) == after and after + 100 <= WINDOW
    record = wait_for_record(servers["proxy"], response.headers["x-litellm-call-id"])
    assert record["decision"]["count"]["how"] == "exact"
    assert record["decision"]["count"]["method"] == "tokenizer.json+template"


def test_a_developer_message_is_counted_as_the_system_message_litellm_sends(servers):
    """LiteLLM maps ``developer`` to ``system`` inside ``completion()``, after the gateway's check: the count is
    the server's count of the body it receives (Llama 3.1's template would frame a ``developer`` message as a
    turn of its own, beside a default system block)."""
    tiny = servers["tiny"]
    tag = f"tiny-dev-{uuid.uuid4().hex[:6]}"
    body = {"max_tokens": 50, "messages": [{"role": "developer", "content": f"[{tag}] Answer in French. " * 40},
                                           {"role": "user", "content": "hello"}]}
    response = chat(servers["proxy"], "tiny", body)
    assert response.status_code == 200, response.text
    [sent] = served(tiny, tag)
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert int(response.headers["x-budget-tokens-before"]) == server_count(tiny, {"messages": sent["messages"]}, TINY)
    assert server_count(tiny, {"messages": sent["messages"]}, TINY) != server_count(tiny, {"messages": body["messages"]},
                                                                                    TINY)


def test_the_server_s_max_model_len_is_the_window_when_none_is_configured(servers):
    """No window configured and none in LiteLLM's map (the policy default would be 8,192): the server's
    ``/tokenize`` answer names ``max_model_len`` (4,096), and the request is decided against it."""
    tag = f"nowindow-{uuid.uuid4().hex[:6]}"
    body = over_the_window(servers["vllm"], tag)
    response = chat(servers["proxy"], "llama-nowindow", body)
    assert response.status_code == 200, response.text
    assert response.headers["x-budget-decision"] == "trimmed"
    assert response.headers["x-budget-window"] == str(WINDOW)
    [sent] = served(servers["vllm"], tag)
    assert server_count(servers["vllm"], {"messages": sent["messages"]}) + 100 <= WINDOW
    record = wait_for_record(servers["proxy"], response.headers["x-litellm-call-id"])
    assert record["decision"]["window"] == WINDOW, record["decision"].get("window_source")


def test_a_missing_tokenizer_or_a_template_reaching_for_internals_refuses_the_start(tmp_path):
    from budget_hook.proxy.startup import EXIT_CONFIG

    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ messages.__class__.__mro__ }}")
    files = build(tmp_path / "tiny")
    for name, entry, problem in (
            ("missing", {"tokenizer": str(tmp_path / "nope" / "tokenizer.json")}, "is no tokenizer.json file"),
            ("unsafe", {"tokenizer": str(files[0]), "chat_template": str(bad)}, "SecurityError")):
        config = {"model_list": [{"model_name": "tiny", "litellm_params": {"model": f"hosted_vllm/{TINY}",
                                                                            "api_base": "http://127.0.0.1:9/v1"}}],
                  "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"]},
                  "callback_settings": {"budget_hook": {"tokenizers": {f"hosted_vllm/{TINY}": entry}}}}
        process = start_proxy(write_config(tmp_path / name, config), log_dir=tmp_path / name, expect_failure=True,
                              timeout=90)
        assert process.popen.returncode == EXIT_CONFIG
        stderr = process.stderr()
        assert "budget_hook: refusing to start" in stderr
        assert f"callback_settings.budget_hook.tokenizers.hosted_vllm/{TINY}" in stderr and problem in stderr
        assert "Traceback" not in stderr, stderr[-3000:]
