"""Speed of the pure core, as ratios against a baseline measured in the same process.

    python bench/bench_core.py

Prints JSON:
* counting vs one raw tiktoken pass over the same message texts (target <= 1.2x);
* trimming the ~477k-token miniswe_gemini3_01 conversation for a 128k window: the full conversation
  (its last message alone is 445,779 tokens, so the right answer is a block) and its history repeated
  8x (~253k tokens, trimmed), each as time and ratio to one tiktoken pass over the same text;
* trimming time at 1x, 2x, 4x conversation length (must grow linearly: ratios near 2 and 4).
Each figure is the best of several runs, with the count cache off: this measures counting and trimming
themselves (bench_hot_path.py measures what the cache saves).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from budget_hook.budget import compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.counting.cache import COUNT_CACHE
from budget_hook.errors import CannotFitError
from budget_hook.trimming import message_text, trim_request

CONVERSATION = ROOT / "tests" / "data" / "conversations" / "miniswe_gemini3_01.json"


def best_of(function, runs: int = 5) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return min(timings)


def raw_pass(counter: TokenCounter, messages: list) -> float:
    texts = [message_text(m) for m in messages]
    encode = counter.encoding.encode_ordinary
    return best_of(lambda: [encode(t) for t in texts])


def trim_time(counter: TokenCounter, request: dict, window: int) -> tuple[float, str]:
    outcome = {}

    def run():
        try:
            result = trim_request(request, counter=counter, budget=compute_budget(window))
            outcome["result"] = f"trimmed {result.report.tokens_before} -> {result.report.tokens_after} tokens"
        except CannotFitError as exc:
            outcome["result"] = f"blocked: needs {exc.facts['tokens_after_trimming']} > budget {exc.facts['budget']}"

    return best_of(run), outcome["result"]


def main() -> None:
    COUNT_CACHE.configure(0)  # every count from scratch
    counter = TokenCounter.for_model("gpt-4o")
    messages = json.loads(CONVERSATION.read_text())["messages"]
    full = {"model": "gpt-4o", "messages": messages}
    history = messages[:-1]

    def repeated(times: int) -> dict:
        return {"model": "gpt-4o", "messages": history[:1] + history[1:] * times}

    raw_full = raw_pass(counter, messages)
    count_full = best_of(lambda: counter.count_request(full))
    report = {
        "counting": {
            "tokens": counter.count_request(full).total,
            "raw_tiktoken_seconds": round(raw_full, 4),
            "budget_hook_seconds": round(count_full, 4),
            "ratio": round(count_full / raw_full, 3),
        }
    }
    trims = {}
    for label, request in (("full_477k", full), ("history_x8", repeated(8))):
        seconds, outcome = trim_time(counter, request, 128_000)
        raw = raw_pass(counter, request["messages"])
        trims[label] = {"outcome": outcome, "seconds": round(seconds, 4), "ratio_to_one_tiktoken_pass": round(seconds / raw, 3)}
    report["trim_to_128k"] = trims
    scaling = {}
    for times in (1, 2, 4):
        request = repeated(8 * times)
        seconds, outcome = trim_time(counter, request, 128_000)
        scaling[f"{times}x"] = {"seconds": round(seconds, 4), "outcome": outcome}
    base = scaling["1x"]["seconds"]
    for key in scaling:
        scaling[key]["ratio_to_1x"] = round(scaling[key]["seconds"] / base, 2)
    report["scaling"] = scaling
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
