"""Where operator policy is resolved: config layers, admin metadata and the client's cap, per request.

* ``layers``: the frozen ``Policy`` (with ``BudgetPolicy`` and ``TrimPolicy``), ``PolicyLayers`` (config
  base, models, teams, keys) and ``ResolvedPolicy`` (what applied, what was ignored and why);
* ``settings``: the YAML edge (pydantic), built from the same knob declarations (``budget_hook.knobs``).
"""

from .layers import Policy, PolicyLayers, ResolvedPolicy
from .settings import PluginSettings, load_metadata_layer, load_settings

__all__ = ["PluginSettings", "Policy", "PolicyLayers", "ResolvedPolicy", "load_metadata_layer", "load_settings"]
