"""A deployment's own tokenizer.json and chat template (``tokenizers:``): exact counts, offline.

The tokenizer is real (a byte-level BPE trained here with the ``tokenizers`` library, ``tests/tokenizer_files``)
and the template is the repo's Llama 3.1 one; the expected counts are rendered and encoded independently
in this file, as transformers' ``apply_chat_template`` does."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from budget_hook.counting import TokenCounter, templated
from budget_hook.counting.templated import TokenizerSpec
from budget_hook.errors import PolicyError
from budget_hook.policy import load_settings
from budget_hook.proxy.startup import EXIT_CONFIG, refusal

from .tokenizer_files import TEMPLATE, build

MODEL = "hosted_vllm/org/tiny-llama"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return build(tmp_path_factory.mktemp("tok"))


@pytest.fixture()
def counter(files):
    templated.configure([TokenizerSpec(MODEL, str(files[0]), str(files[1]))])
    yield TokenCounter.for_model(MODEL)
    templated.configure([])


def expected(files, messages, tools=None) -> int:
    """Independently: transformers' sandbox and filters, vLLM's message preparation, encode without
    added special tokens."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v, ensure_ascii=False, indent=None, separators=None, sort_keys=False: json.dumps(
        v, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    env.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
    config = json.loads(Path(files[1]).read_text())
    prepared = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        prepared.append(m)
    text = env.from_string(config["chat_template"]).render(messages=prepared, tools=tools, add_generation_prompt=True,
                                                           bos_token=config["bos_token"])
    return len(Tokenizer.from_file(str(files[0])).encode(text, add_special_tokens=False).ids)


TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.\tTabs \"quoted\"",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a\\tb.py"}'}}]}
AGENT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Fix the bug\tin 0123456789"},
         CALL, {"role": "tool", "tool_call_id": "c1", "content": 'line 1\n\tline 2 "quoted"\n\n\n' * 5},
         {"role": "assistant", "content": "Done."}, {"role": "user", "content": "thanks"}]


def test_exact_on_an_agent_conversation(counter, files):
    assert counter.method == "tokenizer.json+template"
    for tools in (None, TOOLS):
        count = counter.count_request({"messages": AGENT, **({"tools": tools} if tools else {})})
        assert count.total == expected(files, AGENT, tools)
        assert count.method == "tokenizer.json+template"


text = st.text(alphabet=st.sampled_from(list("ab \t\n\"'{}\\0123456789é中🙂")), max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contents=st.lists(text, min_size=1, max_size=6), system=st.none() | text)
def test_exact_on_generated_text(counter, files, contents, system):
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": ("user", "assistant", "tool")[i % 3], "content": c} for i, c in enumerate(contents)]
    assert counter.count_request({"messages": messages}).total == expected(files, messages)


def test_dropping_messages_subtracts_their_share(counter):
    """What the trimmer relies on: dropping messages takes off their ``per_message``, and a message counted
    alone costs what it costs in the conversation."""
    count = counter.count_request({"messages": AGENT})
    for drop in ({2, 3}, {4}, {2, 3, 4}):
        kept = [m for i, m in enumerate(AGENT) if i not in drop]
        fresh = counter.count_request({"messages": kept}).total
        assert fresh == count.total - sum(count.per_message[i] for i in drop)
    for index in range(1, len(AGENT)):
        assert counter.count_message(AGENT[index], index=index) == count.per_message[index]


def test_a_template_refusal_or_a_runaway_render_falls_back_to_the_estimate(files, tmp_path):
    refusing = tmp_path / "refuse.jinja"
    refusing.write_text("{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}"
                        "{% endif %}{{ m.content }}{% endfor %}")
    runaway = tmp_path / "runaway.jinja"
    runaway.write_text("{% for m in messages %}{% for i in range(99999) %}{{ m.content }}{% endfor %}{% endfor %}")
    templated.configure([TokenizerSpec("refuse", str(files[0]), str(refusing)),
                         TokenizerSpec("runaway", str(files[0]), str(runaway))])
    try:
        refused = TokenCounter.for_model("refuse").count_request({"messages": AGENT})
        assert "template failed: TemplateError" in refused.method
        stopped = TokenCounter.for_model("runaway").count_request({"messages": [{"role": "user", "content": "x" * 20}]})
        assert "template failed: RenderStopped" in stopped.method
    finally:
        templated.configure([])


def _refused(raw) -> str:
    with pytest.raises(PolicyError) as caught:
        load_settings(raw)
    return refusal(caught.value)


def test_start_up_refuses_a_missing_file_or_a_bad_template(files, tmp_path):
    assert EXIT_CONFIG == 78
    where = "callback_settings.budget_hook.tokenizers.m"
    assert f"{where}.tokenizer: '/nope/tokenizer.json' is no tokenizer.json" in _refused(
        {"tokenizers": {"m": {"tokenizer": "/nope/tokenizer.json"}}})
    assert f"{where}.chat_template: no such file" in _refused(
        {"tokenizers": {"m": {"tokenizer": str(files[0]), "chat_template": str(tmp_path / "none.jinja")}}})
    cases = {"{{ messages.__class__.__mro__ }}": "unsafe", "{% for m in messages %}{{ m }": "does not compile",
             "x" * (templated.MAX_TEMPLATE_CHARS + 1): "characters, more than",
             "{{ raise_exception('bad') }}": "fails on a one-message conversation"}
    for index, (template, problem) in enumerate(cases.items()):
        path = tmp_path / f"t{index}.jinja"
        path.write_text(template)
        message = _refused({"tokenizers": {"m": {"tokenizer": str(files[0]), "chat_template": str(path)}}})
        assert f"{where}.chat_template" in message and problem in message
    not_json = tmp_path / "bad" / "tokenizer.json"
    not_json.parent.mkdir()
    not_json.write_text("{}")
    assert "is not a tokenizer.json" in _refused({"tokenizers": {"m": {"tokenizer": str(not_json.parent)}}})


def test_the_sandbox_keeps_python_internals_out_at_run_time(files, tmp_path):
    """A template that reaches for internals only through a client's message is stopped, and counted by
    the estimate."""
    sneaky = tmp_path / "sneaky.jinja"
    sneaky.write_text("{% for m in messages %}{% if m.content == 'go' %}{{ m.__class__.__init__.__globals__ }}"
                      "{% endif %}{{ m.content }}{% endfor %}")
    templated.configure([TokenizerSpec("sneaky", str(files[0]), str(sneaky))])
    try:
        count = TokenCounter.for_model("sneaky").count_request({"messages": [{"role": "user", "content": "go"}]})
        assert "template failed: SecurityError" in count.method
    finally:
        templated.configure([])


def test_a_name_resolves_from_the_local_hugging_face_cache(files, tmp_path, monkeypatch):
    snapshot = tmp_path / "hub" / "models--org--tiny-llama" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    for path in files:
        (snapshot / path.name).write_bytes(path.read_bytes())
    (tmp_path / "hub" / "models--org--tiny-llama" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny-llama" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    settings_ = load_settings({"tokenizers": {MODEL: {"tokenizer": "org/tiny-llama"}}})
    templated.configure(settings_.tokenizers)
    try:
        counter = TokenCounter.for_model(MODEL)
        assert counter.count_request({"messages": AGENT}).total == expected(files, AGENT)
        assert TokenCounter.for_model("tiny-llama").method == "tokenizer.json+template"  # the bare name too
    finally:
        templated.configure([])
    assert TokenCounter.for_model(MODEL).method != "tokenizer.json+template"
    assert TEMPLATE.is_file()
