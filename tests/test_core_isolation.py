"""The core never imports litellm: importing it costs seconds and may reach the network."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_core_and_cli_run_without_importing_litellm():
    code = textwrap.dedent(
        """
        import sys, budget_hook, budget_hook.cli, budget_hook.replay, budget_hook.shapes.anthropic, budget_hook.budget.windows
        import budget_hook.policy, budget_hook.policy.settings, budget_hook.pipeline, budget_hook.shapes, budget_hook.proxy.records
        from budget_hook import TokenCounter, compute_budget, trim_request
        from budget_hook.budget.windows import lookup_max_input_tokens
        counter = TokenCounter.for_model("gpt-4o")
        request = {"messages": [{"role": "user", "content": "hi " * 5000}]}
        trim_request(request, counter=counter, budget=compute_budget(lookup_max_input_tokens("gpt-4o")))
        assert lookup_max_input_tokens("gpt-4o") == 128000
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "fastapi"))
        assert not loaded, loaded
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr


def test_only_the_proxy_adapter_imports_litellm_or_fastapi():
    import re
    from pathlib import Path

    import budget_hook

    package = Path(budget_hook.__file__).parent
    importing = sorted(
        str(path.relative_to(package)) for path in package.rglob("*.py")
        if re.search(r"^\s*(import|from)\s+(litellm|fastapi)\b", path.read_text(encoding="utf-8"), re.MULTILINE)
    )
    assert importing == ["proxy/hook.py"]


def test_replay_uses_the_window_rules_without_the_proxy_package():
    """``budget-hook replay`` decides offline: the window rules it needs are in ``budget.router_windows``, so
    neither it nor the CLI loads anything of ``budget_hook.proxy`` (the adapter's package)."""
    code = textwrap.dedent(
        """
        import sys, budget_hook.replay, budget_hook.cli
        from budget_hook.replay import group_limits
        config = {"model_list": [{"model_name": "g", "litellm_params": {"model": "openai/gpt-4o"},
                                  "model_info": {"id": "a", "max_input_tokens": 1000}},
                                 {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o"}}]}
        assert group_limits(config, "g").window == 1000
        loaded = sorted(m for m in sys.modules if m == "budget_hook.proxy" or m.startswith("budget_hook.proxy."))
        assert not loaded, loaded
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
