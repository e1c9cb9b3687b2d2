"""Responses chains: what the provider holds for a ``previous_response_id``, as this gateway saw it (pure).

A ``/v1/responses`` request naming ``previous_response_id`` sends only its new input; the provider adds the
whole chain before it. The gateway counts the chain from what it already saw: on each successful Responses
call, the response id the *provider* returned -> the tokens of the chain so far (its billed input, which
holds the earlier chain, + its output), written from the provider's usage, never from anything a client
sends. A request continuing a known response is then counted as that chain + its new input: its new input is
trimmed to what the chain leaves of the budget, and when that cannot make the room it is refused (the gateway
cannot trim what the provider holds) with the remedy to start a new chain or compact. An id this gateway never
saw (another gateway issued it, or the store forgot it) is counted by its new input only, and the record says
``chain: {"state": "unknown"}``.

Contract: ``ChainStore(run=...)``; ``await lookup(shape, body)`` -> ``Chain`` or None (the request continues no
response); ``await remember(response)`` stores a successful response's chain (its size, or None).
A request is decided with the chain counted (``BudgetRequest.held``, as the request's overhead: its new input is
trimmed to what the chain leaves); ``chained(decision, chain)`` gives a refusal the chain's size and remedy, and
``annotated(record, chain)`` says in the record what the chain holds (``chain``). Kept per process
(``CHAIN_ENTRIES`` at most, for ``CHAIN_TTL_SECONDS``) and, when LiteLLM has Redis, shared through it like the
learned state (``shared.SharedLearning``'s connection: same timeout and back-off; key
``budget_hook:v1:chain:<sha256 of the id>``).

LiteLLM hands clients its own wrapping of a provider's id (``resp_`` + base64 of
``litellm:custom_llm_provider:...;model_id:...;response_id:<the provider's id>``, encrypted with its master key
when it has one), and its success callback sees the encrypted id for a plain call but the unencrypted one for a
stream. ``ChainStore.key`` resolves an id exactly as LiteLLM will forward it: the adapter passes in LiteLLM's own
steps (``resolve``: its Responses-id decryption for a top-level ``/v1/responses`` id, then its decoding of its
base64 wrapping), so junk around an id, an id padded past ``MAX_ID_CHARS`` or a hand-built wrapping is read as
LiteLLM reads it, the length limit applies to the id the provider gets, and an id that cannot be resolved that
way is unknown (counted by its new input). The id stored (the provider's, from its response: no client writes
it) and the one a client sends back agree. Ids are read in the top-level ``previous_response_id`` and in
``extra_body.previous_response_id`` (LiteLLM merges it after the hook), on ``/v1/responses`` and on
``/v1/chat/completions`` (LiteLLM forwards it to the deployments it bridges to the Responses API); a request
naming two ids is counted with the larger known chain.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..pipeline import Decision, DecisionRecord
from ..shapes import Shape
from ..shapes.responses import SERVER_HISTORY_NOTE
from .answers import CHAIN_REMEDY

#: how long and how many chains are kept (OpenAI keeps a stored response 30 days)
CHAIN_TTL_SECONDS = 30 * 24 * 3600.0
CHAIN_ENTRIES = 100_000
#: the same chain stored again within this time is not written to Redis again
REWRITE_AFTER_SECONDS = 60.0
#: an id (as the provider gets it) longer than this is no response id: not looked up, not stored
MAX_ID_CHARS = 1024
#: a client's id longer than this is not even resolved (unknown)
MAX_RAW_ID_CHARS = 64 * 1024
#: the shapes whose requests continue a provider-held chain by this field (top level or in ``extra_body``)
CHAIN_FIELD = "previous_response_id"
_CHAIN_SHAPES = frozenset({"responses", "chat"})
#: the shape whose top-level id LiteLLM decrypts before forwarding (its Responses-id security hook)
_DECRYPTED_SHAPE = "responses"
_KEY_PREFIX = "budget_hook:v1:chain:"
_LITELLM_ID = "litellm:"
_MANAGED_ID = "litellm_proxy:responses_api:response_id:"


def chain_key(value: Any) -> str | None:
    """The provider's response id, from itself or from LiteLLM's wrappings of it (decrypted: ``litellm_proxy:
    responses_api:response_id:<id>;user_id:...``; encoded: ``resp_`` + base64 of ``litellm:...;response_id:<id>``);
    None: no id."""
    if not isinstance(value, str) or not value or len(value) > MAX_RAW_ID_CHARS:
        return None
    response_id: str = value
    if response_id.startswith(_MANAGED_ID):
        response_id = response_id[len(_MANAGED_ID):].split(";", 1)[0]
    if response_id.startswith("resp_"):
        encoded = response_id[len("resp_"):]
        try:
            text = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return response_id
        if text.startswith(_LITELLM_ID):
            for part in text.split(";"):
                name, _, inner = part.partition(":")
                if name == "response_id" and inner:
                    return inner if len(inner) <= MAX_ID_CHARS else None
    return response_id if len(response_id) <= MAX_ID_CHARS else None


def named_ids(shape: Shape, body: Mapping[str, Any]) -> list[tuple[Any, bool]]:
    """The ids a request continues, each with whether LiteLLM decrypts it before forwarding: the top-level
    ``previous_response_id`` (decrypted on ``/v1/responses``) and ``extra_body.previous_response_id``."""
    if shape.name not in _CHAIN_SHAPES or not isinstance(body, Mapping):
        return []
    found: list[tuple[Any, bool]] = []
    if body.get(CHAIN_FIELD):
        found.append((body.get(CHAIN_FIELD), shape.name == _DECRYPTED_SHAPE))
    extra = body.get("extra_body")
    if isinstance(extra, Mapping) and extra.get(CHAIN_FIELD):
        found.append((extra.get(CHAIN_FIELD), False))
    return found


@dataclass(frozen=True)
class Chain:
    """A request continuing a stored response: the tokens the provider holds for it, None when unknown."""

    held: int | None


class ChainStore:
    def __init__(self, *, run: Callable[[str, Callable[[Any], Awaitable[Any]]], Awaitable[Any]] | None = None,
                 resolve: Callable[[str, bool], str] | None = None, ttl_seconds: float = CHAIN_TTL_SECONDS,
                 entries: int = CHAIN_ENTRIES, clock: Callable[[], float] = time.monotonic) -> None:
        self._run = run  # ``SharedLearning._run``: the shared Redis, within its timeout (None: per process)
        #: LiteLLM's own resolution of an id to the one it forwards: (id, decrypted first?) -> id (the adapter's)
        self._resolve = resolve
        self._ttl = ttl_seconds
        self._entries = entries
        self._clock = clock
        self._local: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def key(self, response_id: Any, decrypted: bool = True) -> str | None:
        """The provider's id for an id as a client (or LiteLLM's callback) holds it; None: unreadable."""
        if not isinstance(response_id, str) or not response_id or len(response_id) > MAX_RAW_ID_CHARS:
            return None
        if self._resolve is None:
            return chain_key(response_id)
        try:
            resolved = self._resolve(response_id, decrypted)
        except Exception:  # LiteLLM could not read it: neither can we
            return None
        if not isinstance(resolved, str) or not resolved or len(resolved) > MAX_ID_CHARS:
            return None
        return resolved

    @staticmethod
    def _redis_key(key: str) -> str:
        return _KEY_PREFIX + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    def _keep(self, key: str, tokens: int) -> None:
        self._local[key] = (self._clock() + self._ttl, tokens)
        self._local.move_to_end(key)
        while len(self._local) > self._entries:
            self._local.popitem(last=False)

    async def lookup(self, shape: Shape, body: Mapping[str, Any]) -> Chain | None:
        """The chain a request continues (None: it continues none); of two ids, the larger known chain."""
        named = named_ids(shape, body)
        if not named:
            return None
        held = [await self._held(self.key(value, decrypted)) for value, decrypted in named]
        known = [n for n in held if n is not None]
        return Chain(max(known) if known else None)

    async def _held(self, key: str | None) -> int | None:
        if key is None:
            return None
        local = self._local.get(key)
        if local is not None and local[0] > self._clock():
            return local[1]
        shared = None
        if self._run is not None:
            async def read(client: Any) -> Any:
                return await client.get(self._redis_key(key))

            shared = _tokens(await self._run("read", read))
            if shared is not None:
                self._keep(key, shared)
        return shared

    async def remember(self, response: Any) -> int | None:
        """A successful Responses call's chain: its billed input (which holds the earlier chain) + its output,
        under the id the provider gave it. Anything else (a chat completion, no usage) is not stored."""
        if field_of(response, "object") != "response":
            return None
        key = self.key(field_of(response, "id"))
        usage = field_of(response, "usage")  # chat's terms (prompt_tokens) or its own
        held = [_first(usage, names) for names in (("input_tokens", "prompt_tokens"),
                                                   ("output_tokens", "completion_tokens"))]
        if key is None or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in held):
            return None
        tokens = int(held[0]) + int(held[1])
        known = self._local.get(key)
        self._keep(key, tokens)
        if known is not None and known[1] == tokens and known[0] - self._ttl + REWRITE_AFTER_SECONDS > self._clock():
            return tokens  # stored a moment ago: the success callback and the post-call hook see one response
        if self._run is not None:
            async def write(client: Any) -> None:
                await client.set(self._redis_key(key), str(tokens), ex=int(self._ttl))

            await self._run("write", write)
        return tokens


def field_of(value: Any, name: str) -> Any:
    """A field of a dict or an object alike (LiteLLM hands responses and stream events over as either)."""
    return value.get(name) if isinstance(value, Mapping) else getattr(value, name, None)


def _first(value: Any, names: tuple[str, ...]) -> Any:
    found = (field_of(value, name) for name in names)
    return next((n for n in found if n is not None), None)


def _tokens(value: Any) -> int | None:
    try:
        number = int(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError, UnicodeDecodeError):
        return None
    return number if 0 <= number < 10**9 else None


def chained(decision: Decision, chain: Chain | None) -> Decision:
    """The decision of a request continuing a chain this gateway knows, made with the chain counted
    (``BudgetRequest.held``: its new input trimmed to what the chain leaves): a refusal says what the chain holds,
    with the remedy only a new chain or a compaction gives (the chain is the provider's: it cannot be trimmed)."""
    block = decision.block
    if chain is None or not chain.held or block is None or block.kind != "cannot_fit":
        return decision
    message = (f"{block.message} The request continues a stored response whose chain holds {chain.held} tokens at the "
               f"provider (counted in the request's overhead above). {CHAIN_REMEDY}")
    return replace(decision, block=replace(block, message=message, facts={**block.facts, "chain_tokens": chain.held}))


def annotated(record: DecisionRecord, chain: Chain | None, body: Mapping[str, Any] | None = None) -> DecisionRecord:
    """The record of a request continuing a chain: ``chain`` says how much the provider holds (counted in
    ``tokens_before`` and ``tokens_after``) and how much the new input is, or that this gateway does not know (never
    the id: a client wrote it)."""
    if chain is None:
        return record
    if chain.held is None:
        return replace(record, chain={"state": "unknown", "counted": "new input only"})
    before = record.tokens_before
    new_input = before - chain.held if isinstance(before, int) else None
    # the history is counted now: no "not counted" note, unless a ``conversation`` holds more of it
    notes = record.notes if isinstance(body, Mapping) and body.get("conversation") else \
        tuple(n for n in record.notes if n != SERVER_HISTORY_NOTE)
    return replace(record, notes=notes, chain={"state": "known", "held": chain.held, "new_input": new_input})
