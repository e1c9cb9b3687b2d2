"""A real, small ``tokenizer.json`` and ``tokenizer_config.json`` built offline for tests: a byte-level BPE
trained with the ``tokenizers`` library on a few strings, with Llama 3's special tokens, and the repo's
Llama 3.1 chat template (``tests/e2e/llama31_template.jinja``)."""

from __future__ import annotations

import json
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "e2e" / "llama31_template.jinja"
SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<|eom_id|>", "<|python_tag|>"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "def count(tokens):\n\treturn len(tokens)  # tabs and newlines\n",
    '{"name": "read_file", "parameters": {"path": "src/main.py", "lines": [1, 200]}}',
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n",
    "Given the following functions, please respond with a JSON for a function call with its proper arguments.",
    "error: 404 not found\tretry 3 of 5\nstack trace follows 0123456789",
]


def build(folder: Path, *, vocab_size: int = 400) -> tuple[Path, Path]:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` into ``folder``; returns their paths."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS * 3, trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer_path = folder / "tokenizer.json"
    tokenizer.save(str(tokenizer_path))
    config_path = folder / "tokenizer_config.json"
    config_path.write_text(json.dumps({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                                       "chat_template": TEMPLATE.read_text(encoding="utf-8")}), encoding="utf-8")
    return tokenizer_path, config_path
