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

from ..providers import anthropic as _anthropic
from ..providers import gemini as _gemini
from ..providers import open_models as _open_models
from ..providers import openai as _openai
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
    #: the server writes each tool through a chat template (a self-hosted family, or one not recognised): the tool
    #: objects are counted whole, at least (``tools.sent_tools``), every key kept, as vLLM hands them to the template
    tools_whole: bool = False
    #: the chat template writes tool results through ``tojson`` (Llama 3.1+: every quote, newline and tab
    #: is escaped, each escape a token or more): they are counted in that form
    tool_results_as_json: bool = False
    #: what LiteLLM writes for each empty (or blank) text of a user or assistant message on the way to this family
    #: (``validation.empty_texts``), whatever the settings: counted as that text ("" : sent as it is)
    empty_text: str = ""
    #: LiteLLM writes the tools and earlier tool calls into the prompt text (``ollama/``: ``counting.rendered``)
    tools_as_text: bool = False
    #: LiteLLM writes into every tool result its call's name and arguments, found by id (Cohere's v1 prompt:
    #: ``cohere_message_pt``, ``cohere_messages_pt_v2``): each result is counted with its call (``rendered``)
    results_carry_call: bool = False
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
    #: how images are priced: a formula of ``images.FORMULAS`` ("openai_tiles", "openai_patches", "anthropic",
    #: "gemini_tiles", "flat")
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


# Each provider's terms (model patterns, generation terms, image prices) are in its record's module:
# providers/openai.py (exact), providers/anthropic.py, providers/gemini.py (Gemma too), providers/open_models.py
# (Mistral, Llama 3.1, Qwen, DeepSeek, gpt-oss).

#: No ground truth available offline for these: conservative, documented, never an under-count by design.
UNMEASURED_SAFETY_FACTOR = 1.30

#: a model name containing one of a family's keywords is that family's (first match wins); a provider's are
#: in its record (``providers/``)
_FAMILY_KEYWORDS = (
    ("anthropic", _anthropic.RECORD.keywords),
    ("qwen", _open_models.QWEN.keywords),  # before deepseek: DeepSeek-R1-Distill-Qwen runs Qwen's vocabulary
    ("deepseek", _open_models.DEEPSEEK.keywords),
    ("gemini", _gemini.RECORD.keywords),
    ("llama", _open_models.LLAMA.keywords),
    ("mistral", _open_models.MISTRAL.keywords),
)


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
    """Profile for ``model`` (``base_model`` wins when given, as for Azure deployments). Never raises. The provider
    (``model``'s prefix) says how the prompt is written: ``ollama/`` writes tools in as text; Cohere's v1 prompt
    (Bedrock invoke's ``cohere.command-r``, any model on ``cohere/v1/`` or ``cohere_chat/v1/``) writes each result's
    call into it; ``azure_ai/`` sends a command-r tool
    result that is not JSON as ``json.dumps({"result": ...})`` (``stringify_json_tool_call_content``: control
    characters escaped six characters each, 2.3x their tokens in an attack review, 2026-12-06)."""
    profile = _family_profile(model, base_model)
    name = model.strip().lower() if isinstance(model, str) else ""
    cohere_v1 = ("cohere.command-r" in name and "converse/" not in name) or (  # Bedrock invoke's cohere_message_pt,
        name.startswith(("cohere/", "cohere_chat/")) and "v1/" in name)  # CohereChatConfig's (any model on v1/)
    escaped = name.startswith("azure_ai/") and "command-r" in name
    if name.startswith("ollama/") or cohere_v1 or escaped:
        return replace(profile, tools_as_text=name.startswith("ollama/"), results_carry_call=cohere_v1,
                       tool_results_as_json=profile.tool_results_as_json or escaped)
    return profile


