"""Every route of LiteLLM's proxy app is classified (``proxy.routes``), and ``proxy.route_guard`` enforces the
parts of the table the pre-call hook alone cannot see.

The walk runs in a subprocess: it imports ``litellm.proxy.proxy_server``, loads every lazily-included feature
router the way the proxy does on a first request (``_force_load``), and lists each route found through
FastAPI's included routers (``app_hooks._routes``), with the call types its endpoint's code routes
(``route_type=``, what LiteLLM hands the pre-call hook as ``call_type``).
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import subprocess
import sys
from types import SimpleNamespace

import httpx
import litellm
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.policy.settings import load_settings
from budget_hook.proxy import route_guard
from budget_hook.proxy.attempts import bridge_refusal
from budget_hook.proxy.errors import ErrorSpec
from budget_hook.proxy.hook import BudgetHookHTTPError, BudgetHookPlugin, _overflow_error
from budget_hook.proxy.routes import BUDGETED, NO_MODEL, REFUSED, classify
from budget_hook.shapes import PASS_THROUGH_CALL_TYPE, SHAPES, UNREAD_MODEL_CALL_TYPES

WALK = r'''
import asyncio, importlib, inspect, json, re, sys
from litellm.proxy import proxy_server
from budget_hook.proxy.app_hooks import _routes
from budget_hook.proxy.routes import route_key
try:
    lazy = importlib.import_module("litellm.proxy._lazy_features")
except ImportError:  # a LiteLLM without lazily-loaded features: every router is included at import
    lazy = None
if lazy is not None:
    async def load():
        for feature in lazy.LAZY_FEATURES:
            await lazy._force_load(proxy_server.app, feature)
    asyncio.run(load())
    failed = [f.name for f in lazy.LAZY_FEATURES if f.module_path not in proxy_server.app.state.lazy_loaded]
    assert not failed, failed
NAMED = re.compile(r'route_type\s*=\s*(?:"(\w+)"|CallTypes\.(\w+)\.value)')
rows = {}
for route in _routes(proxy_server.app.routes):
    endpoint = getattr(route, "endpoint", None)
    try:
        source = inspect.getsource(inspect.unwrap(endpoint)) if endpoint else ""
        found = [a or b for a, b in NAMED.findall(source)]
    except (OSError, TypeError):
        found = []
    row = rows.setdefault(route_key(route), {"endpoints": [], "call_types": []})
    row["endpoints"].append(f"{getattr(endpoint, '__module__', None)}.{getattr(endpoint, '__name__', None)}")
    row["call_types"] = sorted(set(row["call_types"]) | set(found))
json.dump(rows, sys.stdout)
'''


@pytest.fixture(scope="module")
def app_routes() -> dict[str, dict]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    done = subprocess.run([sys.executable, "-c", WALK], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_route_of_the_proxy_app_is_classified(app_routes):
    unclassified = {key: row["endpoints"][0] for key, row in app_routes.items() if classify(key) is None}
    assert not unclassified, (
        "routes of LiteLLM's proxy app that budget_hook's table does not classify; add each to ROUTES in "
        "src/budget_hook/proxy/routes.py (budgeted, refused, exception with its reason, or no_model) after "
        f"reading what its endpoint does: {json.dumps(unclassified, indent=1)}")


def test_the_walk_reaches_lazily_loaded_routers_websockets_and_mounts(app_routes):
    for key in ("/v1/messages", "/vllm/{endpoint:path}", "/gemini/{endpoint:path}", "/v1/responses/compact",
                "WS /v1/realtime", "WS /v1/responses", "MOUNT /mcp", "/queue/chat/completions"):
        assert key in app_routes, key


def test_the_call_types_a_route_names_agree_with_its_class(app_routes):
    """A route whose code names a call type of a shape is budgeted as that shape; one naming a call type no
    shape reads (but that reaches a model) is refused; a refused route names no other."""
    wrong = {}
    for key, row in app_routes.items():
        entry = classify(key)
        if entry is None:
            continue
        for call_type in row["call_types"]:
            shape = SHAPES.for_call_type(call_type)
            if shape is not None and (entry.kind != BUDGETED or entry.shape not in (None, shape.name)):
                wrong[key] = f"{call_type} is read as {shape.name}, the table says {entry.kind} {entry.shape}"
            if call_type in UNREAD_MODEL_CALL_TYPES and entry.kind != REFUSED:
                wrong[key] = f"{call_type} is refused by the hook, the table says {entry.kind}"
        if entry.kind == REFUSED and row["call_types"] and not set(row["call_types"]) & UNREAD_MODEL_CALL_TYPES:
            wrong[key] = f"refused in the table, but its call types {row['call_types']} are not"
    assert not wrong, wrong


def test_every_route_a_shape_declares_is_budgeted_as_that_shape():
    for shape in SHAPES.shapes:
        for route in shape.routes:
            entry = classify(route)
            assert entry is not None and entry.kind == BUDGETED and entry.shape == shape.name, (route, entry)


def test_the_first_match_wins_over_the_catch_all_paths():
    assert classify("/openai/v1/responses/compact").shape == "responses"
    assert classify("/openai/v1/responses/{response_id}").kind == NO_MODEL
    assert classify("/openai/v1/realtime/calls").kind == REFUSED
    assert classify("/openai/{endpoint:path}").kind == BUDGETED
    assert classify("WS /openai/{endpoint:path}").kind == REFUSED
    assert classify("/not/a/litellm/route") is None


# --- route_guard -------------------------------------------------------------------------------------------


def test_the_model_a_pass_through_names_in_its_url():
    assert route_guard.model_in_path("/gemini/v1beta/models/gemini-2.5-flash:generateContent") == "gemini/gemini-2.5-flash"
    assert route_guard.model_in_path("/gemini/v1/models/x:streamGenerateContent") == "gemini/x"
    assert route_guard.model_in_path("/gemini/v1beta/models/x:countTokens") is None
    vertex = "/vertex_ai/v1/projects/p/locations/l/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
    assert route_guard.model_in_path(vertex) == "vertex_ai/claude-sonnet-4-5@20250929"
    assert route_guard.model_in_path("/azure/openai/deployments/gpt-4o/chat/completions") == "azure/gpt-4o"
    assert route_guard.model_in_path("/anthropic/v1/messages") is None and route_guard.model_in_path(None) is None


def test_a_vertex_pass_through_model_is_read_as_litellm_reads_it_and_a_router_group_wins():
    """LiteLLM reads Vertex's model from the first ``/models/`` to the first colon (slashes included), and serves a
    name the router has a pass-through deployment for from that deployment: then the name is the group's."""
    read = "/vertex_ai/v1/projects/p/locations/l/publishers/google/models/gcp/google/gemini-2.5-flash:generateContent"
    assert route_guard.model_in_path(read) == "vertex_ai/gcp/google/gemini-2.5-flash"
    assert route_guard.model_in_path(read, lambda name: name == "gcp/google/gemini-2.5-flash") \
        == "gcp/google/gemini-2.5-flash"
    assert route_guard.model_in_path("/vertex-ai/v1/x/models/a/models/b:streamGenerateContent") == "vertex_ai/a/models/b"
    assert route_guard.model_in_path("/vertex_ai/v1/x/models/g:countTokens", lambda name: True) is None
    assert route_guard.model_in_path("/vertex_ai/models/g:generateContent") is None  # LiteLLM reads none either
    gemini = "/gemini/v1beta/models/g:generateContent"
    assert route_guard.model_in_path(gemini, lambda name: True) == "gemini/g"  # Gemini's route has no router lookup


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "models", ".", "..", "", "x?y", "z#w", "q.", ".r"]), max_size=8))
def test_a_pass_through_path_is_read_as_litellm_sends_it(segments):
    """The proxy decodes ``%3F``, ``%23`` and ``%2E`` before routing; LiteLLM's upstream URL is cut at the first
    ``?`` or ``#`` (httpx) and joined to the provider's with ``posixpath.normpath``: the route is read the same way,
    and so is the path decoded once more, as LiteLLM's handlers decode it (``httpx.URL(endpoint).path``)."""
    path = "/" + "/".join(segments)
    assert route_guard.sent_path(path) == "/" + posixpath.normpath(httpx.URL("http://h" + path).path).lstrip("/")
    twice = path.replace("/", "%2F").replace(".", "%2E").replace("?", "%3F").replace("#", "%23")
    assert route_guard.sent_path("/" + twice) == route_guard.sent_path("/" + path)


