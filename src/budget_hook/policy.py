"""The effective policy of one request, resolved from operator layers (pure, frozen, no I/O).

Contract: ``PolicyLayers.resolve(...)`` merges the config's layers, from weakest to strongest,

    defaults < config base < models[<group>] < teams[<team_id or alias>] < keys[<key alias or hash>]

and returns a ``ResolvedPolicy``: a frozen ``Policy`` plus the names of the layers that applied. Then,
in this order, ``PolicyLayers.with_metadata`` applies a team's and a key's ``metadata.budget_hook``
(by default only where it is stricter: LiteLLM lets non-admin users write their own keys' metadata),
and ``ResolvedPolicy.with_client_cap`` applies the client's cap, which may only lower the input cap.
Whatever was not applied is reported, never silently dropped.

Layers are plain dicts of already-validated fields (see ``settings`` for the YAML edge); a layer only
names the fields it changes, so a team override of ``max_input_tokens`` keeps the model's trimmer knobs.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, fields, replace
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .budget import BudgetPolicy
from .errors import PolicyError
from .trimming import TrimPolicy

Mode = Literal["enforce", "shadow", "off"]
FailMode = Literal["open", "closed"]
UnknownWindow = Literal["default", "block"]

BUDGET_FIELDS = tuple(f.name for f in fields(BudgetPolicy))
TRIM_FIELDS = tuple(f.name for f in fields(TrimPolicy))


@dataclass(frozen=True)
class Policy:
    """Everything that decides what happens to one request."""

    #: enforce: forward the trimmed request or block; shadow: decide and log, forward untouched; off: skip.
    mode: Mode = "enforce"
    #: what the plugin's *own* failures do: open forwards untouched (logged at critical), closed answers 503.
    fail_mode: FailMode = "open"
    #: a model group whose window is unknown: use ``default_max_input_tokens`` (with a warning) or block.
    unknown_window: UnknownWindow = "default"
    default_max_input_tokens: int = 8192
    #: include the text of dropped/edited messages in the log record (off: sizes and hashes only).
    log_dropped_content: bool = False
    #: /embeddings: cut over-limit inputs to the model's limit (reported) instead of answering 400
    truncate_embedding_inputs: bool = False
    budget: BudgetPolicy = field(default_factory=BudgetPolicy)
    trim: TrimPolicy = field(default_factory=TrimPolicy)

    def __post_init__(self) -> None:
        if self.mode not in ("enforce", "shadow", "off"):
            raise PolicyError(f"mode must be enforce, shadow or off, got {self.mode!r}")
        if self.fail_mode not in ("open", "closed"):
            raise PolicyError(f"fail_mode must be open or closed, got {self.fail_mode!r}")
        if self.unknown_window not in ("default", "block"):
            raise PolicyError(f"unknown_window must be default or block, got {self.unknown_window!r}")
        if self.default_max_input_tokens <= 0:
            raise PolicyError(f"default_max_input_tokens must be positive, got {self.default_max_input_tokens}")

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> "Policy":
        """Build from one flat mapping (``mode``, ``output_reserve_ratio``, ``target_ratio``...)."""
        budget = {k: v for k, v in values.items() if k in BUDGET_FIELDS}
        trim = {k: v for k, v in values.items() if k in TRIM_FIELDS}
        top = {k: v for k, v in values.items() if k not in BUDGET_FIELDS and k not in TRIM_FIELDS}
        unknown = set(top) - {f.name for f in fields(cls)} | ({"budget", "trim"} & set(top))
        if unknown:
            raise PolicyError(f"unknown policy setting(s): {', '.join(sorted(unknown))}")
        return cls(**top, budget=BudgetPolicy(**budget), trim=TrimPolicy(**trim))

    def as_dict(self) -> dict[str, Any]:
        flat = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("budget", "trim")}
        flat.update({name: getattr(self.budget, name) for name in BUDGET_FIELDS})
        flat.update({name: getattr(self.trim, name) for name in TRIM_FIELDS})
        return flat


@dataclass(frozen=True)
class ResolvedPolicy:
    policy: Policy
    #: the layers that applied, weakest first, e.g. ``("config", "models[gpt-4o]", "teams[ml-research]")``
    sources: tuple[str, ...]
    #: the cap the client asked for (header or metadata), whether or not it was lower than the operator's
    client_max_input_tokens: int | None = None
    client_cap_applied: bool = False
    #: client-sent settings that were ignored because a client cannot loosen (or set) operator policy
    ignored_client_settings: tuple[str, ...] = ()
    #: team/key metadata settings that were ignored (``metadata_policy: tighten`` lets them only tighten)
    ignored_metadata_settings: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def with_client_cap(self, cap: int | None, ignored: tuple[str, ...] = ()) -> "ResolvedPolicy":
        """Apply the client's requested cap: it may lower the operator's cap, never raise it."""
        if cap is None:
            return replace(self, ignored_client_settings=self.ignored_client_settings + tuple(ignored))
        current = self.policy.budget.max_input_tokens
        applied = current is None or cap < current
        policy = self.policy
        if applied:
            policy = replace(policy, budget=replace(policy.budget, max_input_tokens=cap))
        return replace(
            self,
            policy=policy,
            sources=self.sources + (("client_cap",) if applied else ()),
            client_max_input_tokens=cap,
            client_cap_applied=applied,
            ignored_client_settings=self.ignored_client_settings + tuple(ignored),
        )

    def with_warning(self, warning: str) -> "ResolvedPolicy":
        return replace(self, warnings=self.warnings + (warning,))


#: How each setting may move under ``metadata_policy: tighten``: ``lower`` / ``higher`` numbers, or an
#: order from loosest to strictest. Other settings cannot be changed by metadata in that mode.
_MODE_ORDER = ("off", "shadow", "enforce")
_FAIL_ORDER = ("open", "closed")


def _stricter(name: str, current: Any, proposed: Any) -> bool:
    if name == "max_input_tokens":
        return current is None or proposed < current
    if name == "safety_margin_ratio":
        return proposed > current
    if name == "mode":
        return _MODE_ORDER.index(proposed) > _MODE_ORDER.index(current)
    if name == "fail_mode":
        return _FAIL_ORDER.index(proposed) > _FAIL_ORDER.index(current)
    return False


TIGHTENING_SETTINGS = ("max_input_tokens", "safety_margin_ratio", "mode", "fail_mode")


@dataclass(frozen=True)
class PolicyLayers:
    """The operator's configuration: a base layer and named overrides, each a flat dict of fields."""

    base: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    teams: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def validate(self) -> None:
        """Build every policy the config can produce, so that errors surface at start-up, not per request.

        Singles and every pair of overrides from different sections suffice: in any combination each
        setting comes from one layer, so a conflict between two settings (``output_reserve_min`` from
        one layer above ``output_reserve_max`` from another) already shows in the pair of those layers.
        """
        self._build({**self.base}, "config")
        named = [(section, name, layer) for section in ("models", "teams", "keys")
                 for name, layer in getattr(self, section).items()]
        for section, name, layer in named:
            self._build({**self.base, **layer}, f"{section}[{name}]")
        for index, (section_a, name_a, layer_a) in enumerate(named):
            for section_b, name_b, layer_b in named[index + 1:]:
                if section_b != section_a:  # weaker section first: named is ordered models, teams, keys
                    self._build({**self.base, **layer_a, **layer_b}, f"{section_a}[{name_a}] with {section_b}[{name_b}]")

    @staticmethod
    def _build(values: Mapping[str, Any], where: str) -> Policy:
        try:
            return Policy.from_fields(values)
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from None

    def model_layer(self, model_groups: Sequence[str]) -> tuple[str, Mapping[str, Any]] | None:
        """For the requested name, then the groups it routes to (router aliases): the exact name first,
        then the first matching glob pattern (``claude-*``)."""
        names = [name for name in model_groups if name]
        for name in names:
            if name in self.models:
                return name, self.models[name]
        for name in names:
            for pattern, layer in self.models.items():
                if any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(name, pattern):
                    return pattern, layer
        return None

    def resolve(
        self,
        *,
        model_group: str,
        routed_groups: Sequence[str] = (),
        team_id: str | None = None,
        team_alias: str | None = None,
        key_alias: str | None = None,
        key_hash: str | None = None,
    ) -> ResolvedPolicy:
        """The operator's policy for a request, from the config alone (no metadata, no client input)."""
        values: dict[str, Any] = dict(self.base)
        sources = ["config"]
        matched = self.model_layer([model_group, *routed_groups])
        if matched:
            values.update(matched[1])
            sources.append(f"models[{matched[0]}]")
        for section, names in (("teams", (team_id, team_alias)), ("keys", (key_alias, key_hash))):
            table = getattr(self, section)
            name = next((n for n in names if n and n in table), None)
            if name is not None:
                values.update(table[name])
                sources.append(f"{section}[{name}]")
        return ResolvedPolicy(self._build(values, " < ".join(sources)), tuple(sources))

    def with_metadata(self, resolved: ResolvedPolicy, layer: Mapping[str, Any], *, label: str,
                      trust: bool) -> ResolvedPolicy:
        """Apply an admin-set team/key metadata layer on top of the config's policy.

        ``trust``: every setting applies (the operator guarantees only admins write that metadata).
        Otherwise (the default, ``metadata_policy: tighten``) a setting applies only when it is stricter
        (a lower cap, a larger margin, a stricter mode or fail mode); the rest is ignored and reported,
        because LiteLLM lets non-admin users set metadata on their own keys.
        """
        if not layer:
            return resolved
        current = resolved.policy.as_dict()
        if trust:
            accepted, ignored = dict(layer), []
        else:
            accepted = {k: v for k, v in layer.items() if k in TIGHTENING_SETTINGS and _stricter(k, current[k], v)}
            ignored = [f"{label}.{k}" for k in layer if k not in accepted]
        if not accepted:
            return replace(resolved, ignored_metadata_settings=resolved.ignored_metadata_settings + tuple(ignored))
        try:
            policy = Policy.from_fields({**current, **accepted})
        except PolicyError as exc:
            return resolved.with_warning(f"{label} ignored: {exc}")
        return replace(resolved, policy=policy, sources=resolved.sources + (label,),
                       ignored_metadata_settings=resolved.ignored_metadata_settings + tuple(ignored))
