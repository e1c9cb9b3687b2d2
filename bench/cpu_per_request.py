"""CPU per request inside a real proxy: what budget_hook adds to LiteLLM's own work, as ratios.

    python bench/cpu_per_request.py                  # the table (about 12 minutes on 2 shared cores)
    python bench/cpu_per_request.py --only small,agent   # the workloads whose name starts with these
    python bench/cpu_per_request.py --memory         # start-up footprint and growth over 10,000 requests
    python bench/cpu_per_request.py --hooks          # where the plugin's CPU goes: each hook, inside the proxy
    python bench/cpu_per_request.py --plugin-src /tmp/old/src   # and another version, in the same rounds
    python bench/cpu_per_request.py --dropped        # in process: what a first-time trim tokenizes, and drops

Two litellm proxies, identical but for budget_hook, in front of one local fake provider. Each workload
sends the same request bodies, one at a time, to both proxies in interleaved rounds (the order alternates),
and reads the CPU each proxy process spent (utime + stime from ``/proc/<pid>/stat``, its worker children
included) around each round. CPU time, unlike throughput, does not depend on what else runs on the
machine, so the figures hold on 2 shared cores; LiteLLM's own is the median of its rounds, and what the plugin
adds the median of the per-round differences (a drift in the machine's load moves both proxies of a round). Printed per workload:
LiteLLM's own CPU per request (the proxy without the plugin), what the plugin adds, their ratio, and the
goal (issue 25).

Workloads: chat, an agent with tools (the router rebuilds ``tools`` per attempt), ``/v1/messages`` to an
Anthropic deployment and ``/v1/responses``, each trimmed first time (a history never seen) and warm (the
same history plus one message), and a 1M-token history that fits, cold and warm.

``--hooks``: one proxy whose plugin measures itself (``bench/inproxy/timed_budget_hook.py``): the CPU time of each
hook and of the decision, per request (the decision is inside the pre-call hook's figure when it runs inline, on the
event loop; a large request's runs in the pool, apart), and of tiktoken inside the decision (``encode``).

``--dropped``: in process (no proxy), the first-time trims' bodies: the trim's CPU, tiktoken's part of it and the
part spent on the originals, and the share of the originals' tokens the trim drops or rewrites: what a trim that
did not tokenize material it does not forward verbatim could save (issue 25's goal for first-time trims).

``--memory``: each proxy's resident memory after a warm-up (the plugin's start-up footprint is the
difference), then its growth over 10,000 distinct requests (agent turns with tools, trims, small chats).

Every process binds 127.0.0.1 and is stopped by its PID.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.harness import MASTER_KEY, rss_kib, start_fake_provider, start_proxy

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "build", "log", "scrolls", "past",
         "error", "warning", "in", "function", "module", "returned", "value", "expected", "test", "failed", "passed",
         "line", "file", "path", "src", "main", "def", "class", "import", "return", "self", "None", "True", "False",
         "config", "option", "setting", "request", "response", "handler", "server", "client", "timeout"]
TICKS = 100  # os.sysconf("SC_CLK_TCK") on Linux


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and its children (the proxy's worker), in seconds."""
    total = 0
    pids = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(child) for child in (task / "children").read_text().split()]
    except OSError:
        pass
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the line)
    return total / TICKS


class Text:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(words))


TOOLS = [{"type": "function", "function": {
    "name": f"tool_{index}", "description": "Run a command in the workspace and return its output. " * 3,
    "parameters": {"type": "object", "properties": {
        "cmd": {"type": "string", "description": "the command line to run"},
        "timeout": {"type": "integer", "description": "seconds before the command is stopped"}},
        "required": ["cmd"]}}} for index in range(8)]


