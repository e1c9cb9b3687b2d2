"""Hot-path benchmarks, in process: the count cache and the event loop. Every figure is a ratio against a
baseline measured in the same run.

    python bench/bench_hot_path.py

1. Count cache: a ~200k-token conversation of distinct real messages (tests/data), re-sent with one new
   message, counted and decided cold (empty cache) vs warm. Target: warm >= 20x faster.
2. Event loop: latency (p50/p99) of small requests (10 turns, ~2k tokens) through the plugin's pre-call
   hook, alone and while huge requests (~900k tokens each) keep arriving on the same event loop; with
   large requests decided in the thread pool (default) and inline (offload_chars: 0), for comparison.
3. Memory: the count cache filled to its bound by 100,000 distinct messages, measured with tracemalloc.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.counting.cache import COUNT_CACHE
from budget_hook.pipeline import decide_conversation as decide_chat
from budget_hook.policy.settings import load_settings

DATA = ROOT / "tests" / "data" / "conversations"
GPT = TokenCounter.for_model("gpt-4o")


def fresh(request: dict) -> dict:
    """As the proxy sees a request: parsed from a new HTTP body, so no string object is shared."""
    return json.loads(json.dumps(request))


def long_conversation(target_tokens: int = 200_000) -> dict:
    messages = [{"role": "system", "content": "You are a helpful agent."}]
    for copy_number in range(1, 10):  # a second pass marks its copies, so every message stays distinct
        for path in sorted(DATA.glob("*_[0-9][0-9].json")):
            if "gemini3_01" in path.stem:
                continue  # its last message alone is 445k tokens
            conversation = json.loads(path.read_text())["messages"]
            for message in conversation:
                if message.get("role") in ("user", "assistant") and isinstance(message.get("content"), str):
                    suffix = "" if copy_number == 1 else f" (session {copy_number})"
                    messages.append({"role": message["role"], "content": message["content"] + suffix})
            if GPT.count_request({"messages": messages}).total >= target_tokens:
                return {"model": "gpt-4o", "messages": messages}
    return {"model": "gpt-4o", "messages": messages}


def timed(function, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def bench_cache() -> None:
    request = long_conversation()
    tokens = GPT.count_request(request).total
    resolved = load_settings({}).layers.resolve(model_group="g")
    limits = ModelLimits(1_000_000, "bench", "gpt-4o")
    over_limits = ModelLimits(150_000, "bench", "gpt-4o")
    next_turn = fresh(request)
    next_turn["messages"].append({"role": "user", "content": "And one more question about all of that?"})

    def cold(run):
        def go():
            COUNT_CACHE.clear()
            run(fresh(next_turn))
        return go

    count = lambda body: GPT.count_request(body)  # noqa: E731
    decide = lambda body: decide_chat(body, model_group="g", limits=limits, resolved=resolved, counter=GPT)  # noqa: E731
    trim = lambda body: decide_chat(body, model_group="g", limits=over_limits, resolved=resolved, counter=GPT)  # noqa: E731
    print(f"1. count cache: {len(request['messages'])} distinct messages, {tokens} tokens, re-sent with one new message")
    for label, run in (("count", count), ("decide (fits)", decide), ("decide (trimmed to 150k window)", trim)):
        cold_time = timed(cold(run), 3)
        COUNT_CACHE.clear()
        run(fresh(request))  # the previous turn, seen before
        # Each timed run is a new turn: history seen before, the new message never.
        turns = iter(range(100))

        def warm():
            body = fresh(request)
            body["messages"].append({"role": "user", "content": f"New question number {next(turns)} about all of that?"})
            start = time.perf_counter()
            run(body)
            return time.perf_counter() - start
        warm_time = min(warm() for _ in range(5))
        print(f"   {label:32s} cold {cold_time * 1000:7.1f} ms   warm {warm_time * 1000:6.2f} ms   "
              f"speed-up {cold_time / warm_time:5.1f}x")


def small_request(index: int) -> dict:
    messages = [{"role": "system", "content": "You are terse."}]
    for turn in range(5):
        messages += [{"role": "user", "content": f"req {index} turn {turn}: " + "tell me about the weather " * 30},
                     {"role": "assistant", "content": "It is sunny and mild today, with light winds. " * 12}]
    return {"model": "g", "messages": messages, "litellm_call_id": f"small-{index}"}


def huge_request(index: int) -> dict:
    body = json.loads((DATA / "miniswe_gemini3_01.json").read_text())
    messages = [m for m in body["messages"] if isinstance(m.get("content"), str)]
    messages[-1] = {**messages[-1], "content": messages[-1]["content"] + f" variant {index}"}
    return {"model": "g", "messages": messages + copy.deepcopy(messages[1:]), "litellm_call_id": f"huge-{index}"}


async def latencies(plugin, with_huge: bool, count: int = 200) -> list[float]:
    from litellm.proxy._types import UserAPIKeyAuth
    user = UserAPIKeyAuth()
    stop = asyncio.Event()
    huge = [huge_request(i) for i in range(3)] if with_huge else []

    async def huge_stream():
        index = 0
        while not stop.is_set():
            body = fresh(huge[index % len(huge)])
            for message in body["messages"]:
                message["content"] += f" {index}"  # every message new: nothing comes from the cache
            try:
                await plugin.async_pre_call_hook(user, None, body, "acompletion")
            except Exception:
                pass  # a block is an answer too
            index += 1
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(huge_stream())] if with_huge else []
    await asyncio.sleep(0.05)
    # Small requests arrive on a fixed schedule, as from many independent clients; latency runs from the
    # planned arrival to the hook's answer, so time spent waiting for a busy event loop is counted.
    samples = []
    interval = 0.005
    first = time.perf_counter() + 0.01
    for index in range(count):
        body = small_request(index)
        arrival = first + index * interval
        delay = arrival - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await plugin.async_pre_call_hook(user, None, body, "acompletion")
        samples.append(time.perf_counter() - arrival)
    stop.set()
    for task in tasks:
        await task
    return samples


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def bench_event_loop() -> None:
    from budget_hook.proxy import BudgetHookPlugin

    tokens = GPT.count_request(huge_request(0)).total
    print(f"2. event loop: small requests (~{GPT.count_request(small_request(0)).total} tokens) while requests of "
          f"{tokens} tokens keep arriving, each counted from scratch")
    results = {}
    for label, offload in (("thread pool (default)", 50_000), ("inline (offload_chars: 0)", 0)):
        plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False, "offload_chars": offload}))
        plugin.model_limits = lambda group: ModelLimits(2_000_000, "bench", "gpt-4o")
        alone = asyncio.run(latencies(plugin, with_huge=False))
        loaded = asyncio.run(latencies(plugin, with_huge=True))
        results[label] = (alone, loaded)
        print(f"   {label:26s} alone p50 {pct(alone, .5):6.2f} ms p99 {pct(alone, .99):6.2f} ms | with huge "
              f"p50 {pct(loaded, .5):6.2f} ms p99 {pct(loaded, .99):7.2f} ms | p99 ratio "
              f"{pct(loaded, .99) / pct(alone, .99):5.1f}x")
    pool, inline = results["thread pool (default)"][1], results["inline (offload_chars: 0)"][1]
    print(f"   small-request p99 under load, inline / thread pool: {pct(inline, .99) / pct(pool, .99):.1f}x")


def bench_memory() -> None:
    import tracemalloc

    COUNT_CACHE.clear()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    for index in range(100_000):
        GPT.count_message({"role": "user", "content": f"distinct message number {index} " + "padding " * 10})
    used, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    entries = len(COUNT_CACHE)
    print(f"3. memory: 100,000 distinct messages counted; the cache holds {entries} (its bound) in "
          f"{(used - start) / 2**20:.1f} MiB, {(used - start) / entries:.0f} bytes per entry")


def bench_attempt_check() -> None:
    """The per-attempt check (async_pre_call_deployment_hook) when the attempt goes where the first
    decision assumed: it must cost next to nothing next to the pre-call decision itself."""
    from litellm.proxy._types import UserAPIKeyAuth

    from budget_hook.proxy.hook import BudgetHookPlugin

    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))
    plugin.model_limits = lambda group: ModelLimits(150_000, "bench", "gpt-4o")  # type: ignore[method-assign]
    plugin.deployment_windows.lookup = lambda key: ModelLimits(150_000, "bench", "gpt-4o")
    request = {**long_conversation(), "model": "g"}

    def pre_call() -> dict:
        data = {**fresh(request), "litellm_call_id": f"bench-{time.perf_counter_ns()}"}
        return asyncio.run(plugin.async_pre_call_hook(UserAPIKeyAuth(), None, data, "acompletion"))

    forwarded = pre_call()
    decision_seconds = timed(pre_call)
    attempt = {**forwarded, "metadata": {**forwarded["metadata"], "model_info": {"id": "d"},
                                         "deployment_model_name": "g"}}

    async def attempts(count: int) -> float:
        start = time.perf_counter()
        for _ in range(count):
            assert await plugin.async_pre_call_deployment_hook(attempt, "acompletion") is None
        return (time.perf_counter() - start) / count

    check_seconds = asyncio.run(attempts(2000))
    print(f"4. per-attempt check, attempt on the deployment the first decision assumed: {check_seconds * 1e6:.1f} us, "
          f"against {decision_seconds * 1e3:.1f} ms for the pre-call decision of the same request: "
          f"{check_seconds / decision_seconds:.4f}x")


def bench_learning_lookup() -> None:
    """What learning adds to every request: the lookup of a group's learned correction and window (no
    Redis), with every deployment's window of ratios full, against deciding a small request."""
    from budget_hook.learning import LearningSettings
    from budget_hook.proxy.shared import SharedLearning

    learning = SharedLearning(LearningSettings(share="off"))
    ids = [f"deployment-{index}" for index in range(4)]

    async def fill_and_lookup(count: int) -> float:
        for deployment in ids:
            for index in range(400):
                await learning.learn_ratio(deployment, 1000, 1000 + index % 97)
        start = time.perf_counter()
        for _ in range(count):
            await learning.lookup(ids)
        return (time.perf_counter() - start) / count

    lookup_seconds = asyncio.run(fill_and_lookup(20_000))
    settings = load_settings({})
    policy = settings.layers.resolve(model_group="g")
    request = small_request(0)
    decide_seconds = timed(lambda: decide_chat(fresh(request), model_group="g", limits=ModelLimits(8000, "b", "gpt-4o"),
                                              resolved=policy, counter=GPT), repeat=50)
    print(f"5. learning lookup (4 deployments, 200 ratios each, no Redis): {lookup_seconds * 1e6:.1f} us per request, "
          f"against {decide_seconds * 1e3:.2f} ms to decide a small request: {lookup_seconds / decide_seconds:.4f}x")


if __name__ == "__main__":
    bench_cache()
    bench_event_loop()
    bench_memory()
    bench_attempt_check()
    bench_learning_lookup()
    print(f"   count cache after the run: {COUNT_CACHE.stats()}")
