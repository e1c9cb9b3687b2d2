"""End to end: the client libraries people point at LiteLLM classify every block as a context overflow.

Each by its own rules, through the session's real proxy (tests/e2e/conftest.py), streamed and not:

* LangChain (langchain-openai, chat and Responses; langchain-anthropic) raises its ``ContextOverflowError``,
  which its callers (e.g. summarising middleware) catch to compact the history; a streamed Responses block is
  OpenAI's ``response.failed`` event, which langchain-openai raises as a ValueError carrying the code;
* openai-agents (chat and Responses models) surfaces the provider's code to its retry policies
  (``error_code == "context_length_exceeded"``); a streamed Responses run fails with that code;
* LiteLLM's own SDK (``litellm_proxy/`` models: aider and many apps reach a gateway through it) raises its
  ``ContextWindowExceededError``;
* pydantic-ai raises ``ModelContextWindowExceededError``: for OpenAI shapes only on status 400 **and**
  ``code == "context_length_exceeded"`` (or OpenAI's sentence), for Anthropic on "prompt is too long". It runs
  in its own venv (``.venv-clients``, ``scripts/clients.sh``): its releases that classify overflows need
  openai>=3.26 and LiteLLM 1.103.0 pins openai<3.

The openai, anthropic and google-genai SDKs are covered in test_block_shape_e2e.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

KEY = "sk-default"
BIG = "e2e-client-libraries " + "word " * 9000
ROOT = Path(__file__).resolve().parents[2]
CLIENTS_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
PROBE = Path(__file__).parent / "clients" / "pydantic_ai_probe.py"


def missing(what: str) -> None:
    """Skip when a client is not installed, except in CI, where every client must run."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is not installed (scripts/clients.sh installs it)")
    pytest.skip(f"{what} is not installed (scripts/clients.sh installs it)")


# LangChain --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_langchain_openai_raises_its_context_overflow_error(proxy, responses_api, stream):
    from langchain_core.exceptions import ContextOverflowError
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="small", base_url=f"{proxy.base_url}/v1", api_key=KEY, max_retries=0, max_tokens=100,
                      use_responses_api=responses_api)
    if stream and responses_api:
        # A streamed Responses overflow is a ``response.failed`` event, as OpenAI sends it (and Codex needs);
        # langchain-openai turns any ``response.failed`` into a plain ValueError carrying the event's error,
        # against OpenAI itself too: the code is there for a caller to read.
        with pytest.raises(ValueError, match="code='context_length_exceeded'"):
            list(chat.stream(BIG))
        return
    with pytest.raises(ContextOverflowError):
        if stream:
            list(chat.stream(BIG))
        else:
            chat.invoke(BIG)


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_langchain_anthropic_raises_its_context_overflow_error(proxy, stream):
    from langchain_anthropic import ChatAnthropic
    from langchain_core.exceptions import ContextOverflowError

    chat = ChatAnthropic(model="claude", base_url=proxy.base_url, api_key=KEY, max_retries=0, max_tokens=100)
    with pytest.raises(ContextOverflowError):
        if stream:
            list(chat.stream(BIG))
        else:
            chat.invoke(BIG)


# openai-agents ----------------------------------------------------------------------------------------------

def agents_model(proxy, responses: bool):
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=KEY, max_retries=0)
    return (OpenAIResponsesModel if responses else OpenAIChatCompletionsModel)(model="small", openai_client=client)


@pytest.mark.parametrize("responses", [False, True], ids=["chat", "responses"])
def test_openai_agents_sees_the_provider_s_overflow_code(proxy, responses):
    from agents import Agent, ModelSettings, Runner, set_tracing_disabled
    from agents.models._retry_runtime import get_error_code, get_status_code

    set_tracing_disabled(True)
    agent = Agent(name="e2e", model=agents_model(proxy, responses), model_settings=ModelSettings(max_tokens=100))
    with pytest.raises(Exception) as caught:
        asyncio.run(Runner.run(agent, BIG))
    # what openai-agents hands its retry policies (ModelRetryNormalizedError's status_code and error_code)
    assert (get_status_code(caught.value), get_error_code(caught.value)) == (400, "context_length_exceeded")


def test_openai_agents_streamed_responses_run_fails_with_the_overflow_code(proxy):
    from agents import Agent, ModelSettings, Runner, set_tracing_disabled
    from agents.exceptions import ModelBehaviorError

    set_tracing_disabled(True)
    agent = Agent(name="e2e", model=agents_model(proxy, True), model_settings=ModelSettings(max_tokens=100))

    async def run() -> None:
        result = Runner.run_streamed(agent, BIG)
        async for _ in result.stream_events():
            pass

    with pytest.raises(ModelBehaviorError, match="context_length_exceeded"):
        asyncio.run(run())


# LiteLLM's own SDK (what aider and many apps call the gateway through) ------------------------------------

@pytest.mark.filterwarnings("ignore:Item 'summary' on TypedDict")  # litellm's own types, on import
@pytest.mark.parametrize("stream", [False, True], ids=["completion", "stream"])
def test_litellm_s_sdk_raises_context_window_exceeded(proxy, stream):
    import litellm

    with pytest.raises(litellm.ContextWindowExceededError):
        response = litellm.completion(model="litellm_proxy/small", api_base=f"{proxy.base_url}/v1", api_key=KEY,
                                      messages=[{"role": "user", "content": BIG}], max_tokens=100, stream=stream,
                                      num_retries=0)
        if stream:
            list(response)


# pydantic-ai (its own venv) ---------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,stream", [("chat", False), ("chat", True), ("responses", False), ("responses", True),
                                         ("anthropic", False), ("anthropic", True)])
def test_pydantic_ai_raises_model_context_window_exceeded(proxy, kind, stream):
    if not CLIENTS_PYTHON.exists():
        missing("pydantic-ai (.venv-clients)")
    command = [str(CLIENTS_PYTHON), str(PROBE), proxy.base_url, kind] + (["--stream"] if stream else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["context_window_exceeded"], outcome
