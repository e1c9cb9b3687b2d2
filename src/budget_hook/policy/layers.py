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
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from ..budget import BudgetPolicy
from ..errors import PolicyError
from ..knobs import check_bounds, knob, knob_fields
from ..trimming import TrimPolicy

#: from strictest to loosest (``metadata_policy: tighten`` only moves towards the front)
Mode = Literal["enforce", "shadow", "off"]
#: from loosest to strictest
FailMode = Literal["open", "closed"]
UnknownWindow = Literal["default", "block"]
UnreadableContent = Literal["estimate", "block"]
ProviderCount = Literal["off", "near_budget", "always"]
#: process settings (``settings.PluginSettings``): how team/key metadata is read; what unread routes get
MetadataPolicy = Literal["tighten", "trust", "ignore"]
UnknownRoutes = Literal["block", "pass"]

BUDGET_FIELDS = tuple(f.name for f in knob_fields(BudgetPolicy))
TRIM_FIELDS = tuple(f.name for f in knob_fields(TrimPolicy))


@dataclass(frozen=True)
class Policy:
    """Everything that decides what happens to one request."""

    mode: Mode = knob("enforce", doc="enforce: forward the trimmed request or block; shadow: decide and log, "
                      "forward untouched; off: skip")
    fail_mode: FailMode = knob("open", doc="the plugin's own failures: open forwards untouched (logged at "
                               "critical), closed answers 503")
    unknown_window: UnknownWindow = knob("default", doc="a group whose window is unknown: use "
                                         "default_max_input_tokens (with a warning) or block")
    default_max_input_tokens: int = knob(8192, gt=0, doc="the window assumed when none is known")
    unreadable_content: UnreadableContent = knob("estimate", doc="content the request only references (a "
                                                 "file_id, a URL, a PDF whose pages cannot be counted): count a "
                                                 "conservative estimate and flag it, or block")
    log_dropped_content: bool = knob(False, doc="include the text of dropped/edited messages in the log record")
    truncate_embedding_inputs: bool = knob(False, doc="/embeddings: cut over-limit inputs to the limit "
                                           "(reported) instead of answering 400")
    provider_count: ProviderCount = knob("off", doc="near_budget: when the estimate lies within its measured error "
                                         "of the budget, ask the deployment's own token counter (Anthropic "
                                         "count_tokens, Gemini countTokens, OpenAI responses/input_tokens, a "
                                         "self-hosted server's /tokenize) with its credentials; always: ask for "
                                         "every request (self-hosted servers, whose chat templates the estimate "
                                         "cannot know); off: estimate only")
    provider_count_timeout_ms: int = knob(500, gt=0, le=10_000, doc="how long to wait for the provider's "
                                          "token counter before deciding on the estimate")
    budget: BudgetPolicy = field(default_factory=BudgetPolicy)
    trim: TrimPolicy = field(default_factory=TrimPolicy)

    def __post_init__(self) -> None:
        for knob_field in knob_fields(Policy):
            allowed = get_args(_HINTS.get(knob_field.name))
            if allowed and getattr(self, knob_field.name) not in allowed:
                value = getattr(self, knob_field.name)
                raise PolicyError(f"{knob_field.name} must be {' or '.join(allowed)}, got {value!r}")
        check_bounds(self)

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> Policy:
        """Build from one flat mapping (``mode``, ``output_reserve_ratio``, ``target_ratio``...)."""
        budget = {k: v for k, v in values.items() if k in BUDGET_FIELDS}
        trim = {k: v for k, v in values.items() if k in TRIM_FIELDS}
        top = {k: v for k, v in values.items() if k not in BUDGET_FIELDS and k not in TRIM_FIELDS}
        unknown = set(top) - {f.name for f in knob_fields(cls)}
        if unknown:
            raise PolicyError(f"unknown policy setting(s): {', '.join(sorted(unknown))}")
        return cls(**top, budget=BudgetPolicy(**budget), trim=TrimPolicy(**trim))

    def as_dict(self) -> dict[str, Any]:
        flat = {f.name: getattr(self, f.name) for f in knob_fields(Policy)}
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

    def with_client_cap(self, cap: int | None, ignored: tuple[str, ...] = ()) -> ResolvedPolicy:
        """Apply the client's requested cap: it may lower the operator's cap, never raise it."""
        if cap is None:
            if not ignored:
                return self  # nothing to apply or report (the usual request): the same frozen policy
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

    def with_warning(self, warning: str) -> ResolvedPolicy:
        return replace(self, warnings=self.warnings + (warning,))


_HINTS = {"mode": Mode, "fail_mode": FailMode, "unknown_window": UnknownWindow,
          "unreadable_content": UnreadableContent, "provider_count": ProviderCount}

