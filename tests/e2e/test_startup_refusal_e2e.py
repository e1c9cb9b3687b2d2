"""End to end: a config typo refuses the proxy's start in one screen (issue 22, 7).

The real ``litellm --config`` with a misspelt budget_hook setting: the proxy exits with 78 (EX_CONFIG) as
soon as it loads the plugin, says which setting is wrong and what it should be, and prints no traceback.
"""

from __future__ import annotations

import time

import pytest

from budget_hook.proxy.startup import EXIT_CONFIG

from .conftest import proxy_config, write_config
from .harness import start_proxy

pytestmark = pytest.mark.e2e


def test_a_config_typo_refuses_the_start_in_one_screen(workdir, upstream):
    config = write_config(workdir / "typo", proxy_config(upstream.port, {"safety_margn_ratio": 0.1}))
    started = time.monotonic()
    process = start_proxy(config, log_dir=config.parent, expect_failure=True, timeout=90)
    elapsed = time.monotonic() - started
    assert process.popen.returncode == EXIT_CONFIG
    stderr = process.stderr()
    assert "budget_hook: refusing to start" in stderr
    assert "safety_margn_ratio: unknown setting; did you mean safety_margin_ratio?" in stderr
    assert "budget-hook check-config" in stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    assert len(stderr.splitlines()) <= 50, stderr  # LiteLLM's banner and our few lines: one screen
    assert elapsed < 60, elapsed
