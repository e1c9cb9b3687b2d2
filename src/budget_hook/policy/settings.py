"""The YAML edge: validate the ``callback_settings: budget_hook:`` block of a LiteLLM config.

Contract: ``load_settings(raw)`` takes the block as parsed from YAML (a dict, or None for "not set") and
returns frozen ``PluginSettings``, or raises ``PolicyError`` whose message names every bad key with its
full path (``callback_settings.budget_hook.teams.ml.max_input_token: unknown setting; did you mean
max_input_tokens?``). The proxy builds the plugin at start-up, so a broken policy stops the proxy
before it serves a single request. ``load_metadata_layer`` validates the same fields when an admin sets
them in a team's or key's ``metadata.budget_hook``.

Pydantic lives here and nowhere else; everything downstream is frozen dataclasses.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import Field, dataclass, field
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, StrictBool, ValidationError, create_model
from pydantic import Field as PydanticField

from ..budget import BudgetPolicy
from ..counting.templated import TokenizerSpec
from ..counting.templated import load as load_tokenizer
from ..errors import PolicyError
from ..knobs import check_bounds, knob, knob_bounds, knob_fields
from ..learning import LearningSettings
from ..trimming import TrimPolicy
from .layers import MetadataPolicy, Policy, PolicyLayers, UnknownRoutes

SETTINGS_PATH = "callback_settings.budget_hook"

#: every policy knob, from the frozen dataclasses that define them (declaration order: top, budget, trim)
POLICY_KNOBS: tuple[tuple[type, Field], ...] = tuple(
    (cls, f) for cls in (Policy, BudgetPolicy, TrimPolicy) for f in knob_fields(cls))


def _not_a_boolean(value: Any) -> Any:
    # YAML's true/false where a number is expected is a mistake, not 1/0 (pydantic would take it as 1).
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


def _yaml_word(value: Any) -> Any:
    # YAML 1.1 reads an unquoted off/no as false and on/yes as true: `mode: off` means the word.
    return {False: "off", True: "on"}[value] if isinstance(value, bool) else value


#: numbers as YAML writes them (or as LiteLLM resolves ``os.environ/VAR`` strings), never booleans
Count = Annotated[int, BeforeValidator(_not_a_boolean)]
Ratio = Annotated[float, BeforeValidator(_not_a_boolean)]


def _pydantic_field(cls: type, knob: Field, *, override: bool = True) -> tuple[Any, Any]:
    """The YAML type of a knob, its bounds kept: optional for a policy override (it names only what it
    changes), else with the knob's own default (a process or learning setting)."""
    hint = typing.get_type_hints(cls)[knob.name]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    args = [a for a in typing.get_args(hint) if a is not type(None)] if union else []
    base = args[0] if args else hint
    if base is bool:
        base = StrictBool  # "yes"/1 for a flag is a typo, not a setting
    elif base is int:
        base = Count
    elif base is float:
        base = Ratio
    elif typing.get_origin(base) is Literal:
        base = Annotated[base, BeforeValidator(_yaml_word)]
    optional = Optional[base]  # type: ignore[valid-type]  # noqa: UP045 - built at run time from a type variable
    field_info: Any = PydanticField(default=None if override else knob.default, description=knob.metadata["doc"],
                                    **knob_bounds(knob))  # type: ignore[call-overload]
    return (optional if override else base), field_info


#: Every policy knob as an optional YAML setting (built from the dataclasses: nothing to keep in sync).
PolicyFields: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "PolicyFields",
    __config__=ConfigDict(extra="forbid", strict=False),
    **{knob.name: _pydantic_field(cls, knob) for cls, knob in POLICY_KNOBS},
)


class _LearningBase(BaseModel):
    """``learning:``: the correction learned from what providers bill, and windows from their errors."""

    model_config = ConfigDict(extra="forbid")

    def build(self) -> LearningSettings:
        values = self.model_dump()
        if values["min_factor"] > values["max_factor"]:
            raise ValueError(f"learning.min_factor ({values['min_factor']}) is above learning.max_factor "
                             f"({values['max_factor']})")
        return LearningSettings(**values)


