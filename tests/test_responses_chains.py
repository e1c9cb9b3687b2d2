"""Responses chains (proxy.chains) and a provider's overflow answered as a block (proxy.answers, outcomes).

Through the adapter called directly (tests/e2e/test_provider_overflow_e2e.py covers the same through a real proxy
and a provider that holds chains): a request naming ``previous_response_id`` is counted as the chain the gateway
saw + its new input, refused past the budget with a new-chain remedy, and an unknown id is said, not guessed.
"""

from __future__ import annotations

import asyncio
import base64
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litellm.proxy._types import ProxyException

from budget_hook.budget import ModelLimits
from budget_hook.learning import Overflow
from budget_hook.proxy import route_guard
from budget_hook.proxy.answers import overflow_answer, provider_overflow
from budget_hook.proxy.chains import Chain, ChainStore, chain_key
from budget_hook.proxy.hook import BudgetHookHTTPError
from budget_hook.proxy.records import GUARDRAIL_KEY
from budget_hook.shapes import SHAPES

from .conftest import as_it_is
from .test_proxy_hook import make_plugin, run_hook

RESPONSES = SHAPES.get("responses")


def response(response_id: str, input_tokens: int, output_tokens: int = 8, *, chat_terms: bool = False) -> dict:
    usage = {"prompt_tokens": input_tokens, "completion_tokens": output_tokens} if chat_terms else \
        {"input_tokens": input_tokens, "output_tokens": output_tokens}
    return {"id": response_id, "object": "response", "usage": usage}


def remember(plugin, obj) -> int | None:
    return asyncio.run(plugin.chains.remember(obj))


def continued(previous: str, words: int = 50, call_id: str = "c") -> dict:
    return {"model": "g", "input": "next " * words, "previous_response_id": previous, "max_output_tokens": 100,
            "litellm_call_id": call_id}


def test_the_chain_key_reads_litellm_s_wrappings_as_the_provider_s_id():
    inner = "litellm:custom_llm_provider:openai;model_id:abc;response_id:resp_provider1"
    encoded = "resp_" + base64.b64encode(inner.encode()).decode()
    assert chain_key(encoded) == "resp_provider1"
    assert chain_key(f"litellm_proxy:responses_api:response_id:{encoded};user_id:u;team_id:t") == "resp_provider1"
    assert chain_key("resp_plain_id") == "resp_plain_id"
    assert chain_key("") is None and chain_key(None) is None and chain_key("r" * 5000) is None


def test_a_request_continuing_a_seen_response_is_counted_with_its_chain():
    plugin = make_plugin(window=8000)
    assert remember(plugin, response("resp_1", 3000)) == 3008
    data = continued("resp_1")
    run_hook(plugin, data, call_type="aresponses")
    record = plugin.records.find("c")
    new_input = record.chain["new_input"]
    assert record.action == "pass" and record.chain == {"state": "known", "held": 3008, "new_input": new_input}
    assert 50 <= new_input < 100  # "next " * 50
    assert record.tokens_before == 3008 + new_input
    assert record.headers()["x-budget-tokens-before"] == str(3008 + new_input)
    assert data["litellm_metadata"]["budget_hook"]["chain"]["held"] == 3008
    assert "server_side_history_not_counted" not in record.notes  # counted now


def test_the_callback_s_chat_terms_are_read_too():
    plugin = make_plugin()
    assert remember(plugin, response("resp_2", 100, 5, chat_terms=True)) == 105
    assert remember(plugin, {"id": "chatcmpl-1", "object": "chat.completion", "usage": {"prompt_tokens": 5}}) is None
    assert remember(plugin, {"id": "resp_3", "object": "response", "usage": None}) is None


