"""Reprint the Anthropic counting-accuracy figures quoted in docs/counting.md (Anthropic, "the older pydantic-ai set").

    python bench/calibrate_anthropic.py [--with-litellm] [path/to/pydantic_ai_cassette_api_usage.json]

For every recorded Anthropic request (``/v1/messages`` and ``count_tokens``) with provider-measured
usage (input + cache creation + cache read), compare budget_hook's estimate with the billed count and
with ``litellm.token_counter``. Requests whose billed input includes content the *server* produced
after the request (server tools such as web_search/web_fetch/code_execution, ``mcp_servers``, server-side
``context_management`` compaction, ``container``) are reported separately: no request-side counter can
see that content.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from budget_hook.counting import TokenCounter
from budget_hook.shapes.anthropic import anthropic_to_openai_chat

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "data" / "peer_cases" / "pydantic_ai_cassette_api_usage.json"


def is_server_side(request: dict) -> bool:
    tools = request.get("tools") or []
    server_tools = [t for t in tools if isinstance(t, dict) and t.get("type") not in (None, "custom")]
    return bool(server_tools) or any(k in request for k in ("mcp_servers", "context_management", "container"))


def load_cases(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text()) if c["api"].startswith("anthropic")]


def evaluate(cases: list[dict]) -> dict:
    rows = []
    for case in cases:
        request = case["request"]
        estimate = TokenCounter.for_model(case["model"]).count_request(anthropic_to_openai_chat(request)).total
        rows.append((estimate, case["expected_token_count"], is_server_side(request), case["name"]))
    return summarize(rows)


def summarize(rows: list[tuple]) -> dict:
    def stats(selected: list[tuple]) -> dict:
        if not selected:
            return {"requests": 0}
        over = [est / billed - 1 for est, billed, *_ in selected]
        under = [r for r in selected if r[0] < r[1]]
        return {
            "requests": len(selected),
            "under_counts": len(under),
            "under_count_share": round(len(under) / len(selected), 4),
            "median_over_count": round(statistics.median(over), 4),
            "worst_under_counts": sorted(((b - e, n) for e, b, _, n in under), reverse=True)[:3],
        }

    client_side = [r for r in rows if not r[2]]
    return {"all": stats(rows), "client_side": stats(client_side), "server_side": stats([r for r in rows if r[2]])}


def litellm_baseline(cases: list[dict]) -> dict:
    """litellm.token_counter on the same bodies (it takes Anthropic-shaped messages directly)."""
    import litellm

    litellm.disable_hf_tokenizer_download = True
    raised, under, counted = 0, 0, 0
    for case in cases:
        request = case["request"]
        messages = list(request.get("messages", []))
        if request.get("system"):
            system = request["system"]
            messages.insert(0, {"role": "system", "content": system})
        try:
            estimate = litellm.token_counter(model=case["model"], messages=messages, tools=request.get("tools"))
        except Exception:
            raised += 1
            continue
        counted += 1
        under += estimate < case["expected_token_count"]
    return {"raised": raised, "counted": counted, "under_counts": under}


if __name__ == "__main__":
    paths = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    path = Path(paths[0]) if paths else DEFAULT
    cases = load_cases(path)
    report = {"budget_hook": evaluate(cases)}
    if "--with-litellm" in sys.argv:
        report["litellm_token_counter"] = litellm_baseline(cases)
    print(json.dumps(report, indent=2))