def test_a_pass_through_url_names_the_model_it_reaches():
    gemini = "/gemini/v1beta/models/learnlm-1.5-pro-experimental:generateContent"
    for hidden in ("?/models/gemini-2.5-pro:generateContent", "#", "/.", "#/models/gemini-2.5-pro:generateContent"):
        key = route_guard.sent_path(gemini + hidden)
        assert route_guard.model_in_path(key) == "gemini/learnlm-1.5-pro-experimental", hidden
    assert route_guard.model_in_path("/gemini/v1beta/tunedModels/t:generateContent") == "gemini/tunedModels/t"
    assert route_guard.model_in_path("/vertex_ai/v1/projects/p/locations/l/endpoints/123:streamGenerateContent",
                                     lambda name: True) == "vertex_ai/endpoints/123"  # no router lookup for those
    assert route_guard.endpoint_shape("v1/chat/completions#", {"messages": []}).name == "chat"
    assert route_guard.endpoint_shape("v1/chat/completions/.", {"messages": []}).name == "chat"
    azure = "/azure/openai/deployments/gpt-35-turbo"
    for twice in ("/chat/completions%2F.", "/chat/completions%2F%2E", "%2Fchat%2Fcompletions", "//chat/completions/"):
        assert route_guard.model_in_path(route_guard.sent_path(azure + twice)) == "azure/gpt-35-turbo", twice


