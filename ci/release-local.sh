#!/usr/bin/env bash
# The main job on the local stack (README): on a fresh machine, bring up the engine and the
# registries, then release the CPU family for real, parents first: pytorch-cpu-sdk:2.13.0 (the
# stand-in for the PPU SDK image), then training-cpu-pytorch:25.03, which builds on it. Each is
# built, smoke-tested, published to the local public registry and every local VPC region,
# verified, and gets its notes and record. Other refs may be given; they are ordered the same way.
#
# It never edits a tracked file. The committed locks pin the base the stack makes (debootstrap
# is reproducible); if this machine's Debian mirror served other package versions, the base
# differs, and the release runs in a copy of the tree under out/local-checkout/ (ignored by git,
# owned by this script) whose locks are made again there, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -eq 0 ]]; then
  set -- training-cpu-pytorch:25.03 pytorch-cpu-sdk:2.13.0
fi

# shellcheck source=ci/venv.sh
source ci/venv.sh
ensure_venv
# (Captured, not read from a process substitution: a failure here stops the job.)
ordered="$(xpu-release order "$@")"
mapfile -t refs <<<"$ordered"
# The stack makes the base for each architecture a release of the run declares (arm64 under
# emulation takes minutes), and only those.
declared="$(python - "${refs[@]}" <<'PY'
import sys
from xpu_release.manifest import Repo
repo = Repo.discover()
for arch in sorted({p.architecture for r in sys.argv[1:] for p in repo.load_ref(r).platforms} - {"amd64"}):
    print(arch)
PY
)"
mapfile -t arches < <(printf '%s' "$declared")
ci/local-stack.sh up "${arches[@]}"
eval "$(ci/local-stack.sh env)"

where=.
for ref in "${refs[@]}"; do
  if ! check="$(xpu-release --root "$where" lock "$ref" --check 2>&1)"; then
    if ! grep -q "has moved\|is not served" <<<"$check"; then
      echo "$check" >&2
      exit 4
    fi
    if [[ "$where" == . ]]; then
      # A copy of the tree as it is (tracked and untracked files, not ignored ones): the
      # committed tree stays as it is, and git status with it.
      where=out/local-checkout
      echo "release-local: the base of $ref on this stack is not the one the committed lock pins" \
        "(this machine's Debian mirror served other packages); releasing from a copy, $where, with its locks made here" >&2
      rm -rf "$where" && mkdir -p "$where"
      if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        # Tracked and untracked files as they are (a tracked file deleted here is left out).
        git ls-files -z --cached --others --exclude-standard \
          | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -C "$where" -xf -
      else
        tar --exclude=./out --exclude=./.venv --exclude=./.cache -cf - . | tar -C "$where" -xf -
      fi
      # The records of earlier releases (a release reads its predecessor's evaluation).
      [[ -d out/releases ]] && mkdir -p "$where/out" && cp -r out/releases "$where/out/"
      trap 'mkdir -p out/releases && cp -r "$where"/out/releases/. out/releases/' EXIT
    fi
    xpu-release --root "$where" lock "$ref"
  fi
  echo "== release $ref"
  xpu-release --root "$where" release "$ref"
  echo
  echo "status of every endpoint for $ref:"
  xpu-release --root "$where" status "$ref"
done
if [[ "$where" != . ]]; then
  echo "release-local: released from $where (locks made on this stack); the notes and records are in out/releases/" >&2
fi
