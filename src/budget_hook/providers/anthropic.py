"""Anthropic (Claude, on Anthropic's API, Bedrock, Vertex AI, Azure AI): everything the plugin knows of it.

Read by ``counting/profiles.py`` (family keywords, generation terms, the tool-use prompt table),
``counting/images.py`` (the image formula), ``learning/calibration.py`` (the count band),
``learning/overflow.py`` (overflow wordings), ``proxy/provider_count.py`` (the count endpoint) and
``budget/router_windows.py`` (the ``context-1m`` window and the ``max_tokens`` LiteLLM fills in).
"""

from __future__ import annotations

import re
from typing import Any

from .base import CountBand, CountEndpoint, OverflowWording, ProviderRecord, WindowQuirks

# --- generation terms (counting/profiles.py) -----------------------------------------------------------
#: LiteLLM's ``_EMPTY_TEXT_PLACEHOLDER`` (1.103 to 1.108): ``anthropic_messages_pt`` writes it over every empty or
#: blank text of a user or assistant message on a chat call to Claude, with or without ``modify_params`` (1,500
#: empty texts: 1,970 tokens counted, 22,513 sent)
EMPTY_TEXT = "[System: Empty message content sanitised to satisfy protocol]"
#: Fitted on the real Anthropic requests with provider-measured usage (docs/counting.md, "Accuracy against what
#: providers billed";
#: ``python bench/calibrate_anthropic.py`` reprints the figures).
PROFILE_TERMS: dict[str, Any] = dict(
    safety_factor=1.20,  # o200k text tokens -> Claude tokens, worst case seen on prose and code
    digits_as_tokens=True,  # Claude spends a token per digit where o200k packs three
    tokens_per_message=6,  # turn framing
    tokens_per_tool_call=20,  # tool_use block framing
    tools_request_overhead=580,  # hidden tool-use system prompt (Claude 4.x, tool_choice auto)
    forced_tool_choice_overhead=90,  # extra when tool_choice is any / a named tool
    tools_rendering="json",  # tools reach the prompt as JSON schema
    thinking_overhead=40,  # extended thinking / effort / task budget preamble
    empty_text=EMPTY_TEXT,
    structured_output_overhead=210,  # output_format JSON-schema preamble (a $defs schema is billed 54 beyond 150)
)

#: what budget_hook writes for a tool call left unanswered (the sentence LiteLLM's ``modify_params`` would write)
UNANSWERED = "[System: Tool execution skipped/interrupted by user. No result provided for tool '{name}'.]"


def answer_unanswered_calls(messages: list[Any]) -> list[Any] | None:
    """``messages`` written so that LiteLLM's ``modify_params`` rewrite for Claude
    (``sanitize_messages_for_tool_calling``) finds nothing to add, trimmed or not, in one linear pass: each assistant
    message's tool results moved right after it (LiteLLM finds a result anywhere before the next assistant message,
    the trimmer keeps a call with the results next to it: a result left after a user message could be dropped
    apart from its call), and a result (``UNANSWERED``) for each call with none, as LiteLLM writes it. A call's id
    is matched as LiteLLM matches it (any value, compared as is). None: nothing to change. The caller's messages
    are never edited."""
    out: list[Any] = []
    held: list[Any] = []  # what came after the current assistant message and is not one of its results
    calls: dict[Any, str] = {}  # the current assistant message's unanswered call ids -> tool names
    changed = False

    def close() -> None:
        nonlocal changed
        out.extend({"role": "tool", "tool_call_id": call_id, "content": UNANSWERED.format(name=name)}
                   for call_id, name in calls.items())
        changed = changed or bool(calls)
        out.extend(held)
        calls.clear()
        held.clear()
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        call_id = message.get("tool_call_id") if role in ("tool", "function") else None
        if role == "assistant":
            close()
            out.append(message)
            for call in message.get("tool_calls") or () if isinstance(message.get("tool_calls"), list) else ():
                function = call.get("function") if isinstance(call, dict) else None
                name = function.get("name") if isinstance(function, dict) else None
                if isinstance(call, dict) and isinstance(call.get("id"), (str, int, float)) and call["id"]:
                    calls[call["id"]] = name if isinstance(name, str) else "unknown_tool"
        elif isinstance(call_id, (str, int, float)) and call_id in calls:
            changed = changed or bool(held)
            del calls[call_id]
            out.append(message)  # before what was held: next to its call
        elif held or calls:
            held.append(message)
        else:
            out.append(message)
    close()
    return out if changed else None


#: Claude, per generation: the hidden tool-use system prompt grows with the generation (fitted per generation
#: on billed usage, ``bench/accuracy.py``), and the text factor of the newest and unknown generations is
#: the heaviest seen (claude-sonnet-5 text is billed up to 1.38x o200k)
GENERATIONS = (  # (pattern, generation, text factor, tool prompt)
    (re.compile(r"claude-(3|instant|2)|claude-(haiku|sonnet|opus)-3"), "claude-3", 1.20, 330),
    (re.compile(r"claude-(sonnet|opus)-4(-0|-1|-2025|$)|claude-4-|claude-(sonnet|opus)-4@"), "claude-4.0", 1.20, 470),
    (re.compile(r"claude-(haiku|sonnet|opus)-4[-.]5"), "claude-4.5", 1.20, 600),
    (re.compile(r"claude-(haiku|sonnet|opus)-4[-.]6"), "claude-4.6", 1.20, 650),
)
LATEST = ("claude-5+", 1.30, 650)

