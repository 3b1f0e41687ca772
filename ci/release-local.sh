#!/usr/bin/env bash
# The main job on the local stack (README): on a fresh machine, bring up the engine and the
# registries, then release training-cpu-pytorch:25.03 for real: build, smoke-test, publish to
# the local public registry and every local VPC region, verify, write notes and the record.
set -euo pipefail
cd "$(dirname "$0")/.."
REF="${1:-training-cpu-pytorch:25.03}"

# shellcheck source=ci/venv.sh
source ci/venv.sh
ensure_venv
ci/local-stack.sh up
eval "$(ci/local-stack.sh env)"

xpu-release release "$REF"
echo
echo "status of every endpoint:"
xpu-release status "$REF"
