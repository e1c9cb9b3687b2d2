"""What the plugin changes in the proxy's app, once, when it first serves (duck-typed: no starlette import).

Both work on the app's *built* middleware stack (starlette builds it on its first call, so it exists by the
time the proxy serves a request, when the plugin calls them), walked by ``_stack``.

Contract: ``expose(app, names)`` adds ``names`` to the ``Access-Control-Expose-Headers`` of every
``CORSMiddleware`` in that stack. Returns how many it updated; never raises. Without it a browser's ``fetch`` sees
none of them: a simple CORS response exposes only what the middleware lists, and LiteLLM lists its own.

``wrap_error_handler(app, exception_type, rewrite)`` wraps the handler the app's built exception
middleware uses for ``exception_type`` (LiteLLM's ``ProxyException``): ``rewrite(exc)`` runs on every such
exception before the original handler renders it, and may return the response to send instead (a
streamed ``/v1/responses`` block is answered as a ``response.failed`` event), or an exception for the
original handler to render instead. Some routes (``/completions``, ``/embeddings``) rebuild the plugin's
error as a plain ``ProxyException`` with the HTTP status as its ``error.code`` and none of its headers; the
rewrite finds the block by call id and renders the plugin's own error, its code and headers back. Returns
whether it wrapped.

``wrap_routes(app, paths, transform)`` wraps the endpoint of every GET route at one of ``paths`` (FastAPI
calls ``route.dependant.call`` on each request): ``await transform(path, payload, kwargs)`` receives the JSON
the endpoint answered (a dict, or a JSON ``Response``'s decoded body) and the endpoint's arguments (its
authenticated ``user_api_key_dict``), and returns the payload to answer instead. A transform that fails
leaves the answer as it was. Done at start-up (routes exist before the first request). Returns how many
routes it wrapped.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterable, Iterator
from typing import Any

_HEADER = "Access-Control-Expose-Headers"


def _merged(current: str, names: Iterable[str]) -> str:
    listed = [h.strip() for h in current.split(",") if h.strip()]
    known = {h.lower() for h in listed}
    return ", ".join(listed + [n for n in names if n.lower() not in known])


def _stack(app: Any) -> Iterator[Any]:
    """The built middleware stack, outermost first: each middleware wraps the next as ``.app``."""
    layer = getattr(app, "middleware_stack", None)
    for _ in range(64):
        if layer is None:
            return
        yield layer
        layer = getattr(layer, "app", None)


def expose(app: Any, names: Iterable[str]) -> int:
    names = tuple(names)
    updated = 0
    with contextlib.suppress(Exception):  # an app of another shape: headers stay readable to non-browsers
        for layer in _stack(app):
            headers = getattr(layer, "simple_headers", None)
            if type(layer).__name__ == "CORSMiddleware" and isinstance(headers, dict):
                headers[_HEADER] = _merged(str(headers.get(_HEADER, "")), names)
                updated += 1
    return updated


def wrap_error_handler(app: Any, exception_type: type, rewrite: Any) -> bool:
    wrapped = False
    with contextlib.suppress(Exception):
        for layer in _stack(app):
            handlers = getattr(layer, "_exception_handlers", None)
            if isinstance(handlers, dict) and exception_type in handlers:
                original = handlers[exception_type]

                async def handler(request: Any, exc: Any, _original: Any = original) -> Any:
                    replacement = None
                    with contextlib.suppress(Exception):  # never stand between an error and its answer
                        replacement = rewrite(exc)
                    if isinstance(replacement, BaseException):  # the exception to render instead
                        return await _original(request, replacement)
                    return replacement if replacement is not None else await _original(request, exc)

                handlers[exception_type] = handler
                wrapped = True
    return wrapped


def wrap_routes(app: Any, paths: Iterable[str], transform: Any) -> int:
    paths = set(paths)
    wrapped = 0
    with contextlib.suppress(Exception):
        for route in _routes(getattr(app, "routes", ())):
            dependant = getattr(route, "dependant", None)
            path = getattr(route, "path", None)
            if path not in paths or "GET" not in (getattr(route, "methods", None) or ()) or dependant is None \
                    or getattr(dependant.call, "_budget_hook_wrapped", False):
                continue
            call = _wrapped(dependant.call, path, transform)
            dependant.call = call
            if getattr(route, "endpoint", None) is not None:
                route.endpoint = call  # FastAPI builds an included route's per-inclusion copy from it, lazily
            wrapped += 1
    return wrapped


def _routes(routes: Iterable[Any], depth: int = 0) -> Iterator[Any]:
    """Every route, inside included routers too (FastAPI 0.16x resolves those lazily: its original routes,
    and the per-inclusion copies already built)."""
    for route in routes:
        router = getattr(route, "original_router", None)
        if router is None or depth > 8:
            yield route
            continue
        yield from _routes(getattr(router, "routes", ()), depth + 1)
        yield from _routes(getattr(route, "_effective_candidates", None) or (), depth + 1)


def _wrapped(original: Any, path: str, transform: Any) -> Any:
    @functools.wraps(original)  # FastAPI reads the endpoint's parameters through __wrapped__
    async def call(**kwargs: Any) -> Any:
        result = await original(**kwargs)
        with contextlib.suppress(Exception):  # never stand between a client and the proxy's answer
            return await _transformed(result, lambda payload: transform(path, payload, kwargs))
        return result

    call._budget_hook_wrapped = True  # type: ignore[attr-defined]
    return call


async def _transformed(result: Any, transform: Any) -> Any:
    """``result`` with its JSON payload transformed: a dict, or a starlette ``Response`` holding JSON."""
    if isinstance(result, dict):  # rows may be pydantic models: transform their JSON, as FastAPI would send it
        return await transform(json.loads(json.dumps(result, default=_plain)))
    body = getattr(result, "body", None)
    if not isinstance(body, bytes) or "json" not in str(getattr(result, "media_type", "") or ""):
        return result
    payload = await transform(json.loads(body))
    result.body = json.dumps(payload, separators=(",", ":")).encode()
    result.headers["content-length"] = str(len(result.body))
    return result


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"not JSON: {type(value).__name__}")