#: Anthropic's tool-use system prompt per model and tool_choice (auto/none, any/tool), from its "Tool use
#: pricing and tokens" table; first match wins (3.5 Sonnet of June 2024 from the table's earlier edition)
TOOL_PROMPTS = (  # (names containing any of these, auto, any/tool)
    (("claude-3-opus", "claude-opus-3"), 530, 281),
    (("claude-3-sonnet",), 159, 235),
    (("claude-3-haiku", "claude-3-5-haiku", "claude-haiku-3"), 264, 340),
    (("claude-3-5-sonnet-20240620", "claude-3-5-sonnet@20240620", "claude-3-5-sonnet-v1"), 294, 261),
)
TOOL_PROMPT = (346, 313)  # 3.5 Sonnet (Oct 2024), 3.7, 4.x
#: what a request with tools is billed beyond the documented prompt and our JSON rendering of the schemas
#: (the claude-3 fit, 330, against Haiku 3's 264 documented; Haiku 3.5's bills are at most 0.89x our count)
TOOL_PROMPT_MARGIN = 60


def tool_prompt(name: str, fitted: int, forced_extra: int) -> tuple[int, int]:
    """(tool prompt with tool_choice auto, extra when it is forced): the documented prompt plus the margin,
    never below the generation's fit (whose forced extra stands unless the table says forcing costs less)."""
    auto, forced = next(((a, f) for names, a, f in TOOL_PROMPTS if any(n in name for n in names)), TOOL_PROMPT)
    overhead = max(fitted, auto + TOOL_PROMPT_MARGIN)
    if forced >= auto - 100:
        forced_total = max(forced + TOOL_PROMPT_MARGIN, overhead + forced_extra)
    else:  # Opus 3: forcing a tool replaces a much longer prompt
        forced_total = forced + TOOL_PROMPT_MARGIN + forced_extra
    return overhead, forced_total - overhead


# --- image pricing (counting/images.py) -----------------------------------------------------------------
#: Anthropic resizes so the long edge is at most 1568 px and the image at most ~1.15 megapixels, then bills
#: width*height/750 (Claude vision docs)
IMAGE_MAX_EDGE = 1568
IMAGE_MAX_PIXELS = 1_150_000
IMAGE_PIXELS_PER_TOKEN = 750
#: what the docs' width*height/750 leaves out, measured: a 640x480 image is billed about 440 (the formula
#: says 410), a 100x100 one about 20 (the formula says 14): 10% more, plus 10 per image
IMAGE_FACTOR = 1.10
IMAGE_FRAMING = 10

# --- overflow wordings (learning/overflow.py) -----------------------------------------------------------
_N = r"\d[\d,]*"
_PROMPT_TOO_LONG = re.compile(rf"prompt is too long:\s*(?P<prompt>{_N})\s*tokens\s*>\s*(?P<window>{_N})"
                              r"\s*maximum", re.ASCII)
_EXCEEDS_LIMIT = re.compile(rf"input length and `?max_tokens`? exceed context limit:\s*(?P<prompt>{_N})\s*\+"
                            rf"\s*\d[\d,]*\s*>\s*(?P<window>{_N})", re.ASCII)

# --- window quirks (budget/router_windows.py) -----------------------------------------------------------
#: Claude models whose long window needs Anthropic's ``context-1m`` beta header: without it the API serves
#: 200,000 tokens, although LiteLLM's model map lists 1,000,000 (a 300k request would pass and be refused)
_HEADER_DEPENDENT_1M = re.compile(r"claude-(sonnet-4|4-sonnet|sonnet-4[-.]5|sonnet-4[-.]6|opus-4[-.]6)$")

RECORD = ProviderRecord(
    family="anthropic",
    keywords=("claude",),
    #: from ``bench/accuracy.py`` on the held-out half of the calibration set (learning/calibration.py)
    band=CountBand(under=0.02, over=0.37),
    overflow=(OverflowWording("anthropic", _PROMPT_TOO_LONG, "window", "prompt"),
              OverflowWording("anthropic", _EXCEEDS_LIMIT, "window", "prompt")),
    count_endpoint=CountEndpoint(
        provider="anthropic", shape="anthropic", default_base="https://api.anthropic.com", key_env="ANTHROPIC_API_KEY",
        base_suffixes=("/v1/messages", "/v1"), path="/v1/messages/count_tokens", key_header="x-api-key",
        headers=(("anthropic-version", "2023-06-01"),),
        fields=("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers", "output_format",
                "output_config", "context_management")),
    windows=WindowQuirks(
        header_dependent=_HEADER_DEPENDENT_1M,
        standard_window=200_000,
        #: providers that serve such models only with the header the *caller* sends (others, e.g.
        #: OpenRouter, decide on their own)
        header_providers=("anthropic/", "bedrock/", "bedrock_converse/", "vertex_ai/", "azure_ai/", "claude-",
                          "anthropic.", "us.anthropic.", "eu.anthropic.", "global.anthropic.", "apac.anthropic."),
        header_name="anthropic-beta", header_value="context-1m", header_betas=("context-1m-2025-08-07",),
        #: Anthropic's API requires ``max_tokens``: LiteLLM fills in the model's maximum output, else
        #: ``DEFAULT_ANTHROPIC_CHAT_MAX_TOKENS`` (4,096)
        fills_max_tokens=True, default_max_tokens=4096),
)
