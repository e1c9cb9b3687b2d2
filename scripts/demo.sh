#!/usr/bin/env bash
# Set up (idempotent) and show the core on real requests, no API key needed:
# a 9,321-token agent conversation (gpt-4o's tokenizer) trimmed to fit a 7,000-token window, and a request that is blocked.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
summary='import json,sys; d=json.load(sys.stdin); r=d["report"]; print(json.dumps({k: r[k] for k in ("tokens_before","tokens_after","target","dropped_turns")}), "\n", "\n ".join(json.dumps(a) for a in r["actions"]))'
echo "== budget-hook count --model gpt-4o examples/agent_request.json"
"$VENV/bin/budget-hook" count --model gpt-4o examples/agent_request.json | "$VENV/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print({k: d[k] for k in ("encoding","method","tokens")})'
echo "== budget-hook trim --model gpt-4o --window 7000 examples/agent_request.json"
"$VENV/bin/budget-hook" trim --model gpt-4o --window 7000 examples/agent_request.json | "$VENV/bin/python" -c "$summary"
echo "== budget-hook trim --model gpt-4o --window 8000 examples/oversized_request.json"
"$VENV/bin/budget-hook" trim --model gpt-4o --window 8000 examples/oversized_request.json > /dev/null || echo "(exit code $?: blocked)"
