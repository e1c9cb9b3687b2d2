"""A stand-in for the operator's logging integration (Langfuse, Datadog, S3...): it writes LiteLLM's
standard logging payload of every request to ``$E2E_STANDARD_LOG`` so tests can see what such an
integration receives; and, to ``$E2E_SPEND_LOG``, the row LiteLLM's own spend tracking builds for its
``LiteLLM_SpendLogs`` table (``get_logging_payload``: the proxy here has no database to insert it into), as
an operator's spend-log export holds it."""

import datetime
import json
import os

from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy.spend_tracking.spend_tracking_utils import get_logging_payload


class StandardPayloadRecorder(CustomLogger):
    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        self._write("success", kwargs)
        self._spend_row(kwargs, response_obj, start_time, end_time)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        self._write("failure", kwargs)
        self._spend_row(kwargs, response_obj, start_time, end_time)

    @staticmethod
    def _spend_row(kwargs, response_obj, start_time, end_time):
        if not os.environ.get("E2E_SPEND_LOG"):
            return
        try:
            # as LiteLLM's own failure row: a request refused before any call has no start time of its own
            now = datetime.datetime.now()
            kwargs = {**kwargs, "completion_start_time": kwargs.get("completion_start_time") or end_time or now}
            row = get_logging_payload(kwargs, response_obj, start_time or now, end_time or now)
        except Exception as exc:  # recorded, so a test sees why a row is missing
            row = {"e2e_error": repr(exc)}
        with open(os.environ["E2E_SPEND_LOG"], "a", encoding="utf-8") as out:
            out.write(json.dumps(row, default=str) + "\n")

    @staticmethod
    def _write(outcome, kwargs):
        payload = kwargs.get("standard_logging_object") or {}
        line = {"outcome": outcome, "call_id": kwargs.get("litellm_call_id"), "metadata": payload.get("metadata"),
                "prompt_tokens": payload.get("prompt_tokens")}
        with open(os.environ["E2E_STANDARD_LOG"], "a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=str) + "\n")


recorder = StandardPayloadRecorder()
