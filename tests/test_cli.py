"""The ``budget-hook`` console script, run as operators run it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from budget_hook.cli import main
from budget_hook.counting import TokenCounter
from budget_hook.shapes import SHAPES

from .conftest import CONVERSATIONS, conversation_request, load_json

BIN = Path(sys.executable).parent / "budget-hook"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "budget_hook.cli"]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(command + list(args), input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_count_reads_stdin():
    body = {"messages": [{"role": "user", "content": "hello there"}]}
    out = run("count", "--model", "openai/gpt-4o", "-", stdin=json.dumps(body))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["encoding"] == "o200k_base" and data["tokens"] == sum(data["per_message"]) + 3


def test_trim_uses_the_model_map_window(tmp_path):
    request = conversation_request(next(p for p in CONVERSATIONS if p.stem == "taubench_airline_03"))
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    fits = run("trim", "--model", "gpt-4o", str(path))
    assert fits.returncode == 0 and json.loads(fits.stdout)["report"]["changed"] is False
    trimmed = run("trim", "--model", "gpt-4o", "--window", "9000", "--max-tokens", "500", str(path))
    assert trimmed.returncode == 0, trimmed.stderr
    data = json.loads(trimmed.stdout)
    assert data["report"]["changed"] and data["report"]["tokens_after"] <= data["report"]["budget"]["budget"]
    assert data["report"]["actions"] and data["request"]["messages"] != request["messages"]


def test_trim_that_cannot_fit_exits_2_with_json_error():
    body = {"messages": [{"role": "user", "content": "word " * 3000}]}
    out = run("trim", "--model", "gpt-4o", "--window", "1000", stdin=json.dumps(body))
    assert out.returncode == 2
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "context_length_exceeded" and error["facts"]["window"] == 1000
    assert out.stderr.startswith("budget-hook: ") and out.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "stdin, needle",
    [("{not json", "not valid JSON"), ('{"messages": [{"role": "user", "content": 5}]}', "messages[0].content")],
)
def test_malformed_input_exits_1_naming_the_field(stdin, needle):
    out = run("count", "--model", "gpt-4o", stdin=stdin)
    assert out.returncode == 1 and needle in out.stderr


def test_unknown_model_without_window_is_a_usage_error():
    out = run("trim", "--model", "my-private-model", stdin=json.dumps({"messages": []}))
    assert out.returncode == 1 and "--window" in out.stderr


ROOT_CONFIG = Path(__file__).resolve().parents[1] / "litellm_config.yaml"


def test_check_config_accepts_the_demo_config():
    out = run("check-config", str(ROOT_CONFIG))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["enabled"] is True and data["policy"]["mode"] == "enforce"


def test_check_config_names_the_bad_key(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("litellm_settings:\n  callbacks: budget_hook.proxy.plugin\n"
                    "callback_settings:\n  budget_hook:\n    teams:\n      ml: {max_input_token: 5}\n")
    out = run("check-config", str(path))
    assert out.returncode == 1
    assert "callback_settings.budget_hook.teams.ml.max_input_token: unknown setting; did you mean max_input_tokens?" in out.stderr


def test_check_config_warns_when_the_plugin_is_not_enabled(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("callback_settings:\n  budget_hook:\n    mode: shadow\n")
    out = run("check-config", str(path))
    assert out.returncode == 0 and json.loads(out.stdout)["enabled"] is False
    assert "does not list budget_hook.proxy.plugin" in out.stderr


# --- every request shape through the registry ------------------------------------------------------------
#
# Bodies are built from the real material in tests/data: the tau-bench airline conversation as a client of
# each API would send it, and a recorded Anthropic /v1/messages request (top-level system, parallel tool_use
# and tool_result blocks). Most calls run main() in-process; a few run the console script as operators do.


def to_anthropic(chat: dict) -> dict:
    """A chat conversation as the /v1/messages body an Anthropic client sends (system at the top level,
    tool calls as tool_use blocks, tool answers as tool_result blocks in the next user message)."""
    system, messages = None, []
    for message in chat["messages"]:
        role, content = message["role"], message.get("content")
        if role == "system":
            system = content
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": content}
            last = messages[-1] if messages else None
            if last and last["role"] == "user" and all(b["type"] == "tool_result" for b in last["content"]):
                last["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
            continue
        blocks = [{"type": "text", "text": content}] if content else []
        blocks += [{"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                    "input": json.loads(call["function"]["arguments"])} for call in message.get("tool_calls") or []]
        messages.append({"role": role, "content": blocks})
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"]["parameters"]} for t in chat["tools"]]
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system, "tools": tools, "messages": messages}


def to_responses(chat: dict) -> dict:
    """A chat conversation as /v1/responses input items (function_call / function_call_output items)."""
    instructions, items = None, []
    for message in chat["messages"]:
        role, content = message["role"], message.get("content")
        if role == "system":
            instructions = content
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": content})
        else:
            if content:
                kind = "output_text" if role == "assistant" else "input_text"
                items.append({"type": "message", "role": role, "content": [{"type": kind, "text": content}]})
            items += [{"type": "function_call", "call_id": call["id"], "name": call["function"]["name"],
                       "arguments": call["function"]["arguments"]} for call in message.get("tool_calls") or []]
    tools = [{"type": "function", **t["function"]} for t in chat["tools"]]
    return {"model": "gpt-4o", "instructions": instructions, "input": items, "tools": tools, "max_output_tokens": 1000}


AIRLINE = conversation_request(next(p for p in CONVERSATIONS if p.stem == "taubench_airline_03"))
POLICY = AIRLINE["messages"][0]["content"]  # the airline agent policy: about 1.25k tokens
USER_TURNS = [m["content"] for m in AIRLINE["messages"] if m["role"] == "user"][:3]
RECORDED_ANTHROPIC = load_json("conversations/pydanticai_cassette_06.json")["original_request_anthropic"]

CONVERSATION_BODIES = {  # name -> (body, model): the same conversation in each conversation API
    "chat": (AIRLINE, "gpt-4o"),
    "anthropic": (to_anthropic(AIRLINE), "anthropic/claude-sonnet-4-5"),
    "responses": (to_responses(AIRLINE), "gpt-4o"),
}
COMPLETIONS = {"model": "gpt-3.5-turbo-instruct", "max_tokens": 200,
               "prompt": [f"Customer: {USER_TURNS[0]}\nAgent:", f"{POLICY}\n\nCustomer: {USER_TURNS[1]}\nAgent:"]}
EMBEDDINGS = {"model": "text-embedding-3-small", "input": [USER_TURNS[0], POLICY, *USER_TURNS[1:]]}  # input[1]: long

COUNT_CASES = {  # name -> (body, model)
    "chat": CONVERSATION_BODIES["chat"],
    "anthropic": (RECORDED_ANTHROPIC, "anthropic/claude-haiku-4-5"),
    "responses": CONVERSATION_BODIES["responses"],
    "completions": (COMPLETIONS, "gpt-3.5-turbo-instruct"),
    "embeddings": (EMBEDDINGS, "text-embedding-3-small"),
}


def library_count(name: str, body: dict, model: str) -> int:
    return SHAPES.get(name).count(body, TokenCounter.for_model(model))


@pytest.fixture
def cli(capsys, monkeypatch):
    """main() in-process: (exit code, stdout, stderr); ``stdin`` is what ``-`` reads."""
    def call(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin if stdin is not None else ""))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err
    return call


def test_the_bodies_are_what_they_claim():
    assert {name: SHAPES.detect(body).name for name, (body, _) in COUNT_CASES.items()} == {n: n for n in COUNT_CASES}
    assert RECORDED_ANTHROPIC["system"] and {b["type"] for m in RECORDED_ANTHROPIC["messages"] for b in m["content"]} >= {
        "tool_use", "tool_result"}
    assert SHAPES.get("anthropic").problems(CONVERSATION_BODIES["anthropic"][0]) == []
    assert SHAPES.get("responses").problems(CONVERSATION_BODIES["responses"][0]) == []


@pytest.mark.parametrize("forced", [True, False], ids=["format", "detected"])
@pytest.mark.parametrize("name", list(COUNT_CASES))
def test_count_reports_the_shape_and_the_librarys_count(cli, name, forced):
    body, model = COUNT_CASES[name]
    code, out, err = cli("count", "--model", model, *(["--format", name] if forced else []), stdin=json.dumps(body))
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == name and data["model"] == model
    assert data["tokens"] == library_count(name, body, model)
    if SHAPES.get(name).kind == "inputs":
        field = SHAPES.get(name).field
        assert len(data["per_input"]) == len(body[field]) and sum(data["per_input"]) == data["tokens"]
    else:
        assert data["tokens"] == sum(data["per_message"]) + data["tools_tokens"] + data["overhead_tokens"]
        assert data["tools_tokens"] > 0


def test_count_detects_an_anthropic_file_from_the_console_script(tmp_path):
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(RECORDED_ANTHROPIC))
    out = run("count", "--model", "anthropic/claude-haiku-4-5", str(path))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == "anthropic"
    assert data["tokens"] == library_count("anthropic", RECORDED_ANTHROPIC, "anthropic/claude-haiku-4-5")


def squeezed(name: str) -> tuple[dict, str, list[str]]:
    """A conversation body, its model, and trim options that put it about a quarter over its budget."""
    body, model = CONVERSATION_BODIES[name]
    window = library_count(name, body, model) * 3 // 4
    return body, model, ["--window", str(window), "--max-tokens", "500"]


def check_native(name: str, original: dict, request: dict) -> None:
    """The trimmed request is still a valid body of its own format."""
    assert SHAPES.detect(request).name == name and SHAPES.get(name).problems(request) == []
    if name == "anthropic":
        assert request["system"] == original["system"] and request["tools"] == original["tools"]
        assert all(m["role"] in ("user", "assistant") for m in request["messages"])
        assert request["messages"][0]["role"] == "user"
        assert all(isinstance(m["content"], list) and m["content"] for m in request["messages"])
        kinds = {b["type"] for m in request["messages"] for b in m["content"]}
        assert kinds <= {"text", "tool_use", "tool_result"} and "tool_result" in kinds
    elif name == "responses":
        assert "messages" not in request and request["instructions"] == original["instructions"]
        kinds = {item["type"] for item in request["input"]}
        assert kinds <= {"message", "function_call", "function_call_output"} and "function_call_output" in kinds
    else:
        assert request["messages"][0] == original["messages"][0]  # the system prompt stays


@pytest.mark.parametrize("name", list(CONVERSATION_BODIES))
def test_trim_fits_an_over_budget_conversation_in_its_own_format(cli, name):
    body, model, options = squeezed(name)
    code, out, err = cli("trim", "--model", model, *options, stdin=json.dumps(body))
    assert code == 0, err
    data = json.loads(out)
    report, request = data["report"], data["request"]
    assert data["format"] == name
    assert report["changed"] and report["actions"] and report["tokens_before"] > report["budget"]["budget"]
    assert report["tokens_before"] == library_count(name, body, model)
    assert report["tokens_after"] <= report["budget"]["budget"]
    assert report["tokens_after"] == library_count(name, request, model)
    check_native(name, body, request)


@pytest.mark.parametrize("name", list(CONVERSATION_BODIES))
def test_trim_returns_a_fitting_conversation_unchanged(cli, name):
    body, model = CONVERSATION_BODIES[name]
    code, out, err = cli("trim", "--model", model, "--format", name, stdin=json.dumps(body))
    assert code == 0, err
    data = json.loads(out)
    assert data["request"] == body and data["report"]["changed"] is False and data["report"]["actions"] == []
    assert data["report"]["tokens_after"] == data["report"]["tokens_before"] == library_count(name, body, model)


def test_trim_of_a_responses_body_from_the_console_script():
    body, model, options = squeezed("responses")
    out = run("trim", "--model", model, *options, "-", stdin=json.dumps(body))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["format"] == "responses" and data["report"]["tokens_after"] <= data["report"]["budget"]["budget"]
    assert data["report"]["tokens_after"] == library_count("responses", data["request"], model)
    check_native("responses", body, data["request"])


INPUT_CASES = {  # name -> (body, model, options that fit, options under which input[1] is over the limit)
    "completions": (COMPLETIONS, "gpt-3.5-turbo-instruct", [], ["--window", "1000"]),
    "embeddings": (EMBEDDINGS, "text-embedding-3-small", [], ["--window", "1000"]),
}


@pytest.mark.parametrize("name", list(INPUT_CASES))
def test_trim_passes_inputs_that_fit_unchanged(cli, name):
    body, model, fits, _ = INPUT_CASES[name]
    code, out, err = cli("trim", "--model", model, *fits, stdin=json.dumps(body))
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == name and data["request"] == body
    report = data["report"]
    counter = TokenCounter.for_model(model)
    field = SHAPES.get(name).field
    assert report["field"] == field and report["over"] == []
    assert report["tokens"] == [SHAPES.get(name).count({field: value}, counter) for value in body[field]]
    assert max(report["tokens"]) <= report["limit"] == report["budget"]["budget"]
    if name == "completions":  # the request's max_tokens is reserved inside the window; embeddings reserve nothing
        assert report["budget"]["output_reserve"] == body["max_tokens"] and report["limit"] < report["budget"]["window"]
    else:
        assert report["budget"]["output_reserve"] == 0 and report["limit"] == report["budget"]["window"]


@pytest.mark.parametrize("name", list(INPUT_CASES))
def test_trim_blocks_an_input_over_the_limit_naming_it(cli, name):
    body, model, _, over = INPUT_CASES[name]
    code, out, err = cli("trim", "--model", model, *over, stdin=json.dumps(body))
    assert code == 2
    error = json.loads(out)["error"]
    field = SHAPES.get(name).field
    assert error["code"] == "context_length_exceeded" and f"{field}[1]" in error["message"]
    assert [o["index"] for o in error["facts"]["over"]] == [1]
    assert error["facts"]["over"][0]["tokens"] > error["facts"]["limit"]
    assert err.startswith("budget-hook: ") and err.count("\n") == 1 and f"{field}[1]" in err


def test_an_embedding_input_over_the_limit_exits_2_from_the_console_script():
    out = run("trim", "--model", "text-embedding-3-small", "--window", "1000", stdin=json.dumps(EMBEDDINGS))
    assert out.returncode == 2
    error = json.loads(out.stdout)["error"]
    assert error["facts"]["over"][0]["index"] == 1
    assert out.stderr.startswith("budget-hook: ") and out.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "args, stdin, needle",
    [
        (["count", "--format", "bogus", "--model", "gpt-4o"], "{}", "invalid choice: 'bogus'"),
        (["trim", "--format", "messages", "--model", "gpt-4o"], "{}", "argument --format"),
        (["count"], "{}", "required: --model"),
        (["trim", "--format", "chat"], "{}", "required: --model"),
        (["tally", "--model", "gpt-4o"], "{}", "invalid choice: 'tally'"),
        ([], "{}", "required: command"),
        (["count", "--model", "gpt-4o"], '{"foo": 1}', "cannot tell the request format"),
        (["trim", "--model", "gpt-4o"], '{"foo": 1}', "pass --format (" + "|".join(SHAPES.names()) + ")"),
    ],
    ids=["bad-format", "bad-format-trim", "no-model", "no-model-trim", "bad-command", "no-command", "undetectable",
         "undetectable-trim"],
)
def test_usage_errors_exit_1_with_the_reason_on_stderr(cli, args, stdin, needle):
    code, out, err = cli(*args, stdin=stdin)
    assert code == 1 and out == ""
    assert needle in err


@pytest.mark.parametrize("args", [["count", "--format", "bogus", "--model", "gpt-4o"], []], ids=["bad-format", "no-command"])
def test_usage_errors_exit_1_not_argparses_2_from_the_console_script(args):
    out = run(*args, stdin="{}")
    assert out.returncode == 1 and out.stdout == "" and "usage: budget-hook" in out.stderr


def test_an_undetectable_body_on_stdin_says_stdin(cli):
    code, _, err = cli("count", "--model", "gpt-4o", stdin='{"foo": 1}')
    assert code == 1 and "of stdin" in err


def test_an_undetectable_file_is_named(cli, tmp_path):
    path = tmp_path / "captured.json"
    path.write_text('{"foo": 1}')
    code, _, err = cli("count", "--model", "gpt-4o", str(path))
    assert code == 1 and str(path) in err


@pytest.mark.parametrize(
    "content, needle",
    [(b'{"messages": [', "not valid JSON"), (b"", "not valid JSON"), (b'[{"role": "user"}]', "expected a JSON object"),
     (b'"hello"', "expected a JSON object"), (b'{"messages": "\xff"}', "not UTF-8")],
    ids=["truncated", "empty", "array", "string", "latin-1"],
)
def test_unreadable_json_file_exits_1_naming_the_file(cli, tmp_path, content, needle):
    path = tmp_path / "body.json"
    path.write_bytes(content)
    code, out, err = cli("count", "--model", "gpt-4o", str(path))
    assert code == 1 and out == ""
    assert err.startswith(f"budget-hook: {path}: ") and needle in err


@pytest.mark.parametrize("stdin, needle", [("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object")])
def test_unreadable_json_on_stdin_says_stdin(cli, stdin, needle):
    for command in ("count", "trim"):
        code, out, err = cli(command, "--model", "gpt-4o", "-", stdin=stdin)
        assert code == 1 and out == ""
        assert err.startswith("budget-hook: stdin: ") and needle in err


def test_a_missing_file_exits_1_naming_it(cli, tmp_path):
    path = tmp_path / "nowhere.json"
    code, _, err = cli("trim", "--model", "gpt-4o", str(path))
    assert code == 1 and err.startswith(f"budget-hook: {path}: cannot read")


def test_invalid_json_file_from_the_console_script(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"model": "gpt-4o", "messages": [}')
    out = run("trim", "--model", "gpt-4o", str(path))
    assert out.returncode == 1 and out.stdout == ""
    assert str(path) in out.stderr and "not valid JSON" in out.stderr


# --- --format overrides detection -----------------------------------------------------------------------

SYSTEM_ON_TOP = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": POLICY,
                 "messages": [{"role": "user", "content": USER_TURNS[0]}]}


def test_top_level_system_is_detected_as_anthropic_and_counted(cli):
    code, out, _ = cli("count", "--model", "gpt-4o", stdin=json.dumps(SYSTEM_ON_TOP))
    data = json.loads(out)
    assert code == 0 and data["format"] == "anthropic"
    assert data["tokens"] == library_count("anthropic", SYSTEM_ON_TOP, "gpt-4o") > 1000  # the policy is counted


def test_format_chat_overrides_detection(cli):
    code, out, _ = cli("count", "--model", "gpt-4o", "--format", "chat", stdin=json.dumps(SYSTEM_ON_TOP))
    data = json.loads(out)
    assert code == 0 and data["format"] == "chat"
    # as a chat body a top-level system still counts: LiteLLM forwards it (to Claude, as its system prompt)
    assert data["tokens"] == library_count("chat", SYSTEM_ON_TOP, "gpt-4o")
    assert data["tokens"] > TokenCounter.for_model("gpt-4o").count_text(SYSTEM_ON_TOP["system"])


def test_format_anthropic_overrides_detection_of_a_chat_body(cli):
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": USER_TURNS[0]}]}
    assert SHAPES.detect(body).name == "chat"
    code, out, _ = cli("count", "--model", "gpt-4o", "--format", "anthropic", stdin=json.dumps(body))
    assert code == 0 and json.loads(out)["format"] == "anthropic"


def test_a_list_of_strings_is_embeddings_input_and_format_overrides_a_single_string(cli):
    # Responses input lists hold item objects: a list of strings is embeddings input, whatever the model name
    body = {"model": "azure/prod-vectors", "input": USER_TURNS}
    assert SHAPES.detect(body).name == "embeddings"
    single = {"model": "azure/prod-vectors", "input": USER_TURNS[0]}
    assert SHAPES.detect(single).name == "responses"  # a single string could be either: --format decides
    code, out, err = cli("count", "--model", "text-embedding-3-small", "--format", "embeddings", stdin=json.dumps(single))
    assert code == 0, err
    assert json.loads(out)["format"] == "embeddings"
    code, out, err = cli("count", "--model", "text-embedding-3-small", "--format", "embeddings", stdin=json.dumps(body))
    assert code == 0, err
    data = json.loads(out)
    assert data["format"] == "embeddings" and data["tokens"] == library_count("embeddings", body, "text-embedding-3-small")
    assert len(data["per_input"]) == len(USER_TURNS)


def test_a_forced_format_the_body_does_not_have_names_the_missing_field(cli):
    chat_body = json.dumps(CONVERSATION_BODIES["chat"][0])
    for shape, field in (("responses", "input"), ("embeddings", "input"), ("completions", "prompt")):
        code, out, err = cli("count", "--model", "gpt-4o", "--format", shape, stdin=chat_body)
        assert code == 1 and out == "" and err.startswith(f"budget-hook: {field}: ")


# --- budget options ---------------------------------------------------------------------------------------

LONG_CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "word " * 1200}]}


def test_a_zero_window_is_rejected(cli):
    code, _, err = cli("trim", "--model", "gpt-4o", "--window", "0", stdin=json.dumps(LONG_CHAT))
    assert code == 1 and "must be positive" in err


def test_a_negative_window_is_rejected(cli):
    code, _, err = cli("trim", "--model", "gpt-4o", "--window", "-5", stdin=json.dumps(LONG_CHAT))
    assert code == 1 and "must be positive" in err


def test_a_negative_output_reserve_is_rejected(cli):
    code, out, _ = cli("trim", "--model", "gpt-4o", "--window", "1000", "--max-tokens", "-500",
                       stdin=json.dumps(LONG_CHAT))
    assert code == 1, json.loads(out)["report"]["budget"]


def test_a_body_nested_too_deep_is_an_input_error_naming_the_field(cli):
    schema: dict = {"type": "string"}
    for _ in range(200):
        schema = {"type": "array", "items": schema}
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    for command in ("count", "trim"):
        code, out, err = cli(command, "--model", "gpt-4o", stdin=json.dumps(body))
        assert code == 1 and out == "" and err.startswith("budget-hook: tools[0].function.parameters")
        assert "nested more than 100 levels deep" in err


# --- issue 22, 6: the CLI's window is the proxy's; --max-input-tokens is the setting's cap -----------------

HI = json.dumps({"messages": [{"role": "user", "content": "hi"}]})


def _budget_of(cli, *args: str) -> dict:
    code, out, err = cli("trim", *args, stdin=HI)
    assert code == 0, err
    return json.loads(out)["report"]["budget"]


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"])
def test_a_claude_model_whose_1m_needs_the_beta_header_gets_the_proxy_s_200k(cli, model):
    from budget_hook.proxy.windows import limits_of

    class Router:  # what the proxy's router answers for a deployment of this model (the model map)
        def get_router_model_info(self, deployment, received_model_name):
            from budget_hook.budget import lookup_max_input_tokens

            return {"max_input_tokens": lookup_max_input_tokens(deployment["litellm_params"]["model"])}

    deployment = {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-sonnet-4-5"}}
    proxy_window = limits_of(Router(), "claude", [deployment]).window
    assert proxy_window == 200_000
    assert _budget_of(cli, "--model", model)["window"] == proxy_window
    from budget_hook.budget import lookup_max_input_tokens

    # with the header the model map's own window (1,000,000 in LiteLLM 1.103's map; 1.108's lists 200,000)
    listed = lookup_max_input_tokens("anthropic/claude-sonnet-4-5")
    assert _budget_of(cli, "--model", model, "--context-1m")["window"] == listed


def test_max_input_tokens_is_a_cap_below_the_window_as_the_setting_is(cli):
    budget = _budget_of(cli, "--model", "gpt-4o", "--max-input-tokens", "7000")
    assert (budget["window"], budget["cap"], budget["budget"]) == (128000, 7000, 7000)
    budget = _budget_of(cli, "--model", "gpt-4o", "--window", "7000")
    assert budget["window"] == 7000 and budget["cap"] is None and budget["budget"] < 7000


def test_count_streamed_marks_a_native_gemini_body_as_sent_on_streamgeneratecontent():
    """Gemini 2.x bills the running turn's replayed thought signatures only on streamGenerateContent, where
    LiteLLM sets ``stream``; a captured native body does not say which route it came by: ``--streamed`` does."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]},
                         {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}},
                                                      "thoughtSignature": "C" * 6000}]},
                         {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"ok": 1}}}]}]}
    counts = []
    for extra in ((), ("--streamed",)):
        out = run("count", "--format", "gemini", "--model", "gemini/gemini-2.5-flash", *extra, "-",
                  stdin=json.dumps(body))
        assert out.returncode == 0, out.stderr
        counts.append(json.loads(out.stdout)["tokens"])
    assert counts[1] - counts[0] == 1000  # 6,000 base64 characters at 6 a token
