"""Replay real client sequences turn by turn at windows smaller than the conversation.

    python bench/replay.py            # summary table + JSON
    python bench/replay.py --json     # JSON only

Sequences: the request bodies Codex CLI, aider and Claude Code really sent (``tests/data/clients``: each run
is the client's own growing history, turn by turn) and the real conversations of ``tests/data/conversations``,
replayed as the requests their client sent (the history before each assistant reply). Each is replayed at
input budgets of 50% and 75% of its last request, through the shape the client used (``/v1/responses``
for Codex, ``/v1/messages`` for Claude Code, chat for aider and the conversations), with the default policy
and with exact cuts
(``cache_step_ratio: 0``) for comparison. Prints, per policy:

* prefix stability: the share of consecutive trimmed requests whose earlier forwarded request is an
  exact prefix of the later one (``cache_control`` markers ignored), i.e. the provider's prompt cache
  still holds everything sent before; counted where the client itself extended its previous request;
* the share of the budget forwarded requests use (mean over trimmed requests);
* what was kept: the opening context (every opening message present, verbatim), tool results present
  (whole or compacted) and user turns present, as shares of the original's;
* the input cost under Anthropic's cache pricing (cache write 1.25x, cache read 0.1x of the base input
  price; the cached part of a request is its common prefix with the previous one), against the same
  replay with no trimming at all (a window large enough for everything);
* refusals: requests that could not be trimmed to fit.

The sequences and budgets are fixed, so the figures are reproducible; they are shares and ratios, not
timings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from budget_hook.budget import BudgetPolicy, compute_budget
from budget_hook.counting import TokenCounter
from budget_hook.errors import CannotFitError
from budget_hook.shapes import SHAPES, ConversationShape
from budget_hook.trimming import TrimPolicy
from budget_hook.trimming.structure import opening_context

DATA = ROOT / "tests" / "data"
COUNTER = TokenCounter.for_model("gpt-4o")
RESERVE = 1000
NO_MARGIN = BudgetPolicy(safety_margin_ratio=0.0)
CACHE_WRITE, CACHE_READ = 1.25, 0.1


@dataclass(frozen=True)
class Sequence:
    name: str
    shape: ConversationShape
    bodies: tuple[Mapping[str, Any], ...]


def _items_key(shape: ConversationShape) -> str:
    return "input" if shape.name == "responses" else "messages"


#: the shape each client's folder was sent in (chat otherwise)
CLIENT_SHAPES = {"codex": "responses", "claude_code": "anthropic"}


def client_sequences() -> Iterator[Sequence]:
    for run in sorted((DATA / "clients").glob("*/*")):
        bodies = [json.loads(path.read_text()) for path in sorted(run.glob("*.json"))]
        shape = SHAPES.get(CLIENT_SHAPES.get(run.parent.name, "chat"))
        assert isinstance(shape, ConversationShape)
        key = _items_key(shape)
        # aider's two-message requests are its own history-summarisation calls, not the conversation
        bodies = [b for b in bodies if len(b[key]) > 2]
        if len(bodies) >= 2:
            yield Sequence(f"{run.parent.name}/{run.name}", shape, tuple(bodies))


def conversation_sequences() -> Iterator[Sequence]:
    chat = SHAPES.get("chat")
    assert isinstance(chat, ConversationShape)
    for path in sorted((DATA / "conversations").glob("*_[0-9][0-9].json")):
        messages = json.loads(path.read_text())["messages"]
        cuts = [i + 1 for i in range(len(messages) - 1)
                if messages[i + 1].get("role") == "assistant" and messages[i].get("role") != "assistant"]
        cuts.append(len(messages))
        bodies = tuple({"model": "gpt-4o", "messages": messages[:cut]} for cut in cuts)
        if len(bodies) >= 3:
            yield Sequence(f"conversations/{path.stem}", chat, bodies)


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _common_prefix(first: list, second: list) -> int:
    size = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        size += 1
    return size


@dataclass
class Tally:
    requests: int = 0
    trimmed: int = 0
    refused: int = 0
    pairs: int = 0
    stable_pairs: int = 0
    budget_use: list[float] = field(default_factory=list)
    opening_kept: list[float] = field(default_factory=list)
    results_kept: list[float] = field(default_factory=list)
    turns_kept: list[float] = field(default_factory=list)
    cost: float = 0.0
    cost_untrimmed: float = 0.0

    def add(self, other: Tally) -> None:
        for name in ("requests", "trimmed", "refused", "pairs", "stable_pairs", "cost", "cost_untrimmed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("budget_use", "opening_kept", "results_kept", "turns_kept"):
            getattr(self, name).extend(getattr(other, name))

    def summary(self) -> dict[str, Any]:
        def mean(values: list[float]) -> float | None:
            return round(sum(values) / len(values), 3) if values else None
        return {
            "requests": self.requests, "trimmed": self.trimmed, "refused": self.refused,
            "prefix_stability": round(self.stable_pairs / self.pairs, 3) if self.pairs else None,
            "consecutive_trimmed_pairs": self.pairs,
            "budget_use": mean(self.budget_use),
            "opening_context_kept": mean(self.opening_kept),
            "tool_results_kept": mean(self.results_kept),
            "user_turns_kept": mean(self.turns_kept),
            "cost_vs_untrimmed": round(self.cost / self.cost_untrimmed, 3) if self.cost_untrimmed else None,
        }


def _prefix_tokens(shape: ConversationShape, body: Mapping[str, Any], items: int, earlier: list | None = None) -> int:
    """Tokens of ``body`` up to its first difference with ``earlier`` (its first ``items`` items are the same):
    those items, and the leading content blocks the next item shares with ``earlier``'s (a provider caches a
    prefix, not whole messages: a notice added to the end of a kept message leaves what comes before it
    cached). Zero when nothing is shared."""
    key = _items_key(shape)
    kept = list(body[key])[:items]
    if earlier is not None and items < min(len(earlier), len(body[key])):
        mine, theirs = _strip_cache_control(body[key][items]), earlier[items]
        if isinstance(mine, Mapping) and isinstance(theirs, Mapping) and isinstance(mine.get("content"), list) \
                and isinstance(theirs.get("content"), list) \
                and {k: v for k, v in mine.items() if k != "content"} == {k: v for k, v in theirs.items() if k != "content"}:
            blocks = _common_prefix(theirs["content"], mine["content"])
            if blocks:
                kept.append({**body[key][items], "content": list(body[key][items]["content"])[:blocks]})
    return shape.count({**body, key: kept}, COUNTER) if kept else 0


def _view_messages(shape: ConversationShape, body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(shape.view(body).request["messages"])


def replay(sequence: Sequence, budget_tokens: int, policy: TrimPolicy) -> Tally:
    shape, key = sequence.shape, _items_key(sequence.shape)
    budget = compute_budget(budget_tokens + RESERVE, requested_output_tokens=RESERVE, policy=NO_MARGIN)
    tally = Tally()
    previous: list | None = None          # the previous forwarded items (markers stripped)
    previous_trimmed = False
    previous_original: list | None = None
    for body in sequence.bodies:
        tally.requests += 1
        original_items = _strip_cache_control(list(body[key]))
        client_extended = previous_original is not None and \
            original_items[:len(previous_original)] == previous_original
        # untrimmed replay: the cached part is the common prefix with the previous original request
        total = shape.count(body, COUNTER)
        cached = _prefix_tokens(shape, body, _common_prefix(previous_original, original_items), previous_original) \
            if previous_original else 0
        tally.cost_untrimmed += CACHE_READ * cached + CACHE_WRITE * (total - cached)
        previous_original = original_items
        try:
            result = shape.trim(body, counter=COUNTER, budget=budget, policy=policy)
        except CannotFitError:
            tally.refused += 1
            previous, previous_trimmed = None, False
            continue
        forwarded = result.request
        items = _strip_cache_control(list(forwarded[key]))
        tokens = result.report.tokens_after
        shared = _common_prefix(previous, items) if previous is not None else 0
        cached = _prefix_tokens(shape, forwarded, shared, previous) if previous is not None else 0
        tally.cost += CACHE_READ * cached + CACHE_WRITE * (tokens - cached)
        if result.report.changed:
            tally.trimmed += 1
            tally.budget_use.append(tokens / budget.budget)
            _kept(tally, shape, body, forwarded)
            # a pair counts when the client itself extended its previous request (aider, for one, moves
            # its history in front of the files it re-sends: no gateway can keep a prefix the client broke)
            if previous_trimmed and previous is not None and client_extended:
                tally.pairs += 1
                tally.stable_pairs += shared == len(previous)
        previous, previous_trimmed = items, result.report.changed
    return tally


def _kept(tally: Tally, shape: ConversationShape, body: Mapping[str, Any], forwarded: Mapping[str, Any]) -> None:
    before = _view_messages(shape, body)
    after = _view_messages(shape, forwarded)
    after_json = {json.dumps(m, sort_keys=True) for m in after}
    after_text = json.dumps(after)
    opening = [before[i] for i in opening_context(before, context_min_chars=500, ack_max_chars=200)
               if before[i].get("role") not in ("system", "developer")]
    if opening:
        tally.opening_kept.append(sum(json.dumps(m, sort_keys=True) in after_json or _merged(m, after_text)
                                      for m in opening) / len(opening))
    results = [m for m in before if m.get("role") == "tool"]
    if results:
        present = {m.get("tool_call_id") for m in after if m.get("role") == "tool"}
        tally.results_kept.append(sum(m.get("tool_call_id") in present for m in results) / len(results))
    users = [m for m in before if m.get("role") == "user"]
    if users:
        tally.turns_kept.append(sum(json.dumps(m, sort_keys=True) in after_json or _merged(m, after_text)
                                    for m in users) / len(users))


def _merged(message: Mapping[str, Any], after_text: str) -> bool:
    """A user message merged whole into a neighbour (formats whose roles must alternate)."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []
                                                        if isinstance(p, Mapping)]
    return all(json.dumps(text)[1:-1] in after_text for text in texts if text)


