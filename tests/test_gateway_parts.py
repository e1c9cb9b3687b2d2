"""The adapter's gateway-side parts, tested without LiteLLM: client input, router windows, records."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from budget_hook.budget import ModelLimits
from budget_hook.proxy.client_input import read_client_input
from budget_hook.proxy.records import RecordStore
from budget_hook.proxy.windows import WindowCache, limits_from_router


class StubRouter:
    """What the adapter asks of LiteLLM's router: the deployments of a group and each one's window."""

    def __init__(self, deployments: dict[str, list[dict]], windows: dict[str, int | None]) -> None:
        self.deployments = deployments
        self.windows = windows

    def get_model_list(self, model_name: str):
        return self.deployments.get(model_name, [])

    def get_router_model_info(self, deployment: dict, received_model_name: str):
        window = self.windows.get(deployment["litellm_params"]["model"])
        if window is None:
            raise ValueError("This model isn't mapped yet")
        return {"max_input_tokens": window}


def deployment(group: str, model: str) -> dict:
    return {"model_name": group, "litellm_params": {"model": model}, "model_info": {}}


def test_the_window_is_the_minimum_over_the_groups_deployments():
    router = StubRouter({"mixed": [deployment("mixed", "openai/big"), deployment("mixed", "openai/small")]},
                        {"openai/big": 16_000, "openai/small": 4_000})
    limits = limits_from_router(router, "mixed")
    assert limits.window == 4_000 and limits.deployments == 2 and limits.source.startswith("router")


def test_a_deployment_with_an_unknown_window_makes_the_group_unknown_and_mixed_families_count_conservatively():
    router = StubRouter({"g": [deployment("g", "openai/gpt-4o"), deployment("g", "anthropic/claude-x-unmapped")]},
                        {"openai/gpt-4o": 128_000})
    limits = limits_from_router(router, "g")
    assert limits.window is None and "unknown for 1 of 2" in limits.source
    assert limits.counting_model == "anthropic/claude-x-unmapped"  # the estimated family counts higher


def test_without_a_router_the_model_map_or_unknown():
    assert limits_from_router(None, "gpt-4o").window == 128_000
    assert limits_from_router(None, "no-such-model-xyz").window is None


def test_an_alias_reports_the_groups_it_routes_to():
    router = StubRouter({"alias": [deployment("small", "openai/gpt-4o")]}, {"openai/gpt-4o": 4000})
    assert limits_from_router(router, "alias").routed_groups == ("small",)


def test_window_cache_asks_again_after_its_ttl():
    calls = []

    def lookup(group):
        calls.append(group)
        return ModelLimits(1000, "test", "gpt-4o")

    cache = WindowCache(lookup, ttl=60)
    cache.get("g")
    cache.get("g")
    assert calls == ["g"]
    expired = WindowCache(lookup, ttl=-1)
    expired.get("g")
    expired.get("g")
    assert calls == ["g", "g", "g"]


def test_client_input_from_metadata_and_header_takes_the_lower_cap_and_reports_the_rest():
    data = {"metadata": {"budget_hook": {"max_input_tokens": 9000, "mode": "off"}},
            "proxy_server_request": {"headers": {"X-Budget-Max-Input-Tokens": " 4000 "}}}
    client = read_client_input(data, "metadata")
    assert client.max_input_tokens == 4000 and client.ignored == ("metadata.budget_hook.mode",)
    assert client.problem is None


def test_bad_client_input_is_a_problem_naming_the_field_never_an_exception():
    for data, param in (({"litellm_metadata": {"budget_hook": "off"}}, "litellm_metadata.budget_hook"),
                        ({"litellm_metadata": {"budget_hook": {"max_input_tokens": "²"}}},
                         "litellm_metadata.budget_hook.max_input_tokens"),
                        ({"proxy_server_request": {"headers": {"x-budget-max-input-tokens": "9" * 5000}}},
                         "header x-budget-max-input-tokens")):
        client = read_client_input(data, "litellm_metadata")
        assert client.problem is not None and client.problem.param == param
        assert len(client.problem.message) < 300


def test_records_stay_until_their_callback_and_failed_ones_expire():
    store: RecordStore[str] = RecordStore(in_flight=3, failed_seconds=30)
    for i in range(5):
        store.remember(f"c{i}", f"r{i}")
    assert store.in_flight_ids() == ["c2", "c3", "c4"] and store.find("c0") is None
    assert store.settle("c2", "failure") == "r2" and store.find("c2") == "r2"  # headers may still be asked for
    assert store.settle("c2", "success") == "r2" and store.find("c2") is None  # a retry succeeded
    store.remember(None, "ignored")
    assert store.find(None) is None
    store.failed_seconds = -1
    store.settle("c3", "failure")
    store.settle("c4", "failure")
    assert "c3" not in store.failed_ids()  # expired when the next failure arrived


def test_an_inner_call_carrying_the_decisions_record_object_is_adopted_by_identity_only():
    """LiteLLM 1.108's Gemini-route adapter makes its completion under a new call id, with the outer request's
    metadata object: the inner call is the outer one's (attempts, record, outcome). A client's look-alike
    record (equal, not the same object) adopts nothing."""
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest
    from budget_hook.proxy.records import Decided

    store: RecordStore[str] = RecordStore()
    marker = {"action": "pass", "call_id": "outer"}
    limits = ModelLimits(window=1000, source="test", counting_model="gpt-4o")
    decided = Decided(marker, BudgetRequest(shape=None, body={}, model_group="g", limits=limits),  # type: ignore[arg-type]
                      limits, "open", {})
    store.remember("outer", "the record", decided)
    assert not store.adopt("inner", {"metadata": {"budget_hook": dict(marker)}})  # equal is not the same
    assert store.decided("inner") is None and store.owner("inner") == "inner"
    assert store.adopt("inner", {"litellm_metadata": {"budget_hook": marker}})
    assert store.decided("inner") is decided and store.owner("inner") == "outer"
    assert store.settle("inner", "success") == "the record" and store.find("outer") is None
    assert not store.adopt("outer", {"metadata": {"budget_hook": marker}})  # the owner adopts no one


def test_the_gateway_parts_import_without_litellm():
    code = textwrap.dedent("""
        import sys
        import budget_hook.proxy, budget_hook.proxy.client_input, budget_hook.proxy.windows
        import budget_hook.proxy.records, budget_hook.proxy.offload, budget_hook.proxy.errors
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "fastapi"))
        assert not loaded, loaded
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_a_comma_separated_model_list_gets_the_smallest_window_of_its_groups():
    """LiteLLM's batch completion sends "small,big" to each group: it must fit the smallest."""
    from budget_hook.proxy.windows import combine, listed_groups

    router = StubRouter({"big": [deployment("big", "openai/gpt-4o")], "small": [deployment("small", "openai/gpt-4o-mini")],
                         "claude": [deployment("claude", "anthropic/claude-sonnet-4-5")]},
                        {"openai/gpt-4o": 128_000, "openai/gpt-4o-mini": 4_000, "anthropic/claude-sonnet-4-5": 200_000})
    group = "big, small,claude"
    assert listed_groups(group) == ["big", "small", "claude"] and listed_groups("big") == ["big"]
    limits = combine(group, [limits_from_router(router, name) for name in listed_groups(group)])
    assert limits.window == 4_000 and limits.source == "min over the listed groups big, small, claude"
    assert limits.counting_model == "anthropic/claude-sonnet-4-5" and set(limits.routed_groups) >= {"big", "small"}
    unknown = combine("big,nowhere-xyz", [limits_from_router(router, "big"), limits_from_router(None, "nowhere-xyz")])
    assert unknown.window is None and "nowhere-xyz" in unknown.source


