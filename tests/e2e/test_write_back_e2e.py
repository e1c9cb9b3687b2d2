"""What a trim writes back stays what the provider accepts, and loses nothing the record does not name (a tenth attack
review, 2026-12-07), through a real proxy and the stand-in, which refuses what Anthropic refuses:

* with ``thinking`` on, the turn in progress must open with the thinking block Claude wrote: a trim that dropped the
  turn's first step (its thinking, non-interleaved) sent ``[tool_use]`` first, and Anthropic answers 400;
* a tool result holding a search result or a document was compacted as its rendering, and the block kept: the
  provider got it twice, the client's own text was gone, and the record's figures were false;
* on chat, a ``cache_control`` breakpoint was compacted away (the client's prompt cache busted, nothing said);
* cited text was shortened, its citations dropped.
"""

from __future__ import annotations

import json

import pytest

from .harness import payloads_with, post, serve_config, start_fake_provider, wait_for_record

pytestmark = pytest.mark.e2e
WINDOW = 4000
OUTPUT = "lorem ipsum dolor sit amet consectetur " * 60  # ~360 tokens


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("write_back")
    upstream = start_fake_provider(folder, {"claude-sonnet-4-5-4k": WINDOW})
    config = {
        "model_list": [{"model_name": "claude", "model_info": {"max_input_tokens": WINDOW}, "litellm_params": {
            "model": "anthropic/claude-sonnet-4-5-4k", "api_base": f"http://127.0.0.1:{upstream.port}",
            "api_key": "fake-key"}}],
        "litellm_settings": {"callbacks": "budget_hook.proxy.plugin", "num_retries": 0},
        "callback_settings": {"budget_hook": {}},
    }
    yield from serve_config(folder, config, upstream)


def thinking_loop(marker: str) -> list[dict]:
    """A tool loop in progress without interleaved thinking: Claude thought once, at the turn's first step."""
    messages = [{"role": "user", "content": f"fix the build [{marker}]"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "I should run make first.", "signature": "c2ln" * 40},
                    {"type": "tool_use", "id": "t0", "name": "sh", "input": {"cmd": "make 0"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": f"0 {OUTPUT}"}]}]
    for step in range(1, 6):
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{step}", "name": "sh",
                                               "input": {"cmd": f"make {step}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{step}",
                                          "content": f"{step} {OUTPUT}"}]}]
    return messages


def as_chat(messages: list[dict]) -> list[dict]:
    """The same loop as a chat client sends it to Claude through LiteLLM (``thinking_blocks``, tool messages)."""
    out: list[dict] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append(message)
        elif message["role"] == "assistant":
            thinking = [b for b in content if b["type"] == "thinking"]
            out.append({"role": "assistant", "content": None, **({"thinking_blocks": thinking} if thinking else {}),
                        "tool_calls": [{"id": b["id"], "type": "function", "function": {
                            "name": b["name"], "arguments": json.dumps(b["input"])}} for b in content
                            if b["type"] == "tool_use"]})
        else:
            out += [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]} for b in content]
    return out


@pytest.mark.parametrize("route", ["/v1/messages", "/v1/chat/completions"])
def test_a_trimmed_tool_loop_still_opens_with_its_thinking(served, route):
    proxy, upstream = served
    marker = f"e2e-thinking-opening-{route.rsplit('/', 1)[-1]}"
    loop = thinking_loop(marker)
    body = {"model": "claude", "max_tokens": 1500, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "messages": loop if route == "/v1/messages" else as_chat(loop)}
    response = post(proxy, route, body)
    assert response.status_code == 200, response.text
    [payload] = payloads_with(upstream, marker)
    messages = payload["messages"]
    assert len(messages) < len(loop)  # trimmed: later steps left, the first one stayed
    first = next(m for m in messages if m["role"] == "assistant")
    assert first["content"][0]["type"] == "thinking" and first["content"][1]["id"] == "t0"
    assert messages[-1]["content"][0]["tool_use_id"] == "t5"  # the result being answered, whole
    assert OUTPUT in messages[-1]["content"][0]["content"] or OUTPUT in json.dumps(messages[-1])
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "trimmed"