def _family_profile(model: str | None, base_model: str | None) -> TokenizerProfile:
    name = model_key(base_model or model or "")
    raw = (base_model or model or "").strip().lower()[:MAX_MODEL_NAME_CHARS]
    if _openai.O200K_CHAT.match(name):
        return _openai_profile(name, "o200k_base")
    if _openai.CL100K_CHAT.match(name):
        if name.startswith(("gpt-3.5-turbo-0301", "gpt-35-turbo-0301")):
            # The 0301 snapshot used 4 tokens per message and a name replaced the role.
            return TokenizerProfile("openai", "cl100k_base", exact=True, tokens_per_message=4, tokens_per_name=-1)
        return _openai_profile(name, "cl100k_base")
    if _openai.CL100K_RAW.match(name):
        # OpenAI embeddings and legacy completion models: cl100k_base over the raw text, no chat framing.
        return TokenizerProfile("openai", "cl100k_base", exact=True)
    family = next((fam for fam, words in _FAMILY_KEYWORDS if any(w in name for w in words)), "unknown")
    own = _openai_own(base_model or model)
    # how its images are priced: an open model's own encoder, by its name (``providers/open_models.image_formula``)
    images = "openai_tiles" if own else _open_models.image_formula(name, "gemma" if "gemma" in name else family, raw)
    if family == "anthropic":
        return anthropic_profile(name)
    if family == "gemini":
        profile = gemini_profile(name, vertex=_is_vertex(base_model or model or ""))
        if "gemma" not in name:
            return profile
        profile = replace(profile, generation="gemma", **_gemini.GEMMA_TERMS)
        return replace(profile, image_formula=images or profile.image_formula)
    if family == "mistral" and family_tokenizers.available("mistral"):
        return TokenizerProfile("mistral", "mistral", exact=False, safety_factor=1.0, image_formula=images,
                                **_open_models.MISTRAL_TERMS)
    if family == "qwen":
        terms = {**_open_models.QWEN_TERMS, "reply_priming": _open_models.QWEN_TERMS["reply_priming"] +
                 (_open_models.QWEN2_DEFAULT_SYSTEM if "qwen2" in name or "qwen-2" in name else 0),
                 "image_formula": images}
        vocabulary = "qwen3.5" if any(v in name for v in ("qwen3.5", "qwen3.6", "qwen3-5", "qwen3-6")) else "qwen"
        if family_tokenizers.available(vocabulary):  # the optional vocabulary: text exact, no digit bound
            return TokenizerProfile("qwen", vocabulary, exact=False, safety_factor=1.0, generation="qwen",
                                    **{**terms, "digits_as_tokens": False})
        return TokenizerProfile("qwen", "cl100k_base", exact=False, safety_factor=_open_models.QWEN_TEXT_FACTOR,
                                generation="qwen", **terms)
    if family == "deepseek":
        terms = {**_open_models.DEEPSEEK_TERMS, "image_formula": images}
        if family_tokenizers.available("deepseek"):  # the optional vocabulary: text exact
            return TokenizerProfile("deepseek", "deepseek", exact=False, safety_factor=1.0, generation="deepseek",
                                    **terms)
        return TokenizerProfile("deepseek", "o200k_base", exact=False, safety_factor=_open_models.DEEPSEEK_TEXT_FACTOR,
                                generation="deepseek", run_aware=True, **terms)
    if family == "llama" and _open_models.LLAMA3.search(name) and family_tokenizers.available("llama3"):
        return TokenizerProfile("llama", "llama3", exact=False, safety_factor=1.0, image_formula=images,
                                **_open_models.LLAMA31_TERMS)
    # No tokenizer of its own offline: o200k with the measured-worst factor and a bound for the text that
    # other tokenizers split far more finely than o200k (runs of newlines, spaces, one letter; digits;
    # non-Latin scripts), so adversarial text is never under-counted.
    return TokenizerProfile(family, "o200k_base", exact=False, safety_factor=UNMEASURED_SAFETY_FACTOR,
                            run_aware=True, digits_as_tokens=True, tools_whole=not own, image_formula=images)


def _openai_own(model: str | None) -> bool:
    """A name the family keywords do not know that is still OpenAI's own model, which renders tools its own way
    (bills no key OpenAI's rendering leaves out): an Azure OpenAI deployment's name, an OpenAI fine-tune (``ft:``)."""
    name = (model or "").strip().lower()
    return name.startswith("azure/") or model_key(name).startswith("ft:")


