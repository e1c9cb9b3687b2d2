"""Image sizes from base64 headers, and what providers charge for an image.

Contract: nothing here decodes an image or touches the network. ``image_dimensions`` reads width and
height from the first bytes of a PNG, JPEG, GIF or WebP given as a ``data:`` URL (or bare base64) and
returns ``None`` when it cannot tell. The pricing functions then apply the provider's published
formula, or a documented conservative default when the size is unknown (a URL we may not fetch).
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import struct
from collections.abc import Callable

from ..providers import anthropic as _anthropic
from ..providers import gemini as _gemini

#: Bytes of a JPEG we are prepared to scan for its size marker (EXIF blocks can push it back ~64 KiB).
_JPEG_SCAN_LIMIT = 1 << 20
#: JPEG markers (and fill bytes) examined, at most: a real JPEG reaches its size within a few dozen; after
#: that its size is unknown (priced at the worst case) rather than searched for one byte at a time
_JPEG_MAX_MARKERS = 1024


_URLSAFE = str.maketrans("-_", "+/")


def decode_data_url(url: str, *, max_bytes: int | None = None) -> bytes | None:
    """The leading bytes of a base64 ``data:`` URL (or bare base64), or None if it is not base64."""
    payload = url
    if url.startswith("data:"):
        header, sep, payload = url.partition(",")
        if not sep or ";base64" not in header:
            return None
    if max_bytes is not None:
        payload = payload[: (max_bytes // 3 + 1) * 4 * 2]  # room for MIME line breaks (76 characters a line)
    if any(ch in payload for ch in "\n\r \t"):
        payload = "".join(payload.split())  # MIME-style base64 wraps its lines
    if max_bytes is not None:
        payload = payload[: (max_bytes // 3 + 1) * 4]
    if "-" in payload or "_" in payload:
        payload = payload.translate(_URLSAFE)  # the URL-safe alphabet (Google's SDKs send bytes that way)
    payload = payload[: len(payload) - len(payload) % 4]
    try:
        return base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return None


def image_dimensions(url: str) -> tuple[int, int] | None:
    """(width, height) of a base64 image, read from its header; None when unknown."""
    if not url.startswith("data:") and "://" in url[:16]:
        return None  # a remote URL: no network at run time
    head = decode_data_url(url, max_bytes=64 * 1024)
    if not head:
        return None
    size = _dimensions_from_header(head)
    if size is None and head[:2] == b"\xff\xd8":
        full = decode_data_url(url, max_bytes=_JPEG_SCAN_LIMIT)
        size = _jpeg_size(full) if full else None
    return size


def _dimensions_from_header(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            width = 1 + int.from_bytes(data[24:27], "little")
            height = 1 + int.from_bytes(data[27:30], "little")
            return width, height
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", data[26:30])
            return width & 0x3FFF, height & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    index = 2
    for _ in range(_JPEG_MAX_MARKERS):
        index = data.find(b"\xff", index)  # bytes between markers are skipped in C, not one by one
        if index < 0 or index + 9 >= len(data):
            return None
        marker = data[index + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            index += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        # SOF0..SOF15 carry the size, except DHT (C4), JPG (C8) and DAC (CC).
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return width, height
        index += 2 + length
    return None


# --- provider formulas ------------------------------------------------------------------------------


def openai_tile_tokens(width: int, height: int, *, base: int = 85, per_tile: int = 170) -> int:
    """OpenAI high-detail images: fit in 2048x2048, shortest side to 768, then base + per 512-px tile."""
    w, h = float(max(width, 1)), float(max(height, 1))
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return base + per_tile * tiles


def openai_tile_tokens_worst_case(*, base: int = 85, per_tile: int = 170) -> int:
    """The most any image can cost under the tile formula (768x2048 after scaling: 8 tiles)."""
    return base + per_tile * 8


def openai_patch_tokens(width: int, height: int, *, multiplier: float) -> int:
    """OpenAI patch-priced models (gpt-4.1-mini, o4-mini, ...): 32-px patches, capped at 1536, x multiplier."""
    width, height = max(width, 1), max(height, 1)
    patches = math.ceil(width / 32) * math.ceil(height / 32)
    if patches > 1536:
        shrink = math.sqrt(1536 * 32 * 32 / (width * height))
        width_scaled, height_scaled = width * shrink, height * shrink
        shrink *= min(
            math.floor(width_scaled / 32) / (width_scaled / 32), math.floor(height_scaled / 32) / (height_scaled / 32)
        )
        patches = min(1536, math.ceil(width * shrink / 32) * math.ceil(height * shrink / 32))
    return math.ceil(patches * multiplier)


def openai_patch_tokens_worst_case(*, multiplier: float) -> int:
    return math.ceil(1536 * multiplier)


#: Anthropic's resize rule and what its bills add to width*height/750: ``IMAGE_*`` in ``providers/anthropic.py``
def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic: width*height/750 after its resize rule (Claude vision docs), plus what the bills show."""
    width, height = max(width, 1), max(height, 1)
    scale = min(1.0, _anthropic.IMAGE_MAX_EDGE / max(width, height),
                math.sqrt(_anthropic.IMAGE_MAX_PIXELS / (width * height)))
    return math.ceil(width * scale * height * scale / _anthropic.IMAGE_PIXELS_PER_TOKEN * _anthropic.IMAGE_FACTOR) + \
        _anthropic.IMAGE_FRAMING


