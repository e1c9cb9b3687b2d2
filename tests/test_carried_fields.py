"""Message fields LiteLLM turns into content, counted as what is sent (an attack review, 2026-12-06; each case
passed a small window under ``unreadable_content: block`` before): each test builds the request, asks LiteLLM's own
translation function what it sends, and holds the plugin's count at or above the tokens of that."""

from __future__ import annotations

import json

import litellm
import pytest
from litellm.litellm_core_utils.prompt_templates.factory import (
    _bedrock_converse_messages_pt,
    anthropic_messages_pt,
)
from litellm.llms.vertex_ai.gemini.transformation import (
    _gemini_convert_messages_with_history,
    _transform_system_message,
)
from litellm.utils import validate_and_fix_openai_messages

from budget_hook.counting import TokenCounter
from budget_hook.counting.encodings import get_encoding

PAGE = "Revenue grew in every region; APAC led with strong enterprise demand and new partnerships. " * 700
O200K = get_encoding("o200k_base")


def tokens(value) -> int:
    return len(O200K.encode_ordinary(value if isinstance(value, str) else json.dumps(value)))


def counted(model: str, messages: list[dict]) -> int:
    return TokenCounter.for_model(model).count_request({"messages": messages}).total


def copy(messages):
    return json.loads(json.dumps(messages))


def test_claude_s_server_tool_results_and_compaction_blocks_are_counted():
    result = {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_01abc", "content": {
        "type": "web_fetch_result", "url": "https://example.com/report",
        "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": PAGE}}}}
    call = {"id": "srvtoolu_01abc", "type": "function", "function": {"name": "web_fetch", "arguments": "{}"}}
    for fields in ({"tool_results": [result]}, {"web_search_results": [{**result, "type": "web_search_tool_result"}]},
                   {"compaction_blocks": [{"type": "compaction", "content": PAGE}]}):
        assistant = {"role": "assistant", "content": "Fetching.", "provider_specific_fields": fields,
                     **({"tool_calls": [call]} if "compaction_blocks" not in fields else {})}
        messages = [{"role": "user", "content": "fetch the report"}, assistant, {"role": "user", "content": "go on"}]
        sent = anthropic_messages_pt(copy(messages), model="claude-sonnet-4-5", llm_provider="anthropic")
        assert tokens(sent[1]["content"]) > 10_000, fields.keys()  # LiteLLM does send it
        assert counted("anthropic/claude-sonnet-4-5", messages) >= tokens(sent[1]["content"]), fields.keys()


def test_gemini_s_server_side_tool_invocations_are_counted():
    messages = [{"role": "user", "content": "look it up"},
                {"role": "assistant", "content": "Done.", "provider_specific_fields": {
                    "server_side_tool_invocations": [{"tool_type": "URL_CONTEXT", "id": "t1",
                                                      "args": {"url": "https://example.com"},
                                                      "response": {"content": PAGE}}],
                    "thought_signatures": ["c2lnbmF0dXJl"]}},
                {"role": "user", "content": "summarise it"}]
    sent = _gemini_convert_messages_with_history(messages=copy(messages), model="gemini-2.5-flash")
    parts = {key: value for part in sent[1]["parts"] for key, value in part.items()}
    carried = tokens(parts["toolCall"]["args"]) + tokens(parts["toolResponse"]["response"])  # what Gemini reads
    assert counted("gemini/gemini-2.5-flash", messages) >= carried > 10_000


