"""What the client asks of the gateway, read from LiteLLM's request (pure; no LiteLLM import).

Contract: ``read_client_input(data, metadata_key)`` returns a ``ClientInput``: the stricter cap the
client asks for, from ``<metadata_key>.budget_hook.max_input_tokens`` or the ``x-budget-max-input-tokens``
header (the lower of both), the client-sent settings that are not the client's to set (reported), or
the problem with what it sent (the field at fault and why). It never raises. ``caller_of(user)`` is the
caller as LiteLLM authenticated it (team, key, their admin metadata), read by attribute.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..pipeline import Caller, ClientInput, ClientProblem
from ..pipeline.privacy import id_hash
from ..policy.settings import POLICY_FIELD_NAMES, PROCESS_SETTINGS

SETTINGS_NAME = "budget_hook"
CLIENT_CAP_HEADER = "x-budget-max-input-tokens"
_DECIMAL = re.compile(r"[0-9]{1,12}")
#: client-sent setting names reported in a record, at most
MAX_REPORTED_KEYS = 10


#: setting names a record may quote: the plugin's own. Any other key a client sends is its own text (it can
#: carry anything) and is named by a hash of it
_KNOWN_KEYS = frozenset((*POLICY_FIELD_NAMES, *PROCESS_SETTINGS, "learning", "models", "teams", "keys"))


def _short(name: str) -> str:
    return name if name in _KNOWN_KEYS else f"(an unknown key, sha256 {id_hash(name)})"


class _Invalid(Exception):
    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(message)


def read_client_input(data: Mapping[str, Any], metadata_key: str) -> ClientInput:
    try:
        return _read(data, metadata_key)
    except _Invalid as exc:
        return ClientInput(problem=ClientProblem(exc.param, str(exc)))


def _read(data: Mapping[str, Any], key: str) -> ClientInput:
    cap: int | None = None
    ignored: list[str] = []
    metadata = data.get(key)
    asked = metadata.get(SETTINGS_NAME) if isinstance(metadata, Mapping) else None
    if asked is not None:
        if not isinstance(asked, Mapping):
            raise _Invalid(f"{key}.{SETTINGS_NAME}", f"{key}.{SETTINGS_NAME} must be an object such as "
                           f'{{"max_input_tokens": 4000}}, got {type(asked).__name__}')
        others = [str(name) for name in asked if name != "max_input_tokens"]
        # Reported, never echoed in bulk: a client can send thousands of keys of any length.
        ignored = [f"{key}.{SETTINGS_NAME}.{_short(name)}" for name in others[:MAX_REPORTED_KEYS]]
        if len(others) > MAX_REPORTED_KEYS:
            ignored.append(f"... and {len(others) - MAX_REPORTED_KEYS} more keys")
        if "max_input_tokens" in asked:
            cap = _positive_int(asked["max_input_tokens"], f"{key}.{SETTINGS_NAME}.max_input_tokens")
    server_request = data.get("proxy_server_request")
    headers = server_request.get("headers") if isinstance(server_request, Mapping) else None
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if str(name).lower() == CLIENT_CAP_HEADER:
                header_cap = _positive_int(value, f"header {CLIENT_CAP_HEADER}")
                cap = header_cap if cap is None else min(cap, header_cap)
    return ClientInput(max_input_tokens=cap, ignored=tuple(ignored))


def _positive_int(value: Any, where: str) -> int:
    # ASCII digits only and a bounded length: str.isdigit() accepts "²" and int() then raises, and a
    # 5,000-digit number exceeds int()'s limit; neither may escape as anything but a 400.
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        # described, never quoted: the value is client text, and the message reaches records and LiteLLM's log
        got = ("a boolean" if isinstance(value, bool) else "a number that is not positive" if isinstance(value, int)
               else "a number that is not whole" if isinstance(value, float) else "a string that is not one"
               if isinstance(value, str) else "null" if value is None else f"a {type(value).__name__}")
        raise _Invalid(where, f"{where} must be a positive integer (a stricter input cap), got {got}")
    return value


def caller_of(user_api_key_dict: Any) -> Caller:
    """The caller as LiteLLM authenticated it, built once per request."""
    def text(name: str) -> str | None:
        value = getattr(user_api_key_dict, name, None)
        return value if isinstance(value, str) else None

    def metadata(name: str) -> Mapping[str, Any] | None:
        value = getattr(user_api_key_dict, name, None)
        return value if isinstance(value, Mapping) else None

    return Caller(team_id=text("team_id"), team_alias=text("team_alias"), key_alias=text("key_alias"),
                  key_hash=text("token"), team_metadata=metadata("team_metadata"), key_metadata=metadata("metadata"))
