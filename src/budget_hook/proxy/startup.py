"""Start-up: settings that do not validate refuse the proxy's start in one screen (pure; reads LiteLLM only
through ``sys.modules``, never imports it).

``preflight()`` runs when LiteLLM first asks for ``budget_hook.proxy.plugin`` (``proxy/__init__.py``), before
the adapter is built: it validates ``callback_settings.budget_hook`` as the plugin would and, when they are
wrong, prints what is wrong (the setting, the value, the allowed range), how to check a file offline, and
exits with status 78 (EX_CONFIG) at once, instead of LiteLLM's hundreds of lines of traceback.
``refuse_to_start(exc)`` is the same refusal for a caller that already holds the ``PolicyError``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

from ..errors import PolicyError
from ..policy import PluginSettings, load_settings

#: EX_CONFIG from sysexits.h: a configuration error
EXIT_CONFIG = 78
SETTINGS_NAME = "budget_hook"


def raw_settings() -> Any:
    """``callback_settings.budget_hook`` as LiteLLM loaded it (None outside the proxy)."""
    litellm = sys.modules.get("litellm")
    return (getattr(litellm, "callback_settings", None) or {}).get(SETTINGS_NAME) if litellm is not None else None


def refusal(exc: BaseException) -> str:
    """The few lines the operator reads."""
    problem = str(exc).strip() or type(exc).__name__
    lines = problem.splitlines()
    if len(lines) > 30:  # pydantic lists every error; the first ones say what to fix
        lines = [*lines[:30], f"... ({len(lines) - 30} more lines)"]
    return "\n".join([
        "budget_hook: refusing to start: callback_settings.budget_hook is not valid",
        *(f"  {line}" for line in lines),
        "  fix the setting above (the README's \"Settings\" lists each one and its range), then check the file "
        "offline with: budget-hook check-config <litellm_config.yaml>",
    ])


def refuse_to_start(exc: BaseException) -> NoReturn:
    """Print ``refusal(exc)`` on stderr and end the process at once (no traceback, no shutdown hooks)."""
    print(refusal(exc), file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(EXIT_CONFIG)


def preflight() -> PluginSettings | None:
    """The settings the plugin will load, validated; a refusal ends the process. Outside the proxy (no
    ``litellm`` module loaded) nothing is checked."""
    if sys.modules.get("litellm") is None:
        return None
    try:
        return load_settings(raw_settings())
    except PolicyError as exc:
        refuse_to_start(exc)
