"""budget_hook's trimmer against the trimmers people use instead, on the same requests and budgets.

    python bench/trimmers.py                      # markdown table (group "all") + JSON
    python bench/trimmers.py --groups             # one row per method and group
    python bench/trimmers.py --json               # JSON only
    python bench/trimmers.py --shares 0.5 0.75    # input budgets as shares of each sequence's last request
    python bench/trimmers.py --chained            # and budget_hook under the chain rule (simulated: Chained)

Every method receives the chat-shaped view of a request (``shape.view(body).request``: OpenAI chat messages,
tool calls with ids) and a token budget, and returns the messages it would forward, or None when it refuses.
Every forwarded request is counted with the same counter (``TokenCounter.for_model("gpt-4o")``, the request's
tools included), whatever the method counted with itself.

Methods:

* ``budget_hook``: ``SHAPES.get("chat").trim(request, ...)`` with the default ``TrimPolicy()``; a
  ``CannotFitError`` is a refusal.
* ``litellm_trim_messages``: the installed ``litellm.utils.trim_messages(messages, model="gpt-4o",
  max_tokens=..., trim_ratio=1.0)``. It counts messages only, so ``max_tokens`` is the budget minus the
  request's non-message tokens (tools, reply priming). It returns its input untouched when it fails inside
  (then the forwarded request is over budget); a raise would be a refusal. View-only content parts
  (``thought_signature``, which no chat client sends and litellm cannot count) are handed to it as text parts
  and put back afterwards. Its own counts are served from a per-message cache (identical outputs, checked;
  ``_per_message_litellm_counts``): unaided it needs minutes on the longest requests.
* ``middle_out``: OpenRouter's documented ``middle-out`` transform ("removing or truncating messages from the
  middle of the prompt, until the prompt fits"), re-implemented: system/developer messages, the first user
  message and the last message stay; the others leave one at a time, always the one in the middle of those
  left, so the cut grows from the middle outward; if the kept ones alone are over, the middle of the longest
  kept string content is cut out (head and tail kept) until it fits. It does not look at tool-call pairing.
* ``anthropic_clearing``: Anthropic's context editing ``clear_tool_uses_20250919`` with the trigger at the
  budget, ``keep: 3`` tool uses and ``clear_at_least`` = 5% of the budget: the content of the oldest tool
  results (all but the 3 newest) is replaced with ``[cleared]``, oldest first, until at least
  max(excess, clear_at_least) tokens are cleared; tool calls stay. Refuses when clearing every clearable
  result does not fit (Anthropic would then return its context-window error).
* ``drop_oldest_pairs``: drops the oldest non-system group at a time (an assistant message with tool calls
  leaves with the tool results that follow it; any other message alone), keeping system/developer messages
  and the last user message; refuses when that cannot fit.

Sequences: ``clients`` (the Codex CLI, aider and Claude Code runs of ``tests/data/clients``, as chat views), ``conversations`` (the real
conversations of ``tests/data/conversations`` that ``bench/replay.py`` replays), ``generated`` (agent
conversations with large tool outputs, generated from a fixed seed). Each sequence is replayed turn by turn
at each budget share of its last request; a request over the budget is a *trimmed* request, and only those
count for the per-request metrics. Metrics, per method and group:

* ``trimmed``, ``refused``: requests over the budget, and the ones the method refused;
* ``fits``: share of forwarded trimmed requests within the budget;
* ``valid``: share of forwarded trimmed requests that fit, have no tool-call pairing problem
  (``structure.pairing_problems``), keep every system/developer message unchanged and keep the original's
  last user message verbatim; ``served_valid``: the same over all trimmed requests (a refusal is not valid);
* ``budget_use``: forwarded tokens / budget over forwarded trimmed requests: mean, min, and how many are
  under half the budget.

The content metrics below are means over the *served* trimmed requests (forwarded and within the budget: a
refusal or an over-budget request gives the model nothing), so read them next to ``served_valid``:

* ``latest_turn_verbatim``: among served requests where the older material alone could make the room
  (tokens of the non-system messages before the last user message >= the excess over the budget), the share
  where every message of the latest turn (the last user message and everything after) is forwarded unchanged;
  the denominator is reported (``latest_turn_n``);
* ``newest_result_chars_kept``: of the newest tool result, the characters kept: 1 when unchanged, 0 when gone,
  else (common prefix + common suffix with the original, capped at its length) / its length;
* ``opening_context_kept``: share of the opening context (``structure.opening_context``, 500/200 chars,
  system messages aside) forwarded verbatim;
* ``information_kept``: INFORMATION_DEFINITION below; ``information_kept_unweighted`` without the weights;
* ``information_same_requests``: the method's information kept and the reference method's (``--pair-with``,
  budget_hook by default), on the requests both served (printed ``method (reference), n``): each method's own
  mean is over the requests it served, which differ (Anthropic's clearing refuses the hard ones), so this is
  the comparison on the same requests;
* ``prefix_stability``: share of consecutive trimmed requests, where the client itself extended its previous
  request, whose earlier forwarded messages are an exact prefix of the later ones (``bench/replay.py``'s rule);
  ``prefix_possible``: the share of those pairs where keeping the prefix could fit at all (the previous
  forwarded messages plus the messages the client added count within the budget; otherwise any answer that
  fits must change the previous request), and ``prefix_kept_where_possible`` the prefix stability over them;
* ``cost_vs_untrimmed``: input cost under Anthropic's cache pricing (write 1.25x, read 0.1x; the cached part
  of a request is its common prefix with the previous forwarded request) against the same replay untrimmed,
  as ``bench/replay.py`` computes it (a refused request costs nothing, an over-budget one is paid as sent).

Sequences (``--generated`` conversations from a fixed seed) and budgets are fixed, so every figure but the
timings is reproducible for a given trimmer. A run takes about 75 s on 2 cores, most of it in litellm's
``trim_messages``; the printed per-method seconds are the methods' own time, counting caches warm.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import logging
import math
import os
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent / "src"), str(BENCH)]  # budget_hook without installing it; replay.py

from budget_hook.budget import compute_budget
from budget_hook.errors import CannotFitError
from budget_hook.shapes import SHAPES
from budget_hook.trimming import TrimPolicy
from budget_hook.trimming.structure import opening_context, pairing_problems
from replay import (
    CACHE_READ,
    CACHE_WRITE,
    COUNTER,
    NO_MARGIN,
    RESERVE,
    _common_prefix,
    _strip_cache_control,
    client_sequences,
    conversation_sequences,
)

INFORMATION_DEFINITION = (
    "information_kept: for each original non-system message i, D_i = its distinctive tokens: the lowercased "
    "words ([A-Za-z0-9_./-]{3,}) of its text (string content or text parts, tool-call names and arguments) "
    "minus the words found in more than half of the request's messages; kept_i = |D_i ∩ words of the forwarded "
    "message matched to i| / |D_i| (matched by tool_call_id for tool results and calls, else in order by "
    "identical content or a shared 16-character start with the same role; a dropped message keeps 0); with "
    "recency weight w_i = 0.5 ** ((n-1-i)/10), information_kept = sum w_i*kept_i*|D_i| / sum w_i*|D_i|.")

CHAT = SHAPES.get("chat")
RESULT_ROLES = ("tool", "function")
PROTECTED = ("system", "developer")
GROUPS = ("clients", "conversations", "generated")
HALF_LIFE = 10
WORD = re.compile(r"[A-Za-z0-9_./-]{3,}")

Messages = list[dict[str, Any]]
Method = Callable[[Mapping[str, Any], int], "Messages | None"]


# --- counting ------------------------------------------------------------------------------------------

def count(request: Mapping[str, Any], messages: list) -> int:
    """Tokens of ``request`` with ``messages`` in place of its own (tools and the rest included)."""
    return COUNTER.count_request({**request, "messages": messages}).total


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _calls_text(message: Mapping[str, Any]) -> str:
    calls = [c.get("function") or {} for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
    if isinstance(message.get("function_call"), Mapping):
        calls.append(message["function_call"])
    return " ".join(f"{c.get('name', '')} {c.get('arguments', '')}" for c in calls if isinstance(c, Mapping))


@lru_cache(maxsize=100_000)
def _words(text: str) -> frozenset[str]:
    return frozenset(word.lower() for word in WORD.findall(text))


def words(message: Mapping[str, Any]) -> frozenset[str]:
    return _words(_text(message)) | _words(_calls_text(message))


def _json(message: Any) -> str:
    return json.dumps(message, sort_keys=True, default=str)


# --- the methods -----------------------------------------------------------------------------------------

def budget_hook(request: Mapping[str, Any], budget: int, policy: TrimPolicy = TrimPolicy()) -> Messages | None:
    window = compute_budget(budget + RESERVE, requested_output_tokens=RESERVE, policy=NO_MARGIN)
    try:
        result = CHAT.trim(request, counter=COUNTER, budget=window, policy=policy)
    except CannotFitError:
        return None
    return list(result.request["messages"])


class Chained:
    """budget_hook with the chain rule, as a stateful simulation (``--chained``): a request that extends the
    previous one is forwarded as the previous forwarded request plus what the client added whenever that
    fits the budget, else trimmed afresh. Not what the plugin does (it is stateless: every decision is a
    function of the request alone); it measures what keeping every prefix that can be kept would give."""

    def __init__(self, base: Method) -> None:
        self.base = base
        self.previous: tuple[list, list, int] | None = None  # (original messages, forwarded, budget)

    def reset(self) -> None:
        self.previous = None

    def __call__(self, request: Mapping[str, Any], budget: int) -> Messages | None:
        messages = list(request["messages"])
        if self.previous is not None:
            original, forwarded, previous_budget = self.previous
            if previous_budget == budget and messages[:len(original)] == original:
                extended = [*forwarded, *messages[len(original):]]
                if count(request, extended) <= budget:
                    self.previous = (messages, extended, budget)
                    return extended
        out = self.base(request, budget)
        self.previous = (messages, out, budget) if out is not None else None
        return out


def budget_hook_with(settings: str) -> Method:
    """``budget_hook`` with policy settings from ``key=value,key=value`` (``--variant``): a sweep of
    ``cache_step_ratio`` shows its trade-off between prefix kept, budget used and information kept."""
    fields = {f.name: f.type for f in dataclasses.fields(TrimPolicy)}
    values: dict[str, Any] = {}
    for pair in filter(None, settings.split(",")):
        key, _, raw = pair.partition("=")
        if key not in fields:
            raise SystemExit(f"--variant: unknown TrimPolicy setting {key!r}")
        values[key] = raw.lower() in ("1", "true", "yes") if fields[key] == "bool" else \
            (int(raw) if fields[key] == "int" else float(raw))
    return functools.partial(budget_hook, policy=TrimPolicy(**values))


_CHAT_PARTS = frozenset({"text", "image_url", "input_audio", "file"})


def litellm_trim_messages(request: Mapping[str, Any], budget: int) -> Messages | None:
    from litellm.utils import trim_messages

    messages = list(request["messages"])
    # parts only budget_hook's view carries (a Responses item's reasoning signature) go in as text parts:
    # litellm's counter rejects unknown part types, which no chat client would send it
    plain = [_plain_parts(m) for m in messages]
    restore = {_json(p): m for p, m in zip(plain, messages, strict=True) if p is not m}
    counted = COUNTER.count_request(request)
    non_message = counted.total - sum(counted.per_message)  # tools and priming: litellm counts messages only
    try:
        with _per_message_litellm_counts():
            out = trim_messages(copy.deepcopy(plain), model="gpt-4o", trim_ratio=1.0,
                                max_tokens=budget - non_message)
    except Exception:
        return None
    if isinstance(out, tuple):
        out = out[0]
    return [restore.get(_json(m), m) if restore else m for m in out]


PRIMING = 3  # litellm's count of an empty message list (its reply priming)


@contextmanager
def _per_message_litellm_counts() -> Iterator[None]:
    """Serve litellm's ``get_token_count`` from a per-message cache while ``trim_messages`` runs.

    ``trim_messages`` recounts its whole growing list after every message it adds (minutes on the longest
    requests). Its count of a list is additive: 3 for the reply priming plus each message counted alone, minus
    that 3 (checked on every request of this bench: the outputs are identical with and without this cache),
    so each distinct message is tokenized once. Messages are keyed by their JSON: litellm shortens in place.
    """
    import litellm.utils

    exact = litellm.utils.get_token_count
    cache: dict[str, int] = {}

    def get_token_count(messages: list, model: str) -> int:
        total = PRIMING
        for message in messages:
            key = _json(message)
            if key not in cache:
                cache[key] = exact([message], model) - PRIMING
            total += cache[key]
        return total

    # and keep its log quiet: it logs a traceback whenever it fails inside and returns its input untouched
    logger = logging.getLogger("LiteLLM")
    level = logger.level
    litellm.utils.get_token_count = get_token_count
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        litellm.utils.get_token_count = exact
        logger.setLevel(level)


def _plain_parts(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, list) or all(isinstance(p, Mapping) and p.get("type") in _CHAT_PARTS
                                            for p in content):
        return message
    parts = [p if isinstance(p, Mapping) and p.get("type") in _CHAT_PARTS else {"type": "text", "text": _json(p)}
             for p in content]
    return {**message, "content": parts}


def middle_out(request: Mapping[str, Any], budget: int) -> Messages | None:
    messages = list(request["messages"])
    counted = COUNTER.count_request(request)
    total = counted.total
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    fixed = {i for i, m in enumerate(messages) if m.get("role") in PROTECTED} | {first_user, len(messages) - 1}
    removable = [i for i in range(len(messages)) if i not in fixed]
    kept = set(range(len(messages)))
    while total > budget and removable:
        index = removable.pop(len(removable) // 2)
        kept.discard(index)
        total -= counted.per_message[index]
    out = [messages[i] for i in sorted(kept)]
    while (total := count(request, out)) > budget and removable:  # the per-message sum was an estimate
        kept.discard(removable.pop(len(removable) // 2))
        out = [messages[i] for i in sorted(kept)]
    if total <= budget:
        return out
    # the kept ones alone are over: truncate the middle of the longest string content, head and tail kept
    candidates = [i for i, m in enumerate(out) if m.get("role") not in PROTECTED and isinstance(m.get("content"), str)]
    if not candidates:
        return None
    index = max(candidates, key=lambda i: len(out[i]["content"]))
    content = out[index]["content"]
    for _ in range(8):
        over = total - budget
        own = COUNTER.count_text(content) or 1
        keep = int(len(content) * max(0.0, 1 - (over + 8) / own))
        content = content[:keep // 2] + "\n...\n" + content[len(content) - keep // 2:] if keep > 1 else ""
        out[index] = {**out[index], "content": content}
        total = count(request, out)
        if total <= budget:
            return out
        if not content:
            break
    return None


CLEARED = "[cleared]"
KEEP_TOOL_USES = 3
CLEAR_AT_LEAST_SHARE = 0.05


def anthropic_clearing(request: Mapping[str, Any], budget: int) -> Messages | None:
    messages = list(request["messages"])
    counted = COUNTER.count_request(request)
    excess = counted.total - budget
    if excess <= 0:
        return messages
    results = [i for i, m in enumerate(messages) if m.get("role") in RESULT_ROLES]
    clearable = results[:-KEEP_TOOL_USES] if KEEP_TOOL_USES else results
    target = max(excess, math.ceil(CLEAR_AT_LEAST_SHARE * budget))
    cleared = 0
    for index in clearable:
        if cleared >= target:
            break
        replacement = {**messages[index], "content": CLEARED}
        cleared += counted.per_message[index] - COUNTER.count_message(replacement, index=index)
        messages[index] = replacement
    return messages if count(request, messages) <= budget else None


def drop_oldest_pairs(request: Mapping[str, Any], budget: int) -> Messages | None:
    messages = list(request["messages"])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    groups: list[list[int]] = []
    for index, message in enumerate(messages):
        if message.get("role") in RESULT_ROLES and groups and groups[-1][-1] == index - 1 \
                and messages[groups[-1][0]].get("role") == "assistant":
            groups[-1].append(index)  # a result leaves with the call before it
        else:
            groups.append([index])
    droppable = [g for g in groups if messages[g[0]].get("role") not in PROTECTED and last_user not in g]
    counted = COUNTER.count_request(request)
    total, dropped = counted.total, set()
    while droppable:
        if total <= budget:
            out = [m for i, m in enumerate(messages) if i not in dropped]
            total = count(request, out)  # the per-message sum was an estimate
            if total <= budget:
                return out
        group = droppable.pop(0)
        dropped.update(group)
        total -= sum(counted.per_message[i] for i in group)
    out = [m for i, m in enumerate(messages) if i not in dropped]
    return out if count(request, out) <= budget else None


METHODS: dict[str, Method] = {
    "budget_hook": budget_hook,
    "litellm_trim_messages": litellm_trim_messages,
    "middle_out": middle_out,
    "anthropic_clearing": anthropic_clearing,
    "drop_oldest_pairs": drop_oldest_pairs,
}


# --- generated agent conversations -----------------------------------------------------------------------

_PACKAGES = ("core", "api", "storage", "billing", "auth", "ingest", "report", "sched", "search", "web")
_NOUNS = ("parser", "router", "session", "worker", "schema", "client", "loader", "index", "ledger", "queue",
          "cursor", "bucket", "token", "planner", "render", "matrix", "vector", "digest", "shard", "replica")
_TOOLS = ("list_files", "read_file", "run_tests", "grep", "query_api")


class _Agent:
    """One generated agent conversation: a growing pool of paths and identifiers the tool outputs mention."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.paths = [self.path() for _ in range(4)]
        self.funcs = [self.func() for _ in range(4)]

    def path(self) -> str:
        rng = self.rng
        return f"src/{rng.choice(_PACKAGES)}/{rng.choice(_NOUNS)}_{rng.randrange(1000)}.py"

    def func(self) -> str:
        return f"func_{self.rng.randrange(10**6)}"

    def known(self, pool: list[str]) -> str:
        return self.rng.choice(pool)

    def new(self, pool: list[str], make: Callable[[], str]) -> str:
        value = make()
        pool.append(value)
        return value

    def line(self, tool: str) -> str:
        rng = self.rng
        if tool == "list_files":
            return (f"-rw-r--r-- 1 dev dev {rng.randrange(100, 90000):>6} Nov {rng.randrange(1, 30):>2} "
                    f"{rng.randrange(24):02}:{rng.randrange(60):02} {self.new(self.paths, self.path)}")
        if tool == "read_file":
            name, other = self.new(self.funcs, self.func), self.known(self.funcs)
            return (f"def {name}(value_{rng.randrange(100)}, limit={rng.randrange(1, 5000)}):\n"
                    f"    result = {other}(value_{rng.randrange(100)}) * {rng.randrange(2, 97)}\n"
                    f"    if result > limit:\n        raise ValueError('{name}: over limit {rng.randrange(10**4)}')\n"
                    f"    return result\n")
        if tool == "run_tests":
            path, name = self.known(self.paths), self.known(self.funcs)
            status = rng.choice(("PASSED",) * 8 + ("FAILED", "SKIPPED"))
            test = f"tests/test_{path.rsplit('/', 1)[1]}::test_{name}_{rng.randrange(100)} {status} [{rng.randrange(101):>3}%]"
            if status == "FAILED":
                test += (f"\n    AssertionError: expected {rng.randrange(10**5)} got {rng.randrange(10**5)} "
                         f"in {name} ({path}:{rng.randrange(1, 900)})")
            return test
        if tool == "grep":
            return (f"{self.known(self.paths)}:{rng.randrange(1, 2000)}:    total_{rng.randrange(1000)} = "
                    f"{self.known(self.funcs)}(cfg['key_{rng.randrange(10**4)}'], {rng.randrange(10**6)})")
        return json.dumps({"id": rng.randrange(10**7), "handler": self.known(self.funcs), "path": self.known(self.paths),
                           "status": rng.choice(("ok", "ok", "degraded", "failed")),
                           "latency_ms": round(rng.uniform(0.5, 900), 2), "region": f"eu-{rng.randrange(1, 9)}"})

    def output(self, tool: str, chars: int) -> str:
        lines: list[str] = []
        size = 0
        while size < chars:
            lines.append(self.line(tool))
            size += len(lines[-1]) + 1
        text = "\n".join(lines)
        return "[\n" + text.replace("\n", ",\n")[:chars] + "\n]" if tool == "query_api" else text[:chars]

    def call(self, step: int, number: int) -> dict[str, Any]:
        rng = self.rng
        tool = rng.choice(_TOOLS)
        arguments = {"list_files": lambda: {"dir": self.known(self.paths).rsplit("/", 1)[0]},
                     "read_file": lambda: {"path": self.known(self.paths)},
                     "run_tests": lambda: {"command": f"pytest -q -k {self.known(self.funcs)}"},
                     "grep": lambda: {"pattern": self.known(self.funcs), "path": "src"},
                     "query_api": lambda: {"endpoint": f"/v2/{rng.choice(_NOUNS)}s", "limit": rng.randrange(10, 500)},
                     }[tool]()
        return {"id": f"call_{step}_{number}_{rng.randrange(16**8):08x}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps(arguments)}}


def generated_conversation(seed: int) -> list[dict[str, Any]]:
    """An agent conversation: system prompt, task, 10-40 tool steps (1-2 calls each, results of 200 to
    40,000 characters, some errors), now and then a new user turn after a short answer; ends with an answer."""
    rng = random.Random(seed)
    agent = _Agent(rng)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent working in a repository. Use the tools to inspect "
                                      "files, run tests and query the service API. Be precise and cite paths."},
        {"role": "user", "content": f"The nightly job fails in {agent.known(agent.paths)}: {agent.known(agent.funcs)} "
                                    f"returns wrong totals for region eu-{rng.randrange(1, 9)}. Find the cause and fix it."},
    ]
    for step in range(rng.randint(10, 40)):
        if step >= 3 and rng.random() < 0.1:
            messages.append({"role": "assistant", "content": f"Fixed {agent.known(agent.funcs)} in "
                                                             f"{agent.known(agent.paths)}; the tests pass now."})
            messages.append({"role": "user", "content": f"Thanks. Now check {agent.known(agent.funcs)} too: it "
                                                        f"times out after {rng.randrange(5, 120)} s on large inputs."})
        calls = [agent.call(step, n) for n in range(rng.choice((1, 1, 1, 2)))]
        text = f"Next I look at {agent.known(agent.funcs)}." if rng.random() < 0.5 else None
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for call in calls:
            tool = call["function"]["name"]
            if rng.random() < 0.08:
                result = (f"Error: {tool} failed with exit code {rng.randrange(1, 128)}: no such file or directory: "
                          f"'{agent.path()}'")
            else:
                result = agent.output(tool, int(math.exp(rng.uniform(math.log(200), math.log(40_000)))))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    messages.append({"role": "assistant", "content": f"Done: the cause was {agent.known(agent.funcs)} in "
                                                     f"{agent.known(agent.paths)}."})
    return messages


