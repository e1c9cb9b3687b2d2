"""A stand-in for the operator's logging integration (Langfuse, Datadog, S3...): it writes LiteLLM's
standard logging payload of every request to ``$E2E_STANDARD_LOG`` so tests can see what such an
integration receives."""

import json
import os

from litellm.integrations.custom_logger import CustomLogger


class StandardPayloadRecorder(CustomLogger):
    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        self._write("success", kwargs)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        self._write("failure", kwargs)

    @staticmethod
    def _write(outcome, kwargs):
        payload = kwargs.get("standard_logging_object") or {}
        line = {"outcome": outcome, "call_id": kwargs.get("litellm_call_id"), "metadata": payload.get("metadata"),
                "prompt_tokens": payload.get("prompt_tokens")}
        with open(os.environ["E2E_STANDARD_LOG"], "a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=str) + "\n")


recorder = StandardPayloadRecorder()
