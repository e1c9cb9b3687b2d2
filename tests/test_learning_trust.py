"""Learning trusts only what no client can write (unit level; through real proxies, an echoing provider and
one shared Redis in tests/e2e/test_poisoning_e2e.py).

* an error that may quote the client's own input teaches nothing (``quotes_overflow``);
* a window is never learned below what the deployment served, ``min_window_tokens``, or
  ``min_window_ratio`` of its configured window; one learned before those floors is not used;
* an error whose prompt count is not about the request we sent teaches nothing;
* a ratio is attributed to its teacher: one key's traffic sets its own correction, and everyone else's
  only when most teachers agree.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget_hook.learning import (
    ANONYMOUS,
    IDLE_TEACHER_SECONDS,
    MAX_TEACHERS,
    CorrectionBook,
    LearningSettings,
    ServedFloor,
    parse_overflow,
    quotes_overflow,
    teacher_of,
    window_floor,
)
from budget_hook.proxy.feedback import learn_from_error, learn_from_usage
from budget_hook.proxy.shared import SharedLearning, _teachers

OPENAI_OVERFLOW = ("This model's maximum context length is {w} tokens. However, you requested {t} tokens "
                   "({p} in the messages, 100 in the completion).")


def record(**fields):
    values = dict(action="pass", learnable=True, proves_window=True, estimate_forwarded=5000, attempts=(),
                  teacher="key:a", quotes_overflow=False, metrics_group="open", routed_by_client=False,
                  client_beta=False)
    return SimpleNamespace(**{**values, **fields})


def failure(message: str, deployment: str = "dep") -> dict:
    error = ValueError(message)
    error.status_code = 400  # type: ignore[attr-defined]
    return {"exception": error, "litellm_params": {"model_info": {"id": deployment}}}


def learning(**settings_) -> SharedLearning:
    return SharedLearning(LearningSettings(**{"min_samples": 1, **settings_}), redis=lambda: None)


# --- what a request quotes ----------------------------------------------------------------------------------


ECHOES = [
    {"x\nThis model's maximum context length is 10 tokens": 1},  # an unknown key, echoed as "Unrecognized..."
    {"thinking": {"type": "prompt is too long: 900000 tokens > 9000000 maximum"}},  # a bad value, echoed
    {"messages": [{"role": "user", "content": "MAXIMUM CONTEXT LENGTH is 5 tokens"}]},
    {"metadata": {"tags": ["The input token count (9) exceeds the maximum number of tokens allowed (5)"]}},
    {"model": "openai/input length and `max_tokens` exceed context limit: 1 + 1 > 2"},
    {"proxy_server_request": {"headers": {"x-note": "prompt is too long: 3 tokens > 2 maximum"}}},
    {"tools": [{"function": {"name": "f", "parameters": {"properties": {"Number of tokens allowed (5)": {}}}}}]},
]


def test_any_overflow_phrase_anywhere_in_a_request_is_found():
    for body in ECHOES:
        assert quotes_overflow(body), body
    assert not quotes_overflow({"messages": [{"role": "user", "content": "this function is too long, and the "
                                                                         "context matters"}]})
    assert not quotes_overflow({"model": "gpt-4o", "max_tokens": 10, "stream": True})


def test_the_wordings_are_ascii_only():
    """No Unicode case folding turns client text into a wording (U+212A KELVIN SIGN folds to k)."""
    assert parse_overflow("This model's maximum context length is 10 to\u212aens") is None
    assert parse_overflow("This model's maximum context length is 10 tokens") is not None


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["This model's maximum context length is {w} tokens",
                        "prompt is too long: {p} tokens > {w} maximum",
                        "The input token count ({p}) exceeds the maximum number of tokens allowed ({w})"]),
       st.text(max_size=20), st.text(max_size=20), st.integers(1, 10**6), st.integers(1, 10**6))
def test_a_request_carrying_any_wording_it_could_get_back_is_found(template, before, after, window, prompt):
    """Whatever a provider quotes back of a request, if it parses as an overflow the request contained it."""
    planted = before + template.format(w=window, p=prompt) + after
    for body in ({planted: True}, {"a": [planted]}, {"a": {"b": planted.upper()}}):
        assert quotes_overflow(body)


def test_an_echoed_error_teaches_nothing():
    shared = learning()
    message = "Unrecognized request argument supplied: x\nThis model's maximum context length is 10 tokens"
    learned = asyncio.run(learn_from_error(shared, failure(message), record(quotes_overflow=True)))
    assert "ignored" in learned and "window" not in learned
    assert shared.window(["dep"]) is None and shared.corrections.samples("dep") == []


# --- floors ---------------------------------------------------------------------------------------------------


def test_a_window_below_its_floor_is_refused_and_says_why():
    shared = learning()
    asyncio.run(shared.learn_served("dep", 6000))  # a success billed 6,000 input tokens
    message = OPENAI_OVERFLOW.format(w=4000, t=5100, p=5000)
    learned = asyncio.run(learn_from_error(shared, failure(message), record(), configured=16000))
    assert learned["refused_window"] == 4000 and learned["floor"] == 6000
    assert shared.window(["dep"]) is None
    # the floors: min_window_tokens, then the configured window's share
    assert window_floor(LearningSettings(), 0, None) == 1024
    assert window_floor(LearningSettings(), 0, 128_000) == 16_000
    assert window_floor(LearningSettings(), 20_000, 128_000) == 20_000
    learned = asyncio.run(learn_from_error(learning(), failure(OPENAI_OVERFLOW.format(w=10, t=5000, p=4900)),
                                           record()))
    assert learned["refused_window"] == 10 and learned["floor"] == 1024


def test_a_real_overflow_above_the_floors_is_learned_with_its_teacher():
    shared = learning()
    asyncio.run(shared.learn_served("dep", 3000))
    message = OPENAI_OVERFLOW.format(w=4000, t=5100, p=5000)
    learned = asyncio.run(learn_from_error(shared, failure(message), record(), configured=16000))
    assert learned["window"] == 4000 and learned["teacher"] == "key:a"
    assert shared.window(["dep"]).window == 4000 and "taught by key:a" in shared.window(["dep"]).source


def test_a_success_larger_than_a_learned_window_retires_it():
    shared = learning()
    asyncio.run(shared.learn_window("dep", 4000, "test"))
    assert shared.window(["dep"]).window == 4000
    asyncio.run(shared.learn_served("dep", 4500))  # the provider served more than that window: it was wrong
    assert shared.window(["dep"]) is None


def test_a_success_teaches_the_served_floor_even_when_it_teaches_no_ratio():
    shared = learning()
    kwargs = {"litellm_params": {"model_info": {"id": "dep"}}, "call_type": "acompletion"}
    asyncio.run(learn_from_usage(shared, kwargs, record(learnable=False), 7000))
    assert shared.served.floor("dep") == 7000 and shared.corrections.samples("dep") == []


def test_a_cached_answer_teaches_nothing():
    """LiteLLM logs a cache hit as a success of the deployment the router picked, with the bill of the one that
    served it first (``caching_groups`` share answers across groups): no floor, no ratio."""
    shared = learning()
    kwargs = {"litellm_params": {"model_info": {"id": "dep"}}, "call_type": "acompletion", "cache_hit": True}
    assert asyncio.run(learn_from_usage(shared, kwargs, record(), 7000)) is None
    assert shared.served.floor("dep") == 0 and shared.corrections.samples("dep") == []


@pytest.mark.parametrize(("shape", "body", "proves"), [
    ("chat", {"model": "g", "messages": [{"role": "user", "content": "hi"}]}, True),
    ("embeddings", {"model": "g", "input": "one input"}, True),
    # billed as the inputs' sum: an attack review raised a 1,500-token deployment's floor to 8,000 so
    ("embeddings", {"model": "g", "input": ["one input", "another input"]}, False),
    # the usage is the client's own words (keys LiteLLM lets send a mocked answer)
    ("chat", {"model": "g", "messages": [{"role": "user", "content": "hi"}], "mock_response": {"usage": {}}}, False),
    ("chat", {"model": "g", "messages": [{"role": "user", "content": "hi"}], "extra_body": {"mock_response": "x"}},
     False),
    # the provider's own loop of model calls (server tools, MCP), billed as their sum: a review of 2026-12-07 raised
    # every tenant's floor past a learned 32,000-token window with one such bill
    ("responses", {"model": "g", "input": "research", "tools": [{"type": "web_search_preview"}]}, False),
    ("responses", {"model": "g", "input": "look", "tools": [{"type": "mcp", "server_label": "x",
                                                             "server_url": "https://mcp.example.com"}]}, False),
    ("anthropic", {"model": "g", "max_tokens": 100, "messages": [{"role": "user", "content": "search"}],
                   "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 20}]}, False),
    ("anthropic", {"model": "g", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
                   "mcp_servers": [{"type": "url", "url": "https://mcp.example.com", "name": "x"}]}, False),
    ("gemini", {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [{"googleSearch": {}}]}, False),
    # a stored prompt may bring the tools configured with it (a review of the fix)
    ("responses", {"model": "g", "input": "go", "prompt": {"id": "pmpt_1", "version": "2"}}, False),
    # one call over history the provider holds: its bill is one prompt it served
    ("responses", {"model": "g", "input": "and then?", "previous_response_id": "resp_1"}, True),
    ("completions", {"model": "g", "prompt": "a text prompt, not a stored one"}, True),
])
def test_only_one_prompt_a_provider_served_proves_a_window(shape, body, proves):
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, DecisionRecord, decide
    from budget_hook.policy import load_settings
    from budget_hook.shapes import SHAPES

    request = BudgetRequest(SHAPES.get(shape), body, "g", ModelLimits(8000, "test", "openai/gpt-4o"))
    built = DecisionRecord.build(decide(request, load_settings({})), request)
    assert built.proves_window is proves
    shared = learning()
    kwargs = {"litellm_params": {"model_info": {"id": "dep"}}, "call_type": "acompletion"}
    asyncio.run(learn_from_usage(shared, kwargs, built, 7000))
    assert shared.served.floor("dep") == (7000 if proves else 0)


def test_teachers_with_a_factor_of_their_own_are_not_pushed_out_by_keys_that_taught_a_ratio_or_two():
    """At most ``MAX_TEACHERS`` teachers per deployment. The one that leaves is the least recent without a factor of
    its own (fewer than ``min_samples`` ratios), else the least recent idle a day, else the newcomer (an attack
    review: sixteen keys took a tenant's factor from 1.30 to 1.0 by pushing its ratios out, and its 13,500-token
    estimate was billed 17,550 in a 16,000 window)."""
    now = [1000.0]
    book = CorrectionBook(LearningSettings(min_samples=5), clock=lambda: now[0])
    for _ in range(5):
        book.add_ratio("dep", 1.3, "key:victim")
    for index in range(3 * MAX_TEACHERS):
        book.add_ratio("dep", 1.0, f"key:sybil{index}")
    assert book.teachers("dep")["key:victim"] == 5 and len(book.teachers("dep")) == MAX_TEACHERS
    assert book.factor("dep", "key:victim") == 1.3
    for index in range(MAX_TEACHERS):
        for _ in range(5):
            book.add_ratio("dep", 1.0, f"key:other{index}")
    # every teacher kept has a factor of its own and taught today: the newcomer is not kept (it gets the consensus)
    assert "key:victim" in book.teachers("dep") and f"key:other{MAX_TEACHERS - 1}" not in book.teachers("dep")
    now[0] += IDLE_TEACHER_SECONDS + 1  # a day later, the least recent idle teacher makes room
    book.add_ratio("dep", 1.1, "key:next")
    assert "key:victim" not in book.teachers("dep") and "key:next" in book.teachers("dep")


def test_an_error_about_another_prompt_teaches_nothing():
    shared = learning()
    message = "prompt is too long: 900000 tokens > 200000 maximum"
    learned = asyncio.run(learn_from_error(shared, failure(message), record(estimate_forwarded=5000)))
    assert "ignored" in learned and shared.window(["dep"]) is None and shared.corrections.samples("dep") == []


def test_served_floors_expire():
    now = [0.0]
    floor = ServedFloor(LearningSettings(window_ttl_seconds=10), clock=lambda: now[0])
    floor.serve("dep", 5000)
    assert floor.floor("dep") == 5000 and not floor.serve("dep", 4000)
    now[0] = 11.0
    assert floor.floor("dep") == 0


# --- teachers -------------------------------------------------------------------------------------------------


def test_one_key_cannot_set_everyone_s_correction():
    book = CorrectionBook(LearningSettings(min_samples=5))
    for _ in range(200):
        book.add("dep", 1000, 1500, "key:attacker")  # the window's every recent sample
    for teacher in ("key:b", "key:c"):
        for _ in range(5):
            book.add("dep", 1000, 1020, teacher)
    assert book.factor("dep", "key:attacker") == 1.5  # what it taught applies to itself
    assert book.factor("dep", "key:b") == 1.02 and book.factor("dep", "key:new") == 1.02
    assert book.teachers("dep") == {"key:attacker": 200, "key:b": 5, "key:c": 5}  # a flood evicts no one else


def test_one_key_cannot_lower_what_others_taught():
    """A hundred keys, each below min_samples, teach 1.2 together; one key then teaches 0.9 on its own."""
    book = CorrectionBook(LearningSettings(min_samples=5, min_factor=0.5))
    for index in range(100):
        book.add("dep", 1000, 1200, f"key:{index}")
    assert book.factor("dep", "key:new") == 1.2
    for _ in range(200):
        book.add("dep", 1000, 900, "key:attacker")
    assert book.factor("dep", "key:new") == 1.2 and book.factor("dep", "key:attacker") == 1.2


def test_alone_a_teacher_s_correction_applies_to_everyone():
    book = CorrectionBook(LearningSettings(min_samples=5))
    for _ in range(5):
        book.add("dep", 1000, 1300, "key:only")
    assert book.factor("dep", "key:other") == 1.3 and book.factor("dep") == 1.3


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0.4, 2.9), min_size=0, max_size=80), st.floats(1.0, 1.4), st.integers(2, 5))
def test_a_qualified_teacher_keeps_its_own_correction_and_a_lone_attacker_moves_no_majority(
        attack, honest, teachers):
    book = CorrectionBook(LearningSettings(min_samples=3, max_factor=3.0))
    for index in range(teachers):
        for _ in range(3):
            book.add_ratio("dep", honest, f"key:{index}")
    for ratio in attack:
        book.add_ratio("dep", ratio, "key:attacker")
    expected = book.factor("dep", "key:0")
    assert expected is not None and expected >= honest - 1e-9
    assert book.factor("dep", "key:newcomer") == expected  # the consensus is the honest majority's


def test_teachers_are_hashes_and_shared_entries_keep_them():
    teacher = teacher_of("sk-secret", None)
    assert teacher.startswith("key:") and "secret" not in teacher and teacher_of(None, None) == ANONYMOUS
    assert teacher_of(None, "team-1").startswith("team:")
    shared = {b"key:old": b"100 1.25 1.3", b"key:new": b"200 1.1 nan -1", b"key:bad": b"300 x"}
    assert _teachers(shared) == {"key:old": [1.25, 1.3], "key:new": [1.1]}  # least recently taught first


def test_ratios_no_count_could_be_off_by_are_not_kept():
    book = CorrectionBook(LearningSettings())
    assert book.add("dep", 1000, 900_000) is None and book.add("dep", 1000, 200) is None
    assert book.add("dep", 1000, 1300) == 1.3


def test_a_wildcard_deployment_teaches_nothing():
    """One deployment id serves every model the client names behind ``openai/*``."""
    shared = learning()
    wild = record(metrics_group="wild/*")
    learned = asyncio.run(learn_from_error(shared, failure(OPENAI_OVERFLOW.format(w=1500, t=3100, p=3000)), wild))
    assert "ignored" in learned and shared.window(["dep"]) is None
    kwargs = {"litellm_params": {"model_info": {"id": "dep"}}, "call_type": "acompletion"}
    assert asyncio.run(learn_from_usage(shared, kwargs, wild, 7000)) is None and shared.served.floor("dep") == 0


def test_a_router_of_the_clients_own_teaches_nothing():
    """With ``user_config`` (forwarded in shadow mode) the client names the deployment ids: one of another group's
    would set its window for every tenant (an attack review taught an 8k deployment a 1,100-token window)."""
    shared = learning()
    routed = record(routed_by_client=True)
    assert asyncio.run(learn_from_error(shared, failure(OPENAI_OVERFLOW.format(w=1500, t=3100, p=3000)), routed)) \
        is None and shared.window(["dep"]) is None
    kwargs = {"litellm_params": {"model_info": {"id": "dep"}}, "call_type": "acompletion"}
    assert asyncio.run(learn_from_usage(shared, kwargs, routed, 7000)) is None and shared.served.floor("dep") == 0


def test_a_floor_stays_while_the_deployment_keeps_serving():
    now = [0.0]
    floor = ServedFloor(LearningSettings(window_ttl_seconds=10), clock=lambda: now[0])
    floor.serve("dep", 5000)
    for moment in (8.0, 16.0, 24.0):  # smaller prompts keep coming
        now[0] = moment
        floor.serve("dep", 1000)
    assert floor.floor("dep") == 5000


def test_a_comma_list_gets_the_strictest_policy_of_its_groups():
    from budget_hook.policy import load_settings

    layers = load_settings({"models": {"a-open": {"mode": "shadow"}, "z-strict": {"max_input_tokens": 3000}}}).layers
    resolved = layers.resolve(model_group="z-strict,a-open", routed_groups=("a-open", "z-strict"))
    assert resolved.policy.mode == "enforce" and resolved.policy.budget.max_input_tokens == 3000
    alone = layers.resolve(model_group="alias", routed_groups=("a-open",))
    assert alone.policy.mode == "shadow"  # one routed group: its own policy


def test_metadata_values_are_never_quoted_in_records():
    from budget_hook.pipeline.decider import setting_names

    secret = "PII-jane.doe@example.com"
    assert secret not in setting_names({"mode": secret, secret: 1}) and "mode" in setting_names({"mode": secret})
    assert "max_input_token" in setting_names({"max_input_token": 5})


def test_keys_inside_content_weigh_in_the_offload_choice():
    from budget_hook.proxy.offload import approximate_size

    key = "A" * 2_000_000
    body = {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"properties": {key: {}}}}}]}
    assert approximate_size(body, 50_000, ("tools",)) >= 50_000


TRANSFORMED = [  # a request whose text a provider (or LiteLLM on the way) may turn into an overflow sentence
    {"a": "ｍａｘｉｍｕｍ　ｃｏｎｔｅｘｔ　ｌｅｎｇｔｈ"},  # full-width: NFKC
    {"a": "maxi\u200bmum context length"},  # a zero-width space
    {"proxy_server_request": {"url": "http://gw/v1/x?q=maximum%20context+length"}},  # a query string
    {"messages": [{"content": [{"type": "text", "text": "maximum con"}, {"type": "text", "text": "text length"}]}]},
    {"tool_calls": [{"function": {"arguments": '{"a": "\\u006daximum context length"}'}}]},  # JSON escapes
    {"file_data": "data:text/plain;base64,bWF4aW11bSBjb250ZXh0IGxlbmd0aA=="},  # base64 text
    {"raw": b"maximum context length"},
]


def test_text_a_provider_may_decode_or_normalise_is_found():
    for body in TRANSFORMED:
        assert quotes_overflow(body), body


def test_an_error_without_a_prompt_count_teaches_no_window():
    shared = learning()
    learned = asyncio.run(learn_from_error(shared, failure("This model's maximum context length is 2000 tokens."),
                                           record()))
    assert "ignored" in learned and "window" not in learned and shared.window(["dep"]) is None
    message = ("This model's maximum context length is 4000 tokens. However, your messages resulted in 5000 "
               "tokens. Please reduce the length of the messages.")
    assert asyncio.run(learn_from_error(shared, failure(message), record()))["window"] == 4000


def test_a_call_id_two_requests_shared_is_marked():
    from budget_hook.proxy.records import RecordStore

    store: RecordStore[str] = RecordStore()
    store.remember("id-1", "clean")
    assert not store.collided("id-1")
    store.remember("id-1", "quoting")  # a client reused its call id while the first was in flight
    assert store.collided("id-1") and not store.collided("id-2")
    store.settle("id-1", "failure")
    store.remember("id-1", "again")  # or right after it failed
    assert store.collided("id-1")


def test_whether_a_request_quotes_overflow_wording_is_asked_of_failures_only(monkeypatch):
    """The search for overflow wording walks the whole request (metadata, headers, LiteLLM's copy of the body):
    it matters only when a provider's error may echo it, so a request that succeeds is never searched, and a
    failed one is searched once, in the pool when large; an answer never given counts as quoting."""
    import budget_hook.proxy.outcomes as outcomes
    from budget_hook.proxy.offload import Offloader
    from budget_hook.proxy.records import RecordStore

    searched: list[object] = []

    def search(value):
        searched.append(value)
        return quotes_overflow(value)
    monkeypatch.setattr(outcomes, "quotes_overflow", search)
    plugin = SimpleNamespace(records=RecordStore(), offloader=Offloader(threads=1, offload_chars=10**6))
    quoting = {"messages": [{"role": "user", "content": "why does it say Maximum Context Length?"}]}
    clean = {"messages": [{"role": "user", "content": "hello"}]}
    for call_id, body in (("ok", clean), ("quoting", quoting), ("clean", clean)):
        plugin.records.remember(call_id, record(), None, body)
    plugin.records.settle("ok", "success")
    assert plugin.records.unasked("ok") == (False, None), "a success lets the request go, unsearched"
    assert plugin.records.quoted("quoting") and plugin.records.quoted("clean"), "not asked yet: taken as quoting"
    assert asyncio.run(outcomes.quoted(plugin, "quoting")) is True
    assert asyncio.run(outcomes.quoted(plugin, "clean")) is False
    assert asyncio.run(outcomes.quoted(plugin, "clean")) is False
    assert searched == [quoting, clean], "each failed request searched once; the succeeded one never"
    assert plugin.records.unasked("clean") == (False, None), "the request is let go once answered"
    plugin.records.settle("clean", "failure")
    plugin.records.update("clean", record())  # a fallback after the failure keeps the answer
    assert asyncio.run(outcomes.quoted(plugin, "clean")) is False and len(searched) == 2
    plugin.records.remember("blocked", record())  # a block, or the plugin's own failure: no request kept
    assert asyncio.run(outcomes.quoted(plugin, "blocked")) is True
    assert asyncio.run(outcomes.quoted(plugin, "unknown")) is True

    def broken(value):
        raise RecursionError("deep")
    monkeypatch.setattr(outcomes, "quotes_overflow", broken)
    plugin.records.remember("odd", record(), None, clean)
    assert asyncio.run(outcomes.quoted(plugin, "odd")) is True, "a search that fails teaches nothing"


def test_the_request_searched_on_failure_is_the_one_the_hooks_saw_and_what_the_provider_was_sent(monkeypatch):
    """The search runs after the call, so it reads a two-level snapshot taken when the decision was made:
    a field LiteLLM pops from the body or its metadata once the hooks ran (and forwards) is still searched.
    A failure's logging data carries the body the provider was sent (``complete_input_dict``): searched too."""
    import budget_hook.proxy.outcomes as outcomes
    from budget_hook.proxy.offload import Offloader

    data = {"model": "g", "messages": [{"role": "user", "content": "hi"}],
            "extra_body": {"note": "maximum context length"}, "metadata": {"tag": "prompt is too long"}}
    kept = outcomes.snapshot(data)
    data.pop("extra_body")
    data["metadata"].pop("tag")
    assert not quotes_overflow(data) and quotes_overflow(kept)
    assert kept["messages"] is not data["messages"] and kept["messages"][0] is data["messages"][0]

    plugin = SimpleNamespace(offloader=Offloader(threads=1, offload_chars=10**6))
    sent = {"additional_args": {"complete_input_dict": {"input": [{"text": "exceed context limit"}]}}}
    assert asyncio.run(outcomes.sent_quotes(plugin, sent)) is True
    assert asyncio.run(outcomes.sent_quotes(plugin, {"additional_args": {"complete_input_dict": {"x": "hi"}}})) is False
    assert asyncio.run(outcomes.sent_quotes(plugin, {})) is False, "nothing sent on record: the request alone"

    def broken(value):
        raise RecursionError("deep")
    monkeypatch.setattr(outcomes, "quotes_overflow", broken)
    assert asyncio.run(outcomes.sent_quotes(plugin, sent)) is True, "a search that fails teaches nothing"
