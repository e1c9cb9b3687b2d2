"""End to end: the worked example reproduces however often it is run (issue 22, 4).

The demo upstream bills a rough quarter of the characters, not real tokens; learning from those bills would
raise every estimate (x1.5 after 20 requests) and turn the same ``demo_trim.json`` into another decision.
``litellm_config.yaml`` turns learning off for the demo: 30 runs decide the same, counted exactly.
"""

from __future__ import annotations

import pytest

from .test_demo_config import demo_proxy, post  # noqa: F401 - the fixture, started for this module

pytestmark = pytest.mark.e2e


def test_the_worked_example_decides_the_same_after_many_runs(demo_proxy):  # noqa: F811
    for run in range(30):
        response = post(demo_proxy, "demo_trim.json")
        assert response.status_code == 200, response.text
        assert (response.headers["x-budget-tokens-before"], response.headers["x-budget-tokens-after"],
                response.headers["x-budget-count-method"]) == ("3235", "1596", "exact"), (run, dict(response.headers))
