"""The window advertised to clients (``pipeline.advertise``) and how the listings carry it (``proxy.model_info``)."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from budget_hook.budget import ModelLimits
from budget_hook.pipeline import Caller, advertised
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.model_info import advertise, groups_in

SMALL = ModelLimits(4000, "router", "gpt-4o")
SETTINGS = load_settings({"models": {"shadowed": {"mode": "shadow"}, "off": {"mode": "off"}},
                          "teams": {"team-a": {"max_input_tokens": 1500}}})


def test_the_budget_of_a_request_without_max_tokens_with_every_term():
    facts = advertised("small", SMALL, Caller(), SETTINGS)
    assert (facts.window, facts.output_reserve, facts.safety_margin, facts.input_budget) == (4000, 600, 200, 3200)


def test_a_team_cap_lowers_it_and_shadow_or_off_advertise_nothing():
    assert advertised("small", SMALL, Caller(team_id="team-a"), SETTINGS).input_budget == 1500
    assert advertised("shadowed", SMALL, Caller(), SETTINGS).input_budget is None
    assert advertised("off", SMALL, Caller(), SETTINGS).input_budget is None


def test_litellm_s_filled_max_tokens_is_the_reserve_and_a_reserve_without_room_advertises_nothing():
    claude = ModelLimits(200_000, "router", "anthropic/claude-sonnet-4-5", filled_output_tokens=64_000)
    assert advertised("claude", claude, Caller(), SETTINGS).input_budget == 200_000 - 64_000 - 10_000
    tiny = ModelLimits(4000, "router", "anthropic/claude-x", filled_output_tokens=4096)
    assert advertised("claude", tiny, Caller(), SETTINGS).input_budget is None


def test_an_unknown_window_is_the_policy_s_default_or_nothing_when_such_requests_are_blocked():
    unknown = ModelLimits(None, "unknown", "gpt-4o")
    assert advertised("x", unknown, Caller(), SETTINGS).window == 8192
    blocking = load_settings({"unknown_window": "block"})
    assert advertised("x", unknown, Caller(), blocking).input_budget is None


def test_a_broken_admin_metadata_layer_is_skipped_as_for_requests():
    caller = Caller(key_metadata={"budget_hook": {"max_input_token": 5}})
    assert advertised("small", SMALL, caller, SETTINGS).input_budget == 3200


def adverts(group: str):
    return advertised(group, SMALL, Caller(), SETTINGS)


def test_the_model_list_gains_the_budget_fields_and_the_payload_is_not_mutated():
    payload = {"object": "list", "data": [{"id": "small", "object": "model", "max_input_tokens": 4000},
                                          {"id": "shadowed", "object": "model"}, "odd"]}
    before = copy.deepcopy(payload)
    out = advertise("/v1/models", payload, adverts, admin=False)
    assert payload == before
    small, shadowed, odd = out["data"]
    assert (small["max_input_tokens"], small["context_length"], small["budget_hook"]["window"]) == (3200, 3800, 4000)
    assert shadowed == {"id": "shadowed", "object": "model"} and odd == "odd"


def test_model_info_keeps_the_configured_window_for_admins():
    payload = {"data": [{"model_name": "small", "model_info": {"max_input_tokens": 4000}}]}
    assert advertise("/model/info", payload, adverts, admin=False)["data"][0]["model_info"]["max_input_tokens"] == 3200
    info = advertise("/model/info", payload, adverts, admin=True)["data"][0]["model_info"]
    assert info["max_input_tokens"] == 4000 and info["budget_hook"]["input_budget"] == 3200
    group = advertise("/model_group/info", {"data": [{"model_group": "small", "max_input_tokens": 4000.0}]}, adverts,
                      admin=False)
    assert group["data"][0]["max_input_tokens"] == 3200


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=20))
def test_any_payload_is_answered_without_raising(payload):
    for path in ("/v1/models", "/model/info", "/model_group/info"):
        for shaped in (payload, {"data": payload}, {"data": [payload]}):
            groups_in(path, shaped)
            advertise(path, shaped, adverts, admin=False)


def test_wildcard_patterns_are_not_groups():
    assert groups_in("/v1/models", {"data": [{"id": "openai/*"}, {"id": "small"}]}) == ["small"]
