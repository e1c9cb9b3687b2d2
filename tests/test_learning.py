"""What the gateway learns from providers: corrections from bills, windows from overflow errors, the
calibrated decision, and the header-dependent Claude windows (unit level; end to end in
tests/e2e/test_learning_e2e.py)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter
from budget_hook.counting.corrected import corrected
from budget_hook.learning import (
    Calibration,
    Correction,
    CorrectionBook,
    LearnedWindows,
    LearningSettings,
    count_band,
    learnable,
    needs_provider_count,
    parse_overflow,
)
from budget_hook.pipeline import BudgetRequest, DecisionRecord, decide
from budget_hook.policy import load_settings
from budget_hook.proxy.feedback import deployment_id, provider_prompt_tokens, usage_from_provider
from budget_hook.proxy.provider_count import ProviderCounter, count_target
from budget_hook.proxy.shared import SharedLearning
from budget_hook.proxy.windows import header_dependent_window
from budget_hook.shapes import SHAPES

# --- corrections ------------------------------------------------------------------------------------------


def test_a_correction_needs_enough_samples_and_is_a_high_quantile():
    book = CorrectionBook(LearningSettings(min_samples=5, quantile=0.9))
    for billed in (1000, 1010, 1020, 1030):
        book.add("dep", 1000, billed)
    assert book.correction(["dep"]) is None  # 4 < 5 samples
    book.add("dep", 1000, 1200)
    correction = book.correction(["dep"])
    assert correction is not None and correction.factor == 1.2 and correction.samples == 5


def test_the_correction_of_a_request_is_the_largest_over_its_deployments():
    book = CorrectionBook(LearningSettings(min_samples=1))
    book.add("a", 1000, 1100)
    book.add("b", 1000, 1300)
    assert book.correction(["a", "b"]).key == "b"
    assert book.correction(["a", "c"]).factor == 1.1


def test_small_requests_and_nonsense_teach_nothing():
    book = CorrectionBook(LearningSettings(min_samples=1, min_billed_tokens=100))
    assert book.add("dep", 40, 90) is None  # framing dominates small requests
    assert book.add("dep", 0, 500) is None
    assert book.correction(["dep"]) is None


def test_a_flood_of_over_counted_requests_cannot_lower_counts_by_default():
    """Every client's responses feed the window: by default the factor never goes below 1."""
    book = CorrectionBook(LearningSettings(min_samples=5))
    for _ in range(300):
        book.add("dep", 2000, 1000)
    assert book.correction(["dep"]).factor == 1.0
    lowered = CorrectionBook(LearningSettings(min_samples=5, min_factor=0.8))
    for _ in range(300):
        lowered.add("dep", 2000, 1000)
    assert lowered.correction(["dep"]).factor == 0.8


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(100, 10**6)), min_size=1, max_size=60),
       st.floats(0.5, 1.0), st.floats(1.0, 3.0), st.floats(0.5, 1.0))
def test_the_factor_stays_in_its_bounds_and_never_below_the_quantile_it_names(pairs, low, high, q):
    book = CorrectionBook(LearningSettings(min_samples=1, min_factor=low, max_factor=high, quantile=q, window=50,
                                           max_sample_ratio=1e9))  # every ratio kept: the clamp is under test
    for estimate, billed in pairs:
        book.add("dep", estimate, billed)
    factor = book.factor("dep")
    assert factor is not None and low - 1e-9 <= factor <= high + 1e-9
    ratios = sorted(book.samples("dep"))
    assert len(ratios) == min(50, len(pairs))  # bounded window of the most recent
    share_at_or_below = sum(r <= factor + 1e-9 for r in ratios) / len(ratios)
    assert factor >= high - 1e-9 or share_at_or_below >= q - 1e-9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 10**7), min_size=1, max_size=30))
def test_a_learned_window_only_ever_goes_down(windows):
    learned = LearnedWindows(LearningSettings())
    for window in windows:
        learned.learn("dep", window, "test")
    assert learned.window(["dep"]).window == min(windows)


def test_a_learned_window_expires():
    now = [1000.0]
    learned = LearnedWindows(LearningSettings(window_ttl_seconds=60), clock=lambda: now[0])
    learned.learn("dep", 5000, "anthropic overflow error")
    assert learned.window(["dep"]).window == 5000
    now[0] += 61
    assert learned.window(["dep"]) is None


