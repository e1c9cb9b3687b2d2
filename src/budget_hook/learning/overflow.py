"""Read a provider's context-overflow error: the window it names and the prompt tokens it counted (pure).

Contract: ``parse_overflow(text)`` returns an ``Overflow`` for the overflow wordings of the providers the
gateway routes to, else None. The wording must open the provider's message (the start of the text, a
``message`` field, an exception prefix): an error that quotes client content containing such words
teaches nothing. ``window`` is the largest input the provider accepts (its context length:
an input alone can never exceed it), ``prompt_tokens`` the provider's own count of the rejected prompt,
when the message says them. Never raises; reads at most the first ``MAX_CHARS`` characters. The
patterns are ASCII-only (``re.ASCII``): no Unicode case folding (``\u212a`` is not ``k``) can make client
text match them.

``quotes_overflow(value)`` is True when any key or string in ``value`` (a request as the client sent it:
body, metadata, headers) contains a phrase an overflow wording needs (``OVERFLOW_PHRASES``, any case). A
provider's 400 may quote client input (``Unrecognized request argument supplied: <key>``, ``<key>: Extra
inputs are not permitted``, ``thinking.type: Input tag '<value>'``); the error of such a request teaches
nothing, whatever it says. One lower-casing and a few substring searches per string: linear.

Wordings (as the APIs answer them):

* Anthropic: ``prompt is too long: 210000 tokens > 200000 maximum``; ``input length and `max_tokens`
  exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again``;
* OpenAI chat / completions / embeddings: ``This model's maximum context length is 128000 tokens.
  However, you requested 130000 tokens (129000 in the messages, 1000 in the completion)``, and the older
  ``..., however you requested 9000 tokens (8000 in your prompt; 1000 for the completion)``;
* Gemini: ``The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).``;
* vLLM / OpenAI-compatible servers: ``This model's maximum context length is 4096 tokens. However, you
  requested 5000 tokens (4000 in the messages, 1000 in the completion)`` (same as OpenAI), and
  ``... maximum context length is 8192 tokens and your request has 9000 input tokens``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 4000


@dataclass(frozen=True)
class Overflow:
    window: int | None
    prompt_tokens: int | None
    provider: str


_N = r"(\d[\d,]*)"
_PATTERNS: tuple[tuple[str, re.Pattern[str], str | None, str | None], ...] = (
    # (provider, pattern, group holding the window, group holding the prompt tokens)
    ("anthropic", re.compile(rf"prompt is too long:\s*(?P<prompt>{_N[1:-1]})\s*tokens\s*>\s*(?P<window>{_N[1:-1]})"
                             r"\s*maximum", re.ASCII), "window", "prompt"),
    ("anthropic", re.compile(rf"input length and `?max_tokens`? exceed context limit:\s*(?P<prompt>{_N[1:-1]})\s*\+"
                             rf"\s*\d[\d,]*\s*>\s*(?P<window>{_N[1:-1]})", re.ASCII), "window", "prompt"),
    ("openai", re.compile(rf"maximum context length is\s*(?P<window>{_N[1:-1]})\s*tokens.{{0,40}}?requested\s*"
                          rf"\d[\d,]*\s*tokens\s*\((?P<prompt>{_N[1:-1]})\s*in (?:the messages|your prompt)",
                          re.IGNORECASE | re.DOTALL | re.ASCII), "window", "prompt"),
    ("openai", re.compile(rf"maximum context length is\s*(?P<window>{_N[1:-1]})\s*tokens.{{0,60}}?request has\s*"
                          rf"(?P<prompt>{_N[1:-1]})\s*input tokens", re.IGNORECASE | re.DOTALL | re.ASCII),
     "window", "prompt"),
    ("openai", re.compile(rf"maximum context length is\s*(?P<window>{_N[1:-1]})\s*tokens", re.IGNORECASE | re.ASCII),
     "window", None),
    ("gemini", re.compile(rf"input token count\s*\(?(?P<prompt>{_N[1:-1]})\)?\s*exceeds the maximum number of tokens "
                          rf"allowed\s*\(?(?P<window>{_N[1:-1]})\)?", re.IGNORECASE | re.ASCII), "window", "prompt"),
)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text.replace(",", ""))
    except ValueError:
        return None
    return value if 0 < value < 10**9 else None


#: what may stand right before the wording: the start, a JSON or Python ``message`` field, an exception
#: prefix (``AnthropicException - ``), a new line. Not a quote inside other text: an error that echoes a
#: client's value (``Invalid value: '...prompt is too long: 1 tokens > 10 maximum'``) must teach nothing.
_LEAD = re.compile(r"""(?:^|message\\?['"]?\s*[:=]\s*\\?['"]|\s-\s|\n|\bdetail\\?['"]?\s*:\s*\\?['"])\s*$""")
_THIS_MODEL = re.compile(r"(?:This model's|The model's|the model's|The)\s*$")


def _anchored(text: str, start: int) -> bool:
    lead = _THIS_MODEL.sub("", text[:start])
    return bool(_LEAD.search(lead[-60:])) or not lead.strip()


def parse_overflow(text: object) -> Overflow | None:
    if not isinstance(text, str) or not text:
        return None
    text = text[:MAX_CHARS]
    for provider, pattern, window_group, prompt_group in _PATTERNS:
        match = pattern.search(text)
        if match is None or not _anchored(text, match.start()):
            continue
        window = _int(match.group(window_group)) if window_group else None
        prompt = _int(match.group(prompt_group)) if prompt_group else None
        if window is None and prompt is None:
            continue
        return Overflow(window, prompt, provider)
    return None


#: a phrase each wording above needs, lower-case: a request carrying one anywhere may have it echoed back
OVERFLOW_PHRASES = ("prompt is too long", "exceed context limit", "maximum context length", "input token count",
                    "number of tokens allowed")
#: strings and keys inspected per request, at most: a request with more is treated as quoting (teaches nothing)
MAX_INSPECTED = 1_000_000


def _quotes(text: str) -> bool:
    lowered = text.lower()
    return any(phrase in lowered for phrase in OVERFLOW_PHRASES)


def quotes_overflow(value: object) -> bool:
    """True when a key or string anywhere in ``value`` contains an overflow phrase (any case)."""
    stack = [value]
    seen = 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_INSPECTED:
            return True
        if isinstance(item, str):
            if _quotes(item):
                return True
        elif isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str) and _quotes(key):
                    return True
                stack.append(inner)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False
