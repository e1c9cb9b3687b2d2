"""Images on open models priced by the model's own vision encoder (issue theme: self-hosted open models under-counted).

The counter priced an image by OpenAI's tiles (at most 765 for any image of known size) on every open model but
Qwen2-VL / Qwen2.5-VL. An open model's server reads the whole image with its encoder and ignores ``detail``:

* Qwen3-VL and the natively multimodal Qwen3.5 and later: 32x32 patches, 8,162 tokens for 3840x2160;
* Pixtral 12B (Mistral): a token a 16x16 patch up to 1,024 pixels, 4,160 for 1024x1024 (``detail: low``: 85 counted);
* Llama 4: 144 tokens a 336-pixel tile, up to 16 tiles and a global view, 2,467;
* a vision model of a family not known here (``hosted_vllm/internvl3``, ``openai/my-vlm`` on a server of its
  own): up to 16,386 with Qwen2.5-VL's encoder.

Each formula is checked against the processors' own algorithms as ``tests/e2e/fake_vllm.py`` writes them (the
stand-in server the end-to-end tests price images with).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget_hook.counting import TokenCounter
from budget_hook.counting import images as formulas

from .e2e.fake_vllm import visual_tokens
from .test_provider_undercounts import png
from .test_qwen_vl_images import image_cost

FORMULA_OF = {
    "hosted_vllm/Qwen/Qwen3-VL-8B-Instruct": "qwen3_vl",
    "hosted_vllm/Qwen/Qwen3-VL-235B-A22B-Thinking": "qwen3_vl",
    "openai/qwen3_vl_30b": "qwen3_vl",
    "hosted_vllm/Qwen/Qwen3.5-27B": "qwen3_vl",
    "ollama/qwen3.6:35b": "qwen3_vl",
    "hosted_vllm/Qwen/Qwen3-Omni-30B-A3B-Instruct": "qwen3_vl",
    "hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct": "qwen_vl",
    "hosted_vllm/Qwen/QVQ-72B-Preview": "open_bound",  # no family keyword: the bound (Qwen2-VL's encoder within it)
    "hosted_vllm/Qwen/Qwen2.5-Omni-7B": "qwen_vl",
    "hosted_vllm/Qwen/Qwen4-VL-8B": "open_bound",  # a Qwen vision model of a later generation
    "hosted_vllm/mistralai/Pixtral-12B-2409": "pixtral",
    "hosted_vllm/mistralai/Mistral-Small-3.1-24B-Instruct-2503": "pixtral",
    "mistral/pixtral-large-latest": "pixtral",
    "hosted_vllm/meta-llama/Llama-4-Scout-17B-16E-Instruct": "llama4",
    "together_ai/meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8": "llama4",
    "hosted_vllm/deepseek-ai/deepseek-vl2": "open_bound",
    "ollama/gemma3:12b": "gemma",
    "hosted_vllm/google/gemma-3-27b-it": "gemma",
    "hosted_vllm/google/gemma-3n-E4B-it": "gemma",
    "gemini/gemma-3-27b-it": "gemini_tiles",  # Google's servers bill as Gemini bills
    "hosted_vllm/google/paligemma2-3b-pt-896": "paligemma",  # 4,096 an image at 896 px
    "hosted_vllm/OpenGVLab/InternVL3-8B": "internvl",
    # vision architectures are known by their own name before the language family they are built on (a review)
    "hosted_vllm/llava-hf/llava-onevision-qwen2-7b-ov-hf": "llava_onevision",
    "hosted_vllm/llava-hf/llama3-llava-next-8b-hf": "llava",
    "hosted_vllm/llava-hf/llava-v1.6-mistral-7b-hf": "llava",
    "hosted_vllm/llava-hf/llava-interleave-qwen-7b-hf": "llava",
    "ollama/llava:7b": "llava",
    "hosted_vllm/HuggingFaceM4/Idefics3-8B-Llama3": "idefics",
    "hosted_vllm/HuggingFaceTB/SmolVLM-Instruct": "idefics",
    "ollama/minicpm-v": "minicpm",
    "hosted_vllm/openbmb/MiniCPM-Llama3-V-2_5": "minicpm",
    "ollama/moondream": "moondream",
    "hosted_vllm/deepseek-ai/Janus-Pro-7B": "janus",
    "hosted_vllm/facebook/chameleon-7b": "chameleon",
    "hosted_vllm/nvidia/Llama-3.1-Nemotron-Nano-VL-8B-V1": "open_bound",
    "hosted_vllm/deepseek-ai/DeepSeek-OCR": "open_bound",
    "ollama/llama3.2-vision": "openai_tiles",  # cross-attention: an image is one token of the prompt
    "openai/my-vlm": "open_bound",
    "hosted_vllm/my-model": "open_bound",
    # OpenAI's own and text models of known families: OpenAI's tiles. Closed vendors of a family not known here: the
    # larger of OpenAI's tiles and Claude's formula, ``detail`` ignored (an attack review of 2026-12-07: a Bedrock
    # inference profile's ARN serving Claude priced a 1568x1568 image at 85 tokens, ``low``, against 1,697)
    "gpt-4o": "openai_tiles",
    "azure/my-gpt-deployment": "openai_tiles",
    "bedrock/converse/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3": "closed_bound",
    "xai/grok-2-vision-1212": "closed_bound",
    "bedrock/us.amazon.nova-pro-v1:0": "closed_bound",
    "cohere/command-a-vision-07-2025": "closed_bound",
    "hosted_vllm/CohereLabs/command-a-vision-07-2025": "open_bound",  # the same vendor's open weights, self-hosted
    "openrouter/x-ai/grok-2-vision-1212": "closed_bound",  # the same closed vendors behind a router of many models
    "azure_ai/grok-3": "closed_bound",
    "openrouter/qwen/qwen2.5-vl-72b-instruct": "qwen_vl",
    # a second review: more spellings
    "hosted_vllm/TIGER-Lab/Mantis-8B-siglip-llama3": "llava",
    "hosted_vllm/meta-llama/Llama-Guard-4-12B": "llama4",
    "hosted_vllm/lmms-lab/LLaVA-Video-7B-Qwen2": "llava_onevision",
    "hosted_vllm/llava-hf/LLaVA-NeXT-Video-7B-hf": "llava",
    "fireworks_ai/accounts/fireworks/models/llama-v3p2-11b-vision-instruct": "openai_tiles",  # cross-attention
    "together_ai/meta-llama/Llama-Vision-Free": "openai_tiles",
    "hosted_vllm/Qwen/Qwen2.5-7B-Instruct-vllm": "openai_tiles",  # "vl" of "vllm" marks no vision model
    "hosted_vllm/Qwen/Qwen2.5-7B-Instruct": "openai_tiles",
    "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct": "openai_tiles",
    "hosted_vllm/deepseek-ai/DeepSeek-V3": "openai_tiles",
}
#: the reference processor each formula stands for (a bound stands for all of them)
REFERENCES = {"qwen_vl": ("qwen2_vl",), "qwen3_vl": ("qwen3_vl",), "pixtral": ("pixtral", "mistral_small"),
              "llama4": ("llama4",), "gemma": ("gemma3",), "llava": ("llava15", "llava_next"),
              "llava_onevision": ("llava_ov",), "idefics": ("idefics3", "smolvlm"), "internvl": ("internvl",),
              "minicpm": ("minicpm",), "moondream": ("moondream",), "janus": ("janus",), "chameleon": ("chameleon",),
              "paligemma": ("paligemma",)}
#: the bound stands for every encoder
REFERENCES["open_bound"] = tuple(kind for kinds in REFERENCES.values() for kind in kinds)
images_fixed = formulas.FIXED_ENCODERS
SIZES = st.tuples(st.integers(1, 12_000), st.integers(1, 12_000)).filter(lambda s: max(s) / min(s) <= 200)


@pytest.mark.parametrize("model", list(FORMULA_OF))
def test_each_model_prices_images_with_its_encoder(model):
    assert TokenCounter.for_model(model).profile.image_formula == FORMULA_OF[model]


OPEN = [m for m, f in FORMULA_OF.items() if f not in ("openai_tiles", "gemini_tiles", "closed_bound")]


@pytest.mark.parametrize("model", OPEN)
def test_a_large_image_costs_what_the_encoder_makes_of_it_whatever_its_detail(model):
    formula = FORMULA_OF[model]
    real = max(visual_tokens(kind, 3840, 2160) for kind in REFERENCES[formula])
    counted = image_cost(model, png(3840, 2160))
    assert counted >= real  # each was counted as 765 at most (OpenAI's tiles), 85 with ``detail: low``
    if formula in images_fixed:
        assert counted <= images_fixed[formula] + 5  # a fixed price (not Gemini's 5,161 for Gemma)
    else:
        assert real > 2_000
    low = TokenCounter.for_model(model).count_request({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png(3840, 2160), "detail": "low"}}]}]}).total
    assert low >= real  # the server ignores ``detail``: it was 85


@pytest.mark.parametrize("model", OPEN)
def test_an_image_of_unknown_size_costs_the_most_its_encoder_makes(model):
    worst = {"qwen_vl": 16_386, "qwen3_vl": 16_386, "pixtral": 4_160, "llama4": 2_467, "open_bound": 16_386,
             **images_fixed}
    assert image_cost(model, "https://example.com/cat.png") >= worst[FORMULA_OF[model]]


def test_closed_vendors_and_openai_keep_their_price():
    for model in ("azure/my-gpt-deployment", "gpt-4o"):
        assert image_cost(model, png(3840, 2160)) < 1_200
    assert image_cost("xai/grok-2-vision-1212", png(3840, 2160)) < 2_000  # Claude's 1,568 x 882: 1,844


@given(size=SIZES, formula=st.sampled_from(sorted(REFERENCES)))
def test_the_price_is_never_under_what_the_processors_make(size, formula):
    counted = formulas.open_model_image_tokens(formula, size)
    assert counted >= max(visual_tokens(kind, *size) for kind in REFERENCES[formula])
    assert counted <= formulas.open_model_image_tokens(formula, None)  # an unknown size is the worst case


@given(size=SIZES)
def test_qwen_and_pixtral_prices_are_the_processors_own(size):
    assert formulas.qwen3_vl_tokens(*size) == visual_tokens("qwen3_vl", *size)
    assert formulas.qwen_vl_tokens(*size) == visual_tokens("qwen2_vl", *size)
    # mistral-common rounds the scaled size, the formula rounds it up: at most a row and a column more
    pixtral = visual_tokens("pixtral", *size)
    assert pixtral <= formulas.pixtral_tokens(*size) <= pixtral + 2 * 66


MEDIA_SETTINGS = {
    "mm_processor_kwargs": {"mm_processor_kwargs": {"max_pixels": 100_000_000}},
    "extra_body.mm_processor_kwargs": {"extra_body": {"mm_processor_kwargs": {"max_pixels": 100_000_000}}},
    "media_io_kwargs": {"media_io_kwargs": {"video": {"num_frames": 4096}}},
    "fallbacks[0].mm_processor_kwargs": {"fallbacks": [{"model": "other", "mm_processor_kwargs": {"do_pan_and_scan": True}}]},
}


@pytest.mark.parametrize("path", list(MEDIA_SETTINGS))
def test_a_client_setting_the_servers_media_processing_is_refused_naming_it(path):
    """vLLM's ``mm_processor_kwargs`` replace its image processor's settings (Qwen-VL's ``max_pixels`` 100,000,000
    reads a 10,000-pixel square as 127,451 tokens where the gateway prices it at 16,386), ``media_io_kwargs`` a
    video's frames; LiteLLM forwards both, from ``extra_body`` too."""
    from budget_hook.pipeline.bounds import body_problem, prompt_parameter_remedy

    body = {"model": "g", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png(10_000, 10_000)}}]}], **MEDIA_SETTINGS[path]}
    problem = body_problem(body, ("messages",))
    assert problem is not None and problem.field == path
    assert "image" in prompt_parameter_remedy(path)
    assert body_problem({**body, **dict.fromkeys(MEDIA_SETTINGS[path], None)}, ("messages",)) is None  # unset
    assert formulas.qwen_vl_tokens(10_000, 10_000, max_pixels=100_000_000) == 127_451