def test_a_chain_over_the_budget_is_refused_with_a_new_chain_remedy():
    plugin = make_plugin(window=8000)
    remember(plugin, response("resp_big", 7000))
    data = continued("resp_big", words=500)
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(plugin, data, call_type="aresponses")
    error = caught.value
    assert error.error_code == "context_length_exceeded" and error.param == "input"
    assert "start a new chain" in error.message and "maximum context length is 8000 tokens" in error.message
    record = plugin.records.find("c")
    assert record.action == "blocked" and record.block["facts"]["chain_tokens"] == 7008
    assert record.tokens_before == 7008 + record.chain["new_input"] > record.budget["budget"]
    # the block also rides as a guardrail result: LiteLLM 1.108 logs only that for a refused request
    guardrail = data["litellm_metadata"][GUARDRAIL_KEY][-1]
    assert guardrail["guardrail_status"] == "guardrail_intervened" and guardrail["budget_hook"]["action"] == "blocked"


def test_a_streamed_chain_block_is_a_response_failed_event():
    plugin = make_plugin(window=8000)
    remember(plugin, response("resp_s", 7900))
    with pytest.raises(BudgetHookHTTPError) as caught:
        run_hook(plugin, {**continued("resp_s"), "stream": True}, call_type="aresponses")
    text = caught.value.streamed("c")
    assert "response.failed" in text and '"code": "context_length_exceeded"' in text


def test_an_unknown_chain_is_said_and_counted_by_its_new_input_only():
    plugin = make_plugin(window=8000)
    data = continued("resp_secret_client_value")
    run_hook(plugin, data, call_type="aresponses")
    record = plugin.records.find("c")
    assert record.action == "pass" and record.chain == {"state": "unknown", "counted": "new input only"}
    assert record.tokens_before < 100 and "server_side_history_not_counted" in record.notes
    assert "resp_secret_client_value" not in json.dumps(record.as_dict())  # a client wrote it


def test_a_shadowed_chain_over_the_budget_would_block_and_is_forwarded_untouched():
    plugin = make_plugin(window=8000, mode="shadow")
    remember(plugin, response("resp_shadow", 7900))
    data = continued("resp_shadow")
    assert as_it_is(run_hook(plugin, data, call_type="aresponses"), data)
    assert plugin.records.find("c").action == "would_block"


def test_chains_are_shared_through_redis_when_the_learned_state_is():
    stored: dict[str, str] = {}

    class FakeRedis:
        async def get(self, key):
            return stored.get(key)

        async def set(self, key, value, ex=None):
            assert ex and ex > 0
            stored[key] = value

    async def run(what, operation):
        return await operation(FakeRedis())

    writer, reader = ChainStore(run=run), ChainStore(run=run)
    assert asyncio.run(writer.remember(response("resp_shared", 40))) == 48
    assert all(key.startswith("budget_hook:v1:chain:") and "resp_shared" not in key for key in stored)
    assert asyncio.run(reader.lookup(RESPONSES, {"previous_response_id": "resp_shared"})) == Chain(48)
    assert asyncio.run(reader.lookup(RESPONSES, {"previous_response_id": "resp_other"})) == Chain(None)
    # a chat request continues it too (LiteLLM forwards it to a deployment it bridges to the Responses API)
    assert asyncio.run(reader.lookup(SHAPES.get("chat"), {"previous_response_id": "resp_shared"})) == Chain(48)
    assert asyncio.run(reader.lookup(SHAPES.get("chat"), {"messages": []})) is None


def test_the_local_store_is_bounded_and_forgets_after_its_ttl():
    now = [0.0]
    store = ChainStore(entries=2, ttl_seconds=10, clock=lambda: now[0])
    for n in range(3):
        asyncio.run(store.remember(response(f"resp_{n}", 1)))
    assert asyncio.run(store.lookup(RESPONSES, {"previous_response_id": "resp_0"})) == Chain(None)
    assert asyncio.run(store.lookup(RESPONSES, {"previous_response_id": "resp_2"})) == Chain(9)
    now[0] = 11.0
    assert asyncio.run(store.lookup(RESPONSES, {"previous_response_id": "resp_2"})) == Chain(None)


