"""End to end: images on self-hosted vision models, counted as their servers count them.

A real litellm proxy in front of seven ``fake_vllm.py`` servers, each a vision model whose server adds the visual
tokens its image processor makes of every image (written from the processors' own code: Qwen3-VL's
``smart_resize`` over 32x32 patches, Pixtral's grid of 16x16 patches with a break a row, Llama 4's tiles, and
Qwen2.5-VL's 28x28 patches behind a name no family keyword knows, ``hosted_vllm/my-vlm``), Gemma 3's 256 soft tokens
an image, and two vision architectures built on known language families, LLaVA-OneVision (on Qwen2) and InternVL3
(whose tiles do not follow the image's pixels).

The gateway priced each image with OpenAI's tiles (765 at most, 85 with ``detail: low``), so one 3840x2160
screenshot, 8,162 tokens on Qwen3-VL and 10,551 on Qwen2.5-VL, was counted as 765 and forwarded into a 6,000-token
window: the server refused it after the call. Now:

* an image costs at least what the server counts for it (the difference a request with and without it makes, on
  both sides), at four sizes;
* a request over the window because of its image is refused by the gateway, and the server never sees it;
* a small image passes and is forwarded;
* vLLM's ``mm_processor_kwargs`` (how many tokens an image becomes) are the operator's: set on the deployment they
  are sent, sent by a client they are refused;
* an eighth server's ``/tokenize`` counts one token an image (vLLM before 0.17): with ``provider_count: always`` a
  request holding images is decided on the estimate, not on that count.

Every server renders Llama 3.1's chat template around the text, whatever its model, so the tests compare what an
image adds on each side, not whole requests.
"""

from __future__ import annotations

import uuid

import pytest

from ..test_provider_undercounts import png
from .conftest import write_config
from .harness import Process, model_entry, payloads_with, post, start_fake_vllm, start_proxy

pytestmark = pytest.mark.e2e
WINDOW = 6000
#: group -> (the model the deployment names, the server's image processor)
SERVERS = {
    "qwen3vl": ("Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl"),
    "pixtral": ("mistralai/Pixtral-12B-2409", "pixtral"),
    "llama4": ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama4"),
    "unknown": ("my-vlm", "qwen2_vl"),
    "gemma": ("google/gemma-3-12b-it", "gemma3"),
    # vision architectures built on a known language family (a review: priced by the family's formula)
    "onevision": ("llava-hf/llava-onevision-qwen2-7b-ov-hf", "llava_ov"),
    "internvl": ("OpenGVLab/InternVL3-8B", "internvl"),
}
#: a window of its own: an unknown vision model's image costs the most any encoder makes of it (8,900 at least)
WINDOWS = {"unknown": 30_000, "onevision": 20_000}
#: the groups whose three 3840x2160 images are over the window (Gemma reads any image as 260 tokens)
LARGE = [group for group in SERVERS if group != "gemma"]
SIZES = [(3840, 2160), (1024, 1024), (1000, 700), (300, 200)]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("open_model_images")
    started: list[Process] = []
    try:
        servers = {}
        for group, (model, vision) in SERVERS.items():
            servers[group] = start_fake_vllm(folder, model, WINDOWS.get(group, WINDOW), vision=vision, name=group)
            started.append(servers[group])
        # vLLM before 0.17: its /tokenize ran no image processor (one token an image), asked for every request
        servers["old_tokenize"] = start_fake_vllm(folder, "Qwen/Qwen2.5-VL-7B-Instruct", 32_768, vision="qwen2_vl",
                                                  name="old_tokenize", args=("--tokenize-placeholders",))
        started.append(servers["old_tokenize"])

        def entry(group: str, server: str, **params) -> dict:
            return model_entry(group, f"hosted_vllm/{SERVERS[server][0]}", f"http://127.0.0.1:{servers[server].port}/v1",
                               WINDOWS.get(server, WINDOW), **params)
        config = {
            "model_list": [*(entry(group, group) for group in SERVERS),
                           entry("operator_set", "qwen3vl", mm_processor_kwargs={"max_pixels": 1_000_000}),
                           model_entry("old_tokenize", "hosted_vllm/Qwen/Qwen2.5-VL-7B-Instruct",
                                       f"http://127.0.0.1:{servers['old_tokenize'].port}/v1", 32_768)],
            "litellm_settings": {"callbacks": ["budget_hook.proxy.plugin"], "num_retries": 0},
            "callback_settings": {"budget_hook": {"models": {"old_tokenize": {"provider_count": "always"}}}},
        }
        process = start_proxy(write_config(folder / "proxy", config), log_dir=folder)
        started.append(process)
        yield process, servers
    finally:
        for process in reversed(started):
            process.stop()


def body(group: str, tag: str, image: str | None, detail: str = "auto") -> dict:
    content: list[dict] = [{"type": "text", "text": f"[{tag}] what does this show?"}]
    if image is not None:
        content.append({"type": "image_url", "image_url": {"url": image, "detail": detail}})
    return {"model": group, "max_tokens": 50, "messages": [{"role": "user", "content": content}]}


