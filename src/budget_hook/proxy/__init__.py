"""Where LiteLLM is adapted: the proxy plugin and the gateway-side pieces it uses.

Enable it with one line in ``litellm_config.yaml``::

    litellm_settings:
      callbacks: budget_hook.proxy.plugin

* ``hook``: ``BudgetHookPlugin``, LiteLLM's calls in, one core call, LiteLLM's terms out (the only module
  importing litellm or fastapi);
* ``client_input``, ``windows``, ``records``, ``offload``, ``errors``: what the hook needs from the
  gateway's side, pure and testable without LiteLLM.

``plugin`` (and ``BudgetHookPlugin``) are loaded on first access, so importing the pure modules of this
package never imports litellm.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name in ("plugin", "BudgetHookPlugin", "BudgetHookHTTPError"):
        from . import hook

        return getattr(hook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
