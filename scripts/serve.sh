#!/usr/bin/env bash
# Set up (idempotent) and start the LiteLLM proxy with budget_hook on litellm_config.yaml.
#   bash scripts/serve.sh                          # demo config, http://127.0.0.1:4000, no API key needed
#   PORT=8080 CONFIG=/etc/litellm.yaml bash scripts/serve.sh
# Offline: no remote model-cost map, no Hugging Face downloads, no .env loading (see README, "Offline").
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=${LITELLM_LOG:-ERROR} HF_HUB_OFFLINE=1 \
       LITELLM_DONT_SHOW_FEEDBACK_BOX=true LITELLM_MODE=PRODUCTION
echo "budget_hook: starting the LiteLLM proxy on http://${HOST:-127.0.0.1}:${PORT:-4000} with ${CONFIG:-litellm_config.yaml}" >&2
exec .venv/bin/litellm --config "${CONFIG:-litellm_config.yaml}" --host "${HOST:-127.0.0.1}" --port "${PORT:-4000}"
