"""OpenAI (and the OpenAI-compatible servers that answer in its wording): everything the plugin knows of it.

Read by ``counting/profiles.py`` (which models use which encoding, tool terms, image prices; the chat
format's framing is the ``TokenizerProfile`` defaults), ``learning/calibration.py`` (the count band),
``learning/overflow.py`` (its overflow wordings) and ``proxy/provider_count.py`` (the count endpoint).
"""

from __future__ import annotations

import re

from .base import CountBand, CountEndpoint, OverflowWording, ProviderRecord

# --- model patterns, tool terms and image prices (counting/profiles.py) ----------------------------------
O200K_CHAT = re.compile(r"^(chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|codex|computer-use)")
CL100K_CHAT = re.compile(r"^(gpt-4|gpt-3\.5|gpt-35)")
#: embeddings and legacy completion models: cl100k_base over the raw text, no chat framing
CL100K_RAW = re.compile(r"^(text-embedding-|davinci-002|babbage-002)")

# Image pricing per model, from OpenAI's vision guide ("Calculating costs").
PATCH_MULTIPLIERS = (
    # gpt-5.x point releases' mini/nano (gpt-5.4-nano): billed by patches, about 300 for 512x512 (256 patches)
    # and at most 3 for 60x30 (2 patches) on hidden bills: x1.25 covers both
    ("gpt-5.", 1.25),
    ("gpt-5-nano", 2.46),
    ("gpt-5-mini", 1.62),
    ("gpt-4.1-nano", 2.46),
    ("gpt-4.1-mini", 1.62),
    ("o4-mini", 1.72),
)
TILE_PRICES = (  # (prefix, base, per tile); first match wins
    ("gpt-4o-mini", 2833, 5667),
    ("gpt-5", 70, 140),
    ("o1", 75, 150),
    ("o3", 75, 150),
    ("computer-use", 65, 129),
)

#: OpenAI bills tools more than the cookbook's rendering on most real requests (1-58 tokens short, growing
#: with the number of functions): per request and per function, on top of the schema text it leaves out
OPENAI_TOOLS_OVERHEAD = 20
OPENAI_TOKENS_PER_FUNCTION = 16
#: the Responses API bills tools closer to the cookbook's rendering, and without gpt-5's chat preamble
RESPONSES_TOOLS_OVERHEAD = 10
RESPONSES_TOKENS_PER_FUNCTION = 4
#: a replayed reasoning item's ``encrypted_content``: 7.6-9.3 base64 characters per billed token
OPENAI_ENCRYPTED_CHARS_PER_TOKEN = 7.0


#: gpt-5 models put a longer tool preamble in the prompt than gpt-4o (measured: 70-92 tokens more).
GPT5_TOOLS_OVERHEAD = 92
#: gpt-5.x on /v1/responses, hidden bills: 7-9 tokens a function-call pair and 2 a message pair above the count
GPT5_RESPONSES_PER_CALL = 9
GPT5_RESPONSES_PER_MESSAGE = 1

# --- overflow wordings (learning/overflow.py) -----------------------------------------------------------
_N = r"\d[\d,]*"
#: chat / completions / embeddings, and vLLM / OpenAI-compatible servers (``... your request has N input tokens``)
_REQUESTED = re.compile(rf"maximum context length is\s*(?P<window>{_N})\s*tokens.{{0,40}}?requested\s*"
                        rf"\d[\d,]*\s*tokens\s*\((?P<prompt>{_N})\s*in (?:the messages|your prompt)",
                        re.IGNORECASE | re.DOTALL | re.ASCII)
_REQUEST_HAS = re.compile(rf"maximum context length is\s*(?P<window>{_N})\s*tokens.{{0,60}}?request has\s*"
                          rf"(?P<prompt>{_N})\s*input tokens", re.IGNORECASE | re.DOTALL | re.ASCII)
_RESULTED_IN = re.compile(rf"maximum context length is\s*(?P<window>{_N})\s*tokens.{{0,60}}?resulted in\s*"
                          rf"(?P<prompt>{_N})\s*tokens", re.IGNORECASE | re.DOTALL | re.ASCII)
_WINDOW_ONLY = re.compile(rf"maximum context length is\s*(?P<window>{_N})\s*tokens", re.IGNORECASE | re.ASCII)

RECORD = ProviderRecord(
    family="openai",
    band=CountBand(under=0.07, over=0.30),
    overflow=(OverflowWording("openai", _REQUESTED, "window", "prompt"),
              OverflowWording("openai", _REQUEST_HAS, "window", "prompt"),
              OverflowWording("openai", _RESULTED_IN, "window", "prompt"),
              OverflowWording("openai", _WINDOW_ONLY, "window", None)),
    count_endpoint=CountEndpoint(
        provider="openai", shape="responses", default_base="https://api.openai.com/v1", key_env="OPENAI_API_KEY",
        base_suffixes=(), path="/responses/input_tokens", key_header="authorization", key_prefix="Bearer ",
        fields=("input", "instructions", "tools", "tool_choice", "reasoning", "text", "previous_response_id",
                "conversation", "parallel_tool_calls", "truncation")),
)
