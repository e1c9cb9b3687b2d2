"""A stand-in vLLM server for end-to-end tests: Llama 3's real tokenizer and a Llama 3.1 chat template.

    python fake_vllm.py --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 4096 --record payloads.jsonl

Binds 127.0.0.1 on a free port and prints ``READY <port>``. Like ``vllm serve`` it:

* tokenizes with Llama 3's BPE (``tokenizer.model`` from the ``llama-models`` package, read with tiktoken;
  special tokens counted as one token each) the prompt its chat template renders (``llama31_template.jinja``
  beside this file, rendered with jinja2 as transformers does: tool results through ``tojson``, the
  date header, tool schemas as indented JSON);
* answers ``GET /v1/models`` with ``max_model_len``, and ``POST /tokenize`` with ``{"count", "max_model_len",
  "tokens"}`` for a ``messages`` body (``add_generation_prompt``) or a ``prompt``;
* rejects ``/v1/chat/completions`` whose prompt is over ``max_model_len`` with vLLM's own wording
  (``This model's maximum context length is N tokens. However, your request has M input tokens. Please
  reduce the length of the input messages.``) and one whose prompt plus ``max_tokens`` is over it with
  ``'max_tokens' or 'max_completion_tokens' is too large: K. This model's maximum context length is N
  tokens and your request has M input tokens (K > N - M).``;
* reports ``usage.prompt_tokens`` as that count. Every body it receives is appended to ``--record``.

With ``--vision qwen2_vl|qwen3_vl|pixtral|llama4|gemma3|llava_ov|internvl|...`` it serves a vision model: each ``image_url`` part (a PNG data URL)
adds the visual tokens that model's image processor makes of it (``visual_tokens``: written from the processors'
own code, independently of the gateway's formulas; an image it cannot read is refused as vLLM refuses it).

With ``--tokenizer tokenizer.json --chat-template tokenizer_config.json`` it serves those files instead, as
vLLM does (the ``tokenizers`` library; the config's ``chat_template`` and ``bos_token`` rendered in jinja2's
sandbox as transformers does; encoded without added special tokens): the same files the gateway is given.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import math
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jinja2
import tiktoken

HERE = Path(__file__).resolve().parent
PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
           "<|eom_id|>", "<|python_tag|>")
STATE: dict = {"record": "", "model": "", "max_model_len": 0, "vision": ""}
LOCK = threading.Lock()


def encoding() -> tiktoken.Encoding:
    import llama_models

    path = Path(llama_models.__file__).parent / "llama3" / "tokenizer.model"
    ranks = {base64.b64decode(token): int(rank) for token, rank in
             (line.split() for line in path.read_bytes().splitlines() if line.strip())}
    special = {name: len(ranks) + index for index, name in enumerate(SPECIAL)}
    return tiktoken.Encoding(name="llama3", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=special)


ENCODING: tiktoken.Encoding | None = None
TEMPLATE = jinja2.Environment(undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
TEMPLATE.filters["tojson"] = lambda value, indent=None: json.dumps(value, indent=indent, ensure_ascii=False)
CHAT = TEMPLATE.from_string((HERE / "llama31_template.jinja").read_text(encoding="utf-8"))


def _prepared(message: dict) -> dict:
    """As vLLM hands a message to the template: text parts joined, tool-call arguments parsed."""
    message = dict(message)
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    elif content is None:
        message["content"] = ""
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            function = dict(call.get("function") or {})
            with contextlib.suppress(ValueError):
                function["arguments"] = json.loads(function.get("arguments") or "{}")
            calls.append({**call, "function": function})
        message["tool_calls"] = calls
    return message


def render(messages: list, tools: list | None, add_generation_prompt: bool = True) -> str:
    return CHAT.render(messages=[_prepared(m) for m in messages], tools=tools or None,
                       add_generation_prompt=add_generation_prompt, bos_token="<|begin_of_text|>",
                       date_string="26 Jul 2024")


OWN: dict = {}


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 12_845_056) -> tuple[int, int]:
    """transformers' ``qwen2_vl.image_processing_qwen2_vl.smart_resize`` (Qwen2-VL's defaults), as written."""
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def _mistral(width: int, height: int, patch: int, max_size: int) -> int:
    """mistral-common's ``ImageEncoder``: the image scaled into ``max_size`` (rounded), a token a patch, a break a row."""
    ratio = max(height / max_size, width / max_size)
    if ratio > 1:
        width, height = max(round(width / ratio), 1), max(round(height / ratio), 1)
    columns, rows = (width - 1) // patch + 1, (height - 1) // patch + 1
    return rows * columns + rows