@pytest.mark.parametrize("model, floor", [("hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct", 12_290),
                                          ("hosted_vllm/Qwen/Qwen3-VL-8B-Instruct", 24_576),
                                          ("openai/my-vlm", 30_000), ("hosted_vllm/zai-org/GLM-4.5V", 30_000),
                                          ("ollama/llava-onevision", 24_576),
                                          ("hosted_vllm/llava-hf/LLaVA-NeXT-Video-7B-hf", 32 * 144)])
def test_a_video_on_an_open_model_costs_at_least_the_frames_its_server_samples(model, floor):
    """A review: vLLM samples a video's frames whatever its bytes (Qwen2.5-VL: 32 frames, two a group of up to 768
    tokens; a 20 KB clip was counted as 3,015 and a 1-2 s 1080p clip reads about 11,522), where the gateway priced a
    video by its size at the lowest bitrate (Gemini's tokens per second)."""
    import base64

    clip = "data:video/mp4;base64," + base64.b64encode(b"x" * 20_000).decode()
    counter = TokenCounter.for_model(model)
    for part in ({"type": "video_url", "video_url": {"url": clip}}, {"type": "video_url", "video_url": {
            "url": "https://example.com/clip.mp4"}}, {"type": "file", "file": {"file_data": clip}},
            # LiteLLM sends these to an OpenAI-compatible server as a ``video_url`` too (a second review)
            {"type": "file", "file": {"file_data": "https://example.com/clip", "format": "video/mp4"}},
            {"type": "file", "file": {"file_id": "https://example.com/clip.MP4"}}):
        assert counter.count_request({"messages": [{"role": "user", "content": [part]}]}).total >= floor