@settings(max_examples=40, deadline=None)
@given(held=st.integers(min_value=0, max_value=20_000), words=st.integers(min_value=1, max_value=400))
def test_a_counted_chain_is_forwarded_only_when_chain_and_new_input_fit(held, words):
    """The invariant: with a known chain, a request is forwarded only if chain + new input is within the budget;
    otherwise it is refused (the chain is not ours to cut, and a lone user message is never cut), and the record
    counts both."""
    plugin = make_plugin(window=8000)
    remember(plugin, response("resp_p", held, 0))
    data = continued("resp_p", words=words)
    try:
        forwarded = run_hook(plugin, data, call_type="aresponses")
    except BudgetHookHTTPError:
        forwarded = None
    record = plugin.records.find("c")
    new_input = record.chain["new_input"]
    assert record.tokens_before == held + new_input
    fits = held + new_input <= record.budget["budget"]
    assert (record.action == "pass") == fits and as_it_is(forwarded, data) == fits
    assert record.action in ("pass", "blocked")


def test_a_provider_overflow_is_recognised_but_not_a_quoted_or_other_error():
    overflow = SimpleNamespace(status_code=400, message="This model's maximum context length is 4000 tokens. However, "
                               "you requested 6015 tokens (6015 in the messages, 0 in the completion).")
    assert provider_overflow(overflow) == Overflow(4000, 6015, "openai")
    responses = SimpleNamespace(status_code=400, message='OpenAIException - {"error": {"message": "Your input exceeds '
                                'the context window of this model.", "code": "context_length_exceeded"}}')
    assert provider_overflow(responses) == Overflow(None, None, "provider")
    classified = SimpleNamespace(status_code=400, message="litellm.ContextWindowExceededError: the model refused")
    assert provider_overflow(classified) == Overflow(None, None, "provider")
    quoted = SimpleNamespace(status_code=400, message="Invalid value: 'prompt is too long: 1 tokens > 10 maximum'")
    assert provider_overflow(quoted) is None
    assert provider_overflow(SimpleNamespace(status_code=500, message=overflow.message)) is None
    assert provider_overflow(SimpleNamespace(status_code=400, message=overflow.message, llm_provider="budget_hook")) \
        is None


@pytest.mark.parametrize(("shape", "lead"), [
    ("chat", "This model's maximum context length is 4000 tokens"),
    ("anthropic", "prompt is too long: 6015 tokens > 4000 maximum."),
    ("gemini", "The input token count (6015) exceeds the maximum number of tokens allowed (4000)."),
    ("responses", "This model's maximum context length is 4000 tokens"),
])
def test_a_provider_overflow_is_answered_in_the_shape_s_own_words(shape, lead):
    answer = overflow_answer(SHAPES.get(shape), Overflow(4000, 6015, "openai"), "g", {}, "acompletion")
    assert answer.spec.message.startswith(lead) and answer.spec.code == "context_length_exceeded"
    assert answer.spec.param == SHAPES.get(shape).param and answer.streamed is None
    streamed = overflow_answer(RESPONSES, Overflow(None, None, "provider"), "g",
                               {"stream": True, "previous_response_id": "x"}, "aresponses")
    assert streamed.streamed is not None and "start a new chain" in streamed.spec.message