@pytest.mark.parametrize(("route", "body_model", "expected"), [
    ("/openai/v1/chat/completions", "gpt-3.5-turbo", ("gpt-3.5-turbo", "openai/gpt-3.5-turbo")),
    ("/anthropic/v1/messages", "claude-sonnet-4-5", ("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5")),
    ("/openrouter/v1/chat/completions", "openrouter/x", ("openrouter/x", "openrouter/x")),
    ("/my-own-endpoint/chat", "gpt-4o", ("gpt-4o", "gpt-4o")),  # an operator's pass-through: the name as written
    ("/gemini/v1beta/tunedModels/t:generateContent", None, ("gemini/tunedModels/t", "gemini/tunedModels/t")),
    ("/gemini/v1beta/cachedContents:generateContent", None, ("gemini/unnamed-model", "gemini/unnamed-model")),
    ("/vertex_ai/v1/x/models/group:generateContent", "gpt-4.1", ("group", None)),  # the router's group: ask it
])
def test_a_pass_through_is_budgeted_for_the_provider_s_own_model(route, body_model, expected):
    """Never a router group's or alias's window for the provider's own model of that name; never unchecked."""
    shape = SHAPES.get("chat")
    found = run_in_route(route, lambda: route_guard.pass_through_model(PASS_THROUGH_CALL_TYPE, shape, body_model,
                                                                       lambda name: name == "group"))
    assert found == expected
    assert route_guard.pass_through_model("acompletion", shape, body_model) is None
    assert run_in_route(route, lambda: route_guard.pass_through_model(PASS_THROUGH_CALL_TYPE, None, "m")) is None


