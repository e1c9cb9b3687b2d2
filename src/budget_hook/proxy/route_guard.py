"""Routes that reach a provider around the pre-call hook, or with the model only in the URL (duck-typed: no
LiteLLM import; the hook passes in what it needs).

The table (``proxy.routes``) says what each route does; this module enforces the parts the pre-call hook alone
cannot see:

* **Where a request is.** ``install_path_context(app)`` puts one ASGI layer on top of the proxy's built
  middleware stack (the lazily-loaded feature routers included, which no route wrapper could reach at
  start-up): it keeps the request's route key (``/path``, ``WS /path``) in a context variable for the hooks.
* **The path as sent.** The route key is the decoded path as LiteLLM sends it on (``sent_path``: cut at an encoded
  ``?`` or ``#``, decoded again while it holds an escape, normalised as LiteLLM joins it), and so is a router
  attempt's endpoint.
* **The model in the URL, and its window.** A pass-through body in a shape budget_hook reads: ``pass_through_model``
  names its model and where its window is looked up. The URL's model wins over a ``model`` in the body, which the
  provider ignores: Gemini's ``/gemini/.../models/{m}:generateContent`` is ``gemini/{m}``, Vertex AI's
  ``vertex_ai/{m}`` (or the router group ``{m}``, which LiteLLM serves it from when the group has a pass-through
  deployment), Azure's ``/azure/openai/deployments/{d}/...`` ``azure/{d}``. Else the body's ``model``, whose window
  is the route provider's own model's in the model map, never a router group's; no model anywhere is a model whose
  window is unknown.
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
  attempt) or refused with the plugin's HTTP 400. A pass-through body in a format budget_hook cannot read is
  refused under ``unknown_routes: block`` unless its endpoint generates nothing (``NOT_GENERATING``: ``tokenize``,
  a NIM ``infer``...).
  On an A2A route (``A2A_ROUTE``), LiteLLM's completion bridge calls ``litellm.acompletion`` for an agent outside
  the router (no group, no deployment): the call is decided against its model's own window (the model map's, else
  ``unknown_window``), as for a group of that name, for the caller the proxy authenticated for the A2A request
  (``note_a2a_caller``, from the pre-call hook the proxy runs for it).
"""

from __future__ import annotations

import contextlib
import posixpath
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote

from ..pipeline.bounds import gateway_parameters, hookless_retries, operator_prompt_parameters
from ..shapes import PASS_THROUGH_CALL_TYPE, SHAPES, UNREAD_MODEL_CALL_TYPES, Shape
from .errors import ErrorSpec, prompt_parameter_error, unread_route_error
from .routes import REFUSED, classify
from .windows import with_learned_window

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

VERTEX = "vertex_ai/"
_MODEL_IN_PATH = (
    # a tuned model (``tunedModels/{m}``) keeps its path: a name the model map does not know (``unknown_window``)
    (re.compile(r"^/gemini/(?:.*/)?((?:tuned)?[mM]odels/[^/:]+):(?:generateContent|streamGenerateContent)$"),
     "gemini/"),
    # LiteLLM's own reading (``get_vertex_model_id_from_url``): from the first ``/models/`` to the first colon,
    # slashes included (a router group named ``gcp/google/gemini-2.5-flash``)
    (re.compile(r"^/vertex[_-]ai/(?=[^:]*:(?:generateContent|streamGenerateContent|rawPredict|streamRawPredict)$)"
                r"[^:]*?/models/([^:]+)"), VERTEX),
    # an endpoint of its own (a tuned or Model Garden model): no router lookup, a window the map does not know
    (re.compile(r"^/vertex[_-]ai/(?:.*/)?(endpoints/[^/:]+):(?:generateContent|streamGenerateContent|rawPredict|"
                r"streamRawPredict)$"), VERTEX),
    (re.compile(r"^/azure(?:_ai)?/(?:.*/)?deployments/([^/]+)/(?:chat/completions|completions|embeddings|"
                r"responses)$"), "azure/"),
)
#: the provider a pass-through route forwards to, as the model map prefixes its models (the window of a body's
#: ``model`` there is the provider's own model of that name, never a router group's)
_ROUTE_PROVIDERS = (("/openai/", "openai/"), ("/openai_passthrough/", "openai/"), ("/anthropic/", "anthropic/"),
                    ("/gemini/", "gemini/"), ("/vertex_ai/", VERTEX), ("/vertex-ai/", VERTEX), ("/azure/", "azure/"),
                    ("/azure_ai/", "azure_ai/"), ("/mistral/", "mistral/"), ("/cohere/", "cohere/"),
                    ("/openrouter/", "openrouter/"), ("/watsonx/", "watsonx/"), ("/bedrock/", "bedrock/"),
                    ("/vllm/", "hosted_vllm/"), ("/nvidia_nim/", "nvidia_nim/"), ("/gigachat/", "gigachat/"))
