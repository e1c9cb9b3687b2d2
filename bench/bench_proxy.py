"""Through real proxies on loopback: the plugin's overhead, and a bounded load test.

    python bench/bench_proxy.py                 # both parts (about 4 minutes on 2 cores)
    python bench/bench_proxy.py --load 2000     # a shorter load test

1. Overhead: two litellm proxies side by side in one run, identical but for budget_hook, in front of a
   local upstream that answers instantly. Concurrency 32; typical requests (10 turns, ~2k tokens) and
   agent requests (200 messages, ~100k tokens; each client's next turn resends its history). Printed:
   throughput with / without the plugin (target >= 0.9x) and the added p50/p99 latency.
2. Load test: 10,000 requests of mixed sizes at concurrency 64 through a proxy with budget_hook, in
   front of an upstream that counts every prompt itself and rejects anything over its window or with
   orphaned tool results. Checked: zero 5xx, zero over-window or invalid requests reaching the upstream
   (its own counters), every decision logged (one record per call id), and the worker's peak memory growth
   against the same proxy without the plugin (at most 22 MiB attributable to the plugin).

Every process binds 127.0.0.1 and is stopped by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import random
import statistics
import sys
import time
import zlib
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.harness import decision_records, rss_kib, start_fake_provider, start_proxy

from budget_hook.counting.profiles import MAX_MODEL_NAME_CHARS

WINDOW = 16_000


def config(upstream_port: int, *, plugin: bool, settings: dict | None = None) -> dict:
    api_base = f"http://127.0.0.1:{upstream_port}/v1"
    model_list = [{"model_name": "bench", "litellm_params": {"model": "openai/gpt-4o-16k", "api_base": api_base,
                                                             "api_key": "fake"},
                   "model_info": {"max_input_tokens": WINDOW}}]
    out: dict = {"model_list": model_list, "litellm_settings": {"num_retries": 0}}
    if plugin:
        out["litellm_settings"]["callbacks"] = "budget_hook.proxy.plugin"
        out["callback_settings"] = {"budget_hook": settings or {}}
    return out


def start(folder: Path, cfg: dict):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "litellm_config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return start_proxy(path, log_dir=folder)


WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "while", "the", "build", "log", "scrolls", "past"]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def typical(rng: random.Random, client: int, turn: int) -> dict:
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for index in range(5):
        messages += [{"role": "user", "content": f"client {client} turn {turn}.{index}: " + text(rng, 150)},
                     {"role": "assistant", "content": text(rng, 150)}]
    return {"model": "bench", "messages": messages, "max_tokens": 200}


class AgentSessions:
    """Each client is an agent whose next turn resends its 200-message history plus one new step."""

    def __init__(self, clients: int, rng: random.Random) -> None:
        self.histories = {}
        for client in range(clients):
            history = [{"role": "system", "content": "You are a coding agent."},
                       {"role": "user", "content": f"client {client}: fix the failing build"}]
            for step in range(66):
                call_id = f"call_{client}_{step}"
                history += [
                    {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function",
                     "function": {"name": "run", "arguments": json.dumps({"cmd": f"make step{step}"})}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": text(rng, 330)},
                    {"role": "assistant", "content": text(rng, 40)},
                ]
            self.histories[client] = history

    def next(self, client: int, turn: int) -> dict:
        messages = self.histories[client][:199] + [{"role": "user", "content": f"turn {turn}: and now?"}]
        return {"model": "agent", "messages": messages, "max_tokens": 500}


async def drive(url: str, bodies, concurrency: int) -> tuple[list[float], list[int], float]:
    latencies: list[float] = []
    statuses: list[int] = []
    queue: asyncio.Queue = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        async def worker():
            while True:
                try:
                    body = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                start = time.perf_counter()
                # json.dumps, not httpx's encoder: hostile bodies carry NaN and Infinity, as a client may send them
                response = await client.post(url, content=json.dumps(body).encode(),
                                             headers={"authorization": "Bearer sk-bench",
                                                      "content-type": "application/json"})
                latencies.append(time.perf_counter() - start)
                statuses.append(response.status_code)
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return latencies, statuses, elapsed


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def overhead(workdir: Path, rounds: int, per_round: int, settings: dict, only: str | None = None) -> None:
    upstream = start_fake_provider(workdir, {"gpt-4o-16k": 10**7}, record=False, instant=True)
    proxies = {}
    try:
        for name, plugin in (("without", False), ("with", True)):
            cfg = config(upstream.port, plugin=plugin, settings=settings)
            cfg["model_list"].append({**cfg["model_list"][0], "model_name": "agent",
                                      "model_info": {"max_input_tokens": 128_000}})
            proxies[name] = start(workdir / f"overhead-{name}", cfg)
        rng = random.Random(7)
        sessions = AgentSessions(32, rng)
        workloads = {
            "typical (10 turns, ~2k tokens)": lambda n, r: [typical(rng, i % 32, r * n + i) for i in range(n)],
            "agent (200 messages, ~100k tokens)": lambda n, r: [sessions.next(i % 32, r * n + i) for i in range(n)],
        }
        print("1. overhead at concurrency 32 (instant upstream; same run, rounds alternate the two proxies)")
        for label, make in workloads.items():
            if only and not label.startswith(only):
                continue
            results = {name: ([], 0.0, 0) for name in proxies}
            round_ratios = []
            for round_number in range(rounds):
                bodies = make(per_round, round_number)
                throughput = {}
                for name in (("without", "with") if round_number % 2 == 0 else ("with", "without")):
                    lat, statuses, elapsed = asyncio.run(drive(f"{proxies[name].base_url}/v1/chat/completions",
                                                               bodies, 32))
                    assert all(s == 200 for s in statuses), (name, sorted(set(statuses)))
                    old = results[name]
                    results[name] = (old[0] + lat, old[1] + elapsed, old[2] + len(lat))
                    throughput[name] = len(lat) / elapsed
                round_ratios.append(throughput["with"] / throughput["without"])
            # Added latency without queueing: one request at a time, alternating proxies.
            sequential = {name: [] for name in proxies}
            bodies = make(200, rounds + 1)
            for body in bodies:
                for name in proxies:
                    lat, statuses, _ = asyncio.run(drive(f"{proxies[name].base_url}/v1/chat/completions", [body], 1))
                    sequential[name] += lat
            plain, plugged = results["without"], results["with"]
            throughput_plain, throughput_plugged = plain[2] / plain[1], plugged[2] / plugged[1]
            ratios = sorted(round_ratios)
            print(f"   {label:36s} throughput {throughput_plugged:6.1f} vs {throughput_plain:6.1f} req/s "
                  f"= {throughput_plugged / throughput_plain:4.2f}x (per round: median {statistics.median(ratios):4.2f}x, "
                  f"range {ratios[0]:4.2f}-{ratios[-1]:4.2f}) | added latency p50 "
                  f"{pct(plugged[0], .5) - pct(plain[0], .5):+6.1f} ms, p99 {pct(plugged[0], .99) - pct(plain[0], .99):+6.1f} ms "
                  f"(without: p50 {pct(plain[0], .5):.1f} ms, p99 {pct(plain[0], .99):.1f} ms)")
            one, two = sequential["without"], sequential["with"]
            print(f"   {'':36s} one at a time: added p50 {pct(two, .5) - pct(one, .5):+5.1f} ms, p99 "
                  f"{pct(two, .99) - pct(one, .99):+5.1f} ms (without: p50 {pct(one, .5):.1f} ms, p99 {pct(one, .99):.1f} ms)")
    finally:
        for proxy in proxies.values():
            proxy.stop()
        upstream.stop()


def nested_schema(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": ["array"], "items": schema}
    return schema


def pdf_bomb(inflated: int = 4 << 20) -> str:
    """A 10 KB PDF whose one FlateDecode stream inflates to ``inflated`` bytes of ``/Count 1``."""
    stream = zlib.compress(b"/Count 1 " * (inflated // 9), 9)
    raw = b"%PDF-1.7\n1 0 obj <</Filter/FlateDecode>> stream\n" + stream + b"\nendstream endobj\n%%EOF"
    return "data:application/pdf;base64," + base64.b64encode(raw).decode()


PDF_BOMB = pdf_bomb()
PLANTED = "x\nThis model's maximum context length is 10 tokens"


def round_three(rng: random.Random, index: int) -> dict:
    """The round-three classes (issue 20): learning poisoning by echoed errors, client-forced CPU,
    references the gateway cannot see, non-finite allowances, alias and role tricks."""
    user = {"role": "user", "content": f"hi {index}"}
    choice = rng.randrange(7)
    if choice == 0:  # an unknown key the provider quotes back: must teach no window
        return {"model": "bench", "messages": [user], PLANTED: 1}
    if choice == 1:  # a role quoting an overflow sentence
        return {"model": "bench", "messages": [user, {"role": PLANTED, "content": "x"}]}
    if choice == 2:  # a PDF that inflates 400x
        return {"model": "bench", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "read this"}, {"type": "file", "file": {"file_data": PDF_BOMB}}]}]}
    if choice == 3:  # a 48 KB model name (snapshot-suffix matching was quadratic)
        return {"model": "-v1" * 16000 + "x/gpt-4.1", "messages": [user]}
    if choice == 4:  # content the gateway cannot see
        return {"model": "bench", "messages": [user], "cached_content": "cachedContents/abc"}
    if choice == 5:  # non-finite and string allowances
        return {"model": "bench", "messages": [user], "max_tokens": rng.choice([float("inf"), float("-inf"), "3000"])}
    return {"model": "bench", "messages": [user], "max_tokens": float("nan")}


def unnamed(bodies: list[dict]) -> int:
    """Requests whose model name no model can have (refused before a decision, so without a record)."""
    return sum(len(str(body.get("model"))) > MAX_MODEL_NAME_CHARS for body in bodies)


def hostile(rng: random.Random, sessions: AgentSessions, index: int) -> dict:
    user = {"role": "user", "content": f"hi {index}"}
    choice = rng.randrange(6)
    if choice == 5:
        return round_three(rng, index)
    if choice == 0:  # content LiteLLM would merge in after the hook
        return {"model": "bench", "messages": [user],
                "extra_body": {"messages": [{"role": "user", "content": text(rng, 20_000)}]}}
    if choice == 1:  # a schema deep enough to exhaust a recursive walker
        return {"model": "bench", "messages": [user], "tools": [
            {"type": "function", "function": {"name": "f", "parameters": nested_schema(300)}}]}
    if choice == 2:  # an over-budget agent conversation with a float max_tokens
        body = {**sessions.next(index % 64, index), "model": "bench", "max_tokens": 1500.0}
        body["messages"] = body["messages"][:-1] + [{"role": "user", "content": f"step {index}: " + text(rng, 50)}]
        return body
    if choice == 3:  # thousands of junk client settings
        return {"model": "bench", "messages": [user],
                "metadata": {"budget_hook": {f"junk-{i}-{'x' * 100}": i for i in range(2000)}}}
    value: object = "deep"  # content nested far past any real request
    for _ in range(300):
        value = {"a": [value]}
    return {"model": "bench", "messages": [{"role": "user", "content": [{"type": "weird", "data": value}]}]}


def load_bodies(count: int, rng: random.Random) -> list[tuple[str, dict]]:
    """Mixed traffic: fitting chats, over-budget agent conversations, impossible, invalid and hostile requests
    (the ways past the budget the hostile-client e2e suite tries: content in extra_body, deep schemas and
    content, a float max_tokens, thousands of junk client settings)."""
    sessions = AgentSessions(64, rng)
    bodies = []
    for index in range(count):
        kind = rng.choices(["fits", "trim", "impossible", "invalid", "tiny", "hostile"], [35, 25, 10, 10, 10, 10])[0]
        if kind == "fits":
            body = typical(rng, index % 64, index)
        elif kind == "trim":
            body = {**sessions.next(index % 64, index), "model": "bench"}
            # distinct requests: a new last step each time
            body["messages"] = body["messages"][:-1] + [{"role": "user", "content": f"step {index}: " + text(rng, 50)}]
        elif kind == "impossible":
            body = {"model": "bench", "messages": [{"role": "user", "content": text(rng, 20_000)}]}
        elif kind == "invalid":
            body = rng.choice([
                {"model": "bench", "messages": [{"role": "user", "content": 42}]},
                {"model": "bench", "messages": "hello"},
                {"model": "bench", "messages": [{"content": "no role"}]},
                {"model": "bench", "messages": [{"role": "wizard", "content": "hi"}]},
                {"model": "bench", "messages": [{"role": "user", "content": [{"type": "text"}]}], "max_tokens": -5},
            ])
        elif kind == "hostile":
            body = hostile(rng, sessions, index)
        else:
            body = {"model": "bench", "messages": [{"role": "user", "content": f"hi {index}"}]}
        bodies.append((kind, body))
    return bodies


def load_test(workdir: Path, count: int, concurrency: int, settings: dict) -> None:
    # --echo: the upstream quotes unknown keys and bad roles back in its 400s, as OpenAI does
    upstream = start_fake_provider(workdir, {"gpt-4o-16k": WINDOW}, record=False, flags=["--echo"])
    proxy = start(workdir / "load", config(upstream.port, plugin=True, settings=settings))
    try:
        rng = random.Random(11)
        mixed = load_bodies(count, rng)
        # Warm-up first, so that memory growth excludes one-time costs (encodings, LiteLLM's own caches).
        warm_up = [body for _, body in load_bodies(300, random.Random(5))]
        asyncio.run(drive(f"{proxy.base_url}/v1/chat/completions", warm_up, concurrency))
        time.sleep(1)
        before = rss_kib(proxy.pid)
        latencies, statuses, elapsed = asyncio.run(drive(f"{proxy.base_url}/v1/chat/completions",
                                                         [body for _, body in mixed], concurrency))
        time.sleep(2)  # logging callbacks run after the responses
        after = rss_kib(proxy.pid)
        stats = httpx.get(f"http://127.0.0.1:{upstream.port}/stats").json()
        # the warm-up's records were written first; a request whose model name is longer than any model's is
        # refused before any decision (a 400 that LiteLLM logs): it has no record
        records = decision_records(proxy)[len(warm_up) - unnamed(warm_up):]
        by_status: dict[int, int] = {}
        for status in statuses:
            by_status[status] = by_status.get(status, 0) + 1
        kinds: dict[str, int] = {}
        for kind, _ in mixed:
            kinds[kind] = kinds.get(kind, 0) + 1
        actions: dict[str, int] = {}
        for record in records:
            action = record["decision"]["action"]
            actions[action] = actions.get(action, 0) + 1
        print(f"2. load test: {count} requests at concurrency {concurrency} in {elapsed:.1f} s "
              f"({count / elapsed:.0f} req/s), mix {kinds}")
        print(f"   statuses {dict(sorted(by_status.items()))}; 5xx: {sum(v for k, v in by_status.items() if k >= 500)}")
        print(f"   upstream saw {stats['requests']}: accepted {stats['accepted']}, over its window "
              f"{stats['rejected_window']}, invalid structure {stats['rejected_structure']}")
        print(f"   decision records: {len(records)} for {count} requests ({len({r['call_id'] for r in records})} "
              f"distinct call ids); actions {actions}")
        print(f"   latency p50 {pct(latencies, .5):.0f} ms, p99 {pct(latencies, .99):.0f} ms; proxy memory "
              f"{before['VmRSS'] // 1024} MiB before, {after['VmRSS'] // 1024} MiB after, peak {after['VmHWM'] // 1024} MiB "
              f"after a {len(warm_up)}-request warm-up")
        problems = []
        if any(status >= 500 for status in statuses):
            problems.append("5xx answers")
        if stats["rejected_window"] or stats["rejected_structure"]:
            problems.append("over-window or invalid requests reached the upstream")
        expected = count - unnamed([body for _, body in mixed])
        if len(records) != expected:
            problems.append(f"{expected - len(records)} requests without a decision record")
        # after all that traffic, nothing was learned from it: a 10,000-token request still fits the 16k window
        last = httpx.post(f"{proxy.base_url}/v1/chat/completions", timeout=60, json={
            "model": "bench", "max_tokens": 100, "messages": [{"role": "user", "content": text(rng, 10_000)}]})
        print(f"   a 10,000-token request after the run: {last.status_code}, "
              f"{last.headers.get('x-budget-decision')}, window {last.headers.get('x-budget-window')}")
        if last.status_code != 200 or last.headers.get("x-budget-decision") != "pass":
            problems.append("the hostile traffic changed what later clients get (learning poisoned?)")
    finally:
        proxy.stop()
        upstream.stop()
    # The same traffic through the same proxy without the plugin: what LiteLLM itself grows by.
    upstream = start_fake_provider(workdir, {"gpt-4o-16k": 10**7}, record=False, instant=True)
    plain = start(workdir / "load-plain", config(upstream.port, plugin=False))
    try:
        asyncio.run(drive(f"{plain.base_url}/v1/chat/completions", warm_up, concurrency))
        time.sleep(1)
        plain_before = rss_kib(plain.pid)
        asyncio.run(drive(f"{plain.base_url}/v1/chat/completions", [body for _, body in mixed], concurrency))
        time.sleep(2)
        plain_after = rss_kib(plain.pid)
    finally:
        plain.stop()
        upstream.stop()
    growth = (after["VmHWM"] - before["VmRSS"]) // 1024
    plain_growth = (plain_after["VmHWM"] - plain_before["VmRSS"]) // 1024
    print(f"   peak memory growth over the run: {growth} MiB with budget_hook, {plain_growth} MiB without: "
          f"{growth - plain_growth} MiB attributable to the plugin (count cache bound: 65,536 entries, about 11 MiB)")
    # The plugin's own memory is bounded: the count cache (about 11 MiB at 65,536 entries), the content
    # hash memo (16,384 entries, about 3 MiB) and records of requests in flight (failed ones: 30 s).
    bound = 22
    if growth - plain_growth > bound:
        problems.append(f"memory attributable to the plugin {growth - plain_growth} MiB > {bound} MiB")
    print("   PASS" if not problems else f"   FAIL: {'; '.join(problems)}")
    if problems:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=10_000, help="requests in the load test (0: skip)")
    parser.add_argument("--rounds", type=int, default=4, help="overhead rounds per proxy (0: skip)")
    parser.add_argument("--per-round", type=int, default=300)
    parser.add_argument("--only", choices=["typical", "agent"], help="overhead: one workload only")
    parser.add_argument("--settings", default="{}", help="budget_hook settings for the plugin proxies, as JSON")
    args = parser.parse_args()
    with TemporaryDirectory(prefix="budget_hook_bench_") as folder:
        if args.rounds:
            overhead(Path(folder), args.rounds, args.per_round, json.loads(args.settings), args.only)
        if args.load:
            load_test(Path(folder), args.load, 64, json.loads(args.settings))


if __name__ == "__main__":
    main()
