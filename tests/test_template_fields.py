"""A configured chat template counts the prompt the server makes, not the one the client's raw body would make.

* LiteLLM maps ``developer`` to ``system`` inside ``completion()``, after the gateway's check (every provider but
  OpenAI's o-series: ``BaseConfig.translate_developer_role_to_system_role``): the counter renders the mapped
  message, so a template that skips ``developer`` (Qwen's) does not count it as nothing;
* whatever a template still leaves out while the message carries text (a role it skips) counts the family's
  estimate of that text on top: property-tested on every template the tests ship, with the real
  ``tokenizer.json`` ``tests/tokenizer_files`` builds;
* the fields vLLM hands the template (``chat_template_kwargs``, ``documents``, ``add_generation_prompt``,
  ``continue_final_message``; in the body or ``extra_body``) are rendered; a client's ``chat_template`` is
  content the gateway cannot size (``unreadable_content``: estimated, or a 400 naming it);
* while a template is configured, requests past ``offload_chars / COST_WEIGHT`` are decided in the pool.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from budget_hook.budget import ModelLimits
from budget_hook.counting import TokenCounter, templated
from budget_hook.counting.counter import CHAT_ROLES
from budget_hook.counting.media import FILE_REFERENCE_TOKENS
from budget_hook.counting.profiles import resolve_tokenizer
from budget_hook.counting.templated import TokenizerSpec
from budget_hook.errors import MalformedRequestError
from budget_hook.pipeline import BudgetRequest, decide
from budget_hook.policy.settings import load_settings
from budget_hook.proxy.offload import Offloader
from budget_hook.shapes import SHAPES

from .tokenizer_files import TEMPLATE, build

TEMPLATES = [TEMPLATE, *sorted((Path(__file__).resolve().parent / "data" / "chat_templates").glob("*.jinja"))]
MODEL = "hosted_vllm/org/tiny"
BIG = "The quick brown fox jumps over the lazy dog. " * 400


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return build(tmp_path_factory.mktemp("tok"))


def _configure_all(files) -> None:
    templated.configure([TokenizerSpec(f"{MODEL}-{t.stem}", str(files[0]), str(t)) for t in TEMPLATES])


@pytest.fixture(scope="module")
def counters(files):
    """template file name -> its counter (all configured at once, one model name each)."""
    _configure_all(files)
    yield {t.stem: TokenCounter.for_model(f"{MODEL}-{t.stem}") for t in TEMPLATES}
    templated.configure([])


def served_render(files, template: Path, messages, **variables) -> str:
    """Independently, the server's prompt: LiteLLM's role mapping, vLLM's preparation, the template."""
    config = json.loads(Path(files[1]).read_text())
    ready = [templated.prepared({"role": "system", "content": m.get("content")} if m.get("role") == "developer"
                                else m) for m in messages]
    chat = templated._environment().from_string(template.read_text(encoding="utf-8"))
    return chat.render(messages=ready, tools=None, **{"add_generation_prompt": True, **variables},
                       bos_token=config["bos_token"], eos_token=config["eos_token"])


