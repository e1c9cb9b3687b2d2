"""The budget_hook plugin with the CPU time of each of its hooks measured inside the proxy (``--hooks`` of
``bench/cpu_per_request.py``): loaded by the proxy as the callback ``timed_budget_hook.plugin``.

Each hook's CPU time, that of the decision itself (``decide``: inline or in the pool) and that of every tokenization
(``encode``: tiktoken's share of the decision), is the CPU time of the thread that runs it (``time.thread_time``),
summed per name; ``GET /budget_hook/bench/hooks`` answers the sums and counts so far. CPU time, not wall time: what
other threads or processes run meanwhile is not counted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import budget_hook.counting.encodings as encodings
import budget_hook.proxy.hook as hook
from budget_hook.proxy.hook import plugin

TOTALS: dict[str, list[float]] = {}


def _add(name: str, seconds: float) -> None:
    entry = TOTALS.setdefault(name, [0.0, 0])
    entry[0] += seconds
    entry[1] += 1


def _timed_hook(name: str) -> None:
    original = getattr(plugin, name)

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return await original(*args, **kwargs)
        finally:
            _add(name, time.thread_time() - started)
    setattr(plugin, name, timed)


for _name in ("async_pre_call_hook", "async_pre_call_deployment_hook", "async_post_call_response_headers_hook",
              "async_log_success_event"):
    _timed_hook(_name)

def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            _add(name, time.thread_time() - started)
    return timed


hook.decide = _timed("decide", hook.decide)
# tiktoken's share of the decision (``SafeEncoding.encode_ordinary`` looks ``safe_encode`` up on every call)
encodings.safe_encode = _timed("encode", encodings.safe_encode)


async def _totals() -> dict:
    return {name: {"seconds": seconds, "calls": calls} for name, (seconds, calls) in TOTALS.items()}


# loaded as a callback, inside the proxy: its app exists by now (as when the plugin adds its own routes)
sys.modules["litellm.proxy.proxy_server"].app.add_api_route("/budget_hook/bench/hooks", _totals, methods=["GET"])
