"""The decision line's fast path: written straight to our handler's stream only when nothing else would see it,
and then byte for byte what ``logging`` would have written."""

from __future__ import annotations

import io
import logging
import uuid

import pytest

from budget_hook.proxy.loglines import _ours_alone, install_stderr_handler, write_line


@pytest.fixture
def ours() -> tuple[logging.Logger, io.StringIO]:
    logger = logging.getLogger(f"loglines_test_{uuid.uuid4().hex}")  # a child of the root alone
    install_stderr_handler(logger)
    stream = io.StringIO()
    logger.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    return logger, stream


def only_ours(logger: logging.Logger) -> None:
    """pytest (9+) attaches its log-capture handlers to every non-propagating logger for each test phase: the
    test body removes them, so that our handler is alone as in the proxy."""
    logger.handlers = [h for h in logger.handlers if getattr(h, "_budget_hook", False)]


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


LINE = '{"event": "budget_hook.decision", "text": "é %(not a format)s \\n"}'


def test_alone_the_line_is_written_as_logging_would(ours):
    logger, stream = ours
    only_ours(logger)
    logger.info(LINE)
    by_logging = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    assert _ours_alone(logger) is logger.handlers[0]  # the fast path is the one taken
    write_line(logger, LINE)
    assert stream.getvalue() == by_logging == LINE + "\n"


@pytest.mark.parametrize("change", ["another handler", "propagate", "logger filter", "handler filter",
                                    "record factory", "patched callHandlers", "logger class"])
def test_anything_else_that_would_see_the_line_still_does(ours, change, monkeypatch):
    logger, stream = ours
    only_ours(logger)
    seen = Collect()
    if change == "another handler":
        logger.addHandler(seen)
    elif change == "propagate":
        monkeypatch.setattr(logger, "propagate", True)
        monkeypatch.setattr(logging.getLogger(), "handlers", [seen])  # restored after the test
    elif change == "logger filter":
        logger.addFilter(lambda record: seen.lines.append(record.getMessage()) or True)
    elif change == "handler filter":
        logger.handlers[0].addFilter(lambda record: seen.lines.append(record.getMessage()) or True)
    elif change == "patched callHandlers":  # as Sentry's logging integration does, to collect breadcrumbs
        original = logging.Logger.callHandlers

        def patched(self, record):
            seen.lines.append(record.getMessage())
            return original(self, record)
        monkeypatch.setattr(logging.Logger, "callHandlers", patched)
    elif change == "logger class":
        class Custom(logging.Logger):
            def handle(self, record):
                seen.lines.append(record.getMessage())
                super().handle(record)
        monkeypatch.setattr(logger, "__class__", Custom)
    else:
        factory = logging.getLogRecordFactory()

        def made(*args, **kwargs):
            record = factory(*args, **kwargs)
            seen.lines.append(record.getMessage())
            return record
        monkeypatch.setattr(logging, "_logRecordFactory", made)  # setLogRecordFactory, restored after the test
    write_line(logger, LINE)
    assert seen.lines == [LINE]
    assert stream.getvalue() == LINE + "\n"


def test_a_level_above_info_writes_nothing(ours):
    logger, stream = ours
    only_ours(logger)
    logger.setLevel(logging.WARNING)
    write_line(logger, LINE)
    before = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        logger.setLevel(logging.INFO)
        write_line(logger, LINE)
    finally:
        logging.disable(before)
    assert stream.getvalue() == ""


@pytest.mark.parametrize("broken", ["write", "flush"])
def test_a_broken_stream_never_raises_nor_writes_twice(ours, capsys, broken):
    logger, _ = ours
    only_ours(logger)

    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            if broken == "write":
                raise OSError("disk gone")
            return super().write(text)

        def flush(self) -> None:
            if broken == "flush":
                raise OSError("disk gone")
    stream = Broken()
    logger.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    write_line(logger, LINE)  # logging reports it (handleError) and goes on, as StreamHandler.emit does
    assert "disk gone" in capsys.readouterr().err
    assert stream.getvalue() == ("" if broken == "write" else LINE + "\n")


def test_a_stream_without_flush_gets_the_line_once(ours):
    logger, _ = ours
    only_ours(logger)

    class NoFlush:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> int:
            self.text += text
            return len(text)
    stream = NoFlush()
    logger.handlers[0].stream = stream  # type: ignore[attr-defined]
    write_line(logger, LINE)
    assert stream.text == LINE + "\n"
