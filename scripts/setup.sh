#!/usr/bin/env bash
# Sourced by serve.sh, test.sh and demo.sh: create the virtual environment and install budget_hook with the
# exact environment of the project's own tests and demo (constraints/litellm-<version>.txt), only when
# something changed (pyproject.toml, the constraints file, the Python version, an extra not installed yet).
# Uses uv when it can be installed (several times faster than pip on litellm's dependency tree), else pip.
#   EXTRAS=test . scripts/setup.sh                  # .venv, constraints/litellm-1.103.txt (the oldest supported)
#   LITELLM=1.108 EXTRAS=test . scripts/setup.sh    # .venv-litellm-1.108, constraints/litellm-1.108.txt (the newest)
# pyproject.toml itself states ranges (an operator installs the plugin into the proxy's own environment);
# the constraints files pin every package, LiteLLM included, for a reproducible run here and in CI.
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS:-}
LITELLM=${LITELLM:-1.103}
CONSTRAINTS=constraints/litellm-$LITELLM.txt
[ -f "$CONSTRAINTS" ] || { echo "budget_hook: no $CONSTRAINTS (supported: $(ls constraints | sed 's/litellm-//; s/.txt//' | tr '\n' ' '))" >&2; return 2 2>/dev/null || exit 2; }
if [ "$LITELLM" = 1.103 ]; then VENV=${VENV:-.venv}; else VENV=${VENV:-.venv-litellm-$LITELLM}; fi
export VENV
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
STAMP=$VENV/.budget_hook_installed
# prints the extras to install, or nothing when the stamp says the same inputs, Python and extras
NEEDED=$("$VENV/bin/python" - "$STAMP" "$EXTRAS" "$CONSTRAINTS" <<'PY'
import hashlib, json, sys
from pathlib import Path
stamp, extras = Path(sys.argv[1]), {e for e in sys.argv[2].split(",") if e}
key = hashlib.sha256(Path("pyproject.toml").read_bytes() + Path(sys.argv[3]).read_bytes()).hexdigest() \
    + f" py{sys.version_info[0]}.{sys.version_info[1]}"
try:
    seen = json.loads(stamp.read_text())
except (OSError, ValueError):
    seen = {}
installed = set(seen.get("extras", [])) if seen.get("key") == key else None
if installed is None or not extras <= installed:
    print(",".join(sorted(extras | (installed or set()))) or "-")
PY
)
if [ -n "$NEEDED" ]; then
    echo "== installing budget_hook into $VENV with $CONSTRAINTS (again only when it or pyproject.toml changes)" >&2
    SPEC="-e ."
    [ "$NEEDED" != "-" ] && SPEC="-e .[$NEEDED]"
    # uv reads its own settings: hand it pip's index and local wheels where they are set
    export UV_INDEX_URL=${UV_INDEX_URL:-${PIP_INDEX_URL:-}} UV_FIND_LINKS=${UV_FIND_LINKS:-${PIP_FIND_LINKS:-}}
    [ -n "$UV_INDEX_URL" ] || unset UV_INDEX_URL
    [ -n "$UV_FIND_LINKS" ] || unset UV_FIND_LINKS
    # shellcheck disable=SC2086
    { { [ -x "$VENV/bin/uv" ] || "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "uv==0.9.5" \
          >/dev/null 2>&1; } && "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" $SPEC -c "$CONSTRAINTS"; } \
        || "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check $SPEC -c "$CONSTRAINTS"
    "$VENV/bin/python" - "$STAMP" "$NEEDED" "$CONSTRAINTS" <<'PY'
import hashlib, json, sys
from pathlib import Path
key = hashlib.sha256(Path("pyproject.toml").read_bytes() + Path(sys.argv[3]).read_bytes()).hexdigest() \
    + f" py{sys.version_info[0]}.{sys.version_info[1]}"
extras = [e for e in sys.argv[2].split(",") if e and e != "-"]
Path(sys.argv[1]).write_text(json.dumps({"key": key, "extras": extras}))
PY
fi
