#!/usr/bin/env bash
# Sourced by test.sh: the real client programs the end-to-end suite drives, each installed only when its
# pinned list changed.
#   .venv-clients/   Python clients that cannot share .venv with LiteLLM (tests/e2e/clients/requirements.txt)
#   .npm-clients/    Claude Code and Codex CLI from npm (tests/e2e/clients/package.json), when npm is here
# Nothing fails here: a client that cannot be installed makes its tests skip (fail under CI=true).
client_stamp() { sha256sum "$1" | cut -d' ' -f1; }
REQS=tests/e2e/clients/requirements.txt
if [ "$(cat .venv-clients/.stamp 2>/dev/null)" != "$(client_stamp $REQS)" ]; then
    echo "== installing the Python test clients into .venv-clients ($REQS)" >&2
    rm -rf .venv-clients
    { "${VENV:-.venv}/bin/uv" venv --quiet --python "${VENV:-.venv}/bin/python" .venv-clients \
        && "${VENV:-.venv}/bin/uv" pip install --quiet --python .venv-clients/bin/python -r $REQS; } \
        || { "${PYTHON:-python3}" -m venv .venv-clients && .venv-clients/bin/python -m pip install --quiet \
             --disable-pip-version-check -r $REQS; } \
        && client_stamp $REQS > .venv-clients/.stamp \
        || echo "   could not install them: their tests will be skipped" >&2
fi
# Claude Code and Codex (native binaries from npm, ~800 MB with their platform packages). When npm is here the
# suite requires them (BUDGET_HOOK_AGENT_CLIS=required); without npm their tests skip.
PKG=tests/e2e/clients/package.json
if command -v npm >/dev/null 2>&1; then
    export BUDGET_HOOK_AGENT_CLIS=required
    if [ "$(cat .npm-clients/.stamp 2>/dev/null)" != "$(client_stamp $PKG)" ]; then
        echo "== installing Claude Code and Codex CLI into .npm-clients ($PKG)" >&2
        rm -rf .npm-clients && mkdir -p .npm-clients && cp $PKG .npm-clients/package.json
        (cd .npm-clients && npm install --no-audit --no-fund --loglevel=error >/dev/null) \
            && client_stamp $PKG > .npm-clients/.stamp \
            || echo "   npm could not install them: their tests will fail" >&2
    fi
fi
