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
from ..errors import PolicyError
from ..knobs import knob_bounds, knob_fields
from ..learning import LearningSettings
from ..trimming import TrimPolicy
from .layers import Policy, PolicyLayers

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


def _pydantic_field(cls: type, knob: Field) -> tuple[Any, Any]:
    """The YAML type of a knob: optional (an override names only what it changes), its bounds kept."""
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
    field_info: Any = PydanticField(default=None, description=knob.metadata["doc"],
                                    **knob_bounds(knob))  # type: ignore[call-overload]
    return optional, field_info


#: Every policy knob as an optional YAML setting (built from the dataclasses: nothing to keep in sync).
PolicyFields: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "PolicyFields",
    __config__=ConfigDict(extra="forbid", strict=False),
    **{knob.name: _pydantic_field(cls, knob) for cls, knob in POLICY_KNOBS},
)


_LEARNING = LearningSettings()  # the defaults live on the dataclass; the YAML edge adds types and bounds


class LearningModel(BaseModel):
    """``learning:``: the correction learned from what providers bill, and windows from their errors."""

    model_config = ConfigDict(extra="forbid")
    enabled: StrictBool = _LEARNING.enabled
    window: Count = PydanticField(default=_LEARNING.window, ge=1, le=100_000)
    quantile: Ratio = PydanticField(default=_LEARNING.quantile, gt=0, le=1)
    min_samples: Count = PydanticField(default=_LEARNING.min_samples, ge=1, le=100_000)
    min_factor: Ratio = PydanticField(default=_LEARNING.min_factor, gt=0, le=10)
    max_factor: Ratio = PydanticField(default=_LEARNING.max_factor, gt=0, le=10)
    min_billed_tokens: Count = PydanticField(default=_LEARNING.min_billed_tokens, ge=0)
    window_ttl_seconds: Ratio = PydanticField(default=_LEARNING.window_ttl_seconds, gt=0)
    min_window_tokens: Count = PydanticField(default=_LEARNING.min_window_tokens, ge=1)
    min_window_ratio: Ratio = PydanticField(default=_LEARNING.min_window_ratio, ge=0, le=1)
    max_sample_ratio: Ratio = PydanticField(default=_LEARNING.max_sample_ratio, gt=1, le=100)
    share: Annotated[Literal["auto", "off"], BeforeValidator(_yaml_word)] = "auto"
    sync_seconds: Ratio = PydanticField(default=_LEARNING.sync_seconds, ge=0, le=3600)
    redis_timeout_seconds: Ratio = PydanticField(default=_LEARNING.redis_timeout_seconds, gt=0, le=10)

    def build(self) -> LearningSettings:
        if self.min_factor > self.max_factor:
            raise ValueError(f"learning.min_factor ({self.min_factor}) is above learning.max_factor "
                             f"({self.max_factor})")
        return LearningSettings(**self.model_dump())


class PluginSettingsModel(PolicyFields):
    log_to_stderr: StrictBool = True
    metadata_policy: Literal["tighten", "trust", "ignore"] = "tighten"
    count_cache_entries: Count = PydanticField(default=65_536, ge=0, le=10_000_000)
    counting_threads: Count = PydanticField(default=4, ge=1, le=64)
    offload_chars: Count = PydanticField(default=50_000, ge=0)
    match_team_alias: StrictBool = False
    match_key_alias: StrictBool = False
    unknown_routes: Literal["block", "pass"] = "block"
    learning: LearningModel = PydanticField(default_factory=LearningModel)
    models: dict[str, PolicyFields] = PydanticField(default_factory=dict)
    teams: dict[str, PolicyFields] = PydanticField(default_factory=dict)
    keys: dict[str, PolicyFields] = PydanticField(default_factory=dict)


POLICY_FIELD_NAMES = tuple(PolicyFields.model_fields)
PROCESS_SETTINGS = ("log_to_stderr", "metadata_policy", "count_cache_entries", "counting_threads", "offload_chars",
                    "match_team_alias", "match_key_alias", "unknown_routes")
_ALL_NAMES = POLICY_FIELD_NAMES + PROCESS_SETTINGS + ("learning", "models", "teams", "keys")


@dataclass(frozen=True)
class PluginSettings:
    layers: PolicyLayers = field(default_factory=PolicyLayers)
    #: emit the JSON decision records on stderr (the ``budget_hook`` logger has no handler otherwise)
    log_to_stderr: bool = True
    #: team/key ``metadata.budget_hook``: ``tighten`` (only stricter settings apply), ``trust`` (all
    #: apply: only admins can write that metadata on this gateway), ``ignore`` (not read)
    metadata_policy: str = "tighten"
    #: token counts cached by content hash, per worker (about 170 bytes each; 0 disables the cache)
    count_cache_entries: int = 65_536
    #: threads that decide large requests off the event loop, and the size (characters of text) from
    #: which a request counts as large (0: always inline)
    counting_threads: int = 4
    offload_chars: int = 50_000
    #: ``teams:`` overrides match ``team_id``; also the team alias only when the operator opts in
    match_team_alias: bool = False
    #: ``keys:`` overrides match the hashed key; also the key alias only when the operator opts in (LiteLLM
    #: lets users choose the aliases of keys they create, so an alias could claim a looser override)
    match_key_alias: bool = False
    #: routes that reach a model in a format budget_hook cannot read yet (Gemini interactions, realtime):
    #: ``block`` answers 400 naming the route, ``pass`` forwards them unchecked
    unknown_routes: str = "block"
    #: what is learned from providers' answers (corrections, windows), and whether it is shared via Redis
    learning: LearningSettings = field(default_factory=LearningSettings)

    @property
    def base_fail_mode(self) -> str:
        """The config's top-level fail mode: what the plugin's own failures do before (or without) a
        request's policy being resolved."""
        return str(self.layers.base.get("fail_mode", Policy().fail_mode))


def _explain(exc: ValidationError, root: str) -> str:
    problems = []
    for error in exc.errors():
        path = ".".join([root, *(str(part) for part in error["loc"])])
        if error["type"] == "extra_forbidden":
            name = str(error["loc"][-1])
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
    return PluginSettings(layers=layers, learning=learning, **{name: getattr(model, name) for name in PROCESS_SETTINGS})


def load_metadata_layer(raw: Any, *, where: str) -> dict[str, Any]:
    """Validate a team's or key's ``metadata.budget_hook`` (admin-set through LiteLLM's API)."""
    if not isinstance(raw, Mapping):
        raise PolicyError(f"{where}: expected a mapping of budget_hook settings, got {type(raw).__name__}")
    try:
        return _layer(PolicyFields.model_validate(dict(raw)))
    except ValidationError as exc:
        raise PolicyError(_explain(exc, where)) from None