# --- overflow errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, window, prompt", [
    ("prompt is too long: 210000 tokens > 200000 maximum", 200000, 210000),
    ("litellm.BadRequestError: AnthropicException - {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
     "\"message\":\"prompt is too long: 204,312 tokens > 200,000 maximum\"}}", 200000, 204312),
    ("input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or "
     "`max_tokens` and try again", 200000, 188240),
    ("This model's maximum context length is 128000 tokens. However, you requested 130532 tokens (129532 in the "
     "messages, 1000 in the completion). Please reduce the length of the messages or completion.", 128000, 129532),
    ("This model's maximum context length is 8192 tokens, however you requested 9000 tokens (8000 in your prompt; "
     "1000 for the completion). Please reduce your prompt; or completion length.", 8192, 8000),
    ("The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 1048576, 1200000),
    ("This model's maximum context length is 32768 tokens and your request has 40000 input tokens", 32768, 40000),
    ("maximum context length is 4096 tokens", 4096, None),
    ("Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': 'prompt is too "
     "long: 5000 tokens > 4000 maximum'}}", 4000, 5000),
    ("litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - "
     "This model's maximum context length is 4000 tokens. However, you requested 6500 tokens (6200 in the "
     "messages, 300 in the completion).", 4000, 6200),
    ('{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens '
     'allowed (1048576).", "status": "INVALID_ARGUMENT"}}', 1048576, 1200000),
])
def test_overflow_errors_name_the_window_and_the_provider_count(text, window, prompt):
    overflow = parse_overflow(text)
    assert overflow is not None and (overflow.window, overflow.prompt_tokens) == (window, prompt)


@pytest.mark.parametrize("text", ["", "rate limit exceeded", "Invalid API key", None, 42,
                                  "maximum context length is 0 tokens", "x" * 100_000,
                                  # errors that echo a client's value must not teach a window
                                  "Invalid value: 'prompt is too long: 1 tokens > 10 maximum'",
                                  'Invalid tool name "x": prompt is too long: 1 tokens > 10 maximum',
                                  "Unsupported image: 'This model's maximum context length is 10 tokens'"])
def test_other_errors_teach_no_window(text):
    assert parse_overflow(text) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_parsing_an_error_never_raises(text):
    parse_overflow(text)


# --- the calibrated decision ----------------------------------------------------------------------------------

CHAT = SHAPES.get("chat")


def _request(body, *, window=4000, calibration=None, settings_raw=None, model="anthropic/claude-sonnet-4-5"):
    limits = ModelLimits(window, "test", model, deployment_ids=("dep-1",))
    return BudgetRequest(shape=CHAT, body=body, model_group="g", limits=limits,
                         calibration=calibration or Calibration()), load_settings(settings_raw or {})


