"""Settings validation (the YAML edge) and policy resolution (layers; the client may only tighten)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget_hook.errors import PolicyError
from budget_hook.policy import Policy, PolicyLayers
from budget_hook.policy.layers import TIGHTENING_SETTINGS
from budget_hook.policy.settings import load_metadata_layer, load_settings


def test_empty_settings_give_the_documented_defaults():
    settings = load_settings(None)
    policy = settings.layers.resolve(model_group="gpt-4o").policy
    assert policy == Policy()
    assert policy.mode == "enforce" and policy.fail_mode == "open" and policy.unknown_window == "default"
    assert policy.budget.output_reserve_ratio == 0.15 and policy.budget.safety_margin_ratio == 0.05
    assert policy.trim.target_ratio == 1.0 and policy.trim.pin_first_user_message is False
    assert policy.trim.keep_opening_context is True and policy.trim.cache_step_ratio == 0.2
    assert settings.log_to_stderr is True


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"mode": "enforse"}, "callback_settings.budget_hook.mode: Input should be 'enforce', 'shadow' or 'off'"),
        ({"max_input_token": 5}, "callback_settings.budget_hook.max_input_token: unknown setting; did you mean max_input_tokens?"),
        ({"teams": {"ml": {"pin_first_user_mesage": True}}},
         "callback_settings.budget_hook.teams.ml.pin_first_user_mesage: unknown setting; did you mean pin_first_user_message?"),
        ({"output_reserve_ratio": 1.5}, "callback_settings.budget_hook.output_reserve_ratio: Input should be less than 1"),
        ({"max_input_tokens": 0}, "callback_settings.budget_hook.max_input_tokens: Input should be greater than 0"),
        ({"keys": {"k": {"fail_mode": "ajar"}}}, "callback_settings.budget_hook.keys.k.fail_mode: Input should be 'open' or 'closed'"),
        ({"models": {"gpt-4o": {"output_reserve_min": 900, "output_reserve_max": 100}}},
         "callback_settings.budget_hook.models[gpt-4o]: output reserve bounds must satisfy 0 <= min <= max"),
        ({"compact_tool_results": "yes"}, "callback_settings.budget_hook.compact_tool_results: Input should be a valid boolean"),
        ({"zzz_unrelated": 1}, "unknown setting; known settings: mode, fail_mode"),
    ],
)
def test_bad_settings_name_the_key_and_the_problem(raw, expected):
    with pytest.raises(PolicyError) as caught:
        load_settings(raw)
    assert expected in str(caught.value)


def test_every_problem_is_reported_at_once():
    with pytest.raises(PolicyError) as caught:
        load_settings({"mode": "x", "teams": {"a": {"target_ratio": 0}}})
    assert "budget_hook.mode" in str(caught.value) and "teams.a.target_ratio" in str(caught.value)


def test_settings_must_be_a_mapping():
    with pytest.raises(PolicyError, match="expected a mapping"):
        load_settings(["mode", "enforce"])


def layers(**raw) -> PolicyLayers:
    return load_settings(raw).layers


def test_layers_apply_from_weakest_to_strongest():
    config = layers(
        max_input_tokens=100_000, keep_recent_tool_results=5,
        models={"gpt-4o": {"max_input_tokens": 50_000}, "claude-*": {"mode": "shadow"}},
        teams={"ml": {"max_input_tokens": 20_000}, "team-42": {"pin_first_user_message": True}},
        keys={"ci-bot": {"max_input_tokens": 10_000}},
    )
    resolved = config.resolve(model_group="gpt-4o", team_alias="ml", key_alias="ci-bot")
    assert resolved.policy.budget.max_input_tokens == 10_000
    assert resolved.policy.trim.keep_recent_tool_results == 5  # untouched by the overrides
    assert resolved.sources == ("config", "models[gpt-4o]", "teams[ml]", "keys[ci-bot]")

    by_id = config.resolve(model_group="claude-sonnet-4-5", team_id="team-42")
    assert by_id.policy.mode == "shadow" and by_id.policy.trim.pin_first_user_message
    assert by_id.sources == ("config", "models[claude-*]", "teams[team-42]")

    assert config.resolve(model_group="other").policy.budget.max_input_tokens == 100_000


def test_team_id_wins_over_alias_when_both_are_configured():
    config = layers(teams={"team-1": {"max_input_tokens": 1000}, "ml": {"max_input_tokens": 2000}})
    resolved = config.resolve(model_group="m", team_id="team-1", team_alias="ml")
    assert resolved.policy.budget.max_input_tokens == 1000


def test_metadata_layers_only_tighten_by_default():
    config = layers(teams={"ml": {"max_input_tokens": 20_000}}, mode="shadow")
    resolved = config.resolve(model_group="m", team_alias="ml")
    team_meta = load_metadata_layer({"max_input_tokens": 9000, "mode": "enforce", "target_ratio": 0.5},
                                    where="team metadata")
    resolved = config.with_metadata(resolved, team_meta, label="team_metadata", trust=False)
    loosen = load_metadata_layer({"max_input_tokens": 50_000, "mode": "off", "fail_mode": "open"}, where="key metadata")
    resolved = config.with_metadata(resolved, loosen, label="key_metadata", trust=False)
    assert resolved.policy.budget.max_input_tokens == 9000 and resolved.policy.mode == "enforce"
    assert resolved.policy.trim.target_ratio == 1.0  # not a tightening setting: ignored
    assert resolved.sources == ("config", "teams[ml]", "team_metadata")
    assert set(resolved.ignored_metadata_settings) == {
        "team_metadata.target_ratio", "key_metadata.max_input_tokens", "key_metadata.mode", "key_metadata.fail_mode"}


LOOSER = {"max_input_tokens": 50_000, "safety_margin_ratio": 0.01, "mode": "off", "fail_mode": "open"}
TIGHTER = {"max_input_tokens": 5_000, "safety_margin_ratio": 0.2, "mode": "enforce", "fail_mode": "closed"}


@pytest.mark.parametrize("name", sorted(TIGHTENING_SETTINGS))
def test_every_tightening_rule_refuses_to_loosen(name):
    """Under ``metadata_policy: tighten`` each rule lets metadata move its setting one way only: a looser
    value (or the same one) is ignored and reported, a stricter one applies."""
    assert set(TIGHTENING_SETTINGS) == set(LOOSER) == set(TIGHTER)  # a new rule gets both directions here

    def with_key_metadata(config, value):
        resolved = config.resolve(model_group="m")
        layer = load_metadata_layer({name: value}, where="key metadata")
        return resolved.policy.as_dict()[name], config.with_metadata(resolved, layer, label="key_metadata",
                                                                      trust=False)

    middle = layers(max_input_tokens=10_000, safety_margin_ratio=0.05, mode="shadow", fail_mode="closed")
    for value in (LOOSER[name], middle.resolve(model_group="m").policy.as_dict()[name]):
        current, kept = with_key_metadata(middle, value)
        assert kept.policy.as_dict()[name] == current and kept.ignored_metadata_settings == (f"key_metadata.{name}",)
    loose = layers(max_input_tokens=10_000, safety_margin_ratio=0.05, mode="shadow", fail_mode="open")
    _, tightened = with_key_metadata(loose, TIGHTER[name])
    assert tightened.policy.as_dict()[name] == TIGHTER[name] and not tightened.ignored_metadata_settings


def test_trusted_metadata_applies_fully_and_a_conflicting_layer_is_skipped_with_a_warning():
    config = layers(teams={"ml": {"max_input_tokens": 20_000}})
    resolved = config.resolve(model_group="m", team_alias="ml")
    trusted = config.with_metadata(resolved, {"max_input_tokens": 50_000, "mode": "off"}, label="key_metadata", trust=True)
    assert trusted.policy.budget.max_input_tokens == 50_000 and trusted.policy.mode == "off"
    conflicting = config.with_metadata(resolved, {"output_reserve_min": 5000, "output_reserve_max": 10},
                                       label="key_metadata", trust=True)
    assert conflicting.policy == resolved.policy and "key_metadata ignored" in conflicting.warnings[0]


def test_model_override_follows_router_aliases():
    config = layers(models={"big": {"max_input_tokens": 2000}})
    resolved = config.resolve(model_group="big-alias", routed_groups=("big",))
    assert resolved.policy.budget.max_input_tokens == 2000 and resolved.sources == ("config", "models[big]")


def test_conflicting_overrides_from_different_sections_stop_start_up():
    with pytest.raises(PolicyError, match=r"models\[g\] with teams\[t\]: output reserve bounds"):
        load_settings({"models": {"g": {"output_reserve_min": 3000}}, "teams": {"t": {"output_reserve_max": 2000}}})
    # the same settings that never meet (two teams) are fine
    load_settings({"teams": {"a": {"output_reserve_min": 3000}, "b": {"output_reserve_max": 2000}}})


def test_bad_admin_metadata_names_where_it_is():
    with pytest.raises(PolicyError, match=r"key metadata\.budget_hook\.max_input_token: unknown setting"):
        load_metadata_layer({"max_input_token": 5}, where="key metadata.budget_hook")
    with pytest.raises(PolicyError, match="expected a mapping"):
        load_metadata_layer("strict", where="team metadata.budget_hook")


def test_client_cap_only_tightens():
    config = layers(max_input_tokens=10_000)
    tightened = config.resolve(model_group="m").with_client_cap(4000)
    assert tightened.policy.budget.max_input_tokens == 4000 and tightened.client_cap_applied
    loosened = config.resolve(model_group="m").with_client_cap(50_000, ("metadata.budget_hook.mode",))
    assert loosened.policy.budget.max_input_tokens == 10_000
    assert loosened.client_max_input_tokens == 50_000 and not loosened.client_cap_applied
    assert loosened.ignored_client_settings == ("metadata.budget_hook.mode",)
    uncapped = layers().resolve(model_group="m").with_client_cap(50_000)
    assert uncapped.policy.budget.max_input_tokens == 50_000 and "client_cap" in uncapped.sources


operator_caps = st.one_of(st.none(), st.integers(1, 10**7))


@given(base=operator_caps, team=operator_caps, key=operator_caps, client=st.one_of(st.none(), st.integers(1, 10**7)))
def test_no_client_cap_ever_loosens_the_operator_policy(base, team, key, client):
    raw: dict = {}
    if base:
        raw["max_input_tokens"] = base
    if team:
        raw["teams"] = {"t": {"max_input_tokens": team}}
    if key:
        raw["keys"] = {"k": {"max_input_tokens": key}}
    config = load_settings(raw).layers
    resolved = config.resolve(model_group="m", team_alias="t", key_alias="k")
    operator = resolved.policy.budget.max_input_tokens
    effective = resolved.with_client_cap(client).policy.budget.max_input_tokens
    if operator is not None:
        assert effective is not None and effective <= operator
    if client is not None:
        assert effective is not None and effective <= client


def test_policy_as_dict_round_trips():
    policy = Policy.from_fields({"mode": "shadow", "max_input_tokens": 5000, "target_ratio": 0.8})
    assert Policy.from_fields(policy.as_dict()) == policy
    with pytest.raises(PolicyError, match="unknown policy setting"):
        Policy.from_fields({"budget": {}})


def test_yaml_off_is_the_mode_off_and_booleans_are_not_numbers():
    assert load_settings({"mode": False}).layers.base["mode"] == "off"  # YAML: mode: off
    assert load_settings({"teams": {"t": {"mode": False}}}).layers.teams["t"]["mode"] == "off"
    with pytest.raises(PolicyError, match="fail_mode: Input should be 'open' or 'closed' .got 'off'"):
        load_settings({"fail_mode": False})
    for name in ("max_input_tokens", "default_max_input_tokens", "output_reserve_min", "tool_result_keep_chars"):
        with pytest.raises(PolicyError, match=f"{name}: Value error, expected a number, got a boolean"):
            load_settings({name: True})
    with pytest.raises(PolicyError, match="safety_margin_ratio: Value error, expected a number, got a boolean"):
        load_settings({"safety_margin_ratio": False})
    with pytest.raises(PolicyError, match="count_cache_entries: Value error, expected a number"):
        load_settings({"count_cache_entries": True})
    with pytest.raises(PolicyError, match="expected a number"):
        load_metadata_layer({"max_input_tokens": True}, where="key_metadata.budget_hook")
    assert load_settings({"max_input_tokens": "4000"}).layers.base["max_input_tokens"] == 4000  # os.environ/VAR


def test_aliases_match_overrides_only_when_the_operator_opts_in():
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, Caller, decide
    from budget_hook.shapes import SHAPES

    body = {"model": "g", "messages": [{"role": "user", "content": "hi"}]}
    caller = Caller(team_id="team-7", team_alias="strict", key_alias="vip", key_hash="hash-1")
    request = BudgetRequest(SHAPES.get("chat"), body, "g", ModelLimits(4000, "test", "gpt-4o"), caller)
    overrides = {"teams": {"strict": {"max_input_tokens": 100}, "team-7": {"max_input_tokens": 900}},
                 "keys": {"vip": {"max_input_tokens": 50}, "hash-1": {"max_input_tokens": 800}}}
    sources = decide(request, load_settings(overrides)).resolved.sources
    assert sources == ("config", "teams[team-7]", "keys[hash-1]")
    opted = decide(request, load_settings({**overrides, "match_team_alias": True, "match_key_alias": True}))
    assert opted.resolved.sources == ("config", "teams[team-7]", "keys[vip]")  # the id first, then the alias
    only_aliases = {"teams": {"strict": {"max_input_tokens": 100}}, "keys": {"vip": {"max_input_tokens": 50}}}
    assert decide(request, load_settings(only_aliases)).resolved.sources == ("config",)
    assert decide(request, load_settings({**only_aliases, "match_team_alias": True})).resolved.sources == (
        "config", "teams[strict]")


def test_an_alias_gets_the_policy_of_the_group_its_deployments_belong_to():
    """LiteLLM's router lists an alias's deployments under the alias's name: the group they belong to is
    found by deployment id, and its policy applies before any policy of the name asked for."""
    from litellm import Router

    from budget_hook.pipeline.decider import caller_policy
    from budget_hook.pipeline.request import Caller
    from budget_hook.proxy.windows import limits_from_router

    router = Router(model_list=[{"model_name": "bars-small", "model_info": {"id": "d1", "max_input_tokens": 16000},
                                 "litellm_params": {"model": "openai/gpt-4o", "api_key": "x"}}],
                    model_group_alias={"bars": "bars-small", "hidden": {"model": "bars-small", "hidden": True}})
    settings = load_settings({"models": {"bars-small": {"max_input_tokens": 3000},
                                         "bars": {"max_input_tokens": 90000}, "*": {"max_input_tokens": 50000}}})
    for name in ("bars", "hidden", "bars-small"):
        limits = limits_from_router(router, name)
        assert limits.window == 16000 and ("bars-small" in limits.routed_groups or name == "bars-small")
        policy = caller_policy(name, limits, Caller(), settings)
        assert policy.policy.budget.max_input_tokens == 3000, (name, policy.sources)


# --- per-process settings in the wrong place; the loosening direction of every tightening rule ---------

from budget_hook.knobs import knob_fields  # noqa: E402
from budget_hook.policy.layers import FailMode, Mode  # noqa: E402
from budget_hook.policy.settings import PROCESS_SETTINGS, PluginSettings  # noqa: E402

_PROCESS_DEFAULTS = {**{knob.name: knob.default for knob in knob_fields(PluginSettings)}, "learning": {}}


@pytest.mark.parametrize("name", sorted(_PROCESS_DEFAULTS))
def test_a_per_process_setting_under_an_override_or_in_metadata_says_it_is_per_process(name):
    """Not "did you mean <the same name>": the name is right, the place is not."""
    value = _PROCESS_DEFAULTS[name]
    assert set(PROCESS_SETTINGS) < set(_PROCESS_DEFAULTS)
    load_settings({name: value})  # where it belongs
    for section, layer in (("teams", "ml"), ("models", "gpt-4o"), ("keys", "k")):
        with pytest.raises(PolicyError) as caught:
            load_settings({section: {layer: {name: value}}})
        message = str(caught.value)
        assert f"budget_hook.{section}.{layer}.{name}: {name} is a per-process setting" in message
        assert f"set it once at callback_settings.budget_hook.{name}" in message and "did you mean" not in message
    with pytest.raises(PolicyError) as caught:
        load_metadata_layer({name: value}, where="key metadata")
    assert f"key metadata.{name}: {name} is a per-process setting" in str(caught.value)


def test_override_sections_do_not_nest_and_a_misspelt_name_still_gets_a_suggestion():
    with pytest.raises(PolicyError, match=r"teams\.ml\.keys: overrides do not nest: keys is a section"):
        load_settings({"teams": {"ml": {"keys": {}}}})
    with pytest.raises(PolicyError, match="did you mean metadata_policy"):
        load_settings({"teams": {"ml": {"metadata_polcy": "trust"}}})


#: how strict a value of each tightening setting is (higher: stricter)
STRICTNESS = {
    "max_input_tokens": lambda v: -(v if v is not None else float("inf")),
    "safety_margin_ratio": lambda v: v,
    "mode": lambda v: -list(Mode.__args__).index(v),
    "fail_mode": lambda v: list(FailMode.__args__).index(v),
}
#: values drawn for every tightening setting and a few others metadata may not change under tighten
METADATA_VALUES = {
    "max_input_tokens": st.sampled_from([1_000, 10_000, 100_000]),
    "safety_margin_ratio": st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.9]),
    "mode": st.sampled_from(["enforce", "shadow", "off"]),
    "fail_mode": st.sampled_from(["open", "closed"]),
    "target_ratio": st.sampled_from([0.5, 1.0]),
    "unknown_window": st.sampled_from(["default", "block"]),
    "keep_opening_context": st.booleans(),
    "log_dropped_content": st.booleans(),
    "output_reserve_ratio": st.sampled_from([0.0, 0.5]),
}
metadata_layers = st.dictionaries(st.sampled_from(sorted(METADATA_VALUES)), st.just(None)).flatmap(
    lambda keys: st.fixed_dictionaries({k: METADATA_VALUES[k] for k in keys}))


@given(config=metadata_layers, team=metadata_layers, key=metadata_layers)
def test_metadata_under_tighten_never_loosens_anything(config, team, key):
    """Non-admins write their own keys' metadata: under ``metadata_policy: tighten`` no team or key layer
    makes a tightening setting looser (``safety_margin_ratio`` 0.0, ``mode: off``, a higher cap, ...) or
    changes any other setting, whatever the config and the layers say."""
    assert set(STRICTNESS) == set(TIGHTENING_SETTINGS)  # a new rule gets its order here
    try:
        config_layers = layers(**config)
    except PolicyError:
        return
    resolved = config_layers.resolve(model_group="m")
    before = resolved.policy.as_dict()
    for label, raw in (("team_metadata", team), ("key_metadata", key)):
        resolved = config_layers.with_metadata(resolved, load_metadata_layer(raw, where=label), label=label, trust=False)
    after = resolved.policy.as_dict()
    for name, value in before.items():
        if name in STRICTNESS:
            assert STRICTNESS[name](after[name]) >= STRICTNESS[name](value), (name, value, after[name])
        else:
            assert after[name] == value, name
    for name in ("target_ratio", "unknown_window", "keep_opening_context", "log_dropped_content"):
        for label, raw in (("team_metadata", team), ("key_metadata", key)):
            if name in raw:
                assert f"{label}.{name}" in resolved.ignored_metadata_settings


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_a_looser_routed_group_never_loosens_a_stricter_one(order):
    """A request routed to two groups (a comma-separated list, a routing group) gets each tightening setting
    from the stricter of them, whichever is named first."""
    config = layers(models={"a": {"max_input_tokens": 5_000, "safety_margin_ratio": 0.2, "mode": "enforce",
                                  "fail_mode": "closed"},
                            "b": {"max_input_tokens": 50_000, "safety_margin_ratio": 0.01, "mode": "off",
                                  "fail_mode": "open"}})
    policy = config.resolve(model_group=",".join(order), routed_groups=order).policy.as_dict()
    assert (policy["max_input_tokens"], policy["safety_margin_ratio"], policy["mode"], policy["fail_mode"]) == \
        (5_000, 0.2, "enforce", "closed")


def test_trim_lengths_that_conflict_stop_start_up_in_an_override_and_are_ignored_in_trusted_metadata():
    """``tool_result_keep_chars`` > ``tool_result_soft_keep_chars`` (compacting would keep more than softening):
    refused in the config at any layer, naming the layer; a trusted metadata layer that makes them conflict is
    ignored with a warning; equal lengths are accepted."""
    with pytest.raises(PolicyError, match=r"teams\[ml\]: tool_result_keep_chars \(3000\) must not exceed"):
        load_settings({"teams": {"ml": {"tool_result_keep_chars": 3000}}})
    assert load_settings({"teams": {"ml": {"tool_result_keep_chars": 2000}}})
    config = layers()
    resolved = config.resolve(model_group="m")
    conflicting = config.with_metadata(resolved, {"tool_result_soft_keep_chars": 100}, label="key_metadata",
                                       trust=True)
    assert conflicting.policy == resolved.policy and "key_metadata ignored" in conflicting.warnings[0]
    fine = config.with_metadata(resolved, {"tool_result_soft_keep_chars": 500}, label="key_metadata", trust=True)
    assert fine.policy.trim.tool_result_soft_keep_chars == 500
