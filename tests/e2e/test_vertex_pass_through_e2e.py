"""A Vertex AI pass-through whose URL names a router group is served from that group's deployment: LiteLLM
(``_resolve_vertex_model_from_router``) rewrites the URL to the deployment's own model when the group has a
deployment with ``use_in_pass_through``. It is budgeted against that group's window (an attack review,
2026-12-06: a group's name was budgeted as ``vertex_ai/<name>``, a window unknown to the model map, so the
8,192-token default applied to a 4k deployment; a group named with slashes, as in LiteLLM's own example
``gcp/google/gemini-2.5-flash``, was not read from the URL at all, and the request went unchecked).

The deployment's service account is a throwaway key whose token endpoint is a stand-in on 127.0.0.1; Google
itself is out of reach (no network), so a request over the group's window must be refused by budget_hook with a
400 before LiteLLM tries to send it, and one that fits gets past budget_hook (then fails upstream)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .conftest import write_config
from .harness import MASTER_KEY, start_proxy

pytestmark = pytest.mark.e2e
GROUPS = ("small-gemini", "gcp/google/small-gemini")
PREFIX = "/vertex_ai/v1/projects/p/locations/us-central1/publishers/google/models/"


class _Token(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"access_token": "stand-in", "expires_in": 3600, "token_type": "Bearer"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vertex_pt")
    tokens = HTTPServer(("127.0.0.1", 0), _Token)
    threading.Thread(target=tokens.serve_forever, daemon=True).start()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    account = folder / "service_account.json"
    account.write_text(json.dumps({
        "type": "service_account", "project_id": "p", "private_key_id": "1", "private_key": key,
        "client_email": "budget-hook-test@p.iam.gserviceaccount.com", "client_id": "1",
        "token_uri": f"http://127.0.0.1:{tokens.server_address[1]}/token"}))
    config = write_config(folder / "proxy", {
        "model_list": [{"model_name": name, "litellm_params": {
            "model": "vertex_ai/gemini-2.0-flash", "vertex_project": "p", "vertex_location": "us-central1",
            "vertex_credentials": str(account), "use_in_pass_through": True},
            "model_info": {"max_input_tokens": 4000}} for name in GROUPS],
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
        "callback_settings": {"budget_hook": {"mode": "enforce"}},
    })
    served = start_proxy(config, log_dir=folder)
    yield served
    served.stop()
    tokens.shutdown()


def post(proxy, group: str, words: int) -> httpx.Response:
    body = {"contents": [{"role": "user", "parts": [{"text": "word " * words}]}]}
    return httpx.post(f"{proxy.base_url}{PREFIX}{group}:generateContent", json=body, timeout=120,
                      headers={"authorization": f"Bearer {MASTER_KEY}"})


@pytest.mark.parametrize("group", GROUPS)
def test_a_vertex_pass_through_naming_a_router_group_is_budgeted_against_the_group(proxy, group):
    response = post(proxy, group, 6000)  # over the group's 4,000, under the 8,192 default
    assert response.status_code == 400, (response.status_code, response.text[:500])
    assert "exceeds the maximum number of tokens allowed" in response.text and "4000" in response.text
    fits = post(proxy, group, 100)
    assert "budget_hook" not in fits.text and fits.status_code != 400, (fits.status_code, fits.text[:300])