def tokens(files, text: str) -> int:
    return len(Tokenizer.from_file(str(files[0])).encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("template", [t.stem for t in TEMPLATES])
def test_a_developer_message_counts_as_the_system_message_the_server_gets(counters, template):
    counter = counters[template]
    sent = counter.count_request({"messages": [{"role": "developer", "content": BIG}, {"role": "user", "content": "hi"}]})
    served = counter.count_request({"messages": [{"role": "system", "content": BIG}, {"role": "user", "content": "hi"}]})
    assert sent.method == served.method == "tokenizer.json+template"
    assert sent.total == served.total > 2000
    assert counter.count_message({"role": "developer", "content": BIG}, index=0) == \
        counter.count_message({"role": "system", "content": BIG}, index=0)


#: mostly the roles a request may carry (any other is a 400 before a template runs), some not
ROLES = st.sampled_from([*sorted(CHAT_ROLES) * 6, "ipython", "critic", "Developer", ""])
TEXT = st.text(alphabet=st.sampled_from(list("ab cd\t\n\"'{}\\09é中🙂")), max_size=80)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(template=st.sampled_from([t.stem for t in TEMPLATES]),
       messages=st.lists(st.fixed_dictionaries({"role": ROLES, "content": TEXT}), min_size=1, max_size=6))
def test_a_count_never_drops_the_text_the_template_leaves_out(counters, files, template, messages):
    """The count is at least the server's rendered prompt, plus the family's estimate of every message's text
    the template left out (whatever the role)."""
    path = next(t for t in TEMPLATES if t.stem == template)
    if any(m["role"] not in CHAT_ROLES for m in messages):  # a 400 naming the field, before any template
        with pytest.raises(MalformedRequestError, match=r"messages\[\d+\]\.role"):
            counters[template].count_request({"messages": messages})
        return
    counted = counters[template].count_request({"messages": messages})
    try:
        prompt = served_render(files, path, messages)
    except Exception:  # the server refuses this conversation too: the estimate counts it
        assert "template failed" in counted.method
        return
    model = f"{MODEL}-{template}"  # its family's estimate (the name says DeepSeek, Qwen...)
    family = TokenCounter(resolve_tokenizer(model), model=model)
    left_out = [m["content"].strip() for m in messages if m["content"].strip() and m["content"].strip() not in prompt
                and json.dumps(m["content"].strip(), ensure_ascii=False)[1:-1] not in prompt
                and json.dumps(m["content"].strip())[1:-1] not in prompt]
    assert counted.total >= tokens(files, prompt) + sum(family.count_text(t) for t in left_out)
    if not left_out:
        assert counted.total == tokens(files, prompt)  # nothing left out: exact


def test_a_role_the_template_skips_is_never_counted_as_nothing(counters):
    counter = counters["qwen3"]  # Qwen3's template writes no "function" message
    alone = counter.count_request({"messages": [{"role": "user", "content": "hi"}]}).total
    sneaky = counter.count_request({"messages": [{"role": "function", "name": "f", "content": BIG},
                                                 {"role": "user", "content": "hi"}]})
    family = TokenCounter(resolve_tokenizer(f"{MODEL}-qwen3"), model=f"{MODEL}-qwen3")
    assert sneaky.total >= alone + family.count_text(BIG.strip())
    assert sneaky.per_message[0] >= family.count_text(BIG.strip())


def test_the_fields_vllm_hands_the_template_are_rendered(counters, files, tmp_path):
    qwen3 = next(t for t in TEMPLATES if t.stem == "qwen3")
    messages = [{"role": "user", "content": "hello there"}]
    counter = counters["qwen3"]
    for fields, variables in (({"chat_template_kwargs": {"enable_thinking": False}}, {"enable_thinking": False}),
                              ({"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
                               {"enable_thinking": False}),
                              ({"add_generation_prompt": False}, {"add_generation_prompt": False}),
                              ({"extra_body": {"add_generation_prompt": False}}, {"add_generation_prompt": False})):
        assert counter.count_request({"messages": messages, **fields}).total == \
            tokens(files, served_render(files, qwen3, messages, **variables)), fields
    # the messages and tools the counter sets itself are not the client's to replace (the gateway refuses them
    # there: pipeline.bounds.TEMPLATE_OVERRIDES); the reply opener and documents are counted as vLLM merges them,
    # the kwargs over the request's own fields
    plain = counter.count_request({"messages": messages}).total
    for kwargs in ({"messages": []}, {"tools": None}, {"documents": []}):
        assert counter.count_request({"messages": messages, "chat_template_kwargs": kwargs}).total == plain
    assert counter.count_request({"messages": messages, "add_generation_prompt": True,
                                  "chat_template_kwargs": {"add_generation_prompt": False}}).total == \
        tokens(files, served_render(files, qwen3, messages, add_generation_prompt=False))
    # documents, for a template that reads them (Command R's kind)
    rag = tmp_path / "rag.jinja"
    rag.write_text("{% for d in documents or [] %}[doc] {{ d.title }}: {{ d.text }}\n{% endfor %}"
                   "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    templated.configure([TokenizerSpec("rag", str(files[0]), str(rag))])
    try:
        documents = [{"title": "Manual", "text": BIG}]
        bare = TokenCounter.for_model("rag").count_request({"messages": messages}).total
        with_documents = TokenCounter.for_model("rag").count_request(
            {"messages": messages, "extra_body": {"documents": documents}})
        assert with_documents.total == tokens(files, f"[doc] Manual: {BIG}\nuser: hello there\n")
        assert with_documents.total > bare + 2000
    finally:
        _configure_all(files)


TEMPLATE_FIELDS = {"chat_template": lambda t: {"chat_template": t},
                   "extra_body.chat_template": lambda t: {"extra_body": {"chat_template": t}},
                   "chat_template_kwargs.chat_template": lambda t: {"chat_template_kwargs": {"chat_template": t}},
                   "extra_body.chat_template_kwargs.chat_template":
                       lambda t: {"extra_body": {"chat_template_kwargs": {"chat_template": t}}}}


@pytest.mark.parametrize("field", sorted(TEMPLATE_FIELDS))
def test_a_client_chat_template_is_content_the_gateway_cannot_size(field):
    """It may make any prompt (50 copies of every message, here): blocked with a 400 naming it, or counted
    at the flat estimate of content the gateway cannot read, and flagged; never rendered to count."""
    template = "{% for m in messages %}{% for i in range(50) %}{{ m.content }}{% endfor %}{% endfor %}"
    body = {"messages": [{"role": "user", "content": "hi"}], **TEMPLATE_FIELDS[field](template)}
    limits = ModelLimits(200_000, "test", "hosted_vllm/org/tiny")
    blocked = decide(BudgetRequest(SHAPES.get("chat"), body, "g", limits), load_settings({"unreadable_content": "block"}))
    assert blocked.action == "blocked" and blocked.block is not None
    assert blocked.block.param == field and field in blocked.block.message
    estimated = decide(BudgetRequest(SHAPES.get("chat"), body, "g", limits), load_settings({}))
    plain = decide(BudgetRequest(SHAPES.get("chat"), {"messages": body["messages"]}, "g", limits), load_settings({}))
    assert estimated.tokens_before >= plain.tokens_before + FILE_REFERENCE_TOKENS
    assert any(field in warning for warning in estimated.warnings)


def test_a_configured_template_sends_requests_to_the_pool_sooner(files):
    offloader = Offloader(threads=1, offload_chars=50_000)
    body = {"model": "m", "messages": [{"role": "user" if i % 2 else "assistant", "content": "x y"} for i in range(40)]}
    templated.configure([TokenizerSpec("m", str(files[0]), str(TEMPLATE))])
    try:
        assert templated.cost_weight() == templated.COST_WEIGHT
        assert not offloader.inline(body)
        assert offloader.inline({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        templated.configure([])
        assert templated.cost_weight() == 1 and offloader.inline(body)
    finally:
        _configure_all(files)