#: the last segment (or Google method) of a router-model pass-through endpoint that generates nothing: a body
#: budget_hook cannot read, sent anywhere else, may reach a model (SGLang's and TGI's ``generate``, vLLM's
#: ``inference/v1/generate``), and is refused under ``unknown_routes: block``
NOT_GENERATING = frozenset({"tokenize", "detokenize", "models", "health", "ping", "version", "metrics", "load",
                            "count_tokens", "input_tokens", "countTokens", "infer", "rerank", "score", "pooling",
                            "classify", "is_sleeping", "server_info", "get_model_info", "load_lora_adapter",
                            "unload_lora_adapter", "moderations", "files", "batches", "speech", "transcriptions",
                            "translations", "generations", "edits", "variations"})
#: times a pass-through path is decoded at most (``sent_path``): nesting past it is read as it stands
DECODES = 4
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
        path = sent_path(path)  # a pass-through's URL as LiteLLM forwards it
        token = _ROUTE.set(f"WS {path}" if kind == "websocket" else path)
        try:
            await self.app(scope, receive, send)
        finally:
            _ROUTE.reset(token)


def sent_path(path: str) -> str:
    """A percent-decoded path as it is sent on and read: cut at its first ``?`` or ``#``, decoded again while it holds
    an escape (up to ``DECODES`` times, cut again each time), then normalised as LiteLLM's handlers join it to the
    provider's URL (``posixpath.normpath``: dot segments resolved, repeated and trailing slashes dropped). The proxy
    decodes a path before routing, so ``%3F``, ``%23`` and ``/%2E`` arrive as a literal ``?``, ``#`` and ``/.``, and
    the handlers decode once more (``httpx.URL(endpoint).path``: ``%252F.`` is ``/.`` to them): a path read otherwise
    named one model or endpoint to budget_hook and another to the provider (an attack review, 2026-12-06, and its
    review)."""
    for _ in range(DECODES):
        path = _dots(path.split("?", 1)[0].split("#", 1)[0])
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    path = _dots(path.split("?", 1)[0].split("#", 1)[0])
    if not path:
        return path
    resolved = posixpath.normpath(path)
    if resolved == ".":
        return ""
    return "/" + resolved.lstrip("/") if resolved.startswith("/") else resolved


def _dots(path: str) -> str:
    """Dot segments resolved as httpx's ``normalize_path`` resolves them."""
    if "." not in path:
        return path
    kept: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if kept and kept != [""]:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    return "/".join(kept) or ("/" if path.startswith("/") else "")


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


def on_a2a_route() -> bool:
    """Whether the request in progress is one LiteLLM's A2A completion bridge serves (``A2A_ROUTE``)."""
    return _A2A_ROUTE_MATCH(_ROUTE.get() or "") is not None