def test_a_provider_overflow_on_a_forwarded_call_is_rendered_as_our_block():
    plugin = make_plugin(window=100_000)
    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "fwd"}
    run_hook(plugin, data)
    exception = SimpleNamespace(status_code=400, message="litellm.BadRequestError: OpenAIException - This model's "
                                "maximum context length is 4000 tokens. However, your request has 6015 input tokens.")
    asyncio.run(plugin.async_post_call_failure_hook(data, exception, None))
    assert exception.message.startswith("This model's maximum context length is 4000 tokens")  # /v1/messages reads it
    passed_on = ProxyException(message="litellm.ContextWindowExceededError: ...", type="invalid_request_error",
                               param=None, code=400, headers={"x-litellm-call-id": "fwd"})
    answer = plugin._restore_block(passed_on)
    assert isinstance(answer, BudgetHookHTTPError) and answer.to_dict()["code"] == "context_length_exceeded"
    assert answer.headers["x-budget-decision"] == "pass" and answer.headers["x-litellm-call-id"] == "fwd"
    # a blocked call (ours) and an unknown call are left as they are
    other = ProxyException(message="m", type="t", param=None, code=400, headers={"x-litellm-call-id": "unknown"})
    assert plugin._restore_block(other) is None
    asyncio.run(plugin.async_post_call_failure_hook({"litellm_call_id": "fwd"},
                                                    SimpleNamespace(status_code=429, message="rate"), None))


def test_a_request_quoting_overflow_wording_is_answered_as_an_overflow_without_the_provider_s_numbers():
    """Providers quote client keys and values in their 400s: a request quoting overflow wording teaches nothing,
    but a real overflow of it is still answered in our form, with no numbers read from the provider's text."""
    plugin = make_plugin(window=100_000)
    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "quoting",
            "x - This model's maximum context length is 10 tokens": 1}
    run_hook(plugin, data)
    exception = SimpleNamespace(status_code=400, message="OpenAIException - This model's maximum context length is "
                                "4000 tokens. However, your request has 6015 input tokens.")
    asyncio.run(plugin.async_post_call_failure_hook(data, exception, None))
    answer = plugin.records.overflow("quoting")
    assert answer is not None and answer.spec.code == "context_length_exceeded"
    assert "4000" not in answer.spec.message and "6015" not in answer.spec.message
    assert "window" not in answer.spec.facts and "input_tokens" not in answer.spec.facts


class BadRequest(Exception):
    def __init__(self, message, status=400, provider="openai"):
        super().__init__(message)
        self.message, self.status_code, self.llm_provider = message, status, provider


@pytest.mark.parametrize("render", [json.dumps, repr])
def test_an_echoed_client_value_is_no_overflow(render):
    """OpenAI echoes an invalid enum value the client chose; the code is read from the parsed body (JSON, or the
    Python dict the OpenAI SDK renders), never as a substring of the text."""
    from budget_hook.learning import quotes_overflow

    value = "'code': 'context_length_exceeded'"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": value}
    assert not quotes_overflow(body)
    error = {"error": {"message": f"Invalid value: '{value}'. Supported values are: 'low', 'medium', and 'high'.",
                       "type": "invalid_request_error", "param": "reasoning_effort", "code": "invalid_value"}}
    assert provider_overflow(BadRequest(f"litellm.BadRequestError: OpenAIException - {render(error)}")) is None
    real = {"error": {"message": "Your input exceeds the context window.", "code": "context_length_exceeded"}}
    assert provider_overflow(BadRequest(f"OpenAIException - {render(real)}")) == Overflow(None, None, "provider")


@pytest.mark.parametrize("phrase", ["exceeds the available context size", "model's maximum context limit",
                                    "input tokens exceed the configured limit",
                                    "is longer than the model's context length"])
def test_litellm_s_wider_overflow_wordings_mark_a_request_as_quoting(phrase):
    """LiteLLM classifies a 400 holding any of these as ContextWindowExceededError: a request quoting one is
    flagged (teaches nothing, answered without the provider's numbers)."""
    from budget_hook.learning import quotes_overflow

    assert quotes_overflow({"messages": [{"role": "user", "content": f"why does it say {phrase.upper()}?"}]})
    assert quotes_overflow({"tool_choice": phrase})


