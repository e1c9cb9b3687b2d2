"""budget_hook: keep every LLM request inside the routed model's context window.

The core (this package minus ``budget_hook.proxy``, the LiteLLM proxy adapter) is pure Python over
tiktoken (and pydantic at the settings edge) and never imports litellm:

* ``counting.TokenCounter``: exact OpenAI counts, calibrated estimates for other families;
* ``budget.compute_budget``: window - output reserve - safety margin, optionally capped;
* ``trimming.trim_request``: structure-safe prioritized trimming with a report of what was dropped;
* ``anthropic_format.anthropic_to_openai_chat``: count Anthropic ``/v1/messages`` bodies;
* ``settings.load_settings`` / ``policy.PolicyLayers``: validated operator policy, resolved per request;
* ``decision.decide_chat``: one request's decision (pass, trimmed, blocked) as facts.

Enable the proxy plugin with ``litellm_settings: callbacks: budget_hook.proxy.plugin``.
"""

from .budget import Budget, BudgetCheck, BudgetPolicy, compute_budget, requested_output_tokens
from .counting import RequestCount, TokenCounter
from .errors import (
    BudgetHookError,
    CannotFitError,
    ContextBudgetError,
    MalformedRequestError,
    OutputReserveTooLargeError,
    PolicyError,
    TokenizerUnavailableError,
)
from .models import TokenizerProfile, resolve_tokenizer
from .trimming import MessageAction, TrimPolicy, TrimReport, TrimResult, trim_request

__version__ = "0.1.0"

__all__ = [
    "Budget", "BudgetCheck", "BudgetPolicy", "compute_budget", "requested_output_tokens",
    "RequestCount", "TokenCounter",
    "BudgetHookError", "CannotFitError", "ContextBudgetError", "MalformedRequestError",
    "OutputReserveTooLargeError", "PolicyError", "TokenizerUnavailableError",
    "TokenizerProfile", "resolve_tokenizer",
    "MessageAction", "TrimPolicy", "TrimReport", "TrimResult", "trim_request",
]
