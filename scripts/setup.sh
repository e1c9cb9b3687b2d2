#!/usr/bin/env bash
# Sourced by serve.sh, test.sh and demo.sh: create .venv and install the pinned dependencies, only when
# something changed (pyproject.toml, the Python version, an extra not installed yet). Uses uv when it can
# be installed (several times faster than pip on litellm's dependency tree), else pip.
#   EXTRAS=test . scripts/setup.sh
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS:-}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
STAMP=.venv/.budget_hook_installed
# prints the extras to install, or nothing when the stamp says the same pyproject.toml, Python and extras
NEEDED=$(.venv/bin/python - "$STAMP" "$EXTRAS" <<'PY'
import hashlib, json, sys
from pathlib import Path
stamp, extras = Path(sys.argv[1]), {e for e in sys.argv[2].split(",") if e}
key = hashlib.sha256(Path("pyproject.toml").read_bytes()).hexdigest() + f" py{sys.version_info[0]}.{sys.version_info[1]}"
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
    echo "== installing budget_hook and its pinned dependencies into .venv (again only when pyproject.toml changes)" >&2
    SPEC="-e ."
    [ "$NEEDED" != "-" ] && SPEC="-e .[$NEEDED]"
    # uv reads its own settings: hand it pip's index and local wheels where they are set
    export UV_INDEX_URL=${UV_INDEX_URL:-${PIP_INDEX_URL:-}} UV_FIND_LINKS=${UV_FIND_LINKS:-${PIP_FIND_LINKS:-}}
    [ -n "$UV_INDEX_URL" ] || unset UV_INDEX_URL
    [ -n "$UV_FIND_LINKS" ] || unset UV_FIND_LINKS
    # shellcheck disable=SC2086
    { { [ -x .venv/bin/uv ] || .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.9.5" \
          >/dev/null 2>&1; } && .venv/bin/uv pip install --quiet --python .venv/bin/python $SPEC; } \
        || .venv/bin/python -m pip install --quiet --disable-pip-version-check $SPEC
    .venv/bin/python - "$STAMP" "$NEEDED" <<'PY'
import hashlib, json, sys
from pathlib import Path
key = hashlib.sha256(Path("pyproject.toml").read_bytes()).hexdigest() + f" py{sys.version_info[0]}.{sys.version_info[1]}"
extras = [e for e in sys.argv[2].split(",") if e and e != "-"]
Path(sys.argv[1]).write_text(json.dumps({"key": key, "extras": extras}))
PY
fi
