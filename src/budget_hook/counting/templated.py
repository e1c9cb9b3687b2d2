"""A deployment's own tokenizer and chat template, named by the operator: exact counts offline.

Contract:

* ``TokenizerSpec(model, tokenizer, chat_template)`` is one ``tokenizers:`` entry of the settings: the
  deployment model it counts (``litellm_params.model``, e.g. ``hosted_vllm/meta-llama/Llama-3.1-8B-Instruct``,
  or its bare name), a ``tokenizer.json`` (a file, a folder holding one, or a Hugging Face repo name found
  in the local cache: ``HF_HUB_CACHE``, ``HF_HOME/hub`` or ``~/.cache/huggingface/hub``; never the network)
  and the chat template (``tokenizer_config.json``'s ``chat_template``, or a ``.jinja`` file; default: the
  ``chat_template.jinja`` or ``tokenizer_config.json`` beside the tokenizer).
* ``load(spec)`` loads and checks both (the template compiles, is at most ``MAX_TEMPLATE_CHARS`` and renders
  a one-message conversation) or raises ``PolicyError`` naming the setting: the proxy refuses to start.
* ``configure(specs)`` installs them for ``TokenCounter.for_model``; ``lookup(model)`` finds one.
* ``TemplateCounter`` counts a chat request as the server does (vLLM, SGLang, TGI all apply the template
  with transformers' rules, then tokenize): messages prepared as vLLM prepares them (text parts joined with
  a newline, tool-call arguments parsed), rendered with ``add_generation_prompt=True`` and ``tools``, then
  encoded without added special tokens. The total is exact for text (method ``tokenizer.json+template``);
  images and files are priced as the family's estimate prices them. Each output piece of the template
  belongs to the message the template read last, so ``per_message`` splits the exact total (one render,
  one encode, linear in the request).
* The prompt counted is the server's (``template_input``): ``developer`` messages mapped to ``system`` as
  LiteLLM maps them after the gateway's check, the template fields vLLM forwards (``chat_template_kwargs``,
  ``documents``...) rendered, and a message the template leaves out while it carries text counted at the
  family's estimate on top. A client's own ``chat_template`` is never rendered (``shapes.references``).
* ``cost_weight()``: while a template is configured, the offloader sends requests to the counting threads
  ``COST_WEIGHT`` times sooner (a render costs that much more than tiktoken per unit of request).

Rendering runs a template on client data: the environment is jinja2's immutable sandbox (no ``_``
attributes, no Python internals, no mutation of the request), with transformers' ``raise_exception``,
``tojson`` and ``strftime_now``. A render stops past ``RENDER_SECONDS`` or ``MAX_OUTPUT_CHARS`` beyond the
request's own size; a template that refuses the conversation or is stopped leaves the family's estimate
to count it (method ``... (template failed)``).
"""

from __future__ import annotations

import bisect
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import MalformedRequestError, PolicyError
from .canonical import canonical_json
from .counter import RequestCount, TokenCounter, _counter_for, _profile_id, validate_message, validate_messages
from .profiles import TokenizerProfile, model_key, resolve_tokenizer
from .template_input import dropped, prepared, served, template_extras

#: the largest chat template accepted (real ones are 1-20 KB)
MAX_TEMPLATE_CHARS = 200_000
#: a render is stopped past this many seconds, or this many characters beyond twice the request's text
RENDER_SECONDS = 2.0
MAX_OUTPUT_CHARS = 1_000_000
METHOD = "tokenizer.json+template"
#: a rendered and encoded request costs up to ~10x what the offloader's size assumes (~0.02 us per unit of
#: ``proxy.offload.approximate_size``; Qwen3's template 0.11-0.2 us, Llama 3.1's 0.06-0.17, on 1 to 150 short
#: messages): while a template is configured, requests are decided in the pool past ``offload_chars / COST_WEIGHT``
#: (3,125 by default: about 10 short messages, ~0.5 ms)
COST_WEIGHT = 16
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")