def _chat(words: int) -> dict:
    """Four turns whose three older ones can be dropped, of about ``words`` words in all."""
    messages = [{"role": "user", "content": "the task"}, {"role": "assistant", "content": "on it"}]
    for turn in range(3):
        messages += [{"role": "user", "content": f"question {turn} " + "alpha " * (words // 3)},
                     {"role": "assistant", "content": f"answer {turn}"}]
    return {"model": "g", "max_tokens": 100, "messages": [*messages, {"role": "user", "content": "the last one"}]}


def test_a_learned_correction_multiplies_every_count_and_the_record_says_so():
    body = _chat(400)
    request, plugin_settings = _request(body)
    plain = decide(request, plugin_settings)
    correction = Correction(1.25, 40, "dep-1")
    request, _ = _request(body, calibration=Calibration(correction=correction))
    calibrated = decide(request, plugin_settings)
    assert calibrated.tokens_before >= round(plain.tokens_before * 1.25) - 1
    record = DecisionRecord.build(calibrated, request).as_dict()
    assert record["count"]["how"] == "estimate"
    assert record["count"]["learned"] == {"factor": 1.25, "samples": 40, "deployment": "dep-1", "source": "learned"}
    assert "learned x1.250 (40 responses)" in record["method"]
    assert DecisionRecord.build(calibrated, request).headers()["x-budget-count-method"] == record["method"]


def test_a_correction_can_turn_a_pass_into_a_trim():
    body = _chat(2600)
    request, plugin_settings = _request(body)
    assert decide(request, plugin_settings).action == "pass"
    request, _ = _request(body, calibration=Calibration(correction=Correction(1.5, 40, "dep-1")))
    assert decide(request, plugin_settings).action == "trimmed"


def test_every_record_says_how_the_count_was_made():
    for model, how in (("gpt-4o", "exact"), ("anthropic/claude-sonnet-4-5", "estimate"),
                       ("gemini/gemini-2.5-flash", "estimate"), ("mistral/mistral-small", "offline tokenizer")):
        request, plugin_settings = _request(_chat(10), model=model)
        record = DecisionRecord.build(decide(request, plugin_settings), request).as_dict()
        assert record["count"]["how"] == how, model
        assert record["count"]["method"]
        assert record["count"]["family"] and record["estimate_forwarded"] == record["tokens_after"]


def test_the_estimate_near_the_budget_asks_for_the_provider_count_only_when_the_policy_says_so():
    band = count_band("anthropic")
    assert needs_provider_count(1000, 1000, band) and not needs_provider_count(500, 1000, band)
    assert not needs_provider_count(int(1000 * (1 + band.over)) + 2, 1000, band)
    body = _chat(2600)
    request, off = _request(body)
    assert not decide(request, off).wants_provider_count
    near = load_settings({"provider_count": "near_budget"})
    decision = decide(request, near)
    tokens, budget = decision.tokens_before, decision.report.budget.budget
    assert decision.wants_provider_count == needs_provider_count(tokens, budget, band)


def test_the_provider_count_replaces_the_estimate_for_that_request():
    body = _chat(3000)
    request, plugin_settings = _request(body, settings_raw={"provider_count": "near_budget"})
    first = decide(request, plugin_settings)
    assert first.action == "trimmed"
    # the provider says the request is much smaller than we thought: it fits, forwarded untouched
    ours = CHAT.count(body, TokenCounter.for_model("anthropic/claude-sonnet-4-5"))
    calibration = Calibration(provider_tokens=2000, provider_estimate=ours, provider_note="answered")
    request, _ = _request(body, calibration=calibration, settings_raw={"provider_count": "near_budget"})
    again = decide(request, plugin_settings)
    assert again.action == "pass" and not again.wants_provider_count
    assert abs(again.tokens_before - 2000) <= len(body["messages"]) + 2
    record = DecisionRecord.build(again, request).as_dict()
    assert record["count"]["how"] == "provider" and record["count"]["provider"]["tokens"] == 2000


def test_the_corrected_counter_is_the_counter_when_nothing_is_learned():
    counter = TokenCounter.for_model("gpt-4o")
    assert corrected(counter, 1.0, "") is counter
    scaled = corrected(counter, 2.0, "x2")
    message = {"role": "user", "content": "hello there " * 50}
    assert scaled.count_message(message) == 2 * counter.count_message(message)


def test_server_side_content_teaches_no_correction():
    assert learnable({"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert learnable({"messages": [], "tools": [{"name": "f", "input_schema": {}}, {"type": "bash_20250124"}]})
    for body in ({"input": [], "previous_response_id": "resp_1"}, {"messages": [], "mcp_servers": [{}]},
                 {"messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
                 {"contents": [], "tools": [{"googleSearch": {}}]}, {"input": [], "tools": [{"type": "file_search"}]},
                 # an attack review: each of these let one key's bills for content never seen set a correction
                 {"messages": [], "web_search_options": {}}, {"messages": [], "extra_body": {"web_search_options": {}}},
                 {"contents": [], "tools": [{"googleMaps": {}}]}, {"contents": [], "tools": [{"fileSearch": {}}]},
                 {"contents": [], "config": {"tools": [{"googleSearch": {}}]}},
                 {"contents": [], "config": {"cachedContent": "cachedContents/1"}},
                 {"messages": [], "vector_store_ids": ["vs_1"]}, {"messages": [], "mock_response": {"usage": {}}}):
        assert not learnable(body), body


@pytest.mark.parametrize("body", [
    {"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-abc"}}]}]},
    {"messages": [{"role": "user", "content": "hi"}], "prompt_id": "support-bot"},
    {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
])
def test_a_request_with_content_the_gateway_cannot_see_teaches_no_correction(body):
    """What the provider bills for a file by id, a stored prompt or a search says nothing of our count: one key
    sending 25 of them set every other team's correction to the maximum (an attack review)."""
    from budget_hook.policy.settings import load_settings
    from budget_hook.shapes import SHAPES

    request = BudgetRequest(shape=SHAPES.get("chat"), body={"model": "g", **body}, model_group="g",
                            limits=ModelLimits(128_000, "test", "gpt-4o"))
    decision = decide(request, load_settings({}))
    record = DecisionRecord.build(decision, request)
    assert decision.action == "pass" and decision.unseen and not record.learnable
    plain = replace(request, body={"model": "g", "messages": [{"role": "user", "content": "hi"}]})
    assert DecisionRecord.build(decide(plain, load_settings({})), plain).learnable


# --- what the success and failure callbacks read -------------------------------------------------------------


def test_the_billed_input_includes_anthropic_cache_reads_and_writes():
    response = {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 2000}}
    assert provider_prompt_tokens(response, {}) == 2510
    assert provider_prompt_tokens(None, {"standard_logging_object": {"prompt_tokens": 77}}) == 77


