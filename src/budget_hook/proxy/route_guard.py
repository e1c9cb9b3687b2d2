"""Routes that reach a provider around the pre-call hook, or with the model only in the URL (duck-typed: no
LiteLLM import; the hook passes in what it needs).

The table (``proxy.routes``) says what each route does; this module enforces the parts the pre-call hook alone
cannot see:

* **Where a request is.** ``install_path_context(app)`` puts one ASGI layer on top of the proxy's built
  middleware stack (the lazily-loaded feature routers included, which no route wrapper could reach at
  start-up): it keeps the request's route key (``/path``, ``WS /path``) in a context variable for the hooks.
* **The model in the URL.** A pass-through body in a shape budget_hook reads whose model is in its path:
  ``pass_through_group`` names it: Gemini's ``/gemini/.../models/{m}:generateContent`` as ``gemini/{m}``,
  Vertex AI's as ``vertex_ai/{m}``, Azure's ``/azure/openai/deployments/{d}/...`` as ``azure/{d}``. It wins over a
  ``model`` in the body, which the provider ignores (the URL's deployment serves the request).
* **Refused calls.** ``refused_call``: a call type no shape reads (``UNREAD_MODEL_CALL_TYPES``), or a
  pass-through request on a route the table refuses (a WebSocket relay of a realtime or live session).
* **Compaction.** ``streams_responses``: a blocked ``/responses/compact`` is a plain 400 even when asked to
  stream (the API answers a compaction in one piece); a streamed ``/v1/responses`` block is ``response.failed``.
* **Attempts no pre-call decision covers.** ``undecided_attempt``, from ``async_pre_call_deployment_hook``:
  LiteLLM calls it for every router attempt, also on routes that never run the pre-call hook: a router-model
  pass-through (``/vllm``, ``/azure``, ``/azure_ai``, ``/bedrock``, ``/gigachat``, ``/nvidia_nim`` call
  ``llm_router.allm_passthrough_route`` directly), the priority queue, the RAG query. The attempt is decided
  as the pre-call hook would decide it, on a copy whose model is the attempt's model group, against that
  group's window and the caller's policy: forwarded, trimmed (the trimmed content written back into the
  attempt) or refused with the plugin's HTTP 400. A pass-through body in a format budget_hook cannot read, to
  a generation endpoint (Bedrock ``converse``, a non-Anthropic ``invoke``), is refused under
  ``unknown_routes: block``; other pass-through endpoints (``tokenize``, a NIM ``infer``) are forwarded.
  On an A2A route (``A2A_ROUTE``), LiteLLM's completion bridge calls ``litellm.acompletion`` for an agent outside
  the router (no group, no deployment): the call is decided against its model's own window (the model map's, else
  ``unknown_window``), as for a group of that name, for the caller the proxy authenticated for the A2A request
  (``note_a2a_caller``, from the pre-call hook the proxy runs for it).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any

from ..pipeline.bounds import operator_prompt_parameters
from ..shapes import PASS_THROUGH_CALL_TYPE, SHAPES, UNREAD_MODEL_CALL_TYPES, Shape
from .errors import unread_route_error
from .routes import REFUSED, classify

#: the call type of LiteLLM's router-model pass-through (``llm_router.allm_passthrough_route``)
ROUTER_PASS_THROUGH = "allm_passthrough_route"
#: the call type an attempt of each shape is decided as
_CALL_TYPES = {"chat": "acompletion", "anthropic": "anthropic_messages", "responses": "aresponses",
               "gemini": "agenerate_content", "embeddings": "aembedding", "completions": "atext_completion"}

_COMPACT = ("acompact_responses", "compact_responses")
#: the call type the proxy runs the pre-call hook with for an A2A request
A2A_CALL_TYPE = "asend_message"
#: the routes where LiteLLM's A2A completion bridge makes its calls (``/a2a/{agent_id}``, ``.../message/send``)
A2A_ROUTE = re.compile(r"^(?!/v1/a2a/discover/?$)(/v1)?/a2a/[^/]+(/message/send)?/?$")
#: the caller the proxy authenticated for the A2A request in progress (``note_a2a_caller``): the bridge's own call
#: carries no proxy metadata, and the team's and key's policies must apply to it too
_A2A_CALLER: ContextVar[Any] = ContextVar("budget_hook_a2a_caller", default=None)
_A2A_ROUTE_MATCH = A2A_ROUTE.match
_ROUTE: ContextVar[str | None] = ContextVar("budget_hook_route", default=None)

_MODEL_IN_PATH = (
    (re.compile(r"^/gemini/(?:.*/)?models/([^/:]+):(?:generateContent|streamGenerateContent)$"), "gemini/"),
    (re.compile(r"^/vertex[_-]ai/(?:.*/)?models/([^/:]+):(?:generateContent|streamGenerateContent|rawPredict|"
                r"streamRawPredict)$"), "vertex_ai/"),
    (re.compile(r"^/azure(?:_ai)?/(?:.*/)?deployments/([^/]+)/(?:chat/completions|completions|embeddings|"
                r"responses)$"), "azure/"),
)
#: pass-through endpoints by the shape they carry (then the body must have that shape)
_ENDPOINT_SHAPES = (
    (re.compile(r"chat/completions$"), "chat"), (re.compile(r"(^|/)completions$"), "completions"),
    (re.compile(r"(^|/)embeddings$"), "embeddings"), (re.compile(r"(^|/)responses(/compact)?$"), "responses"),
    (re.compile(r"(^|/)messages$"), "anthropic"), (re.compile(r":(stream)?[gG]enerateContent$"), "gemini"),
    # Bedrock invoke and Vertex rawPredict carry the model's own format: Anthropic's is the one read here
    (re.compile(r"/invoke(-with-response-stream)?$|:(stream)?[rR]awPredict$"), "anthropic"),
)
#: the field a body of each shape carries its content in
_FIELDS = {"chat": "messages", "anthropic": "messages", "completions": "prompt", "embeddings": "input",
           "responses": "input", "gemini": "contents"}
#: endpoints that make a model generate: an unreadable body to one of them is refused under ``block``
_GENERATION = re.compile(r"(completions|embeddings|responses(/compact)?|messages|[gG]enerateContent|[rR]awPredict|"
                         r"converse(-stream)?|invoke(-with-response-stream)?)$")


class _RouteContext:
    """The ASGI layer that keeps the request's route key in ``_ROUTE`` while the app serves it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope.get("type") if isinstance(scope, dict) else None
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path, root = str(scope.get("path") or ""), str(scope.get("root_path") or "").rstrip("/")
        if root and path.startswith(root + "/"):
            path = path[len(root):]
        token = _ROUTE.set(f"WS {path}" if kind == "websocket" else path)
        try:
            await self.app(scope, receive, send)
        finally:
            _ROUTE.reset(token)


