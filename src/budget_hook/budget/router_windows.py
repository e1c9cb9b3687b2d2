"""The rules for a model group's window, given its deployments as plain dicts (pure: no router, no litellm).

Contract: ``limits_of(group, deployments, infos, model_list)`` returns ``ModelLimits``: the **minimum**
window over ``deployments`` (the router's ``model_list`` entries: ``litellm_params``, ``model_info``), each
one's window taken from ``infos`` (what the router's ``get_router_model_info`` said of it, in the same
order; none offline) over ``model_info.max_input_tokens`` over the model map, corrected for the Claude
models whose 1M window needs the ``context-1m`` beta header; with no deployment, the model map for the
name; else unknown (the policy decides). ``model_list`` (the operator's, when known) names the groups
those deployments belong to (an alias's target), for the policy. ``combine`` joins the limits of a
comma-separated list of groups; ``covers`` says whether an attempt's deployment takes what fit the first
decision; ``with_learned_window`` applies a window an overflow error named.

``proxy/windows.py`` asks the router (LiteLLM's object) and passes its answers here; the offline
``budget-hook replay`` passes a config's ``model_list`` and nothing from a router.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..counting import resolve_tokenizer
from ..counting.profiles import MAX_MODEL_NAME_CHARS
from ..providers import PROVIDERS, WindowQuirks, anthropic, provider
from .compute import requested_output_tokens, thinking_output_tokens
from .windows import (
    ModelLimits,
    lookup_max_input_tokens,
    lookup_max_output_tokens,
    model_map_entry,
)

if TYPE_CHECKING:
    from ..learning import LearnedWindow

#: a comma-separated ``model`` naming more groups than this is one (unknown) name: each listed group costs
#: a router lookup, and a client writes the list (the attempts are still checked one by one)
MAX_LISTED_GROUPS = 16
#: providers LiteLLM sends a ``/completions`` list of prompts to as a batch, each prompt its own completion: the
#: text-completion endpoints (``litellm.text_completion``, then ``completion()``: ``text-completion-openai``,
#: ``azure_text``, and ``litellm.openai_text_completion_compatible_providers`` when the call is a text completion,
#: LiteLLM 1.103 and 1.108). Every other provider gets the prompts as the user messages of one chat call.
BATCHED_PROMPT_PROVIDERS = frozenset({
    "text-completion-openai", "azure_text", "apertis", "chutes", "dashscope", "featherless_ai", "fireworks_ai",
    "hosted_vllm", "hyperbolic", "lambda_ai", "llamafile", "meta_llama", "modelscope", "moonshot", "nano-gpt",
    "nebius", "poe", "publicai", "qwen_ai_platform", "qwencloud", "synthetic", "tensormesh", "together_ai", "v0",
    "wandb"})


def joins_prompts(backend: str, params: Mapping[str, Any]) -> bool:
    """Whether a deployment (its ``litellm_params.model`` and params) gets a list of prompts as one chat call. An
    ``openai/`` model the model map lists under the ``openai`` provider, in any mode (LiteLLM's
    ``open_ai_chat_completion_models``: chat, and the Responses-only models it bridges to ``/v1/responses`` with
    the prompts as input items) is one call; any other ``openai/`` name goes to the text-completion endpoint (an
    OpenAI-compatible server's own model, a fine-tune). A name with no provider is the model map's provider's."""
    provider, listed = routed_provider(backend, params)
    if provider == "openai":
        name = backend.partition("/")[2] if "/" in backend else backend
        return listed == "openai" and not name.startswith("ft:")
    return provider not in BATCHED_PROMPT_PROVIDERS


def routed_provider(backend: str, params: Mapping[str, Any]) -> tuple[str, str]:
    """The provider LiteLLM sends a deployment to (``custom_llm_provider``, else the name's prefix, else the model
    map's), and the one the model map lists for the name (``""``: none)."""
    provider, _, name = backend.partition("/") if "/" in backend else ("", "", backend)
    provider = str(params.get("custom_llm_provider") or provider)
    entry = model_map_entry(name if provider else backend, exact=True)
    listed = str(entry.get("litellm_provider") or "") if entry else ""
    return provider or listed, listed


def too_long(group: str) -> ModelLimits | None:
    """Unknown limits for a model name longer than ``MAX_MODEL_NAME_CHARS`` (no model has one; neither the
    router nor any pattern reads it: client-sent, it could cost work in proportion); None for the others."""
    if len(group) <= MAX_MODEL_NAME_CHARS:
        return None
    return ModelLimits(None, f"unknown: a model name of {len(group)} characters (over {MAX_MODEL_NAME_CHARS}) is "
                       "not looked up", "unknown")


#: the window the Claude models whose 1M window needs the ``context-1m`` beta header serve without it
#: (``windows`` of ``providers/anthropic.py``: which models, which providers need the caller to send it)
STANDARD_CLAUDE_WINDOW = anthropic.RECORD.windows.standard_window
#: the providers whose models' long window needs a header (each record's ``windows``)
_HEADER_QUIRKS: tuple[WindowQuirks, ...] = tuple(record.windows for record in PROVIDERS
                                                 if record.windows.header_dependent is not None)


def _sends_header(params: Any, quirks: WindowQuirks) -> bool:
    for key in ("extra_headers", "headers"):
        headers = params.get(key) if isinstance(params, dict) else None
        if isinstance(headers, dict):
            for name, value in headers.items():
                if str(name).lower() == quirks.header_name and quirks.header_value in str(value):
                    return True
    return False


def sends_1m_beta(params: Any) -> bool:
    """The deployment sends ``anthropic-beta: context-1m-...`` itself (``extra_headers`` or ``headers``)."""
    return _sends_header(params, anthropic.RECORD.windows)


def _needs_header(backend: str, base_model: str | None, window: int) -> WindowQuirks | None:
    """The rules under which the model's ``window`` holds only with a header the caller sends (None: it needs none)."""
    name = (base_model or backend).lower()
    for quirks in _HEADER_QUIRKS:
        if window <= quirks.standard_window or quirks.header_dependent is None or \
                not quirks.header_dependent.search(without_snapshot_suffixes(name)):
            continue
        if not name.startswith(quirks.header_providers) and "/" in name:
            continue
        return quirks
    return None


def header_dependent_window(backend: str, base_model: str | None, window: int, params: Any,
                            model_info: Any) -> tuple[int, str | None]:
    """The window the deployment really serves: 200,000 for the Claude models whose 1M window needs the
    beta header, unless the deployment sends it or the operator set ``model_info.max_input_tokens``."""
    quirks = _needs_header(backend, base_model, window)
    explicit = isinstance(model_info, dict) and isinstance(model_info.get("max_input_tokens"), int)
    if quirks is None or explicit or _sends_header(params, quirks):
        return window, None
    standard = quirks.standard_window
    return standard, (f"{backend}: {standard} without the {quirks.header_value} beta header "
                      f"(the model map says {window})")


#: backends LiteLLM's proxy hands a client's HTTP ``anthropic-beta`` to (``add_provider_specific_headers_to_request``:
#: anthropic, bedrock, bedrock_mantle, vertex_ai; a bare ``claude-`` name is Anthropic's)
HTTP_BETA_BACKENDS = ("anthropic/", "bedrock/", "bedrock_mantle/", "vertex_ai/", "claude-")


def header_replacers(backend: str, base_model: str | None, window: int, params: Any) -> tuple[int, tuple[str, ...]]:
    """The window the deployment serves when a request replaces the header it sends for its ``window``, and what in a
    request replaces it (``window`` and nothing: it sends none, or its window needs none), as LiteLLM merges them
    (1.103 and 1.108): the router gives a request's own ``extra_headers`` or ``headers`` key in place of the
    deployment's whole dict (``{**litellm_params, **kwargs}``); then the call starts from ``headers`` and updates it
    with ``extra_headers`` (so where the deployment sends it in ``headers``, a request's ``extra_headers`` beta replaces
    it too); then the client's HTTP header, for the providers the proxy hands it to (``HTTP_BETA_BACKENDS``), replaces
    what was merged."""
    quirks = _needs_header(backend, base_model, window)
    if quirks is None or not isinstance(params, Mapping):
        return window, ()
    found = [key for key in ("extra_headers", "headers") if isinstance(params.get(key), Mapping) and any(
        str(name).lower() == quirks.header_name and quirks.header_value in str(value)
        for name, value in params[key].items())]
    if not found:
        return window, ()
    if backend.lower().startswith(HTTP_BETA_BACKENDS):  # the provider LiteLLM calls, never the base model's name
        found.append("http")
    return quirks.standard_window, tuple(sorted(found))


#: entries of one place the client-header check reads one by one (a request's headers are a few dozen): past it, the
#: place is taken not to hold the long-window value (nothing hides behind a long list)
MAX_HEADER_SOURCES = 256


def _beta_of(headers: Any, name: str) -> list[str] | None:
    """The values of header ``name`` in ``headers`` (None: more entries than are read one by one)."""
    if not isinstance(headers, Mapping):
        return []
    if len(headers) > MAX_HEADER_SOURCES:
        return None
    return [str(value) for key, value in headers.items() if isinstance(key, str) and key.lower() == name]


def with_client_headers(limits: ModelLimits, body: Mapping[str, Any]) -> ModelLimits:
    """``limits`` for this request: the standard window (``beta_window``) when what it sends replaces the header a
    deployment of the group sends for its long window (``header_replacers``) and does not hold the long-window value
    itself: a key ``extra_headers`` (or ``headers``) of any value where the deployment sends its header in that dict,
    at the top or in a ``fallbacks`` entry; an ``anthropic-beta`` in ``extra_headers`` where it sends it in
    ``headers``; the HTTP request's own ``anthropic-beta`` (``provider_specific_header``, or the request's headers as
    LiteLLM records them) for a provider the proxy hands it to. A client's header replaced the deployment's: 230,005
    tokens reached a deployment the plugin held at 1M, which served 200,000. Marked ``client_beta`` whenever the request
    sends any of these: what the provider then answers is no fact about the deployment."""
    if limits.beta_window is None or limits.window is None or limits.beta_window >= limits.window:
        return limits
    quirks = anthropic.RECORD.windows
    name, rules = quirks.header_name, limits.beta_replacers

    def keeps(values: list[str] | None) -> bool:  # every value holds the long-window beta itself
        return values is not None and all(
            any(item.strip() in quirks.header_betas for item in value.split(",")) for value in values)
    sent: list[bool] = []  # for each replacement the request makes: does it keep the long window
    fallbacks = body.get("fallbacks")
    sources = [body, *(fallbacks[:MAX_HEADER_SOURCES] if isinstance(fallbacks, list) else [])]
    if isinstance(fallbacks, list) and len(fallbacks) > MAX_HEADER_SOURCES:
        sent.append(False)
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        for key in ("extra_headers", "headers"):
            if key in rules and key in source:  # the whole dict replaces the deployment's
                values = _beta_of(source[key], name)
                sent.append(bool(values) and keeps(values))
        if "headers" in rules and (values := _beta_of(source.get("extra_headers"), name)) != []:
            sent.append(keeps(values))  # ``extra_headers`` update ``headers``
    if "http" in rules:
        specific = body.get("provider_specific_header")
        entries = specific if isinstance(specific, list) else [specific]
        places = [e.get("extra_headers") for e in entries[:MAX_HEADER_SOURCES] if isinstance(e, Mapping)]
        places += [h.get("headers") for h in (body.get(k) for k in ("metadata", "litellm_metadata",
                                                                     "proxy_server_request")) if isinstance(h, Mapping)]
        for headers in places:
            if (values := _beta_of(headers, name)) != []:
                sent.append(keeps(values))
        if len(entries) > MAX_HEADER_SOURCES:
            sent.append(False)
    if not sent:
        return limits
    if all(sent):
        return replace(limits, client_beta=True)
    return replace(limits, window=limits.beta_window, client_beta=True,
                   source=f"{limits.source}; {limits.beta_window}: the request's own {name} header replaces the "
                          f"one its deployment sends for a {limits.window}-token window")


#: snapshot and version suffixes (``-20250514``, ``@20250514``, ``-v1``, ``-v2:0``, ``@default``, ``-latest``)
#: that do not change the model, in any number
_SUFFIX_WORDS = ("@default", "-latest")


def without_snapshot_suffixes(name: str) -> str:
    """``name`` without its trailing snapshot and version suffixes (and a final line break): one backward
    scan, linear in the name. A suffix ends either in one of ``_SUFFIX_WORDS`` or in a run of digits, and
    the character before that run says which suffix it is: at most one can end anywhere, so peeling them
    from the end finds what the pattern ``([-@]\\d{8}|-v\\d+(:\\d+)?|@default|-latest)+$`` matched (that
    pattern, searched from every position, took quadratic time on a client's name)."""
    end = len(name) - 1 if name.endswith("\n") else len(name)
    while end:
        word = next((w for w in _SUFFIX_WORDS if name.endswith(w, 0, end)), None)
        if word:
            end -= len(word)
            continue
        digits = _digits_before(name, end)
        if digits == end or digits == 0:
            break
        if end - digits == 8 and name[digits - 1] in "-@":
            end = digits - 1  # -20250514, @20250514
        elif digits >= 2 and name[digits - 2:digits] == "-v":
            end = digits - 2  # -v1
        elif name[digits - 1] == ":":
            major = _digits_before(name, digits - 1)
            if major == digits - 1 or major < 2 or name[major - 2:major] != "-v":
                break
            end = major - 2  # -v2:0
        else:
            break
    return name[:end]


def _digits_before(name: str, end: int) -> int:
    """Where the run of decimal digits ending at ``end`` starts."""
    start = end
    while start and name[start - 1].isdecimal():
        start -= 1
    return start


def limits_of(group: str, deployments: Sequence[Mapping[str, Any]],
              infos: Sequence[Mapping[str, Any]] | None = None,
              model_list: Any = None) -> ModelLimits:
    """Minimum window over ``deployments`` of ``group``; with none, the model map for the name; else unknown.
    ``infos[i]``: what the router knows of ``deployments[i]`` (``max_input_tokens``, ``max_output_tokens``; the
    ``shared_output`` LiteLLM reads for its model, the router's ``default_params``; ``{}`` when it knows nothing,
    no ``infos`` offline)."""
    windows: list[tuple[int, str]] = []
    notes: list[str] = []
    ids: list[str] = []
    backends: list[tuple[str, str | None]] = []
    filled: list[int] = []
    betas: list[int] = []  # each deployment's window when the request replaces the beta header it sends
    replaced_by: set[str] = set()
    joined = thinking_filled = False
    for position, deployment in enumerate(deployments):
        params = deployment.get("litellm_params") or {}
        model_info = deployment.get("model_info") or {}
        backend = str(params.get("model") or group)
        joined = joined or joins_prompts(backend, params if isinstance(params, Mapping) else {})
        base_model = model_info.get("base_model") or params.get("base_model")
        backends.append((backend, base_model))
        info = (infos[position] if infos is not None and position < len(infos) else None) or {}
        window = info.get("max_input_tokens") or None
        quirks = _fills_max_tokens(backend, base_model)
        thinks = quirks is not None or fills_thinking_output(backend, params if isinstance(params, Mapping) else None)
        thinking_filled = thinking_filled or thinks
        # what the deployment sends when the request sets none (the router's defaults under its own parameters, merged
        # into the call): an allowance of its own, whatever the provider; a thinking budget, the budget and 4,096
        sent = {**(info.get("default_params") or {}), **params} if isinstance(params, Mapping) else {}
        own = max(requested_output_tokens(sent, lenient=True) or 0,
                  thinking_output_tokens(sent) or 0 if thinks else 0)
        if quirks is not None:
            # LiteLLM reads Claude's from its live model map, where every deployment of the model shares one entry
            # (the last registered writes it: a deployment's 2,000 reserved, another's 64,000 sent; ``shared_output``)
            known = max(_positive(info.get("max_output_tokens") or info.get("max_tokens")),
                        _positive(info.get("shared_output")))
            filled.append(max(own, known or _filled_output(base_model or backend, quirks)))
        elif own:
            filled.append(own)
        if not window and isinstance(model_info.get("max_input_tokens"), int):
            window = model_info["max_input_tokens"]
        if not window:
            window = lookup_max_input_tokens(base_model or backend)
        if isinstance(window, int) and window > 0:
            window, note = header_dependent_window(backend, base_model, window, params, model_info)
            if note:
                notes.append(note)
            windows.append((window, backend))
            beta, replacers = header_replacers(backend, base_model, window, params)
            betas.append(beta)
            replaced_by.update(replacers)
        if isinstance(model_info.get("id"), str):
            ids.append(model_info["id"])
    if not deployments:
        joined = joins_prompts(group, {})
        window = lookup_max_input_tokens(group)
        group_quirks = _fills_max_tokens(group, None)
        output = _filled_output(group, group_quirks) if group_quirks is not None else None
        thinks = group_quirks is not None or fills_thinking_output(group)
        if window:
            window, note = header_dependent_window(group, None, window, {}, {})
            source = f"model map: {group}" + (f"; {note}" if note else "")
            return ModelLimits(window, source, group, filled_output_tokens=output, joins_prompts=joined,
                               fills_thinking_output=thinks)
        return ModelLimits(None, "unknown", group, filled_output_tokens=output, joins_prompts=joined,
                           fills_thinking_output=thinks)
    counting_model, base_model = _most_conservative(backends)
    routed = routed_groups(group, deployments, model_list)
    output_filled = max(filled) if filled else None
    if len(windows) < len(deployments):
        # One deployment with an unknown window could be the smallest: treat the group as unknown.
        return ModelLimits(None, f"unknown for {len(deployments) - len(windows)} of {len(deployments)} deployments",
                           counting_model, base_model, len(deployments), routed, output_filled, tuple(ids), joined,
                           fills_thinking_output=thinking_filled)
    window, _ = min(windows)
    source = f"router: min over {len(deployments)} deployment(s)" + "".join(f"; {note}" for note in notes[:2])
    beta = min(betas)
    return ModelLimits(window, source, counting_model, base_model, len(deployments), routed, output_filled,
                       tuple(ids), joined, beta_window=beta if beta < window else None,
                       beta_replacers=tuple(sorted(replaced_by)) if beta < window else (),
                       fills_thinking_output=thinking_filled)


def routed_groups(group: str, deployments: Sequence[Mapping[str, Any]], model_list: Any) -> tuple[str, ...]:
    """The groups ``deployments`` belong to in the operator's ``model_list``, other than ``group``. The router
    lists an alias's (and a routing group's) deployments under the name asked for, so their own group is
    found by deployment id: the operator's policy for that group follows them whatever name was used."""
    names = {str(d.get("model_name")) for d in deployments if d.get("model_name")}
    ids = {(d.get("model_info") or {}).get("id") for d in deployments} - {None}
    for entry in model_list if isinstance(model_list, list) and ids else ():
        info = entry.get("model_info") if isinstance(entry, dict) else None
        if isinstance(info, dict) and info.get("id") in ids and isinstance(entry.get("model_name"), str):
            names.add(entry["model_name"])
    return tuple(sorted(names - {group}))


def _positive(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _fills_max_tokens(backend: str, base_model: str | None) -> WindowQuirks | None:
    """The quirks of the model's provider when LiteLLM fills in its ``max_tokens`` (Claude), else None."""
    record = provider(resolve_tokenizer(backend, base_model=base_model).family)
    return record.windows if record is not None and record.windows.fills_max_tokens else None


#: providers whose LiteLLM configuration fills ``max_tokens`` with a thinking budget and 4,096 when the request
#: asks for thinking and sets none, whatever the model (``update_optional_params_with_thinking_tokens``: Anthropic's,
#: Bedrock Converse's but for gpt-oss and Nova 2, Databricks'): an attack review of 2026-12-07 sent 34,096 on top of
#: 27,821 input tokens into a 40,000-token window through a Bedrock inference profile's ARN, 4,096 reserved
THINKING_FILLERS = frozenset({"anthropic", "bedrock", "bedrock_converse", "databricks"})


def fills_thinking_output(backend: str, params: Mapping[str, Any] | None = None) -> bool:
    """Whether LiteLLM fills in an allowance for a thinking request to this deployment (``THINKING_FILLERS``), its
    provider found as LiteLLM finds it: ``custom_llm_provider``, the prefix, else the model map's; gpt-oss and Nova 2
    excepted as LiteLLM's Converse excepts them (a review of the fix: an ARN under ``custom_llm_provider``, a Qwen
    named without a prefix and Nova 2's ``global.`` profile were filled and not reserved)."""
    if routed_provider(backend, params or {})[0].strip().lower() not in THINKING_FILLERS:
        return False
    model = backend.strip().lower()
    for prefix in ("bedrock/converse/", "bedrock/", "converse/"):  # AmazonConverseConfig._is_nova_2_model
        if model.startswith(prefix):
            model = model[len(prefix):]
            break
    for region in ("us.", "eu.", "apac."):
        if model.startswith(region):
            model = model[len(region):]
            break
    return "gpt-oss" not in model and not model.startswith("amazon.nova-2-")


def _filled_output(model: str, quirks: WindowQuirks) -> int:
    """What LiteLLM fills in as ``max_tokens`` for such a model (its maximum output, else the provider's
    default: 4,096 for Claude)."""
    return lookup_max_output_tokens(model) or quirks.default_max_tokens


def _most_conservative(backends: list[tuple[str, str | None]]) -> tuple[str, str | None]:
    """A group may mix families; count with the one whose estimate runs highest (exact counts lowest)."""
    def weight(item: tuple[str, str | None]) -> float:
        profile = resolve_tokenizer(item[0], base_model=item[1])
        return 0.0 if profile.exact else profile.safety_factor
    return max(backends, key=weight)


def covers(attempt: ModelLimits, first: ModelLimits) -> bool:
    """The attempt's deployment takes whatever fit the first decision: at least its window, counted alike,
    no larger output filled in, a list of prompts joined only if the first decision joined it."""
    return (attempt.window is not None and first.window is not None and attempt.window >= first.window
            and (attempt.counting_model, attempt.base_model) == (first.counting_model, first.base_model)
            and (attempt.filled_output_tokens or 0) <= (first.filled_output_tokens or 0)
            and (first.fills_thinking_output or not attempt.fills_thinking_output)
            and (first.joins_prompts or not attempt.joins_prompts))


def with_learned_window(limits: ModelLimits, learned: LearnedWindow | None) -> ModelLimits:
    """The limits with a window a provider's overflow error named, when it is smaller (and said so)."""
    if learned is None or (limits.window is not None and learned.window >= limits.window):
        return limits
    return replace(limits, window=learned.window, source=f"{limits.source}; {learned.describe()}")


def listed_groups(group: str) -> list[str]:
    """The groups of a comma-separated ``model`` (LiteLLM's batch completion: one call per listed group); a
    list of more than ``MAX_LISTED_GROUPS`` is one name (unknown: no group has one)."""
    if "," not in group:
        return [group]
    pieces = group.split(",", MAX_LISTED_GROUPS)
    names = [name.strip() for name in pieces if name.strip()] if len(pieces) <= MAX_LISTED_GROUPS else []
    return names or [group]


def combine(group: str, parts: list[ModelLimits]) -> ModelLimits:
    """One request sent to several groups must fit the smallest of them, counted the most conservative way."""
    if len(parts) == 1:
        return parts[0]
    names = listed_groups(group)
    counting_model, base_model = _most_conservative([(p.counting_model, p.base_model) for p in parts])
    filled = [p.filled_output_tokens for p in parts if p.filled_output_tokens is not None]
    routed = tuple(sorted({*names, *(g for p in parts for g in p.routed_groups)}))
    deployments = sum(p.deployments for p in parts)
    unknown = [name for name, p in zip(names, parts, strict=True) if p.window is None]
    ids = tuple(dict.fromkeys(i for p in parts for i in p.deployment_ids))
    joined = any(p.joins_prompts for p in parts)
    thinks = any(p.fills_thinking_output for p in parts)
    if unknown:
        return ModelLimits(None, f"unknown for the listed group(s) {', '.join(unknown)}", counting_model, base_model,
                           deployments, routed, max(filled, default=None), ids, joined, fills_thinking_output=thinks)
    window = min(p.window for p in parts if p.window is not None)
    beta = min((p.beta_window or p.window) for p in parts if p.window is not None)  # a client's header, in each
    replaced_by = tuple(sorted({r for p in parts for r in p.beta_replacers}))
    return ModelLimits(window, f"min over the listed groups {', '.join(names)}", counting_model, base_model,
                       deployments, routed, max(filled, default=None), ids, joined,
                       beta_window=beta if beta < window else None, beta_replacers=replaced_by if beta < window else (),
                       fills_thinking_output=thinks)
