"""``budget-hook``: dry-run the counter and the trimmer on a captured request (JSON in, JSON out).

    budget-hook count --model MODEL [FILE|-]
    budget-hook trim  --model MODEL [--max-input-tokens N] [--max-tokens N] [FILE|-]
    budget-hook check-config litellm_config.yaml

Exit codes: 0 success; 1 malformed input, invalid settings or usage error (message on stderr says which message, which
field); 2 the request cannot fit (the error as JSON on stdout, a one-line explanation on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from .budget import BudgetPolicy, compute_budget, requested_output_tokens
from .counting import TokenCounter
from .errors import BudgetHookError, ContextBudgetError, MalformedRequestError, PolicyError
from .model_limits import lookup_max_input_tokens
from .settings import load_settings
from .trimming import TrimPolicy, trim_request


def _read_body(path: str) -> Any:
    try:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
    except OSError as exc:
        raise MalformedRequestError(path, f"cannot read: {exc.strerror or exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedRequestError("request", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _print(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def _count(args: argparse.Namespace) -> int:
    body = _read_body(args.file)
    counter = TokenCounter.for_model(args.model, base_model=args.base_model)
    result = counter.count_request(body)
    _print({"model": args.model, "encoding": result.encoding, "method": result.method, "tokens": result.total,
            "per_message": list(result.per_message), "tools_tokens": result.tools_tokens,
            "overhead_tokens": result.overhead_tokens})
    return 0


def _trim(args: argparse.Namespace) -> int:
    body = _read_body(args.file)
    counter = TokenCounter.for_model(args.model, base_model=args.base_model)
    window = args.max_input_tokens or lookup_max_input_tokens(args.base_model or args.model)
    if window is None:
        raise MalformedRequestError("--model", f"no context window known for {args.model!r}; pass --max-input-tokens")
    if not isinstance(body, dict):
        raise MalformedRequestError("request", "expected a JSON object")
    reserve = args.max_tokens if args.max_tokens is not None else requested_output_tokens(body)
    budget = compute_budget(window, requested_output_tokens=reserve, policy=BudgetPolicy())
    policy = TrimPolicy(pin_first_user_message=args.pin_first_user_message)
    result = trim_request(body, counter=counter, budget=budget, policy=policy)
    _print({"request": result.request, "report": result.report.as_dict()})
    return 0


ENABLE_LINE = "budget_hook.proxy.plugin"


def _check_config(args: argparse.Namespace) -> int:
    """Validate a LiteLLM config's budget_hook settings exactly as the proxy will at start-up."""
    import yaml

    try:
        with open(args.file, encoding="utf-8") as handle:
            config = yaml.safe_load(handle) or {}
    except OSError as exc:
        raise MalformedRequestError(args.file, f"cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise PolicyError(f"{args.file}: not valid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise PolicyError(f"{args.file}: expected a mapping at the top level")
    settings = load_settings((config.get("callback_settings") or {}).get("budget_hook"))
    callbacks = (config.get("litellm_settings") or {}).get("callbacks") or []
    callbacks = [callbacks] if isinstance(callbacks, str) else list(callbacks)
    layers = settings.layers
    _print({
        "enabled": ENABLE_LINE in callbacks,
        "policy": layers.resolve(model_group="").policy.as_dict(),
        "overrides": {section: sorted(getattr(layers, section)) for section in ("models", "teams", "keys")},
    })
    if ENABLE_LINE not in callbacks:
        print(f"budget-hook: settings are valid, but litellm_settings.callbacks does not list {ENABLE_LINE}: "
              f"the plugin is not enabled", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="budget-hook", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("count", "count the tokens of a chat request"), ("trim", "fit a chat request to its budget")):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--model", required=True, help="model name as the gateway routes it (gpt-4o, anthropic/claude-...)")
        sub.add_argument("--base-model", help="the underlying model of a deployment name (azure/my-deployment)")
        sub.add_argument("file", nargs="?", default="-", help="request body JSON file, or - for stdin (default)")
        if name == "trim":
            sub.add_argument("--max-input-tokens", type=int, help="the model's input window (default: litellm's model map)")
            sub.add_argument("--max-tokens", type=int, help="output reserve (default: the request's max_tokens, else policy)")
            sub.add_argument("--pin-first-user-message", action="store_true", help="never drop the first user message")
    check = commands.add_parser("check-config", help="validate the budget_hook settings of a LiteLLM config file")
    check.add_argument("file", help="litellm_config.yaml")
    args = parser.parse_args(argv)
    try:
        if args.command == "check-config":
            return _check_config(args)
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
