"""The structure holds: one registry of shapes, steps as data, knobs declared once, small modules."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import budget_hook
from budget_hook.errors import PolicyError
from budget_hook.knobs import knob_bounds, knob_fields
from budget_hook.learning import LearningSettings
from budget_hook.pipeline import DecisionRecord
from budget_hook.policy import Policy
from budget_hook.policy.settings import (
    POLICY_KNOBS,
    PROCESS_SETTINGS,
    LearningModel,
    PluginSettings,
    PluginSettingsModel,
    PolicyFields,
    load_settings,
)
from budget_hook.shapes import SHAPES, ConversationShape, ShapeRegistry
from budget_hook.shapes.chat import SHAPE as CHAT
from budget_hook.trimming import (
    ACTION_KINDS,
    EDITING_ACTIONS,
    REDUCTIONS,
    REMOVING_ACTIONS,
    STAGES,
    ActionKind,
    TrimPolicy,
)
from budget_hook.trimming.ladder import action_counts

PACKAGE = Path(budget_hook.__file__).parent


def test_no_source_module_is_over_500_lines():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")}
    assert max(sizes.values()) <= 500, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_every_budgeted_call_type_and_route_has_exactly_one_shape():
    expected = {"acompletion": "chat", "completion": "chat", "anthropic_messages": "anthropic",
                "aresponses": "responses", "responses": "responses", "atext_completion": "completions",
                "text_completion": "completions", "aembedding": "embeddings", "embedding": "embeddings"}
    assert {t: SHAPES.for_call_type(t).name for t in expected} == expected
    assert SHAPES.for_call_type("aimage_generation") is None and SHAPES.for_call_type(None) is None
    routes = [route for shape in SHAPES.shapes for route in shape.routes]
    assert len(routes) == len(set(routes)) and "/v1/messages" in routes
    for shape in SHAPES.shapes:
        assert shape.metadata_key in ("metadata", "litellm_metadata") and shape.param


def test_the_registry_refuses_a_shape_that_cannot_write_back_every_editing_action():
    broken = dataclasses.replace(CHAT, name="broken", call_types=frozenset({"x"}), apply=lambda b, v, r: dict(b),
                                 writers={"compacted": lambda item, edited: item})
    with pytest.raises(ValueError, match="cannot write back trimming action"):
        ShapeRegistry((*SHAPES.shapes, broken))
    with pytest.raises(ValueError, match="claimed by"):
        ShapeRegistry((*SHAPES.shapes, dataclasses.replace(CHAT, name="other")))
    for shape in SHAPES.shapes:
        if isinstance(shape, ConversationShape) and shape.apply is not None:
            assert set(shape.writers) == set(EDITING_ACTIONS), shape.name


def test_steps_are_the_single_declaration_of_actions():
    assert sorted(ACTION_KINDS) == sorted(get_args(ActionKind))
    assert {"dropped"} == REMOVING_ACTIONS
    assert ACTION_KINDS == ("images_removed", "compacted", "shortened", "dropped")  # first use along the ladder
    assert EDITING_ACTIONS == ("images_removed", "compacted", "shortened")
    assert {r.action for r in REDUCTIONS if r.removes} == REMOVING_ACTIONS
    assert len({r.name for r in REDUCTIONS}) == len(REDUCTIONS)
    for reduction in REDUCTIONS:
        assert isinstance(getattr(TrimPolicy(), reduction.enabled_by), bool), reduction.enabled_by


def test_stages_give_up_older_material_first():
    # the order is the contract: older history, the agent loop in progress, the newest results, opening context
    assert [stage.name for stage in STAGES] == ["older_history", "latest_loop", "opening_context", "reduce_task"]


def test_reductions_are_tried_lightest_first():
    """The ladder's order is the contract: a message's reductions are tried in this order, removals after
    the edits of the same region, the opening context's last."""
    assert [(r.name, r.action, r.enabled_by) for r in REDUCTIONS] == [
        ("images", "images_removed", "drop_old_images"),
        ("soften", "compacted", "soften_tool_results"),
        ("soften_user", "shortened", "soften_user_messages"),
        ("compact", "compacted", "compact_tool_results"),
        ("shorten", "shortened", "shorten_assistant_messages"),
        ("drop", "dropped", "drop_old_turns"),
        ("drop_latest_steps", "dropped", "drop_latest_turn_steps"),
        ("reduce_recent", "compacted", "reduce_recent_tool_results"),
        ("drop_context", "dropped", "drop_opening_context"),
        ("reduce_opening", "shortened", "reduce_opening_context"),
    ]


def test_the_trim_state_sits_below_the_ladder():
    """No cycle: ``state`` imports neither the ladder nor the engine; the ladder imports the state."""
    source = (PACKAGE / "trimming" / "state.py").read_text(encoding="utf-8")
    assert "from .ladder" not in source and "from .engine" not in source
    assert "from .state import TrimState" in (PACKAGE / "trimming" / "ladder.py").read_text(encoding="utf-8")


