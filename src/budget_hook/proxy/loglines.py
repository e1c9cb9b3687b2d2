"""The JSON log line of a request: a provider error described without its text, and a bounded size.

Contract: ``describe_error(exception)`` is the error's class, HTTP status and a hash of its message (the
text only with ``with_text``: provider messages can quote the prompt); ``bounded_line(entry)`` is the JSON
line, at most ``MAX_LOG_LINE_CHARS`` characters (the record's lists left out first, and said so);
``write_line(logger, line)`` logs it at INFO, straight to the stream when nothing but our own handler would
see it (the line is byte-identical; a ``LogRecord`` and the handler chain cost a fifth of a fitting request's
success path).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
from typing import Any


def describe_error(exception: Any, *, with_text: bool = False) -> str | None:
    """A provider error as its class, status and a hash of its message: provider messages can quote the
    prompt (an invalid image URL, a rejected message), so the text itself is logged only when the operator
    asked for content in logs (``log_dropped_content``)."""
    if exception is None:
        return None
    text = str(exception)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    status = getattr(exception, "status_code", None)
    summary = f"{type(exception).__name__} (status {status}; message sha256 {digest}, {len(text)} chars)"
    return f"{summary}: {text[:2000]}" if with_text else summary


#: one log line is at most this many characters: beyond it the record's lists are left out (and said so)
MAX_LOG_LINE_CHARS = 64 * 1024


def bounded_line(entry: dict[str, Any]) -> str:
    line = json.dumps(entry, default=str, ensure_ascii=False)
    if len(line) <= MAX_LOG_LINE_CHARS:
        return line
    decision = {k: v for k, v in entry.get("decision", {}).items() if not isinstance(v, (list, dict))
                or k in ("budget", "counts")}
    line = json.dumps({**entry, "decision": {**decision, "truncated": f"lists left out: {len(line)} chars"}},
                      default=str, ensure_ascii=False)
    if len(line) <= MAX_LOG_LINE_CHARS:
        return line
    essentials = {k: entry.get(k) for k in ("event", "outcome", "call_id", "model_group")}
    return json.dumps({**essentials, "decision": {k: decision.get(k) for k in ("action", "tokens_before",
                                                                            "tokens_after")},
                       "truncated": f"record over {MAX_LOG_LINE_CHARS} chars"}, default=str, ensure_ascii=False)


def install_stderr_handler(logger: logging.Logger) -> None:
    """The proxy's own logging set-up does not cover third-party loggers; without a handler an operator
    would see nothing. One handler, once, printing the JSON record as is."""
    if any(getattr(h, "_budget_hook", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler._budget_hook = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


#: the logging methods a record passes through on its way to our handler: when any of them is not the standard
#: library's own (an error tracker such as Sentry patches ``Logger.callHandlers`` to collect log lines), the
#: line goes through ``logging`` so that the patch sees it
_PATH = (("Logger", "info"), ("Logger", "_log"), ("Logger", "makeRecord"), ("Logger", "handle"),
         ("Logger", "callHandlers"), ("Handler", "handle"), ("Handler", "format"), ("StreamHandler", "emit"),
         ("StreamHandler", "flush"), ("Formatter", "format"))


def _stock_logging() -> bool:
    source = logging.__file__
    return all(getattr(getattr(getattr(getattr(logging, owner), name, None), "__code__", None), "co_filename", None)
               == source for owner, name in _PATH)


def _ours_alone(logger: logging.Logger) -> logging.StreamHandler | None:
    """Our handler, when it is the only thing that would see an INFO line of ``logger`` and the standard
    library's own code would carry it there: no other handler, filter or propagation, the default record
    factory, nothing disabled, no class or method replaced. Else None (then ``logging`` runs)."""
    handlers = logger.handlers
    if type(logger) is not logging.Logger or len(handlers) != 1 or logger.filters or logger.propagate \
            or logger.disabled:
        return None
    handler = handlers[0]
    if not getattr(handler, "_budget_hook", False) or type(handler) is not logging.StreamHandler \
            or handler.filters or handler.level > logging.INFO or not logger.isEnabledFor(logging.INFO) \
            or logging.getLogRecordFactory() is not logging.LogRecord \
            or type(handler.formatter) is not logging.Formatter or handler.formatter._fmt != "%(message)s" \
            or not _stock_logging():
        return None
    return handler


def write_line(logger: logging.Logger, line: str) -> None:
    """``logger.info(line)``; when our handler alone would print it, written directly (same bytes, flushed as
    ``StreamHandler.emit`` does; a failure reported by ``logging``'s own ``handleError``, never raised)."""
    handler = _ours_alone(logger)
    if handler is None:
        logger.info(line)
        return
    with handler.lock or contextlib.nullcontext():
        try:
            handler.stream.write(line + handler.terminator)
            handler.flush()
        except Exception:  # as StreamHandler.emit: a broken stream is reported, the line is not written again
            handler.handleError(logger.makeRecord(logger.name, logging.INFO, "(budget_hook)", 0, line, (), None))
