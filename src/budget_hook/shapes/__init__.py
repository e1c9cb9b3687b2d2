"""Where each request shape lives, behind one registry: the proxy, the CLI and the tests find shapes here.

One module per shape declares everything about it (``chat``, ``anthropic``, ``responses``, ``gemini``,
``completions``, ``embeddings``; see ``base`` for what a shape declares). To add a shape, write its
module with a ``SHAPE`` and list it in ``REGISTERED`` below; the registry checks at import that call
types and names are unique and that a conversation shape can write every trimming action back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import anthropic, chat, completions, embeddings, gemini, responses
from .base import ConversationShape, InputsShape, Shape, View


class ShapeRegistry:
    """The registered shapes, by name and by LiteLLM call type."""

    def __init__(self, shapes: tuple[Shape, ...]) -> None:
        self.shapes = shapes
        self._by_name: dict[str, Shape] = {}
        self._by_call_type: dict[str, Shape] = {}
        for shape in shapes:
            if shape.name in self._by_name:
                raise ValueError(f"two request shapes are named {shape.name!r}")
            self._by_name[shape.name] = shape
            for call_type in shape.call_types:
                if call_type in self._by_call_type:
                    raise ValueError(f"call type {call_type!r} is claimed by {self._by_call_type[call_type].name!r} "
                                     f"and {shape.name!r}")
                self._by_call_type[call_type] = shape
            missing = shape.missing_writers() if isinstance(shape, ConversationShape) else []
            if missing:
                raise ValueError(f"request shape {shape.name!r} cannot write back trimming action(s) "
                                 f"{', '.join(missing)}: add them to its writers")

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def get(self, name: str) -> Shape:
        return self._by_name[name]

    def for_call_type(self, call_type: Any) -> Shape | None:
        return self._by_call_type.get(call_type) if isinstance(call_type, str) else None

    def for_route(self, route: Any) -> Shape | None:
        """The shape a proxy route carries (``Shape.routes``), None for a route no shape declares."""
        return next((shape for shape in self.shapes if route in shape.routes), None)

    def detect(self, body: Mapping[str, Any]) -> Shape | None:
        """The first shape whose ``detect`` accepts the body (CLI auto-detection), in registry order."""
        if not isinstance(body, Mapping):
            return None
        return next((shape for shape in self.shapes if shape.detect(body)), None)

    def content_fields(self) -> tuple[str, ...]:
        """Every field any shape carries content in."""
        return tuple(dict.fromkeys(f for shape in self.shapes for f in shape.content_fields))


#: LiteLLM call types that carry model input in a format no registered shape reads yet (Gemini
#: interactions, realtime, including WebRTC calls and the client secrets a client then uses to talk to the
#: model directly, LiteLLM 1.108's decisions): the ``unknown_routes`` setting passes or refuses them
UNREAD_MODEL_CALL_TYPES = frozenset({
    "acreate_interaction", "create_interaction", "_arealtime", "_aresponses_websocket", "arealtime_calls",
    "acreate_realtime_client_secret", "adecisions", "asystemone",
})
#: LiteLLM's pass-through routes: budgeted as the shape their body has, when it has one
PASS_THROUGH_CALL_TYPE = "pass_through_endpoint"

#: detection order matters: Anthropic before chat (both have ``messages``), embeddings before Responses
#: (both have ``input``; only embedding models and token ids say embeddings)
REGISTERED: tuple[Shape, ...] = (gemini.SHAPE, anthropic.SHAPE, chat.SHAPE, embeddings.SHAPE, responses.SHAPE,
                                 completions.SHAPE)
SHAPES = ShapeRegistry(REGISTERED)
#: every field any request shape carries content in (what the thread pool sizes, what ``extra_body`` may not hide)
CONTENT_FIELDS: tuple[str, ...] = SHAPES.content_fields()

__all__ = ["CONTENT_FIELDS", "PASS_THROUGH_CALL_TYPE", "SHAPES", "UNREAD_MODEL_CALL_TYPES", "ConversationShape",
           "InputsShape", "Shape", "ShapeRegistry", "View"]
