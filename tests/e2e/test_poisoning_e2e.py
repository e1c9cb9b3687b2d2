"""End to end: no client can teach the gateway a window or a correction, and no alias escapes a policy.

Real processes on 127.0.0.1, stopped by their PID: one Redis server, one provider stand-in that quotes
client input back in its 400s as OpenAI and Anthropic do (``fake_provider.py --echo``: unknown keys, bad
``thinking.type`` values, bad roles), and two litellm proxies with budget_hook and the same config,
sharing learning through that Redis. Three tenants (``sk-attacker``, ``sk-tenant-b``, ``sk-tenant-c``).

What it proves, each with several variants:

* an error quoting an overflow sentence the client planted (in a key, a value, a role, on chat,
  ``/v1/messages`` and ``/v1/responses``) teaches no window: the other proxy, which never saw the
  attacker, still serves the other tenants; and twenty such errors pin no correction;
* a real overflow still teaches (the control), attributed to the key that sent it; one below the floors
  (``min_window_tokens``, ``min_window_ratio`` of the configured window) is refused and the record says so;
* a correction one key's traffic teaches applies to that key, not to the tenants who taught otherwise;
* ``models: {bars-small: {max_input_tokens: 3000}}`` holds for requests that name its alias ``bars``.
"""

from __future__ import annotations

import os
import time
import uuid

import httpx
import pytest
import redis

from budget_hook.counting import TokenCounter
from budget_hook.learning import IDLE_TEACHER_SECONDS, MAX_TEACHERS
from budget_hook.proxy.shared import _PUSH_RATIO, _teachers

from .conftest import write_config
from .harness import Process, decision_records, model_entry, start_fake_provider, start_proxy, upstream_payloads
from .test_learning_e2e import REDIS_SERVER, start_redis, stop

pytestmark = pytest.mark.e2e

COUNTER = TokenCounter.for_model("gpt-4o")
PLANTS = [
    "x\nThis model's maximum context length is 10 tokens",
    "x\nprompt is too long: 900000 tokens > 1200 maximum",
    "x\nThe input token count (90000) exceeds the maximum number of tokens allowed (1100)",
    "x - This model's maximum context length is 1500 tokens. However, your request has 9000 input tokens",
]


def config(upstream: Process, heavy: Process, redis_port: int) -> dict:
    base = f"http://127.0.0.1:{upstream.port}"
    return {
        "model_list": [model_entry("open", "openai/gpt-4o-16k", f"{base}/v1", 16000, model_id="open-dep"),
                       model_entry("claude", "anthropic/claude-sonnet-4-5-16k", base, 16000, model_id="claude-dep"),
                       model_entry("resp", "openai/gpt-4o-16k", f"{base}/v1", 16000, model_id="resp-dep"),
                       # the config claims more than the provider serves: real overflows, three sizes
                       model_entry("liar", "openai/gpt-4o-4k", f"{base}/v1", 16000, model_id="liar-dep"),
                       model_entry("tiny", "openai/gpt-4o-500", f"{base}/v1", 16000, model_id="tiny-dep"),
                       model_entry("narrow", "openai/gpt-4o-1500", f"{base}/v1", 16000, model_id="narrow-dep"),
                       # bills 1.3x what it counts: for the attacker alone, through its own traffic
                       model_entry("heavy", "openai/gpt-4o-16k", f"http://127.0.0.1:{heavy.port}/v1", 16000,
                                   model_id="heavy-dep"),
                       model_entry("says", "openai/gpt-4o-8k-says-4k", f"{base}/v1", 16000, model_id="says-dep"),
                       model_entry("bars-small", "openai/gpt-4o-16k", f"{base}/v1", 16000, model_id="bars-dep"),
                       model_entry("emb", "openai/text-embedding-3-small-8k", f"{base}/v1", 8000, model_id="emb-dep")],
        "router_settings": {"redis_host": "127.0.0.1", "redis_port": redis_port,
                            "model_group_alias": {"bars": "bars-small", "bars-hidden": {"model": "bars-small",
                                                                                        "hidden": True}}},
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {
            "mode": "enforce",
            "learning": {"min_samples": 3, "sync_seconds": 0},
            "models": {"bars-small": {"max_input_tokens": 3000}},
        }},
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth"},
    }


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    if REDIS_SERVER is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed: CI must run the poisoning tests")
        pytest.skip("redis-server is not installed (scripts/test.sh installs Debian's redis-server)")
    folder = tmp_path_factory.mktemp("poisoning")
    for name in ("upstream", "heavy", "proxy"):
        (folder / name).mkdir()
    started: list = []
    try:
        redis_server = start_redis(folder)
        started.append(redis_server)
        models = {"gpt-4o-16k": 16000, "claude-sonnet-4-5-16k": 16000, "gpt-4o-4k": 4000, "gpt-4o-500": 500,
                  "gpt-4o-1500": 1500, "gpt-4o-8k-says-4k": 8000,
                  "text-embedding-3-small-8k": 8000}
        upstream = start_fake_provider(folder / "upstream", models, flags=["--echo"])
        started.append(upstream)
        heavy = start_fake_provider(folder / "heavy", {"gpt-4o-16k": 16000}, flags=["--echo", "--bill-factor", "1.3"])
        started.append(heavy)
        path = write_config(folder / "proxy", config(upstream, heavy, redis_server.port))
        first = start_proxy(path, log_dir=folder / "proxy")
        started.append(first)
        second = start_proxy(path, log_dir=folder / "proxy")
        started.append(second)
        yield {"redis": redis.Redis(host="127.0.0.1", port=redis_server.port), "upstream": upstream, "heavy": heavy,
               "first": first, "second": second}
    finally:
        for process in reversed(started):
            process.stop() if isinstance(process, Process) else stop(process)


