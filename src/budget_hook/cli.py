"""``budget-hook``: dry-run the counter and the trimmer on a captured request body of any shape.

    budget-hook count [--format F] --model MODEL [--streamed] [FILE|-]
    budget-hook trim  [--format F] --model MODEL [--window N] [--context-1m] [--max-input-tokens N] [--max-tokens N]
                      [FILE|-]
    budget-hook check-config litellm_config.yaml
    budget-hook replay --config litellm_config.yaml [--set KEY=VALUE ...] [--json] [--plot F.svg] traffic.jsonl
    budget-hook learned [--config litellm_config.yaml] [--redis URL] [--deployment ID] [--reset]

``--format`` is one of the registered request shapes (chat, anthropic, responses, gemini, completions,
embeddings); without it the shape is detected from the body. The proxy finds shapes through the same
registry, so a dry run counts and trims exactly as the proxy would.

Exit codes: 0 success; 1 malformed input, invalid settings or usage error (the message on stderr says
which file, which field); 2 the request cannot fit (the error as JSON on stdout, one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from .budget import Budget, BudgetPolicy, compute_budget, lookup_max_input_tokens, requested_output_tokens
from .counting import TokenCounter
from .errors import BudgetHookError, ContextBudgetError, MalformedRequestError, PolicyError
from .pipeline.bounds import body_problem
from .policy import load_settings
from .shapes import SHAPES, ConversationShape, InputsShape, Shape
from .shapes.inputs import check_inputs
from .trimming import TrimPolicy

ENABLE_LINE = "budget_hook.proxy.plugin"


class UsageError(BudgetHookError):
    """The command line itself is wrong (exit 1, like any other input error)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2, which means "cannot fit" here
        self.print_usage(sys.stderr)
        raise UsageError(message)


def _source_name(path: str) -> str:
    return "stdin" if path == "-" else path


