"""Every route of LiteLLM's proxy app, and what budget_hook does with it (pure: no LiteLLM import).

``ROUTES`` classifies each route of the pinned proxy (1.103.0, and 1.108.0 within the supported range), the
lazily-loaded feature routers included, as one of:

* ``budgeted``: counted and trimmed or blocked in its own shape (``shape``) before the provider sees it;
* ``refused``: reaches a model in a format budget_hook cannot read yet: HTTP 400 ``route_not_budgeted`` under
  ``unknown_routes: block`` (the default), forwarded unchecked under ``pass``;
* ``exception``: reaches a provider, but no model's context window the gateway could protect (the reason says
  why: a count, an image prompt, a job the provider runs on an uploaded file, a fixed health-check prompt...);
* ``no_model``: never sends model input anywhere (admin, keys, spend, health, UI, metadata of files and jobs).

A route is named by its path template; a WebSocket route as ``WS <path>``, a mounted app as ``MOUNT <path>``.
``classify(key)`` returns the first entry with a matching pattern (``*`` matches anything, ``/`` included).
``tests/test_routes.py`` walks the app's routes and fails on any route no entry classifies, so a LiteLLM
upgrade that adds a route cannot slip past the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

BUDGETED, REFUSED, EXCEPTION, NO_MODEL = "budgeted", "refused", "exception", "no_model"


@dataclass(frozen=True)
class RouteClass:
    kind: str
    #: budgeted: how; refused: the call type; exception and no_model: why
    what: str
    patterns: tuple[str, ...]
    #: budgeted: the shape the request is read as (a pass-through: the shape its body has)
    shape: str | None = None


def _b(shape: str | None, what: str, *patterns: str) -> RouteClass:
    return RouteClass(BUDGETED, what, patterns, shape)


def _r(what: str, *patterns: str) -> RouteClass:
    return RouteClass(REFUSED, what, patterns)


def _e(what: str, *patterns: str) -> RouteClass:
    return RouteClass(EXCEPTION, what, patterns)


def _n(what: str, *patterns: str) -> RouteClass:
    return RouteClass(NO_MODEL, what, patterns)


_OAI = ("", "/v1", "/openai/v1")
_PASS = "pass-through: the shape its body has; model from the body, else from the URL"
_PER_ATTEMPT = "per router attempt (async_pre_call_deployment_hook): the route skips the pre-call hook"

ROUTES: tuple[RouteClass, ...] = (
    # --- budgeted ----------------------------------------------------------------------------------------
    _b("chat", "acompletion", "/chat/completions", "/v1/chat/completions", "/engines/*/chat/completions",
       "/openai/deployments/*/chat/completions"),
    _b("chat", f"acompletion, {_PER_ATTEMPT} (LiteLLM's priority queue)", "/queue/chat/completions"),
    _b("chat", f"acompletion with the retrieved context, {_PER_ATTEMPT}", "/rag/query", "/v1/rag/query"),
    _b("chat", "acompletion (a stored prompt tried on a model)", "/prompts/test"),
    _b("chat", f"acompletion through the router, {_PER_ATTEMPT} (admin policy-template tools)",
       "/policy/templates/enrich", "/policy/templates/enrich/stream"),
    _b("chat", "acompletion of LiteLLM's A2A completion bridge (an agent with a custom_llm_provider), per call "
       "(async_pre_call_deployment_hook) against its model's own window; an agent at its own URL is its own server",
       "/a2a/{agent_id}", "/a2a/{agent_id}/message/send", "/v1/a2a/{agent_id}/message/send"),
    _b("completions", "atext_completion", "/completions", "/v1/completions", "/engines/*/completions",
       "/openai/deployments/*/completions"),
    _b("embeddings", "aembedding", "/embeddings", "/v1/embeddings", "/engines/*/embeddings",
       "/openai/deployments/*/embeddings"),
    _b("anthropic", "anthropic_messages", "/v1/messages", "/claude_code_gateway/v1/messages"),
    _b("responses", "aresponses", *(f"{p}/responses" for p in _OAI), "/cursor/chat/completions"),
    _b("responses", "acompact_responses: Responses-shaped input", *(f"{p}/responses/compact" for p in _OAI)),
    _b("gemini", "agenerate_content, agenerate_content_stream", "/v1beta/models/*:generateContent",
       "/v1beta/models/*:streamGenerateContent", "/models/*:generateContent", "/models/*:streamGenerateContent"),
    # --- refused under unknown_routes: block ---------------------------------------------------------------
    _r("_arealtime (realtime sessions over a WebSocket)", *(f"WS {p}/realtime" for p in _OAI),
       *(f"WS {p}/live/sessions" for p in _OAI)),
    _r("_aresponses_websocket", "WS /responses", "WS /v1/responses"),
    _r("arealtime_calls (WebRTC realtime session)", *(f"{p}/realtime/calls" for p in _OAI)),
    _r("acreate_realtime_client_secret (the client then talks to the model directly)",
       *(f"{p}/realtime/client_secrets" for p in _OAI)),
    _r("acreate_interaction (Gemini interactions)", "/interactions", "/v1beta/interactions"),
    _r("adecisions, asystemone", "/decisions", "/v1/decisions", "/systemone", "/v1/systemone",
       "/laya/v1/systemone", "/bespoke/v1/systemone"),
    _r("pass-through WebSocket relays of realtime and live sessions", "WS /vertex_ai/live", "WS /openai/*",
       "WS /openai_passthrough/*"),
    # --- exceptions: reach a provider, but no context window budget_hook could protect ----------------------
    _e("counts tokens and generates nothing: a count over the window is the answer asked for",
       "/v1/messages/count_tokens", "/claude_code_gateway/v1/messages/count_tokens",
       *(f"{p}/responses/input_tokens" for p in _OAI), "*:countTokens", "/utils/token_counter"),
    _e("image and video generation: a prompt limited by the provider per request, no conversation to trim",
       "/images/*", "/v1/images/*", "/openai/deployments/*/images/*", "/videos*", "/v1/videos*", "/fal_ai/*"),
    _e("audio: speech from text (a character limit the provider enforces) and speech to text",
       "/audio/*", "/v1/audio/*", "/assemblyai/*", "/eu.assemblyai/*", "/azure_speech/*", "/transcribe*",
       "WS /deepgram/*", *(f"{p}/realtime/transcription_sessions" for p in _OAI)),
    _e("classifiers, rerankers and OCR: per-input limits the provider enforces; nothing is generated",
       "/moderations", "/v1/moderations", "/rerank", "/v1/rerank", "/v2/rerank", "/ocr", "/v1/ocr",
       "/comprehendmedical*"),
    _e("jobs the provider runs on an uploaded file (each line checked against the window by the provider)",
       "/batches*", "/v1/batches*", "/*/v1/batches*", "/fine_tuning/*", "/v1/fine_tuning/*", "/v1/evals*"),
    _e("Assistants runs: the thread lives on the provider, which truncates it to the window itself",
       "/threads/*/runs", "/v1/threads/*/runs"),
    _e("agents (A2A: their cards) and tool servers: their own servers, not model deployments; what they ask of "
       "a model through this gateway is budgeted on that route (MCP sampling as chat)", "/a2a/*", "/v1/a2a/*",
       "/mcp*", "MOUNT /mcp", "/{mcp_server_name}/mcp", "/toolset/*", "/mcp-rest/*", "/tinyfish/*"),
    _e("retrieval: provider-side search and embeddings over stored chunks", "/vector_stores/*/search",
       "/v1/vector_stores/*/search", "/rag/ingest", "/v1/rag/ingest", "/search", "/search/{search_tool_name}",
       "/v1/search", "/v1/search/{search_tool_name}", "/vertex_ai/discovery/*", "/milvus/*"),
    _e("guardrail providers and tests: guardrails, not model deployments", "/apply_guardrail",
       "/guardrails/apply_guardrail", "/guardrails/test_custom_code", "/policies/test-pipeline",
       "/utils/test_policies_and_guardrails", "/policy/test", "/policy/templates/test"),
    _e("health checks and connection tests: LiteLLM's own fixed prompt, never client input", "/health",
       "/health/test_connection", "/search_tools/test_connection",
       "/coordination_redis/settings/test", "/config_overrides/*/test_connection"),
    _e("admin UI assistants calling a model outside the router with LiteLLM's own prompt around a short "
       "question (not a gateway model group)", "/usage/ai/chat", "/policy/templates/suggest"),
    # --- never sends model input ---------------------------------------------------------------------------
    _n("responses and interactions stored by the provider: read, cancel, delete",
       *(f"{p}/responses/*" for p in _OAI), "/interactions/*", "/v1beta/interactions/*"),
    _n("files, skills, containers, assistants, threads and vector stores: stored objects and their metadata",
       "/files*", "/v1/files*", "/*/v1/files*", "/v1/skills*", "/containers*", "/v1/containers*",
       "/assistants*", "/v1/assistants*", "/threads*", "/v1/threads*", "/vector_stores*",
       "/v1/vector_stores*", "/v1/indexes", "/vector_store/*", "/v1/vector_store/*", "/v1beta/agents*"),
    _n("model listings and information", "/models", "/v1/models", "/models/*", "/v1/models/*", "/model/*",
       "/v1/model/*", "/v2/model/*", "/model_group/*", "/model_hub*", "/model-insights*", "/cursor/models",
       "/cursor/v1/models", "/utils/*", "/routes", "/provider/budgets", "/cost/*", "/fallback*",
       "/router/*", "/adaptive_router/*", "/auto_router/*", "/reload/*", "/schedule/*"),
    _n("keys, users, teams, organizations, customers, budgets, access and spend",
       "/key/*", "/v2/key/*", "/user/*", "/v2/user/*", "/team/*", "/v2/team/*", "/organization/*",
       "/v2/organization/*", "/customer/*", "/end_user/*", "/budget/*", "/spend/*", "/global/*", "/tag/*",
       "/project/*", "/access_group*", "/v1/access_group*", "/v1/unified_access_group*", "/jwt/*",
       "/credentials*", "/invitation/*", "/onboarding/*", "/scim/*", "/management/*", "/agent/*",
       "/gateway/*", "/audit*", "/compliance/*", "/cloudzero/*", "/vantage/*", "/cost_optimization/*",
       "/add/allowed_ip", "/delete/allowed_ip", "/liteadmin/*", "/moyai/*", "/provider/*"),
    _n("agents, tools, workflows, memory, prompts, guardrails and policies: definitions and their logs",
       "/v1/agents*", "/v1/tool/*", "/v1/workflows/*", "/v1/memory*", "/prompts*", "/guardrails*",
       "/v2/guardrails/*", "/policies*", "/policy/*", "/search_tools*", "/search/tools", "/v1/search/tools",
       "/claude-code/*", "/api/plugins*", "/plugin-proxy/*", "/config/*", "/config_overrides/*",
       "/callbacks/*", "/email/*", "/cache/*", "/coordination_redis/*", "/alerting/*", "/get/*", "/update/*",
       "/upload/*", "/v1/a2a/discover"),
    _n("health, telemetry, logs and traces", "/health/*", "/active/callbacks", "/settings", "/test",
       "/debug/*", "/memory-usage-in-mem-cache*", "/otel-spans", "/telemetry/*", "/v1/traces*", "/lens*",
       "/v1/logs", "/v1/rust_control_plane/logs", "/api/event_logging/*", "/claude_code_gateway/v1/logs",
       "/claude_code_gateway/v1/metrics", "/claude_code_gateway/v1/traces", "/langfuse/*"),
    _n("login, SSO, OAuth and the UI", "/", "/login", "/v2/login", "/v3/login*", "/fallback/login",
       "/session/*", "/sso/*", "/.well-known/*", "/litellm/.well-known/*", "/oauth/*", "/authorize*",
       "/token", "/callback", "/register", "/revoke", "/introspect", "/*/authorize", "/*/register",
       "/*/token", "/claude_code_gateway/.well-known/*", "/claude_code_gateway/oauth/*",
       "/claude_code_gateway/managed/*", "/v1/mcp/*", "/public/*", "/get_favicon", "/get_image",
       "/get_logo_url", "/robots.txt", "/openapi.json", "/docs/*", "/redoc", "/lazy/warm/*", "MOUNT /ui",
       "MOUNT /swagger", "MOUNT /_next", "MOUNT /litellm-asset-prefix/_next", "/budget_hook/metrics"),
    # --- provider pass-throughs: last, so that the routes above win over their catch-all paths -----------
    _b(None, f"{_PASS}; a router model per attempt (allm_passthrough_route), an unreadable generation body "
       "refused", "/vllm/*", "/azure/*", "/azure_ai/*", "/bedrock/*", "/gigachat/*", "/nvidia_nim/*"),
    _b(None, _PASS, "/anthropic/*", "/openai/*", "/openai_passthrough/*", "/gemini/*", "/vertex_ai/*",
       "/vertex-ai/*", "/mistral/*", "/cohere/*", "/watsonx/*", "/openrouter/*", "/cursor/*", "/typesafe/*"),
)


def classify(key: str) -> RouteClass | None:
    """The entry for a route key (``/path``, ``WS /path``, ``MOUNT /path``), first match wins; None: unclassified."""
    return next((entry for entry in ROUTES if any(fnmatchcase(key, p) for p in entry.patterns)), None)


def route_key(route: object) -> str:
    """A FastAPI/starlette route's key: its path, ``WS <path>`` for a WebSocket route, ``MOUNT <path>``."""
    path = str(getattr(route, "path", ""))
    kind = type(route).__name__
    if "WebSocket" in kind:
        return f"WS {path}"
    if kind == "Mount" or (getattr(route, "app", None) is not None and not hasattr(route, "endpoint")):
        return f"MOUNT {path}"
    return path
