"""Run one pydantic-ai agent call against the proxy and print how pydantic-ai classified its failure (JSON).

Runs in the clients' own venv (``.venv-clients``, see ``scripts/clients.sh``): pydantic-ai classifies a
context overflow (``ModelContextWindowExceededError``) only from 2.55 on, which needs openai>=3.26, and
LiteLLM 1.103.0 pins openai<3, so the two cannot share the proxy's venv.

    python pydantic_ai_probe.py BASE_URL KIND [--stream]    # KIND: chat | responses | anthropic
"""

from __future__ import annotations

import asyncio
import json
import sys

from pydantic_ai import Agent, ModelContextWindowExceededError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

KEY = "sk-default"
PROMPT = "e2e-pydantic-ai " + "word " * 9000


def model(base_url: str, kind: str):
    if kind == "anthropic":
        return AnthropicModel("claude", provider=AnthropicProvider(base_url=base_url, api_key=KEY))
    provider = OpenAIProvider(base_url=f"{base_url}/v1", api_key=KEY)
    return (OpenAIChatModel if kind == "chat" else OpenAIResponsesModel)("small", provider=provider)


async def run(base_url: str, kind: str, stream: bool) -> dict:
    agent = Agent(model(base_url, kind), model_settings={"max_tokens": 100})
    try:
        if stream:
            async with agent.run_stream(PROMPT) as result:
                async for _ in result.stream_text():
                    pass
        else:
            await agent.run(PROMPT)
    except Exception as error:  # the probe reports whatever pydantic-ai raised
        return {"raised": [c.__name__ for c in type(error).__mro__],
                "context_window_exceeded": isinstance(error, ModelContextWindowExceededError),
                "status_code": getattr(error, "status_code", None), "message": str(error)[:500]}
    return {"raised": None}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(sys.argv[1], sys.argv[2], "--stream" in sys.argv[3:]))))
