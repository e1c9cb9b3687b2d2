"""The first request naming a model whose vocabulary is not loaded yet loads it in the thread pool, not on the event
loop: ``decision_weight`` built the counter before the offload choice, and an attack review (2026-12-06) stalled a
worker's loop 2.1 s (Mistral's), 0.33-0.54 s (o200k, DeepSeek, Llama 3, Qwen) with a two-word request. A fresh
process, so that no earlier test has loaded the vocabularies."""

import ast
import os
import subprocess
import sys

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


def test_a_decision_whose_counter_is_not_built_weighs_as_the_whole_pool():
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import decision_weight
    from budget_hook.pipeline.decider import FIRST_LOAD_WEIGHT, counter_for
    limits = ModelLimits(8_192, "test", "never-seen-before-model-for-this-test")
    assert decision_weight(limits) == FIRST_LOAD_WEIGHT
    counter_for(limits)
    assert decision_weight(limits) == 1