def served(proxy: Process, group: str, tag: str, image: str | None, detail: str = "auto") -> tuple[int, int]:
    """(what the gateway counted, what the server counted) for a request that is forwarded."""
    response = post(proxy, "/v1/chat/completions", body(group, tag, image, detail))
    assert response.status_code == 200, response.text[:300]
    assert response.headers["x-budget-decision"] == "pass"
    return int(response.headers["x-budget-tokens-before"]), response.json()["usage"]["prompt_tokens"]


@pytest.mark.parametrize("group", list(SERVERS))
@pytest.mark.parametrize("size", SIZES[1:], ids=[f"{w}x{h}" for w, h in SIZES[1:]])
def test_an_image_costs_at_least_what_the_server_counts(proxy, group, size):
    process, _ = proxy
    tag = uuid.uuid4().hex[:8]
    text_counted, text_served = served(process, group, tag, None)
    counted, server = served(process, group, tag, png(*size), detail="low")  # the server ignores ``detail``
    assert counted - text_counted >= server - text_served > 0


@pytest.mark.parametrize("group", LARGE)
def test_an_image_over_the_window_never_reaches_the_server(proxy, group):
    process, servers = proxy
    tag = f"big{uuid.uuid4().hex[:8]}"
    images = [{"type": "image_url", "image_url": {"url": png(3840, 2160)}}] * 3  # 3 x 2,322-10,551 tokens
    request = body(group, tag, None)
    request["messages"][0]["content"] += images
    response = post(process, "/v1/chat/completions", request)
    assert response.status_code == 400, response.text[:300]
    assert response.headers["x-budget-decision"] == "blocked"
    assert int(response.headers["x-budget-tokens-before"]) > WINDOWS.get(group, WINDOW)
    assert payloads_with(servers[group], tag) == []


@pytest.mark.parametrize("group", list(SERVERS))
def test_a_small_image_passes(proxy, group):
    process, servers = proxy
    tag = f"small{uuid.uuid4().hex[:8]}"
    served(process, group, tag, png(300, 200))
    assert len(payloads_with(servers[group], tag)) == 1


def test_gemma_images_cost_what_gemma_reads_not_geminis_tiles(proxy):
    """Gemma 3 on a server of one's own reads every image as 256 soft tokens and 4 markers; it was priced by Gemini's
    tiles (5,161 for 1024x1024, 20,641 for an image of unknown size), so a few screenshots overflowed a small window."""
    process, _ = proxy
    tag = f"gemma{uuid.uuid4().hex[:8]}"
    text_counted, text_served = served(process, "gemma", tag, None)
    request = body("gemma", tag, None)
    request["messages"][0]["content"] += [{"type": "image_url", "image_url": {"url": png(3840, 2160)}}] * 3
    response = post(process, "/v1/chat/completions", request)
    assert response.status_code == 200, response.text[:300]
    counted, server = int(response.headers["x-budget-tokens-before"]), response.json()["usage"]["prompt_tokens"]
    assert server - text_served <= counted - text_counted <= server - text_served + 15


def test_the_servers_media_settings_are_the_operators_alone(proxy):
    """``mm_processor_kwargs`` sets how many tokens an image becomes on vLLM (Qwen-VL's ``max_pixels``): a client's is
    refused naming it (``tests/e2e/test_hostile_e2e.py``), the operator's on the deployment is sent."""
    process, servers = proxy
    tag = f"operator{uuid.uuid4().hex[:8]}"
    served(process, "operator_set", tag, png(300, 200))
    assert payloads_with(servers["qwen3vl"], tag)[0]["mm_processor_kwargs"] == {"max_pixels": 1_000_000}
    client = body("qwen3vl", f"client{tag}", png(300, 200))
    response = post(process, "/v1/chat/completions", {**client, "mm_processor_kwargs": {"max_pixels": 100_000_000}})
    assert response.status_code == 400 and "mm_processor_kwargs" in response.json()["error"]["message"]
    assert payloads_with(servers["qwen3vl"], f"client{tag}") == []


def test_a_server_s_count_that_prices_no_image_is_not_taken(proxy):
    """An attack review of 2026-12-07: vLLM's ``/tokenize`` ran no image processor before 0.17, so with ``provider_count:
    always`` six 3840x2160 images (about 63,000 tokens) were counted 50 by the server, the estimate scaled by 0.001, and
    the request reached a 32,768-token server. A request holding media is not counted by a self-hosted server: the
    estimate decides; a text request still is."""
    process, servers = proxy
    tag = f"sixk{uuid.uuid4().hex[:8]}"
    request = body("old_tokenize", tag, None)
    request["messages"][0]["content"] += [{"type": "image_url", "image_url": {"url": png(3840, 2160)}}] * 6
    response = post(process, "/v1/chat/completions", request)
    assert response.status_code == 400 and response.headers["x-budget-decision"] == "blocked", response.text[:300]
    assert int(response.headers["x-budget-tokens-before"]) > 60_000
    assert [p for p in payloads_with(servers["old_tokenize"], tag) if "max_tokens" in p] == []  # no chat call
    text = f"text{uuid.uuid4().hex[:8]}"
    response = post(process, "/v1/chat/completions", body("old_tokenize", text, None))
    assert response.status_code == 200 and "provider" in response.headers["x-budget-count-method"], response.headers