def install_path_context(app: Any) -> bool:
    """Put ``_RouteContext`` on top of the app's middleware stack (now if it is built, else when it is)."""
    with contextlib.suppress(Exception):
        stack = getattr(app, "middleware_stack", None)
        if isinstance(stack, _RouteContext):
            return True
        if stack is not None:
            app.middleware_stack = _RouteContext(stack)
            return True
        build = app.build_middleware_stack
        if not getattr(build, "_budget_hook", False):
            def built() -> Any:
                return _RouteContext(build())
            built._budget_hook = True  # type: ignore[attr-defined]
            app.build_middleware_stack = built
        return True
    return False


def current_route() -> str | None:
    return _ROUTE.get()


def model_in_path(key: str | None) -> str | None:
    """The model a pass-through names only in its URL, as the model map spells it (``gemini/gemini-2.5-flash``)."""
    for pattern, provider in _MODEL_IN_PATH:
        found = pattern.match(key or "")
        if found:
            return provider + found.group(1)
    return None


def pass_through_group(call_type: Any, shape: Shape | None) -> str | None:
    """For a pass-through body budget_hook reads whose model is in the URL: that model (whatever the body says)."""
    return model_in_path(_ROUTE.get()) if call_type == PASS_THROUGH_CALL_TYPE and shape is not None else None


def refused_call(call_type: Any) -> bool:
    """A call type that reaches a model in a format no shape reads (``UNREAD_MODEL_CALL_TYPES``), or a
    pass-through request on a route the table refuses (a WebSocket relay of a realtime session)."""
    if call_type in UNREAD_MODEL_CALL_TYPES:
        return True
    key = _ROUTE.get() if call_type == PASS_THROUGH_CALL_TYPE else None
    entry = classify(key) if key else None
    return entry is not None and entry.kind == REFUSED


def streams_responses(shape: Shape, data: Mapping[str, Any], call_type: Any) -> bool:
    """A streamed request of a shape whose API streams its failures as events (``Shape.streamed_error``: the
    Responses API's ``response.failed``); not a compaction (``/responses/compact`` answers in one piece: its
    block is a plain 400)."""
    return shape.streamed_error is not None and data.get("stream") is True and call_type not in _COMPACT


def endpoint_shape(endpoint: str, body: Mapping[str, Any]) -> Shape | None:
    """The shape of a pass-through body, by the endpoint it goes to (then the body must have it)."""
    path = endpoint.split("?", 1)[0].rstrip("/")
    for pattern, name in _ENDPOINT_SHAPES:
        if pattern.search(path):
            own_format = not path.endswith(("invoke", "invoke-with-response-stream", "Predict"))
            readable = _FIELDS[name] in body and (own_format or "anthropic_version" in body)
            return SHAPES.get(name) if readable else None
    return None


