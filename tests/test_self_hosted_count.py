"""Self-hosted servers count as they bill: vLLM's and SGLang's ``/tokenize`` applies the model's own chat
template (unit level; a stand-in vLLM with Llama 3's tokenizer and template in tests/e2e/test_vllm_e2e.py)."""

from __future__ import annotations

import asyncio
import json

import httpx

from budget_hook.policy import load_settings
from budget_hook.proxy.provider_count import ProviderCounter, count_target, group_target


def deployment(model: str, base: str | None = "http://gpu.internal:8000/v1", key: str | None = None) -> dict:
    params = {"model": model, **({"api_base": base} if base else {}), **({"api_key": key} if key else {})}
    return {"litellm_params": params}


def test_self_hosted_chat_deployments_are_counted_by_their_server():
    target = count_target(deployment("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct"), "chat")
    assert target.provider == "tokenize" and target.url == "http://gpu.internal:8000/tokenize"
    assert target.headers == {}  # no key: vLLM serves without one unless --api-key is set
    assert target.body({"model": "g", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9,
                        "tools": [{"type": "function"}], "stream": True}) == {
        "model": "meta-llama/Llama-3.3-70B-Instruct", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function"}], "add_generation_prompt": True}
    keyed = count_target(deployment("openai/qwen3-32b", "http://10.0.0.5:30000/v1/", key="sk-local"), "chat")
    assert keyed.url == "http://10.0.0.5:30000/tokenize" and keyed.headers == {"authorization": "Bearer sk-local"}
    # OpenAI itself, no api_base, or another format: not a self-hosted server's tokenizer
    assert count_target(deployment("openai/gpt-4o", "https://api.openai.com/v1", key="k"), "chat") is None
    assert count_target(deployment("hosted_vllm/m", None), "chat") is None
    assert count_target(deployment("hosted_vllm/m"), "responses") is None


def test_a_group_of_servers_for_different_models_is_not_counted_by_one_of_them():
    same = [deployment("hosted_vllm/llama"), deployment("hosted_vllm/llama", "http://gpu2:8000/v1")]
    assert group_target(same, "chat") is not None
    mixed = [deployment("hosted_vllm/llama"), deployment("hosted_vllm/qwen", "http://gpu2:8000/v1")]
    assert group_target(mixed, "chat") is None


def test_a_server_without_tokenize_is_not_asked_again_for_a_while():
    calls = []

    def handler(request):
        calls.append(request.url.path)
        return httpx.Response(404, json={"detail": "Not Found"})

    counter = ProviderCounter(client=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    target = count_target(deployment("openai/some-model", "http://openrouter.test/api/v1", key="k"), "chat")
    first = asyncio.run(counter.count(target, {"messages": [{"role": "user", "content": "a"}]}, 1.0))
    second = asyncio.run(counter.count(target, {"messages": [{"role": "user", "content": "b"}]}, 1.0))
    assert first == (None, "error: status 404") and second[0] is None and "no counting endpoint" in second[1]
    assert calls == ["/api/tokenize"]


def test_the_server_s_count_is_read():
    def handler(request):
        body = json.loads(request.content)
        return httpx.Response(200, json={"count": 40 + len(body["messages"]), "max_model_len": 4096, "tokens": []})

    counter = ProviderCounter(client=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    target = count_target(deployment("hosted_vllm/llama"), "chat")
    assert asyncio.run(counter.count(target, {"messages": [{"role": "user", "content": "a"}]}, 1.0)) == (41, "answered")


def test_the_server_s_max_model_len_is_kept_as_its_window():
    from budget_hook.budget.windows import ModelLimits
    from budget_hook.proxy.provider_count import _server_limits

    def handler(request):
        return httpx.Response(200, json={"count": 41, "max_model_len": 4096, "tokens": []})

    counter = ProviderCounter(client=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    target = count_target(deployment("hosted_vllm/llama"), "chat")
    assert counter.server_window(target) is None
    asyncio.run(counter.count(target, {"messages": [{"role": "user", "content": "a"}]}, 1.0))
    assert counter.server_window(target) == 4096
    unknown = ModelLimits(None, "unknown", "hosted_vllm/llama")
    assert _server_limits(unknown, 4096).window == 4096
    assert _server_limits(unknown, 4096).source == "the server's max_model_len (/tokenize)"
    larger = ModelLimits(32_768, "router", "hosted_vllm/llama")
    assert _server_limits(larger, 4096).window == 4096  # the server refuses anything over its own
    smaller = ModelLimits(2048, "router", "hosted_vllm/llama")
    assert _server_limits(smaller, 4096) is smaller
    assert _server_limits(unknown, None) is unknown


def test_always_is_a_provider_count_mode():
    assert load_settings({"models": {"llama": {"provider_count": "always"}}}).layers.models["llama"]["provider_count"] \
        == "always"


def test_llama_3_1_tool_results_are_counted_as_its_template_writes_them():
    """The template writes a tool result through ``tojson``: every tab and newline an escape."""
    from budget_hook.counting import TokenCounter

    counter = TokenCounter.for_model("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct")
    tabs = ("\t" * 30 + "\n") * 100
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]}
    as_tool = counter.count_request({"messages": [{"role": "user", "content": "go"}, call,
                                                  {"role": "tool", "tool_call_id": "c", "content": tabs}]}).total
    as_user = counter.count_request({"messages": [{"role": "user", "content": "go"}, call,
                                                  {"role": "user", "content": tabs}]}).total
    assert as_tool > 5 * as_user  # 3,165 against the server's 3,160 (tests/e2e/test_vllm_e2e.py's template)


def test_llama_3_1_tool_results_sent_as_parts_are_counted_through_tojson_too():
    """A tool result sent as a list of text parts is written by the template as that list through ``tojson``:
    every escape counts, as for a string (it was counted as raw text: a fifth of what the server counts)."""
    from budget_hook.counting import TokenCounter

    counter = TokenCounter.for_model("hosted_vllm/meta-llama/Llama-3.3-70B-Instruct")
    tabs = ("\t" * 30 + "\n") * 100
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]}

    def total(content):
        return counter.count_request({"messages": [{"role": "user", "content": "go"}, call,
                                                   {"role": "tool", "tool_call_id": "c", "content": content}]}).total
    assert total([{"type": "text", "text": tabs}]) >= total(tabs)