def test_a_chain_is_stored_from_the_provider_s_response_whatever_the_call_id():
    """A call id a client chose (collided) or a record gone must not keep the chain from being stored."""
    from budget_hook.proxy.outcomes import log_outcome

    plugin = make_plugin(window=8000)
    for call_id in ("same", "same"):  # two requests sharing one call id: collided
        run_hook(plugin, {"model": "g", "input": "hi", "litellm_call_id": call_id}, call_type="aresponses")
    assert plugin.records.collided("same")
    asyncio.run(log_outcome(plugin, "success", {"litellm_call_id": "same"}, response("resp_collided", 5000),
                            ours=BudgetHookHTTPError, router=None))
    asyncio.run(log_outcome(plugin, "success", {"litellm_call_id": "never-decided"}, response("resp_gone", 6000),
                            ours=BudgetHookHTTPError, router=None))
    for rid, held in (("resp_collided", 5008), ("resp_gone", 6008)):
        assert asyncio.run(plugin.chains.lookup(RESPONSES, {"previous_response_id": rid})) == Chain(held)


def _litellm_id(inner: str) -> str:
    return "resp_" + base64.b64encode(f"litellm:custom_llm_provider:openai;model_id:m1;response_id:{inner}".encode()
                                      ).decode()


def test_an_id_is_resolved_as_litellm_forwards_it():
    """The adapter resolves ids by LiteLLM's own steps: a hand-built wrapping with its parts in another order is
    read as LiteLLM reads it (the third part), junk or padding around an id as LiteLLM reads it, the length limit
    applies to the id the provider gets, and what LiteLLM cannot read is unknown."""
    plugin = make_plugin(window=8000)
    remember(plugin, response("resp_small", 10))
    remember(plugin, response("resp_big", 6000))
    def look(rid):
        return asyncio.run(plugin.chains.lookup(RESPONSES, {"previous_response_id": rid}))

    assert look(_litellm_id("resp_big")) == Chain(6008)
    reordered = "resp_" + base64.b64encode(
        b"litellm:custom_llm_provider:openai;model_id:;resp_big;response_id:resp_small").decode()
    assert look(reordered) == Chain(6008)  # LiteLLM forwards parts[2]: the big chain
    assert look("resp_big" + "A" * 1100) == Chain(None)  # over the limit as forwarded: unknown
    assert look("x" * 70_000) == Chain(None)
    assert look("resp_nothing_seen") == Chain(None)


def test_chat_and_extra_body_ids_are_counted():
    plugin = make_plugin(window=8000)
    remember(plugin, response("resp_held", 7000))
    chat = {"model": "g", "messages": [{"role": "user", "content": "next " * 2000}], "max_tokens": 100,
            "previous_response_id": "resp_held", "litellm_call_id": "chat"}
    with pytest.raises(BudgetHookHTTPError):
        run_hook(plugin, chat)
    assert plugin.records.find("chat").chain["held"] == 7008
    extra = {"model": "g", "input": "next " * 2000, "max_output_tokens": 100, "litellm_call_id": "eb",
             "extra_body": {"previous_response_id": "resp_held"}}
    with pytest.raises(BudgetHookHTTPError):
        run_hook(plugin, extra, call_type="aresponses")
    both = {**extra, "litellm_call_id": "both", "previous_response_id": "resp_unknown"}
    with pytest.raises(BudgetHookHTTPError):  # the larger known chain of the two
        run_hook(plugin, both, call_type="aresponses")


def test_an_attempt_on_a_smaller_window_counts_the_chain():
    """The per-attempt re-check counts the chain against the attempt's own window (a fallback to a smaller one)."""
    from budget_hook.proxy.attempts import recheck

    plugin = make_plugin(window=32_000)
    remember(plugin, response("resp_fb", 6000))
    data = continued("resp_fb", words=3000, call_id="fb")
    run_hook(plugin, data, call_type="aresponses")
    assert plugin.records.decided("fb").chain == 6008
    small = ModelLimits(8000, "test", "gpt-4o")
    attempt = {**data, "input": "next " * 3000, "metadata": {"model_info": {"id": "d-small"}, "model_group": "g"}}
    plugin.deployment_windows.get = lambda key: small
    with pytest.raises(Exception, match="stored response"):
        asyncio.run(recheck(plugin, attempt, "aresponses", router=lambda: None, error_type=BudgetHookHTTPError,
                            overflow_error=lambda message, model: ValueError(message)))