def _llama4(width: int, height: int, tile: int = 336, max_tiles: int = 16) -> int:
    """transformers' Llama 4 processor: ``find_supported_resolutions`` and ``get_best_fit`` (the smallest upscale,
    else the largest downscale, the smaller canvas on a tie), 144 tokens a tile, a separator a tile and the global
    view when there are several, ``<|image_start|>``, ``<|image|>``, ``<|image_end|>``."""
    canvases = [(rows * tile, (chunks // rows) * tile) for chunks in range(max_tiles, 0, -1)
                for rows in range(1, chunks + 1) if chunks % rows == 0]
    scales = [min(w / width, h / height) for h, w in canvases]
    up = [s for s in scales if s >= 1]
    chosen = min(up) if up else max(scales)
    h, w = min((c for c, s in zip(canvases, scales, strict=True) if s == chosen), key=lambda c: c[0] * c[1])
    tiles = (h // tile) * (w // tile)
    return 3 + 144 + (tiles * 145 if tiles > 1 else 0)


def _best_resolution(height: int, width: int, pinpoints: list[tuple[int, int]]) -> tuple[int, int]:
    """transformers' ``select_best_resolution`` (LLaVA-NeXT's and OneVision's anyres): the most of the image kept,
    then the least waste."""
    best, most, least = pinpoints[0], 0, float("inf")
    for h, w in pinpoints:
        scale = min(w / width, h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        if kept > most or (kept == most and w * h - kept < least):
            best, most, least = (h, w), kept, w * h - kept
    return best


def _llava_next(width: int, height: int, one_vision: bool = False) -> int:
    """LLaVA-NeXT's (vLLM's ``get_llava_next_image_feature_size``) and LLaVA-OneVision's (transformers'
    ``_get_number_of_features``) image features: the unpadded grid (OneVision's downsampled past 9 crops), a newline a
    row, and the base view."""
    tile, side = (384, 27) if one_vision else (336, 24)
    pinpoints = [(tile * i, tile * j) for i in range(1, 7) for j in range(1, 7)] if one_vision else \
        [(336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008)]
    grid_h, grid_w = _best_resolution(height, width, pinpoints)
    rows, columns = side * (grid_h // tile), side * (grid_w // tile)
    if width / height > columns / rows:
        new_rows = int(height * (columns / width)) if one_vision else (height * columns) // width
        rows -= 2 * ((rows - new_rows) // 2)
    else:
        new_columns = int(width * (rows / height)) if one_vision else (width * rows) // height
        columns -= 2 * ((columns - new_columns) // 2)
    features, newlines = rows * columns, rows
    ratio = math.sqrt(rows * columns / (9 * side * side))
    if one_vision and ratio > 1.1:
        features, newlines = int(rows // ratio) * int(columns // ratio), int(rows // ratio)
    return features + newlines + side * side


def _idefics3(width: int, height: int, longest: int = 1456, tile: int = 364, per: int = 169) -> int:
    """Idefics3 (and SmolVLM: 1,536, 384, 81): resized to ``longest`` on its longer side, a grid of tiles and the
    global view, ``per`` tokens each, with their tags."""
    if width >= height:
        w, h = longest, int(longest / (width / height))
    else:
        w, h = int(longest * (width / height)), longest
    h, w = max(h + h % 2, 1), max(w + w % 2, 1)
    rows, columns = (math.ceil(h / tile), math.ceil(w / tile)) if h > tile or w > tile else (0, 0)
    return (rows * columns + 1) * per + rows * columns * 2 + rows + 4


def _internvl(width: int, height: int, max_tiles: int = 12, per: int = 256) -> int:
    """InternVL's dynamic tiles of 448 px (the closest aspect ratio of at most 12) and a thumbnail, 256 each."""
    ratios = sorted({(i, j) for n in range(1, max_tiles + 1) for i in range(1, n + 1) for j in range(1, n + 1)
                     if i * j <= max_tiles}, key=lambda r: r[0] * r[1])
    aspect, best, closest = width / height, (1, 1), float("inf")
    for i, j in ratios:
        distance = abs(aspect - i / j)
        if distance < closest:
            closest, best = distance, (i, j)
        elif distance == closest and width * height > 0.5 * 448 * 448 * i * j:
            best = (i, j)
    tiles = best[0] * best[1]
    return (tiles + (tiles != 1)) * per + 2


#: processors that read every image as the same number of tokens
FIXED = {"llava15": 576, "moondream": 729, "janus": 576, "chameleon": 1026, "paligemma": 4096, "minicpm": 960,
         "gemma3": 1 + 1 + 256 + 1 + 1}  # Gemma3Processor: "\n\n<start_of_image>" + 256 + "<end_of_image>\n\n"


def visual_tokens(kind: str, width: int, height: int) -> int:
    """The tokens a vision model's processor makes of a ``width`` x ``height`` image."""
    if kind in ("qwen2_vl", "qwen3_vl"):
        factor, low, high = (28, 56 * 56, 12_845_056) if kind == "qwen2_vl" else (32, 65_536, 16_777_216)
        h_bar, w_bar = smart_resize(height, width, factor, low, high)
        return (h_bar // factor) * (w_bar // factor) + 2  # <|vision_start|> ... <|vision_end|>
    if kind == "pixtral":
        return _mistral(width, height, 16, 1024)
    if kind == "mistral_small":
        return _mistral(width, height, 28, 1540)
    if kind == "llama4":
        return _llama4(width, height)
    if kind in ("llava_next", "llava_ov"):
        return _llava_next(width, height, one_vision=kind == "llava_ov")
    if kind == "idefics3":
        return _idefics3(width, height)
    if kind == "smolvlm":
        return _idefics3(width, height, 1536, 384, 81)
    if kind == "internvl":
        return _internvl(width, height)
    return FIXED[kind]


def image_sizes(messages: list) -> list[tuple[int, int]]:
    """The size of every ``image_url`` part's PNG (its IHDR); ValueError for an image it cannot read."""
    sizes = []
    for message in messages:
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url":
                url = (part.get("image_url") or {}).get("url", "")
                data = base64.b64decode(url.partition("base64,")[2] or "") if url.startswith("data:") else b""
                if data[:8] != b"\x89PNG\r\n\x1a\n":
                    raise ValueError("could not read the image")
                sizes.append(struct.unpack(">II", data[16:24]))
    return sizes


def use_files(tokenizer: str, config: str) -> None:
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from tokenizers import Tokenizer

    settings = json.loads(Path(config).read_text(encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda value, ensure_ascii=False, indent=None, separators=None, sort_keys=False: \
        json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    OWN.update(tokenizer=Tokenizer.from_file(tokenizer), template=env.from_string(settings["chat_template"]),
               bos=settings.get("bos_token", ""))


def count(messages: list, tools: list | None) -> int:
    images = sum(visual_tokens(STATE["vision"], *size) for size in image_sizes(messages)) if STATE["vision"] else 0
    return images + _text_count(messages, tools)


def _text_count(messages: list, tools: list | None) -> int:
    if OWN:
        text = OWN["template"].render(messages=[_prepared(m) for m in messages], tools=tools or None,
                                      add_generation_prompt=True, bos_token=OWN["bos"])
        return len(OWN["tokenizer"].encode(text, add_special_tokens=False).ids)
    assert ENCODING is not None
    return len(ENCODING.encode(render(messages, tools), allowed_special="all"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        return

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, message: str) -> None:
        self._send(400, {"object": "error", "message": message, "type": "BadRequestError", "param": None,
                         "code": 400})

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            return self._send(200, {"object": "list", "data": [{"id": STATE["model"], "object": "model",
                                                                 "owned_by": "vllm",
                                                                 "max_model_len": STATE["max_model_len"]}]})
        return self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        path = self.path.split("?")[0].rstrip("/")
        if STATE["record"]:
            with LOCK, open(STATE["record"], "a", encoding="utf-8") as record:
                record.write(json.dumps({"path": path, "body": body, "time": time.time()}) + "\n")
        window = STATE["max_model_len"]
        if path.endswith("/tokenize"):
            if "messages" in body:
                try:  # ``--tokenize-placeholders``: vLLM before 0.17, whose /tokenize ran no image processor
                    tokens = _text_count(body["messages"], body.get("tools")) + len(image_sizes(body["messages"])) \
                        if STATE.get("placeholders") else count(body["messages"], body.get("tools"))
                except ValueError as error:
                    return self._error(str(error))
            elif OWN:
                tokens = len(OWN["tokenizer"].encode(str(body.get("prompt", "")), add_special_tokens=False).ids)
            else:
                assert ENCODING is not None
                tokens = len(ENCODING.encode(str(body.get("prompt", "")), disallowed_special=()))
            return self._send(200, {"count": tokens, "max_model_len": window, "tokens": []})
        if not path.endswith("/chat/completions"):
            return self._send(404, {"detail": "Not Found"})
        try:
            prompt = count(body.get("messages") or [], body.get("tools"))
        except ValueError as error:
            return self._error(str(error))
        reserve = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if prompt > window:
            return self._error(f"This model's maximum context length is {window} tokens. However, your request has "
                               f"{prompt} input tokens. Please reduce the length of the input messages.")
        if prompt + reserve > window:
            return self._error(f"'max_tokens' or 'max_completion_tokens' is too large: {reserve}. This model's "
                               f"maximum context length is {window} tokens and your request has {prompt} input "
                               f"tokens ({reserve} > {window} - {prompt}).")
        usage = {"prompt_tokens": prompt, "completion_tokens": 4, "total_tokens": prompt + 4}
        self._send(200, {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                         "created": int(time.time()), "model": STATE["model"], "usage": usage,
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                      "finish_reason": "stop"}]})


def main() -> None:
    global ENCODING
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--record", default="")
    parser.add_argument("--tokenizer", default="")
    parser.add_argument("--chat-template", default="")
    parser.add_argument("--vision", default="")
    parser.add_argument("--tokenize-placeholders", action="store_true",
                        help="/tokenize counts one token per image, as vLLM did before 0.17")
    args = parser.parse_args()
    if args.tokenizer:
        use_files(args.tokenizer, args.chat_template)
    STATE.update(record=args.record, model=args.model, max_model_len=args.max_model_len, vision=args.vision,
                 placeholders=args.tokenize_placeholders)
    ENCODING = encoding()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
