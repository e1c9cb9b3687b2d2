"""Ask a deployment's own token counter, with its credentials (``provider_count: near_budget``).

Contract: ``group_target(deployments, shape_name)`` picks the counter for a group (None unless every
deployment has one of the same provider); ``count_target(deployment, shape_name)`` returns the
``CountTarget`` (URL, headers, how to build the body) for a deployment whose provider has a counting
endpoint for requests of that shape, else None (a provider's endpoint, its URL, key, headers and the
fields sent, is the ``count_endpoint`` of its record in ``providers/<name>.py``):

* Anthropic (``anthropic/...``; Messages format): ``POST {api_base}/v1/messages/count_tokens``;
* Gemini API (``gemini/...``; generateContent format): ``POST {api_base}/v1beta/models/{model}:countTokens``;
* OpenAI (``openai/...``, Responses format): ``POST {api_base}/responses/input_tokens``;
* self-hosted OpenAI-compatible servers (``hosted_vllm/...``, or ``openai/...`` with an ``api_base`` that is
  not OpenAI's; chat format): vLLM's and SGLang's ``POST {server}/tokenize`` with the ``messages`` (and
  ``tools``), which applies the model's own chat template and answers ``{"count": N, "max_model_len":
  M}``. The key is optional. ``max_model_len`` is the server's own window: kept per server
  (``ProviderCounter.server_window``), it is the window a request is decided against when none is configured
  or the configured one is larger (the server refuses anything over it). A server that answers 404 or 405
  has no such endpoint: it is not asked again for ``NO_ENDPOINT_SECONDS``.

``ProviderCounter.count(target, body, timeout)`` returns ``(tokens, note)``: the provider's count of the
body as the client sent it (None on a timeout, an error, an answer without a count), and what happened
(``answered``, ``cached``, ``timeout``, ``error: status 500``). Counts are cached by the hash of the URL
and the body sent (a resent request is not counted twice). It never raises, never logs the body, and
sends nothing but the counting request.

``decide_with_provider_count(plugin, request, decision, deployments)``: a decision whose estimate lies within
its measured error of the budget, decided again on the deployments' own count (the plugin duck-typed:
``provider_counter``, ``offloader``, ``settings``). The estimate decides instead when the endpoint would not see
all the request holds (``CountTarget.unsent``: fields it is not sent, media on a self-hosted server), or a self-hosted
server counts under a quarter of the estimate (``IMPLAUSIBLY_LOW``). The counting body is built and hashed in the pool
when large.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx

from ..counting.rendered import PROMPT_FIELDS, with_extra_body
from ..pipeline import BudgetRequest, Decision, decide, decision_weight, estimate
from ..providers import count_endpoint

_TOKENIZE_FIELDS = ("messages", "tools")
#: how long a server whose ``/tokenize`` answered 404/405 is not asked again
NO_ENDPOINT_SECONDS = 600.0
#: a self-hosted server's count this many times under the estimate is not taken (``decide_with_provider_count``)
IMPLAUSIBLY_LOW = 4


@dataclass(frozen=True)
class CountTarget:
    provider: str
    url: str
    headers: Mapping[str, str]
    model: str

    def fields(self) -> tuple[str, ...]:
        """The request's fields this endpoint is sent."""
        if self.provider == "tokenize":
            return _TOKENIZE_FIELDS
        endpoint = count_endpoint(self.provider)
        return endpoint.fields if endpoint is not None else ()

    def unsent(self, request: Mapping[str, Any], references: Iterable[str] = ()) -> list[str]:
        """What reaches the prompt but not this endpoint's count: its count would leave it out, and scaling the
        estimate by it would undo its count. The fields whose text reaches the prompt (``rendered.PROMPT_FIELDS``)
        that the endpoint is not sent; content the gateway estimated without seeing it (``references``: their paths)
        in a field the endpoint is not sent (a stored prompt, a vector store); and on a self-hosted server, any media
        part (vLLM's ``/tokenize`` ran no image processor before 0.17: six 4K images counted 50 tokens, and the
        estimate scaled by 0.001 let 63,350 tokens into a 32k window; a review of 2026-12-07)."""
        sent = self.fields()
        unsent = [name for name in PROMPT_FIELDS if name not in sent
                  and any(source.get(name) for _, source in with_extra_body(request))]
        extra = request.get("extra_body")
        if "previous_response_id" in sent and isinstance(extra, Mapping) and extra.get("previous_response_id"):
            # LiteLLM forwards that id (it merges ``extra_body`` last), the endpoint is sent the top-level one: the
            # chain counted there is not the one the request continues (a review: the larger one was taken off)
            unsent.append("extra_body.previous_response_id")
        unsent += [path for path in references if path.partition(".")[0].partition("[")[0] not in sent]
        if self.provider == "tokenize" and (media := _first_media(request.get("messages"))) is not None:
            unsent.append(media)
        return list(dict.fromkeys(unsent))

    def body(self, request: Mapping[str, Any]) -> dict[str, Any]:
        inner = {k: request[k] for k in self.fields() if request.get(k) is not None}
        if self.provider == "tokenize":
            return {"model": self.model, **inner, "add_generation_prompt": True}
        endpoint = count_endpoint(self.provider)
        if endpoint is not None and endpoint.wrap:
            return {endpoint.wrap: {"model": f"models/{self.model}", **inner}}
        return {"model": self.model, **inner}


