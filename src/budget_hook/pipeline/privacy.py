"""Client-chosen text kept out of records, log lines, error messages and metric labels (pure).

A client chooses its model name, its roles, its tool names and call ids, and the keys of its schemas; any
of them can carry anything (a secret, personal data, a megabyte). What the gateway writes where an
operator or another tenant reads it (the decision record, the JSON log line, the 400 that LiteLLM logs at
ERROR, the Prometheus labels) names such strings by a fixed description or a short hash, never by their
text:

* ``shown_role(role)``: a role or item type the request formats define, else ``"other"``;
* ``id_hash(value)``: 16 hex digits of SHA-256 (as ``content_hash`` names messages), so an id can be matched
  against a transcript without being stored;
* ``shown_action(action)``: a record's action entry with its role and tool call id so treated;
* ``shown_problem(problem)``: a structure problem found in a request (which quotes ids and tool names)
  reduced to where it is;
* ``shown_source(source)``: where a window came from, without the names of models the operator did not
  configure.

The model group a record, a message or a metric names is the adapter's business (it knows the operator's
configuration): see ``BudgetRequest.shown_group`` and ``proxy.labels``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

#: roles (chat, Anthropic, Gemini) and ``/v1/responses`` item types: the only ones a record names
KNOWN_ROLES = frozenset({
    "system", "developer", "user", "assistant", "tool", "function", "model",
    "message", "function_call", "function_call_output", "reasoning", "item_reference", "compaction",
    "web_search_call", "file_search_call", "computer_call", "computer_call_output", "code_interpreter_call",
    "image_generation_call", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
    "apply_patch_call", "apply_patch_call_output", "mcp_call", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "custom_tool_call", "custom_tool_call_output",
})
OTHER_ROLE = "other"

_WHERE = re.compile(r"(?:messages|input|contents)\[\d+\]")
#: problems whose whole text is the gateway's own
_FIXED_PROBLEMS = frozenset({"the first message is not a user message"})


def shown_role(role: Any) -> str:
    return role if isinstance(role, str) and role in KNOWN_ROLES else OTHER_ROLE


def id_hash(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def shown_action(action: Mapping[str, Any]) -> dict[str, Any]:
    """A record's action entry: a known role or ``other``; the tool call id as ``tool_call_id_sha256``."""
    shown = dict(action)
    if "role" in shown:
        shown["role"] = shown_role(shown["role"])
    if "tool_call_id" in shown:
        shown["tool_call_id_sha256"] = id_hash(shown.pop("tool_call_id"))
    return shown


def shown_problem(problem: str) -> str:
    if problem in _FIXED_PROBLEMS:
        return problem
    where = _WHERE.match(problem)
    return f"{where.group(0) + ': ' if where else ''}a tool call or result without its pair"


def shown_source(source: str) -> str:
    """``source`` up to the first name it quotes: ``router``, ``model map``, ``unknown``, ``policy default``."""
    if "listed group" in source:
        return ("unknown for a listed group" if source.startswith("unknown") else "min over the listed groups") \
            + " (names not shown)"
    head = re.split(r"[:;]", source, maxsplit=1)[0].strip()
    return head if head.startswith(("router", "model map", "unknown", "policy default")) else "not shown"