@dataclass(frozen=True)
class TokenizerSpec:
    model: str
    tokenizer: str
    chat_template: str | None = None


class RenderStopped(Exception):
    """A render over its time or size bound."""


class _Tracker:
    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current = -1


class _Tracked(dict):
    """A message (or a tool, index -2) that tells the tracker when the template reads it."""

    __slots__ = ("_index", "_tracker")

    def __init__(self, value: Mapping[str, Any], index: int, tracker: _Tracker) -> None:
        super().__init__(value)
        self._index = index
        self._tracker = tracker

    def _seen(self) -> None:
        self._tracker.current = self._index

    def __getitem__(self, key: Any) -> Any:
        self._seen()
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen()
        return super().get(key, default)

    def __contains__(self, key: Any) -> bool:
        self._seen()
        return super().__contains__(key)


def _environment() -> Any:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):  # transformers' ``{% generation %}`` marker: renders its body
        tags = {"generation"}  # noqa: RUF012 - jinja2 declares it a set

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        if isinstance(value, _Tracked):
            value._seen()
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format: str) -> str:
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _hub_folders() -> list[Path]:
    folders = [os.environ.get("HF_HUB_CACHE"), os.environ.get("HUGGINGFACE_HUB_CACHE")]
    home = os.environ.get("HF_HOME")
    folders.append(str(Path(home) / "hub") if home else None)
    folders.append(str(Path.home() / ".cache" / "huggingface" / "hub"))
    return [Path(f) for f in folders if f]


def _from_hub(name: str) -> Path | None:
    """``org/model``'s snapshot folder in the local Hugging Face cache (``refs/main`` first), else None."""
    if name.count("/") != 1 or name.startswith(("/", ".")):
        return None
    for hub in _hub_folders():
        repo = hub / f"models--{name.replace('/', '--')}"
        ref = repo / "refs" / "main"
        snapshots = [repo / "snapshots" / ref.read_text().strip()] if ref.is_file() else []
        snapshots += sorted((repo / "snapshots").glob("*")) if (repo / "snapshots").is_dir() else []
        for snapshot in snapshots:
            if (snapshot / "tokenizer.json").is_file():
                return snapshot
    return None


def _tokenizer_file(value: str, where: str) -> Path:
    path = Path(value).expanduser()
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.is_file():
        return path
    snapshot = _from_hub(value)
    if snapshot is not None:
        return snapshot / "tokenizer.json"
    raise PolicyError(f"{where}: {value!r} is no tokenizer.json file, no folder holding one, and no model in the "
                      f"local Hugging Face cache ({', '.join(str(h) for h in _hub_folders())})")


