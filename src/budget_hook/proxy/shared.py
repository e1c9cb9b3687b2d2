"""Learned corrections and windows, kept per process and shared through LiteLLM's Redis when it has one.

Contract: ``SharedLearning(settings, redis=factory)``; ``factory()`` returns an async Redis client (the
one LiteLLM built from its own settings, ``litellm_redis`` below) or None. Then:

* ``await lookup(ids, teacher)`` -> ``(Correction | None, LearnedWindow | None)`` for the deployments a
  request of ``teacher`` may go to (a learned window below what a deployment served is ignored). With
  Redis, a deployment's shared state is re-read at most every ``sync_seconds``, within
  ``redis_timeout_seconds``; a slow or broken Redis is skipped for ``REDIS_BACKOFF_SECONDS`` (the local
  state answers meanwhile), and never fails a request.
* ``await learn_ratio(id, estimate, billed, teacher)`` / ``await learn_window(id, window, source,
  configured)`` / ``await learn_served(id, tokens)`` keep what one response or one overflow error taught,
  locally and in Redis. ``learn_window`` refuses a window below ``window_floor`` (what the deployment
  served, ``min_window_tokens``, ``min_window_ratio`` of ``configured``) and says why.

Keys (``budget_hook:v1:`` prefix): ``teacher_ratios:<deployment id>``, a hash of each teacher's most
recent ratios (``<teacher>`` -> ``"<last write, unix s> <ratio> <ratio> ..."``, ``per_teacher`` ratios and
``MAX_TEACHERS`` teachers at most, ``CorrectionBook.leaving``'s rule, one Lua script; expiring after a week unused);
``window:<deployment id>``, ``"<window> <source>"``, only ever lowered and never to or below what the
deployment served (one Lua script reads both), expiring after ``window_ttl_seconds``;
``served:<deployment id>``, the largest prompt it was billed for, only ever raised, same expiry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..learning import (
    ANONYMOUS,
    IDLE_TEACHER_SECONDS,
    MAX_TEACHERS,
    Correction,
    CorrectionBook,
    LearnedWindow,
    LearnedWindows,
    LearningSettings,
    ServedFloor,
    window_floor,
)

logger = logging.getLogger("budget_hook")

PREFIX = "budget_hook:v1:"
RATIOS_TTL_SECONDS = 7 * 24 * 3600
REDIS_BACKOFF_SECONDS = 30.0
_LOWER_WINDOW = """
local served = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if served > tonumber(ARGV[1]) then return 0 end
local current = redis.call('GET', KEYS[1])
if current then
  local known = tonumber(string.match(current, '^(%d+)'))
  if known and known <= tonumber(ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'EX', ARGV[3])
