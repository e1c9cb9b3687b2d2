"""One record per provider (pure data): ``PROVIDERS`` in the order their overflow wordings are tried.

A new provider is one module here with a ``ProviderRecord`` (``base.py``), added to ``PROVIDERS``; see
docs/architecture.md, "Where to change what".
"""

from __future__ import annotations

from . import anthropic, gemini, open_models, openai
from .base import CountBand, CountEndpoint, OverflowWording, ProviderRecord, WindowQuirks

PROVIDERS: tuple[ProviderRecord, ...] = (anthropic.RECORD, openai.RECORD, gemini.RECORD, open_models.MISTRAL,
                                         open_models.LLAMA, open_models.QWEN, open_models.DEEPSEEK)
_BY_FAMILY = {record.family: record for record in PROVIDERS}


def provider(family: str) -> ProviderRecord | None:
    """The record of a counting family (``anthropic``, ``openai``, ...), None for one without a record."""
    return _BY_FAMILY.get(family)


def count_endpoint(name: str) -> CountEndpoint | None:
    """The count endpoint of the provider LiteLLM names ``name`` (``anthropic/...``'s prefix), None if none."""
    record = _BY_FAMILY.get(name)
    return record.count_endpoint if record is not None else None


__all__ = ["PROVIDERS", "CountBand", "CountEndpoint", "OverflowWording", "ProviderRecord", "WindowQuirks",
           "count_endpoint", "provider"]