def test_a_router_model_pass_through_in_an_unread_format_passes_only_where_nothing_is_generated():
    body = {"model": "vllm-small", "text": "word " * 6000}
    for endpoint in ("generate", "inference/v1/generate", "generate_stream", "v1/chat/completions#", "custom"):
        with pytest.raises(BudgetHookHTTPError) as caught:
            attempt(make_plugin(), pass_through_attempt(body, endpoint=endpoint))
        assert caught.value.error_code == "route_not_budgeted", endpoint
    for endpoint in ("tokenize", "v1/models", "health", "v1beta/models/m:countTokens", "infer", "rerank",
                     "v1/moderations", "v1/images/generations", "v1/audio/speech", "v1/files", "v1/load_lora_adapter"):
        assert attempt(make_plugin(), pass_through_attempt(body, endpoint=endpoint)) is None, endpoint
    assert attempt(make_plugin(unknown_routes="pass"), pass_through_attempt(body, endpoint="generate")) is None


def test_a_router_model_pass_through_with_an_encoded_mark_is_read_at_its_real_endpoint():
    body = {"model": "vllm-small", "messages": long_messages()}
    for endpoint in ("v1/chat/completions#", "v1/chat/completions/.", "v1/x/../chat/completions"):
        out = attempt(make_plugin(), pass_through_attempt(body, endpoint=endpoint, call_id=f"pt-{endpoint}"))
        assert len(out["json"]["messages"]) < len(body["messages"]), endpoint


def test_a_group_serves_vertex_pass_throughs_only_with_a_pass_through_deployment():
    from budget_hook.proxy.windows import serves_pass_through

    class Router:
        def get_model_list(self, model_name):
            return {"g": [{"litellm_params": {"model": "vertex_ai/x", "use_in_pass_through": True}}],
                    "h": [{"litellm_params": {"model": "vertex_ai/x"}}]}.get(model_name, [])
    assert serves_pass_through(Router(), "g") and not serves_pass_through(Router(), "h")
    assert not serves_pass_through(Router(), "nope") and not serves_pass_through(None, "g")
    assert not serves_pass_through(Router(), "g" * 100_000)


def test_a_pass_through_body_is_read_by_the_endpoint_it_goes_to():
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    anthropic = {**chat, "anthropic_version": "bedrock-2023-05-31", "max_tokens": 10}
    assert route_guard.endpoint_shape("v1/chat/completions", chat).name == "chat"
    assert route_guard.endpoint_shape("openai/deployments/x/chat/completions", chat).name == "chat"
    assert route_guard.endpoint_shape("v1/messages", chat).name == "anthropic"
    assert route_guard.endpoint_shape("model/m/invoke", anthropic).name == "anthropic"
    assert route_guard.endpoint_shape("model/m/invoke", {"inputText": "hi"}) is None  # Titan's own format
    assert route_guard.endpoint_shape("model/m/converse", {**chat, "system": [{"text": "s"}]}) is None
    assert route_guard.endpoint_shape("v1/responses/compact", {"input": "hi"}).name == "responses"
    assert route_guard.endpoint_shape("tokenize", chat) is None


def test_a_streamed_responses_block_is_the_api_s_failure_event_but_a_compaction_s_is_a_400():
    responses, chat = SHAPES.get("responses"), SHAPES.get("chat")
    assert route_guard.streams_responses(responses, {"stream": True}, "aresponses")
    assert route_guard.streams_responses(responses, {"stream": True}, PASS_THROUGH_CALL_TYPE)
    assert not route_guard.streams_responses(responses, {"stream": True}, "acompact_responses")
    assert not route_guard.streams_responses(responses, {}, "aresponses")
    assert not route_guard.streams_responses(chat, {"stream": True}, "acompletion")

def run_in_route(key, work):
    token = route_guard._ROUTE.set(key)
    try:
        return work()
    finally:
        route_guard._ROUTE.reset(token)


