"""Two relations between trimmer settings that are deliberately *not* refused (docs/settings.md,
"Settings that depend on each other"), held here in both directions so the documentation stays true."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from budget_hook.errors import CannotFitError
from budget_hook.trimming import TrimPolicy, trim_request

from .test_trimming import COUNTER, budget_of, conversations


def _trim(body, budget, policy):
    try:
        result = trim_request(body, counter=COUNTER, budget=budget, policy=policy)
    except CannotFitError as exc:
        return ("refused", exc.facts["tokens_after_trimming"])
    return ("trimmed", result.request, [(a.index, a.action) for a in result.report.actions])


@settings(max_examples=60, deadline=None)
@given(conversations(), st.floats(0.2, 1.0), st.booleans(), st.booleans())
def test_without_keep_opening_context_the_opening_context_switches_change_nothing(body, fraction, drop, reduce):
    """With ``keep_opening_context: false`` no message is opening context: ``drop_opening_context`` and
    ``reduce_opening_context`` have nothing to act on (the earlier rungs treat those messages as history),
    so any value of theirs gives the same result. Refusing ``drop_opening_context: true`` there would refuse
    every config that only turns ``keep_opening_context`` off (its default is true)."""
    budget = budget_of(max(1, int(COUNTER.count_request(body).total * fraction)))
    off = TrimPolicy(keep_opening_context=False, drop_opening_context=False, reduce_opening_context=False)
    other = TrimPolicy(keep_opening_context=False, drop_opening_context=drop, reduce_opening_context=reduce)
    assert _trim(body, budget, other) == _trim(body, budget, off)


def test_with_keep_opening_context_the_switches_do_act():
    """The other direction: with the opening context kept, the same switches decide between dropping it and
    refusing (so the no-op above is the missing opening context, not a dead switch)."""
    task = "do the task " * 10
    body = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "AGENTS.md: " + "rule " * 3000}, {"role": "user", "content": task},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]}
    budget = budget_of(1500)
    dropped = _trim(body, budget, TrimPolicy(reduce_opening_context=False))
    refused = _trim(body, budget, TrimPolicy(drop_opening_context=False, reduce_opening_context=False))
    assert dropped[0] == "trimmed" and (0, "dropped") in dropped[2]
    assert refused[0] == "refused"


def _assistant_history(length: int) -> dict:
    return {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a " * (length // 2)},
        {"role": "user", "content": "q2"}, {"role": "assistant", "content": "short"},
        {"role": "user", "content": "q3 " * 400}]}


def test_assistant_keep_chars_above_assistant_min_chars_only_raises_the_threshold():
    """``assistant_keep_chars`` > ``assistant_min_chars`` is not a contradiction: a message is shortened only
    when it is longer than both (``versions.py``: ``len >= assistant_min_chars and len > assistant_keep_chars``),
    so a message of a length between them is never "shortened" into a longer one; one over both keeps
    ``assistant_keep_chars``. (The property suites draw such pairs: 1000 over 300.)"""
    def policy(keep: int) -> TrimPolicy:
        return TrimPolicy(assistant_keep_chars=keep, assistant_min_chars=300, drop_old_turns=False,
                          cache_step_ratio=0, keep_opening_context=False)

    between = _assistant_history(800)  # over min, under keep: left whole, even when the request must give
    budget = budget_of(COUNTER.count_request(between).total - 50)
    assert (1, "shortened") in _trim(between, budget, policy(100))[2]  # (the room a shorter keep does make)
    assert _trim(between, budget, policy(1000))[0] == "refused"
    longer = _assistant_history(4000)  # over both: shortened to its head of assistant_keep_chars
    trimmed = trim_request(longer, counter=COUNTER, budget=budget_of(COUNTER.count_request(longer).total - 300),
                           policy=policy(1000))
    assert (1, "shortened") in [(a.index, a.action) for a in trimmed.report.actions]
    kept = trimmed.request["messages"][1]["content"]
    assert kept.startswith(longer["messages"][1]["content"][:1000]) and len(kept) < 4000
