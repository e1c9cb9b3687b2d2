"""A small mutation pass over the pure core: does some unit test fail when the code is wrong?

    python bench/mutate.py                       # every module below, every mutant
    python bench/mutate.py --list                # count the mutants per module and operator, run nothing
    python bench/mutate.py --module budget/compute.py --only 12,40
    python bench/mutate.py --survivors out.json  # also write the survivors (module, line, operator, code)
    python bench/mutate.py --skip-test tests/test_mutants.py   # what survives without the tests that close them
    python bench/mutate.py --retry out.json      # only the mutants a --survivors file lists

Operators (one mutation at a time, found on the module's syntax tree, so no comment or string is touched):

* ``cmp``: ``<`` <-> ``<=``, ``>`` <-> ``>=`` (a boundary moved by one);
* ``off_by_one``: an integer literal ``n`` becomes ``n + 1`` (``0`` becomes ``1``; booleans, the ``0``/``1``
  of a slice, subscript or ``range`` start and docstrings are left alone), and ``+``/``-`` swap where one
  side is the literal ``1``;
* ``bool``: ``and`` <-> ``or``;
* ``not``: a ``not x`` loses its ``not``;
* ``order``: the first two elements of a list or tuple literal of at least two elements swap (what an
  ordered declaration, a ladder of rungs or a precedence list must not survive); not where order means
  nothing (``isinstance`` types, the right side of ``in``, ``startswith`` prefixes, ``except``, ``__all__``).

The tree is never touched: ``src/`` and ``tests/`` are copied to ``--work`` (``/tmp/mut``), the mutated
module is written there (``ast.unparse``: formatting and comments differ, behaviour is the mutant's), and the
module's unit tests (``TESTS``, never e2e) run against the copy in a forked child of a process that has
already imported the heavy third-party libraries (pytest, hypothesis, pydantic, tiktoken's encodings), with
``CI=1`` (the derandomized hypothesis profile: a survivor is reproducible). A test that already fails before
any mutation (another change in progress in the tree) is deselected, and said so. A mutant is *killed* when the
tests fail or time out (``--timeout`` seconds), *survives* when they pass. ``trimming/state.py`` and
``trimming/ladder.py`` are not mutated here.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: module (under src/budget_hook) -> the unit tests that must notice it changing, fastest first
TESTS: dict[str, list[str]] = {
    "budget/compute.py": ["tests/test_mutants.py", "tests/test_budget.py", "tests/test_decision.py",
                          "tests/test_layout.py", "tests/test_policy.py"],
    "policy/layers.py": ["tests/test_mutants.py", "tests/test_policy.py", "tests/test_decision.py",
                         "tests/test_layout.py"],
    "trimming/structure.py": ["tests/test_mutants.py", "tests/test_trimming.py", "tests/test_anthropic_trim.py",
                              "tests/test_agent_trimming.py"],
    "trimming/report.py": ["tests/test_mutants.py", "tests/test_decision.py", "tests/test_trimming.py",
                           "tests/test_anthropic_trim.py", "tests/test_agent_trimming.py"],
}


@dataclass(frozen=True)
class Mutant:
    module: str
    number: int
    operator: str
    line: int
    description: str


_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _skipped_ints(tree: ast.AST) -> set[int]:
    """Integer literals an off-by-one would only make noise with: slice bounds, subscripts, range starts."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            for sub in ast.walk(node.slice):
                if isinstance(sub, ast.Constant):
                    ids.add(id(sub))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("range", "enumerate") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            ids.add(id(node.args[1]))
    return ids


def _unordered(tree: ast.AST) -> set[int]:
    """Tuples and lists whose order means nothing: the types of ``isinstance``/``except``, the right side of
    ``in``, the prefixes of ``startswith``/``endswith``, ``__all__`` (an order mutant there is equivalent)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass") \
                and len(node.args) == 2:
            ids.add(id(node.args[1]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "startswith", "endswith") and node.args:
            ids.add(id(node.args[0]))
        elif isinstance(node, ast.Compare):
            ids.update(id(c) for op, c in zip(node.ops, node.comparators, strict=True) if isinstance(op, (ast.In, ast.NotIn)))
        elif isinstance(node, ast.ExceptHandler) and node.type is not None:
            ids.add(id(node.type))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            ids.add(id(node.value))
    return ids


def _annotations(tree: ast.AST) -> set[int]:
    """Every node inside an annotation (never evaluated: ``from __future__ import annotations``)."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
    return {id(sub) for root in roots for sub in ast.walk(root)}