def test_refused_calls_and_routes():
    for call_type in ("acreate_interaction", "_arealtime", "arealtime_calls", "acreate_realtime_client_secret"):
        assert route_guard.refused_call(call_type)
    assert run_in_route("WS /vertex_ai/live", lambda: route_guard.refused_call(PASS_THROUGH_CALL_TYPE))
    assert not run_in_route("/gemini/v1beta/models/m:generateContent",
                            lambda: route_guard.refused_call(PASS_THROUGH_CALL_TYPE))
    assert not route_guard.refused_call(PASS_THROUGH_CALL_TYPE) and not route_guard.refused_call("acompletion")


def test_the_route_context_layer_names_the_request_for_the_hooks():
    seen = []

    async def inner(scope, receive, send):
        seen.append(route_guard.current_route())

    app = SimpleNamespace(middleware_stack=inner)
    assert route_guard.install_path_context(app) and route_guard.install_path_context(app)  # once
    asyncio.run(app.middleware_stack({"type": "http", "path": "/api/gemini/x", "root_path": "/api"}, None, None))
    asyncio.run(app.middleware_stack({"type": "websocket", "path": "/v1/realtime"}, None, None))
    asyncio.run(app.middleware_stack({"type": "lifespan"}, None, None))
    assert seen == ["/gemini/x", "WS /v1/realtime", None] and route_guard.current_route() is None
    later = SimpleNamespace(middleware_stack=None, build_middleware_stack=lambda: inner)
    assert route_guard.install_path_context(later)
    assert isinstance(later.build_middleware_stack(), route_guard._RouteContext)


def make_plugin(window: int = 4000, **settings) -> BudgetHookPlugin:
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False, **settings}))
    plugin.model_limits = lambda group: ModelLimits(window, "test", "gpt-4o")  # type: ignore[method-assign]
    return plugin


def long_messages(turns: int = 12, words: int = 80) -> list[dict]:
    messages = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        messages += [{"role": "user", "content": f"q{turn} " + "lorem ipsum " * words},
                     {"role": "assistant", "content": f"a{turn} " + "dolor sit " * words}]
    return [*messages, {"role": "user", "content": "last question"}]


def pass_through_attempt(body, endpoint="v1/chat/completions", user=None, call_id="pt-1"):
    """What the router hands the deployment hook for ``llm_router.allm_passthrough_route``."""
    return {"model": "hosted_vllm/backend", "method": "POST", "endpoint": endpoint, "json": body, "data": None,
            "request_headers": {"content-type": "application/json"}, "litellm_call_id": call_id,
            "litellm_metadata": {"model_info": {"id": "dep-1"}, "model_group": "vllm-small",
                                 "user_api_key_auth": user or UserAPIKeyAuth(api_key="k")}}


def attempt(plugin, kwargs, call_type="allm_passthrough_route"):
    return asyncio.run(plugin.async_pre_call_deployment_hook(kwargs, call_type))


def test_a_router_model_pass_through_attempt_is_trimmed_in_its_own_body():
    plugin = make_plugin()
    body = {"model": "vllm-small", "messages": long_messages(), "temperature": 0.2}
    kwargs = pass_through_attempt(body)
    out = attempt(plugin, kwargs)
    sent = out["json"]
    assert sent is not body and body["messages"] == long_messages()  # the client's body is never mutated
    assert len(sent["messages"]) < len(body["messages"]) and sent["messages"][-1] == body["messages"][-1]
    assert sent["model"] == "vllm-small" and sent["temperature"] == 0.2 and set(sent) == set(body)
    assert TokenCounter.for_model("gpt-4o").count_request(sent).total <= 4000
    assert out["litellm_metadata"] is kwargs["litellm_metadata"] and out["endpoint"] == "v1/chat/completions"
    assert plugin.records.find("pt-1").action == "trimmed"
    fits = {"model": "vllm-small", "messages": [{"role": "user", "content": "hi"}]}
    assert attempt(plugin, pass_through_attempt(fits, call_id="pt-2")) is None  # forwarded as it is