def _first_media(messages: Any) -> str | None:
    """The path of a chat request's first part that is not text (an image, audio, a video, a file), or None."""
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        for part_index, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, Mapping) and part.get("type") not in ("text", None):
                return f"messages[{index}].content[{part_index}]"
    return None


def prepare(target: CountTarget, request: Mapping[str, Any]) -> tuple[bytes, str] | str:
    """The counting request's bytes and its cache key, or why there are none (a body that is not JSON)."""
    body = target.body(request)
    try:
        encoded = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError) as exc:
        return f"error: body not JSON ({type(exc).__name__})"
    return encoded, hashlib.sha256(target.url.encode() + b"\0" + encoded).hexdigest()


def _secret(value: Any) -> str | None:
    if isinstance(value, str) and value.startswith("os.environ/"):
        return os.environ.get(value.removeprefix("os.environ/"))
    return value if isinstance(value, str) and value else None


def _self_hosted(provider: str, params: Mapping[str, Any]) -> str | None:
    """The server's root URL when the deployment is a self-hosted OpenAI-compatible server, else None."""
    base = _secret(params.get("api_base"))
    if provider not in ("hosted_vllm", "openai") or not base or "api.openai.com" in base:
        return None
    return base.rstrip("/").removesuffix("/v1")


def count_target(deployment: Mapping[str, Any], shape_name: str) -> CountTarget | None:
    params = deployment.get("litellm_params") if isinstance(deployment, Mapping) else None
    if not isinstance(params, Mapping) or not isinstance(params.get("model"), str):
        return None
    model: str = params["model"]
    provider, _, name = model.partition("/")
    provider = str(params.get("custom_llm_provider") or provider)
    server = _self_hosted(provider, params) if shape_name == "chat" and name else None
    if server is not None:
        key = _secret(params.get("api_key"))
        return CountTarget("tokenize", f"{server}/tokenize", {"authorization": f"Bearer {key}"} if key else {}, name)
    endpoint = count_endpoint(provider) if name else None
    if endpoint is None or endpoint.shape != shape_name:
        return None
    key = _secret(params.get("api_key")) or os.environ.get(endpoint.key_env)
    if not key:
        return None
    base = (_secret(params.get("api_base")) or endpoint.default_base).rstrip("/")
    for suffix in endpoint.base_suffixes:
        base = base.removesuffix(suffix)
    headers = {endpoint.key_header: f"{endpoint.key_prefix}{key}", **dict(endpoint.headers)}
    return CountTarget(endpoint.provider, base + endpoint.path.replace("{model}", name), headers, name)


def group_target(deployments: list[Any], shape_name: str) -> CountTarget | None:
    """The counter to ask for a group: its first deployment's, when every deployment has one of the same
    provider (one provider's count says nothing about another's)."""
    targets = [count_target(d, shape_name) for d in deployments]
    first = targets[0] if targets else None
    if first is None or any(t is None or t.provider != first.provider for t in targets):
        return None
    if first.provider == "tokenize" and any(t is not None and t.model != first.model for t in targets):
        return None  # servers of different models apply different chat templates
    return first


def _tokens(provider: str, answer: Any) -> int | None:
    if not isinstance(answer, Mapping):
        return None
    names = {"gemini": "totalTokens", "tokenize": "count"}
    value = answer.get(names.get(provider, "input_tokens"))
    return value if isinstance(value, int) and value >= 0 and not isinstance(value, bool) else None


