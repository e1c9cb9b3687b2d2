"""What the plugin changes in the proxy's app, once, when it first serves (duck-typed: no starlette import).

Contract: ``expose(app, names)`` adds ``names`` to the ``Access-Control-Expose-Headers`` of every
``CORSMiddleware`` in ``app``'s middleware, whether the stack is built already (it is by the time the proxy
serves: starlette builds it on its first call) or not yet (the declared ``user_middleware``). Returns how
many it updated; never raises (duck-typed: no starlette import). Without it a browser's ``fetch`` sees
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
from collections.abc import Iterable
from typing import Any

_HEADER = "Access-Control-Expose-Headers"


def _merged(current: str, names: Iterable[str]) -> str:
    listed = [h.strip() for h in current.split(",") if h.strip()]
    known = {h.lower() for h in listed}
    return ", ".join(listed + [n for n in names if n.lower() not in known])


def expose(app: Any, names: Iterable[str]) -> int:
    names = tuple(names)
    updated = 0
    try:
        layer, seen = getattr(app, "middleware_stack", None), 0
        while layer is not None and seen < 64:  # the built stack: each middleware wraps the next as .app
            headers = getattr(layer, "simple_headers", None)
            if type(layer).__name__ == "CORSMiddleware" and isinstance(headers, dict):
                headers[_HEADER] = _merged(str(headers.get(_HEADER, "")), names)
                updated += 1
            layer, seen = getattr(layer, "app", None), seen + 1
        for middleware in getattr(app, "user_middleware", None) or []:  # not built yet: the declaration
            if getattr(getattr(middleware, "cls", None), "__name__", "") == "CORSMiddleware":
                kwargs = getattr(middleware, "kwargs", None)
                if isinstance(kwargs, dict):
                    kwargs["expose_headers"] = [*kwargs.get("expose_headers", ()),
                                                *(n for n in names if n not in kwargs.get("expose_headers", ()))]
                    updated += 1
    except Exception:  # an app of another shape: headers stay readable to non-browser clients
        return updated
    return updated


def wrap_error_handler(app: Any, exception_type: type, rewrite: Any) -> bool:
    wrapped = False
    try:
        layer, seen = getattr(app, "middleware_stack", None), 0
        while layer is not None and seen < 64:
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
            layer, seen = getattr(layer, "app", None), seen + 1
    except Exception:
        return wrapped
    return wrapped