def chat_history(text: Text, steps: int, result_words: int, tag: str) -> list[dict]:
    messages = [{"role": "system", "content": "You are a coding agent. " + text(60)},
                {"role": "user", "content": f"{tag}: fix the failing build. " + text(40)}]
    for step in range(steps):
        call_id = f"call_{tag}_{step}"
        messages += [{"role": "assistant", "content": None, "tool_calls": [{
                          "id": call_id, "type": "function",
                          "function": {"name": "tool_1", "arguments": json.dumps({"cmd": f"make step{step}"})}}]},
                     {"role": "tool", "tool_call_id": call_id, "content": text(result_words)},
                     {"role": "assistant", "content": text(30)}]
    return messages


def anthropic_history(text: Text, steps: int, result_words: int, tag: str) -> list[dict]:
    messages = [{"role": "user", "content": f"{tag}: fix the failing build. " + text(40)}]
    for step in range(steps):
        call_id = f"toolu_{tag}_{step}"
        messages += [{"role": "assistant", "content": [
                          {"type": "text", "text": text(30)},
                          {"type": "tool_use", "id": call_id, "name": "tool_1", "input": {"cmd": f"make step{step}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                                   "content": text(result_words)}]}]
    return messages


def responses_items(text: Text, steps: int, result_words: int, tag: str) -> list[dict]:
    items: list[dict] = [{"role": "user", "content": f"{tag}: fix the failing build. " + text(40)}]
    for step in range(steps):
        call_id = f"fc_{tag}_{step}"
        items += [{"type": "function_call", "call_id": call_id, "name": "tool_1",
                   "arguments": json.dumps({"cmd": f"make step{step}"})},
                  {"type": "function_call_output", "call_id": call_id, "output": text(result_words)},
                  {"role": "assistant", "content": text(30)}]
    return items


ANTHROPIC_TOOLS = [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in TOOLS]
RESPONSES_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]


@dataclass
class Workload:
    name: str
    route: str
    #: the bodies of one round (``round``: its number, so that "first time" bodies are never seen before)
    bodies: Callable[[int], list[dict]]
    goal: float | None = None
    #: sent once to both proxies before the rounds (the history a warm workload resends)
    warm_up: list[dict] | None = None


def workloads(per_round: int, big_per_round: int) -> list[Workload]:
    text = Text(7)
    out: list[Workload] = []
    serial = iter(range(10**9))
    # small requests cost a few ms: more of them per round, so that the 10 ms clock tick is 0.1 ms per request
    per_round, trims_per_round = 4 * per_round, per_round

    def small(r: int) -> list[dict]:
        return [{"model": "chat", "max_tokens": 200, "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": f"question {next(serial)}: " + text(60)}]} for _ in range(per_round)]
    out.append(Workload("small chat (~100 tokens)", "/v1/chat/completions", small, 0.05))

    agent_base = chat_history(text, 6, 120, "agent")

    def agent_warm(r: int) -> list[dict]:
        return [{"model": "chat", "max_tokens": 500, "tools": TOOLS, "messages": [
            *agent_base, {"role": "user", "content": f"turn {next(serial)}: and now?"}]} for _ in range(per_round)]

    def agent_cold(r: int) -> list[dict]:
        return [{"model": "chat", "max_tokens": 500, "tools": TOOLS, "messages": [
            *chat_history(text, 6, 120, f"cold{next(serial)}"), {"role": "user", "content": "and now?"}]}
            for _ in range(per_round)]
    out.append(Workload("agent, 20 messages + tools, fits (warm)", "/v1/chat/completions", agent_warm, 0.05,
                        warm_up=agent_warm(0)[:1]))
    out.append(Workload("agent, 20 messages + tools, fits (cold)", "/v1/chat/completions", agent_cold, 0.05))

    def trim_cold(r: int) -> list[dict]:
        return [{"model": "trim", "max_tokens": 500, "tools": TOOLS, "messages": [
            *chat_history(text, 20, 2000, f"trim{next(serial)}"), {"role": "user", "content": "and now?"}]}
            for _ in range(trims_per_round)]
    trim_base = chat_history(text, 20, 2000, "trimbase")

    def trim_warm(r: int) -> list[dict]:
        return [{"model": "trim", "max_tokens": 500, "tools": TOOLS, "messages": [
            *trim_base, {"role": "user", "content": f"turn {next(serial)}: and now?"}]} for _ in range(trims_per_round)]
    out.append(Workload("chat trimmed first time (60 msgs, ~43k -> 16k window)", "/v1/chat/completions",
                        trim_cold, 0.5))
    out.append(Workload("chat trimmed warm (same history + 1 message)", "/v1/chat/completions", trim_warm, 0.15,
                        warm_up=trim_warm(0)[:1]))

    def messages_body(history: list[dict], last: str) -> dict:
        return {"model": "claude-trim", "max_tokens": 500, "tools": ANTHROPIC_TOOLS, "system": "You are a coding agent.",
                "messages": [*history, {"role": "assistant", "content": "Done."}, {"role": "user", "content": last}]}
    messages_base = anthropic_history(text, 26, 1500, "msgbase")
    out.append(Workload("/v1/messages trimmed first time", "/v1/messages", lambda r: [
        messages_body(anthropic_history(text, 26, 1500, f"msg{next(serial)}"), "and now?")
        for _ in range(trims_per_round)],
        0.5))
    out.append(Workload("/v1/messages trimmed warm", "/v1/messages", lambda r: [
        messages_body(messages_base, f"turn {next(serial)}: and now?") for _ in range(trims_per_round)], 0.15,
        warm_up=[messages_body(messages_base, "first")]))

    def responses_body(items: list[dict], last: str) -> dict:
        return {"model": "trim", "max_output_tokens": 500, "tools": RESPONSES_TOOLS,
                "instructions": "You are a coding agent.", "input": [*items, {"role": "user", "content": last}]}
    responses_base = responses_items(text, 20, 2000, "respbase")
    out.append(Workload("/v1/responses trimmed first time", "/v1/responses", lambda r: [
        responses_body(responses_items(text, 20, 2000, f"resp{next(serial)}"), "and now?")
        for _ in range(trims_per_round)],
        0.5))
    out.append(Workload("/v1/responses trimmed warm", "/v1/responses", lambda r: [
        responses_body(responses_base, f"turn {next(serial)}: and now?") for _ in range(trims_per_round)], 0.15,
        warm_up=[responses_body(responses_base, "first")]))

    big_base = chat_history(text, 500, 2000, "big")  # about 1,000,000 tokens

    def big_cold(r: int) -> list[dict]:
        return [{"model": "big", "max_tokens": 500, "messages": [
            *chat_history(text, 500, 2000, f"big{next(serial)}"), {"role": "user", "content": "and now?"}]}
            for _ in range(big_per_round)]

    def big_warm(r: int) -> list[dict]:
        return [{"model": "big", "max_tokens": 500, "messages": [
            *big_base, {"role": "user", "content": f"turn {next(serial)}: and now?"}]} for _ in range(big_per_round)]
    out.append(Workload("1M-token history, fits (cold)", "/v1/chat/completions", big_cold, 1.0))
    out.append(Workload("1M-token history, fits (warm)", "/v1/chat/completions", big_warm, 0.05,
                        warm_up=big_warm(0)[:1]))
    return out


def config(upstream_port: int, *, plugin: bool) -> dict:
    api_base = f"http://127.0.0.1:{upstream_port}/v1"

    def openai(group: str, window: int) -> dict:
        return {"model_name": group, "litellm_params": {"model": "openai/gpt-4o-big", "api_base": api_base,
                                                        "api_key": "fake-key"},
                "model_info": {"max_input_tokens": window}}
    out: dict = {
        "model_list": [openai("chat", 128_000), openai("trim", 16_000), openai("big", 1_500_000),
                       {"model_name": "claude-trim", "model_info": {"max_input_tokens": 16_000},
                        "litellm_params": {"model": "anthropic/claude-sonnet-4-5-big", "api_key": "fake-key",
                                           "api_base": f"http://127.0.0.1:{upstream_port}"}}],
        "litellm_settings": {"num_retries": 0, "request_timeout": 600},
    }
    if plugin:
        out["litellm_settings"]["callbacks"] = "budget_hook.proxy.plugin"
        out["callback_settings"] = {"budget_hook": {}}
    return out


def start(folder: Path, cfg: dict, plugin_src: str | None = None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "litellm_config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {"PYTHONPATH": plugin_src} if plugin_src else None  # another version of the plugin, for a before/after
    return start_proxy(path, log_dir=folder, timeout=180, env=env)


def send(client: httpx.Client, url: str, bodies: list[bytes]) -> None:
    for body in bodies:
        response = client.post(url, content=body, headers={"authorization": f"Bearer {MASTER_KEY}",
                                                            "content-type": "application/json"})
        if response.status_code != 200:
            raise SystemExit(f"{url}: {response.status_code} {response.text[:500]}")


async def send_many(url: str, bodies: list[bytes], concurrency: int) -> None:
    queue = list(reversed(bodies))
    async with httpx.AsyncClient(timeout=600) as client:
        async def worker() -> None:
            while queue:
                response = await client.post(url, content=queue.pop(), headers={
                    "authorization": f"Bearer {MASTER_KEY}", "content-type": "application/json"})
                if response.status_code != 200:
                    raise SystemExit(f"{url}: {response.status_code} {response.text[:500]}")
        await asyncio.gather(*(worker() for _ in range(concurrency)))


def measure(proxies: dict, workload: Workload, rounds: int) -> dict[str, float]:
    """Median CPU seconds per request of each proxy over ``rounds`` interleaved rounds."""
    per_request: dict[str, list[float]] = {name: [] for name in proxies}
    with httpx.Client(timeout=600) as client:
        if workload.warm_up:
            for proxy in proxies.values():
                send(client, proxy.base_url + workload.route, [json.dumps(b).encode() for b in workload.warm_up])
        for round_number in range(rounds):
            bodies = [json.dumps(b).encode() for b in workload.bodies(round_number)]
            order = list(proxies) if round_number % 2 == 0 else list(reversed(proxies))
            for name in order:
                proxy = proxies[name]
                time.sleep(0.3)  # the previous round's logging callbacks
                before = cpu_seconds(proxy.pid)
                send(client, proxy.base_url + workload.route, bodies)
                time.sleep(0.3)  # this round's success callbacks run after the responses
                per_request[name].append((cpu_seconds(proxy.pid) - before) / len(bodies))
    # LiteLLM's own cost: the median of the plugin-less proxy's rounds; what a plugin adds: the median of its
    # per-round differences with that proxy (paired rounds: a drift in the machine's load moves both)
    alone = per_request["without"]
    out = {"without": statistics.median(alone)}
    for name, samples in per_request.items():
        if name != "without":
            out[name] = out["without"] + statistics.median(w - a for w, a in zip(samples, alone, strict=True))
    return out


def run_table(workdir: Path, rounds: int, per_round: int, big_per_round: int, only: str | None,
              plugin_src: str | None = None) -> list[dict]:
    upstream = start_fake_provider(workdir, {"gpt-4o-big": 10**8, "claude-sonnet-4-5-big": 10**8}, record=False)
    proxies = {}
    rows = []
    try:
        for name, plugin in (("without", False), ("with", True)):
            proxies[name] = start(workdir / name, config(upstream.port, plugin=plugin))
        if plugin_src:  # a third proxy: the plugin imported from another source folder, measured in the same rounds
            proxies["other"] = start(workdir / "other", config(upstream.port, plugin=True), plugin_src)
        # one-time costs (encodings, LiteLLM's own first-call work) before anything is measured
        for workload in workloads(2, 1)[:2]:
            measure(proxies, Workload(workload.name, workload.route, workload.bodies), 1)
        print(f"CPU per request, median of {rounds} interleaved rounds ({per_round} requests each, {4 * per_round} "
              f"for the small ones, {big_per_round} for the 1M-token history), utime+stime of each proxy process")
        print(f"{'request':58s} {'LiteLLM alone':>13s} {'plugin adds':>12s} {'ratio':>6s} {'goal':>6s}"
              + (f"         {'--plugin-src adds':>17s} {'ratio':>6s}" if plugin_src else ""))
        for workload in workloads(per_round, big_per_round):
            if only and not any(workload.name.startswith(one) or workload.route.endswith(one)
                                for one in only.split(",")):
                continue
            cpu = measure(proxies, workload, rounds)
            alone, added = cpu["without"], cpu["with"] - cpu["without"]
            ratio = added / alone if alone else float("nan")
            goal = workload.goal
            mark = "" if goal is None else ("  met" if ratio <= goal else "  NOT met")
            other = ""
            row = {"request": workload.name, "litellm_ms": alone * 1000, "added_ms": added * 1000, "ratio": ratio,
                   "goal": goal}
            if "other" in cpu:
                other_added = cpu["other"] - alone
                row.update(other_added_ms=other_added * 1000, other_ratio=other_added / alone if alone else float("nan"))
                other = f"{'':{12 - len(mark)}s}{other_added * 1000:+14.1f} ms {row['other_ratio']:6.2f}"
            print(f"{workload.name:58s} {alone * 1000:10.1f} ms {added * 1000:+9.1f} ms {ratio:6.2f} "
                  f"{goal if goal is not None else '':>6}{mark}{other}", flush=True)
            rows.append(row)
    finally:
        for proxy in proxies.values():
            proxy.stop()
        upstream.stop()
    return rows


def hooks(workdir: Path, per_round: int, only: str | None) -> None:
    """The CPU time of each of the plugin's hooks and of the decision, per request, measured inside the proxy
    (``bench/inproxy/timed_budget_hook.py``): where what the plugin adds goes."""
    upstream = start_fake_provider(workdir, {"gpt-4o-big": 10**8, "claude-sonnet-4-5-big": 10**8}, record=False)
    cfg = config(upstream.port, plugin=True)
    cfg["litellm_settings"]["callbacks"] = "timed_budget_hook.plugin"
    proxy = start(workdir / "timed", cfg, str(ROOT / "bench" / "inproxy"))
    names = ("async_pre_call_hook", "decide", "encode", "async_pre_call_deployment_hook",
             "async_post_call_response_headers_hook", "async_log_success_event")
    try:
        with httpx.Client(timeout=600) as client:
            def totals() -> dict:
                time.sleep(0.3)  # the success callbacks of the last request
                response = client.get(proxy.base_url + "/budget_hook/bench/hooks")
                return response.json()
            print(f"CPU time per request inside the proxy (thread time), {per_round} requests per workload, "
                  "after one round of warm-up")
            print(f"{'request':58s} " + " ".join(f"{name.replace('async_', '')[:14]:>14s}" for name in names)
                  + "  decisions, tokenizations per request")
            for workload in workloads(per_round, 1):
                if only and not any(workload.name.startswith(one) or workload.route.endswith(one)
                                    for one in only.split(",")):
                    continue
                send(client, proxy.base_url + workload.route,
                     [json.dumps(b).encode() for b in workload.warm_up or workload.bodies(0)[:2]])
                bodies = [json.dumps(b).encode() for b in workload.bodies(1)]
                before = totals()
                send(client, proxy.base_url + workload.route, bodies)
                after = totals()
                cells = []
                for name in names:
                    spent = after.get(name, {"seconds": 0.0})["seconds"] - before.get(name, {"seconds": 0.0})["seconds"]
                    cells.append(f"{spent / len(bodies) * 1000:11.2f} ms")
                calls = [(after.get(name, {"calls": 0})["calls"] - before.get(name, {"calls": 0})["calls"]) / len(bodies)
                         for name in ("decide", "encode")]
                print(f"{workload.name:58s} " + " ".join(cells) + f"  {calls[0]:.1f}, {calls[1]:.1f}", flush=True)
    finally:
        proxy.stop()
        upstream.stop()


def dropped(count: int) -> None:
    """In process: for each first-time trim, its thread CPU, tiktoken's part, tiktoken on the originals alone, and
    the share of the originals' tokens dropped and rewritten (``--dropped``)."""
    from budget_hook.budget import compute_budget
    from budget_hook.counting import TokenCounter
    from budget_hook.shapes.anthropic import SHAPE as MESSAGES
    from budget_hook.shapes.chat import SHAPE as CHAT
    from budget_hook.shapes.responses import SHAPE as RESPONSES
    from budget_hook.trimming import TrimPolicy
    from budget_hook.trimming.ladder import REMOVING_ACTIONS

    cases = {"chat trimmed first time": (CHAT, "gpt-4o", "messages"),
             "/v1/messages trimmed first time": (MESSAGES, "claude-sonnet-4-5", "messages"),
             "/v1/responses trimmed first time": (RESPONSES, "gpt-4o", "input")}
    budget = compute_budget(16_000, requested_output_tokens=500)
    print(f"in process, {count} first-time trims each (thread CPU per trim)")
    for workload in workloads(count, 1):
        case = next((c for name, c in cases.items() if workload.name.startswith(name)), None)
        if case is None:
            continue
        shape, model, field = case
        counter = TokenCounter.for_model(model)
        encoding, spent = counter.encoding, [0.0]
        encode = encoding.encode_ordinary

        def timed(text: str, encode: Callable = encode, spent: list = spent) -> list[int]:
            start = time.thread_time()
            try:
                return encode(text)
            finally:
                spent[0] += time.thread_time() - start
        shape.trim(workload.bodies(0)[0], counter=counter, budget=budget, policy=TrimPolicy())  # warm-up
        encoding.encode_ordinary = timed
        bodies = workload.bodies(1)[:count]
        trim = originals = before = removed = rewritten = 0.0
        spent[0] = 0.0
        for body in bodies:
            start = time.thread_time()
            report = shape.trim(body, counter=counter, budget=budget, policy=TrimPolicy()).report
            trim += time.thread_time() - start
            before += report.tokens_before
            removed += sum(a.tokens_before for a in report.actions if a.action in REMOVING_ACTIONS)
            rewritten += sum(a.tokens_before for a in report.actions if a.action not in REMOVING_ACTIONS)
        tiktoken = spent[0]
        texts = [text for body in bodies for text in _strings(body[field])]
        start = time.thread_time()
        for text in texts:
            encode(text)
        originals = time.thread_time() - start
        del encoding.encode_ordinary
        ms = 1000 / len(bodies)
        print(f"{workload.name:40s} trim {trim * ms:5.2f} ms, tiktoken {tiktoken * ms:5.2f} ms (on the originals "
              f"{originals * ms:5.2f} ms); of the originals' tokens {removed / before:4.0%} dropped, "
              f"{rewritten / before:4.0%} rewritten: not tokenizing the dropped would save "
              f"{originals * ms * removed / before:4.2f} ms, the dropped and rewritten "
              f"{originals * ms * (removed + rewritten) / before:4.2f} ms", flush=True)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [text for item in items for text in _strings(item)]


def memory(workdir: Path, count: int) -> None:
    """Start-up footprint after a warm-up, and growth over ``count`` distinct requests."""
    upstream = start_fake_provider(workdir, {"gpt-4o-big": 10**8, "claude-sonnet-4-5-big": 10**8}, record=False)
    proxies = {}
    try:
        for name, plugin in (("without", False), ("with", True)):
            proxies[name] = start(workdir / f"mem-{name}", config(upstream.port, plugin=plugin))
        started = {name: rss_kib(proxy.pid)["VmRSS"] for name, proxy in proxies.items()}
        loads = workloads(1, 1)
        # distinct requests of the sizes most traffic has (small chats, agent turns with tools, a trimmed turn)
        mix = [w for w in loads if w.route == "/v1/chat/completions" and not w.name.startswith(("1M", "chat trimmed f"))]
        warm = [(w.route, body) for w in loads if not w.name.startswith("1M") for body in w.bodies(0)]
        with httpx.Client(timeout=600) as client:
            for proxy in proxies.values():
                for route, body in warm:
                    send(client, proxy.base_url + route, [json.dumps(body).encode()])
            time.sleep(1)
            warmed = {name: rss_kib(proxy.pid)["VmRSS"] for name, proxy in proxies.items()}
            bodies: list[bytes] = []
            for index in range(count):
                bodies += [json.dumps(body).encode() for body in mix[index % len(mix)].bodies(index)]
                if len(bodies) >= count:
                    break
            bodies = bodies[:count]
            grown = {}
            for name, proxy in proxies.items():
                asyncio.run(send_many(proxy.base_url + "/v1/chat/completions", bodies, 8))
                time.sleep(2)
                grown[name] = rss_kib(proxy.pid)
        print(f"resident memory (MiB): started {started['without'] // 1024} without / {started['with'] // 1024} with; "
              f"after a {len(warm)}-request warm-up {warmed['without'] // 1024} / {warmed['with'] // 1024}: "
              f"the plugin's footprint {(warmed['with'] - warmed['without']) // 1024} MiB")
        growth = {name: (grown[name]["VmRSS"] - warmed[name]) // 1024 for name in proxies}
        print(f"after {count} distinct requests: {grown['without']['VmRSS'] // 1024} / {grown['with']['VmRSS'] // 1024} "
              f"MiB (peak {grown['without']['VmHWM'] // 1024} / {grown['with']['VmHWM'] // 1024}): growth "
              f"{growth['without']} MiB without, {growth['with']} MiB with: "
              f"{growth['with'] - growth['without']} MiB attributable to the plugin")
    finally:
        for proxy in proxies.values():
            proxy.stop()
        upstream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=30, help="requests per round (x4 for the small ones)")
    parser.add_argument("--big-per-round", type=int, default=2)
    parser.add_argument("--only", help="workloads whose name starts with one of these (comma-separated), or "
                                       "whose route ends with it (messages, responses)")
    parser.add_argument("--memory", action="store_true", help="start-up footprint and growth instead of the table")
    parser.add_argument("--hooks", action="store_true", help="CPU time of each hook and of the decision, per "
                                                              "request, measured inside the proxy")
    parser.add_argument("--dropped", action="store_true", help="in process: what a first-time trim tokenizes, "
                                                                "and the share of it the trim drops")
    parser.add_argument("--requests", type=int, default=10_000, help="--memory: distinct requests sent")
    parser.add_argument("--json", help="also write the table to this file")
    parser.add_argument("--plugin-src", help="also measure, in the same rounds, a third proxy whose plugin is "
                                             "imported from this src folder (another version: git archive <rev> "
                                             "src | tar -x -C /tmp/old, then /tmp/old/src)")
    args = parser.parse_args()
    if args.dropped:
        dropped(args.per_round)
        return
    with TemporaryDirectory(prefix="budget_hook_cpu_") as folder:
        if args.memory:
            memory(Path(folder), args.requests)
            return
        if args.hooks:
            hooks(Path(folder), args.per_round, args.only)
            return
        rows = run_table(Path(folder), args.rounds, args.per_round, args.big_per_round, args.only, args.plugin_src)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
