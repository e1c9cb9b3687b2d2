"""custom_auth for the end-to-end proxy: maps test keys to teams and keys without a database.

Loaded by the proxy as a loose file next to the test config (``general_settings.custom_auth``).
The metadata here stands for what an admin sets on a team or key through LiteLLM's API: LiteLLM's own
virtual keys (``/key/generate``) need its database, which the suite does not run. The proxy runs with a
master key as production does (tests/e2e/harness.py: ``LITELLM_MASTER_KEY``); with ``custom_auth`` set,
LiteLLM hands every key, the master key included, to this function (1.103 and 1.108 alike), so it accepts
the master key as the proxy admin and refuses every key it does not know with 401.
"""

import os
import secrets

from fastapi import HTTPException
from litellm.proxy._types import UserAPIKeyAuth

KEYS = {
    "sk-default": {},
    # a test key LiteLLM lets send a mocked answer (tests/e2e/test_served_floor_e2e.py: its usage teaches nothing)
    "sk-mock-tester": {"key_alias": "mock-tester", "metadata": {"allow_client_mock_response": True}},
    "sk-strict": {"team_id": "team-7f3a", "team_alias": "strict"},
    "sk-strict-by-id": {"team_id": "team-by-id"},
    "sk-meta-shadow": {"key_alias": "meta-shadow", "metadata": {"budget_hook": {"mode": "shadow"}}},
    "sk-team-meta": {"team_id": "team-meta", "team_metadata": {"budget_hook": {"max_input_tokens": 1000}}},
    "sk-bad-meta": {"key_alias": "bad-meta", "metadata": {"budget_hook": {"max_input_token": 5}}},
    "sk-pinned": {"key_alias": "pinned-key"},
    "sk-admin": {"user_role": "proxy_admin"},
    # tenants of the poisoning suite (tests/e2e/test_poisoning_e2e.py): one attacks, the others do not
    "sk-attacker": {"key_alias": "attacker", "team_id": "team-attacker"},
    "sk-tenant-b": {"key_alias": "tenant-b", "team_id": "team-b"},
    "sk-tenant-c": {"key_alias": "tenant-c", "team_id": "team-c"},
}


async def user_api_key_auth(request, api_key: str) -> UserAPIKeyAuth:
    key = api_key.removeprefix("Bearer ").strip()
    master = os.environ.get("LITELLM_MASTER_KEY", "")
    if master and secrets.compare_digest(key, master):
        return UserAPIKeyAuth(api_key=key, user_role="proxy_admin")
    if key not in KEYS:
        raise HTTPException(status_code=401, detail={"error": "unknown test key"})
    return UserAPIKeyAuth(api_key=key, **KEYS[key])