def run(policies: Mapping[str, TrimPolicy], shares: tuple[float, ...] = (0.5, 0.75)) -> dict[str, Any]:
    sequences = list(client_sequences()) + list(conversation_sequences())
    out: dict[str, Any] = {}
    for label, policy in policies.items():
        groups: dict[str, Tally] = {"clients": Tally(), "conversations": Tally(), "all": Tally()}
        for sequence in sequences:
            last = sequence.shape.count(sequence.bodies[-1], COUNTER)
            for share in shares:
                tally = replay(sequence, max(1, int(last * share)), policy)
                groups["clients" if not sequence.name.startswith("conversations/") else "conversations"].add(tally)
                groups["all"].add(tally)
        out[label] = {name: tally.summary() for name, tally in groups.items()}
    out["sequences"] = len(sequences)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.5, 0.75],
                        help="input budgets as shares of each sequence's last request (default: 0.5 0.75)")
    args = parser.parse_args()
    default = TrimPolicy()
    results = run({"default": default, "exact_cuts": replace(default, cache_step_ratio=0),
                   "wave1": replace(default, cache_step_ratio=0, target_ratio=0.9, keep_opening_context=False,
                                    soften_tool_results=False, drop_latest_turn_steps=False,
                                    notify_model=False)}, tuple(args.shares))
    if not args.json:
        columns = ("prefix_stability", "budget_use", "opening_context_kept", "tool_results_kept", "user_turns_kept",
                   "cost_vs_untrimmed", "trimmed", "refused")
        print(f"{'policy/group':28}" + "".join(f"{c[:18]:>20}" for c in columns))
        for label in ("default", "exact_cuts", "wave1"):
            for group, summary in results[label].items():
                print(f"{label + '/' + group:28}" + "".join(f"{summary[c]!s:>20}" for c in columns))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
