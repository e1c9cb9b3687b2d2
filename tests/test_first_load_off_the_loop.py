"""The first request naming a model whose vocabulary is not loaded yet loads it in the thread pool, not on the event
loop: ``decision_weight`` built the counter before the offload choice, and an attack review (2026-12-06) stalled a
worker's loop 2.1 s (Mistral's), 0.33-0.54 s (o200k, DeepSeek, Llama 3, Qwen) with a two-word request. A fresh
process, so that no earlier test has loaded the vocabularies."""

import ast
import asyncio
import contextlib
import os
import subprocess
import sys
import threading

import pytest
from litellm.proxy._types import UserAPIKeyAuth

import budget_hook.proxy.hook as hook_module
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.hook import BudgetHookPlugin

SCRIPT = r'''
import asyncio, threading
from litellm.proxy._types import UserAPIKeyAuth
from budget_hook.counting import counter as counter_module
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.hook import BudgetHookPlugin
loaded = []
for name in ("family_encoder", "get_encoding"):
    original = getattr(counter_module, name)
    def traced(*args, _original=original, _name=name, **kwargs):
        loaded.append((args[0], threading.current_thread() is threading.main_thread()))
        return _original(*args, **kwargs)
    setattr(counter_module, name, traced)
plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))
body = lambda m, i: {"model": m, "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": f"w{i}"}
for index, model in enumerate(("gpt-4o", "mistral/mistral-large-latest", "deepseek/deepseek-chat", "gpt-4o")):
    asyncio.run(plugin.async_pre_call_hook(UserAPIKeyAuth(), None, body(model, index), "acompletion"))
print(loaded)
'''


def test_the_first_request_for_a_vocabulary_loads_it_off_the_event_loop():
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    loaded = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert {name for name, _ in loaded} >= {"mistral", "deepseek"}, loaded
    assert not any(on_loop for _, on_loop in loaded), loaded


def test_a_decision_whose_vocabulary_is_not_loaded_weighs_as_the_whole_pool(monkeypatch):
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import decider, decision_weight
    monkeypatch.setattr(decider, "_LOADED", set())  # a process that has loaded no vocabulary yet
    limits = ModelLimits(8_192, "test", "gpt-4o")
    assert decision_weight(limits) == decider.FIRST_LOAD_WEIGHT
    decider.counter_for(limits)
    assert decision_weight(limits) == 1
    assert decision_weight(ModelLimits(8_192, "test", "some-other-model-on-o200k")) == 1  # by vocabulary, not name


@pytest.mark.parametrize("settings, metadata", [({"mode": "off"}, None), ({}, {"budget_hook": "not an object"})])
def test_a_decision_that_counts_nothing_is_not_sent_to_the_pool_every_time(settings, metadata, monkeypatch):
    """A review of the fix: weighed by the model's counter having been built, decisions made before any count
    (``mode: off``, a client's malformed metadata) never built one and all went to the pool (0.76x throughput)."""
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline.decider import counter_for
    counter_for(ModelLimits(128_000, "test", "gpt-4o"))  # o200k loaded by an earlier decision
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False, **settings}))
    threads: list[bool] = []
    original = hook_module.decide

    def traced(*args, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return original(*args, **kwargs)
    monkeypatch.setattr(hook_module, "decide", traced)

    async def main():
        for index in range(5):
            body = {"model": "gpt-4o-2024-08-06", "litellm_call_id": f"pool-weight-{settings}-{index}",
                    "messages": [{"role": "user", "content": "hi"}], **({"metadata": metadata} if metadata else {})}
            with contextlib.suppress(Exception):
                await plugin.async_pre_call_hook(UserAPIKeyAuth(), None, body, "acompletion")
    asyncio.run(main())
    assert threads == [True] * 5, f"{threads.count(False)} of 5 in the pool"