def test_a_router_model_pass_through_attempt_that_cannot_fit_is_refused():
    body = {"model": "vllm-small", "messages": [{"role": "user", "content": "word " * 6000}]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        attempt(make_plugin(), pass_through_attempt(body))
    assert caught.value.status_code == 400 and caught.value.error_code == "context_length_exceeded"


def test_a_pass_through_attempt_applies_the_caller_s_team_policy():
    plugin = make_plugin(teams={"team-by-id": {"max_input_tokens": 1000}})
    body = {"model": "vllm-small", "messages": long_messages(turns=6, words=40)}
    assert attempt(plugin, pass_through_attempt(body, call_id="open")) is None  # fits 4000
    out = attempt(plugin, pass_through_attempt(body, user=UserAPIKeyAuth(api_key="k", team_id="team-by-id")))
    assert TokenCounter.for_model("gpt-4o").count_request(out["json"]).total <= 1000


def test_a_bedrock_invoke_in_anthropic_s_format_is_trimmed_in_the_body_the_router_signs():
    """``/bedrock/model/{id}/invoke`` with a router model hands the body over as ``data``."""
    messages = [m for m in long_messages() if m["role"] != "system"]
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 200, "system": "be brief", "messages": messages}
    kwargs = {**pass_through_attempt(body, endpoint="/model/claude-group/invoke"), "json": None, "data": body}
    out = attempt(make_plugin(), kwargs)
    assert out["json"] is None and len(out["data"]["messages"]) < len(messages)
    assert out["data"]["anthropic_version"] == "bedrock-2023-05-31" and out["data"]["system"] == "be brief"

def test_an_unreadable_pass_through_to_a_generation_endpoint_is_refused_unless_passed():
    converse = {"messages": [{"role": "user", "content": [{"text": "hi"}]}], "system": [{"text": "s"}]}
    with pytest.raises(BudgetHookHTTPError) as caught:
        attempt(make_plugin(), pass_through_attempt(converse, endpoint="model/m/converse"))
    assert caught.value.error_code == "route_not_budgeted"
    assert attempt(make_plugin(unknown_routes="pass"), pass_through_attempt(converse, endpoint="model/m/converse")) is None
    assert attempt(make_plugin(), pass_through_attempt({"model": "m", "prompt": "x"}, endpoint="tokenize")) is None
    assert attempt(make_plugin(), {**pass_through_attempt({}), "json": None, "data": None}) is None  # a GET


def test_a_router_attempt_no_pre_call_decision_covers_is_decided_for_its_group():
    """LiteLLM's priority queue and RAG query call the router without the pre-call hook."""
    plugin = make_plugin()
    kwargs = {"model": "openai/backend", "messages": long_messages(), "litellm_call_id": "queued",
              "metadata": {"model_info": {"id": "dep-1"}, "model_group": "small", "user_api_key_hash": "h"}}
    out = attempt(plugin, kwargs, "acompletion")
    assert out["model"] == "openai/backend" and len(out["messages"]) < len(kwargs["messages"])
    assert out["metadata"]["model_info"] == {"id": "dep-1"} and out["metadata"]["budget_hook"]["action"] == "trimmed"
    outside = {"model": "openai/x", "messages": long_messages(), "litellm_call_id": "health"}
    assert attempt(plugin, outside, "acompletion") is None  # not a router attempt: LiteLLM's own call