def _sites(tree: ast.AST) -> Iterator[tuple[str, ast.AST, int, str]]:
    """(operator, node, variant, description) of every mutation site, in a stable order."""
    skipped = _docstring_nodes(tree) | _skipped_ints(tree) | _unordered(tree) | _annotations(tree)
    for node in ast.walk(tree):
        if id(node) in skipped and not isinstance(node, ast.Constant):
            continue
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                if type(op) in _CMP:
                    yield "cmp", node, index, f"{type(op).__name__} -> {_CMP[type(op)].__name__}"
        elif isinstance(node, ast.BoolOp):
            yield "bool", node, 0, f"{type(node.op).__name__} -> {'Or' if isinstance(node.op, ast.And) else 'And'}"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield "not", node, 0, "drop not"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and any(
                isinstance(side, ast.Constant) and side.value == 1 and type(side.value) is int
                for side in (node.left, node.right)):
            yield "off_by_one", node, 0, f"{type(node.op).__name__} 1 -> {'Sub' if isinstance(node.op, ast.Add) else 'Add'} 1"
        elif isinstance(node, ast.Constant) and type(node.value) is int and id(node) not in skipped:
            yield "off_by_one", node, 0, f"{node.value} -> {node.value + 1}"
        elif isinstance(node, (ast.List, ast.Tuple)) and len(node.elts) >= 2 and not any(
                isinstance(e, ast.Starred) for e in node.elts[:2]) and isinstance(getattr(node, "ctx", None), ast.Load) \
                and id(node) not in skipped and ast.dump(node.elts[0]) != ast.dump(node.elts[1]):
            yield "order", node, 0, "swap the first two elements"


def _parents(tree: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
    found: dict[int, tuple[ast.AST, str, int | None]] = {}
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for index, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        found[id(child)] = (parent, name, index)
            elif isinstance(value, ast.AST):
                found[id(value)] = (parent, name, None)
    return found


def _replace(parents: dict[int, tuple[ast.AST, str, int | None]], node: ast.AST, new: ast.AST) -> None:
    parent, name, index = parents[id(node)]
    if index is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[index] = new


def mutants(module: str, root: Path = ROOT) -> list[tuple[Mutant, str]]:
    """Every mutant of ``module`` (under ``root``/src/budget_hook) with the mutated source."""
    source = (root / "src" / "budget_hook" / module).read_text(encoding="utf-8")
    count = len(list(_sites(ast.parse(source))))
    out = []
    for number in range(count):
        tree = ast.parse(source)
        operator, node, variant, description = list(_sites(tree))[number]
        parents = _parents(tree)
        if operator == "cmp":
            assert isinstance(node, ast.Compare)
            node.ops[variant] = _CMP[type(node.ops[variant])]()
        elif operator == "bool":
            assert isinstance(node, ast.BoolOp)
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif operator == "not":
            assert isinstance(node, ast.UnaryOp)
            _replace(parents, node, node.operand)
        elif operator == "off_by_one" and isinstance(node, ast.BinOp):
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        elif operator == "off_by_one":
            assert isinstance(node, ast.Constant) and isinstance(node.value, int)
            _replace(parents, node, ast.Constant(node.value + 1))
        elif operator == "order":
            assert isinstance(node, (ast.List, ast.Tuple))
            node.elts[0], node.elts[1] = node.elts[1], node.elts[0]
        mutated = ast.unparse(ast.fix_missing_locations(tree))
        out.append((Mutant(module, number, operator, getattr(node, "lineno", 0), description), mutated))
    return out


def _prepare(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for part in ("src", "tests"):
        shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "e2e"))
    for name in ("pyproject.toml",):
        shutil.copy(ROOT / name, work / name)


def _preload() -> None:
    """Import what every child would import anyway, once, before forking."""
    import contextlib

    import hypothesis  # noqa: F401
    import pydantic  # noqa: F401
    import pytest  # noqa: F401
    import tiktoken
    import yaml  # noqa: F401

    for name in ("o200k_base", "cl100k_base"):
        with contextlib.suppress(Exception):
            tiktoken.get_encoding(name)
    with contextlib.suppress(Exception):  # some policy tests build a real Router: seconds to import
        import litellm  # noqa: F401


def _run(work: Path, tests: list[str], timeout: float, *, first_failure: bool = True, log: Path | None = None) -> str:
    """'killed' or 'survived': the tests run in a forked child against the copy."""
    pid = os.fork()
    if pid == 0:  # the child: import the copy's package fresh, run the tests, exit with their status
        try:
            os.chdir(work)
            sys.path.insert(0, str(work / "src"))
            sys.path.insert(0, str(work))
            out = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(out, 2)
            import pytest

            code = pytest.main([*(["-x"] if first_failure else []), "-q", "-rfE", "-p", "no:cacheprovider",
                                "--rootdir", str(work), *tests])
            os._exit(int(code))
        except BaseException:
            os._exit(99)
    deadline = time.monotonic() + timeout
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "killed"  # a timeout: the mutant made the tests loop
            time.sleep(0.05)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): the child goes too
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise


