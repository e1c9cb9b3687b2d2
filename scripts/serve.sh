#!/usr/bin/env bash
# Set up (idempotent) and start the LiteLLM proxy with budget_hook on litellm_config.yaml.
#   bash scripts/serve.sh                          # demo config, http://127.0.0.1:4000, no provider API key needed
#                                                  # (its demo group is served by scripts/demo_upstream.py);
#                                                  # clients send the demo's master key: Authorization: Bearer sk-demo
#   LITELLM=1.108 bash scripts/serve.sh            # the same on the newest supported LiteLLM
#   PORT=8080 CONFIG=/etc/litellm.yaml bash scripts/serve.sh
# Offline: no remote model-cost map, no Hugging Face downloads, no .env loading (docs/operations.md, "Offline").
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=${LITELLM_LOG:-ERROR} HF_HUB_OFFLINE=1 \
       LITELLM_DONT_SHOW_FEEDBACK_BOX=true LITELLM_MODE=PRODUCTION
CONFIG=${CONFIG:-litellm_config.yaml}
PIDS=""
trap 'kill $PIDS 2>/dev/null || true' EXIT INT TERM
if [ -z "${BUDGET_HOOK_DEMO_UPSTREAM:-}" ] && grep -q BUDGET_HOOK_DEMO_UPSTREAM "$CONFIG"; then
    # the demo group's upstream: a tiny local server, no provider, no key (scripts/demo_upstream.py)
    OUT=$(mktemp)
    "$VENV/bin/python" scripts/demo_upstream.py --port 0 > "$OUT" 2>&1 &
    PIDS="$PIDS $!"
    for _ in $(seq 1 100); do grep -q READY "$OUT" && break; sleep 0.1; done
    export BUDGET_HOOK_DEMO_UPSTREAM="http://127.0.0.1:$(awk '/READY/{print $2}' "$OUT")/v1"
    rm -f "$OUT"
fi
echo "budget_hook: starting the LiteLLM proxy on http://${HOST:-127.0.0.1}:${PORT:-4000} with $CONFIG" >&2
[ "$CONFIG" = litellm_config.yaml ] && echo "budget_hook: the demo's master key is sk-demo (Authorization: Bearer sk-demo)" >&2
"$VENV/bin/litellm" --config "$CONFIG" --host "${HOST:-127.0.0.1}" --port "${PORT:-4000}" &
PIDS="$PIDS $!"
wait $!