def test_the_a2a_completion_bridge_is_decided_against_its_agent_model_s_window():
    """LiteLLM's A2A completion bridge calls ``litellm.acompletion`` for an agent outside the router (no group, no
    deployment in the call): 9,021 tokens reached a 4k model (a review). On an A2A route the call is decided
    against its model's own window, as for a group of that name; the same call elsewhere is LiteLLM's own."""
    plugin = make_plugin()
    plugin.model_limits = lambda group: ModelLimits(4000 if group == "openai/agent-model" else 100_000, "test",
                                                    "gpt-4o")
    kwargs = {"model": "openai/agent-model", "messages": [{"role": "user", "content": "word " * 9000}],
              "litellm_call_id": "a2a-call", "api_base": "http://agent"}
    for route in ("/a2a/my-agent/message/send", "/v1/a2a/my-agent/message/send", "/a2a/my-agent"):
        token = route_guard._ROUTE.set(route)
        try:
            with pytest.raises(litellm.ContextWindowExceededError, match="maximum context length is 4000 tokens"):
                attempt(plugin, {**kwargs, "litellm_call_id": f"a2a-{route}"}, "acompletion")
            fits = {**kwargs, "litellm_call_id": f"a2a-fits-{route}", "messages": long_messages(turns=2)}
            assert attempt(plugin, fits, "acompletion") is None
        finally:
            route_guard._ROUTE.reset(token)
    for route in (None, "/v1/a2a/discover", "/health", "/a2a/my-agent/.well-known/agent.json"):
        token = route_guard._ROUTE.set(route)
        try:
            assert attempt(plugin, {**kwargs, "litellm_call_id": f"other-{route}"}, "acompletion") is None
        finally:
            route_guard._ROUTE.reset(token)
    assert classify("/a2a/{agent_id}/message/send").kind == BUDGETED
    assert classify("/a2a/{agent_id}/.well-known/agent.json").kind != BUDGETED


def test_a_refusal_of_the_a2a_bridge_s_call_is_the_client_error_its_endpoint_answers_with_a_400():
    """LiteLLM's A2A endpoint answers a ``BadRequestError`` as HTTP 400 (JSON-RPC -32602) and any other exception as
    an internal error, HTTP 500: a block of the bridge's call was a 500. On an A2A route a refusal of the plugin's is
    LiteLLM's context-window error (an overflow) or its bad-request error, marked as the plugin's (it teaches
    nothing); the same refusal elsewhere, and an internal failure of ours (5xx), as they were."""
    plugin = make_plugin()
    kwargs = {"model": "openai/agent-model", "messages": [{"role": "user", "content": "word " * 9000}],
              "litellm_call_id": "a2a-bridge-error", "api_base": "http://agent"}
    token = route_guard._ROUTE.set("/a2a/my-agent/message/send")
    try:
        with pytest.raises(litellm.ContextWindowExceededError) as raised:
            attempt(plugin, kwargs, "acompletion")
        assert raised.value.llm_provider == "budget_hook" and raised.value.status_code == 400
        assert "budget_hook blocked this request (context_length_exceeded)" in raised.value.message
        refused = BudgetHookHTTPError(ErrorSpec(400, "prompt_id: not here", "invalid_request_error", "invalid_request"))
        error = bridge_refusal(refused, kwargs, _overflow_error)
        assert type(error) is litellm.BadRequestError and "prompt_id: not here" in error.message
        failed = BudgetHookHTTPError(ErrorSpec(503, "ours", "api_error", "budget_hook_internal_error"))
        assert bridge_refusal(failed, kwargs, _overflow_error) is failed
    finally:
        route_guard._ROUTE.reset(token)
    for route in (None, "/v1/chat/completions", "/v1/a2a/discover"):
        token = route_guard._ROUTE.set(route)
        try:
            assert bridge_refusal(refused, kwargs, _overflow_error) is refused
        finally:
            route_guard._ROUTE.reset(token)


def test_a_client_cannot_forge_the_caller_of_an_attempt():
    forged = {"user_api_key_auth": {"team_id": "team-by-id"}, "user_api_key_team_alias": "strict"}
    caller = route_guard._caller({"metadata": {**forged, "user_api_key_hash": "h", "user_api_key_team_id": None}})
    assert caller.team_id is None and caller.team_alias is None and caller.token == "h"
    assert route_guard._caller({"metadata": forged}) is None