def _baseline(work: Path, tests: list[str], timeout: float) -> list[str]:
    """The tests with ``--deselect`` for each one that already fails unmutated (work in progress elsewhere in a
    shared tree must not count as a kill); the deselected ones are printed."""
    log = work / "baseline.log"
    _run(work, tests, timeout, first_failure=False, log=log)
    failing = [line.split()[1] for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
               if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1]
    for node in failing:
        print(f"  failing before any mutation, deselected: {node}", flush=True)
    return [*tests, *(arg for node in failing for arg in ("--deselect", node))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(TESTS), help="only these modules")
    parser.add_argument("--only", help="only these mutant numbers (comma-separated), with one --module")
    parser.add_argument("--list", action="store_true", help="count the mutants, run nothing")
    parser.add_argument("--work", default="/tmp/mut", help="where the copy of src/ and tests/ goes")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--survivors", help="write the surviving mutants (with their code) to this JSON file")
    parser.add_argument("--retry", metavar="JSON",
                        help="only the mutants a --survivors file lists (matched by module, operator, change and "
                             "source line, so edits elsewhere in the module do not shift them)")
    parser.add_argument("--skip-test", action="append", metavar="FILE",
                        help="leave this test file out (e.g. tests/test_mutants.py, to see what survived without it)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a plain kill stops the child too (``_run``)
    retry = json.loads(Path(args.retry).read_text(encoding="utf-8")) if args.retry else None
    modules = args.module or (sorted({entry["module"] for entry in retry}) if retry else sorted(TESTS))
    os.environ.update(CI="1", LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR", HF_HUB_OFFLINE="1")
    work = Path(args.work)
    if not args.list:
        _prepare(work)
        _preload()
        sys.dont_write_bytecode = True
    totals: Counter[str] = Counter()
    survivors = []
    for module in modules:
        found = mutants(module, ROOT if args.list else work)  # the copy: the tree may change meanwhile
        if retry is not None:
            wanted_keys = {(e["operator"], e["description"], e["source"]) for e in retry if e["module"] == module}
            lines = (work / "src" / "budget_hook" / module).read_text(encoding="utf-8").splitlines()
            found = [(m, code) for m, code in found
                     if (m.operator, m.description, lines[m.line - 1].strip() if 0 < m.line <= len(lines) else "")
                     in wanted_keys]
        if args.only:
            wanted = {int(n) for n in args.only.split(",")}
            found = [(m, code) for m, code in found if m.number in wanted]
        if args.list:
            by_operator = Counter(m.operator for m, _ in found)
            print(f"{module}: {len(found)} mutants ({', '.join(f'{k} {v}' for k, v in sorted(by_operator.items()))})")
            totals["mutants"] += len(found)
            continue
        tests = [t for t in TESTS[module] if (work / t).exists() and t not in (args.skip_test or [])]
        target = work / "src" / "budget_hook" / module
        original = target.read_text(encoding="utf-8")
        tests = _baseline(work, tests, args.timeout)
        if _run(work, tests, args.timeout) != "survived":
            print(f"{module}: the unmutated tests fail in the copy; skipped", flush=True)
            continue
        killed = 0
        try:
            for mutant, code in found:
                target.write_text(code, encoding="utf-8")
                outcome = _run(work, tests, args.timeout)
                totals[outcome] += 1
                killed += outcome == "killed"
                if outcome == "survived":
                    survivors.append({**mutant.__dict__, "source": _line(original, mutant.line)})
                    print(f"  survived: {module}#{mutant.number} line {mutant.line} {mutant.operator}: "
                          f"{mutant.description}: {_line(original, mutant.line)}", flush=True)
        finally:
            target.write_text(original, encoding="utf-8")
        print(f"{module}: {len(found)} mutants, {killed} killed, {len(found) - killed} survived", flush=True)
    if args.list:
        print(f"total: {totals['mutants']} mutants")
        return 0
    total = totals["killed"] + totals["survived"]
    print(f"total: {total} mutants, {totals['killed']} killed, {totals['survived']} survived")
    if args.survivors:
        Path(args.survivors).write_text(json.dumps(survivors, indent=1), encoding="utf-8")
    return 0


def _line(source: str, line: int) -> str:
    """The original source line a mutant changed (for the report)."""
    lines = source.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


if __name__ == "__main__":
    sys.exit(main())
