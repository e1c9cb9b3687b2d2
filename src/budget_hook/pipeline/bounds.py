"""Bounds on what a client sends, checked before anything walks the body (pure; iterative, never recursive).

A request whose content nests deeper than ``MAX_DEPTH`` levels (a tool schema 300 ``items`` deep, content
parts inside parts inside parts) would make recursive code (JSON encoders, schema renderers, LiteLLM's own
transformations) raise ``RecursionError``: that is a client's input, so it must be a 400 naming the
field, never the plugin's failure path. No legitimate request comes close: real tool schemas and
content blocks nest a dozen levels at most.

``hidden_content(body)`` names content sent inside ``extra_body``: LiteLLM merges ``extra_body`` into the
provider request *after* the pre-call hook, so ``extra_body.messages`` (or ``tools``, ``input``,
``system``...) would replace or add to what was counted. Such a request is ambiguous: a 400 names the field.

``prompt_parameter(body)`` names a LiteLLM parameter the client sent that makes LiteLLM write prompt text of
its own after the check (``litellm_system_prompt``; ``ensure_alternating_roles`` and the continue messages it
inserts between same-role turns; a custom prompt template's ``roles``, ``initial_prompt_value``...), at the
top level or in a fallback target (LiteLLM applies those to the fallback call): the client can put that
text in its messages instead, where it is counted. A router attempt's kwargs hold the operator's own too (a
deployment's ``litellm_params``, the router's defaults): its decision (``client_body=False``) does not look for
them, and ``added_prompt_parameter`` names one whose value is not the operator's (a client's, merged by the
router from a fallback target or a settings override). A special token's name (``bos_token``, ``eos_token``...),
``messages`` or ``tools`` in ``chat_template_kwargs`` is one too: vLLM hands the template the client's value in
place of its own (``TEMPLATE_OVERRIDES``); so are vLLM's ``mm_processor_kwargs`` and ``media_io_kwargs``, which set
how many tokens an image or a video becomes (``MEDIA_OVERRIDES``). So is a parameter that makes LiteLLM send a
refused call again without the hooks (``CALL_AGAIN_PARAMETERS``); the gateway sets its own ``retry_policy``, which
grants none (``gateway_parameters``).

Contract: ``body_problem(body, fields, client_body=True)`` returns ``None``, or a ``MalformedRequestError``
naming the field at fault: content in ``extra_body``, a prompt parameter (``client_body``), or the first
path (in ``messages[0].content[1].data`` form) of ``fields`` that goes deeper than the limit. The proxy
turns it into a 400, the CLI into exit 1.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain
from typing import Any

from ..counting.rendered import PROMPT_FIELDS, with_extra_body
from ..errors import MalformedRequestError
from ..shapes import CONTENT_FIELDS
from ..shapes.anthropic import RESPONSES_ONLY_FIELDS

#: levels of nesting a request field may have (the field itself is level 1)
MAX_DEPTH = 100


def _depth_over(value: Any, limit: int) -> bool:
    # ``type(x) is dict`` first: parsed JSON holds only dicts and lists, and the ABC check is the slow one
    stack: list[tuple[Any, int]] = [(value, 1)]
    push = stack.append
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        kind = type(node)
        children = node.values() if kind is dict or (kind is not list and isinstance(node, Mapping)) else node
        depth += 1
        for child in children:
            kind = type(child)
            if kind is dict or kind is list or (kind not in _LEAVES and isinstance(child, (Mapping, list))):
                push((child, depth))
    return False


#: what holds nothing to walk (the depth walk's fast path)
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _deepest_path(value: Any, name: str, limit: int) -> str:
    """The path to the first node beyond ``limit``; only walked for a body known to be too deep."""
    stack: list[tuple[Any, int, str]] = [(value, 1, name)]
    while stack:
        node, depth, path = stack.pop()
        if depth > limit:
            return path
        if isinstance(node, Mapping):
            stack.extend((child, depth + 1, f"{path}.{_segment(key)}") for key, child in node.items()
                         if isinstance(child, (Mapping, list)))
        elif isinstance(node, list):
            stack.extend((child, depth + 1, f"{path}[{index}]") for index, child in enumerate(node)
                         if isinstance(child, (Mapping, list)))
    return name


#: keys a path may name as they are: the request formats' and JSON Schema's own words. Any other key is
#: client-chosen (a property or tool name, which can carry anything) and is named ``*`` in the path: the
#: path reaches the client's 400, the record and LiteLLM's error log.
_PATH_KEYS = frozenset({
    "messages", "content", "parts", "contents", "input", "output", "tools", "tool_calls", "function", "functions",
    "parameters", "input_schema", "properties", "items", "prefixItems", "additionalProperties", "anyOf", "oneOf",
    "allOf", "not", "$defs", "definitions", "patternProperties", "schema", "json_schema", "response_format",
    "responseSchema", "response_json_schema", "generationConfig", "config", "text", "format", "arguments", "args",
    "response", "functionCall", "functionResponse", "functionDeclarations", "systemInstruction",
    "system_instruction", "system", "instructions", "source", "data", "tool_choice", "output_format",
    "output_config", "summary", "result", "image_url", "file", "input_audio", "inlineData", "fileData"})


def _segment(key: Any) -> str:
    return key if isinstance(key, str) and key in _PATH_KEYS else "*"


def body_problem(body: Mapping[str, Any], fields: Iterable[str], *, client_body: bool = True,
                 prompt_fields: Iterable[str] = ()) -> MalformedRequestError | None:
    """What makes ``body`` one the gateway cannot vouch for (see the module's contract), or None;
    ``prompt_fields``: more top-level prompt parameters for this body's shape (``Shape.prompt_fields``)."""
    hidden = hidden_content(body)
    if hidden is not None:
        return MalformedRequestError(hidden, "LiteLLM merges extra_body into the provider request after the "
                                     "gateway's budget check, so content there cannot be budgeted; send "
                                     f"{hidden.removeprefix('extra_body.')} at the top level of the request")
    if client_body and "user_config" in body:  # LiteLLM routes it with a router of the client's (route_llm_request)
        return MalformedRequestError("user_config", CLIENT_ROUTER_REMEDY)
    fields = tuple(fields)
    # a shape's own prompt fields in a body of that shape (without its content, its own check names what is missing)
    own = tuple(prompt_fields) if any(name in body for name in fields) else ()
    added = prompt_parameter(body, own) if client_body else None
    if added is not None:
        return MalformedRequestError(added, prompt_parameter_remedy(added))
    path = too_deep(body, (*fields, *PROMPT_FIELDS, "extra_body"))  # what the count walks besides the content
    if path is not None:
        return MalformedRequestError(path, f"nested more than {MAX_DEPTH} levels deep; the gateway accepts at most "
                                     f"{MAX_DEPTH}")
    return None


CLIENT_ROUTER_REMEDY = ("a router of the client's own, which LiteLLM builds when the gateway allows client-side "
                        "credentials: the gateway cannot budget deployments it does not know (their windows, or the "
                        "deployment an answer comes from), so it refuses them; send the request to one of the "
                        "gateway's model groups, without user_config")


def too_deep(body: Mapping[str, Any], fields: Iterable[str], limit: int = MAX_DEPTH) -> str | None:
    """The first path of ``fields`` nested deeper than ``limit`` (cut to 200 characters), or None."""
    for name in fields:
        value = body.get(name)
        if isinstance(value, (Mapping, list)) and _depth_over(value, limit):
            path = _deepest_path(value, name, limit)
            return path if len(path) <= 200 else path[:90] + "..." + path[-90:]
    return None




def hidden_content(body: Mapping[str, Any]) -> str | None:
    """``extra_body.<field>`` for the first content field sent inside ``extra_body``, else None."""
    extra = body.get("extra_body")
    if not isinstance(extra, Mapping):
        return None
    return next((f"extra_body.{name}" for name in extra if name in CONTENT_FIELDS), None)


#: LiteLLM parameters that make it write prompt text after the hooks (``litellm.main.completion``: the system
#: prompt merged into the first system message, the continue messages ``ensure_alternating_roles`` inserts,
#: the custom prompt template some providers' transformations render)
PROMPT_PARAMETERS = ("litellm_system_prompt", "ensure_alternating_roles", "user_continue_message",
                     "assistant_continue_message", "roles", "initial_prompt_value", "final_prompt_value", "bos_token",
                     "eos_token",
                     # a stored prompt's variables the proxy did not fill in before the hook (it takes them out when it
                     # does): LiteLLM fills them into the deployment's own prompt_id inside the call, twice
                     "prompt_variables", "prompt_label", "prompt_version")
#: LiteLLM parameters that make it call the provider again after the hooks refused a call, without running them.
#: LiteLLM's client wrapper answers the refusal of a call it does not take for the router's (the inner call of its
#: /v1/messages and /v1/responses bridges; on 1.103 a Responses router attempt too, whose ``model_group`` it looks
#: for in ``metadata``) by calling the unwrapped function again: with the ``context_window_fallback_dict``'s model
#: (an attack review forwarded a refused 12,014-token body to an 8,000 window), and as often as the
#: ``retry_policy`` grants for the refusal's class (read before ``num_retries``)
CALL_AGAIN_PARAMETERS = ("context_window_fallback_dict", "retry_policy")
#: what a client may not set, at the top level or in a fallback target (checked as ``PROMPT_PARAMETERS`` are)
CLIENT_PARAMETERS = (*PROMPT_PARAMETERS, *CALL_AGAIN_PARAMETERS)
#: the ``retry_policy`` the gateway sets on every request it forwards to LiteLLM's router (``gateway_parameters``):
#: no retry for any error, so LiteLLM's client wrapper never sends a refused call again (a review: on LiteLLM 1.103 a
#: fallback's refused 12,011 tokens reached an 8,000-token deployment twice, for its ``num_retries``). The router's
#: own retries, which the hooks see, follow the router's policy, not this one, and no provider receives it.
WRAPPER_RETRIES_OFF = (("DefaultRetries", 0),)
#: what a fallback target may not carry either: LiteLLM fills its stored prompt in for the fallback call alone
FALLBACK_PROMPT_PARAMETERS = (*CLIENT_PARAMETERS, "prompt_id")
PROMPT_PARAMETER_REMEDY = ("LiteLLM adds prompt text of its own for this parameter after the gateway's budget check, "
                           "so it cannot be budgeted; put that text in the messages (send alternating user and "
                           "assistant turns), or ask the gateway operator to set it on the deployment")


#: the tokenizer's special tokens a chat template writes (``templated._SPECIAL_KEYS``)
TEMPLATE_SPECIALS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
#: ``chat_template_kwargs`` names a server hands its chat template over its own values (vLLM:
#: ``_chat_template_kwargs.update(request.chat_template_kwargs)``; transformers: ``{**special_tokens, **kwargs}``)
#: where the gateway counts its own: the special tokens, the messages and the tools. (``documents``,
#: ``add_generation_prompt`` and ``continue_final_message`` there are counted with that precedence:
#: ``counting.template_input.template_extras``; clients send them so for Granite's RAG and Qwen.)
TEMPLATE_OVERRIDES = (*TEMPLATE_SPECIALS, "messages", "tools")
TEMPLATE_OVERRIDE_REMEDY = ("a self-hosted server's chat template takes this value in place of its own (the "
                            "tokenizer's special token, or what it renders from the request's messages and tools), "
                            "where the gateway counts its own, so it cannot be budgeted; send messages and tools as "
                            "the request's own fields and leave special tokens to the tokenizer")


#: vLLM request fields its multimodal processor reads in place of the server's own settings: an image's size limits
#: (Qwen-VL's ``max_pixels``: a 10,000-pixel square reads as 127,451 tokens with ``max_pixels`` 100,000,000, 16,386
#: by default), Gemma's pan-and-scan crops, InternVL's tiles, a video's frames. The gateway prices media as the
#: server's defaults make them (``counting/images.py``); LiteLLM forwards both fields, also from ``extra_body``.
MEDIA_OVERRIDES = ("mm_processor_kwargs", "media_io_kwargs")
MEDIA_OVERRIDE_REMEDY = ("a self-hosted server's image and video processing takes this in place of its own settings "
                         "(how many tokens an image or a video becomes), where the gateway prices media by the "
                         "server's defaults, so it cannot be budgeted; leave it out, or ask the gateway operator to "
                         "set it on the deployment")


EMBEDDING_MESSAGES_REMEDY = ("LiteLLM forwards an embedding request's messages to the server beside its input, "
                             "and a server of chat-style embeddings (vLLM) may embed them in its place, so they "
                             "cannot be budgeted; send the text to embed as input")


STORED_PROMPT_REMEDY = ("LiteLLM fills this stored prompt in after the gateway's budget check (a text completion's, or "
                        "one a fallback target carries), so it cannot be budgeted; send it as the top-level prompt_id "
                        "of a /chat/completions request (the proxy fills that in before the check)")


RETRY_POLICY_REMEDY = ("LiteLLM sends a refused request to the provider again for this retry policy, without the "
                       "gateway's budget check, so it cannot be budgeted; ask the gateway operator for retries in "
                       "router_settings (num_retries, retry_policy: those are budgeted)")


CALL_AGAIN_REMEDY = ("LiteLLM sends the request again to the model this names after the gateway refused it, without "
                     "the gateway's budget check, so it cannot be budgeted; ask the gateway operator for a model group "
                     "with a larger window, or for context_window_fallbacks on the gateway's router (those are "
                     "budgeted)")


RESPONSES_FIELD_REMEDY = ("a Responses API field: LiteLLM forwards it into the Responses call it makes for an OpenAI "
                          "deployment after the gateway's budget check, so it cannot be budgeted on /v1/messages; send "
                          "instructions as system, or send the request to /v1/responses, where it is counted")


def prompt_parameter_remedy(path: str) -> str:
    """What the client can do instead of sending the prompt parameter at ``path``."""
    name = path.rpartition(".")[2]
    if path == "prompt_id":
        return STORED_PROMPT_REMEDY
    if name == "messages":  # the only prompt field named so: embeddings' (``shapes/embeddings.py``)
        return EMBEDDING_MESSAGES_REMEDY
    if name in RESPONSES_ONLY_FIELDS:
        return RESPONSES_FIELD_REMEDY
    if name in CALL_AGAIN_PARAMETERS:
        return RETRY_POLICY_REMEDY if name == "retry_policy" else CALL_AGAIN_REMEDY
    if name in MEDIA_OVERRIDES:
        return MEDIA_OVERRIDE_REMEDY
    return TEMPLATE_OVERRIDE_REMEDY if "chat_template_kwargs." in path else PROMPT_PARAMETER_REMEDY


def server_overrides(source: Mapping[str, Any]) -> dict[str, Any]:
    """Each of ``TEMPLATE_OVERRIDES`` set in ``source``'s ``chat_template_kwargs``, and each of ``MEDIA_OVERRIDES``
    set in ``source`` (or in its ``extra_body``, which LiteLLM merges), by path, with its value: what a self-hosted
    server takes in place of what the gateway counts."""
    found: dict[str, Any] = {}
    for prefix, holder in with_extra_body(source):
        kwargs = holder.get("chat_template_kwargs")
        if isinstance(kwargs, Mapping):
            found.update({f"{prefix}chat_template_kwargs.{name}": kwargs[name] for name in TEMPLATE_OVERRIDES
                          if kwargs.get(name) is not None})
        found.update({f"{prefix}{name}": holder[name] for name in MEDIA_OVERRIDES if _set(holder.get(name))})
    return found


def _set(value: Any) -> bool:
    """Whether LiteLLM acts on a prompt parameter's value (it reads them by truth: null, false, 0, "" are unset)."""
    return value is not None and not (isinstance(value, (bool, int, float, str, list, dict)) and not value)


def gateway_parameters() -> dict[str, Any]:
    """What the gateway sets on a request it forwards to LiteLLM's router (a fresh copy each time)."""
    return {"retry_policy": dict(WRAPPER_RETRIES_OFF)}


def is_gateway_retry_policy(value: Any) -> bool:
    """Whether ``value`` is the ``retry_policy`` the gateway sets (``gateway_parameters``), which grants no retry."""
    return bool(value == dict(WRAPPER_RETRIES_OFF))


def _client_set(name: str, source: Mapping[str, Any], target: bool = False) -> bool:
    """Whether a client parameter is set in ``source`` to something LiteLLM acts on, other than the gateway's own
    value. In a fallback ``target`` any ``retry_policy`` is: LiteLLM merges the target over the call's kwargs, so even
    ``null`` there takes the gateway's policy away (a review: the refused body was then sent twice)."""
    value = source.get(name)
    if name != "retry_policy":
        return _set(value)
    return (name in source if target else _set(value)) and not is_gateway_retry_policy(value)


#: the fields whose targets LiteLLM's router merges into a fallback call (``kwargs.update(target)``)
FALLBACK_FIELDS = ("fallbacks", "context_window_fallbacks", "content_policy_fallbacks")


def fallback_targets(body: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every fallback target ``body`` gives as parameters, with its path (``fallbacks[0].``), in the order LiteLLM's
    proxy reads them (``auth_utils._iter_fallback_targets``): in each of ``FALLBACK_FIELDS``, of the body and of its
    ``router_settings_override`` (the key's or team's, or a client's; merged in when the body sets none), and in every
    list a target holds (the router's own format ``{"group": [targets]}``, whatever else its entry holds; a target's
    own fallbacks)."""
    return ((_path(node), target) for node, target in _targets(body, None))


#: a path, one segment and the path it extends: a target 1,000 levels deep costs one segment, not 1,000
_Path = tuple[Any, str] | None


def _path(node: _Path) -> str:
    segments = []
    while node is not None:
        node, segment = node
        segments.append(segment)
    return "".join(reversed(segments)) + "."


def _targets(body: Mapping[str, Any], keys: frozenset[str] | None) -> Iterator[tuple[_Path, Mapping[str, Any]]]:
    """``fallback_targets``, each with its path unwritten (iterative, as long as the body); ``keys``: only those that
    hold one of them (most targets name a model alone)."""
    queue: deque[tuple[_Path, Any]] = deque()
    for prefix, source in (("", body), ("router_settings_override.", body.get("router_settings_override"))):
        if isinstance(source, Mapping):
            queue.extend(((None, prefix + field), source.get(field)) for field in FALLBACK_FIELDS)
    while queue:
        path, targets = queue.popleft()
        for index, target in enumerate(targets if isinstance(targets, list) else ()):
            if not isinstance(target, Mapping):
                continue
            here = (path, f"[{index}]")
            if keys is None or not keys.isdisjoint(target):
                yield here, target
            # a list anywhere in it holds targets too: the router's own format (``{"group": [targets]}``, of which
            # LiteLLM reads the first key, whatever else the entry holds) and a target's own fallbacks alike
            queue.extend(((here, f".{name}"), value) for name, value in target.items() if isinstance(value, list))


def hookless_retries(body: Mapping[str, Any]) -> str | None:
    """The path of a client's ``retry_policy`` (``_client_set``: at the top level, or any in a fallback target), else
    None. Checked in every mode, before the decision: a group whose mode is off or shadow can fall back to one the
    gateway enforces, whose refused attempt LiteLLM would send again for it (a review: three times, on 1.103)."""
    if _client_set("retry_policy", body):
        return "retry_policy"
    return next((_path(node) + "retry_policy" for node, target in _targets(body, _RETRY_KEYS)
                 if _client_set("retry_policy", target, True)), None)


_RETRY_KEYS = frozenset({"retry_policy"})
#: the keys of a fallback target that ``prompt_parameter`` reads
_TARGET_KEYS = frozenset((*FALLBACK_PROMPT_PARAMETERS, "chat_template_kwargs", *MEDIA_OVERRIDES, "extra_body"))


def prompt_parameter(body: Mapping[str, Any], more: tuple[str, ...] = ()) -> str | None:
    """The first of ``CLIENT_PARAMETERS`` (and ``more``, the shape's own) set in ``body`` or one of its fallback
    targets (``fallback_targets``), as a path; else None. (``added_prompt_parameter`` checks each attempt too.)"""
    for node, source in chain(((None, body),), _targets(body, _TARGET_KEYS.union(more))):
        names = (*CLIENT_PARAMETERS, *more) if node is None else (*FALLBACK_PROMPT_PARAMETERS, *more)
        found = next((name for name in names if _client_set(name, source, node is not None)), None) \
            or next(iter(server_overrides(source)), None)
        if found is not None:  # the path written only now
            return ("" if node is None else _path(node)) + found
    return None


def operator_prompt_parameters(kwargs: Mapping[str, Any], own: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
    """The ``PROMPT_PARAMETERS`` (and ``chat_template_kwargs``, ``MEDIA_OVERRIDES``, ``extra_body``) a router attempt
    carries with the value its deployment's own parameters set (``own``, asked only when one is there): the
    operator's, not a client's."""
    present = [name for name in (*CLIENT_PARAMETERS, "chat_template_kwargs", *MEDIA_OVERRIDES, "extra_body")
               if name in kwargs]
    configured = own() if present else {}
    return {name: kwargs[name] for name in present if name in configured and configured[name] == kwargs[name]}


def added_stored_prompt(kwargs: Mapping[str, Any], decided: Any, own: Callable[[], Mapping[str, Any]]) -> str | None:
    """``prompt_id`` when a router attempt carries one that is neither the decided request's (``decided``: a
    reference its decision estimated) nor the operator's (its deployment's): a client's, merged by the router from a
    fallback target in the router's own format or a settings override; LiteLLM fills its template in inside the
    call."""
    value = kwargs.get("prompt_id")
    if not _set(value) or value == decided or own().get("prompt_id") == value:
        return None
    return "prompt_id"


def added_prompt_parameter(kwargs: Mapping[str, Any], own: Callable[[], Mapping[str, Any]]) -> str | None:
    """The first of ``PROMPT_PARAMETERS`` set in a router attempt that is not the operator's
    (``operator_prompt_parameters``): a client's, however it got there (a fallback target in any format LiteLLM
    merges, a settings override)."""
    present = [name for name in CLIENT_PARAMETERS if _client_set(name, kwargs)]
    overrides = server_overrides(kwargs)
    if overrides:  # each one, as the operator set it on the deployment or not at all
        operator = server_overrides(own())
        changed = next((path for path, value in overrides.items() if path not in operator or operator[path] != value),
                       None)
        if changed is not None:
            return changed
    if not present:
        return None
    operator = operator_prompt_parameters(kwargs, own)
    return next((name for name in present if name not in operator), None)