def send(proxy: Process, path: str, body: dict, key: str = "sk-tenant-b") -> tuple[httpx.Response, str]:
    call_id = str(uuid.uuid4())
    response = httpx.post(f"{proxy.base_url}{path}", json=body, timeout=60,
                          headers={"authorization": f"Bearer {key}", "x-litellm-call-id": call_id})
    return response, call_id


def record_of(proxy: Process, call_id: str, outcome: str | None = None) -> dict:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [r for r in decision_records(proxy) if r.get("call_id") == call_id
                 and (outcome is None or r.get("outcome") == outcome)]
        if found:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no record for {call_id}; stderr tail:\n{proxy.stderr()[-3000:]}")


def words(count: int, tag: str) -> str:
    return f"[{tag}] " + "lorem ipsum " * (count // 2)


def chat_body(group: str, size: int, tag: str, **extra) -> dict:
    return {"model": group, "max_tokens": 100, "messages": [{"role": "user", "content": words(size, tag)}], **extra}


def shared_ratios(servers: dict, deployment: str) -> dict[str, list[float]]:
    return _teachers(servers["redis"].hgetall(f"budget_hook:v1:teacher_ratios:{deployment}"))


def assert_nothing_learned(servers: dict, *deployments: str) -> None:
    for deployment in deployments:
        assert servers["redis"].get(f"budget_hook:v1:window:{deployment}") is None, deployment


def assert_serves_a_large_request(servers: dict, group: str, path: str = "/chat/completions") -> None:
    """The other proxy, which never saw the attacker, serves another tenant a 5,000-token request."""
    tag = f"victim-{uuid.uuid4().hex[:6]}"
    if path == "/v1/messages":
        body = {"model": group, "max_tokens": 100, "messages": [{"role": "user", "content": words(5000, tag)}]}
    elif path == "/v1/responses":
        body = {"model": group, "max_output_tokens": 100, "input": words(5000, tag)}
    else:
        body = chat_body(group, 5000, tag)
    response, call_id = send(servers["second"], path, body, key="sk-tenant-c")
    assert response.status_code == 200, response.text
    record = record_of(servers["second"], call_id)
    assert record["decision"]["action"] == "pass" and record["decision"]["window"] == 16000


# --- 1. echoed errors teach nothing -------------------------------------------------------------------------


@pytest.mark.parametrize("plant", PLANTS)
def test_an_unknown_key_quoting_an_overflow_teaches_no_window_on_chat(servers, plant):
    response, call_id = send(servers["first"], "/chat/completions", chat_body("open", 50, "key-echo", **{plant: 1}),
                             key="sk-attacker")
    # the echo may be answered in the overflow form, but never with the numbers the request planted
    answer = response.json()["error"]["message"]
    assert response.status_code == 400 and ("Unrecognized request argument supplied" in answer or not any(
        number in answer for number in ("10 tokens", "900000", "90000", "1100", "1200", "1500", "9000"))), answer
    record = record_of(servers["first"], call_id, "failure")
    assert "ignored" in record["learned"] and "window" not in record["learned"], record.get("learned")
    assert_nothing_learned(servers, "open-dep")
    assert_serves_a_large_request(servers, "open")


def test_a_role_quoting_an_overflow_teaches_nothing(servers):
    body = {"model": "open", "max_tokens": 100,
            "messages": [{"role": "user", "content": "hi"}, {"role": PLANTS[0], "content": "x"}]}
    response, _ = send(servers["first"], "/chat/completions", body, key="sk-attacker")
    assert response.status_code == 400, response.text
    assert_nothing_learned(servers, "open-dep")
    assert_serves_a_large_request(servers, "open")


@pytest.mark.parametrize("where", ["thinking", "key"])
def test_an_anthropic_echo_teaches_no_window_and_no_correction(servers, where):
    plant = "\nprompt is too long: 900000 tokens > 9000000 maximum" if where == "thinking" else PLANTS[1]
    for index in range(5):  # more than min_samples: were any taught, a correction would now apply
        body = {"model": "claude", "max_tokens": 100,
                "messages": [{"role": "user", "content": words(300, f"anthropic-echo-{index}")}]}
        if where == "thinking":
            body["thinking"] = {"type": plant, "budget_tokens": 1024}
        else:
            body[plant] = True
        response, call_id = send(servers["first"], "/v1/messages", body, key="sk-attacker")
        if where == "key" and response.status_code == 200:
            continue  # this LiteLLM drops unknown top-level keys on /v1/messages: nothing to echo
        assert response.status_code == 400, response.text
        learned = record_of(servers["first"], call_id, "failure").get("learned")
        assert learned is None or ("window" not in learned and "ratio" not in learned), learned
    assert_nothing_learned(servers, "claude-dep")
    # only honest successes teach ratios (when LiteLLM dropped the key, the request was served as billed)
    ratios = shared_ratios(servers, "claude-dep")
    assert all(r < 1.2 for taught in ratios.values() for r in taught), ratios
    response, call_id = send(servers["second"], "/v1/messages",
                             {"model": "claude", "max_tokens": 100,
                              "messages": [{"role": "user", "content": words(5000, "claude-victim")}]},
                             key="sk-tenant-c")
    assert response.status_code == 200, response.text
    assert "learned" not in response.headers.get("x-budget-count-method", "")


def test_a_responses_echo_teaches_nothing(servers):
    body = {"model": "resp", "max_output_tokens": 100, "input": "hello", PLANTS[0]: 1}
    response, _ = send(servers["first"], "/v1/responses", body, key="sk-attacker")
    assert response.status_code in (200, 400), response.text  # this LiteLLM drops unknown Responses keys
    assert_nothing_learned(servers, "resp-dep")
    assert_serves_a_large_request(servers, "resp", "/v1/responses")


def test_an_embeddings_echo_teaches_nothing(servers):
    response, call_id = send(servers["first"], "/embeddings", {"model": "emb", "input": ["hello"], PLANTS[0]: 1},
                             key="sk-attacker")
    assert response.status_code == 400, response.text
    learned = record_of(servers["first"], call_id, "failure").get("learned")
    assert learned is None or ("ignored" in learned and "window" not in learned), learned
    assert_nothing_learned(servers, "emb-dep")


def test_a_gemini_native_request_quoting_an_overflow_teaches_nothing(servers):
    """Gemini's route, translated by LiteLLM to the chat deployment: the planted role reaches the provider,
    which quotes it back."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                         {"role": PLANTS[0], "parts": [{"text": "x"}]}]}
    response, _ = send(servers["first"], "/v1beta/models/open:generateContent", body, key="sk-attacker")
    assert response.status_code < 500, response.text
    assert_nothing_learned(servers, "open-dep")
    assert_serves_a_large_request(servers, "open")


# --- a real overflow still teaches; the floors hold ------------------------------------------------------------


def test_a_real_overflow_teaches_its_window_attributed_to_its_key(servers):
    response, call_id = send(servers["first"], "/chat/completions", chat_body("liar", 5000, "liar"))
    assert response.status_code == 400
    learned = record_of(servers["first"], call_id, "failure")["learned"]
    assert learned["window"] == 4000 and learned["teacher"].startswith("key:")
    stored = servers["redis"].get("budget_hook:v1:window:liar-dep").decode()
    assert stored.startswith("4000 ") and f"taught by {learned['teacher']}" in stored
    # the other proxy refuses the same request itself: it never reaches the provider
    response, call_id = send(servers["second"], "/chat/completions", chat_body("liar", 5000, "liar-2"))
    assert response.status_code == 400 and "model group 'liar'" in response.json()["error"]["message"]
    assert not [p for p in upstream_payloads(servers["upstream"]) if "liar-2" in str(p["body"])]


@pytest.mark.parametrize("group, deployment, floor", [("tiny", "tiny-dep", 2000), ("narrow", "narrow-dep", 2000)])
def test_a_window_below_its_floor_is_refused_and_the_record_says_so(servers, group, deployment, floor):
    """500 is below ``min_window_tokens`` (1,024); both are below 1/8 of the configured 16,000."""
    response, call_id = send(servers["first"], "/chat/completions", chat_body(group, 3000, group))
    assert response.status_code == 400  # the provider's own refusal, passed on
    learned = record_of(servers["first"], call_id, "failure")["learned"]
    assert learned["refused_window"] < floor and learned["floor"] == floor and "window" not in learned
    assert_nothing_learned(servers, deployment)


def test_a_window_below_what_the_deployment_served_is_never_learned(servers):
    """A success is the provider's word that its window holds that much, shared through Redis: an error
    that names less (an upstream that misreports: it serves 8,000 and says 4,000) is refused by either
    proxy."""
    response, call_id = send(servers["first"], "/chat/completions", chat_body("says", 6000, "served"))
    assert response.status_code == 200, response.text
    record_of(servers["first"], call_id)  # the success callback, which writes the floor, runs after the answer
    assert int(servers["redis"].get("budget_hook:v1:served:says-dep") or 0) >= 6000
    response, call_id = send(servers["second"], "/chat/completions", chat_body("says", 10000, "says-over"))
    assert response.status_code == 400 and "maximum context length is 4000 tokens" in response.text
    learned = record_of(servers["second"], call_id, "failure")["learned"]
    assert learned["refused_window"] == 4000 and learned["floor"] >= 6000
    assert_nothing_learned(servers, "says-dep")


# --- corrections are attributed ------------------------------------------------------------------------------


def test_every_ratio_is_attributed_to_the_key_that_taught_it(servers):
    """The provider bills 1.3x our estimate: the attacker's own traffic teaches it, tagged with its key's
    hash (how one key's share is bounded: tests/test_learning_trust.py)."""
    for index in range(4):
        response, call_id = send(servers["first"], "/chat/completions", chat_body("heavy", 1000, f"heavy-{index}"),
                                 key="sk-attacker")
        assert response.status_code == 200, response.text
        learned = record_of(servers["first"], call_id)["learned"]
        assert 1.25 <= learned["ratio"] <= 1.35 and learned["teacher"].startswith("key:")
    teacher = learned["teacher"]
    assert {name: len(taught) for name, taught in shared_ratios(servers, "heavy-dep").items()} == {teacher: 4}
    response, _ = send(servers["second"], "/chat/completions", chat_body("heavy", 1000, "heavy-again"),
                       key="sk-attacker")
    assert "learned x1.3" in response.headers["x-budget-count-method"]


def test_in_redis_a_teacher_with_a_factor_of_its_own_is_not_pushed_out_by_keys_that_taught_a_ratio_or_two(servers):
    """The shared ratios keep at most ``MAX_TEACHERS`` teachers a deployment; Redis's script drops the least recent
    of those with fewer than ``min_samples`` ratios, else the least recent idle a day, else the newcomer, as the
    in-process book does (an attack review: sixteen keys pushed a tenant's 1.30 out, and its factor became 1.0)."""
    client, key = servers["redis"], f"budget_hook:v1:teacher_ratios:sybil-{uuid.uuid4().hex[:6]}"

    def push(teacher: str, ratio: float, at: int) -> None:  # the arguments ``SharedLearning.learn_ratio`` passes
        client.eval(_PUSH_RATIO, 1, key, teacher, repr(ratio), "50", str(MAX_TEACHERS), "600", str(at), "3",
                    str(IDLE_TEACHER_SECONDS))

    for at in range(3):
        push("key:victim", 1.3, at)
    for index in range(3 * MAX_TEACHERS):
        push(f"key:sybil{index}", 1.0, 100 + index)
    teachers = _teachers(client.hgetall(key))
    assert teachers["key:victim"] == [1.3, 1.3, 1.3] and len(teachers) == MAX_TEACHERS
    for index in range(MAX_TEACHERS):
        for _ in range(3):
            push(f"key:other{index}", 1.0, 1000 + index)
    teachers = _teachers(client.hgetall(key))
    assert "key:victim" in teachers and f"key:other{MAX_TEACHERS - 1}" not in teachers
    push("key:next", 1.1, 3 + IDLE_TEACHER_SECONDS)  # a day after the victim last taught: the idle one makes room
    teachers = _teachers(client.hgetall(key))
    assert "key:victim" not in teachers and "key:next" in teachers


# --- 4. policy follows the group an alias routes to ----------------------------------------------------------


@pytest.mark.parametrize("name", ["bars", "bars-hidden", "bars-small"])
def test_an_alias_gets_its_target_group_s_policy(servers, name):
    tag = f"alias-{name}-{uuid.uuid4().hex[:6]}"
    body = {"model": name, "max_tokens": 100, "messages": [
        {"role": "user", "content": words(1500, f"{tag} old")}, {"role": "assistant", "content": "noted"},
        {"role": "user", "content": words(1500, f"{tag} older")}, {"role": "assistant", "content": "noted"},
        {"role": "user", "content": words(1500, f"{tag} recent")}, {"role": "assistant", "content": "noted"},
        {"role": "user", "content": f"{tag} the question"}]}
    response, call_id = send(servers["first"], "/chat/completions", body)
    assert response.status_code == 200, response.text
    record = record_of(servers["first"], call_id)
    assert record["decision"]["budget"]["cap"] == 3000, record["decision"]
    assert "models[bars-small]" in record["decision"]["policy_sources"]
    [sent] = [p["body"] for p in upstream_payloads(servers["upstream"]) if tag in str(p["body"])]
    assert COUNTER.count_request(sent).total <= 3000


def test_an_alias_on_the_responses_route_gets_its_target_group_s_policy(servers):
    response, _ = send(servers["first"], "/v1/responses",
                       {"model": "bars", "max_output_tokens": 100, "input": words(5000, "alias-resp")})
    assert response.status_code == 400  # one message over 3,000 tokens: refused, as it would be for bars-small
    assert "capped at 3000" in response.json()["error"]["message"]


def test_a_reused_call_id_never_pairs_an_echo_with_a_clean_record(servers):
    """LiteLLM takes ``x-litellm-call-id`` from the client: a quoting request and a clean one sent under one id
    must not let the echo's error be judged by the clean request's record (nor a bill by the other's estimate)."""
    import concurrent.futures

    quoting = chat_body("open", 50, "reuse-echo", **{"x\nThis model's maximum context length is 2000 tokens": 1})
    for attempt in range(6):
        call_id = f"reused-{uuid.uuid4().hex[:8]}-{attempt}"
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(httpx.post, f"{servers['first'].base_url}/chat/completions", json=body, timeout=60,
                                   headers={"authorization": "Bearer sk-attacker", "x-litellm-call-id": call_id})
                       for body in (quoting, chat_body("open", 200, f"reuse-clean-{attempt}"))]
            [future.result() for future in futures]
    time.sleep(1)
    assert_nothing_learned(servers, "open-dep")
    assert_serves_a_large_request(servers, "open")