def model_in_path(key: str | None, served: Callable[[str], bool] = lambda name: False) -> str | None:
    """The model a pass-through names only in its URL, as the model map spells it (``gemini/gemini-2.5-flash``).
    Vertex AI's pass-through serves a name the router has a pass-through deployment for from that deployment
    (LiteLLM's ``_resolve_vertex_model_from_router`` rewrites the URL to the deployment's model): then the name
    itself, a router group (``served(name)``)."""
    found = _url_model(key, served)
    return found[0] if found else None


def _url_model(key: str | None, served: Callable[[str], bool]) -> tuple[str, bool] | None:
    """(the model the URL names, whether it is a router group's name) or None."""
    for pattern, provider in _MODEL_IN_PATH:
        found = pattern.match(key or "")
        if found:
            name = found.group(1).removeprefix("models/")
            if provider == VERTEX and not name.startswith("endpoints/") and served(name):
                return name, True
            return provider + name, False
    return None


def pass_through_model(call_type: Any, shape: Shape | None, body_model: Any,
                       served: Callable[[str], bool] = lambda name: False) -> tuple[str, str | None] | None:
    """For a pass-through body budget_hook reads (else None): the model it is budgeted as, and the name its window
    is looked up under in the model map (None: ask the router). The model the URL names wins over the body's, which
    the provider ignores (the URL's deployment serves it); Vertex AI's pass-through serves a router group's name
    from that group's deployment (``served``: a group with a deployment it uses). A pass-through forwards the body to
    the route's provider, which serves its own model of the body's name: that model's window, never a router
    group's or alias's of the same name (a group ``gpt-3.5-turbo`` served by gpt-4o lent its 128k window). A body
    naming no model, on a URL naming none (Gemini's ``tunedModels/{m}``, Vertex's ``endpoints/{id}``), is budgeted
    as a model whose window is unknown (``unknown_window``), never left unchecked."""
    if call_type != PASS_THROUGH_CALL_TYPE or shape is None:
        return None
    key = _ROUTE.get() or ""
    named = _url_model(key, served)
    if named is not None:
        return named[0], None if named[1] else named[0]
    prefix = next((provider for route, provider in _ROUTE_PROVIDERS if key.startswith(route)), "")
    if not isinstance(body_model, str) or not body_model:
        return prefix + "unnamed-model", prefix + "unnamed-model"
    return body_model, body_model if body_model.startswith(prefix) else prefix + body_model


def forwarded_body(data: dict[str, Any], decided: Mapping[str, Any], key: str, call_type: Any) -> dict[str, Any]:
    """What the pre-call hook hands on: the decided body (``data`` itself, or a trimmed copy, which gets the metadata
    just attached at ``key``) with the gateway's own parameters (``bounds.gateway_parameters``) for the calls LiteLLM
    makes of it: every request of a shape it reads, also one it lets through undecided (a group whose mode is off
    can fall back to one whose is not). A pass-through body goes to the provider as it is: it gets none."""
    body = data if decided is data else {**decided, key: data[key]}
    return body if call_type == PASS_THROUGH_CALL_TYPE else {**body, **gateway_parameters()}


def hookless_retry_error(data: Mapping[str, Any], call_type: Any) -> ErrorSpec | None:
    """The 400 for a client's ``retry_policy`` (``bounds.hookless_retries``), whatever the group's mode; none for a
    pass-through body, which LiteLLM sends as it is without reading it."""
    path = None if call_type == PASS_THROUGH_CALL_TYPE else hookless_retries(data)
    return None if path is None else prompt_parameter_error(path)


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
    return _path_shape(sent_path(endpoint).rstrip("/"), body)


def _path_shape(path: str, body: Mapping[str, Any]) -> Shape | None:
    """``endpoint_shape`` of a path already read as sent (``sent_path`` decodes: it is read once)."""
    for pattern, name in _ENDPOINT_SHAPES:
        if pattern.search(path):
            own_format = not path.endswith(("invoke", "invoke-with-response-stream", "Predict"))
            readable = _FIELDS[name] in body and (own_format or "anthropic_version" in body)
            return SHAPES.get(name) if readable else None
    return None