def _special(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _template_text(spec: TokenizerSpec, tokenizer_path: Path, where: str) -> tuple[str, dict[str, str]]:
    """The template's text and the special tokens its ``tokenizer_config.json`` names."""
    beside = tokenizer_path.parent / "tokenizer_config.json"
    candidates = [Path(spec.chat_template).expanduser()] if spec.chat_template else [
        tokenizer_path.parent / "chat_template.jinja", beside]
    source = next((c for c in candidates if c.is_file()), None)
    if source is None:
        named = spec.chat_template or f"{candidates[0]} or {candidates[1]}"
        raise PolicyError(f"{where}.chat_template: no such file: {named}")
    config: Any = {}
    config_file = source if source.suffix == ".json" else beside
    if config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PolicyError(f"{where}.chat_template: {config_file} is not JSON ({exc})") from None
    specials = {k: v for k in _SPECIAL_KEYS if (v := _special(config.get(k) if isinstance(config, Mapping)
                                                               else None)) is not None}
    if source.suffix != ".json":
        return source.read_text(encoding="utf-8"), specials
    template = config.get("chat_template") if isinstance(config, Mapping) else None
    if isinstance(template, list):  # named templates: the default one
        template = next((t.get("template") for t in template if isinstance(t, Mapping)
                         and t.get("name") == "default"), None)
    if not isinstance(template, str) or not template:
        raise PolicyError(f"{where}.chat_template: {source} has no chat_template")
    return template, specials


class ConfiguredTokenizer:
    """A loaded tokenizer and compiled template (immutable after load; shared by threads)."""

    def __init__(self, spec: TokenizerSpec, *, where: str) -> None:
        from tokenizers import Tokenizer

        self.spec = spec
        self.path = _tokenizer_file(spec.tokenizer, f"{where}.tokenizer")
        try:
            self.tokenizer = Tokenizer.from_file(str(self.path))
        except Exception as exc:
            raise PolicyError(f"{where}.tokenizer: {self.path} is not a tokenizer.json ({type(exc).__name__}: "
                              f"{str(exc)[:200]})") from None
        text, self.specials = _template_text(spec, self.path, where)
        if len(text) > MAX_TEMPLATE_CHARS:
            raise PolicyError(f"{where}.chat_template: {len(text)} characters, more than {MAX_TEMPLATE_CHARS}")
        try:
            self.template = _environment().from_string(text)
        except Exception as exc:
            raise PolicyError(f"{where}.chat_template: does not compile ({type(exc).__name__}: "
                              f"{str(exc)[:200]})") from None
        try:
            self.render([{"role": "user", "content": "hello"}], None, add_generation_prompt=True)
        except Exception as exc:
            raise PolicyError(f"{where}.chat_template: fails on a one-message conversation ({type(exc).__name__}: "
                              f"{str(exc)[:200]})") from None

    def _encoded(self, text: str) -> Any:
        # encode_batch releases the GIL while it works (the event loop and other threads go on)
        return self.tokenizer.encode_batch([text], add_special_tokens=False)[0]

    def encode(self, text: str) -> list[int]:
        return list(self._encoded(text).ids)

    def render(self, messages: Sequence[Mapping[str, Any]], tools: list[Any] | None, *,
               add_generation_prompt: bool = True, extras: Mapping[str, Any] | None = None,
               ) -> tuple[str, list[tuple[int, int]]]:
        """The prompt, and where each message's part of it starts: ``(offset, owner)`` with owner the
        message index, -1 for the template's own text before any message is read, -2 for tools."""
        tracker = _Tracker()
        tracked = [_Tracked(m, i, tracker) for i, m in enumerate(messages)]
        tracked_tools = [_Tracked(t, -2, tracker) if isinstance(t, Mapping) else t for t in tools] if tools else None
        limit = MAX_OUTPUT_CHARS + 2 * sum(len(canonical_json(m)) for m in messages) + \
            (len(canonical_json(tools)) * 4 if tools else 0) + (2 * len(canonical_json(extras)) if extras else 0)
        deadline = time.monotonic() + RENDER_SECONDS
        pieces: list[str] = []
        marks: list[tuple[int, int]] = []
        size = 0
        variables = {**(extras or {}), **self.specials}
        for chunk in self.template.generate(**variables, messages=tracked, tools=tracked_tools,
                                            add_generation_prompt=add_generation_prompt):
            owner = tracker.current
            if not marks or marks[-1][1] != owner:
                marks.append((size, owner))
            pieces.append(chunk)
            size += len(chunk)
            if size > limit or time.monotonic() > deadline:
                raise RenderStopped(f"render stopped at {size} characters")
        return "".join(pieces), marks

    def shares(self, text: str, marks: list[tuple[int, int]], owners: int,
               owned: list[list[str]] | None = None) -> tuple[int, list[int], int, int]:
        """(total tokens, tokens per message, tools' tokens, the rest) of a rendered prompt; ``owned`` (one
        list per message) receives each message's pieces of the prompt."""
        starts = [start for start, _ in self._encoded(text).offsets]
        per = [0] * owners
        tools = rest = 0
        for position, (offset, owner) in enumerate(marks):
            end = marks[position + 1][0] if position + 1 < len(marks) else len(text) + 1
            tokens = bisect.bisect_left(starts, end) - bisect.bisect_left(starts, offset)
            if owner >= 0:
                per[owner] += tokens
                if owned is not None:
                    owned[owner].append(text[offset:end])
            elif owner == -2:
                tools += tokens
            else:
                rest += tokens
        return len(starts), per, tools, rest


class _Ordinary:
    def __init__(self, configured: ConfiguredTokenizer) -> None:
        self._configured = configured

    def encode_ordinary(self, text: str) -> list[int]:
        return self._configured.encode(text)


class TemplateCounter(TokenCounter):
    """Counts with a configured tokenizer and chat template (exact for text); the family's estimate counts
    media, and whatever the template refuses."""

    def __init__(self, configured: ConfiguredTokenizer, *, model: str = "") -> None:
        self.fallback = TokenCounter(resolve_tokenizer(model), model=model)
        profile = TokenizerProfile(self.fallback.profile.family, "tokenizer.json", exact=True,
                                   tools_rendering="json", label=METHOD,
                                   source=f"{configured.path}|{configured.spec.chat_template}")
        self.configured = configured
        self.profile = profile
        self.model = model
        self.encoding = _Ordinary(configured)
        self._profile_id = _profile_id(profile)
        self._solo_extra, self._reply_opener = self._measure()

    def _measure(self) -> tuple[int, int]:
        """What a message counted alone carries beyond its share in a conversation (the template's header,
        read with the first message), and the reply opener (written after the last message is read, so
        given to it): measured once on a user message after a system message."""
        message = {"role": "user", "content": "x"}
        try:
            alone = self._shares([message], None, opener=False)[1][0]
            paired = self._shares([{"role": "system", "content": "y"}, message], None, opener=False)[1][1]
            opener = self._shares([message], None)[0] - self._shares([message], None, opener=False)[0]
        except Exception:
            return 0, 0
        return max(0, alone - paired), max(0, opener)

    def _shares(self, messages: Sequence[Mapping[str, Any]], tools: list[Any] | None, *, opener: bool = True,
                extras: Mapping[str, Any] | None = None) -> tuple[int, list[int], int, int]:
        """The rendered prompt's tokens, split as ``ConfiguredTokenizer.shares``; a message the template
        dropped while it carries text counts the family's estimate of that text on top (in its share and
        the total): a configured template never counts a message as less than what it leaves out."""
        ready = [prepared(served(m)) for m in messages]
        text, marks = self.configured.render(ready, tools, add_generation_prompt=opener, extras=extras)
        owned: list[list[str]] = [[] for _ in messages]
        total, per, tools_tokens, rest = self.configured.shares(text, marks, len(messages), owned)
        for index, left_out in enumerate(dropped(ready, owned, text)):
            if left_out:
                added = self.fallback.count_text(left_out)
                per[index] += added
                total += added
        return total, per, tools_tokens, rest

    def _media(self, message: Mapping[str, Any], index: int) -> int:
        content = message.get("content")
        if not isinstance(content, list):
            return 0
        return sum(self.fallback._count_part(part, f"messages[{index}].content[{n}]")[1]
                   for n, part in enumerate(content) if not (isinstance(part, Mapping) and part.get("type") == "text"))

    def count_request(self, request: Mapping[str, Any]) -> RequestCount:
        if not isinstance(request, Mapping):
            raise MalformedRequestError("request", f"expected a JSON object, got {type(request).__name__}")
        messages = validate_messages(request.get("messages"))
        for index, message in enumerate(messages):
            validate_message(message, index)
        tools = request.get("tools")
        tools = [t for t in tools if isinstance(t, Mapping)] if isinstance(tools, list) and tools else None
        extras, opener = template_extras(request)
        try:
            total, per, tools_tokens, _ = self._shares(messages, tools, opener=opener, extras=extras)
        except MalformedRequestError:
            raise
        except Exception as exc:  # the template refused the conversation, or was stopped
            counted = self.fallback.count_request(request)
            return replace(counted, method=f"{counted.method} (template failed: {type(exc).__name__})")
        if opener and per and per[-1] > self._reply_opener:
            per[-1] -= self._reply_opener  # the reply opener is the request's, not its last message's
        media = [self._media(m, i) for i, m in enumerate(messages)]
        return RequestCount(model=self.model, encoding=self.profile.encoding_name, method=METHOD,
                            per_message=tuple(max(0, p) + m for p, m in zip(per, media, strict=True)),
                            tools_tokens=tools_tokens, overhead_tokens=total - sum(per) - tools_tokens)

    def _count_message(self, message: Mapping[str, Any], *, index: int, pad_system: bool) -> int:
        try:
            share = self._shares([message], None, opener=False)[1][0]
            if served(message).get("role") != "system":
                share -= self._solo_extra  # a system message carries the header in a conversation too
        except MalformedRequestError:
            raise
        except Exception:
            return self.fallback._count_message(message, index=index, pad_system=pad_system)
        return max(1, share) + self._media(message, index)


_lock = threading.Lock()
_LOADED: dict[tuple[str, str, str | None, float], ConfiguredTokenizer] = {}
_CONFIGURED: dict[str, ConfiguredTokenizer] = {}


def load(spec: TokenizerSpec, *, where: str = "tokenizers") -> ConfiguredTokenizer:
    """Load (once per file version) and check a configured tokenizer; ``PolicyError`` names the problem."""
    path = _tokenizer_file(spec.tokenizer, f"{where}.tokenizer")
    template = Path(spec.chat_template).expanduser() if spec.chat_template else None
    stamp = path.stat().st_mtime + (template.stat().st_mtime if template is not None and template.is_file() else 0)
    key = (spec.model, str(path), spec.chat_template, stamp)
    with _lock:
        found = _LOADED.get(key)
    if found is None:
        found = ConfiguredTokenizer(spec, where=where)
        with _lock:
            _LOADED[key] = found
    return found


def configure(specs: Sequence[TokenizerSpec]) -> None:
    """Install the configured tokenizers (replacing earlier ones) for ``TokenCounter.for_model``."""
    loaded = {spec.model: load(spec, where=f"tokenizers.{spec.model}") for spec in specs}
    with _lock:
        _CONFIGURED.clear()
        _CONFIGURED.update(loaded)
        _CONFIGURED.update({model_key(name): t for name, t in loaded.items() if model_key(name) not in loaded})
        _COUNTERS.clear()
    _counter_for.cache_clear()


def cost_weight() -> int:
    """How many times the decision's cost the offloader's size stands for (``proxy.offload``): 1, or
    ``COST_WEIGHT`` while a template is configured (the offloader cannot tell which group a request's
    deployments count with, so every request is weighed so)."""
    return COST_WEIGHT if _CONFIGURED else 1


def lookup(model: str | None) -> ConfiguredTokenizer | None:
    if not model or not _CONFIGURED:
        return None
    return _CONFIGURED.get(model) or _CONFIGURED.get(model_key(model))


def counter_for(model: str, base_model: str | None) -> TokenCounter | None:
    """The configured counter for a deployment model (its ``base_model`` first), else None."""
    for name in (base_model, model):
        if lookup(name) is not None:
            return _template_counter(str(name), model)
    return None


_COUNTERS: dict[tuple[str, str], TemplateCounter] = {}


def _template_counter(name: str, model: str) -> TemplateCounter:
    counter = _COUNTERS.get((name, model))
    if counter is None:
        configured = lookup(name)
        assert configured is not None
        counter = _COUNTERS.setdefault((name, model), TemplateCounter(configured, model=model))
    return counter