def _read_body(path: str) -> Any:
    name = _source_name(path)
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedRequestError(name, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise MalformedRequestError(name, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedRequestError(name, f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if not isinstance(body, dict):
        raise MalformedRequestError(name, f"expected a JSON object (a request body), got {type(body).__name__}")
    return body


def _shape(args: argparse.Namespace, body: Mapping[str, Any]) -> Shape:
    shape = SHAPES.get(args.format) if args.format else SHAPES.detect(body)
    if shape is None:
        raise UsageError(f"cannot tell the request format of {_source_name(args.file)}; pass --format "
                         f"({'|'.join(SHAPES.names())})")
    problem = body_problem(body, shape.content_fields + shape.output_token_fields,
                           prompt_fields=shape.prompt_fields)
    if problem is not None:
        raise problem
    return shape


def _print(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def _read_streamed(args: argparse.Namespace) -> dict[str, Any]:
    """The body as the proxy sees it: ``--streamed`` marks it as sent on a streaming route (LiteLLM sets
    ``stream`` for Gemini's streamGenerateContent, whose replayed thought signatures Gemini 2.x bills)."""
    body = _read_body(args.file)
    return {**body, "stream": True} if args.streamed else body


def _count(args: argparse.Namespace) -> int:
    body = _read_streamed(args)
    shape = _shape(args, body)
    counter = TokenCounter.for_model(args.model, base_model=args.base_model)
    out: dict[str, Any] = {"model": args.model, "format": shape.name, "encoding": counter.profile.encoding_name,
                           "method": counter.profile.method}
    if isinstance(shape, InputsShape):
        from .shapes.inputs import count_inputs

        per_input = count_inputs(body.get(shape.field), field=shape.field, counter=counter)
        out.update(tokens=sum(per_input), per_input=per_input)
    else:
        assert isinstance(shape, ConversationShape)
        result = counter.count_request(shape.view(body).request)
        out.update(tokens=result.total, per_message=list(result.per_message), tools_tokens=result.tools_tokens,
                   overhead_tokens=result.overhead_tokens)
    _print(out)
    return 0


def _window(args: argparse.Namespace) -> int:
    """The input window the proxy would use for this model: ``--window``, else LiteLLM's model map, with the
    proxy's correction for the Claude models whose 1M window needs Anthropic's ``context-1m`` beta header
    (200,000 without it; ``--context-1m`` when the deployment sends the header)."""
    if args.window is not None:
        return int(args.window)
    name = args.base_model or args.model
    window = lookup_max_input_tokens(name)
    if window is None:
        raise UsageError(f"--model: no context window known for {args.model!r}; pass --window")
    from .budget.router_windows import header_dependent_window

    beta = {"extra_headers": {"anthropic-beta": "context-1m-2025-08-07"}} if args.context_1m else {}
    backend = f"anthropic/{args.model}" if args.model.startswith("claude") else args.model  # LiteLLM's own default
    window, _ = header_dependent_window(backend, args.base_model, window, beta, None)
    return int(window)


def _trim(args: argparse.Namespace) -> int:
    body = _read_streamed(args)
    shape = _shape(args, body)
    counter = TokenCounter.for_model(args.model, base_model=args.base_model)
    for flag, value, least in (("--window", args.window, 1), ("--max-input-tokens", args.max_input_tokens, 1),
                               ("--max-tokens", args.max_tokens, 0)):
        if value is not None and value < least:
            raise UsageError(f"{flag} must be {'positive' if least else 'non-negative'} (a number of tokens), "
                             f"got {value}")
    window = _window(args)
    if isinstance(shape, InputsShape):
        return _check_inputs(shape, body, counter, window, args)
    assert isinstance(shape, ConversationShape)
    budget = _budget(args, body, shape, window)
    policy = TrimPolicy(pin_first_user_message=args.pin_first_user_message)
    result = shape.trim(body, counter=counter, budget=budget, policy=policy)
    _print({"format": shape.name, "request": result.request, "report": result.report.as_dict()})
    return 0


def _budget(args: argparse.Namespace, body: Mapping[str, Any], shape: Shape, window: int) -> Budget:
    reserve = args.max_tokens
    if reserve is None:
        reserve = requested_output_tokens(body, shape.output_token_fields)
    # --max-input-tokens is the setting of the same name: a cap below the window
    return compute_budget(window, requested_output_tokens=reserve,
                          policy=BudgetPolicy(max_input_tokens=args.max_input_tokens))


def _check_inputs(shape: InputsShape, body: Mapping[str, Any], counter: TokenCounter, window: int,
                  args: argparse.Namespace) -> int:
    if shape.reserves_output:
        budget = _budget(args, body, shape, window)
        limit, terms = budget.budget, budget.as_dict()
    else:
        cap = args.max_input_tokens
        limit = min(window, cap) if cap is not None else window
        terms = {"window": window, "output_reserve": 0, "safety_margin": 0, "cap": cap, "budget": limit}
    result = check_inputs(body.get(shape.field), field=shape.field, counter=counter, limit=limit)
    over = [{"index": o.index, "tokens": o.tokens, "over_by": o.over_by} for o in result.over]
    report = {"format": shape.name, "field": shape.field, "limit": limit, "tokens": list(result.tokens),
              "budget": terms, "over": over}
    if result.over:
        raise ContextBudgetError(f"{args.model}: {result.describe_over()}. Nothing was truncated.", report)
    _print({"format": shape.name, "request": body, "report": report})
    return 0


def _load_config(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise MalformedRequestError(path, f"cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise PolicyError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise PolicyError(f"{path}: expected a mapping at the top level")
    return config


def _replay(args: argparse.Namespace) -> int:
    """Decide captured traffic as the proxy would; with ``--set``, next to what a policy change would do."""
    import yaml

    from . import replay

    config = _load_config(args.config)
    overrides: dict[str, Any] = {}
    for assignment in args.set or []:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {assignment!r}: expected KEY=VALUE (a budget_hook setting)")
        overrides[key.strip()] = yaml.safe_load(value)
    try:
        items = replay.load_items(args.file)
    except OSError as exc:
        raise MalformedRequestError(args.file, f"cannot read: {exc.strerror or exc}") from exc
    runs = {"current policy": replay.replay(items, config)}
    if overrides:
        runs[f"with {', '.join(f'{k}={v}' for k, v in overrides.items())}"] = replay.replay(items, config, overrides)
    if args.plot:
        from .plot import svg

        Path(args.plot).write_text(svg(runs), encoding="utf-8")
    if args.json:
        _print({name: {"requests": [{k: v for k, v in row.items() if k != "history"} for row in rows],
                       "summary": replay.summarise(rows)} for name, rows in runs.items()})
        return 0
    for name, rows in runs.items():
        print(f"== {name}")
        for row in rows:
            detail = row.get("problem") or f"{row.get('tokens_before')} -> {row.get('tokens_after')} tokens" + (
                f" (~{row['restored_chars']} characters the spend log cut, counted as filler)"
                if row.get("restored_chars") else "")
            print(f"line {row['line']}: {row['model_group']} team={row['team'] or '-'} {row['action']}: {detail}")
        print()
        print(replay.table(replay.summarise(rows)))
        print()
    return 0


def _check_config(args: argparse.Namespace) -> int:
    """Validate a LiteLLM config's budget_hook settings exactly as the proxy will at start-up."""
    config = _load_config(args.file)
    settings = load_settings((config.get("callback_settings") or {}).get("budget_hook"))
    callbacks = (config.get("litellm_settings") or {}).get("callbacks") or []
    callbacks = [callbacks] if isinstance(callbacks, str) else list(callbacks)
    layers = settings.layers
    _print({
        "enabled": ENABLE_LINE in callbacks,
        "policy": layers.resolve(model_group="").policy.as_dict(),
        "overrides": {section: sorted(getattr(layers, section)) for section in ("models", "teams", "keys")},
        # what learning may change, and within which bounds (``budget-hook learned`` shows what it did)
        "learning": dataclasses.asdict(settings.learning),
    })
    if ENABLE_LINE not in callbacks:
        print(f"budget-hook: settings are valid, but litellm_settings.callbacks does not list {ENABLE_LINE}: "
              f"the plugin is not enabled", file=sys.stderr)
    return 0


def _learned(args: argparse.Namespace) -> int:
    """Show (or ``--reset``) what the proxies learned from providers, in the Redis they share it through."""
    import os

    from . import learned

    config = _load_config(args.config) if args.config else None
    settings = load_settings(((config or {}).get("callback_settings") or {}).get("budget_hook")).learning
    url = learned.redis_url(config, args.redis, dict(os.environ))
    if url is None:
        raise UsageError("no Redis to read: pass --redis redis://HOST:PORT (or --config with LiteLLM's Redis). "
                         "Without Redis, learning is per proxy process: a restart resets it, and each record's "
                         "x-budget-count-method and the budget_hook_learned_factor metric show it")
    import redis

    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        if args.reset:
            deleted = learned.reset(client, args.deployment)
            _print({"reset": True, "deployment": args.deployment, "keys_deleted": deleted})
            return 0
        rows = learned.state(client, settings)
    except redis.RedisError as exc:
        raise UsageError(f"cannot read Redis at {url.rpartition('@')[2]}: {exc}") from exc
    bounds = {name: getattr(settings, name) for name in ("min_factor", "max_factor", "min_samples", "min_window_tokens",
                                                         "min_window_ratio", "window_ttl_seconds")}
    _print({"enabled": settings.enabled, "bounds": bounds,
            "deployments": [r for r in rows if args.deployment in (None, r["deployment"])]})
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="budget-hook", description=(__doc__ or "").split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_text in (("count", "count the input tokens of a request body"),
                            ("trim", "fit a request body to its budget, as the proxy would")):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--format", choices=SHAPES.names(),
                         help="the request shape (default: detected from the body)")
        sub.add_argument("--model", required=True,
                         help="model name as the gateway routes it (gpt-4o, anthropic/claude-...)")
        sub.add_argument("--base-model", help="the underlying model of a deployment name (azure/my-deployment)")
        sub.add_argument("file", nargs="?", default="-", help="request body JSON file, or - for stdin (default)")
        sub.add_argument("--streamed", action="store_true", help="the body was sent on a streaming route "
                         "(Gemini's streamGenerateContent: Gemini 2.x bills replayed thought signatures only there)")
        if name == "trim":
            sub.add_argument("--window", type=int, help="the model's input window (default: LiteLLM's model map, "
                             "as the proxy reads it: 200,000 for Claude models whose 1M needs a beta header)")
            sub.add_argument("--context-1m", action="store_true", help="the deployment sends Anthropic's "
                             "context-1m beta header (the 1M window of the Claude models that need it)")
            sub.add_argument("--max-input-tokens", type=int,
                             help="the setting of that name: a hard input cap below the window (default: none)")
            sub.add_argument("--max-tokens", type=int,
                             help="output reserve (default: the request's max_tokens, else policy)")
            sub.add_argument("--pin-first-user-message", action="store_true", help="never drop the first user message")
    check = commands.add_parser("check-config", help="validate the budget_hook settings of a LiteLLM config file")
    check.add_argument("file", help="litellm_config.yaml")
    learned_cmd = commands.add_parser("learned", help="show, or reset, the corrections and windows the proxies "
                                      "learned from providers (in their shared Redis)")
    learned_cmd.add_argument("--config", help="the LiteLLM config: its learning settings, and its Redis")
    learned_cmd.add_argument("--redis", metavar="URL", help="redis://HOST:PORT (default: the config's, else "
                             "REDIS_URL or REDIS_HOST/REDIS_PORT)")
    learned_cmd.add_argument("--deployment", metavar="ID", help="only this deployment (model_info.id)")
    learned_cmd.add_argument("--reset", action="store_true", help="delete what was learned (all, or --deployment)")
    replay = commands.add_parser("replay", help="decide captured traffic as the proxy would, and summarise it")
    replay.add_argument("--config", required=True, help="the LiteLLM config (its budget_hook settings and windows)")
    replay.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a budget_hook setting to compare with (repeatable): max_input_tokens=30000")
    replay.add_argument("--json", action="store_true", help="every decision and the summaries as JSON")
    replay.add_argument("--plot", metavar="FILE.svg", help="also draw each group's requests: tokens before, "
                        "forwarded per policy, the budget, the blocks")
    replay.add_argument("file", help="a capture (JSONL: {model, route, team, body} or a bare body a line) or "
                        "LiteLLM's spend-log export (JSON, JSONL or CSV rows of LiteLLM_SpendLogs)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command == "check-config":
            return _check_config(args)
        if args.command == "replay":
            return _replay(args)
        if args.command == "learned":
            return _learned(args)
        return _count(args) if args.command == "count" else _trim(args)
    except ContextBudgetError as exc:
        _print({"error": {"type": "invalid_request_error", "code": exc.code, "message": str(exc), "facts": exc.facts}})
        print(f"budget-hook: {exc}", file=sys.stderr)
        return 2
    except BudgetHookError as exc:
        print(f"budget-hook: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
