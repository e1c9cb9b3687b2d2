"""The decision line's fast path: written straight to our handler's stream only when nothing else would see it,
and then byte for byte what ``logging`` would have written."""

from __future__ import annotations

import io
import logging
import uuid

import pytest

from budget_hook.proxy.loglines import install_stderr_handler, write_line


@pytest.fixture
def ours() -> tuple[logging.Logger, io.StringIO]:
    logger = logging.getLogger(f"loglines_test_{uuid.uuid4().hex}")  # a child of the root alone
    install_stderr_handler(logger)
    stream = io.StringIO()
    logger.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    return logger, stream


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


LINE = '{"event": "budget_hook.decision", "text": "é %(not a format)s \\n"}'


def test_alone_the_line_is_written_as_logging_would(ours):
    logger, stream = ours
    logger.info(LINE)
    by_logging = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    write_line(logger, LINE)
    assert stream.getvalue() == by_logging == LINE + "\n"


@pytest.mark.parametrize("change", ["another handler", "propagate", "logger filter", "handler filter",
                                    "record factory"])
def test_anything_else_that_would_see_the_line_still_does(ours, change, monkeypatch):
    logger, stream = ours
    seen = Collect()
    if change == "another handler":
        logger.addHandler(seen)
    elif change == "propagate":
        monkeypatch.setattr(logger, "propagate", True)
        root = logging.getLogger()
        root.addHandler(seen)
        monkeypatch.setattr(root, "level", logging.INFO)
        monkeypatch.setattr(root, "handlers", [seen])
    elif change == "logger filter":
        logger.addFilter(lambda record: seen.lines.append(record.getMessage()) or True)
    elif change == "handler filter":
        logger.handlers[0].addFilter(lambda record: seen.lines.append(record.getMessage()) or True)
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
    logger.setLevel(logging.WARNING)
    write_line(logger, LINE)
    logging.disable(logging.INFO)
    try:
        logger.setLevel(logging.INFO)
        write_line(logger, LINE)
    finally:
        logging.disable(logging.NOTSET)
    assert stream.getvalue() == ""


def test_a_broken_stream_never_raises(ours, capsys):
    logger, _ = ours

    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("disk gone")
    logger.handlers[0].setStream(Broken())  # type: ignore[attr-defined]
    write_line(logger, LINE)  # logging reports it (handleError) and goes on
    assert "disk gone" in capsys.readouterr().err
