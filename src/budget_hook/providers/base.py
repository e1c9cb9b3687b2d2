"""What one provider's record holds (pure data: no I/O, no imports of the rest of the package).

Contract: a ``ProviderRecord`` gathers what the plugin knows of one provider, each field read by the module
that applies it: ``keywords`` (a model name containing one is the provider's family:
``counting/profiles.py``), ``band`` (the measured error of our estimate: ``learning/calibration.py``),
``overflow`` (the wordings of its context-overflow errors: ``learning/overflow.py``), ``count_endpoint``
(its token-counting API: ``proxy/provider_count.py``), ``windows`` (what makes a deployment's window or
output differ from the model map's: ``budget/router_windows.py``). The generation terms and the image
formula are module-level tables of the provider's own module (``providers/anthropic.py``), read by
``counting/profiles.py`` and ``counting/images.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CountBand:
    """The measured error of an estimate: it falls at most ``under`` below and ``over`` above the bill."""

    under: float
    over: float


@dataclass(frozen=True)
class OverflowWording:
    """One wording of a context-overflow error, and the groups holding the window and the prompt tokens."""

    provider: str
    pattern: re.Pattern[str]
    window_group: str | None
    prompt_group: str | None


@dataclass(frozen=True)
class CountEndpoint:
    """A provider's token-counting API: ``POST {base}{path}`` (``{model}`` filled in), the key in
    ``key_header`` (after ``key_prefix``) from the deployment or ``key_env``, the body the request's
    ``fields`` with the model, wrapped in ``wrap`` (with ``models/{model}``) when set."""

    provider: str
    #: the request shape it counts (a shape's name)
    shape: str
    default_base: str
    key_env: str
    #: suffixes an operator's ``api_base`` may carry, removed (in this order) before ``path`` is added
    base_suffixes: tuple[str, ...]
    path: str
    key_header: str
    fields: tuple[str, ...]
    key_prefix: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    wrap: str = ""


@dataclass(frozen=True)
class WindowQuirks:
    """What makes a deployment's window or output differ from the model map's.

    ``header_dependent`` names the models whose long window needs ``header_name: <header_value...>``, sent
    by the caller (``header_providers``: prefixes of the backends that serve them so); without it they
    serve ``standard_window``. ``fills_max_tokens``: the provider requires an output allowance, so LiteLLM
    fills in the model's maximum output (``default_max_tokens`` for a model its map does not know)."""

    header_dependent: re.Pattern[str] | None = None
    standard_window: int = 0
    header_providers: tuple[str, ...] = ()
    header_name: str = ""
    header_value: str = ""
    #: the exact values of that header that keep the long window when a request's own header takes the place of the one
    #: the deployment sends (``router_windows.with_client_headers``)
    header_betas: tuple[str, ...] = ()
    fills_max_tokens: bool = False
    default_max_tokens: int = 0


@dataclass(frozen=True)
class ProviderRecord:
    """One provider: its counting family and every rule the plugin applies to it (see the module doc)."""

    family: str
    keywords: tuple[str, ...] = ()
    band: CountBand | None = None
    overflow: tuple[OverflowWording, ...] = ()
    count_endpoint: CountEndpoint | None = None
    windows: WindowQuirks = WindowQuirks()
