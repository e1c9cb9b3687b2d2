"""Where tokens are counted: how each provider bills a chat-shaped request, offline.

* ``counter.TokenCounter``: counts a chat-shaped request (every request shape is counted through the
  chat-shaped view it is also trimmed on, see ``budget_hook.shapes``);
* ``profiles``: which encoding, framing constants and safety factor a model family is counted with;
* ``tools``, ``images``, ``media``: tool schemas as rendered into the prompt, image formulas, audio/files;
* ``encodings``: tiktoken's encodings loaded from the litellm wheel, never the network;
* ``cache``: the per-process LRU of counts keyed by content hash;
* ``templated``: a deployment's own ``tokenizer.json`` and chat template, named in the settings (exact);
* ``signatures``: Gemini thought signatures LiteLLM replays on ``/chat/completions``;
* ``runs``: what other tokenizers spend beyond o200k on digit, space and letter runs; a number's tokens by its
  length;
* ``validation``: the structure a chat-shaped request must have to be counted.
"""

from .canonical import canonical_json
from .counter import RequestCount, TokenCounter
from .profiles import TokenizerProfile, resolve_tokenizer

__all__ = ["RequestCount", "TokenCounter", "TokenizerProfile", "canonical_json", "resolve_tokenizer"]
