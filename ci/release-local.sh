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

# The committed lock pins the base digest of the stack it was made on; a fresh stack whose
# debootstrap met other Debian package versions serves another base. Then this machine's base
# is pinned for the local run (git shows the changed lock), instead of failing on a pull.
if ! check="$(xpu-release lock "$REF" --check 2>&1)"; then
  if grep -q "has moved" <<<"$check"; then
    echo "release-local: this stack's base is not the one the committed lock pins; re-locking $REF here" >&2
    xpu-release lock "$REF"
  fi
fi
xpu-release release "$REF"
echo
echo "status of every endpoint:"
xpu-release status "$REF"
