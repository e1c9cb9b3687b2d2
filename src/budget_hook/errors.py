"""One exception tree for everything budget_hook raises.

Every error carries the real numbers and says what to do about it, so that the adapter (proxy plugin,
CLI) can turn it into an HTTP 400 / exit code without re-deriving anything::

    BudgetHookError
    ├── MalformedRequestError      the request itself is wrong (which message, which field)
    ├── TokenizerUnavailableError  an encoding could not be loaded offline
    ├── PolicyError                a configuration value is wrong (raised at start-up)
    └── ContextBudgetError         the request cannot be made to fit
        ├── OutputReserveTooLargeError  the request's own max_tokens leaves no room for input
        └── CannotFitError              even after trimming the protected part is over budget
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class BudgetHookError(Exception):
    """Base class of every error raised by budget_hook."""


class MalformedRequestError(BudgetHookError, ValueError):
    """The request body is not a valid chat request; ``field`` says where (``messages[3].content``)."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class TokenizerUnavailableError(BudgetHookError, RuntimeError):
    """A tiktoken encoding could not be loaded without network access."""


class PolicyError(BudgetHookError, ValueError):
    """A policy value is invalid (negative reserve, ratio outside 0..1, ...)."""


class ContextBudgetError(BudgetHookError):
    """The request does not fit the routed model's input budget and cannot be made to.

    ``facts`` holds every number behind the decision (window, reserve, margin, budget, tokens before and
    after trimming, protected sizes), ready to be logged or returned to the client as JSON.
    """

    code = "context_length_exceeded"

    def __init__(self, message: str, facts: Mapping[str, Any]) -> None:
        self.facts = dict(facts)
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self)


class OutputReserveTooLargeError(ContextBudgetError):
    """The output reserve (usually the request's own ``max_tokens``) leaves no input budget."""


class CannotFitError(ContextBudgetError):
    """Trimming everything the policy allows still leaves the request over budget."""