def test_the_deployment_that_answered_is_found_where_litellm_puts_it():
    assert deployment_id({"litellm_params": {"model_info": {"id": "abc"}}}) == "abc"
    assert deployment_id({"litellm_params": {"metadata": {"model_info": {"id": "m"}}}}) == "m"
    assert deployment_id({"standard_logging_object": {"model_id": "s"}}) == "s"
    assert deployment_id({}) is None


def test_usage_litellm_may_have_computed_itself_teaches_nothing():
    assert usage_from_provider({"stream": False})
    assert not usage_from_provider({"stream": True, "call_type": "acompletion"})
    assert usage_from_provider({"stream": True, "call_type": "acompletion", "stream_options": {"include_usage": True}})
    assert usage_from_provider({"stream": True, "call_type": "anthropic_messages"})


# --- the header-dependent window -------------------------------------------------------------------------------


@pytest.mark.parametrize("model, expected", [
    ("anthropic/claude-sonnet-4-5", 200_000), ("anthropic/claude-sonnet-4-5-20250929", 200_000),
    ("claude-sonnet-4-20250514", 200_000), ("bedrock/us.anthropic.claude-sonnet-4-20250514-v1:0", 200_000),
    ("vertex_ai/claude-sonnet-4@20250514", 200_000), ("openrouter/anthropic/claude-sonnet-4.5", 1_000_000),
    ("anthropic/claude-opus-4-7", 1_000_000),
])
def test_claude_1m_windows_need_the_beta_header(model, expected):
    assert header_dependent_window(model, None, 1_000_000, {}, {})[0] == expected


def test_the_beta_header_on_the_deployment_or_an_explicit_window_keeps_1m():
    beta = {"extra_headers": {"anthropic-beta": "context-1m-2025-08-07"}}
    assert header_dependent_window("anthropic/claude-sonnet-4-5", None, 1_000_000, beta, {})[0] == 1_000_000
    explicit = {"max_input_tokens": 1_000_000}
    assert header_dependent_window("anthropic/claude-sonnet-4-5", None, 1_000_000, {}, explicit)[0] == 1_000_000


# --- the provider's counter (unit: timeouts and errors; the real endpoints are e2e-tested) ---------------------


def _deployment(model: str, base: str = "http://provider.test") -> dict:
    return {"litellm_params": {"model": model, "api_base": base, "api_key": "k"}}


def test_count_targets_per_provider_and_shape(monkeypatch):
    anthropic = count_target(_deployment("anthropic/claude-sonnet-4-5", "http://p.test/v1"), "anthropic")
    assert anthropic.url == "http://p.test/v1/messages/count_tokens" and anthropic.headers["x-api-key"] == "k"
    assert anthropic.body({"model": "g", "max_tokens": 5, "messages": [], "stream": True}) == {
        "model": "claude-sonnet-4-5", "messages": []}
    gemini = count_target(_deployment("gemini/gemini-2.5-flash"), "gemini")
    assert gemini.url.endswith("/v1beta/models/gemini-2.5-flash:countTokens")
    assert gemini.body({"contents": []}) == {"generateContentRequest": {"model": "models/gemini-2.5-flash",
                                                                         "contents": []}}
    assert count_target(_deployment("openai/gpt-5", "http://p.test/v1"), "responses").url == \
        "http://p.test/v1/responses/input_tokens"
    assert count_target(_deployment("anthropic/claude-sonnet-4-5"), "chat") is None
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert count_target({"litellm_params": {"model": "anthropic/claude-x"}}, "anthropic") is None  # no key
    monkeypatch.setenv("ANTHROPIC_KEY_FOR_TEST", "secret")
    keyed = count_target({"litellm_params": {"model": "anthropic/claude-x", "api_key": "os.environ/ANTHROPIC_KEY_FOR_TEST"}},
                         "anthropic")
    assert keyed.headers["x-api-key"] == "secret" and keyed.url == "https://api.anthropic.com/v1/messages/count_tokens"