class ProviderCounter:
    def __init__(self, *, cache_entries: int = 2048,
                 client: Callable[[], httpx.AsyncClient] | None = None) -> None:
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._entries = cache_entries
        self._client_factory = client
        self._client: httpx.AsyncClient | None = None
        self.calls = 0
        #: counting URLs that answered 404/405 (no such endpoint), until when they are not asked
        self._absent: dict[str, float] = {}
        #: per ``/tokenize`` URL, the ``max_model_len`` the server last answered
        self._windows: dict[str, int] = {}

    def server_window(self, target: CountTarget) -> int | None:
        """The window the server said it serves (``max_model_len``), once it has answered."""
        return self._windows.get(target.url) if target.provider == "tokenize" else None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = self._client_factory() if self._client_factory else httpx.AsyncClient(trust_env=False)
        return self._client

    async def count(self, target: CountTarget, request: Mapping[str, Any], timeout: float,
                    prepared: tuple[bytes, str] | str | None = None) -> tuple[int | None, str]:
        """The endpoint's count of ``request`` (``prepared``: its ``prepare``, when made in the pool)."""
        prepared = prepare(target, request) if prepared is None else prepared
        if isinstance(prepared, str):
            return None, prepared
        encoded, digest = prepared
        cached = self._cache.get(digest)
        if cached is not None:
            self._cache.move_to_end(digest)
            return cached, "cached"
        if self._absent.get(target.url, 0.0) > time.monotonic():
            return None, "error: no counting endpoint (404)"
        self.calls += 1
        try:
            response = await asyncio.wait_for(
                self._http().post(target.url, content=encoded,
                                  headers={**target.headers, "content-type": "application/json"}, timeout=timeout),
                timeout=timeout)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            return None, f"timeout after {timeout:.2f} s"
        except Exception as exc:  # connection refused, TLS, DNS: the estimate decides
            return None, f"error: {type(exc).__name__}"
        if response.status_code in (404, 405):
            if len(self._absent) > 4096:
                self._absent.clear()
            self._absent[target.url] = time.monotonic() + NO_ENDPOINT_SECONDS
        if response.status_code != 200:
            return None, f"error: status {response.status_code}"
        try:
            answer = response.json()
        except ValueError:
            answer = None
        tokens = _tokens(target.provider, answer)
        window = answer.get("max_model_len") if isinstance(answer, Mapping) else None
        if target.provider == "tokenize" and isinstance(window, int) and not isinstance(window, bool) and window > 0:
            if len(self._windows) > 4096:
                self._windows.clear()
            self._windows[target.url] = window
        if tokens is None:
            return None, "error: no count in the answer"
        self._cache[digest] = tokens
        while len(self._cache) > self._entries:
            self._cache.popitem(last=False)
        return tokens, "answered"


async def decide_with_provider_count(plugin: Any, request: BudgetRequest, decision: Decision,
                                     deployments: list[Any]) -> Decision:
    """The estimate lies within its measured error of the budget: ask the deployments' own counter and
    decide again on its count (a timeout or an error leaves the estimate's decision, noted)."""
    target = group_target(deployments, request.shape.name)
    calibration = request.calibration
    if target is None:
        note = f"no token counting endpoint for {request.shape.name} requests to this group's deployments"
        return replace(decision, count={**(decision.count or {}), "provider": {"note": note}})
    def check() -> tuple[list[str], tuple[bytes, str] | str | None]:  # a walk and a serialization: in the pool if large
        listed = getattr(request.shape, "references", None)
        references = [path for path, _, _ in listed(request.body)] if listed is not None else []
        unsent = target.unsent(request.body, references)
        return unsent, None if unsent else prepare(target, request.body)
    unsent, prepared = await plugin.offloader.run(check, request.body)
    if unsent:  # a self-hosted template's documents: /tokenize would not render them
        note = f"the token counting endpoint is not sent {', '.join(unsent[:3])}: the estimate decides"
        return replace(decision, count={**(decision.count or {}), "provider": {"note": note}})
    timeout = decision.resolved.policy.provider_count_timeout_ms / 1000
    tokens, note = await plugin.provider_counter.count(target, request.body, timeout, prepared)
    if tokens is not None and request.held and "previous_response_id" in target.fields() \
            and request.body.get("previous_response_id"):
        tokens = max(1, tokens - request.held)  # the provider counts the chain it holds; the decision as ``held``
    if tokens is None:
        calibration = replace(calibration, provider_note=note)
    else:
        ours = await plugin.offloader.run(lambda: estimate(request), request.body,
                                          weight=decision_weight(request.limits))
        if target.provider == "tokenize" and tokens * IMPLAUSIBLY_LOW < ours:
            # a self-hosted server's count under a quarter of the estimate: text is never counted that far apart, so
            # it missed content (a template's): scaling every count by it would let the request through. The estimate
            # decides. (A vendor's endpoint reads what the estimate prices at its worst, files by id, images by URL:
            # its count is taken, far under the estimate or not; a review of the fix)
            calibration = replace(calibration, provider_note=f"the endpoint counted {tokens}, under a quarter of the "
                                                              f"estimate ({ours}): the estimate decides")
        else:
            calibration = replace(calibration, provider_tokens=tokens, provider_estimate=max(1, ours),
                                  provider_note=note)
    again = replace(request, calibration=calibration, limits=_server_limits(request.limits,
                                                                          plugin.provider_counter.server_window(target)))
    decided: Decision = await plugin.offloader.run(lambda: decide(again, plugin.settings), request.body,
                                                   weight=decision_weight(again.limits))
    return decided


def _server_limits(limits: Any, window: int | None) -> Any:
    """The limits with the server's own window (``max_model_len``) where none is configured or the configured
    one is larger: the server's word, not a client's."""
    if window is None or (limits.window is not None and limits.window <= window):
        return limits
    source = "the server's max_model_len (/tokenize)"
    return replace(limits, window=window, source=f"{limits.source}; {source}" if limits.window else source)
