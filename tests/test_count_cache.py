"""The count cache never changes a count: cached and uncached counting agree on any message, in any order."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget_hook.counting import TokenCounter
from budget_hook.counting.cache import COUNT_CACHE, CountCache

COUNTERS = [TokenCounter.for_model(m) for m in ("gpt-4o", "gpt-4", "anthropic/claude-sonnet-4-5", "no-such-model")]
texts = st.lists(st.sampled_from(["a", "b", " ", "\x1f", "\x00", "1", "é", "<|endoftext|>"]), max_size=30).map("".join)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"])},
    optional={
        "content": st.one_of(st.none(), texts, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}),
                                                        max_size=4)),
        "name": st.one_of(st.none(), texts),
        "tool_call_id": texts,
        "refusal": texts,
        "tool_calls": st.lists(st.fixed_dictionaries({"id": texts, "type": st.just("function"),
                                                      "function": st.fixed_dictionaries({"name": texts,
                                                                                         "arguments": texts})}),
                               max_size=2),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages, min_size=1, max_size=6), st.booleans())
def test_cached_counts_equal_uncached_counts(batch, pad_system):
    for counter in COUNTERS:
        COUNT_CACHE.configure(0)
        truth = [counter.count_message(m, pad_system=pad_system) for m in batch]
        COUNT_CACHE.configure(65_536)
        for _ in range(2):  # cold, then warm: every answer must be the true one
            assert [counter.count_message(m, pad_system=pad_system) for m in batch] == truth


@pytest.mark.parametrize("first, second", [
    ({"role": "user", "content": [{"type": "text", "text": "hi"}] * 50},
     {"role": "user", "content": [{"type": "text", "text": "\x1f".join(["hi"] * 50)}]}),
    ({"role": "system", "name": "x", "content": None}, {"role": "system", "name": "x", "content": ""}),
    # tool calls are keyed by their strings without JSON: a string moved between fields is another message
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "ab", "type": "function", "function": {"name": "c", "arguments": "{}"}}]},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "a", "type": "function", "function": {"name": "bc", "arguments": "{}"}}]}),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}}] * 2},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}, "index": 0}] * 2}),
])
def test_lookalike_messages_do_not_share_a_count(first, second):
    counter = COUNTERS[0]
    COUNT_CACHE.configure(0)
    truth = (counter.count_message(first, pad_system=True), counter.count_message(second, pad_system=True))
    COUNT_CACHE.configure(65_536)
    COUNT_CACHE.clear()
    assert (counter.count_message(first, pad_system=True), counter.count_message(second, pad_system=True)) == truth


def test_the_lru_is_bounded_and_evicts_the_least_recently_used():
    cache = CountCache(max_entries=3)
    for key in "abc":
        cache.put(key, 1)
    cache.get("a")
    cache.put("d", 1)
    assert cache.get("b") is None and cache.get("a") == 1 and len(cache) == 3
    cache.configure(1)
    assert len(cache) == 1
    with pytest.raises(ValueError):
        cache.configure(-1)
