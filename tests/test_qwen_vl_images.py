"""Images on Qwen2-VL / Qwen2.5-VL (a fourteenth attack review, F5): the model reads 28x28-pixel patches of the image
resized within ``max_pixels`` (12,845,056 by default: up to 16,384 visual tokens), where the counter priced it by
OpenAI's tiles (765 at most). A 3840x2160 PNG to ``hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct`` is 10,549 tokens."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from budget_hook.counting import TokenCounter

from .e2e.fake_vllm import smart_resize
from .test_provider_undercounts import png

VL_MODELS = ("hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct", "hosted_vllm/Qwen/Qwen2-VL-2B-Instruct",
             "openai/qwen2_5_vl")
#: the most visual tokens one image takes, with ``<|vision_start|>`` and ``<|vision_end|>``
WORST = 16_384 + 2


def image_request(url: str) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "describe"},
                                                      {"type": "image_url", "image_url": {"url": url}}]}]}


def image_cost(model: str, url: str) -> int:
    counter = TokenCounter.for_model(model)
    return counter.count_request(image_request(url)).total - counter.count_request(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "describe"}]}]}).total


@pytest.mark.parametrize("model", VL_MODELS)
def test_a_4k_image_costs_its_patches(model):
    assert image_cost(model, png(3840, 2160)) >= 77 * 137  # the review: 10,549 visual tokens, counted as 765


@pytest.mark.parametrize("model", VL_MODELS)
def test_an_image_of_unknown_size_costs_the_most_any_image_can(model):
    assert image_cost(model, "https://example.com/cat.png") >= WORST - 2


def test_other_qwen_models_keep_their_image_price():
    assert image_cost("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", png(3840, 2160)) < 2_000  # OpenAI's tiles


@given(width=st.integers(1, 20_000), height=st.integers(1, 20_000))
def test_the_price_is_the_processor_patches_never_fewer_never_past_the_cap(width, height):
    from budget_hook.counting.images import qwen_vl_tokens

    counted = qwen_vl_tokens(width, height)
    assert counted <= WORST
    if max(width, height) / min(width, height) <= 200:  # the processor refuses a longer ratio
        h_bar, w_bar = smart_resize(height, width)
        assert counted >= (h_bar // 28) * (w_bar // 28) + 2
