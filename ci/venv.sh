# shellcheck shell=bash
# Sourced by ci/*.sh: a project virtualenv with xpu-release installed, on PATH.
# Works on a fresh Debian 12 machine (installs python3-venv when it is missing).
ensure_venv() {
  local extras="${1:-}"
  if [[ ! -x .venv/bin/python ]]; then
    if ! python3 -m venv .venv 2>/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf .venv && python3 -m venv .venv
    fi
  fi
  .venv/bin/pip install -q --disable-pip-version-check -e ".${extras}"
  export PATH="$PWD/.venv/bin:$PATH"
}
