"""A trim may tokenize a long message's cuts a dozen times (graded cuts, each settling its marker's claim), and the
inline-or-pool choice weighs a request's size: a 46 KB request whose one tool result had to be cut was trimmed on the
event loop at 6-13x the cost of counting it (an attack review, 2026-12-06). A trim of more message text than
``offload.INLINE_TRIM_SHARE`` of the threshold now runs in the pool (``trimming.elsewhere``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from litellm.proxy._types import UserAPIKeyAuth

from budget_hook.counting import encodings
from budget_hook.counting.cache import COUNT_CACHE
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.hook import BudgetHookHTTPError, BudgetHookPlugin
from budget_hook.trimming import settled

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "engineers", "review", "pull",
         "requests")


def prose(chars: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(chars // 5))[:chars]


#: a result whose middle costs ~6x fewer tokens per character than its ends: each graded cut saves less than
#: estimated, so ``graded`` tries all 6 cuts, each settled by ~3 full counts (``renumbered`` is off past 8,192 chars)
HOSTILE = ("a b c d e f g h " * 400)[:5000] + ("information " * 3100)[:37000] + ("a b c d e f g h " * 400)[:5000]


@pytest.mark.parametrize("text", ["prose", "hostile"])
@pytest.mark.parametrize("model", ["gpt-4", "gemini/gemini-1.5-flash"])
def test_a_trim_decided_on_the_event_loop_costs_no_more_than_counting_the_request_twice(model, text, monkeypatch):
    plugin = BudgetHookPlugin(load_settings({"log_to_stderr": False}))  # the default offload_chars (50,000)
    result = prose(46_000) if text == "prose" else HOSTILE
    body = {"model": model, "litellm_call_id": "loop-trim-cpu", "messages": [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
        {"role": "user", "content": "next"}]}
    on_loop: list[int] = []
    original = encodings.safe_encode

    def traced(encode, text, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            on_loop.append(len(text))
        return original(encode, text, *args, **kwargs)

    monkeypatch.setattr(encodings, "safe_encode", traced)
    COUNT_CACHE.clear()
    settled.ANCHOR_TRIMS.clear()
    with contextlib.suppress(BudgetHookHTTPError):  # the hostile one ends as a block, after the same work
        asyncio.run(plugin.async_pre_call_hook(UserAPIKeyAuth(), None, body, "acompletion"))
    # before: prose ~266,000 characters (17-43 ms on the loop), hostile 562,000-600,000 (60-93 ms)
    assert sum(on_loop) <= 2 * len(result), f"{sum(on_loop)} characters tokenized on the event loop"


def test_a_small_trim_stays_on_the_loop_and_a_large_one_is_decided_again_elsewhere():
    from budget_hook.trimming.elsewhere import TrimElsewhere, check_inline, inline_trim
    messages = [{"role": "user", "content": "x" * 2900}, {"role": "tool", "content": "y" * 200}]
    check_inline(messages)  # no limit set: any trim
    with inline_trim(3_125):
        check_inline(messages)
        with pytest.raises(TrimElsewhere):
            check_inline([*messages, {"role": "user", "content": "z" * 30}])
    check_inline([*messages, {"role": "user", "content": "z" * 30}])  # the limit is the block's only
