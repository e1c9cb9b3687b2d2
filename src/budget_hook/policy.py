"""The effective policy of one request, resolved from operator layers (pure, frozen, no I/O).

Contract: ``PolicyLayers.resolve(...)`` merges, from weakest to strongest,

    defaults < config base < models[<group>] < teams[<team_id or alias>] < keys[<key alias or hash>]
             < team metadata ``budget_hook`` < key metadata ``budget_hook``

and returns a ``ResolvedPolicy``: a frozen ``Policy`` plus the names of the layers that applied. Every
layer is operator-controlled (the config file, or metadata only an admin can set on a team or key).
The client may only *tighten* the result: ``client_max_input_tokens`` lowers the input cap and can never
raise it, and anything else a client asks for is ignored and reported.

Layers are plain dicts of already-validated fields (see ``settings`` for the YAML edge); a layer only
names the fields it changes, so a team override of ``max_input_tokens`` keeps the model's trimmer knobs.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, Mapping

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
    #: the client's stricter cap, when it asked for one and it was lower than the operator's
    client_max_input_tokens: int | None = None
    #: client-sent settings that were ignored because a client cannot loosen (or set) operator policy
    ignored_client_settings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicyLayers:
    """The operator's configuration: a base layer and named overrides, each a flat dict of fields."""

    base: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    teams: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def validate(self) -> None:
        """Build every layer combination an override can produce, so that errors surface at start-up."""
        self._build({**self.base}, "config")
        for section in ("models", "teams", "keys"):
            for name, layer in getattr(self, section).items():
                self._build({**self.base, **layer}, f"{section}[{name}]")

    @staticmethod
    def _build(values: Mapping[str, Any], where: str) -> Policy:
        try:
            return Policy.from_fields(values)
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from None

    def model_layer(self, model_group: str) -> tuple[str, Mapping[str, Any]] | None:
        """Exact group name first, then the first matching glob pattern (``claude-*``)."""
        if model_group in self.models:
            return model_group, self.models[model_group]
        for pattern, layer in self.models.items():
            if any(ch in pattern for ch in "*?[") and fnmatch.fnmatchcase(model_group, pattern):
                return pattern, layer
        return None

    def resolve(
        self,
        *,
        model_group: str,
        team_id: str | None = None,
        team_alias: str | None = None,
        key_alias: str | None = None,
        key_hash: str | None = None,
        team_metadata_layer: Mapping[str, Any] | None = None,
        key_metadata_layer: Mapping[str, Any] | None = None,
        client_max_input_tokens: int | None = None,
        ignored_client_settings: tuple[str, ...] = (),
    ) -> ResolvedPolicy:
        values: dict[str, Any] = dict(self.base)
        sources = ["config"]
        matched = self.model_layer(model_group)
        if matched:
            values.update(matched[1])
            sources.append(f"models[{matched[0]}]")
        for section, names in (("teams", (team_id, team_alias)), ("keys", (key_alias, key_hash))):
            table = getattr(self, section)
            name = next((n for n in names if n and n in table), None)
            if name is not None:
                values.update(table[name])
                sources.append(f"{section}[{name}]")
        for label, layer in (("team_metadata", team_metadata_layer), ("key_metadata", key_metadata_layer)):
            if layer:
                values.update(layer)
                sources.append(label)
        policy = self._build(values, " < ".join(sources))

        applied_client_cap = None
        if client_max_input_tokens is not None:
            current = policy.budget.max_input_tokens
            if current is None or client_max_input_tokens < current:
                applied_client_cap = client_max_input_tokens
                policy = replace(policy, budget=replace(policy.budget, max_input_tokens=client_max_input_tokens))
                sources.append("client_cap")
        return ResolvedPolicy(policy, tuple(sources), applied_client_cap, tuple(ignored_client_settings))
