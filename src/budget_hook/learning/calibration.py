"""How a decision's count is calibrated, and when the provider's own count is worth asking (pure).

Contract:

* ``Calibration`` is what the adapter knows beyond the offline estimate: a learned ``correction`` (applied
  to every count of the request) and, when it asked, the provider's own count of the request as the
  client sent it (``provider_tokens``, against our uncorrected estimate ``provider_estimate`` of the same
  body). ``factor`` is what the counter multiplies by: the provider's ratio when there is one (exact for
  this request), else the learned correction, else 1.
* ``needs_provider_count(tokens, budget, band)`` says whether the estimate lies close enough to the
  budget that its measured error could flip the decision: ``budget * (1 - under) < tokens <= budget *
  (1 + over)``, where ``under`` / ``over`` are how far the estimate is measured to fall below / above
  what the provider bills (``count_band``).
* ``learnable(body)`` is False for requests whose billed input includes content the provider's server
  produced or holds (server tools, ``previous_response_id``, MCP servers, server-side context management,
  cached content): their usage says nothing about our count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..counting.rendered import with_extra_body
from ..providers import PROVIDERS, CountBand
from .corrections import Correction

#: per counting family, from ``bench/accuracy.py`` on the held-out half of the calibration set (requests
#: without referenced files): about the largest shortfall seen, and the 90th percentile of the over-count;
#: each provider's ``band`` in its record (``providers/``)
MEASURED_BANDS: dict[str, CountBand] = {record.family: record.band for record in PROVIDERS if record.band is not None}
DEFAULT_BAND = CountBand(under=0.05, over=0.45)


def count_band(family: str) -> CountBand:
    return MEASURED_BANDS.get(family, DEFAULT_BAND)


def needs_provider_count(tokens: int, budget: int, band: CountBand) -> bool:
    return budget * (1 - band.under) < tokens <= budget * (1 + band.over)


@dataclass(frozen=True)
class Calibration:
    correction: Correction | None = None
    #: the provider's count of the body as the client sent it, and our uncorrected estimate of that body
    provider_tokens: int | None = None
    provider_estimate: int | None = None
    #: what happened when the provider was asked (``answered``, ``timeout``, ``error: ...``, ``cached``)
    provider_note: str | None = None

    @property
    def factor(self) -> float:
        if self.provider_tokens is not None and self.provider_estimate:
            return self.provider_tokens / self.provider_estimate
        return self.correction.factor if self.correction is not None else 1.0

    def label(self) -> str | None:
        """How the counts were adjusted, for the record's method (None: not adjusted)."""
        if self.provider_tokens is not None and self.provider_estimate:
            return f"provider count {self.provider_tokens} (estimate {self.provider_estimate}, x{self.factor:.3f})"
        if self.correction is not None and self.correction.factor != 1.0:
            return f"learned {self.correction.describe()}"
        return None

    def as_dict(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"factor": round(self.factor, 4)}
        if self.correction is not None:
            facts["learned"] = self.correction.as_dict()
        if self.provider_note is not None:
            facts["provider"] = {"note": self.provider_note, "tokens": self.provider_tokens,
                                 "estimate": self.provider_estimate}
        return facts


#: tool types whose work happens on the provider's servers, and whose output is billed as input
_SERVER_TOOL_PREFIXES = ("web_search", "web_fetch", "code_execution", "code_interpreter", "tool_search", "mcp",
                         "file_search", "image_generation", "url_context")
#: fields that make the provider run model calls of its own (searches, MCP, code, Cohere's connectors): the bill is
#: their sum, which may pass the window (a review of 2026-12-07: one such bill raised every tenant's served floor)
_LOOP_FIELDS = ("mcp_servers", "container", "web_search_options", "vector_store_ids", "connectors")
_SERVER_FIELDS = ("previous_response_id", "conversation", "context_management", "cachedContent", "cached_content",
                  "prompt_id", "conversation_id",  # Cohere's history
                  *_LOOP_FIELDS,
                  # a mocked answer (keys LiteLLM lets send one): its usage is the client's own words
                  "mock_response")
#: Gemini's server-side tools, as keys of a tool (either spelling)
_SERVER_TOOL_KEYS = ("googleSearch", "google_search", "codeExecution", "code_execution", "urlContext", "url_context",
                     "google_search_retrieval", "googleSearchRetrieval", "retrieval", "googleMaps", "google_maps",
                     "enterpriseWebSearch", "enterprise_web_search", "fileSearch", "file_search", "computerUse",
                     "computer_use")


def learnable(body: Mapping[str, Any]) -> bool:
    """Whether what the provider bills for ``body`` measures our count of it: no server-held or server-made
    content (history, cached contexts, stored prompts, searches, server tools), at the top level, in
    ``extra_body`` or in Gemini's ``config``. (The decision also says when it saw a reference or an unreadable
    part: ``Decision.unseen``.)"""
    return isinstance(body, Mapping) and not _server_work(body, _SERVER_FIELDS)


def server_loop(body: Mapping[str, Any]) -> bool:
    """Whether the provider may answer ``body`` with several model calls of its own (server tools, MCP, searches),
    billed as their sum: such a bill proves no window (``DecisionRecord.proves_window``). History, caches and stored
    prompts the provider holds are one call: their bill does. A stored Responses prompt (``prompt: {id}``) may bring
    tools configured with it (a search, MCP): its bill proves none either."""
    if not isinstance(body, Mapping):
        return True
    stored = (source.get("prompt") for _, source in with_extra_body(body))
    return any(isinstance(p, Mapping) and p.get("id") for p in stored) or _server_work(body, _LOOP_FIELDS)


def _server_work(body: Mapping[str, Any], fields: tuple[str, ...]) -> bool:
    """Any of ``fields`` set, or a server tool, at the top level, in ``extra_body`` or in Gemini's ``config``."""
    for source in (body, *(body.get(name) for name in ("extra_body", "config"))):
        if not isinstance(source, Mapping):
            continue
        if any(source.get(name) not in (None, False, "", []) for name in fields):  # {}: search on
            return True
        tools = source.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, Mapping):
                continue
            kind = tool.get("type")
            if isinstance(kind, str) and kind.startswith(_SERVER_TOOL_PREFIXES):
                return True
            if any(key in tool for key in _SERVER_TOOL_KEYS):
                return True
    return False


def mocked(body: Mapping[str, Any]) -> bool:
    """Whether the answer to ``body`` is the client's own (``mock_response``, which LiteLLM lets some keys send):
    its usage proves nothing a provider served."""
    return isinstance(body, Mapping) and any(
        source.get("mock_response") not in (None, False) for _, source in with_extra_body(body))
