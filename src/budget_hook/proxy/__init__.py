"""Where LiteLLM is adapted: the proxy plugin and the gateway-side pieces it uses.

Enable it with one line in ``litellm_config.yaml``::

    litellm_settings:
      callbacks: budget_hook.proxy.plugin

* ``hook``: ``BudgetHookPlugin``, LiteLLM's calls in, one core call, LiteLLM's terms out (the only module
  importing litellm or fastapi, and a thin one);
* beside it, pure and testable without LiteLLM: ``records`` (the one per-call store: a call's record and
  what its attempts are checked against), ``attempts`` (every router attempt checked again),
  ``outcomes`` (the log line, what an answer teaches, the metrics), ``answers`` (a refusal in its shape's
  error format), ``errors`` (a block as plain facts), ``client_input``, ``windows``, ``offload``,
  ``route_guard``, ``app_hooks``, ``model_info``, ``provider_count``, ``shared``, ``feedback``.

``plugin`` (and ``BudgetHookPlugin``) are loaded on first access, so importing the pure modules of this
package never imports litellm.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("plugin", "BudgetHookPlugin", "BudgetHookHTTPError"):
        import sys

        if name == "plugin" and f"{__name__}.hook" not in sys.modules:
            from .startup import preflight

            preflight()  # settings that do not validate: one screen, exit 78, before the adapter is built
        from . import hook

        return getattr(hook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