def test_a_compacted_result_never_sends_a_search_result_twice(served):
    """A result holding a search result and the tool's own text: it stays whole or leaves with its call."""
    proxy, upstream = served
    marker = "e2e-search-result-once"
    found = {"type": "search_result", "source": "https://example.com/doc", "title": "Doc",
             "content": [{"type": "text", "text": f"found {OUTPUT}"}], "citations": {"enabled": True}}
    messages = [{"role": "user", "content": f"research this [{marker}]"}]
    for step in range(5):
        inner = [found, {"type": "text", "text": f"notes {step} {OUTPUT}"}] if step % 2 == 0 else f"{step} {OUTPUT}"
        messages += [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"s{step}", "name": "search",
                                               "input": {"q": f"q{step}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"s{step}", "content": inner}]}]
    response = post(proxy, "/v1/messages", {"model": "claude", "max_tokens": 1000, "messages": messages})
    assert response.status_code == 200, response.text
    [payload] = payloads_with(upstream, marker)
    for message in payload["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") != "tool_result" or not isinstance(block.get("content"), list):
                continue
            texts = [b["text"] for b in block["content"] if b.get("type") == "text"]
            assert not any('"type":"search_result"' in text for text in texts)  # never its rendering as text
            original = next(m for m in messages if isinstance(m["content"], list)
                            and m["content"][0].get("tool_use_id") == block["tool_use_id"])["content"][0]
            if any(b.get("type") == "search_result" for b in block["content"]):
                assert block["content"] == original["content"]  # whole, as the client sent it
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "trimmed"


def test_a_chat_prompt_cache_breakpoint_stays_when_later_messages_can_make_room(served):
    """Chat clients mark Claude's cache breakpoints on messages (Cline, aider); the prefix up to the last one is
    rewritten only when nothing after it can make the request fit, and then the record says so."""
    proxy, upstream = served
    marker = "e2e-chat-cache-prefix"
    cached = {"role": "tool", "tool_call_id": "c0", "content": [
        {"type": "text", "text": f"0 {OUTPUT}", "cache_control": {"type": "ephemeral"}}]}
    messages = [{"role": "user", "content": f"fix it [{marker}]"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c0", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]}, cached]
    for step in range(1, 7):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                          {"id": f"c{step}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{step}", "content": f"{step} {OUTPUT}"}]
    response = post(proxy, "/v1/chat/completions", {"model": "claude", "max_tokens": 1000, "messages": messages})
    assert response.status_code == 200, response.text
    [payload] = payloads_with(upstream, marker)
    [result] = [b for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"]
                if b.get("type") == "tool_result" and b["tool_use_id"] == "c0"]
    assert result["content"][0]["cache_control"] == {"type": "ephemeral"} and OUTPUT in result["content"][0]["text"]
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "trimmed" and "cache_prefix_rewritten" not in (
        record["decision"].get("notes") or [])


def test_cited_text_keeps_its_citations_or_leaves_whole(served):
    """The task's cited answer is opening context, shortened when nothing else fits: it is never rewritten now."""
    proxy, upstream = served
    marker = "e2e-cited-text"
    lines = "log line with some build output 1234 " * 60
    citation = {"type": "char_location", "cited_text": "log line", "document_index": 0, "document_title": "d",
                "start_char_index": 0, "end_char_index": 8}
    answer = [{"type": "text", "text": f"Per the doc: {lines[:1500]}", "citations": [citation]},
              {"type": "text", "text": f"Second: {lines[:750]}", "citations": [citation]}]
    messages = [{"role": "user", "content": f"Task: fix the build [{marker}]"}, {"role": "assistant", "content": answer},
                {"role": "user", "content": "go on"}]
    for step in range(1, 7):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"b{step}", "name": "bash",
                                                        "input": {"cmd": f"s{step}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"b{step}",
                                                   "content": f"r{step} {lines}"[:2500]}]}]
    response = post(proxy, "/v1/messages", {"model": "claude", "max_tokens": 500, "messages": messages})
    assert response.status_code == 200, response.text
    [payload] = payloads_with(upstream, marker)
    assert payload["messages"][1] == {"role": "assistant", "content": answer}
    record = wait_for_record(proxy, response.headers["x-litellm-call-id"])
    assert record["decision"]["action"] == "trimmed"
    assert "shortened" not in [action["action"] for action in record["decision"]["actions"]]