return 1
"""
_PUSH_RATIO = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
local items = {}
if current then
  local first = true
  for token in string.gmatch(current, '%S+') do
    if first then first = false else table.insert(items, token) end
  end
end
table.insert(items, ARGV[2])
while #items > tonumber(ARGV[3]) do table.remove(items, 1) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6] .. ' ' .. table.concat(items, ' '))
if redis.call('HLEN', KEYS[1]) > tonumber(ARGV[4]) then
  local all = redis.call('HGETALL', KEYS[1])
  local young, young_at, idle, idle_at = nil, nil, nil, nil
  for i = 1, #all, 2 do
    if all[i] ~= ARGV[1] then
      local at = tonumber(string.match(all[i + 1], '^(%S+)')) or 0
      local _, words = string.gsub(all[i + 1], '%S+', '')
      if words - 1 < tonumber(ARGV[7]) then
        if young_at == nil or at < young_at then young, young_at = all[i], at end
      elseif at < tonumber(ARGV[6]) - tonumber(ARGV[8]) and (idle_at == nil or at < idle_at) then
        idle, idle_at = all[i], at
      end
    end
  end
  redis.call('HDEL', KEYS[1], young or idle or ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""
_RAISE_SERVED = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if current >= tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[2]) return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""


class SharedLearning:
    def __init__(self, settings: LearningSettings, *, redis: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.corrections = CorrectionBook(settings)
        self.windows = LearnedWindows(settings)
        self.served = ServedFloor(settings)
        self._factory = redis if settings.share == "auto" else None
        self._client: Any = None
        self._next_resolve = 0.0
        self._clock = clock
        self._synced: dict[str, float] = {}
        self._down_until = 0.0
        #: when each deployment's served floor was last written to Redis (``learn_served``)
        self._served_written: dict[str, float] = {}

    # --- Redis -------------------------------------------------------------------------------------

    def _redis(self) -> Any:
        if self._factory is None or self._clock() < self._down_until:
            return None
        if self._client is None and self._clock() >= self._next_resolve:
            # Looked up lazily (LiteLLM builds its Redis client when the proxy starts, after the plugin), and
            # again every few seconds while there is none: the router may not exist yet.
            self._next_resolve = self._clock() + 5.0
            try:
                self._client = self._factory()
            except Exception as exc:  # a client we cannot build: per process then
                logger.warning("budget_hook: learning is not shared (Redis unavailable: %s)", type(exc).__name__)
                self._client = None
        return self._client

    @property
    def shared(self) -> bool:
        return self._client is not None

    def _failed(self, what: str, exc: BaseException) -> None:
        self._down_until = self._clock() + REDIS_BACKOFF_SECONDS
        logger.warning("budget_hook: Redis %s failed (%s); learning stays per process for %.0f s", what,
                       type(exc).__name__, REDIS_BACKOFF_SECONDS)

    async def _run(self, what: str, operation: Callable[[Any], Any]) -> Any:
        client = self._redis()
        if client is None:
            return None
        try:
            return await asyncio.wait_for(operation(client), timeout=self.settings.redis_timeout_seconds)
        except Exception as exc:  # timeout, connection refused, auth: never the request's problem
            self._failed(what, exc)
            return None

    # --- what a request uses ------------------------------------------------------------------------

    async def lookup(self, ids: Iterable[str], teacher: str | None = None
                     ) -> tuple[Correction | None, LearnedWindow | None]:
        ids = [i for i in ids if isinstance(i, str)]
        if not self.settings.enabled or not ids:
            return None, None
        now = self._clock()
        stale = [i for i in ids if now - self._synced.get(i, -1e18) >= self.settings.sync_seconds]
        if stale and self._redis() is not None:
            await self._pull(stale)
        return self.corrections.correction(ids, teacher), self.window(ids)

    def window(self, ids: Iterable[str]) -> LearnedWindow | None:
        """The smallest learned window over ``ids`` that their successes have not proved wrong."""
        return self.windows.window(i for i in ids if self._plausible(i))

    def _plausible(self, deployment: str) -> bool:
        known = self.windows.get(deployment)  # one shared before these floors existed may be below them
        return known is None or known[0] >= window_floor(self.settings, self.served.floor(deployment), None)

    async def _pull(self, ids: list[str]) -> None:
        async def read(client: Any) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for deployment in ids:
                pipe.hgetall(f"{PREFIX}teacher_ratios:{deployment}")
                pipe.get(f"{PREFIX}window:{deployment}")
                pipe.get(f"{PREFIX}served:{deployment}")
            return list(await pipe.execute())

        answers = await self._run("read", read)
        if answers is None:
            return
        now = self._clock()
        for index, deployment in enumerate(ids):
            ratios, window, served = answers[3 * index: 3 * index + 3]
            self.corrections.replace(deployment, _teachers(ratios))
            floor = _float(served)
            if floor is not None and floor.is_integer():
                self.served.serve(deployment, int(floor))
            if window:
                text = window.decode() if isinstance(window, bytes) else str(window)
                size, _, source = text.partition(" ")
                if size.isdigit():
                    self.windows.learn(deployment, int(size), source or "shared")
            self._synced[deployment] = now
        if len(self._synced) > 4 * 4096:
            self._synced.clear()

    # --- what responses and errors teach ------------------------------------------------------------

    async def learn_ratio(self, deployment: str, estimate: int, billed: int, teacher: str = ANONYMOUS
                          ) -> float | None:
        if not self.settings.enabled:
            return None
        ratio = self.corrections.add(deployment, estimate, billed, teacher)
        if ratio is None:
            return None

        async def push(client: Any) -> None:
            await client.eval(_PUSH_RATIO, 1, f"{PREFIX}teacher_ratios:{deployment}", teacher, repr(ratio),
                              str(self.corrections.per_teacher), str(MAX_TEACHERS), str(RATIOS_TTL_SECONDS),
                              str(int(time.time())), str(self.settings.min_samples), str(IDLE_TEACHER_SECONDS))

        await self._run("write", push)
        return ratio

    def window_refusal(self, deployment: str, window: int, configured: int | None) -> int | None:
        """The floor ``window`` falls below (why it cannot be learned), or None when it may be learned."""
        floor = window_floor(self.settings, self.served.floor(deployment), configured)
        return floor if window < floor else None

    async def learn_window(self, deployment: str, window: int, source: str, configured: int | None = None) -> bool:
        if not self.settings.enabled or self.window_refusal(deployment, window, configured) is not None:
            return False
        changed = self.windows.learn(deployment, window, source)

        async def lower(client: Any) -> None:
            await client.eval(_LOWER_WINDOW, 2, f"{PREFIX}window:{deployment}", f"{PREFIX}served:{deployment}",
                              str(window), source[:200], str(int(self.settings.window_ttl_seconds)))

        await self._run("write", lower)
        return changed

    async def learn_served(self, deployment: str, tokens: int) -> bool:
        """A success billed ``tokens`` of input: the deployment's window is at least that."""
        if not self.settings.enabled:
            return False
        raised = self.served.serve(deployment, tokens)
        now = self._clock()
        refresh = min(SERVED_REFRESH_SECONDS, self.settings.window_ttl_seconds / 2)
        if not raised and now - self._served_written.get(deployment, -1e18) < refresh:
            return False  # nothing new; the floor's expiry was restarted less than a minute ago
        if len(self._served_written) >= 10_000:
            self._served_written.clear()
        self._served_written[deployment] = now

        async def raise_floor(client: Any) -> None:
            await client.eval(_RAISE_SERVED, 1, f"{PREFIX}served:{deployment}", str(tokens),
                              str(int(self.settings.window_ttl_seconds)))

        await self._run("write", raise_floor)  # also when not raised (once a minute): the floor's expiry restarts
        return raised