def test_the_response_a_client_gets_is_stored_before_it_is_sent():
    """After an MCP tool loop on /v1/responses the success callback carries the loop's first call, the client the
    follow-up's response (an attack review: a continuation of it was counted by its new input alone). The post-call
    hook stores the chain of what the client gets; a stream's ``response.completed`` events are stored before they
    are passed on, and any other stream is handed back as it is."""
    plugin = make_plugin(window=8000)
    asyncio.run(plugin.async_post_call_success_hook({"input": "hi"}, None, response("resp_followup", 5000)))
    assert asyncio.run(plugin.chains.lookup(RESPONSES, {"previous_response_id": "resp_followup"})) == Chain(5008)

    events = [{"type": "response.created", "response": response("resp_s", 0)},
              SimpleNamespace(type="response.completed", response=response("resp_first", 30)),
              {"type": "response.output_text.delta", "delta": "ok"},
              {"type": "response.completed", "response": response("resp_last", 4000)}]
    seen: list = []

    async def stream():
        for event in events:
            yield event

    async def client(watched):
        received = []
        async for event in watched:
            received.append(event)
            if event is events[-1]:  # a continuation the client sends as soon as it reads the id is counted
                seen.append(await plugin.chains.lookup(RESPONSES, {"previous_response_id": "resp_last"}))
        return received

    def hooked(route, source, request_data):
        token = route_guard._ROUTE.set(route)  # the path the proxy serves (``route_guard._RouteContext``)
        try:
            return plugin.async_post_call_streaming_iterator_hook(None, source, request_data)
        finally:
            route_guard._ROUTE.reset(token)

    # on /v1/responses, whatever the request's keys (a review: a ``messages`` key LiteLLM ignores there turned the
    # watch off when the request's keys decided it)
    watched = hooked("/v1/responses", stream(), {"input": "hi", "messages": [{"role": "user", "content": "x"}]})
    assert asyncio.run(client(watched)) == events
    assert seen == [Chain(4008)]
    assert asyncio.run(plugin.chains.lookup(RESPONSES, {"previous_response_id": "resp_first"})) == Chain(38)
    chat = stream()
    assert hooked("/v1/chat/completions", chat, {"input": "hi"}) is chat  # another route: no layer added
    assert hooked(None, chat, {"messages": []}) is not chat  # a route not known: watched


def test_one_response_seen_twice_is_written_to_redis_once():
    writes: list[str] = []

    class FakeRedis:
        async def set(self, key, value, ex=None):
            writes.append(value)

    async def run(what, operation):
        return await operation(FakeRedis())

    now = [0.0]
    store = ChainStore(run=run, clock=lambda: now[0])
    for _ in range(2):  # the success callback and the post-call hook
        assert asyncio.run(store.remember(response("resp_twice", 40))) == 48
    assert writes == ["48"]
    asyncio.run(store.remember(response("resp_twice", 50)))  # another size: written
    now[0] = 120.0
    asyncio.run(store.remember(response("resp_twice", 50)))  # and a minute later, again
    assert writes == ["48", "58", "58"]


@settings(max_examples=30, deadline=None)
@given(held=st.integers(min_value=0, max_value=15_500),
       outputs=st.lists(st.integers(min_value=20, max_value=3000), min_size=1, max_size=4))