def _routed_group(kwargs: Mapping[str, Any]) -> str | None:
    """The model group of a router attempt (the router's own metadata), None outside the router."""
    for key in ("litellm_metadata", "metadata"):
        metadata = kwargs.get(key)
        if isinstance(metadata, Mapping) and isinstance(metadata.get("model_info"), Mapping):
            group = metadata.get("deployment_model_name") or metadata.get("model_group")
            if isinstance(group, str) and group:
                return group
    return None


def _caller(kwargs: Mapping[str, Any]) -> Any:
    """The caller as the proxy authenticated it: its ``UserAPIKeyAuth`` in the attempt's metadata (an object no
    JSON body can forge), else the key fields the proxy itself writes there."""
    for key in ("litellm_metadata", "metadata"):
        metadata = kwargs.get(key)
        if not isinstance(metadata, Mapping):
            continue
        auth = metadata.get("user_api_key_auth")
        if auth is not None and not isinstance(auth, Mapping) and hasattr(auth, "team_id"):
            return auth
        if "user_api_key_hash" in metadata or "user_api_key_team_id" in metadata:
            return SimpleNamespace(team_id=metadata.get("user_api_key_team_id"), team_alias=None,
                                   key_alias=metadata.get("user_api_key_alias"),
                                   token=metadata.get("user_api_key_hash"), team_metadata=None,
                                   metadata=metadata.get("user_api_key_metadata"))
    return None


def note_a2a_caller(call_type: Any, user_api_key_dict: Any) -> None:
    """From the pre-call hook: the caller of an A2A request (``asend_message``), for the calls its bridge makes."""
    if call_type == A2A_CALL_TYPE and _A2A_ROUTE_MATCH(_ROUTE.get() or ""):
        _A2A_CALLER.set(user_api_key_dict)


async def undecided_attempt(plugin: Any, kwargs: dict[str, Any], call_type: Any, error_type: Any,
                            own: Callable[[], Mapping[str, Any]] = dict) -> dict[str, Any] | None:
    """A router attempt no pre-call decision covers: decided now (the kwargs to send, or None to send them as
    they are; a refusal raises ``error_type``). ``own``: the ``litellm_params`` the operator set on the attempt's
    deployment, whose prompt parameters are the operator's, not the client's (``bounds.operator_prompt_parameters``)."""
    if call_type == ROUTER_PASS_THROUGH:
        return await _pass_through_attempt(plugin, kwargs, error_type)
    shape, group = SHAPES.for_call_type(call_type), _routed_group(kwargs)
    model, caller = kwargs.get("model"), _caller(kwargs)
    if group is None and isinstance(model, str) and model and _A2A_ROUTE_MATCH(_ROUTE.get() or ""):
        # an agent's model, called by the A2A completion bridge outside the router, for the A2A request's caller
        group, caller = model, caller or _A2A_CALLER.get()
    if shape is None or group is None or not isinstance(kwargs.get("litellm_call_id"), str):
        return None  # not a router attempt of a shape we read (health checks, LiteLLM's own calls)
    operator = operator_prompt_parameters(kwargs, own)
    probe = {**{k: v for k, v in kwargs.items() if k not in operator}, "model": group}
    forwarded = await plugin.async_pre_call_hook(caller, None, probe, call_type)
    if not isinstance(forwarded, dict) or forwarded is probe:
        return None
    return {**forwarded, **operator, "model": kwargs.get("model")}


async def _pass_through_attempt(plugin: Any, kwargs: dict[str, Any], error_type: Any) -> dict[str, Any] | None:
    field = "json" if isinstance(kwargs.get("json"), dict) else "data"
    body = kwargs.get(field)
    if not isinstance(body, dict):
        return None  # no JSON body: a GET, a file upload, raw content
    endpoint = str(kwargs.get("endpoint") or "")
    shape = endpoint_shape(endpoint, body)
    if shape is None:
        if _GENERATION.search(endpoint.split("?", 1)[0].rstrip("/")) and plugin.settings.unknown_routes == "block":
            raise error_type(unread_route_error(f"pass-through to {endpoint.lstrip('/')}"))
        return None
    group = _routed_group(kwargs) or kwargs.get("model")
    headers = kwargs.get("request_headers")
    probe = {**body, "model": group, "litellm_call_id": kwargs.get("litellm_call_id"),
             "proxy_server_request": {"headers": dict(headers) if isinstance(headers, Mapping) else {}}}
    forwarded = await plugin.async_pre_call_hook(_caller(kwargs), None, probe, _CALL_TYPES[shape.name])
    if not isinstance(forwarded, dict) or forwarded is probe:
        return None
    sent = {k: v for k, v in forwarded.items() if k in body or k in shape.content_fields}
    for own in ("model", shape.metadata_key):  # the client's own, never the probe's
        sent.pop(own, None)
        if own in body:
            sent[own] = body[own]
    return {**kwargs, field: sent}