def _counter(handler) -> ProviderCounter:
    return ProviderCounter(client=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)))


def test_provider_counts_are_cached_by_content():
    calls = []

    def handler(request):
        calls.append(json.loads(request.content))
        return httpx.Response(200, json={"input_tokens": 1234})

    counter = _counter(handler)
    target = count_target(_deployment("anthropic/claude-sonnet-4-5"), "anthropic")
    body = {"messages": [{"role": "user", "content": "hi"}]}
    assert asyncio.run(counter.count(target, body, 1.0)) == (1234, "answered")
    assert asyncio.run(counter.count(target, body, 1.0)) == (1234, "cached")
    assert len(calls) == 1


@pytest.mark.parametrize("answer, note", [
    (httpx.Response(500, json={}), "error: status 500"),
    (httpx.Response(200, json={"unexpected": 1}), "error: no count in the answer"),
    (httpx.Response(200, content=b"not json"), "error: no count in the answer"),
])
def test_a_failing_provider_counter_leaves_the_estimate(answer, note):
    counter = _counter(lambda request: answer)
    target = count_target(_deployment("anthropic/claude-sonnet-4-5"), "anthropic")
    assert asyncio.run(counter.count(target, {"messages": []}, 1.0)) == (None, note)


def test_a_slow_provider_counter_times_out():
    async def handler(request):
        await asyncio.sleep(2)
        return httpx.Response(200, json={"input_tokens": 1})

    counter = _counter(handler)
    target = count_target(_deployment("anthropic/claude-sonnet-4-5"), "anthropic")
    tokens, note = asyncio.run(counter.count(target, {"messages": []}, 0.05))
    assert tokens is None and note.startswith("timeout")


# --- sharing (per process without Redis; Redis itself in the e2e test) ---------------------------------------


def test_without_redis_learning_stays_in_the_process():
    learning = SharedLearning(LearningSettings(min_samples=2), redis=lambda: None)

    async def run():
        await learning.learn_ratio("dep", 1000, 1300)
        await learning.learn_ratio("dep", 1000, 1200)
        await learning.learn_window("dep", 3000, "anthropic overflow error")
        return await learning.lookup(["dep", "other"])

    correction, window = asyncio.run(run())
    assert correction.factor == 1.3 and window.window == 3000 and not learning.shared


def test_a_broken_redis_never_fails_a_request():
    class Broken:
        def pipeline(self, transaction=False):
            raise ConnectionError("refused")

        async def eval(self, *args):
            raise ConnectionError("refused")

    learning = SharedLearning(LearningSettings(min_samples=1), redis=lambda: Broken())

    async def run():
        await learning.learn_ratio("dep", 1000, 1100)
        await learning.learn_window("dep", 3000, "x")
        return await learning.lookup(["dep"])

    correction, window = asyncio.run(run())
    assert correction.factor == 1.1 and window.window == 3000


def test_learning_settings_are_validated():
    assert load_settings({"learning": {"quantile": 0.99, "share": "off"}}).learning.quantile == 0.99
    assert load_settings({"learning": {"share": False}}).learning.share == "off"  # YAML's bare off
    from budget_hook.errors import PolicyError
    for bad in ({"learning": {"min_factor": 2.0, "max_factor": 1.5}}, {"learning": {"window": True}},
                {"learning": {"quantil": 0.9}}, {"provider_count": "sometimes"}):
        with pytest.raises(PolicyError):
            load_settings(bad)


def test_metrics_are_bounded_and_escaped():
    from types import SimpleNamespace

    from budget_hook.proxy import metrics as metrics_module
    from budget_hook.proxy.metrics import Metrics

    metrics = Metrics()
    for index in range(metrics_module.MAX_SERIES + 50):
        record = SimpleNamespace(model_group=f'g"{index}\n', team_alias=None, team_id=None, action="pass",
                                 tokens_before=10, tokens_after=10, estimate_forwarded=10)
        metrics.observe(record, "success", billed=12)
    text = metrics.render()
    series = [line for line in text.splitlines() if line.startswith("budget_hook_decisions_total{")]
    assert len(series) <= metrics_module.MAX_SERIES + 1
    assert 'model_group="other"' in text and '\\"' in text and "\n\n" not in text