def anthropic_profile(name: str) -> TokenizerProfile:
    """Claude's profile: its generation's terms (``providers/anthropic.py``: ``GENERATIONS``, the tool-use prompt
    table, ``PROFILE_TERMS``)."""
    generation, factor, tools = next(((g, f, t) for pattern, g, f, t in _anthropic.GENERATIONS
                                      if pattern.search(name)), _anthropic.LATEST)
    tools, forced = _anthropic.tool_prompt(name, tools, _anthropic.PROFILE_TERMS["forced_tool_choice_overhead"])
    terms = {**_anthropic.PROFILE_TERMS, "safety_factor": factor, "tools_request_overhead": tools,
             "forced_tool_choice_overhead": forced}
    return TokenizerProfile("anthropic", "o200k_base", exact=False, image_formula="anthropic", generation=generation,
                            **terms)


def _is_vertex(model: str) -> bool:
    return model.strip().lower().startswith(_gemini.VERTEX_PREFIXES)


def gemini_profile(name: str, *, vertex: bool = False) -> TokenizerProfile:
    """Gemini's profile: its generation's terms and prices (``providers/gemini.py``)."""
    generation, formula, image, page = next(((g, f, i, p) for pattern, g, f, i, p in _gemini.GENERATIONS
                                             if pattern.search(name)), _gemini.LATEST)
    if vertex and generation != _gemini.LATEST[0]:
        # Vertex AI bills a 2.x PDF page or a large image as 5 tiles (1,290), where the Gemini API bills 258
        formula, image, page = "gemini_tiles", _gemini.GEMINI2_TILE_TOKENS, _gemini.VERTEX_GEMINI2_PAGE_TOKENS
        generation += " vertex"
    signature = _gemini.GEMINI3_SIGNATURE_CHARS_PER_TOKEN if generation.startswith("gemini-3") else \
        _gemini.SIGNATURE_CHARS_PER_TOKEN
    return TokenizerProfile("gemini", "o200k_base", exact=False, safety_factor=_gemini.TEXT_FACTOR,
                            image_formula=formula, image_base_tokens=image if formula == "flat" else 258,
                            image_tile_tokens=image,
                            pdf_page_tokens=page, pdf_min_tokens=page, generation=generation,
                            signature_chars_per_token=signature,
                            signatures_billed_unstreamed=generation.startswith("gemini-3"),
                            signatures_billed_earlier=generation.startswith("gemini-3"), **_gemini.TERMS)


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
    tools_overhead = (_openai.GPT5_TOOLS_OVERHEAD if name.startswith("gpt-5") else 0) + _openai.OPENAI_TOOLS_OVERHEAD
    profile = TokenizerProfile("openai", encoding, exact=True, tools_request_overhead=tools_overhead,
                               tokens_per_function=_openai.OPENAI_TOKENS_PER_FUNCTION,
                               responses_tools_overhead=_openai.RESPONSES_TOOLS_OVERHEAD,
                               responses_tokens_per_function=_openai.RESPONSES_TOKENS_PER_FUNCTION,
                               signature_chars_per_token=_openai.OPENAI_ENCRYPTED_CHARS_PER_TOKEN)
    if name.startswith("gpt-5"):
        profile = replace(profile, responses_tokens_per_call=_openai.GPT5_RESPONSES_PER_CALL,
                          responses_tokens_per_message=_openai.GPT5_RESPONSES_PER_MESSAGE)
    if name.startswith("gpt-oss"):
        # served open weights (vLLM, Ollama) render the harmony format: a fixed system block (~62 tokens) and
        # a developer message before the conversation, ~31 tokens of framing a tool step; not exact
        return replace(profile, exact=False, reply_priming=_open_models.GPT_OSS_SYSTEM_BLOCK, tokens_per_tool_call=31,
                       tokens_per_message=6)
    for prefix, multiplier in _openai.PATCH_MULTIPLIERS:
        if name.startswith(prefix) and (prefix != "gpt-5." or "-nano" in name or "-mini" in name):
            return replace(profile, image_formula="openai_patches", image_patch_multiplier=multiplier)
    for prefix, base, tile in _openai.TILE_PRICES:
        if name.startswith(prefix):
            return replace(profile, image_base_tokens=base, image_tile_tokens=tile)
    return profile
