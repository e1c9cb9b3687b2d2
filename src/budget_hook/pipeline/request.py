"""The one complete input of a decision: which shape, which body, who asks, and the group's limits.

The adapter builds a ``BudgetRequest`` once per request from what LiteLLM hands it; everything below
works on it and never reaches back into the adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..budget import ModelLimits
from ..learning import Calibration
from ..shapes import Shape


@dataclass(frozen=True)
class Caller:
    """Who sends the request, as the gateway authenticated it (built once by the adapter)."""

    team_id: str | None = None
    team_alias: str | None = None
    key_alias: str | None = None
    #: the hashed virtual key
    key_hash: str | None = None
    #: admin-set ``metadata`` of the team and of the key (``budget_hook`` settings are read from it)
    team_metadata: Mapping[str, Any] | None = None
    key_metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ClientProblem:
    """Client input the gateway cannot accept, and the field at fault."""

    param: str
    message: str


@dataclass(frozen=True)
class ClientInput:
    """What the client asked of the gateway itself (a stricter cap), parsed by the adapter."""

    #: the cap the client asks for (``x-budget-max-input-tokens`` or ``metadata.budget_hook``); it may
    #: only lower the operator's
    max_input_tokens: int | None = None
    #: client-sent settings that are not the client's to set (reported, never applied)
    ignored: tuple[str, ...] = ()
    #: set when the client's input is invalid: a 400 naming the field in enforce mode
    problem: ClientProblem | None = None


@dataclass(frozen=True)
class BudgetRequest:
    shape: Shape
    #: the request body as the client sent it (never mutated)
    body: Mapping[str, Any]
    model_group: str
    limits: ModelLimits
    caller: Caller = field(default_factory=Caller)
    client: ClientInput = field(default_factory=ClientInput)
    #: what the adapter learned beyond the offline estimate (a learned correction, the provider's count)
    calibration: Calibration = field(default_factory=Calibration)
    #: what messages and records call the group when the requested name is not one the operator configured
    #: (a made-up name, a wildcard match: client-chosen text); None: ``model_group`` itself
    shown_group: str | None = None
    #: the metrics label of the group: only ever a name from the operator's configuration (or a fixed label);
    #: None outside the proxy
    metrics_group: str | None = None
    #: the body is the client's request (the pre-call hook, the CLI), not a router attempt's kwargs, where the
    #: deployment's own ``litellm_params`` are merged in (``bounds.prompt_parameter`` looks at the client's only)
    client_body: bool = True
    #: tokens the provider holds before this request's input (the Responses chain a ``previous_response_id``
    #: continues, as this gateway saw it billed): counted with every count of the request, never trimmed
    held: int = 0