def test_bedrock_s_search_results_are_counted():
    para = "The quarterly report shows revenue growth across all regions, with strength in APAC markets. "
    results = [{"source": f"https://example.com/doc{i}", "title": f"Result {i}", "content": [{"text": para * 40}]}
               for i in range(10)]
    messages = [{"role": "user", "content": "search"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok", "search_results": results}]
    model = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    sent = _bedrock_converse_messages_pt(messages=copy(messages), model=model, llm_provider="bedrock")
    assert counted(f"bedrock/{model}", messages) >= tokens(sent[-1]["content"]) > 5_000


@pytest.mark.parametrize("call_id", ["call_1", ["call_1"], {"id": "call_1"}, 7])
def test_cohere_v1_repeats_a_call_for_results_whose_ids_are_equal_whatever_their_type(call_id):
    args = json.dumps({"query": "Revenue grew in every region; APAC led with strong enterprise demand. " * 60})
    messages = [{"role": "user", "content": "look it up"},
                {"role": "assistant", "content": "Searching.", "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "search", "arguments": args}}]}]
    messages += [{"role": "tool", "tool_call_id": call_id, "content": f"result {i}"} for i in range(15)]
    sent = litellm.AmazonInvokeConfig().transform_request(
        model="cohere.command-r-plus-v1:0", messages=validate_and_fix_openai_messages(copy(messages)),
        optional_params={}, litellm_params={}, headers={})
    assert counted("bedrock/cohere.command-r-plus-v1:0", messages) >= \
        tokens(sent["message"]) + tokens(sent["chat_history"]) > 10_000


@pytest.mark.parametrize("part", [
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    {"type": "file", "file": {"file_data": "data:text/plain;base64,aGk="}},
])
def test_gemini_s_system_instruction_takes_a_media_part_s_text(part):
    text = "Always answer in the formal register and cite the policy section for every claim you make. " * 600
    messages = [{"role": "system", "content": [{**part, "text": text}]}, {"role": "user", "content": "hello"}]
    system, _ = _transform_system_message(True, copy(messages))
    assert counted("gemini/gemini-2.5-flash", messages) >= tokens(system["parts"][0]["text"]) > 10_000


def test_a_thinking_block_gemini_is_sent_as_media_is_priced_as_the_media():
    """LiteLLM 1.103 sends Gemini a thinking block whose text is a JSON object as the part it spells (a PDF inline);
    1.108 no longer sends the block: the count holds for both."""
    import base64
    import zlib

    pages = b"\n".join(b"<< /Type /Page /Parent 2 0 R >>" for _ in range(100))
    pdf = base64.b64encode(b"%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /Filter /FlateDecode >>\nstream\n" +
                           zlib.compress(pages) + b"\nendstream\n\n%%EOF").decode()
    plain = [{"role": "user", "content": [{"type": "file", "file": {"file_data": f"data:application/pdf;base64,{pdf}"}}]}]
    thinking = json.dumps({"inline_data": {"mime_type": "application/pdf", "data": pdf}})
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok",
                 "thinking_blocks": [{"type": "thinking", "thinking": thinking, "signature": "c2ln"}]},
                {"role": "user", "content": "summarise the document"}]
    sent = _gemini_convert_messages_with_history(messages=copy(messages), model="gemini-2.5-flash")
    inline = [part for part in sent[1]["parts"] if "inline_data" in part]
    model = "gemini/gemini-2.5-flash"
    if inline:  # LiteLLM 1.103
        assert counted(model, messages) >= counted(model, plain) > 20_000
    assert counted(model, messages) >= counted(model, plain)


def test_a_claude_answer_sent_back_as_is_is_counted_once():
    """LiteLLM's Claude answers carry ``provider_specific_fields`` with a copy of their thinking blocks and citations;
    a client that sends the message back as is must not have them counted twice (only the fields LiteLLM turns into
    content count: the review of the eighth review's fix saw 9,220 tokens become 18,395, and a 12k window refuse)."""
    blocks = [{"type": "thinking", "thinking": "Let me think this through carefully. " * 400, "signature": "c2ln"}]
    answer = {"role": "assistant", "content": "Here is the plan.", "thinking_blocks": blocks}
    echoed = {**answer, "provider_specific_fields": {"thinking_blocks": blocks, "citations": None,
                                                     "context_management": {"applied_edits": []}}}
    ask = {"role": "user", "content": "plan it"}
    plain, sent_back = [ask, answer, ask], [ask, echoed, ask]
    model = "anthropic/claude-sonnet-4-5"
    assert counted(model, sent_back) == counted(model, plain)
    assert anthropic_messages_pt(copy(sent_back), model="claude-sonnet-4-5", llm_provider="anthropic") == \
        anthropic_messages_pt(copy(plain), model="claude-sonnet-4-5", llm_provider="anthropic")  # LiteLLM agrees


TOOL_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}}


def test_a_tool_s_input_examples_are_counted_however_the_request_spells_them():
    """LiteLLM's Claude mapping sends a chat tool's ``input_examples`` with the tool, beside its ``function`` or in
    it; ``/v1/messages`` and ``/v1/responses`` tools carry them as they are (a tenth attack review: 652 tokens
    counted, 14,057 received by an 8,000-token deployment)."""
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, decide
    from budget_hook.policy import load_settings
    from budget_hook.shapes import SHAPES

    examples = [{"query": PAGE}]
    function = {"name": "lookup", "description": "d", "parameters": TOOL_SCHEMA}
    for tool in ({"type": "function", "function": function, "input_examples": examples},
                 {"type": "function", "function": {**function, "input_examples": examples}}):
        mapped, _ = litellm.AnthropicConfig()._map_tool_helper(copy(tool))
        assert tokens(mapped["input_examples"]) > 10_000  # LiteLLM does send them
        request = {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}
        assert TokenCounter.for_model("anthropic/claude-sonnet-4-5").count_request(request).total >= tokens(mapped)
    limits = ModelLimits(8000, "test", "anthropic/claude-sonnet-4-5", filled_output_tokens=1000)
    for shape, body in (
        ("anthropic", {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
                       "tools": [{"name": "lookup", "input_schema": TOOL_SCHEMA, "input_examples": examples}]}),
        ("responses", {"max_output_tokens": 100, "input": "hi",
                       "tools": [{"type": "function", "name": "lookup", "parameters": TOOL_SCHEMA,
                                  "input_examples": examples}]}),
    ):
        decision = decide(BudgetRequest(SHAPES.get(shape), body, "g", limits), load_settings({}))
        assert decision.action == "blocked" and decision.tokens_before >= tokens(examples), shape