#: How each setting may move under ``metadata_policy: tighten``: lower numbers, higher numbers, or along
#: its Literal's order (loosest to strictest). Other settings cannot be changed by metadata in that mode.
_TIGHTENING: dict[str, Any] = {
    "max_input_tokens": lambda current, proposed: current is None or proposed < current,
    "safety_margin_ratio": lambda current, proposed: proposed > current,
    "mode": lambda current, proposed: get_args(Mode).index(proposed) < get_args(Mode).index(current),
    "fail_mode": lambda current, proposed: get_args(FailMode).index(proposed) > get_args(FailMode).index(current),
}
TIGHTENING_SETTINGS = tuple(_TIGHTENING)


#: resolved policies a ``PolicyLayers`` keeps (one per group, team and key combination seen)
RESOLVED_KEPT = 4096


def _stricter(name: str, current: Any, proposed: Any) -> bool:
    return name in _TIGHTENING and bool(_TIGHTENING[name](current, proposed))


@dataclass(frozen=True)
class PolicyLayers:
    """The operator's configuration: a base layer and named overrides, each a flat dict of fields."""

    base: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    teams: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: ``resolve``'s answers, per (group, routed groups, team, key): the layers never change once built, and
    #: building a policy validates every knob. At most ``RESOLVED_KEPT`` (then started afresh)
    _resolved: dict[tuple[Any, ...], ResolvedPolicy] = field(default_factory=dict, init=False, repr=False,
                                                               compare=False)

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
                    where = f"{section_a}[{name_a}] with {section_b}[{name_b}]"
                    self._build({**self.base, **layer_a, **layer_b}, where)

    @staticmethod
    def _build(values: Mapping[str, Any], where: str) -> Policy:
        try:
            return Policy.from_fields(values)
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from None

    def model_layer(self, model_groups: Sequence[str]) -> tuple[str, Mapping[str, Any]] | None:
        """The first of ``model_groups`` (in order) with a layer: exact names first, then the first
        matching glob pattern (``claude-*``)."""
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
        key = (model_group, tuple(routed_groups), team_id, team_alias, key_alias, key_hash)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolve(model_group=model_group, routed_groups=routed_groups, team_id=team_id,
                                  team_alias=team_alias, key_alias=key_alias, key_hash=key_hash)
            if len(self._resolved) >= RESOLVED_KEPT:
                self._resolved.clear()
            self._resolved[key] = found
        return found

    def _resolve(self, *, model_group: str, routed_groups: Sequence[str], team_id: str | None,
                 team_alias: str | None, key_alias: str | None, key_hash: str | None) -> ResolvedPolicy:
        values: dict[str, Any] = dict(self.base)
        sources = ["config"]
        # the groups the request is routed to decide, whatever name it used (an alias must not escape its
        # target's policy); a wildcard deployment's pattern only after the name asked for
        patterns = [g for g in routed_groups if any(ch in g for ch in "*?[")]
        named = [g for g in routed_groups if g not in patterns]
        matched = self.model_layer([*named, model_group, *patterns])
        if matched:
            values.update(matched[1])
            sources.append(f"models[{matched[0]}]")
        # several routed groups (a comma-separated list, a routing group over several groups): each one's
        # stricter settings apply too, so no group's cap or mode is escaped by naming it beside another
        others = [g for g in named if matched is None or g != matched[0]]
        if len(named) > 1 and others:
            current = self._build(values, "config").as_dict()
            for group in others:
                theirs = self._build({**self.base, **self.models.get(group, {})}, f"models[{group}]").as_dict()
                for setting in TIGHTENING_SETTINGS:
                    if _stricter(setting, current.get(setting), theirs.get(setting)):
                        values[setting] = current[setting] = theirs[setting]
                        sources.append(f"models[{group}].{setting}")
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
            ignored = [f"{label}.{k}" if k in current else f"{label}.(an unknown key, sha256 "
                       f"{hashlib.sha256(str(k).encode()).hexdigest()[:12]})" for k in layer if k not in accepted]
        if not accepted:
            return replace(resolved, ignored_metadata_settings=resolved.ignored_metadata_settings + tuple(ignored))
        try:
            policy = Policy.from_fields({**current, **accepted})
        except PolicyError:  # the message would quote the value: the setting's names only
            return resolved.with_warning(f"{label} ignored: its settings {', '.join(sorted(accepted))} do not "
                                         f"combine with the operator's policy")
        return replace(resolved, policy=policy, sources=resolved.sources + (label,),
                       ignored_metadata_settings=resolved.ignored_metadata_settings + tuple(ignored))
