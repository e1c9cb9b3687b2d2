"""What the proxies learned, shown and reset (``budget-hook learned``): the shared learning state in Redis.

Learning (``callback_settings.budget_hook.learning``) keeps, per deployment, the ratios of what its provider
billed to what budget_hook estimated, a window lowered by the provider's overflow errors, and the largest
prompt it served (``proxy.shared``: keys ``budget_hook:v1:teacher_ratios:<id>``, ``window:<id>``, ``served:<id>``).
A correction raises every estimate for that deployment, within ``[learning.min_factor, learning.max_factor]``
(1.0 to 1.5 by default) and only once ``learning.min_samples`` bills (20) were learned; a learned window is
never below ``learning.min_window_tokens`` nor ``learning.min_window_ratio`` of the configured window, and
expires after ``learning.window_ttl_seconds``. So learning can change decisions: this module shows what each
deployment's correction is now (computed as the proxies compute it) and deletes it.

``state(client, settings)`` -> one dict per deployment; ``reset(client, deployment=None)`` -> the number
of keys deleted. ``client`` is a synchronous ``redis.Redis``. Without Redis, learning is per proxy process
and a restart resets it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .learning import CorrectionBook, LearningSettings
from .proxy.shared import PREFIX, _float, _teachers

KINDS = ("teacher_ratios", "window", "served")


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _keys(client: Any, deployment: str | None = None) -> list[str]:
    pattern = f"{PREFIX}*" if deployment is None else None
    if pattern is None:
        return [f"{PREFIX}{kind}:{deployment}" for kind in KINDS if client.exists(f"{PREFIX}{kind}:{deployment}")]
    return sorted(_text(k) for k in client.scan_iter(match=pattern, count=500))


def deployments(keys: Iterable[str]) -> list[str]:
    found = set()
    for key in keys:
        kind, _, deployment = key[len(PREFIX):].partition(":")
        if kind in KINDS and deployment:
            found.add(deployment)
    return sorted(found)


def state(client: Any, settings: LearningSettings | None = None) -> list[dict[str, Any]]:
    """Each deployment's learned state, as the proxies read it (the correction is what a request of a
    caller with no correction of its own gets: the consensus of the callers that taught it)."""
    settings = settings or LearningSettings()
    out = []
    for deployment in deployments(_keys(client)):
        by_teacher = _teachers(client.hgetall(f"{PREFIX}teacher_ratios:{deployment}"))
        entries = [r for ratios in by_teacher.values() for r in ratios]
        book = CorrectionBook(settings)
        book.replace(deployment, by_teacher)
        factor = book.factor(deployment)
        window = client.get(f"{PREFIX}window:{deployment}")
        size, _, source = _text(window).partition(" ") if window else ("", "", "")
        served = _float(client.get(f"{PREFIX}served:{deployment}"))
        out.append({
            "deployment": deployment,
            "factor": factor if factor is not None else 1.0,
            "applied": factor is not None and factor != 1.0,
            "samples": len(entries),
            "samples_needed": settings.min_samples,
            "teachers": len(book.teachers(deployment)),
            "bounds": [settings.min_factor, settings.max_factor],
            "window": int(size) if size.isdigit() else None,
            "window_source": source or None,
            "window_expires_in_seconds": client.ttl(f"{PREFIX}window:{deployment}") if window else None,
            "served_tokens": int(served) if served is not None else None,
        })
    return out


def reset(client: Any, deployment: str | None = None) -> int:
    """Delete what was learned (every deployment, or one): the proxies drop a deleted correction at their next
    sync (``learning.sync_seconds``); a window they hold locally lapses with its TTL or a restart."""
    keys = _keys(client, deployment)
    return int(client.delete(*keys)) if keys else 0


def redis_url(config: dict[str, Any] | None, explicit: str | None, environ: dict[str, str]) -> str | None:
    """Where the proxies share learning: ``--redis``, else the config's ``litellm_settings.cache_params`` or
    ``router_settings`` Redis, else ``REDIS_URL`` / ``REDIS_HOST`` (+ ``REDIS_PORT``, ``REDIS_PASSWORD``)."""
    if explicit:
        return explicit
    for section, prefix in (("litellm_settings", ""), ("router_settings", "redis_")):
        block = (config or {}).get(section) or {}
        params = block.get("cache_params") or {} if section == "litellm_settings" else block
        host = params.get(f"{prefix}host") if isinstance(params, dict) else None
        if isinstance(host, str) and not host.startswith("os.environ/"):
            port = params.get(f"{prefix}port") or 6379
            password = params.get(f"{prefix}password")
            auth = f":{password}@" if isinstance(password, str) and not password.startswith("os.environ/") else ""
            return f"redis://{auth}{host}:{port}"
    if environ.get("REDIS_URL"):
        return environ["REDIS_URL"]
    if environ.get("REDIS_HOST"):
        auth = f":{environ['REDIS_PASSWORD']}@" if environ.get("REDIS_PASSWORD") else ""
        return f"redis://{auth}{environ['REDIS_HOST']}:{environ.get('REDIS_PORT', '6379')}"
    return None
