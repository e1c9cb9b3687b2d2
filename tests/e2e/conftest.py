"""Session fixtures: one fake provider and one real litellm proxy with budget_hook, shared by the e2e tests.

The proxy config (written to a temporary folder together with the test-only custom_auth and a logging
integration stand-in) has these model groups, all served by the fake provider:

=========== ============================== ===========================================================
group       deployments (fake model)        window as budget_hook must find it
=========== ============================== ===========================================================
agent       gpt-4o-8k                          8000 from config ``model_info``
small       gpt-4o-4k                          4000 from config ``model_info``
discovered  gpt-4o-6k                          6000 discovered from the upstream's ``GET /v1/models``
mixed       gpt-4o-16k(16000), gpt-4o-4k(4000)    4000: the minimum over the group
shadowed    gpt-4o-4k                          4000; ``models: {shadowed: {mode: shadow}}``
alias-small (router alias of small)             4000
unstable    gpt-4o-16k-down                    16000, always answers 500; the router falls back to ``small``
pinned      gpt-4o-4k, deployment id dep-4k-1  4000 (a client may name the deployment id as its model)
mistral     mistral-small-4k                   4000, counted with Mistral's own tokenizers
wild/*      any fake model (wildcard)          per the model named in the request
emb         text-embedding-3-small-1k         1000 per input (/embeddings)
claude      anthropic/claude-sonnet-4-5-4k    4000 (/v1/messages to the fake's Anthropic API)
codex       gpt-4o-20k                         20000 from config ``model_info`` (Codex CLI: replays, and the real CLI)
claude-sonnet-4-5  anthropic/claude-sonnet-4-5-100k  100000 (the real Claude Code CLI, which sends max_tokens 32000)
vllm-small  hosted_vllm/gpt-4o-4k               4000 (the ``/vllm/...`` pass-through with a router model)
azure-small azure/gpt-4o-4k                     4000 (the ``/azure/openai/deployments/azure-small/...`` pass-through)
=========== ============================== ===========================================================
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from .harness import HERE, model_entry, start_fake_provider, start_proxy

UPSTREAM_MODELS = {"mistral-small-4k": 4000, "gpt-4o-16k-down": 16000, "gpt-4o-4k": 4000, "gpt-4o-6k": 6000, "gpt-4o-8k": 8000, "gpt-4o-16k": 16000,
                   "claude-sonnet-4-5-4k": 4000, "text-embedding-3-small-1k": 1000, "gpt-4o-20k": 20000,
                   "claude-sonnet-4-5-100k": 100000,
                   # the Gemini pass-through (/gemini/...) reaches it by name; LiteLLM's model map gives 32,767
                   "learnlm-1.5-pro-experimental": 32767}

BUDGET_HOOK_SETTINGS = {
    "mode": "enforce",
    "match_team_alias": True,  # the "strict" team and the "pinned-key" key are matched by alias
    "match_key_alias": True,
    "models": {"shadowed": {"mode": "shadow"},
               # Claude Code and Codex compact on a block: these groups block rather than cut the middle out of
               # an oversized task (the default, for clients that exit on a block, like Gemini CLI)
               "claude-sonnet-4-5": {"reduce_opening_context": False}, "codex": {"reduce_opening_context": False}},
    "teams": {
        "strict": {"max_input_tokens": 1500},      # matched by team alias
        "team-by-id": {"max_input_tokens": 1500},  # matched by team id
    },
    "keys": {"pinned-key": {"pin_first_user_message": True}},
}


def proxy_config(upstream_port: int, settings: dict) -> dict:
    base = f"http://127.0.0.1:{upstream_port}"  # Anthropic's and Azure's; OpenAI-style ones add /v1
    api_base = f"{base}/v1"
    return {
        "model_list": [
            model_entry("agent", "openai/gpt-4o-8k", api_base, 8000),
            model_entry("small", "openai/gpt-4o-4k", api_base, 4000),
            model_entry("discovered", "openai/gpt-4o-6k", api_base),
            model_entry("mixed", "openai/gpt-4o-16k", api_base, 16000),
            model_entry("mixed", "openai/gpt-4o-4k", api_base, 4000),
            model_entry("unstable", "openai/gpt-4o-16k-down", api_base, 16000),
            model_entry("mistral", "openai/mistral-small-4k", api_base, 4000),
            model_entry("pinned", "openai/gpt-4o-4k", api_base, 4000, model_id="dep-4k-1"),
            model_entry("shadowed", "openai/gpt-4o-4k", api_base, 4000),
            model_entry("wild/*", "openai/*", api_base),
            model_entry("emb", "openai/text-embedding-3-small-1k", api_base, 1000),
            model_entry("codex", "openai/gpt-4o-20k", api_base, 20000),
            # router models of the pass-through routes that call the router directly (tests/e2e/test_routes_e2e.py)
            model_entry("vllm-small", "hosted_vllm/gpt-4o-4k", api_base, 4000),
            model_entry("azure-small", "azure/gpt-4o-4k", base, 4000, api_version="2024-10-21"),
            model_entry("claude", "anthropic/claude-sonnet-4-5-4k", base, 4000),
            model_entry("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5-100k", base, 100000),
        ],
        "router_settings": {"model_group_alias": {"alias-small": "small"}, "fallbacks": [{"unstable": ["small"]}]},
        # "prometheus": LiteLLM's own integration, whose /metrics serves budget_hook's series too
        "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin", "e2e_logger.recorder", "prometheus"],
                             "num_retries": 0},
        "callback_settings": {"budget_hook": settings},
        # the stand-in logger writes the spend-log row LiteLLM builds, with the request body as it stores it
        # with a master key set, LiteLLM refuses a previous_response_id it did not issue itself (403); the
        # Responses tests continue from ids the fake provider made up, as a client of a second gateway would
        "general_settings": {"custom_auth": "e2e_auth.user_api_key_auth", "store_prompts_in_spend_logs": True,
                             "allow_unmanaged_response_ids": True},
    }


def write_config(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for support in (HERE / "proxy_support").glob("*.py"):
        shutil.copy(support, folder / support.name)
    path = folder / "litellm_config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def upstream(workdir):
    process = start_fake_provider(workdir, UPSTREAM_MODELS)
    yield process
    process.stop()


@pytest.fixture(scope="session")
def proxy(workdir, upstream):
    folder = workdir / "proxy"
    config = write_config(folder, proxy_config(upstream.port, BUDGET_HOOK_SETTINGS))
    standard_log, spend_log = folder / "standard_logging.jsonl", folder / "spend_logs.jsonl"
    process = start_proxy(config, log_dir=folder, env={"E2E_STANDARD_LOG": str(standard_log),
                                                       "E2E_SPEND_LOG": str(spend_log),
                                                       # the /gemini/... pass-through goes to the fake provider
                                                       "GEMINI_API_BASE": f"http://127.0.0.1:{upstream.port}",
                                                       "GEMINI_API_KEY": "fake-key"})
    process.extra.update(standard_log=standard_log, spend_log=spend_log, config=config)
    yield process
    process.stop()