def test_metrics_reach_prometheus_client_s_registry_with_the_same_values():
    """What LiteLLM's Prometheus integration serves on /metrics: the same series, escaped once."""
    from types import SimpleNamespace

    from prometheus_client import REGISTRY, generate_latest

    from budget_hook.proxy.metrics import Metrics, register_with_prometheus

    metrics = Metrics()
    assert register_with_prometheus(metrics) and register_with_prometheus(metrics)  # a second call re-points
    record = SimpleNamespace(model_group='small"x', team_alias="strict", team_id=None, action="trimmed",
                             tokens_before=120, tokens_after=80, estimate_forwarded=80)
    metrics.observe(record, "success", billed=84)
    text = generate_latest(REGISTRY).decode()
    assert 'budget_hook_decisions_total{action="trimmed",model_group="small\\"x",outcome="success",team="strict"} 1.0' \
        in text
    assert 'budget_hook_provider_prompt_tokens_total{model_group="small\\"x",team="strict"} 84.0' in text
    assert 'budget_hook_tokens_after_total{model_group="small\\"x",team="strict"} 80.0' in text


def test_the_gateway_s_own_block_never_teaches_a_window():
    """A block's message opens with the provider's sentence (Claude Code reads it): were a route to hand it
    back as another exception class, the blocked record still keeps it from teaching a window."""
    from types import SimpleNamespace

    from budget_hook.proxy.feedback import learn_from_error

    learning = SharedLearning(LearningSettings(min_samples=1), redis=lambda: None)
    rebuilt = ValueError("prompt is too long: 9008 tokens > 1600 maximum. budget_hook blocked this request")
    kwargs = {"exception": rebuilt, "litellm_params": {"model_info": {"id": "dep"}}}
    blocked = SimpleNamespace(action="blocked", learnable=True, estimate_forwarded=9008, attempts=(), teacher=None,
                              quotes_overflow=False)
    assert asyncio.run(learn_from_error(learning, kwargs, blocked)) is None
    assert learning.windows.window(["dep"]) is None
    passed = SimpleNamespace(action="pass", learnable=True, estimate_forwarded=9008, attempts=(), teacher=None,
                             quotes_overflow=False, routed_by_client=False, client_beta=False)
    assert asyncio.run(learn_from_error(learning, kwargs, passed))["window"] == 1600


def test_the_provider_count_of_a_continuation_is_taken_less_the_chain_it_holds():
    """OpenAI's input_tokens endpoint counts the chain a ``previous_response_id`` names with the new input, while the
    decision counts the chain as ``held``: the provider's count is taken less it (else the chain counted twice, and a
    factor of chain/new input applied to the new input)."""
    from types import SimpleNamespace

    from budget_hook.proxy.provider_count import decide_with_provider_count

    class Counter:
        async def count(self, target, body, timeout, prepared=None):
            return 6000 + 900, "answered"  # the chain's 6,000 and the new input's ~900

        def server_window(self, target):
            return None

    async def run(fn, body, weight=None):
        return fn()
    plugin_settings = load_settings({"provider_count": "always"})
    plugin = SimpleNamespace(provider_counter=Counter(), offloader=SimpleNamespace(run=run), settings=plugin_settings)
    body = {"model": "g", "input": "word " * 900, "previous_response_id": "resp_1", "max_output_tokens": 100}
    request = BudgetRequest(SHAPES.get("responses"), body, "g", ModelLimits(16_000, "test", "gpt-4o"), held=6000)
    first = decide(request, plugin_settings)
    assert 6900 <= first.tokens_before <= 6920  # the chain in the count, as the request's overhead
    again = asyncio.run(decide_with_provider_count(plugin, request, first,
                                                   [_deployment("openai/gpt-4o", "http://p.test/v1")]))
    assert again.calibration.provider_tokens == 900
    assert abs(again.tokens_before - 6900) <= 10 and again.action == "pass"


def test_a_continuation_whose_extra_body_names_the_chain_is_not_counted_by_the_provider():
    """LiteLLM forwards ``extra_body.previous_response_id`` (merged last), the count endpoint is sent the top-level
    id: the provider would count another chain than the one taken off its count (a review: a 4,017-token chain
    subtracted from a count holding an 18-token one, 9,028 tokens forwarded into 8,000)."""
    target = count_target(_deployment("openai/gpt-4o", "http://p.test/v1"), "responses")
    assert target.unsent({"input": "hi", "previous_response_id": "resp_a"}) == []
    assert target.unsent({"input": "hi", "previous_response_id": "resp_a",
                          "extra_body": {"previous_response_id": "resp_b"}}) == ["extra_body.previous_response_id"]