def test_an_assistant_s_reasoning_is_counted_under_either_name():
    """LiteLLM reads ``reasoning`` where ``reasoning_content`` is absent (``_extract_reasoning_content``: its Ollama
    route sends it as ``thinking``), and vLLM's chat template renders it: 212 tokens counted, 14,086 received."""
    from litellm.litellm_core_utils.prompt_templates.common_utils import _extract_reasoning_content

    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    assistant = {"role": "assistant", "content": "", "reasoning": PAGE, "tool_calls": [call]}
    assert _extract_reasoning_content(copy(assistant))[0] == PAGE
    messages = [{"role": "user", "content": "weather?"}, assistant, {"role": "tool", "tool_call_id": "call_1",
                                                                    "content": "18C"}]
    for model in ("hosted_vllm/Qwen/Qwen3-8B", "ollama_chat/qwen3:8b", "openai/gpt-4o"):
        assert counted(model, messages) >= tokens(PAGE), model


def test_openrouter_s_reasoning_details_are_counted_once_beside_its_reasoning():
    """Forwarded as they are, and OpenRouter takes them back as the model's reasoning; an answer sent back as
    OpenRouter gave it carries the same text as ``reasoning`` too: the larger of the two is counted."""
    details = [{"type": "reasoning.text", "text": PAGE, "format": "anthropic-claude-v1", "index": 0}]
    model = "openrouter/anthropic/claude-sonnet-4.5"
    alone = {"role": "assistant", "content": "ok", "reasoning_details": details}
    both = {**alone, "reasoning": PAGE}
    count_alone, count_both = (counted(model, [{"role": "user", "content": "hi"}, m, {"role": "user", "content": "go"}])
                               for m in (alone, both))
    assert count_alone >= tokens(details) and count_both == count_alone


def test_web_search_options_litellm_sends_claude_as_a_tool_are_counted():
    """A chat request's ``web_search_options`` reach Claude as LiteLLM's web search tool, its location with them (an
    eleventh attack review: 21 tokens counted, 21,022 received by a 4,000-token deployment)."""
    options = {"search_context_size": "low", "user_location": {"type": "approximate", "approximate": {"city": PAGE}}}
    tool = litellm.AnthropicConfig().map_web_search_tool(copy(options))
    assert tokens(tool) > 10_000  # LiteLLM does send the location
    request = {"messages": [{"role": "user", "content": "weather?"}], "web_search_options": options}
    assert TokenCounter.for_model("anthropic/claude-sonnet-4-5").count_request(request).total >= tokens(tool)
    assert TokenCounter.for_model("gpt-4o").count_request(request).total >= tokens(PAGE)
    empty = {"messages": [{"role": "user", "content": "weather?"}], "web_search_options": {}}  # still a tool
    assert TokenCounter.for_model("anthropic/claude-sonnet-4-5").count_request(empty).total > \
        TokenCounter.for_model("anthropic/claude-sonnet-4-5").count_request({"messages": empty["messages"]}).total


@pytest.mark.parametrize("where", ["property", "items", "variant", "parameters"])
def test_a_tool_schema_s_defaults_are_counted_wherever_they_stand(where):
    """OpenAI's harmony format writes a parameter's default beside it (``// default: ...``), templates that write the
    schema as JSON write every one; an eleventh review sent one of 27,000 tokens counted as 84, and a review of the
    fix found those under an array's items, a variant or the parameters themselves still uncounted."""
    from budget_hook.counting.tools import schema_defaults

    value = {"type": "string", "default": PAGE}
    schema = {"property": {"type": "object", "properties": {"query": value}},
              "items": {"type": "object", "properties": {"paths": {"type": "array", "items": value}}},
              "variant": {"type": "object", "properties": {"q": {"anyOf": [value, {"type": "null"}]}}},
              "parameters": {"type": "object", "default": {"query": PAGE}, "properties": {}}}[where]
    assert tokens(PAGE) <= tokens(schema_defaults([{"name": "f", "parameters": schema}]))
    request = {"messages": [{"role": "user", "content": "hi"}],
               "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    for model in ("gpt-4o", "gpt-3.5-turbo"):  # with and without the newer models' unrendered text
        assert TokenCounter.for_model(model).count_request(request).total >= tokens(PAGE), model


def test_a_responses_schema_s_name_and_description_are_counted():
    """``text.format``'s description is read by the model as chat's ``response_format`` one is; the conversion for
    counting kept only the schema (an eleventh review: 20 tokens counted, 18,018 sent)."""
    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, decide
    from budget_hook.policy import load_settings
    from budget_hook.shapes import SHAPES

    body = {"max_output_tokens": 100, "input": "name a colour", "text": {"format": {
        "type": "json_schema", "name": "colour", "description": PAGE, "schema": {"type": "object"}}}}
    decision = decide(BudgetRequest(SHAPES.get("responses"), body, "g", ModelLimits(8000, "test", "gpt-4o")),
                      load_settings({}))
    assert decision.action == "blocked" and decision.tokens_before >= tokens(PAGE)