#: ``learning:`` from ``LearningSettings``' knobs (nothing to keep in sync)
LearningModel: type[_LearningBase] = create_model(  # type: ignore[call-overload]
    "LearningModel", __base__=_LearningBase,
    **{knob.name: _pydantic_field(LearningSettings, knob, override=False) for knob in knob_fields(LearningSettings)},
)


@dataclass(frozen=True)
class PluginSettings:
    """The whole ``callback_settings.budget_hook`` block: the policy layers, then the process settings (each a
    ``knob``: the YAML edge takes its type, default, bounds and doc from here) and ``learning``."""

    layers: PolicyLayers = field(default_factory=PolicyLayers)
    log_to_stderr: bool = knob(True, doc="emit the JSON decision records on stderr (the budget_hook logger has "
                                         "no handler otherwise)")
    metadata_policy: MetadataPolicy = knob("tighten", doc="team/key metadata.budget_hook: tighten (only stricter "
                                                          "settings apply), trust (all apply: only admins can write "
                                                          "that metadata on this gateway), ignore (not read)")
    count_cache_entries: int = knob(65_536, ge=0, le=10_000_000, doc="token counts cached by content hash, per "
                                                                     "worker (about 170 bytes each; 0 disables it)")
    counting_threads: int = knob(4, ge=1, le=64, doc="threads that decide large requests off the event loop")
    offload_chars: int = knob(50_000, ge=0, doc="the size (characters of prose; costlier text weighs more) from which "
                                                "a request counts as large (0: always decided inline)")
    match_team_alias: bool = knob(False, doc="teams: overrides match team_id; also the team alias only when on")
    match_key_alias: bool = knob(False, doc="keys: overrides match the hashed key; also the key alias only when on "
                                            "(LiteLLM lets users choose the aliases of keys they create)")
    unknown_routes: UnknownRoutes = knob("block", doc="routes that reach a model in a format budget_hook cannot "
                                                      "read yet: block answers 400 naming the route, pass forwards "
                                                      "them unchecked")
    #: what is learned from providers' answers (corrections, windows), and whether it is shared via Redis
    learning: LearningSettings = field(default_factory=LearningSettings)
    #: deployments counted with their own tokenizer and chat template (``tokenizers:``, counting/templated.py)
    tokenizers: tuple[TokenizerSpec, ...] = ()

    def __post_init__(self) -> None:
        check_bounds(self)

    @property
    def base_fail_mode(self) -> str:
        """The config's top-level fail mode: what the plugin's own failures do before (or without) a
        request's policy being resolved."""
        return str(self.layers.base.get("fail_mode", _DEFAULT_FAIL_MODE))


#: the fail mode of a config that names none
_DEFAULT_FAIL_MODE = Policy().fail_mode

#: the process settings, in declaration order
PROCESS_KNOBS: tuple[Field, ...] = knob_fields(PluginSettings)
PROCESS_SETTINGS = tuple(knob.name for knob in PROCESS_KNOBS)


class TokenizerFields(BaseModel):
    """``tokenizers.<deployment model>:``: the model's own tokenizer and chat template (exact counts offline)."""

    model_config = ConfigDict(extra="forbid")
    tokenizer: str = PydanticField(description="a tokenizer.json, a folder holding one, or a Hugging Face model "
                                               "name in the local cache")
    chat_template: str | None = PydanticField(
        default=None, description="tokenizer_config.json (its chat_template) or a .jinja file; default: the one "
                                  "beside the tokenizer")


class _SettingsBase(PolicyFields):
    learning: LearningModel = PydanticField(default_factory=LearningModel)
    models: dict[str, PolicyFields] = PydanticField(default_factory=dict)
    teams: dict[str, PolicyFields] = PydanticField(default_factory=dict)
    keys: dict[str, PolicyFields] = PydanticField(default_factory=dict)
    tokenizers: dict[str, TokenizerFields] = PydanticField(default_factory=dict)


