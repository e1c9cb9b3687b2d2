"""Decision records of requests in flight, by call id (pure; no LiteLLM).

Headers and log callbacks read a request's record from here, never from request metadata, which a
client can write (a forged record would otherwise reach headers and logs). A record is kept until its
success or failure callback runs, however long a stream lasts; after a failure it stays a little (a
retry may still succeed, and the proxy may ask for the error's headers afterwards).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

#: records of requests in flight (the bound only guards against callbacks that never come)
IN_FLIGHT_RECORDS = 16_384
#: after a failure a record stays this long, at most this many
FAILED_RECORD_SECONDS = 30.0
FAILED_RECORDS_KEPT = 1024

R = TypeVar("R")


class RecordStore(Generic[R]):
    def __init__(self, *, in_flight: int = IN_FLIGHT_RECORDS, failed_seconds: float = FAILED_RECORD_SECONDS,
                 failed_kept: int = FAILED_RECORDS_KEPT) -> None:
        self.in_flight = in_flight
        self.failed_seconds = failed_seconds
        self.failed_kept = failed_kept
        self._records: OrderedDict[str, R] = OrderedDict()
        self._failed: OrderedDict[str, tuple[float, R]] = OrderedDict()

    def remember(self, call_id: Any, record: R) -> None:
        if not isinstance(call_id, str):
            return
        self._records[call_id] = record
        self._records.move_to_end(call_id)
        while len(self._records) > self.in_flight:
            self._records.popitem(last=False)

    def find(self, call_id: Any) -> R | None:
        record = self._records.get(call_id)
        if record is None and call_id in self._failed:
            record = self._failed[call_id][1]
        return record

    def settle(self, call_id: Any, outcome: str) -> R | None:
        """The record for a finished call. A success is final; a failure keeps it for a little while."""
        record = self._records.pop(call_id, None)
        if outcome == "success":
            failed = self._failed.pop(call_id, None)
            return record if record is not None else (failed[1] if failed else None)
        if record is None:
            return self._failed[call_id][1] if call_id in self._failed else None
        self._failed[call_id] = (time.monotonic(), record)
        self.purge()
        return record

    def purge(self) -> None:
        """Forget failed records older than ``failed_seconds`` (and any beyond ``failed_kept``). Runs on every
        failure and on a timer the adapter sets, so a quiet gateway does not keep them either."""
        now = time.monotonic()
        while self._failed and (len(self._failed) > self.failed_kept
                                or next(iter(self._failed.values()))[0] < now - self.failed_seconds):
            self._failed.popitem(last=False)

    def in_flight_ids(self) -> list[str]:
        return list(self._records)

    def failed_ids(self) -> list[str]:
        return list(self._failed)


def attach_record(data: dict, key: str, record: Any, name: str = "budget_hook") -> dict[str, Any]:
    """The record under ``<key>.budget_hook`` and ``<key>.spend_logs_metadata.budget_hook`` (without any
    content: spend logs are stored). A fresh metadata dict: the client's own metadata object is never mutated."""
    metadata = dict(data.get(key) or {}) if isinstance(data.get(key), Mapping) else {}
    spend = metadata.get("spend_logs_metadata")
    spend = dict(spend) if isinstance(spend, Mapping) else {}
    spend[name] = record.as_dict(content=False)
    metadata["spend_logs_metadata"] = spend
    attached: dict[str, Any] = record.as_dict()
    metadata[name] = attached
    data[key] = metadata
    return attached