def test_counts_and_headers_derive_from_the_steps_and_never_fail_on_an_unknown_action():
    class Action:
        def __init__(self, action):
            self.action = action
    counts = action_counts([Action("dropped"), Action("compacted"), Action("summarised")])
    assert counts["dropped"] == 1 and counts["summarised"] == 1 and all(kind in counts for kind in ACTION_KINDS)
    record = DecisionRecord(action="trimmed", model_group="g", mode="enforce", counts=counts)
    headers = record.headers()
    assert headers["x-budget-dropped-messages"] == "1" and headers["x-budget-edited-messages"] == "2"


def test_the_yaml_edge_has_exactly_the_policy_knobs():
    knob_names = [knob.name for _, knob in POLICY_KNOBS]
    assert list(PolicyFields.model_fields) == knob_names
    flat = Policy().as_dict()
    assert set(flat) == set(knob_names)
    for cls, knob in POLICY_KNOBS:
        assert flat[knob.name] == knob.default, knob.name
        field = PolicyFields.model_fields[knob.name]
        assert field.default is None and field.description == knob.metadata["doc"]
        assert knob.metadata["doc"], f"{cls.__name__}.{knob.name} has no documentation"


NUMERIC_KNOBS = [knob for _, knob in POLICY_KNOBS
                 if (isinstance(knob.default, (int, float)) and not isinstance(knob.default, bool))
                 or knob.name == "max_input_tokens"]
#: knobs that are also checked against each other (min <= max), beyond their own bounds
PAIRED = {"output_reserve_min", "output_reserve_max", "tool_result_keep_chars", "tool_result_soft_keep_chars"}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NUMERIC_KNOBS), st.one_of(st.integers(-10, 10_000), st.floats(-2, 2, allow_nan=False)))
def test_the_yaml_edge_and_the_policy_accept_the_same_values(knob, value):
    """For every numeric knob, the config accepts exactly the values the policy accepts: its declared bounds."""
    if "int" in str(knob.type) and isinstance(value, float) and not value.is_integer():
        return  # a fractional value for an integer knob: pydantic refuses it, a dataclass would not check types
    bounds = knob_bounds(knob)
    in_bounds = all({"gt": value > b, "ge": value >= b, "lt": value < b, "le": value <= b}[k] for k, b in bounds.items())
    policy_ok = True
    try:
        Policy.from_fields({knob.name: value})
    except PolicyError:
        policy_ok = False
    yaml_ok = True
    try:
        load_settings({knob.name: value})
    except PolicyError:
        yaml_ok = False
    assert yaml_ok == policy_ok, (knob.name, value)
    if knob.name not in PAIRED:
        assert policy_ok == in_bounds, (knob.name, value)
    elif not in_bounds:
        assert not policy_ok, (knob.name, value)


@pytest.mark.parametrize("cls", [PluginSettings, LearningSettings])
def test_process_and_learning_settings_are_knobs_the_yaml_edge_derives_from(cls):
    """Declared once: each process and learning setting is a knob; its YAML field has its default, bounds
    and doc, so a new one needs no second declaration."""
    model = PluginSettingsModel if cls is PluginSettings else LearningModel
    knobs = knob_fields(cls)
    assert knobs and all(knob.metadata["doc"] for knob in knobs)
    for knob in knobs:
        yaml = model.model_fields[knob.name]
        assert yaml.default == knob.default and yaml.description == knob.metadata["doc"], knob.name
        for name, bound in knob_bounds(knob).items():
            assert any(getattr(m, name, None) == bound for m in yaml.metadata), (knob.name, name)
    assert tuple(k.name for k in knob_fields(PluginSettings)) == PROCESS_SETTINGS
    assert load_settings({}).learning == LearningSettings() and load_settings({}) == PluginSettings(
        layers=load_settings({}).layers)


@pytest.mark.parametrize(("keep", "other"), [("tool_result_keep_chars", "tool_result_soft_keep_chars")])
def test_a_cut_never_keeps_more_than_a_lighter_one(keep, other):
    with pytest.raises(PolicyError, match=keep):
        TrimPolicy(**{keep: 3000, other: 2000})
    with pytest.raises(PolicyError, match=keep):
        load_settings({keep: 3000, other: 2000})
    assert TrimPolicy(**{keep: 2000, other: 2000})


def test_providers_are_pure_data_below_everything():
    """``providers/`` is the one place a provider's knowledge lives: it imports nothing else of budget_hook (so
    counting, learning, budget and the proxy may all read it), and each record's parts name its own family."""
    import ast

    from budget_hook.providers import PROVIDERS, provider

    allowed = {"__future__", "re", "typing", "dataclasses"}
    for path in sorted((PACKAGE / "providers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= allowed, (path.name, ast.dump(node))
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 1 or node.module in allowed, (path.name, node.module)
    families = [record.family for record in PROVIDERS]
    assert len(set(families)) == len(families) and all(provider(f) is not None for f in families)
    for record in PROVIDERS:
        assert all(wording.provider == record.family for wording in record.overflow), record.family
        assert record.count_endpoint is None or record.count_endpoint.provider == record.family
