#!/usr/bin/env bash
# Set up (idempotent) and run every test. Needs Python 3.10+ and access to PyPI; nothing else.
#   bash scripts/test.sh            # all tests
#   bash scripts/test.sh -k trim    # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
# Offline and quiet: no remote model-cost map, no Hugging Face downloads (see README, "Offline").
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR HF_HUB_OFFLINE=1
exec .venv/bin/python -m pytest "$@"