#: the call types whose router attempts carry the router's metadata under ``metadata`` (its ``_acompletion``,
#: ``_aembedding`` and ``_atext_completion``); every other call the router makes (``_ageneric_api_call_with_fallbacks``:
#: Messages, Responses, Gemini's generateContent) carries it under ``litellm_metadata``
#: (``router_utils.batch_utils.get_router_metadata_variable_name``, LiteLLM 1.103 to 1.108).
_METADATA_CALL_TYPES = frozenset({"acompletion", "completion", "aembedding", "embedding", "atext_completion",
                                  "text_completion"})


def router_metadata_key(call_type: Any) -> str:
    """Where the router writes an attempt's deployment (``model_info``, ``deployment_model_name``) for ``call_type``."""
    return "metadata" if getattr(call_type, "value", call_type) in _METADATA_CALL_TYPES else "litellm_metadata"


def _metadata_keys(key: str | None) -> tuple[str, ...]:
    """Where a router attempt's caller may be, ``key`` (``router_metadata_key``) first; None: a pass-through's
    kwargs, which hold no field of the client's body."""
    if key is None:
        return "litellm_metadata", "metadata"
    return key, "metadata" if key == "litellm_metadata" else "litellm_metadata"


def _named_deployment(metadata: Any) -> tuple[str, str] | None:
    """The (group, deployment id) a router metadata names, if it names one."""
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("model_info"), Mapping):
        return None
    deployment_id = metadata["model_info"].get("id")
    group = metadata.get("deployment_model_name") or metadata.get("model_group")
    return (group, deployment_id) if isinstance(deployment_id, str) and isinstance(group, str) and group else None


def attempt_deployment(plugin: Any, kwargs: Mapping[str, Any], key: str,
                       fallback: tuple[str, Any] | None = None) -> tuple[str, Any] | None:
    """The group and limits of the deployment a router attempt goes to: from the router's own metadata (``key``,
    ``router_metadata_key``), else ``fallback`` (the first decision's). An eleventh attack review: a chat body's own
    ``litellm_metadata``, read first, named a 20,000-token group for a 4,000-token deployment on
    ``/queue/chat/completions`` (9,069 tokens forwarded). The other key, which a client may write (a chat body's
    ``litellm_metadata``, a Gemini body's ``metadata``) and in which LiteLLM's inner calls carry the outer call's (a
    ``/v1/messages`` call bridged to a chat deployment), may only lower a known window, to that of a deployment the
    router lists: never choose the group, its policy or its counter, nor replace an unknown window (a review of the
    first fix: a listed deployment of a group in shadow mode, or one counted with another tokenizer, let requests
    through)."""
    own = _named_deployment(kwargs.get(key))
    if own is not None:
        group, deployment_id = own
        limits = plugin.deployment_windows.get(f"{group}\x00{deployment_id}")
        # a deployment the router no longer lists: the smallest window of its group
        limits = limits if limits is not None else plugin.model_limits(group)
        learned = plugin.learning.window([deployment_id]) if plugin.settings.learning.enabled else None
        fallback = group, with_learned_window(limits, learned)
    if fallback is None:
        return None
    other = _named_deployment(kwargs.get("metadata" if key == "litellm_metadata" else "litellm_metadata"))
    listed = plugin.deployment_windows.get(f"{other[0]}\x00{other[1]}") if other is not None else None
    group, limits = fallback
    if listed is not None and listed.window is not None and limits.window is not None \
            and listed.window < limits.window:
        limits = replace(limits, window=listed.window, source=listed.source)
    return group, limits


def _routed_group(kwargs: Mapping[str, Any]) -> str | None:
    """The model group a router pass-through's metadata names, None outside the router."""
    for name in _metadata_keys(None):
        metadata = kwargs.get(name)
        if isinstance(metadata, Mapping) and isinstance(metadata.get("model_info"), Mapping):
            group = metadata.get("deployment_model_name") or metadata.get("model_group")
            if isinstance(group, str) and group:
                return group
    return None


