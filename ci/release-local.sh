#!/usr/bin/env bash
# The main job on the local stack (README): on a fresh machine, bring up the engine and the
# registries, then release the CPU family for real, parents first: pytorch-cpu-sdk:2.13.0 (the
# stand-in for the PPU SDK image), then training-cpu-pytorch:25.03, which builds on it. Each is
# built, smoke-tested, published to the local public registry and every local VPC region,
# verified, and gets its notes and record. Other refs may be given; they are ordered the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -eq 0 ]]; then
  set -- training-cpu-pytorch:25.03 pytorch-cpu-sdk:2.13.0
fi

# shellcheck source=ci/venv.sh
source ci/venv.sh
ensure_venv
ci/local-stack.sh up
eval "$(ci/local-stack.sh env)"

mapfile -t refs < <(xpu-release order "$@")
for ref in "${refs[@]}"; do
  echo "== release $ref"
  # The committed lock pins the base digest of the stack it was made on; a fresh stack whose
  # debootstrap met other Debian package versions serves another base (and so another SDK).
  # Then this machine's base is pinned for the local run (git shows the changed lock),
  # instead of failing on a pull.
  if ! check="$(xpu-release lock "$ref" --check 2>&1)"; then
    if grep -q "has moved\|is not served" <<<"$check"; then
      echo "release-local: the base of $ref on this stack is not the one the committed lock pins; re-locking it here" >&2
      xpu-release lock "$ref"
    else
      echo "$check" >&2
      exit 4
    fi
  fi
  xpu-release release "$ref"
  echo
  echo "status of every endpoint for $ref:"
  xpu-release status "$ref"
done