def test_a_chained_request_s_new_input_is_trimmed_to_what_the_chain_leaves(held, outputs):
    """A continuation's new input (here the outputs of calls the provider holds, as LiteLLM 1.103's MCP loop on
    /v1/responses sends its follow-up: every such loop whose tool output did not fit beside the chain was refused)
    is trimmed to what the chain leaves of the budget; it is refused only when that cannot make the room, and never
    forwarded over it. No output leaves: its call is the provider's."""
    plugin = make_plugin(window=16_000)
    remember(plugin, response("resp_t", held, 0))
    items = [{"type": "function_call_output", "call_id": f"call_{n}", "output": f"out{n} " + "word " * words}
             for n, words in enumerate(outputs)]
    data = {**continued("resp_t"), "input": [*items, {"role": "user", "content": "go on"}]}
    try:
        forwarded = run_hook(plugin, data, call_type="aresponses")
    except BudgetHookHTTPError as error:
        assert "start a new chain" in error.message
        forwarded = None
    record = plugin.records.find("c")
    budget = record.budget["budget"]
    assert record.chain["held"] == held and record.tokens_before == held + record.chain["new_input"]
    if forwarded is None:  # the trim was tried: what it could not bring under the budget is said
        facts = record.block["facts"]
        assert record.action == "blocked" and facts["chain_tokens"] == held
        assert facts["tokens_after_trimming"] > budget and facts["protected_tokens"]["request_overhead"] >= held
        return
    assert record.tokens_after <= budget and record.action in ("pass", "trimmed")
    assert (record.action == "trimmed") == (record.tokens_before > budget)
    sent = forwarded.get("input", data["input"])
    assert [item.get("call_id") for item in sent[:-1]] == [item["call_id"] for item in items]
    # what is forwarded is what was counted: the chain, and the new input as cut (counted afresh, with no chain)
    fresh = make_plugin(window=16_000)
    run_hook(fresh, {**continued("resp_unseen", call_id="d"), "input": sent}, call_type="aresponses")
    assert held + fresh.records.find("d").tokens_before == record.tokens_after


def test_a_tool_output_that_does_not_fit_beside_the_chain_is_cut_not_refused():
    plugin = make_plugin(window=16_000)
    remember(plugin, response("resp_loop", 30))  # the first call of LiteLLM 1.103's MCP loop on /v1/responses
    follow_up = {**continued("resp_loop"), "input": [
        {"type": "function_call_output", "call_id": "call_mcp", "output": "report " * 40_000}]}
    forwarded = run_hook(plugin, follow_up, call_type="aresponses")
    record = plugin.records.find("c")
    assert record.action == "trimmed" and record.tokens_before > 40_000 and record.tokens_after <= 15_100
    assert record.chain == {"state": "known", "held": 38, "new_input": record.tokens_before - 38}
    output = forwarded["input"][0]["output"]
    assert output.startswith("report report") and len(output) < len("report " * 40_000) * 0.4 and "removed" in output


def test_an_attempt_continuing_another_chain_counts_that_one():
    """A client's ``fallbacks`` entry carrying its own ``previous_response_id`` (LiteLLM merges the entry into the
    fallback call): the attempt continued a 4,017-token chain and was decided with none (a review: 8,328 tokens
    reached an 8,000-token window). The attempt looks its chain up; the larger of the two counts."""
    from budget_hook.proxy.attempts import recheck

    plugin = make_plugin(window=8000)
    remember(plugin, response("resp_small", 10))
    remember(plugin, response("resp_big", 4000))
    data = continued("resp_small", words=4000, call_id="fe")
    run_hook(plugin, data, call_type="aresponses")
    assert plugin.records.decided("fe").chain == 18
    attempt = {**data, "previous_response_id": "resp_big", "metadata": {"model_group": "g"}}
    with pytest.raises(Exception, match="stored response whose chain holds 4008"):
        asyncio.run(recheck(plugin, attempt, "aresponses", router=lambda: None, error_type=BudgetHookHTTPError,
                            overflow_error=lambda message, model: ValueError(message)))
    same = {**data, "metadata": {"model_group": "g"}}  # the request's own chain: the first decision holds
    assert asyncio.run(recheck(plugin, same, "aresponses", router=lambda: None, error_type=BudgetHookHTTPError,
                               overflow_error=lambda message, model: ValueError(message))) is None