#: the whole block: the policy knobs (as a config layer), the process knobs, learning and the overrides
PluginSettingsModel: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "PluginSettingsModel", __base__=_SettingsBase,
    **{knob.name: _pydantic_field(PluginSettings, knob, override=False) for knob in PROCESS_KNOBS},
)


POLICY_FIELD_NAMES = tuple(PolicyFields.model_fields)
_ALL_NAMES = POLICY_FIELD_NAMES + PROCESS_SETTINGS + ("learning", "models", "teams", "keys", "tokenizers")


def _explain(exc: ValidationError, root: str) -> str:
    problems = []
    for error in exc.errors():
        path = ".".join([root, *(str(part) for part in error["loc"])])
        if error["type"] == "extra_forbidden":
            name = str(error["loc"][-1])
            if name in ("models", "teams", "keys"):  # a known name in the wrong place: say so, no "did you mean"
                problems.append(f"{path}: overrides do not nest: {name} is a section of {SETTINGS_PATH} only")
                continue
            if name in _ALL_NAMES:  # a process setting (or learning) below models/teams/keys or in metadata
                problems.append(f"{path}: {name} is a per-process setting, not one per model, team or key: set "
                                f"it once at {SETTINGS_PATH}.{name}")
                continue
            close = difflib.get_close_matches(name, _ALL_NAMES, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; known settings: {', '.join(POLICY_FIELD_NAMES)}"
            problems.append(f"{path}: unknown setting{hint}")
        else:
            problems.append(f"{path}: {error['msg']} (got {error.get('input')!r})")
    return "invalid budget_hook settings: " + "; ".join(problems)


def _layer(fields: BaseModel) -> dict[str, Any]:
    return fields.model_dump(exclude_none=True)


def load_settings(raw: Mapping[str, Any] | None, *, root: str = SETTINGS_PATH) -> PluginSettings:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{root}: expected a mapping of settings, got {type(raw).__name__}")
    try:
        model = PluginSettingsModel.model_validate(dict(raw))
    except ValidationError as exc:
        raise PolicyError(_explain(exc, root)) from None
    base = {k: v for k, v in model.model_dump(exclude_none=True).items() if k in POLICY_FIELD_NAMES}
    layers = PolicyLayers(
        base=base,
        models={name: _layer(f) for name, f in model.models.items()},
        teams={name: _layer(f) for name, f in model.teams.items()},
        keys={name: _layer(f) for name, f in model.keys.items()},
    )
    try:
        layers.validate()
    except PolicyError as exc:
        raise PolicyError(f"invalid budget_hook settings: {root}.{exc}") from None
    try:
        learning = model.learning.build()
    except ValueError as exc:
        raise PolicyError(f"invalid budget_hook settings: {root}.{exc}") from None
    tokenizers = tuple(TokenizerSpec(name, t.tokenizer, t.chat_template) for name, t in model.tokenizers.items())
    for spec in tokenizers:  # a missing file or a bad template refuses the start
        try:
            load_tokenizer(spec, where=f"{root}.tokenizers.{spec.model}")
        except PolicyError as exc:
            raise PolicyError(f"invalid budget_hook settings: {exc}") from None
    return PluginSettings(layers=layers, learning=learning, tokenizers=tokenizers,
                          **{name: getattr(model, name) for name in PROCESS_SETTINGS})


def load_metadata_layer(raw: Any, *, where: str) -> dict[str, Any]:
    """Validate a team's or key's ``metadata.budget_hook`` (admin-set through LiteLLM's API)."""
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: expected a mapping of budget_hook settings, got {type(raw).__name__}")
    try:
        return _layer(PolicyFields.model_validate(dict(raw)))
    except ValidationError as exc:
        raise PolicyError(_explain(exc, where)) from None
