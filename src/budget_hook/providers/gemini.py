"""Gemini (the Gemini API and Vertex AI; Gemma shares its family): everything the plugin knows of it.

Read by ``counting/profiles.py`` (family keywords, generation terms, image and PDF prices),
``counting/images.py`` (the tile formula), ``learning/calibration.py`` (the count band),
``learning/overflow.py`` (its overflow wording) and ``proxy/provider_count.py`` (the count endpoint).
"""

from __future__ import annotations

import re
from typing import Any

from .base import CountBand, CountEndpoint, OverflowWording, ProviderRecord

# --- generation terms (counting/profiles.py) -----------------------------------------------------------
#: o200k text times 1.0 plus the run- and script-aware bound (counting/counter.py): real Gemini text is billed
#: at most about what o200k counts; the bound covers what o200k packs tighter than a SentencePiece vocabulary
TEXT_FACTOR = 1.0
PER_MESSAGE = 3
#: a hidden preamble when the request declares functions (billed 19-26 tokens more than their JSON)
TOOLS_OVERHEAD = 30
#: a replayed thought signature: 6.3-8.5 base64 characters per billed token on 2.5, about 4.9 on 3
SIGNATURE_CHARS_PER_TOKEN = 6.0
GEMINI3_SIGNATURE_CHARS_PER_TOKEN = 4.5
VERTEX_GEMINI2_PAGE_TOKENS = 1_290
#: a large image's 768-px tile on gemini-2.0 and on Vertex AI (a 640x480 image is billed 1,290)
GEMINI2_TILE_TOKENS = 1_290
#: Gemini, per generation (fitted on the billed usage of real requests: ``bench/accuracy.py``). Images and PDF
#: pages at Gemini's own prices: 258 tokens (an image, a 768-px tile of a large one on 2.0 and older, a
#: page) on 2.x, about 1,100 per image or page on 3.x (its default high media resolution is 1,120).
TERMS: dict[str, Any] = dict(
    run_aware=True, digits_as_tokens=True, tokens_per_message=PER_MESSAGE, reply_priming=0,
    tokens_per_part=1,  # each part of a content is delimited (chosen after the held-out check: docs/counting.md)
    tokens_per_tool_call=4, tokens_per_parallel_calls=0, tools_rendering="json",
    tools_request_overhead=TOOLS_OVERHEAD,
)
GENERATIONS = (  # (pattern, generation, image formula, image/tile tokens, PDF page tokens)
    (re.compile(r"gemini-2\.5|gemini-2-5"), "gemini-2.5", "flat", 258, 258),
    (re.compile(r"gemini-(2\.0|2-0|1\.5|1-5|1\.0|pro)|gemma"), "gemini-2.0", "gemini_tiles", GEMINI2_TILE_TOKENS, 258),
)
#: Gemini 3 and any later or unknown generation: the heaviest prices seen
LATEST = ("gemini-3", "flat", 1_120, 1_120)
#: the backends that are Vertex AI (its own prices for 2.x images and PDF pages)
VERTEX_PREFIXES = ("vertex_ai/", "vertex_ai_beta/", "vertex/")
#: Gemma (self-hosted: vLLM, Ollama): ``<start_of_turn>role\n ... <end_of_turn>\n`` is 5 tokens a turn with its
#: role, the reply opener ``<start_of_turn>model\n`` 3 after ``<bos>`` (Gemma 3's chat template)
GEMMA_TERMS: dict[str, Any] = dict(tokens_per_message=4, reply_priming=4, tools_whole=True)
#: Gemma 3 and 3n served by an open model server (vLLM, Ollama): every image is 256 soft tokens between
#: ``<start_of_image>`` and ``<end_of_image>``, each wrapped in a ``\n\n`` (the processor's ``image_seq_length``;
#: pan-and-scan crops are off unless the server turns them on). Not PaliGemma (up to 4,096 an image).
GEMMA_IMAGE_TOKENS = 260

# --- image pricing (counting/images.py) -----------------------------------------------------------------
#: Gemini tiles images larger than 384 px on a side into 768x768 crops (Gemini 2.0, 1.5): 258 tokens each
IMAGE_TILE = 768
IMAGE_SMALL_EDGE = 384

# --- overflow wording (learning/overflow.py) ------------------------------------------------------------
_N = r"\d[\d,]*"
_EXCEEDS = re.compile(rf"input token count\s*\(?(?P<prompt>{_N})\)?\s*exceeds the maximum number of tokens "
                      rf"allowed\s*\(?(?P<window>{_N})\)?", re.IGNORECASE | re.ASCII)

RECORD = ProviderRecord(
    family="gemini",
    keywords=("gemini", "gemma"),
    band=CountBand(under=0.02, over=0.45),
    overflow=(OverflowWording("gemini", _EXCEEDS, "window", "prompt"),),
    count_endpoint=CountEndpoint(
        provider="gemini", shape="gemini", default_base="https://generativelanguage.googleapis.com",
        key_env="GEMINI_API_KEY", base_suffixes=("/v1beta",), path="/v1beta/models/{model}:countTokens",
        key_header="x-goog-api-key", wrap="generateContentRequest",
        fields=("contents", "systemInstruction", "system_instruction", "tools", "toolConfig", "tool_config",
                "generationConfig", "cachedContent")),
)