class KnownTeams:
    """Teams as the proxy authenticated them (a ``UserAPIKeyAuth``, which no JSON body can forge): each one's alias and
    metadata by its id, the last ``size`` seen. For the routes whose attempts carry a team's id alone
    (``/queue/chat/completions``: LiteLLM writes no alias there, and a team alias or metadata in that metadata would
    be the client's), so that a policy matched by the team's alias applies there too (an eleventh attack review: a
    team's 1,500-token cap did not); a team seen on no other route since the proxy started is known by its id only."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._teams: OrderedDict[str, tuple[str | None, Mapping[str, Any] | None]] = OrderedDict()

    def note(self, auth: Any) -> None:
        if type(auth).__name__ != "UserAPIKeyAuth":  # the object the proxy's authentication made, nothing else
            return
        team_id, alias, metadata = (getattr(auth, name, None) for name in ("team_id", "team_alias", "team_metadata"))
        if isinstance(team_id, str) and team_id:
            self._teams[team_id] = (alias if isinstance(alias, str) else None,
                                    metadata if isinstance(metadata, Mapping) else None)
            self._teams.move_to_end(team_id)
            while len(self._teams) > self.size:
                self._teams.popitem(last=False)

    def get(self, team_id: Any) -> tuple[str | None, Mapping[str, Any] | None]:
        return self._teams.get(team_id, (None, None)) if isinstance(team_id, str) else (None, None)


def _caller(kwargs: Mapping[str, Any], key: str | None = None, teams: KnownTeams | None = None) -> Any:
    """The caller as the proxy authenticated it: its ``UserAPIKeyAuth`` in the attempt's metadata, an object no JSON
    body can forge, else the key fields the proxy itself writes there, with the team's alias and metadata as the proxy
    authenticated the team elsewhere (``teams``); the router's own key first (``key``: a chat body's
    ``litellm_metadata``, read first, named another team, whose cap did not apply), the other only without them."""
    for name in _metadata_keys(key):
        metadata = kwargs.get(name)
        if not isinstance(metadata, Mapping):
            continue
        auth = metadata.get("user_api_key_auth")
        if auth is not None and not isinstance(auth, Mapping) and hasattr(auth, "team_id"):
            return auth
        if "user_api_key_hash" in metadata or "user_api_key_team_id" in metadata:
            team_id = metadata.get("user_api_key_team_id")
            team_alias, team_metadata = teams.get(team_id) if teams is not None else (None, None)
            return SimpleNamespace(team_id=team_id, team_alias=team_alias, key_alias=metadata.get("user_api_key_alias"),
                                   token=metadata.get("user_api_key_hash"), team_metadata=team_metadata,
                                   metadata=metadata.get("user_api_key_metadata"))
    return None


def note_a2a_caller(call_type: Any, user_api_key_dict: Any) -> None:
    """From the pre-call hook: the caller of an A2A request (``asend_message``), for the calls its bridge makes."""
    if call_type == A2A_CALL_TYPE and _A2A_ROUTE_MATCH(_ROUTE.get() or ""):
        _A2A_CALLER.set(user_api_key_dict)


def as_lists(kwargs: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """``kwargs``, or a copy whose messages and message contents held as tuples are lists: LiteLLM's own calls may
    build them so (1.103's tool loop for MCP on ``/v1/messages`` writes each tool result message's content as a tuple),
    which no JSON body holds and the shapes read as a malformed request (every such loop was refused)."""
    changed: dict[str, Any] = {}
    for name in fields:
        messages = kwargs.get(name)
        if not isinstance(messages, list | tuple):
            continue
        fixed = [{**m, "content": list(m["content"])} if isinstance(m, dict) and type(m.get("content")) is tuple else m
                 for m in messages]
        if type(messages) is tuple or any(a is not b for a, b in zip(fixed, messages, strict=True)):
            changed[name] = fixed
    return {**kwargs, **changed} if changed else kwargs


async def undecided_attempt(plugin: Any, kwargs: dict[str, Any], call_type: Any, error_type: Any,
                            own: Callable[[], Mapping[str, Any]] = dict) -> dict[str, Any] | None:
    """A router attempt no pre-call decision covers: decided now (the kwargs to send, or None to send them as
    they are; a refusal raises ``error_type``). ``own``: the ``litellm_params`` the operator set on the attempt's
    deployment, whose prompt parameters are the operator's, not the client's (``bounds.operator_prompt_parameters``)."""
    if call_type == ROUTER_PASS_THROUGH:
        return await _pass_through_attempt(plugin, kwargs, error_type)
    shape, key = SHAPES.for_call_type(call_type), router_metadata_key(call_type)
    routed = attempt_deployment(plugin, kwargs, key) if shape is not None else None
    group, model, caller = routed[0] if routed else None, kwargs.get("model"), _caller(kwargs, key, plugin.teams)
    if group is None and isinstance(model, str) and model and _A2A_ROUTE_MATCH(_ROUTE.get() or ""):
        # an agent's model, called by the A2A completion bridge outside the router, for the A2A request's caller
        group, caller = model, caller or _A2A_CALLER.get()
    if shape is None or group is None or not isinstance(kwargs.get("litellm_call_id"), str):
        return None  # not a router attempt of a shape we read (health checks, LiteLLM's own calls)
    operator = operator_prompt_parameters(kwargs, own)
    probe = {**as_lists({k: v for k, v in kwargs.items() if k not in operator}, shape.content_fields), "model": group}
    forwarded = await plugin.async_pre_call_hook(caller, None, probe, call_type)
    if _as_it_is(forwarded, probe):
        return None
    return {**forwarded, **operator, "model": kwargs.get("model")}


def _as_it_is(forwarded: Any, probe: Mapping[str, Any]) -> bool:
    """Whether the pre-call hook forwarded ``probe`` as it is (a copy of it with the gateway's parameters set, is: an
    inner call may carry them already, from its outer request)."""
    return not isinstance(forwarded, dict) or all(forwarded.get(key) is value for key, value in probe.items()
                                                  if key not in _GATEWAY_KEYS)


_GATEWAY_KEYS = frozenset(gateway_parameters())


async def _pass_through_attempt(plugin: Any, kwargs: dict[str, Any], error_type: Any) -> dict[str, Any] | None:
    field = "json" if isinstance(kwargs.get("json"), dict) else "data"
    body = kwargs.get(field)
    if not isinstance(body, dict):
        return None  # no JSON body: a GET, a file upload, raw content
    endpoint = sent_path(str(kwargs.get("endpoint") or "")).rstrip("/")
    shape = _path_shape(endpoint, body)
    if shape is None:
        last = endpoint.rsplit("/", 1)[-1]
        if last.rsplit(":", 1)[-1] not in NOT_GENERATING and plugin.settings.unknown_routes == "block":
            raise error_type(unread_route_error(f"pass-through to {endpoint.lstrip('/')}"))
        return None
    group = _routed_group(kwargs) or kwargs.get("model")
    headers = kwargs.get("request_headers")
    probe = {**body, "model": group, "litellm_call_id": kwargs.get("litellm_call_id"),
             "proxy_server_request": {"headers": dict(headers) if isinstance(headers, Mapping) else {}}}
    forwarded = await plugin.async_pre_call_hook(_caller(kwargs), None, probe, _CALL_TYPES[shape.name])
    if _as_it_is(forwarded, probe):
        return None
    sent = {k: v for k, v in forwarded.items() if k in body or k in shape.content_fields}
    for own in ("model", shape.metadata_key):  # the client's own, never the probe's
        sent.pop(own, None)
        if own in body:
            sent[own] = body[own]
    return {**kwargs, field: sent}