def test_gpt_oss_is_not_exact_its_harmony_framing_is_counted():
    from budget_hook.counting import TokenCounter

    oss = TokenCounter.for_model("hosted_vllm/openai/gpt-oss-120b")
    assert not oss.profile.exact and oss.profile.reply_priming >= 62
    plain = TokenCounter.for_model("gpt-4o").count_request({"messages": [{"role": "user", "content": "hi"}]}).total
    assert oss.count_request({"messages": [{"role": "user", "content": "hi"}]}).total >= plain + 62


def test_text_the_counting_endpoint_is_not_sent_keeps_the_estimate():
    """``/tokenize`` is sent messages and tools: its count of a request with ``documents`` (which vLLM renders) would
    scale the estimate down past them (a review: 18,218 estimated, decided again at 6,511 and passed)."""
    target = count_target(deployment("hosted_vllm/ibm-granite/granite-3.3-8b-instruct"), "chat")
    assert target is not None
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert target.unsent(plain) == []
    assert target.unsent({**plain, "documents": [{"text": "x"}]}) == ["documents"]
    assert target.unsent({**plain, "extra_body": {"chat_template_kwargs": {"date": "x"}}}) == ["chat_template_kwargs"]


def test_media_and_unseen_references_keep_the_estimate():
    """A review of 2026-12-07: vLLM's ``/tokenize`` ran no image processor before 0.17, so six 4K images counted 50
    tokens and the estimate, scaled by 0.001, let 63,350 tokens into a 32k window. A self-hosted server is not asked
    about a request holding media; nor any endpoint about content the gateway estimated in a field it is not sent."""
    target = count_target(deployment("hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct"), "chat")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    body = {"messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}]}
    assert target.unsent(body) == ["messages[1].content[1]"]
    assert target.unsent(body, ["messages[1].content[1]"]) == ["messages[1].content[1]"]  # sent, yet media
    openai = count_target({"litellm_params": {"model": "openai/gpt-4o", "api_key": "k"}}, "responses")
    assert openai.unsent({"input": "hi", "prompt": {"id": "pmpt_1"}}, ["prompt"]) == ["prompt"]
    assert openai.unsent({"input": "hi"}, ["input[0].content[1]"]) == []  # in the input: the endpoint reads it
    assert openai.unsent({"input": [{"role": "user", "content": [image]}]}) == []  # OpenAI's own count prices images


def test_a_count_far_under_the_estimate_is_not_taken():
    """Text is never counted four times apart: such a count missed content, and scaling every count by it would let
    the request through. The estimate decides, and the record says why."""
    from types import SimpleNamespace

    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, decide
    from budget_hook.proxy.provider_count import decide_with_provider_count
    from budget_hook.shapes import SHAPES

    answers = iter([50, 2_000])

    class Counter:
        async def count(self, target, body, timeout, prepared=None):
            assert isinstance(prepared, tuple)  # built in the pool with the check, not on the event loop
            return next(answers), "answered"

        def server_window(self, target):
            return None

    pooled = []

    async def run(fn, body, weight=None):  # the offloader: what may run in the pool
        pooled.append(fn())
        return pooled[-1]
    settings = load_settings({"provider_count": "always"})
    plugin = SimpleNamespace(provider_counter=Counter(), offloader=SimpleNamespace(run=run), settings=settings)
    body = {"model": "g", "max_tokens": 100, "messages": [{"role": "user", "content": "word " * 2_400}]}
    request = BudgetRequest(SHAPES.get("chat"), body, "g", ModelLimits(2_000, "test", "hosted_vllm/llama"))
    first = decide(request, settings)
    deployments = [deployment("hosted_vllm/llama")]
    low = asyncio.run(decide_with_provider_count(plugin, request, first, deployments))
    assert low.calibration.provider_tokens is None and "under a quarter of the estimate" in low.calibration.provider_note
    assert low.tokens_before == first.tokens_before and low.action == first.action == "blocked"
    near = asyncio.run(decide_with_provider_count(plugin, request, first, deployments))
    assert near.calibration.provider_tokens == 2_000  # within reach of the estimate: taken
    # the check of what the endpoint is sent and the counting body's JSON and hash went through the offloader (an
    # attack review: 34 MB of small parts held the event loop 0.84 s there)
    assert [type(p[1]) for p in pooled if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], list)] == [tuple] * 2


