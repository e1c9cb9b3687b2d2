"""Count the tokens of an OpenAI chat request the way the provider bills them.

Contract:

* ``TokenCounter.for_model(model, base_model=None)`` picks the profile (``profiles.resolve_tokenizer``) and
  loads its encoding offline. ``count_request(body)`` returns a frozen ``RequestCount`` whose ``total`` is
  ``overhead_tokens + tools_tokens + sum(per_message)``. Each message is tokenized exactly once; the
  trimmer reuses ``per_message`` and re-counts only messages it rewrites, so a trimmed request's total
  equals a fresh count of it.
* OpenAI models are counted exactly: the cookbook chat format (3 tokens per message, +1 per ``name``, 3 to prime the
  reply; the 0301 snapshot's 4/-1), tools and legacy ``functions`` rendered the way OpenAI renders them into the
  prompt (a TypeScript-like ``namespace functions``), ``tool_choice`` / ``function_call``, assistant ``tool_calls``,
  JSON-schema response formats, and images by OpenAI's tile or patch formula.
* Other families are estimated: text tokens times the profile's safety factor, plus the family's
  framing constants (see ``profiles.TokenizerProfile``).
* Text is tokenized with ``encode_ordinary``: user text such as ``<|endoftext|>`` is just text. Structural
  problems raise ``MalformedRequestError`` naming the field; odd but harmless content (an unknown part
  type, a text part without text) is counted conservatively as its JSON, never ignored.
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import MalformedRequestError
from . import images, parts, rendered
from . import tools as tooldefs
from .cache import COUNT_CACHE
from .canonical import canonical_json, plain_calls_key
from .encodings import PIECE_CHARS, get_encoding
from .family_tokenizers import family_encoder
from .media import audio_tokens, file_text, file_tokens, is_video_file
from .parts import HIDDEN_PROMPT, ONE_OF, RESPONSES_VIEW, RETYPED, THOUGHT_SIGNATURE, ViewPart, image_detail, sent_as
from .profiles import TokenizerProfile, resolve_tokenizer, responses_extra
from .rendered import calls_text, function_prompt, prompt_fields_text, repeated_answers, split_values, thinking_enabled
from .runs import DIGIT_GROUPED, digit_extra, number_tokens, run_aware_extra
from .signatures import SEPARATOR, signature_tokens
from .tools import inlined_tokens, render_functions, response_schemas, tool_functions, tool_json, unrendered_text
from .validation import CHAT_ROLES as CHAT_ROLES
from .validation import empty_texts, validate_message, validate_messages

#: encodings that are a model family's own tokenizer (``family_tokenizers``), not tiktoken's
FAMILY_ENCODINGS = frozenset({"mistral", "llama3", "qwen", "qwen3.5", "deepseek"})
#: a file's name and framing around its text
FILE_FRAMING_TOKENS = 20
MEDIA_PARTS = frozenset({"image_url", "input_image", "input_audio", "video_url", "audio_url", "file", "input_file"})
#: texts this short (roles, names, call ids, short arguments) are counted once per profile, up to ``SHORT_TEXTS`` in all
SHORT_TEXT_CHARS, SHORT_TEXTS = 32, 65_536
_SHORT: dict[tuple[int, str], int] = {}


_PROFILE_IDS: dict[TokenizerProfile, int] = {}
#: what a tool call id providers make costs at most (``call_`` or ``toolu_`` and 24 random characters: 18 tokens),
#: in the fitted framing; past it an id's tokens are counted, as a provider or a host's template may receive it (for
#: every family but Gemini, whose view's ids are its own; LiteLLM takes a replayed thought signature off an id)
ID_TOKENS = 24


def _profile_id(profile: TokenizerProfile) -> int:
    """A small stable id per distinct profile (cache keys stay short and cheap to compare)."""
    return _PROFILE_IDS.setdefault(profile, len(_PROFILE_IDS))


@dataclass(frozen=True)
class RequestCount:
    """Token count of one request, split so that the trimmer can reuse it."""

    model: str
    encoding: str
    method: str
    per_message: tuple[int, ...]
    tools_tokens: int
    overhead_tokens: int

    @property
    def total(self) -> int:
        return self.overhead_tokens + self.tools_tokens + sum(self.per_message)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "encoding": self.encoding, "method": self.method, "tokens": self.total,
                "tools_tokens": self.tools_tokens, "overhead_tokens": self.overhead_tokens,
                "per_message": list(self.per_message)}


class TokenCounter:
    """Counts chat requests for one model profile. Thread-safe (encodings are immutable)."""

    def __init__(self, profile: TokenizerProfile, *, model: str = "") -> None:
        self.profile = profile
        self.model = model
        self.encoding: Any = (family_encoder(profile.encoding_name) if profile.encoding_name in FAMILY_ENCODINGS
                              else get_encoding(profile.encoding_name))
        self._profile_id = _profile_id(profile)

    @classmethod
    def for_model(cls, model: str, *, base_model: str | None = None) -> TokenCounter:
        """The counter for a model (shared: counters are immutable, one per model name is kept)."""
        return _counter_for(model, base_model) if cls is TokenCounter else cls(
            resolve_tokenizer(model, base_model=base_model), model=model)

    @property
    def method(self) -> str:
        """How this counter counts, for reports (``exact``, ``o200k_base x1.20 (claude-4.5)``)."""
        return self.profile.method

    # --- building blocks ---------------------------------------------------------------------------

    def count_text(self, text: str) -> int:
        """Raw tokens of ``text`` in this profile's encoding (no factor)."""
        if not text:
            return 0
        if len(text) <= SHORT_TEXT_CHARS:  # a dict lookup instead of a trip through tiktoken
            key = (self._profile_id, text)
            tokens = _SHORT.get(key)
            if tokens is None:
                tokens = self._count_text(text)
                if len(_SHORT) < SHORT_TEXTS:
                    _SHORT[key] = tokens
            return tokens
        return self._count_text(text)

    def _count_text(self, text: str) -> int:
        tokens = len(self.encoding.encode_ordinary(text))
        if self.profile.digits_as_tokens:
            # o200k packs up to 3 digits in a token; a digit-by-digit tokenizer spends one per digit.
            tokens += digit_extra(text)
        if self.profile.run_aware or self.profile.script_aware:
            tokens += run_aware_extra(text, runs=self.profile.run_aware)
        return tokens

    def _scaled(self, raw: int) -> int:
        return raw if self.profile.exact else math.ceil(raw * self.profile.safety_factor)

    # --- requests ----------------------------------------------------------------------------------

    def count_request(self, request: Mapping[str, Any]) -> RequestCount:
        """Count a whole chat request body (``messages``, ``tools``/``functions``, ``tool_choice``...)."""
        if not isinstance(request, Mapping):
            raise MalformedRequestError("request", f"expected a JSON object, got {type(request).__name__}")
        messages = validate_messages(request.get("messages"))
        functions = tool_functions(request)
        per_message = self.count_messages(messages, has_tools=bool(functions))
        tools = request.get("tools")
        responses = request.get(RESPONSES_VIEW) is True or (isinstance(tools, list) and any(
            isinstance(t, Mapping) and type(t.get("type")) is ViewPart for t in tools))
        whole = tooldefs.sent_tools(request) if self.profile.tools_whole and functions else None
        tools_tokens = self._count_functions(functions, responses=responses, whole=whole)
        overhead = self.profile.reply_priming + self._response_format_tokens(request) + \
            tooldefs.choice_tokens(request, self.profile.forced_tool_choice_overhead, self.count_text) + \
            (responses_extra(self.profile, messages) if responses else 0)  # gpt-5.x bills Responses' items more
        if thinking_enabled(request):
            overhead += self.profile.thinking_overhead
        if functions and any(_role(m) == "system" for m in messages):
            # OpenAI reuses the first system message for the tool preamble (measured: 4 tokens fewer); taken
            # from the tools' share, which is never that small, so no part of the count reads negative
            tools_tokens -= 4
        rendered = prompt_fields_text(request)  # forwarded into the prompt: a top-level system, Cohere's documents...
        prompt, times = function_prompt(request, messages) if self.profile.tools_as_text else ("", 0)
        repeated = repeated_answers(messages) if self.profile.results_carry_call else []  # Cohere v1: calls again
        overhead += self._scaled(sum(self.count_text(text) * n for text, n in Counter(repeated).items()))  # each once
        prompt_tokens = COUNT_CACHE.computed(hash((self._profile_id, "text", prompt)),  # the tools, repeated
                                             lambda: self.count_text(prompt)) if times else 0
        overhead += self._scaled(sum(map(self.count_text, rendered)) + times * prompt_tokens) + \
            (self.profile.tokens_per_message if request.get("system") else 0)  # a system message's framing
        return RequestCount(
            model=self.model,
            encoding=self.profile.encoding_name,
            method=self.method,
            per_message=per_message,
            tools_tokens=tools_tokens,
            overhead_tokens=overhead,
        )

    def count_messages(self, messages: Sequence[Mapping[str, Any]], *, has_tools: bool) -> tuple[int, ...]:
        counts = []
        padded = False
        for index, message in enumerate(messages):
            pad = has_tools and not padded and _role(message) == "system"
            padded = padded or pad
            counts.append(self.count_message(message, index=index, pad_system=pad))
        return tuple(counts)

    def count_message(self, message: Mapping[str, Any], *, index: int = 0, pad_system: bool = False) -> int:
        """Tokens of one message in the chat format, including its per-message overhead.

        Text (role, content, names, call arguments) is scaled by the profile's safety factor; framing
        constants and media (priced by the provider's own formula) are not. Text-only messages of some
        size are cached by content hash (``counting.cache``): a resent history is not tokenized again.
        """
        key = self._cache_key(message, pad_system)
        if key is not None:
            cached = COUNT_CACHE.get(key)
            if cached is not None:
                return int(cached)
        tokens = self._count_message(message, index=index, pad_system=pad_system)
        if key is not None:
            COUNT_CACHE.put(key, tokens)
        return tokens

    def _cache_key(self, message: Any, pad_system: bool) -> int | None:
        """What determines the count, as one int; None when the message is not cached.

        Only text is keyed (string content, text parts, tool calls): an image's price depends on its
        header alone and is cheap to recompute, while hashing its base64 would not be. Each text is keyed
        by its length and Python's string hash, part by part (joining parts would let ``["a", "b"]`` and
        ``["a<sep>b"]`` collide). The hash is SipHash, randomised per process unless the operator fixes
        ``PYTHONHASHSEED``; with the length, an accidental collision is negligible.
        """
        if not isinstance(message, Mapping):
            return None
        content = message.get("content")
        if len(message) == 2 and isinstance(content, str) and isinstance(message.get("role"), str):
            # The common case, kept short: {"role": ..., "content": "..."}.
            return hash((self._profile_id, pad_system, message["role"], len(content), hash(content)))
        if content is None:
            texts: tuple = ("none",)
        elif isinstance(content, str):
            texts = ("s", len(content), hash(content))
        elif isinstance(content, list) and all(
            isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str) and len(p) == 2
            for p in content
        ):
            texts = ("t", *((len(p["text"]), hash(p["text"])) for p in content))
        else:
            return None
        others: list = []
        for name, value in message.items():
            if name == "content":
                continue
            if isinstance(value, str):
                others.append((name, len(value), hash(value)))
            elif name == "tool_calls" and (calls := plain_calls_key(value)) is not None:
                others.append((name, calls))  # the common shape without its JSON (about 5 us a message)
            else:
                others.append((name, None if value is None else hash(canonical_json(value))))
        others.sort()  # one int per entry (about 180 bytes with the LRU's bookkeeping, against ~340 for the tuple)
        return hash((self._profile_id, pad_system, tuple(others), texts))

    def count_key(self, message: Any) -> int | None:
        """What determines this counter's ``count_message(message)``, as one int (the count cache's key, the
        profile in it); None when the message is not keyed (media, odd parts) or the counter is a subclass
        that counts some other way. Equal keys: equal counts (memos of work derived from a count use it)."""
        return self._cache_key(message, False) if type(self) is TokenCounter else None

    @property
    def prices_numbers_by_length(self) -> bool:
        """Does a number standing alone (between characters that are neither letters nor digits) cost tokens
        by its count of digits only, whatever its digits, in this counter's short texts? (o200k and cl100k cut
        digits in groups of three, each group of 1-3 digits one token; the scale factor, the digit rule and
        the run rule see digit counts only. Not a chat template, nor another vocabulary.)"""
        return type(self) is TokenCounter and self.profile.encoding_name in DIGIT_GROUPED

    def renumbered(self, message: Mapping[str, Any], *, index: int = 0,
                   digits: int) -> Callable[[Mapping[str, Any], int], int] | None:
        """For ``message``, whose text holds one number of ``digits`` digits standing alone (between characters
        that are neither letters nor digits: a marker's "(~N tokens)"), a function giving the count of the same
        message with only that number changed (the new message, its number's digits), exact, from this one
        tokenization (cached like a count), each answer cached as ``count_message``'s; None when this counter
        cannot promise it (a vocabulary not in ``runs.DIGIT_GROUPED``, a chat template, text long enough that
        ``safe_encode`` might cut it)."""
        content = message.get("content")
        chars = len(content) if isinstance(content, str) else sum(
            len(p["text"]) for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)) \
            if isinstance(content, list) else 0
        if not self.prices_numbers_by_length or chars >= PIECE_CHARS // 8:
            return None
        key = self._cache_key(message, False)
        terms = COUNT_CACHE.get(hash((key, "terms"))) if key is not None else None
        if terms is None:
            terms = self._message_terms(message, index=index, pad_system=False)
            if key is not None:
                COUNT_CACHE.put(hash((key, "terms")), terms)
        fixed, text = terms[0], terms[1] - number_tokens(digits, self.profile.digits_as_tokens)

        def count(new_message: Mapping[str, Any], new_digits: int) -> int:
            tokens = max(1, fixed + self._scaled(text + number_tokens(new_digits, self.profile.digits_as_tokens)))
            new_key = self._cache_key(new_message, False)
            if new_key is not None:
                COUNT_CACHE.put(new_key, tokens)
            return tokens
        return count

    def _count_message(self, message: Mapping[str, Any], *, index: int, pad_system: bool) -> int:
        fixed, text = self._message_terms(message, index=index, pad_system=pad_system)
        return max(1, fixed + self._scaled(text))

    def _message_terms(self, message: Mapping[str, Any], *, index: int, pad_system: bool) -> tuple[int, int]:
        """(framing and media tokens, raw text tokens) of one message: its count is
        ``max(1, framing_and_media + _scaled(text))``."""
        where = f"messages[{index}]"
        validate_message(message, index)
        profile = self.profile
        role = message["role"]
        framing = profile.tokens_per_message
        text = self.count_text(role)
        media = 0
        content = message.get("content")
        if profile.tool_results_as_json and role in ("tool", "function") and isinstance(content, (str, list)):
            content = json.dumps(content)  # the template writes a tool result through ``tojson`` (a list whole)
        if isinstance(content, str):
            # With tools present OpenAI appends a newline to the first system message (measured).
            text += self.count_text(content + "\n" if pad_system else content)
        elif isinstance(content, list):
            for part_index, part in enumerate(content):
                part_text, part_media = self._count_part(part, f"{where}.content[{part_index}]")
                text += part_text
                media += part_media
            framing += 1 if pad_system else 0
            framing += profile.tokens_per_part * max(0, len(content) - 1)
        name = message.get("name")
        if isinstance(name, str) and name:
            text += self.count_text(name)
            framing += profile.tokens_per_name
        function_call = message.get("function_call")
        if isinstance(function_call, Mapping):
            framing += 3
            text += self._count_call(function_call)
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list):
            if len(tool_calls) > 1:
                framing += profile.tokens_per_parallel_calls
            for call_index, call in enumerate(tool_calls):
                if not isinstance(call, Mapping):
                    raise MalformedRequestError(f"{where}.tool_calls[{call_index}]", "expected an object")
                function = call.get("function")
                framing += profile.tokens_per_tool_call
                if isinstance(function, Mapping):
                    text += self._count_call(function)
                    if extra := split_values(function.get("arguments")) - 1:  # Bedrock: a toolUse per JSON value
                        framing += extra * profile.tokens_per_tool_call
                        text += extra * self.count_text(f"{function.get('name')} {call.get('id')}_{extra}")
                else:
                    text += self.count_text(canonical_json(call))
            text += self.count_text(calls_text(tool_calls)) if profile.tools_as_text else 0  # ollama_pt's again
        ids = [c.get("id") for c in tool_calls if isinstance(c, Mapping)] if isinstance(tool_calls, list) else []
        sent = [i.partition(SEPARATOR)[0] for i in (*ids, message.get("tool_call_id")) if isinstance(i, str)]
        text += sum(max(0, self.count_text(i) - ID_TOKENS) for i in sent) if profile.family != "gemini" else 0
        images = message.get("images")  # an assistant's generated images, sent back to Gemini as inline data
        for image_index, image in enumerate(images if isinstance(images, list) else []):
            media += sum(self._count_part({**image, "type": "image_url"}, f"{where}.images[{image_index}]")) \
                if isinstance(image, Mapping) else 0
        media += signature_tokens(message, profile.signature_chars_per_token) if profile.family == "gemini" else 0
        framing -= 2 if role == "function" else 0  # legacy function results carry less framing (measured)
        if profile.empty_text and role in ("user", "assistant") and (empty := empty_texts(content)):
            text += empty * self.count_text(profile.empty_text)  # what LiteLLM writes over an empty text
        text += self.count_text(refusal) if isinstance(refusal := message.get("refusal"), str) else 0
        text += sum(self.count_text(canonical_json(value)) for value in rendered.carried_fields(message))
        thinking, reasoning = message.get("thinking_blocks"), message.get("reasoning_content")
        reasoning = message.get("reasoning") if reasoning is None else reasoning  # vLLM, LiteLLM's Ollama read it too
        blocks = isinstance(thinking, list) and bool(thinking)
        if blocks:  # LiteLLM sends an assistant message's thinking blocks back to Claude: count all they carry
            text += self.count_text(canonical_json(thinking))
            media += sum(sum(self._count_part(one, where)) for one in parts.thought_parts(thinking, profile.family))
        # sent as is (openai/, hosted_vllm/), as a Gemini thought part (beside the blocks' on 1.103); OpenRouter's
        said = self.count_text(reasoning if isinstance(reasoning, str) else canonical_json(reasoning)) \
            if reasoning is not None and (not blocks or profile.family == "gemini") else 0  # details copy it: larger
        text += max(said, self.count_text(canonical_json(d)) if (d := message.get("reasoning_details")) else 0)
        return framing + media, text

    def _count_call(self, function: Mapping[str, Any]) -> int:
        tokens = 0
        for key in ("name", "arguments"):
            value = function.get(key)
            if isinstance(value, str):
                tokens += self.count_text(value)
            elif value is not None:
                tokens += self.count_text(canonical_json(value))
        return tokens

    def _count_part(self, part: Any, where: str) -> tuple[int, int]:
        """(text tokens, media tokens) of a part; a media part's ``text`` too (Gemini's system instruction has it)."""
        text, media = self._typed_part(part, where)
        kind = part.get("type") if isinstance(part, Mapping) else None
        stray = part.get("text") if type(kind) is str and kind in MEDIA_PARTS else None
        return text + (self.count_text(stray) if isinstance(stray, str) else 0), media

    def _typed_part(self, part: Any, where: str) -> tuple[int, int]:
        if isinstance(part, str):
            return self.count_text(part), 0
        if not isinstance(part, Mapping):
            raise MalformedRequestError(where, f"a content part must be an object, got {type(part).__name__}")
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            return self.count_text(part["text"]), 0
        if kind in RETYPED and type(kind) is not ViewPart and (instead := sent_as(part)) is not None:  # as sent
            terms = [self._typed_part(one, where) for one in instead]
            return sum(text for text, _ in terms), sum(media for _, media in terms)
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return self.count_text(part["refusal"]), 0
        if kind in ("image_url", "input_image") and "image_url" in part:
            return 0, self.image_tokens(part["image_url"], where=f"{where}.image_url")
        if kind == "input_audio" and isinstance(part.get("input_audio"), Mapping):
            return 0, audio_tokens(part["input_audio"].get("data"))
        if kind in ("video_url", "audio_url"):  # by URL: the flat estimate of content not in the request; inline: size
            url = part[kind].get("url") if isinstance(part.get(kind), Mapping) else part.get(kind)
            tokens = file_tokens({"file_data": url} if isinstance(url, str) and url.startswith("data:") else {})
            return 0, max(tokens, images.video_floor(self.profile.image_formula)) if kind == "video_url" else tokens
        if kind == "file" and isinstance(part.get("file"), Mapping):
            text = file_text(part["file"])  # a text file is counted as the text it is
            if text is not None:
                return self.count_text(text) + FILE_FRAMING_TOKENS, 0
            # a video: at least the frames an open model's server samples
            video = images.video_floor(self.profile.image_formula) if is_video_file(part["file"]) else 0
            return 0, max(video, file_tokens(part["file"], pdf_page_tokens=self.profile.pdf_page_tokens,
                                             pdf_min_tokens=self.profile.pdf_min_tokens))
        if type(kind) is ViewPart:
            if kind == THOUGHT_SIGNATURE:
                # billed as input when replayed; base64, so counted per character, not as text
                if (part.get("streamed") is False and not self.profile.signatures_billed_unstreamed) or \
                        (part.get("earlier") and not self.profile.signatures_billed_earlier):
                    return 0, 0
                return 0, math.ceil(len(str(part.get("signature", ""))) / self.profile.signature_chars_per_token)
            if kind == HIDDEN_PROMPT:
                return 0, max(0, int(part.get("tokens", 0)))
            if kind == ONE_OF:  # sent as one of these, depending on the provider: the dearest
                return max((self._count_part(one, where) for one in part["parts"]), key=sum)
        # Unknown or malformed part: count everything it carries, so nothing is free.
        return self.count_text(canonical_json(part)), 0

    def image_tokens(self, image: Any, *, where: str = "image_url") -> int:
        """Tokens of one ``image_url`` value (a string URL or ``{"url", "detail"}``)."""
        url: Any
        if isinstance(image, str):
            url, detail = image, "auto"
        elif isinstance(image, Mapping):
            url, detail = image.get("url"), image_detail(image.get("detail"), where)
        else:
            raise MalformedRequestError(where, f"expected a URL string or an object, got {type(image).__name__}")
        if not isinstance(url, str):
            raise MalformedRequestError(f"{where}.url", "missing or not a string")
        profile = self.profile
        size = None if profile.image_formula == "flat" else images.image_dimensions(url)
        return images.image_price(profile.image_formula, size, detail=detail, base=profile.image_base_tokens,
                                  tile=profile.image_tile_tokens, multiplier=profile.image_patch_multiplier)

    # --- tools and other request-level parts -------------------------------------------------------

    def _count_functions(self, functions: list[Mapping[str, Any]], *, responses: bool = False,
                         whole: list[Any] | None = None) -> int:
        """``whole``: the tools as a chat template is handed them (``tools.sent_tools``), or None."""
        if not functions:
            return 0
        # Tool definitions are resent with every request of a session: cache their count too.
        serialised = canonical_json(functions if whole is None else [functions, whole])
        key = hash((self._profile_id, "tools", responses, len(serialised), hash(serialised)))
        cached = COUNT_CACHE.get(key)
        if cached is None:
            cached = self._count_functions_uncached(functions, responses=responses, whole=whole)
            COUNT_CACHE.put(key, cached)
        return cached

    def _count_functions_uncached(self, functions: list[Mapping[str, Any]], *, responses: bool = False,
                                  whole: list[Any] | None = None) -> int:
        profile = self.profile
        raw = inlined_tokens([f.get("parameters") for f in functions], self.count_text)  # LiteLLM inlines $refs
        if profile.tools_rendering == "json":
            written = sum(self.count_text(tool_json(f, profile.tools_json)) for f in functions)
        else:
            # every default; newer models' prompts carry more of the schema
            written = self.count_text(render_functions(functions)) + 9 + \
                self.count_text(unrendered_text(functions, newer=bool(profile.tokens_per_function)))
        if whole is not None:  # a chat template writes each tool object whole: every key, the client's extra ones too
            style = "indent4" if profile.tools_json == "indent4" else "spaced"
            written = max(written, sum(self.count_text(tooldefs.whole_json(tool, style)) for tool in whole))
        raw += written
        if responses and profile.family == "openai":
            overhead, per_function = profile.responses_tools_overhead, profile.responses_tokens_per_function
        else:
            overhead, per_function = profile.tools_request_overhead, profile.tokens_per_function
        return self._scaled(raw) + overhead + per_function * len(functions)

    def _response_format_tokens(self, request: Mapping[str, Any]) -> int:
        """A response format's schemas are rendered into the prompt (``tools.response_schemas``), ``$ref``s inlined."""
        schemas = response_schemas(request.get("response_format"))
        raw = sum(self.count_text(canonical_json(s)) for s in schemas) + inlined_tokens(schemas, self.count_text)
        return self._scaled(raw) + self.profile.structured_output_overhead if schemas else 0


@functools.lru_cache(maxsize=1024)
def _counter_for(model: str, base_model: str | None) -> TokenCounter:
    from .templated import counter_for  # an operator-configured tokenizer and chat template first
    return counter_for(model, base_model) or TokenCounter(resolve_tokenizer(model, base_model=base_model), model=model)


# --- validation -----------------------------------------------------------------------------------------


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None