def anthropic_image_tokens_worst_case() -> int:
    return math.ceil(_anthropic.IMAGE_MAX_PIXELS / _anthropic.IMAGE_PIXELS_PER_TOKEN * _anthropic.IMAGE_FACTOR) + \
        _anthropic.IMAGE_FRAMING


#: Gemini tiles images larger than 384 px on a side into 768x768 crops (Gemini 2.0, 1.5): ``IMAGE_TILE``,
#: ``IMAGE_SMALL_EDGE`` in ``providers/gemini.py``
GEMINI_TILE = _gemini.IMAGE_TILE
GEMINI_SMALL_EDGE = _gemini.IMAGE_SMALL_EDGE


def gemini_tile_tokens(width: int, height: int, *, base: int, per_tile: int) -> int:
    """Gemini 2.0 / 1.5 and Vertex AI: ``base`` (258) for an image of at most 384 px on both sides, else
    ``per_tile`` (1,290 measured for a 640x480 image on gemini-2.0-flash) per 768-px tile."""
    width, height = max(width, 1), max(height, 1)
    if width <= GEMINI_SMALL_EDGE and height <= GEMINI_SMALL_EDGE:
        return base
    return per_tile * math.ceil(width / GEMINI_TILE) * math.ceil(height / GEMINI_TILE)


def gemini_tile_tokens_worst_case(*, per_tile: int) -> int:
    """An image of unknown size: as if 3072x3072 (16 tiles), the largest Gemini keeps before scaling."""
    return per_tile * 16


#: Qwen2-VL and Qwen2.5-VL read an image as 28x28-pixel patches (14-pixel patches merged 2x2) of the image resized
#: to multiples of 28 (``smart_resize`` of their image processor) within ``min_pixels`` and ``max_pixels`` (the
#: defaults of their ``preprocessor_config.json``), one token a patch, between ``<|vision_start|>`` and
#: ``<|vision_end|>``: up to 16,384 visual tokens an image, 10,549 for 3840x2160
QWEN_VL_PATCH = 28
QWEN_VL_MIN_PIXELS = 56 * 56
QWEN_VL_MAX_PIXELS = 28 * 28 * 16_384  # 12,845,056
QWEN_VL_FRAMING = 2
#: Qwen3-VL and the natively multimodal Qwen3.5 and later: 16-pixel patches merged 2x2 (32 pixels), the same
#: ``smart_resize`` within ``size.shortest_edge`` 65,536 and ``size.longest_edge`` 16,777,216 pixels (their
#: ``preprocessor_config.json``): up to 16,384 visual tokens, 8,162 for 3840x2160
QWEN3_VL_PATCH = 32
QWEN3_VL_MIN_PIXELS = 65_536
QWEN3_VL_MAX_PIXELS = 16_777_216
#: Pixtral (mistral-common's image encoder): the image scaled to fit ``max_image_size`` on its longer side, one token
#: a patch and one ``[IMG_BREAK]`` (the last ``[IMG_END]``) a row: Pixtral 12B and Large 16-pixel patches up to
#: 1,024 pixels (4,160 tokens at most), Mistral Small 3.1/3.2 14-pixel patches merged 2x2 up to 1,540 (3,080)
PIXTRAL_GRIDS = ((16, 1024), (28, 1540))
#: Llama 4: 336-pixel tiles, 144 tokens each (24x24 patches of 14 pixels, pixel-shuffled by 0.5), at most 16 tiles
#: plus a global view of 144 when there are several, a separator a tile and 3 framing tokens
LLAMA4_TILE, LLAMA4_TILE_TOKENS, LLAMA4_MAX_TILES, LLAMA4_FRAMING = 336, 144, 16, 3


