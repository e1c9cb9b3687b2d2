#!/usr/bin/env bash
# Set up (idempotent), lint, type-check and run every test. Needs Python 3.10+ and access to PyPI; nothing else.
#   bash scripts/test.sh                       # lint (ruff), types (mypy), then all tests, on LiteLLM 1.103 (.venv)
#   bash scripts/test.sh -k trim               # extra arguments go to pytest
#   LITELLM=1.108 bash scripts/test.sh         # the same on the newest supported LiteLLM (.venv-litellm-1.108)
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test . scripts/setup.sh
. scripts/clients.sh
# The end-to-end tests of shared learning start a real Redis server (Debian's redis-server) on 127.0.0.1.
if ! command -v redis-server >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo "sudo -n")
    echo "== installing redis-server (Debian) for the shared-learning end-to-end tests"
    $SUDO apt-get install -y -qq redis-server >/dev/null 2>&1 \
        || { $SUDO apt-get update -qq >/dev/null 2>&1 && $SUDO apt-get install -y -qq redis-server >/dev/null 2>&1; } \
        || echo "   could not install redis-server: those tests will be skipped (they fail under CI=true)"
fi
echo "== ruff check (lint: src, tests, bench, scripts)"
"$VENV/bin/ruff" check src tests bench scripts
echo "== mypy (types: src/budget_hook)"
"$VENV/bin/mypy"
# Offline and quiet: no remote model-cost map, no Hugging Face downloads (docs/operations.md, "Offline").
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR HF_HUB_OFFLINE=1
echo "== pytest on litellm $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))') ($VENV)"
exec "$VENV/bin/python" -m pytest "$@"
