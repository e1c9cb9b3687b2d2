"""What the plugin changes in the proxy's app, once, when it first serves (duck-typed: no starlette import).

Both work on the app's *built* middleware stack (starlette builds it on its first call, so it exists by the
time the proxy serves a request, when the plugin calls them), walked by ``_stack``.

Contract: ``expose(app, names)`` adds ``names`` to the ``Access-Control-Expose-Headers`` of every
``CORSMiddleware`` in that stack. Returns how many it updated; never raises. Without it a browser's ``fetch`` sees
none of them: a simple CORS response exposes only what the middleware lists, and LiteLLM lists its own.

``wrap_error_handler(app, exception_type, rewrite)`` wraps the handler the app's built exception
middleware uses for ``exception_type`` (LiteLLM's ``ProxyException``): ``rewrite(exc)`` runs on every such
exception before the original handler renders it, and may return the response to send instead (a
streamed ``/v1/responses`` block is answered as a ``response.failed`` event). Some routes
(``/completions``, ``/embeddings``) rebuild the plugin's error as a plain ``ProxyException`` with the HTTP
status as its ``error.code`` and none of its headers; the rewrite finds the block by call id and puts
them back. Returns whether it wrapped.
"""

from __future__ import annotations

import contextlib
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
                    return replacement if replacement is not None else await _original(request, exc)

                handlers[exception_type] = handler
                wrapped = True
    return wrapped
