"""What budget_hook's stream hook adds per streamed chunk, against LiteLLM's own path in the same process.

    python bench/stream_hook.py              # 2,000 chunks a stream, 30 streams a row

budget_hook defines ``async_post_call_streaming_iterator_hook`` (``proxy.outcomes.watch_chain``: a Responses
stream's chain is stored from its ``response.completed`` event): LiteLLM then takes its slower path for every
stream (its wrapper around each callback's iterator), and a Responses stream gets one generator of ours. Each row
runs LiteLLM's own ``ProxyLogging.async_post_call_streaming_iterator_hook`` over an in-memory stream, with no
callback (LiteLLM's fast path) and with the plugin, and gives CPU per chunk. The ratio is what the plugin adds
against LiteLLM's own work for a chunk of a streamed completion, measured in the same run
(``litellm.acompletion(..., stream=True, mock_response=...)``: its stream wrapper and logging, no network), which the
proxy does for every chunk besides (and more: the provider's stream parsed, each chunk written as SSE).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import litellm
from litellm.caching.caching import DualCache
from litellm.proxy._types import UserAPIKeyAuth
from litellm.proxy.utils import ProxyLogging

from budget_hook.proxy import route_guard
from budget_hook.proxy.hook import BudgetHookPlugin


def per_chunk_us(callbacks: list, route: str, chunks: int, streams: int) -> float:
    """CPU per chunk (microseconds) of LiteLLM's iterator hook with ``callbacks`` registered, on ``route`` (the path
    the proxy serves, which decides whether the plugin watches the stream)."""
    litellm.callbacks = callbacks
    route_guard._ROUTE.set(route)
    request_data = {"litellm_call_id": "bench"}
    logging_obj = ProxyLogging(user_api_key_cache=DualCache())

    async def source():
        for index in range(chunks):
            yield {"type": "response.output_text.delta", "delta": str(index)}

    async def consume() -> None:
        async for _ in logging_obj.async_post_call_streaming_iterator_hook(
                response=source(), user_api_key_dict=UserAPIKeyAuth(), request_data=dict(request_data)):
            pass

    asyncio.run(consume())  # warm
    start = time.process_time()
    for _ in range(streams):
        asyncio.run(consume())
    return (time.process_time() - start) / streams / chunks * 1e6


def litellm_chunk_us(streams: int) -> float:
    """CPU per chunk (microseconds) of a streamed completion in LiteLLM itself (a mock response, no callback)."""
    litellm.callbacks = []

    async def one() -> int:
        stream = await litellm.acompletion(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                           mock_response="word " * 500, stream=True)
        return sum([1 async for _ in stream])

    asyncio.run(one())  # warm
    start, chunks = time.process_time(), 0
    for _ in range(max(1, streams // 6)):
        chunks += asyncio.run(one())
    return (time.process_time() - start) / chunks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--streams", type=int, default=30)
    args = parser.parse_args()
    plugin = BudgetHookPlugin()
    rows = (("/v1/chat/completions (handed back as it is)", "/v1/chat/completions"),
            ("/v1/responses (watched for response.completed)", "/v1/responses"))
    own = litellm_chunk_us(args.streams)
    print(f"LiteLLM's own work for a chunk of a streamed completion: {own:.1f} us")
    print(f"{'stream':52} {'hook, alone':>12} {'with budget_hook':>17} {'added':>9} {'of LiteLLM own':>15}")
    for name, route in rows:
        base = per_chunk_us([], route, args.chunks, args.streams)
        ours = per_chunk_us([plugin], route, args.chunks, args.streams)
        print(f"{name:52} {base:9.2f} us {ours:14.2f} us {ours - base:6.2f} us {(ours - base) / own:14.4f}x")


if __name__ == "__main__":
    main()