# --- sequences -------------------------------------------------------------------------------------------

@dataclass
class Request:
    """One request as the client sent it, seen as a chat request."""

    body: dict[str, Any]

    @cached_property
    def tokens(self) -> int:
        return count(self.body, list(self.body["messages"]))

    @cached_property
    def original(self) -> Original:
        return Original(self.body)


@dataclass(frozen=True)
class Replay:
    name: str
    group: str
    requests: tuple[Request, ...]


def _growing(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The requests a client sent for a conversation: the history before each assistant reply (replay.py's cut)."""
    cuts = [i + 1 for i in range(len(messages) - 1)
            if messages[i + 1].get("role") == "assistant" and messages[i].get("role") != "assistant"]
    return [messages[:cut] for cut in cuts]


def sequences(generated: int = 8, seed: int = 2024) -> Iterator[Replay]:
    for sequence in client_sequences():
        yield Replay(sequence.name, "clients",
                     tuple(Request(dict(sequence.shape.view(b).request)) for b in sequence.bodies))
    for sequence in conversation_sequences():
        yield Replay(sequence.name, "conversations", tuple(Request(dict(b)) for b in sequence.bodies))
    for number in range(generated):
        bodies = _growing(generated_conversation(seed * 1000 + number))
        yield Replay(f"generated/{number:02}", "generated",
                     tuple(Request({"model": "gpt-4o", "messages": m}) for m in bodies))


# --- what a forwarded request kept ------------------------------------------------------------------------

def _key(message: Mapping[str, Any]) -> tuple | None:
    if message.get("role") in RESULT_ROLES and message.get("tool_call_id"):
        return ("result", message["tool_call_id"])
    ids = tuple(str(c.get("id")) for c in message.get("tool_calls") or [] if isinstance(c, Mapping))
    return ("calls", ids) if ids else None


class Original:
    """What the metrics need to know about an original request (computed once, shared by every method)."""

    def __init__(self, request: Mapping[str, Any]) -> None:
        self.request = request
        self.messages = messages = list(request["messages"])
        self.n = len(messages)
        self.roles = [m.get("role") for m in messages]
        self.json = [_json(m) for m in messages]
        self.texts = [_text(m) for m in messages]
        counted = COUNTER.count_request(request)
        self.total = counted.total
        self.per_message = counted.per_message
        # real clients reuse tool_call ids (SWE-agent, tau-bench): a key can name several messages
        self.by_key: dict[tuple, list[int]] = {}
        self.by_json: dict[str, list[int]] = {}
        for index, (message, encoded) in enumerate(zip(messages, self.json, strict=True)):
            key = _key(message)
            if key is not None:
                self.by_key.setdefault(key, []).append(index)
            self.by_json.setdefault(encoded, []).append(index)
        all_words = [words(m) for m in messages]
        frequency = Counter(w for ws in all_words for w in ws)
        common = {w for w, c in frequency.items() if c > self.n / 2}
        self.distinct = [frozenset() if self.roles[i] in PROTECTED else ws - common for i, ws in enumerate(all_words)]
        self.weights = [0.5 ** ((self.n - 1 - i) / HALF_LIFE) for i in range(self.n)]
        self.protected = [self.json[i] for i in range(self.n) if self.roles[i] in PROTECTED]
        users = [i for i in range(self.n) if self.roles[i] == "user"]
        self.last_user = users[-1] if users else None
        self.latest = self.last_user if self.last_user is not None else 0
        self.older_tokens = sum(self.per_message[i] for i in range(self.latest) if self.roles[i] not in PROTECTED)
        self.opening = sorted(i for i in opening_context(messages, context_min_chars=500, ack_max_chars=200)
                              if self.roles[i] not in PROTECTED)
        results = [i for i in range(self.n) if self.roles[i] in RESULT_ROLES and self.texts[i]]
        self.newest_result = results[-1] if results else None
        self.pairing_problems = len(pairing_problems(messages))

    def match(self, forwarded: list) -> list[int | None]:
        """Per forwarded message, the index of the original it is, or an edited form of (None: one added)."""
        out: list[int | None] = []
        used: set[int] = set()
        last = -1
        for message in forwarded:
            key = _key(message)
            index = next((i for i in self.by_key.get(key, ()) if i > last and i not in used), None) \
                if key is not None else None
            if index is None:
                index = next((i for i in self.by_json.get(_json(message), ()) if i > last and i not in used), None)
            if index is None:
                text, role = _text(message), message.get("role")
                index = next((i for i in range(last + 1, self.n) if i not in used and self.roles[i] == role
                              and self.texts[i] and text[:16] == self.texts[i][:16]
                              and len(text) >= min(16, len(self.texts[i]))), None)
            if index is not None:
                used.add(index)
                last = max(last, index)
            out.append(index)
        return out


@dataclass
class Tally:
    requests: int = 0
    trimmed: int = 0
    refused: int = 0
    forwarded: int = 0
    fits: int = 0
    valid: int = 0
    pairs: int = 0
    stable_pairs: int = 0
    #: of ``pairs``, those where a request keeping the previous forwarded one as its prefix could fit (the
    #: previous forwarded messages plus what the client added are within the budget), and of them the stable
    possible_pairs: int = 0
    possible_stable: int = 0
    latest_n: int = 0
    latest_verbatim: int = 0
    budget_use: list[float] = field(default_factory=list)
    newest_result: list[float] = field(default_factory=list)
    opening: list[float] = field(default_factory=list)
    information: list[float] = field(default_factory=list)
    information_unweighted: list[float] = field(default_factory=list)
    cost: float = 0.0
    cost_untrimmed: float = 0.0
    #: information kept per served request, by (sequence, budget, request index): the paired comparison
    information_by_request: dict[tuple[str, int, int], float] = field(default_factory=dict)

    def add(self, other: Tally) -> None:
        for name, value in vars(other).items():
            mine = getattr(self, name)
            setattr(self, name, {**mine, **value} if isinstance(mine, dict) else
                    [*mine, *value] if isinstance(mine, list) else mine + value)

    def summary(self) -> dict[str, Any]:
        def mean(values: list[float]) -> float | None:
            return round(sum(values) / len(values), 3) if values else None

        def share(part: int, whole: int) -> float | None:
            return round(part / whole, 3) if whole else None

        return {
            "requests": self.requests, "trimmed": self.trimmed, "refused": self.refused,
            "fits": share(self.fits, self.forwarded), "valid": share(self.valid, self.forwarded),
            "served_valid": share(self.valid, self.trimmed), "served": self.fits,
            "budget_use": mean(self.budget_use),
            "budget_use_min": round(min(self.budget_use), 3) if self.budget_use else None,
            "under_half_budget": sum(u < 0.5 for u in self.budget_use),
            "latest_turn_verbatim": share(self.latest_verbatim, self.latest_n), "latest_turn_n": self.latest_n,
            "newest_result_chars_kept": mean(self.newest_result),
            "opening_context_kept": mean(self.opening),
            "information_kept": mean(self.information),
            "information_kept_unweighted": mean(self.information_unweighted),
            "prefix_stability": share(self.stable_pairs, self.pairs), "consecutive_trimmed_pairs": self.pairs,
            "prefix_possible": share(self.possible_pairs, self.pairs),
            "prefix_kept_where_possible": share(self.possible_stable, self.possible_pairs),
            "cost_vs_untrimmed": round(self.cost / self.cost_untrimmed, 3) if self.cost_untrimmed else None,
        }


def _chars_kept(original: str, kept: str) -> float:
    if kept == original:
        return 1.0
    head = _common_prefix(original, kept)
    tail = _common_prefix(original[head:][::-1], kept[head:][::-1])
    return min(1.0, (head + tail) / len(original))


def score(tally: Tally, original: Original, forwarded: list, tokens: int, budget: int) -> None:
    """Add one forwarded trimmed request to ``tally``."""
    tally.forwarded += 1
    tally.budget_use.append(tokens / budget)
    fits = tokens <= budget
    encoded = [_json(m) for m in forwarded]
    present = set(encoded)
    tally.fits += fits
    tally.valid += (fits and len(pairing_problems(forwarded)) <= original.pairing_problems
                    and [e for e, m in zip(encoded, forwarded, strict=True) if m.get("role") in PROTECTED]
                    == original.protected
                    and (original.last_user is None or original.json[original.last_user] in present))
    if not fits:
        return  # content metrics: served requests only
    matched = original.match(forwarded)
    by_original = {i: forwarded[j] for j, i in enumerate(matched) if i is not None}
    if original.older_tokens >= original.total - budget:
        tally.latest_n += 1
        tally.latest_verbatim += all(original.json[i] in present for i in range(original.latest, original.n))
    if original.newest_result is not None:
        kept = by_original.get(original.newest_result)
        tally.newest_result.append(_chars_kept(original.texts[original.newest_result], _text(kept)) if kept else 0.0)
    if original.opening:
        tally.opening.append(sum(original.json[i] in present for i in original.opening) / len(original.opening))
    weighted = unweighted = weight_total = total = 0.0
    for i, distinct in enumerate(original.distinct):
        if not distinct:
            continue
        kept_words = len(distinct & words(by_original[i])) if i in by_original else 0
        weighted += original.weights[i] * kept_words
        weight_total += original.weights[i] * len(distinct)
        unweighted += kept_words
        total += len(distinct)
    if total:
        tally.information.append(weighted / weight_total)
        tally.information_unweighted.append(unweighted / total)


# --- the replay ------------------------------------------------------------------------------------------

def _prefix_tokens(request: Mapping[str, Any], messages: list, size: int) -> int:
    return count(request, messages[:size]) if size else 0


def replay(sequence: Replay, budget: int, method: Method, timing: list[float]) -> Tally:
    """One sequence at one budget through one method (``bench/replay.py``'s loop, on the chat view)."""
    tally = Tally()
    if isinstance(method, Chained):
        method.reset()  # a new conversation: nothing forwarded before
    previous: list | None = None  # the previous forwarded messages (markers stripped)
    previous_trimmed = False
    previous_original: list | None = None
    previous_forwarded: list = []  # the previous forwarded messages as sent (for ``prefix_possible``)
    for request in sequence.requests:
        tally.requests += 1
        body = request.body
        original_items = _strip_cache_control(list(body["messages"]))
        client_extended = previous_original is not None and \
            original_items[:len(previous_original)] == previous_original
        previous_original_before = len(previous_original) if previous_original is not None else 0
        shared = _common_prefix(previous_original, original_items) if previous_original else 0
        cached = _prefix_tokens(body, body["messages"], shared)
        tally.cost_untrimmed += CACHE_READ * cached + CACHE_WRITE * (request.tokens - cached)
        previous_original = original_items
        trimmed = request.tokens > budget
        if trimmed:
            tally.trimmed += 1
            start = time.perf_counter()
            forwarded = method(body, budget)
            timing.append(time.perf_counter() - start)
        else:
            forwarded = list(body["messages"])
            if isinstance(method, Chained):
                method.reset()  # forwarded whole: the next trim has no earlier cut to keep
        if forwarded is None:
            tally.refused += 1
            previous, previous_trimmed = None, False
            continue
        items = _strip_cache_control(forwarded)
        tokens = count(body, forwarded)
        previous_forwarded_next = list(forwarded)
        shared = _common_prefix(previous, items) if previous is not None else 0
        cached = _prefix_tokens(body, forwarded, shared)
        tally.cost += CACHE_READ * cached + CACHE_WRITE * (tokens - cached)
        if trimmed:
            scored = len(tally.information)
            score(tally, request.original, forwarded, tokens, budget)
            if len(tally.information) > scored:
                tally.information_by_request[(sequence.name, budget, tally.requests)] = tally.information[-1]
            if previous_trimmed and previous is not None and client_extended:
                tally.pairs += 1
                tally.stable_pairs += shared == len(previous)
                added = list(body["messages"])[previous_original_before:]
                if count(body, [*previous_forwarded, *added]) <= budget:
                    tally.possible_pairs += 1
                    tally.possible_stable += shared == len(previous)
        previous, previous_trimmed = items, trimmed
        previous_forwarded = previous_forwarded_next
    return tally


def run(shares: tuple[float, ...] = (0.5, 0.75, 0.9), methods: Mapping[str, Method] | Iterable[str] | None = None,
        generated: int = 8, pair_with: str = "budget_hook") -> dict[str, Any]:
    """Replay every sequence at every share through every method (``METHODS`` by default, or names of it, or
    name -> callable): ``{"methods": {method: {group: Tally.summary()}}, ...}``; ``information_same_requests``
    pairs each method with ``pair_with`` (a method's name)."""
    if methods is None:
        methods = METHODS
    elif not isinstance(methods, Mapping):
        methods = {name: METHODS[name] for name in methods}
    replays = list(sequences(generated))
    kept: dict[str, dict[str, dict[tuple, float]]] = {}
    out: dict[str, Any] = {"shares": list(shares), "definition": INFORMATION_DEFINITION,
                           "sequences": dict(Counter(r.group for r in replays)),
                           "sequences_last_tokens": {r.name: r.requests[-1].tokens for r in replays},
                           "methods": {}, "seconds": {}}
    for name, method in methods.items():
        groups = {group: Tally() for group in (*GROUPS, "all")}
        timing: list[float] = []
        for sequence in replays:
            for share in shares:
                tally = replay(sequence, max(1, int(sequence.requests[-1].tokens * share)), method, timing)
                groups[sequence.group].add(tally)
                groups["all"].add(tally)
        out["methods"][name] = {group: tally.summary() for group, tally in groups.items()}
        out["seconds"][name] = {"total": round(sum(timing), 2), "max_request": round(max(timing, default=0), 2)}
        kept[name] = {group: tally.information_by_request for group, tally in groups.items()}
    for name, summaries in out["methods"].items():
        for group, summary in summaries.items():
            summary["information_same_requests"] = _paired(kept[name][group], kept.get(pair_with, {}).get(group))
    return out


def _paired(mine: Mapping[tuple, float], reference: Mapping[tuple, float] | None) -> dict[str, Any] | None:
    """Information kept by a method and by the reference method (``--pair-with``) on the requests both served
    within the budget: the comparison on the same requests (each method's own mean is over the requests it
    served, which differ)."""
    if reference is None:
        return None
    common = [key for key in mine if key in reference]
    if not common:
        return None
    return {"requests": len(common), "method": round(sum(mine[k] for k in common) / len(common), 3),
            "reference": round(sum(reference[k] for k in common) / len(common), 3)}


COLUMNS = (("trimmed", "trimmed"), ("refused", "refused"), ("fits", "fits"), ("valid", "valid"),
           ("served_valid", "served valid"), ("budget_use", "use"), ("budget_use_min", "use min"),
           ("under_half_budget", "<½ budget"), ("latest_turn_verbatim", "latest turn"), ("latest_turn_n", "(n)"),
           ("newest_result_chars_kept", "newest result"), ("opening_context_kept", "opening"),
           ("information_kept", "info"), ("information_same_requests", "info, same requests (--pair-with)"),
           ("information_kept_unweighted", "info unw."),
           ("prefix_stability", "prefix stab."), ("prefix_possible", "prefix possible"),
           ("prefix_kept_where_possible", "prefix kept where possible"), ("cost_vs_untrimmed", "cost"))


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, dict):  # information on the same requests: the method's (the reference's), n
        return f"{value['method']} ({value['reference']}), {value['requests']}"
    return str(value)


def table(results: Mapping[str, Any], groups: tuple[str, ...] = ("all",)) -> str:
    header = ["method", "group", *(label for _, label in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for group in groups:
        for name, summary in results["methods"].items():
            cells = [_cell(summary[group][key]) for key, _ in COLUMNS]
            lines.append("| " + " | ".join([name, group, *cells]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--groups", action="store_true", help="a row per method and group, not only 'all'")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.5, 0.75, 0.9],
                        help="input budgets as shares of each sequence's last request (default: 0.5 0.75 0.9)")
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), help="only these methods")
    parser.add_argument("--generated", type=int, default=8, help="generated conversations (default: 8)")
    parser.add_argument("--pair-with", default="budget_hook", metavar="METHOD",
                        help="the method the 'same requests' column pairs each method with (default: budget_hook; "
                             "e.g. 'budget_hook[cache_step_ratio=0.1]' with --variant cache_step_ratio=0.1)")
    parser.add_argument("--chained", action="store_true",
                        help="also run budget_hook (and each --variant) under the chain rule, simulated (Chained)")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                        help="also run budget_hook with these policy settings (repeatable), e.g. "
                             "--variant cache_step_ratio=0.1 --variant soften_user_messages=true")
    args = parser.parse_args()
    start = time.perf_counter()
    methods: Mapping[str, Method] | Iterable[str] | None = args.methods
    if args.variant or args.chained:
        methods = {**{name: METHODS[name] for name in (args.methods or METHODS)},
                   **{f"budget_hook[{v}]": budget_hook_with(v) for v in args.variant}}
        if args.chained:
            methods.update({f"{name}[chained]": Chained(method) for name, method in list(methods.items())
                            if name.startswith("budget_hook")})
    results = run(tuple(dict.fromkeys(args.shares)), methods, args.generated, args.pair_with)
    results["wall_seconds"] = round(time.perf_counter() - start, 1)
    if not args.json:
        print(table(results, (*GROUPS, "all") if args.groups else ("all",)))
        print()
        print(INFORMATION_DEFINITION)
        print("sequences:", results["sequences"], "| shares:", results["shares"],
              "| method seconds:", {k: v["total"] for k, v in results["seconds"].items()},
              "| wall seconds:", results["wall_seconds"])
        print()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