#: a served floor that did not rise is written again (its expiry restarted) at most this often per deployment
SERVED_REFRESH_SECONDS = 60.0


def litellm_redis(router: Any, litellm_module: Any) -> Any:
    """An async Redis client built from LiteLLM's own Redis settings (the router's ``redis_*``, or the
    ``litellm_settings.cache`` Redis), or None when LiteLLM has none (duck-typed: no LiteLLM import)."""
    candidates = [getattr(getattr(router, "cache", None), "redis_cache", None),
                  getattr(getattr(litellm_module, "cache", None), "cache", None)]
    for candidate in candidates:
        init = getattr(candidate, "init_async_client", None)
        if callable(init):
            return init()
    return None


def _teachers(shared: Any) -> dict[str, list[float]]:
    """The shared hash of a deployment's ratios, per teacher, the least recently taught first."""
    entries: list[tuple[float, str, list[float]]] = []
    for teacher, value in (shared or {}).items():
        name = teacher.decode(errors="replace") if isinstance(teacher, bytes) else str(teacher)
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
        at, *ratios = text.split()
        parsed = [r for r in map(_float, ratios) if r is not None]
        if parsed:
            entries.append((_float(at) or 0.0, name[:80], parsed))
    return {name: ratios for _, name, ratios in sorted(entries)}


def _float(value: Any) -> float | None:
    try:
        number = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
