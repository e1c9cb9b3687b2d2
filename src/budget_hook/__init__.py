"""budget_hook: keep every LLM request inside the routed model's context window.

The pipeline, one package per concern (the core never imports litellm; ``proxy`` adapts it to LiteLLM):

* ``shapes``: each request shape (chat, Anthropic messages, Responses, Gemini, completions, embeddings) as
  a plug-in behind one registry;
* ``counting``: exact OpenAI counts, calibrated estimates for other families (``TokenCounter``);
* ``budget``: window - output reserve - safety margin, optionally capped (``compute_budget``);
* ``trimming``: the structure-safe reduction ladder (``trim_request``, its rungs as data);
* ``policy``: operator policy from config, team, key, admin metadata; the YAML edge;
* ``pipeline``: one request in, one decision and its record out (``decide``);
* ``proxy``: the LiteLLM adapter. Enable it with ``litellm_settings: callbacks: budget_hook.proxy.plugin``.
"""

from .budget import Budget, BudgetCheck, BudgetPolicy, compute_budget, requested_output_tokens
from .counting import RequestCount, TokenCounter, TokenizerProfile, resolve_tokenizer
from .errors import (
    BudgetHookError,
    CannotFitError,
    ContextBudgetError,
    MalformedRequestError,
    OutputReserveTooLargeError,
    PolicyError,
    TokenizerUnavailableError,
)
from .trimming import MessageAction, TrimPolicy, TrimReport, TrimResult, trim_request

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "BudgetCheck",
    "BudgetHookError",
    "BudgetPolicy",
    "CannotFitError",
    "ContextBudgetError",
    "MalformedRequestError",
    "MessageAction",
    "OutputReserveTooLargeError",
    "PolicyError",
    "RequestCount",
    "TokenCounter",
    "TokenizerProfile",
    "TokenizerUnavailableError",
    "TrimPolicy",
    "TrimReport",
    "TrimResult",
    "compute_budget",
    "requested_output_tokens",
    "resolve_tokenizer",
    "trim_request",
]