def qwen_vl_tokens(width: int, height: int, *, max_pixels: int = QWEN_VL_MAX_PIXELS, factor: int = QWEN_VL_PATCH,
                   min_pixels: int = QWEN_VL_MIN_PIXELS) -> int:
    """Tokens of a ``width`` x ``height`` image on Qwen2-VL / Qwen2.5-VL (their ``smart_resize``); ``factor``,
    ``min_pixels`` and ``max_pixels`` of Qwen3-VL: ``qwen3_vl_tokens``."""
    width, height = max(1, width), max(1, height)
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return min((h_bar // factor) * (w_bar // factor), max_pixels // (factor * factor)) + QWEN_VL_FRAMING


def qwen3_vl_tokens(width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` image on Qwen3-VL, Qwen3.5 and later."""
    return qwen_vl_tokens(width, height, factor=QWEN3_VL_PATCH, min_pixels=QWEN3_VL_MIN_PIXELS,
                          max_pixels=QWEN3_VL_MAX_PIXELS)


def pixtral_tokens(width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` image on Mistral's vision models: the most of its encoders' grids (rows of
    patches, each row closed by a break token), rounded up where mistral-common rounds."""
    most = 0
    for patch, edge in PIXTRAL_GRIDS:
        w, h = float(max(width, 1)), float(max(height, 1))
        ratio = max(w / edge, h / edge)
        if ratio > 1:
            w, h = math.ceil(w / ratio), math.ceil(h / ratio)
        rows, columns = math.ceil(h / patch), math.ceil(w / patch)
        most = max(most, rows * (columns + 1))
    return most


def llama4_tokens(width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` image on Llama 4: its tiles (the smallest canvas of tiles holding the
    image, at most 16), a separator each, the global view when there are several."""
    tiles = min(LLAMA4_MAX_TILES, math.ceil(max(width, 1) / LLAMA4_TILE) * math.ceil(max(height, 1) / LLAMA4_TILE))
    return LLAMA4_TILE_TOKENS + LLAMA4_FRAMING + (tiles * (LLAMA4_TILE_TOKENS + 1) if tiles > 1 else 0)


#: open vision models whose processors read an image of any size as at most this many tokens (many resize every image
#: to a grid of their own, whatever its size): Gemma 3's 256 soft tokens and markers; LLaVA 1.5 576, LLaVA-NeXT's 2x2
#: grid of 336 px with its base view and row ends 2,928; LLaVA-OneVision's crops of 729 downsampled past 9 and its
#: base view, about 8,800 at most; Idefics3's 4x4 grid of 364 px and global view, 169 each with their tags, 2,913
#: (SmolVLM's 1,417); InternVL's 12 tiles and thumbnail of 256, 3,330; MiniCPM-V's 9 slices and source of 96 (2.5)
#: or 64, with their markers; Moondream 729; Janus 576; Chameleon 1,024 and 2 markers; PaliGemma 4,096 at 896 px
FIXED_ENCODERS: dict[str, int] = {
    "gemma": _gemini.GEMMA_IMAGE_TOKENS, "llava": 2_930, "llava_onevision": 8_900, "idefics": 2_920,
    "internvl": 3_330, "minicpm": 1_100, "moondream": 731, "janus": 578, "chameleon": 1_026, "paligemma": 4_098,
}


def _fixed(tokens: int, width: int, height: int) -> int:
    return tokens


#: an open model's vision encoder by its formula's name (``providers/open_models.image_formula``): the tokens of an
#: image of a known size, and of one of unknown size (the most any image can take)
OPEN_ENCODERS: dict[str, tuple[Callable[[int, int], int], int]] = {
    "qwen_vl": (qwen_vl_tokens, QWEN_VL_MAX_PIXELS // QWEN_VL_PATCH ** 2 + QWEN_VL_FRAMING),
    "qwen3_vl": (qwen3_vl_tokens, QWEN3_VL_MAX_PIXELS // QWEN3_VL_PATCH ** 2 + QWEN_VL_FRAMING),
    "pixtral": (pixtral_tokens, max((edge // patch) * (edge // patch + 1) for patch, edge in PIXTRAL_GRIDS)),
    "llama4": (llama4_tokens, llama4_tokens(LLAMA4_TILE * LLAMA4_MAX_TILES, LLAMA4_TILE)),
    **{name: (functools.partial(_fixed, tokens), tokens) for name, tokens in FIXED_ENCODERS.items()},
}


#: the fewest tokens a video costs on an open model that reads videos (vLLM samples a video's frames whatever its bytes:
#: Qwen2/2.5-VL 32 frames, two a group of at least 768 tokens at 1080p and more (its processor's ``max_pixels``);
#: Qwen3-VL up to 16,777,216 pixels of all its frames in 32x32 patches and a timestamp a group; GLM-4.xV up to 30,000
#: and a marker and timestamp a group; LLaVA-NeXT-Video 32 frames of 144. The gateway does not read a video's frame
#: size, so this is a floor, not a bound: ``docs/counting.md``). 0: priced by its size alone (``media.file_tokens``)
VIDEO_FLOORS = {"qwen_vl": 12_290, "qwen3_vl": 24_700, "open_bound": 30_100, "llava_onevision": 30_100,
                "internvl": 30_100, "minicpm": 30_100, "llava": 4_700}


def video_floor(formula: str) -> int:
    """The fewest tokens a video costs on a model whose images ``formula`` prices (``VIDEO_FLOORS``)."""
    return VIDEO_FLOORS.get(formula, 0)


def open_model_image_tokens(formula: str, size: tuple[int, int] | None) -> int:
    """Tokens of one image on an open model's vision encoder (``OPEN_ENCODERS``); ``open_bound``: the most of them
    all, for a model whose encoder is not known (a self-hosted model of an unknown family)."""
    encoders = OPEN_ENCODERS.values() if formula == "open_bound" else (OPEN_ENCODERS[formula],)
    return max(tokens(*size) if size else worst for tokens, worst in encoders)


def _open_encoder(formula: str, size: tuple[int, int] | None, detail: str, base: int, tile: int,
                  multiplier: float) -> int:
    return open_model_image_tokens(formula, size)  # an open model's server reads every image whole: no ``detail``


def _flat(size: tuple[int, int] | None, detail: str, base: int, tile: int, multiplier: float) -> int:
    return base


def _gemini_tiles(size: tuple[int, int] | None, detail: str, base: int, tile: int, multiplier: float) -> int:
    return gemini_tile_tokens(*size, base=base, per_tile=tile) if size else gemini_tile_tokens_worst_case(per_tile=tile)


def _anthropic_formula(size: tuple[int, int] | None, detail: str, base: int, tile: int, multiplier: float) -> int:
    return anthropic_image_tokens(*size) if size else anthropic_image_tokens_worst_case()


def _openai_patches(size: tuple[int, int] | None, detail: str, base: int, tile: int, multiplier: float) -> int:
    if size is None:
        return openai_patch_tokens_worst_case(multiplier=multiplier)
    return openai_patch_tokens(*size, multiplier=multiplier)


def _openai_tiles(size: tuple[int, int] | None, detail: str, base: int, tile: int, multiplier: float) -> int:
    if detail == "low":
        return base
    if size is None:
        return openai_tile_tokens_worst_case(base=base, per_tile=tile)
    return openai_tile_tokens(*size, base=base, per_tile=tile)


def _closed_bound(size: tuple[int, int] | None, detail: str, base: int, tile: int, multiplier: float) -> int:
    """A closed vendor's model of a family not known here (a Bedrock inference profile's ARN, a Nova, a Grok): the
    larger of OpenAI's tiles and Claude's formula, ``detail`` ignored (OpenAI's own: an attack review of 2026-12-07
    priced an image at 85 tokens, ``low``, that Claude behind an ARN reads as 1,697)."""
    return max(_openai_tiles(size, "high", base, tile, multiplier), _anthropic_formula(size, detail, base, tile,
                                                                                        multiplier))


#: the image formulas a profile names (``TokenizerProfile.image_formula``), each over the image's size (None:
#: unknown, the formula's worst case), its ``detail`` and the profile's base, tile and multiplier
FORMULAS: dict[str, Callable[[tuple[int, int] | None, str, int, int, float], int]] = {
    "flat": _flat, "gemini_tiles": _gemini_tiles, "anthropic": _anthropic_formula, "openai_patches": _openai_patches,
    "openai_tiles": _openai_tiles, "closed_bound": _closed_bound,
    **{name: functools.partial(_open_encoder, name) for name in (*OPEN_ENCODERS, "open_bound")},
}


def image_price(formula: str, size: tuple[int, int] | None, *, detail: str, base: int, tile: int,
                multiplier: float) -> int:
    """Tokens of one image under ``formula`` (an unknown name: OpenAI's tiles)."""
    return FORMULAS.get(formula, _openai_tiles)(size, detail, base, tile, multiplier)