def test_a_vendor_s_count_of_what_the_estimate_priced_at_its_worst_is_taken():
    """A review of the quarter rule: a vendor's endpoint reads what the estimate prices flat or at its worst (a file by
    id at 10,000 tokens, an image by URL), so its count far under the estimate is the truth: taken, not refused."""
    from types import SimpleNamespace

    from budget_hook.budget import ModelLimits
    from budget_hook.pipeline import BudgetRequest, decide
    from budget_hook.proxy.provider_count import decide_with_provider_count
    from budget_hook.shapes import SHAPES

    files = [{"type": "document", "source": {"type": "file", "file_id": f"file_{i:03d}"}} for i in range(10)]
    body = {"model": "g", "max_tokens": 1_000, "messages": [
        {"role": "user", "content": [*files, {"type": "text", "text": "Summarise these ten one-page memos."}]}]}
    settings = load_settings({"provider_count": "near_budget"})
    request = BudgetRequest(SHAPES.get("anthropic"), body, "g", ModelLimits(100_000, "test", "anthropic/claude-sonnet-4-5"))
    first = decide(request, settings)
    assert first.action == "blocked" and first.wants_provider_count  # 10 x 10,000 estimated

    class Counter:
        async def count(self, target, body, timeout, prepared=None):
            return 20_500, "answered"  # Anthropic's count_tokens, which reads the files

        def server_window(self, target):
            return None

    async def run(fn, body, weight=None):
        return fn()
    plugin = SimpleNamespace(provider_counter=Counter(), offloader=SimpleNamespace(run=run), settings=settings)
    deployments = [{"litellm_params": {"model": "anthropic/claude-sonnet-4-5", "api_key": "sk-ant-x"}}]
    again = asyncio.run(decide_with_provider_count(plugin, request, first, deployments))
    assert again.calibration.provider_tokens == 20_500 and again.action == "pass"