def test_a_video_elsewhere_keeps_its_price_by_size():
    import base64

    clip = "data:video/mp4;base64," + base64.b64encode(b"x" * 20_000).decode()
    for model in ("gpt-4o", "gemini/gemini-2.0-flash", "ollama/gemma3"):
        body = {"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": clip}}]}]}
        assert TokenCounter.for_model(model).count_request(body).total < 3_100


def test_a_closed_vendor_s_unknown_model_prices_an_image_as_claude_or_openai_would_whatever_its_detail():
    """An attack review of 2026-12-07: a Bedrock inference profile's ARN names no model, so its images were priced by
    OpenAI's tiles with ``detail: low`` honoured (85 tokens for a 1568x1568 image Claude reads as 1,697)."""
    from budget_hook.counting.images import anthropic_image_tokens, image_price

    arn = TokenCounter.for_model("bedrock/converse/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x")
    claude = TokenCounter.for_model("bedrock/converse/us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    for detail in ("low", "high", "auto"):
        for size in ((1568, 1568), (512, 512), (4000, 300), None):
            price = image_price("closed_bound", size, detail=detail, base=85, tile=170, multiplier=1.0)
            assert price >= image_price("openai_tiles", size, detail="high", base=85, tile=170, multiplier=1.0)
            assert price >= (anthropic_image_tokens(*size) if size else image_price(
                "anthropic", None, detail=detail, base=85, tile=170, multiplier=1.0))
    assert arn.profile.image_formula == "closed_bound" and claude.profile.image_formula == "anthropic"
    assert image_price("closed_bound", (1568, 1568), detail="low", base=85, tile=170, multiplier=1.0) >= \
        anthropic_image_tokens(1568, 1568) > 1_500
