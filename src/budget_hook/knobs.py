"""Policy knobs, declared once: a dataclass field with its default, its bounds and its documentation.

Every operator setting is a field of one of the frozen policy dataclasses (``Policy``,
``budget.BudgetPolicy``, ``trimming.TrimPolicy``) declared with ``knob(default, ge=..., doc=...)``.
From those declarations alone come:

* the dataclass default and its validation (``check_bounds`` in ``__post_init__``);
* the YAML edge: ``policy.settings`` builds its pydantic model from the same fields, so a setting, its
  type, default and bounds cannot drift between the config file and the policy (a test checks it).

Pure: no pydantic here, no I/O.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .errors import PolicyError

_BOUNDS = ("gt", "ge", "lt", "le")


def knob(default: Any, *, doc: str, gt: float | None = None, ge: float | None = None, lt: float | None = None,
         le: float | None = None) -> Any:
    """A policy field: its default, optional numeric bounds and a one-line description."""
    bounds = {name: value for name, value in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if value is not None}
    return dataclasses.field(default=default, metadata={"knob": True, "doc": doc, "bounds": bounds})


def knob_bounds(field: dataclasses.Field) -> dict[str, float]:
    return dict(field.metadata.get("bounds", {}))


def knob_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    """The knob fields of a policy dataclass, in declaration order."""
    return tuple(f for f in dataclasses.fields(cls) if f.metadata.get("knob"))


def check_bounds(instance: Any) -> None:
    """Raise ``PolicyError`` for a knob outside its declared bounds (None means "not set")."""
    for field in knob_fields(type(instance)):
        value = getattr(instance, field.name)
        if value is None:
            continue
        for name, limit in knob_bounds(field).items():
            ok = {"gt": value > limit, "ge": value >= limit, "lt": value < limit, "le": value <= limit}[name]
            if not ok:
                symbol = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}[name]
                raise PolicyError(f"{field.name} must be {symbol} {limit}, got {value}")