def test_claude_deployments_report_the_max_tokens_litellm_fills_in():
    router = StubRouter({"c": [deployment("c", "anthropic/claude-sonnet-4-5")],
                         "odd": [deployment("odd", "anthropic/claude-unmapped-x"), deployment("odd", "openai/gpt-4o")],
                         "o": [deployment("o", "openai/gpt-4o")]},
                        {"anthropic/claude-sonnet-4-5": 200_000, "anthropic/claude-unmapped-x": 8_000,
                         "openai/gpt-4o": 128_000})
    assert limits_from_router(router, "c").filled_output_tokens == 64_000  # the model map's maximum output
    assert limits_from_router(router, "odd").filled_output_tokens == 4_096  # LiteLLM's default for unmapped Claude
    assert limits_from_router(router, "o").filled_output_tokens is None
    # a name the router does not know is looked up in the model map (claude-opus-4-1, used here before, left the
    # map in LiteLLM 1.108: docs/litellm-versions.md); claude-opus-4-6 is mapped in 1.103 and 1.108 alike
    assert limits_from_router(None, "claude-opus-4-6").filled_output_tokens == 128_000


def test_a_chat_request_without_max_tokens_reserves_what_litellm_will_send_to_claude():
    from budget_hook.pipeline import BudgetRequest, decide
    from budget_hook.policy import load_settings
    from budget_hook.shapes import SHAPES

    body = {"model": "c", "messages": [{"role": "user", "content": "hi"}]}
    limits = ModelLimits(200_000, "test", "anthropic/claude-sonnet-4-5", filled_output_tokens=64_000)
    decision = decide(BudgetRequest(SHAPES.get("chat"), body, "c", limits), load_settings({}))
    budget = decision.report.budget
    assert budget.output_reserve == 64_000 and budget.output_reserve_source == "litellm_default"
    small = ModelLimits(4_000, "test", "anthropic/claude-x", filled_output_tokens=4_096)
    blocked = decide(BudgetRequest(SHAPES.get("chat"), body, "c", small), load_settings({}))
    assert blocked.action == "blocked" and blocked.block.kind == "output_reserve"
    assert "the max_tokens LiteLLM sends for this model" in blocked.block.message
    explicit = decide(BudgetRequest(SHAPES.get("chat"), {**body, "max_tokens": 500}, "c", small), load_settings({}))
    assert explicit.action == "pass" and explicit.report.budget.output_reserve == 500
