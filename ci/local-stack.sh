#!/usr/bin/env bash
# The local stack every build, smoke and publish test runs against: a real Docker engine and
# real distribution registries on loopback, made from Debian's packages. Idempotent.
#
#   ci/local-stack.sh up [ARCH...]
#                              install what is missing, register arm64 emulation, start engine +
#                              registries, seed the base image: an index of amd64 and of each ARCH
#                              asked for (arm64: debootstrapped under emulation, about six minutes
#                              once a machine), and of every architecture made here before
#   ci/local-stack.sh base ARCH...
#                              on a stack that is up, add ARCH to the base's index (what `up ARCH`
#                              does, and only that; safe beside running tests)
#   ci/local-stack.sh lazy     on a stack that is up, start lazy pulling (on demand): the stargz
#                              snapshotter daemon (built here from Debian's Go source) and a containerd
#                              of the stack's own that uses it; prints `export` lines (XPU_LAZY_*).
#                              Idempotent; a start after `down` begins with no images.
#   ci/local-stack.sh env      print `export` lines for eval (DOCKER_HOST, XPU_RELEASE_REGISTRIES, ...;
#                              XPU_LAZY_* while lazy pulling runs)
#   ci/local-stack.sh status   say what runs
#   ci/local-stack.sh reset    wipe published data and images from earlier runs (keeps the base image)
#   ci/local-stack.sh down     stop what `up` and `lazy` started, by pid
#
# Registries (loopback only):
#   hub             127.0.0.1:15000  stands in for the upstream hub of base images (plain HTTP)
#   public          127.0.0.1:15001  TLS (a CA made here, trusted through certs.d) + htpasswd auth
#   vpc/cn-beijing  127.0.0.1:15002  plain HTTP
#   vpc/cn-wulanchabu 127.0.0.1:15003, vpc/cn-shanghai 127.0.0.1:15004
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STACK="${XPU_STACK_DIR:-/var/lib/xpu-release-stack}"
BASE_PORT="${XPU_STACK_BASE_PORT:-15000}"
REGIONS=(cn-beijing cn-wulanchabu cn-shanghai)
OWN_SOCK="$STACK/docker/docker.sock"
BASE_REF_PATH="base/debian/bookworm-python:12"  # the fixtures' base (hub alias)
# The same root with g++ as a second layer (ci/toolchain.py): the base of manifests/pytorch-cpu-sdk.
CXX_REF_PATH="base/debian/bookworm-python-cxx:12"
DEBIAN_MIRROR="${XPU_STACK_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { printf 'local-stack: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

port_of() {
  case "$1" in
    hub) echo "$BASE_PORT" ;;
    public) echo $((BASE_PORT + 1)) ;;
    vpc-cn-beijing) echo $((BASE_PORT + 2)) ;;
    vpc-cn-wulanchabu) echo $((BASE_PORT + 3)) ;;
    vpc-cn-shanghai) echo $((BASE_PORT + 4)) ;;
    *) die "unknown registry $1" ;;
  esac
}
REGISTRIES=(hub public vpc-cn-beijing vpc-cn-wulanchabu vpc-cn-shanghai)

# A pid file counts only if its process is alive *and* is the program it names: after a reboot
# or a crash the pid may belong to something else, which must never be trusted or killed.
alive() {  # alive PIDFILE [PROGRAM]
  [[ -f "$1" ]] || return 1
  local pid; pid="$(cat "$1")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  local program="${2:-}"
  if [[ -z "$program" ]]; then
    case "$1" in */dockerd.pid) program=dockerd ;; *) program=docker-registry ;; esac
  fi
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$program"
}

wait_for() {  # wait_for DESCRIPTION SECONDS COMMAND...
  local what="$1" deadline=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what did not come up within the deadline"
    sleep 0.2
  done
}

ensure_packages() {
  local missing=()
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v docker-registry >/dev/null || missing+=(docker-registry)
  command -v skopeo >/dev/null || missing+=(skopeo)
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v htpasswd >/dev/null || missing+=(apache2-utils)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v curl >/dev/null || missing+=(curl)
  command -v docker >/dev/null || missing+=(docker.io)
  command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
  command -v update-binfmts >/dev/null || missing+=(binfmt-support)
  if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || die "missing ${missing[*]}; run as root or install them"
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

engine_host() {  # which engine to use: the stack's own, unless XPU_STACK_DOCKER_HOST names another
  # Never the host's /var/run/docker.sock by chance: reset prunes, and a developer's images are
  # not ours to prune.
  if [[ -n "${XPU_STACK_DOCKER_HOST:-}" ]]; then
    echo "$XPU_STACK_DOCKER_HOST"; return
  fi
  echo "unix://$OWN_SOCK"
}

own_engine() { [[ "$(engine_host)" == "unix://$OWN_SOCK" ]]; }

start_engine() {
  local host; host="$(engine_host)"
  if [[ "$host" != "unix://$OWN_SOCK" ]]; then
    log "using the running engine at $host"; return
  fi
  mkdir -p "$STACK/docker"
  if alive "$STACK/docker/dockerd.pid" && DOCKER_HOST="$host" docker info >/dev/null 2>&1; then
    return
  fi
  # Stale pid file or socket from an earlier run: the process is gone, so clear them.
  if alive "$STACK/docker/dockerd.pid"; then kill "$(cat "$STACK/docker/dockerd.pid")" || true; sleep 1; fi
  rm -f "$STACK/docker/dockerd.pid" "$OWN_SOCK"
  log "starting dockerd ($OWN_SOCK)"
  setsid dockerd \
    --host "unix://$OWN_SOCK" \
    --data-root "$STACK/docker/data" \
    --exec-root "$STACK/docker/exec" \
    --pidfile "$STACK/docker/dockerd.pid" \
    --storage-driver overlay2 \
    >"$STACK/docker/dockerd.log" 2>&1 </dev/null &
  wait_for "dockerd (see $STACK/docker/dockerd.log)" 60 env DOCKER_HOST="unix://$OWN_SOCK" docker info
}

make_certs() {
  local d="$STACK/certs"
  mkdir -p "$d"
  if [[ ! -s "$d/server.crt" ]]; then
    log "making a CA and a server certificate for 127.0.0.1"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=xpu-release local CA" \
      -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext"
    openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
      -days 3650 -extfile "$d/san.ext" -out "$d/server.crt" 2>/dev/null
    chmod 600 "$d"/*.key
  fi
  # Outside clients (skopeo --cert-dir) get a folder with the CA alone.
  mkdir -p "$STACK/trust" && cp "$d/ca.crt" "$STACK/trust/ca.crt"
  # The engine trusts the CA for exactly this host:port.
  local certsd
  certsd="/etc/docker/certs.d/127.0.0.1:$(port_of public)"
  mkdir -p "$certsd" && cp "$d/ca.crt" "$certsd/ca.crt"
}

make_auth() {
  local d="$STACK/auth"
  mkdir -p "$d" && chmod 700 "$d"
  if [[ ! -s "$d/password" ]]; then
    (umask 077; openssl rand -hex 16 >"$d/password")
  fi
  # The password goes through stdin and files only: never argv.
  htpasswd -iBc "$d/htpasswd" xpu <"$d/password" 2>/dev/null
  mkdir -p "$STACK/docker-config"
  local auth; auth="$(printf 'xpu:%s' "$(cat "$d/password")" | base64 -w0)"
  (umask 077; printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}\n' "$(port_of public)" "$auth" \
    >"$STACK/docker-config/config.json")
}

registry_config() {  # registry_config NAME
  local name="$1" port; port="$(port_of "$1")"
  local dir="$STACK/registries/$name"
  mkdir -p "$dir/data"
  {
    echo "version: 0.1"
    echo "log: {level: error, accesslog: {disabled: true}}"
    echo "storage:"
    echo "  filesystem: {rootdirectory: $dir/data}"
    echo "  delete: {enabled: true}"
    echo "  maintenance: {uploadpurging: {enabled: false}}"
    echo "http:"
    echo "  addr: 127.0.0.1:$port"
    echo "  secret: $(cat "$STACK/auth/password")-$name"
    if [[ "$name" == public ]]; then
      echo "  tls: {certificate: $STACK/certs/server.crt, key: $STACK/certs/server.key}"
      echo "auth:"
      echo "  htpasswd: {realm: xpu-local, path: $STACK/auth/htpasswd}"
    fi
  } >"$dir/config.yml"
  chmod 600 "$dir/config.yml"
}

registry_up() {  # registry_up NAME
  local name="$1" port; port="$(port_of "$1")"
  local dir="$STACK/registries/$name" scheme=http
  [[ "$name" == public ]] && scheme=https
  local probe=(curl -s -o /dev/null --max-time 2 --cacert "$STACK/certs/ca.crt" "$scheme://127.0.0.1:$port/v2/")
  if alive "$dir/pid" && "${probe[@]}"; then return; fi
  if alive "$dir/pid"; then kill "$(cat "$dir/pid")" || true; fi
  rm -f "$dir/pid"
  registry_config "$name"
  setsid docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  wait_for "registry $name on 127.0.0.1:$port (see $dir/log)" 30 "${probe[@]}"
}

write_registries_override() {
  local f="$STACK/registries.local.yaml"
  {
    echo "# Written by ci/local-stack.sh: maps the logical registries to the local stack."
    echo "registries:"
    echo "  public:"
    echo "    host: 127.0.0.1:$(port_of public)"
    echo "    ca_file: $STACK/certs/ca.crt"
    echo "  vpc:"
    echo "    regions: [${REGIONS[*]// /, }]"
    echo "    hosts:"
    for r in "${REGIONS[@]}"; do echo "      $r: 127.0.0.1:$(port_of "vpc-$r")"; done
    echo "    insecure: true"
    echo "  hub:"
    echo "    host: 127.0.0.1:$(port_of hub)"
    echo "    namespace: base"
    echo "    insecure: true"
  } >"$f"
  sed -i 's/\[cn-beijing cn-wulanchabu cn-shanghai\]/[cn-beijing, cn-wulanchabu, cn-shanghai]/' "$f"
}

# aarch64 binaries run here through qemu-user-static, registered with the fix-binary flag (F):
# the kernel opens the emulator once, so it runs inside the engine's containers too, which have
# no /usr/bin/qemu-aarch64-static of their own. The arm64 base and every arm64 build need it.
ensure_emulation() {
  local dir=/proc/sys/fs/binfmt_misc
  if [[ ! -e "$dir/register" ]]; then
    mount -t binfmt_misc binfmt_misc "$dir" 2>/dev/null || die "cannot mount $dir (binfmt_misc)"
  fi
  [[ -e "$dir/qemu-aarch64" ]] || update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 \
    || die "could not register qemu-aarch64 with binfmt_misc (update-binfmts --enable qemu-aarch64)"
  grep -q '^flags: .*F' "$dir/qemu-aarch64" \
    || die "qemu-aarch64 is registered without the fix-binary flag (F): containers cannot run arm64"
}

# The base recipe: bump it when ci/base-image.py changes what it makes, so hubs seeded by an
# older recipe are seeded again. 3: the base is an index of linux/amd64 and linux/arm64 (#43).
# 4: a second base, the same root with g++ (bookworm-python-cxx).
BASE_RECIPE=4

base_tarball() {  # the debootstrapped root of one architecture (amd64 keeps its first name)
  if [[ "$1" == amd64 ]]; then echo "$STACK/base/bookworm-python.tar"; else echo "$STACK/base/bookworm-python-$1.tar"; fi
}

debootstrap_base() {  # debootstrap_base ARCH: made once a machine, kept across resets
  local arch="$1" tarball; tarball="$(base_tarball "$1")"
  [[ -s "$tarball" ]] && return
  local root="$STACK/base/rootfs-$arch" foreign=()
  [[ "$arch" == amd64 ]] || foreign=(--arch="$arch")
  log "debootstrap ($arch): a bookworm root with python3 and venv (amd64 about a minute, arm64 under emulation about six)"
  rm -rf "$root" && mkdir -p "$root"
  debootstrap "${foreign[@]}" --variant=minbase --include=python3,python3-venv bookworm "$root" "$DEBIAN_MIRROR" \
    >"$STACK/base/debootstrap-$arch.log" 2>&1 || die "debootstrap ($arch) failed (see $STACK/base/debootstrap-$arch.log)"
  # Trim what an image does not need: apt lists and caches, logs.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/log/* "$root"/tmp/*
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
}

# The architectures the base is made for: amd64, each one asked for, and each one made here
# before (a tarball kept across resets), so the index never loses a platform a run relied on.
# Nothing that no release of the run declares is made: the main job's first start debootstraps
# amd64 alone (about a minute), not arm64 under emulation (about six).
base_arches() {  # base_arches [ARCH...]
  local arch out=(amd64)
  for arch in "$@" arm64; do
    [[ "$arch" == amd64 ]] && continue
    if [[ " $* " == *" $arch "* || -s "$(base_tarball "$arch")" ]] && [[ " ${out[*]} " != *" $arch "* ]]; then
      out+=("$arch")
    fi
  done
  echo "${out[*]}"
}

toolchain_tarball() {  # the g++ layer of one architecture, made from its base's package database
  echo "$STACK/base/toolchain-$1.tar"
}

make_toolchain() {  # make_toolchain ARCH: made once a machine, kept across resets
  local arch="$1" tarball python="$2"; tarball="$(toolchain_tarball "$1")"
  [[ -s "$tarball" ]] && return
  log "toolchain ($arch): g++, Python's headers and what they need from bookworm main, unpacked (about 20 s)"
  "$python" "$HERE/toolchain.py" "$arch" "$(base_tarball "$arch")" "$tarball" "$DEBIAN_MIRROR" \
    >"$STACK/base/toolchain-$arch.log" 2>&1 || die "the $arch toolchain failed (see $STACK/base/toolchain-$arch.log)"
}

seed_base() {  # seed_base [ARCH...]: both bases (the python root, and it with g++), each an index
  local hub url arches
  hub="127.0.0.1:$(port_of hub)"
  url="http://$hub/v2/${CXX_REF_PATH%%:*}/manifests/${CXX_REF_PATH##*:}"
  mkdir -p "$STACK/base"
  # One seeding at a time (a test may ask for arm64 while ci/test.sh makes it in the background).
  exec 9>"$STACK/base/.lock"
  flock 9
  arches="$(base_arches "$@")"
  if curl -sf -o /dev/null -H 'Accept: application/vnd.docker.distribution.manifest.list.v2+json' "$url" \
    && [[ "$(cat "$STACK/base/recipe" 2>/dev/null)" == "$BASE_RECIPE $arches" ]]; then
    exec 9>&-
    return
  fi
  local python="$HERE/../.venv/bin/python" arch members=() cxx_members=()
  [[ -x "$python" ]] || python=python3
  for arch in $arches; do
    debootstrap_base "$arch"
    make_toolchain "$arch" "$python"
    # Reproducible: the same Debian packages give the same image on any machine (ci/base-image.py),
    # so the digest a committed lock pins is the one a fresh stack serves.
    seed_one "$python" "$hub/$BASE_REF_PATH-$arch" "$arch"
    seed_one "$python" "$hub/$CXX_REF_PATH-$arch" "$arch" "$(toolchain_tarball "$arch")"
    members+=("$hub/$BASE_REF_PATH-$arch")
    cxx_members+=("$hub/$CXX_REF_PATH-$arch")
  done
  # The tag the manifests name serves an index of every architecture made (a lock of
  # linux/amd64 alone pins the amd64 image through it, whatever else the index holds); each
  # platform's image stays at its own tag too.
  log "seeding $hub/$BASE_REF_PATH and $hub/$CXX_REF_PATH (each an index of $arches)"
  "$python" "$HERE/base-image.py" --index "$hub/$BASE_REF_PATH" "${members[@]}" >/dev/null \
    || die "could not put the base index at $hub/$BASE_REF_PATH"
  "$python" "$HERE/base-image.py" --index "$hub/$CXX_REF_PATH" "${cxx_members[@]}" >/dev/null \
    || die "could not put the base index at $hub/$CXX_REF_PATH"
  echo "$BASE_RECIPE $arches" >"$STACK/base/recipe"
  exec 9>&-
}

seed_one() {  # seed_one PYTHON REF ARCH [TOOLCHAIN_TARBALL]: make, load and push one platform's base
  local python="$1" ref="$2" arch="$3"
  log "seeding $ref"
  DOCKER_HOST="$(engine_host)" "$python" "$HERE/base-image.py" "$(base_tarball "$arch")" "$ref" "$arch" \
    ${4:+"$4"} >/dev/null || die "could not make the $arch base image $ref"
  DOCKER_HOST="$(engine_host)" docker push -q "$ref" >/dev/null
}

# Lazy pulling (`lazy`): containerd 1.6 with the stargz snapshotter as a proxy plugin, both the
# stack's own (root, state, sockets under $LAZY; never the machine's /run/containerd, whose
# socket directory /run/containerd/s only holds the shims' sockets, as for dockerd's containerd),
# the CRI plugin off. Debian packages no snapshotter daemon, so tests/tools/stargz-snapshotter
# is built here, offline, against golang-github-containerd-stargz-snapshotter-dev.
LAZY="$STACK/lazy"
LAZY_SRC="$HERE/../tests/tools/stargz-snapshotter/main.go"
LAZY_BIN="$LAZY/bin/stargz-snapshotter"
LAZY_SN_ROOT="$LAZY/stargz"
LAZY_SN_SOCK="$LAZY/stargz.sock"
LAZY_SOCK="$LAZY/containerd.sock"
LAZY_GOCODE=/usr/share/gocode

ensure_lazy_packages() {
  local missing=()
  command -v go >/dev/null || missing+=(golang-go)
  command -v ctr-remote >/dev/null || missing+=(stargz-snapshotter)
  [[ -d "$LAZY_GOCODE/src/github.com/containerd/stargz-snapshotter/fs" ]] \
    || missing+=(golang-github-containerd-stargz-snapshotter-dev)
  command -v fusermount3 >/dev/null || missing+=(fuse3)
  { command -v containerd && command -v ctr && command -v runc; } >/dev/null || missing+=(containerd)
  if ((${#missing[@]})); then
    [[ $(id -u) == 0 ]] || die "missing ${missing[*]}; run as root or install them"
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  [[ -c /dev/fuse ]] || modprobe fuse 2>/dev/null || true
  [[ -c /dev/fuse ]] || die "no /dev/fuse: the stargz snapshotter mounts layers with FUSE"
}

build_snapshotter() {  # built again when its source is newer; status 0 when it was built now
  [[ -x "$LAZY_BIN" && "$LAZY_BIN" -nt "$LAZY_SRC" ]] && return 1
  log "building the stargz snapshotter daemon (Go, offline; about 20 s, once)"
  local gopath; gopath="$(mktemp -d)"
  mkdir -p "$gopath/src/stargzsnapshotter" "$LAZY/bin"
  cp "$LAZY_SRC" "$gopath/src/stargzsnapshotter/main.go"
  if ! (cd "$gopath/src/stargzsnapshotter" && GO111MODULE=off GOPATH="$gopath:$LAZY_GOCODE" GOPROXY=off \
    GOFLAGS='' GOCACHE="$LAZY/go-build" go build -o "$LAZY_BIN.new" . >"$LAZY/build.log" 2>&1); then
    rm -rf "$gopath"; die "the stargz snapshotter does not build (see $LAZY/build.log)"
  fi
  rm -rf "$gopath"
  mv "$LAZY_BIN.new" "$LAZY_BIN"
}

lazy_containerd_config() {
  cat >"$LAZY/containerd.toml" <<EOF
# Written by ci/local-stack.sh lazy: the stack's own containerd, lazy pulling through stargz.
version = 2
root = "$LAZY/containerd/root"
state = "$LAZY/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$LAZY_SOCK"

[ttrpc]
  address = "$LAZY_SOCK.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$LAZY/containerd/opt"

[proxy_plugins.stargz]
  type = "snapshot"
  address = "$LAZY_SN_SOCK"
EOF
}

lazy_ready() {
  ctr --address "$LAZY_SOCK" plugins ls 2>/dev/null | awk '$2 == "stargz" && $NF == "ok" {ok = 1} END {exit !ok}'
}

lazy_running() {
  alive "$LAZY/stargz.pid" "$LAZY_BIN" && alive "$LAZY/containerd.pid" "$LAZY/containerd.toml" && lazy_ready
}

lazy_env() {
  echo "export XPU_LAZY_CONTAINERD=$LAZY_SOCK"
  echo "export XPU_LAZY_SNAPSHOTTER=stargz"
  echo "export XPU_LAZY_SNAPSHOTTER_ROOT=$LAZY_SN_ROOT"
}

cmd_lazy() {
  [[ -f "$STACK/registries.local.yaml" ]] || die "the stack is not up: run ci/local-stack.sh up"
  mkdir -p "$LAZY" && chmod 700 "$LAZY"
  # One start at a time (pytest-xdist workers may each ask for it).
  exec 8>"$LAZY/.lock"
  flock 8
  ensure_lazy_packages
  if build_snapshotter && alive "$LAZY/stargz.pid" "$LAZY_BIN"; then
    log "the snapshotter was rebuilt: restarting lazy pulling"
    stop_lazy
  fi
  if lazy_running; then lazy_env; exec 8>&-; return; fi
  stop_lazy  # whatever half of it runs, and mounts a killed daemon left behind
  # A fresh start forgets what was pulled before: a lazily pulled layer is only good while its
  # registry answers (a test's proxy is gone by now), and the snapshotter would have to mount
  # every one again before it serves (failing for good on one whose registry is gone).
  rm -rf --one-file-system "$LAZY/containerd" "$LAZY_SN_ROOT"
  log "starting the stargz snapshotter ($LAZY_SN_SOCK)"
  # Loopback registries are plain HTTP to it; the public one is TLS with the stack's CA and auth.
  # No background fetch: a layer's bytes come only when read, so a test can count what a start
  # fetched (upstream fetches whole layers in the background after a few idle seconds).
  setsid "$LAZY_BIN" -root "$LAZY_SN_ROOT" -address "$LAZY_SN_SOCK" -no-background-fetch \
    -tls "127.0.0.1:$(port_of public)=$STACK/certs/ca.crt" \
    -creds "127.0.0.1:$(port_of public)=xpu:$STACK/auth/password" \
    >"$LAZY/stargz.log" 2>&1 </dev/null 8>&- &
  echo $! >"$LAZY/stargz.pid"
  wait_for "the stargz snapshotter (see $LAZY/stargz.log)" 30 test -S "$LAZY_SN_SOCK"
  log "starting containerd ($LAZY_SOCK)"
  lazy_containerd_config
  setsid containerd --config "$LAZY/containerd.toml" >"$LAZY/containerd.log" 2>&1 </dev/null 8>&- &
  echo $! >"$LAZY/containerd.pid"
  wait_for "containerd with the stargz snapshotter (see $LAZY/containerd.log)" 60 lazy_ready
  exec 8>&-
  lazy_env
}

unmount_under() {  # unmount_under DIR: every mount below DIR, deepest first
  local mp
  awk -v d="$1/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r mp; do
    umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || true
  done
}

stop_one() {  # stop_one PIDFILE PROGRAM [SIGNAL]: SIGNAL (TERM), then KILL after 20 s
  alive "$1" "$2" || { rm -f "$1"; return 0; }
  kill -s "${3:-TERM}" "$(cat "$1")" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while alive "$1" "$2" && ((SECONDS < deadline)); do sleep 0.2; done
  if alive "$1" "$2"; then kill -9 "$(cat "$1")" 2>/dev/null || true; sleep 0.5; fi
  rm -f "$1"
}

stop_lazy() {
  [[ -d "$LAZY" ]] || return 0
  # Containers first (their shims outlive containerd), while containerd still answers.
  if alive "$LAZY/containerd.pid" "$LAZY/containerd.toml"; then
    local ns id
    for ns in $(ctr --address "$LAZY_SOCK" namespaces ls -q 2>/dev/null); do
      for id in $(ctr --address "$LAZY_SOCK" -n "$ns" tasks ls -q 2>/dev/null); do
        ctr --address "$LAZY_SOCK" -n "$ns" tasks rm -f "$id" >/dev/null 2>&1 || true
      done
    done
  fi
  stop_one "$LAZY/containerd.pid" "$LAZY/containerd.toml"
  stop_one "$LAZY/stargz.pid" "$LAZY_BIN" INT  # on SIGINT it unmounts its layers as it closes
  unmount_under "$LAZY"
  rm -f "$LAZY_SOCK" "$LAZY_SOCK.ttrpc" "$LAZY_SN_SOCK"
}

cmd_up() {  # cmd_up [ARCH...]: the architectures the base must serve beyond amd64
  local arch
  for arch in "$@"; do
    [[ "$arch" =~ ^(amd64|arm64)$ ]] || die "no base is made for architecture '$arch' (amd64, arm64)"
  done
  mkdir -p "$STACK" && chmod 755 "$STACK"
  ensure_packages
  ensure_emulation
  start_engine
  make_certs
  make_auth
  for r in "${REGISTRIES[@]}"; do registry_up "$r"; done
  write_registries_override
  seed_base "$@"
  log "up ($STACK)"
}

cmd_base() {  # cmd_base ARCH...
  local arch
  for arch in "$@"; do
    [[ "$arch" =~ ^(amd64|arm64)$ ]] || die "no base is made for architecture '$arch' (amd64, arm64)"
  done
  [[ -f "$STACK/registries.local.yaml" ]] || die "the stack is not up: run ci/local-stack.sh up $*"
  seed_base "$@"
}

cmd_env() {
  [[ -f "$STACK/registries.local.yaml" ]] || die "the stack is not up: run ci/local-stack.sh up"
  echo "export DOCKER_HOST=$(engine_host)"
  echo "export DOCKER_CONFIG=$STACK/docker-config"
  echo "export XPU_RELEASE_REGISTRIES=$STACK/registries.local.yaml"
  echo "export XPU_STACK_DIR=$STACK"
  echo "export XPU_STACK_PUBLIC_USER=xpu"
  echo "export XPU_STACK_PUBLIC_PASSWORD_FILE=$STACK/auth/password"
  echo "export XPU_STACK_CA=$STACK/certs/ca.crt"
  echo "export XPU_STACK_CERT_DIR=$STACK/trust"
  if lazy_running; then lazy_env; fi
}

cmd_status() {
  local ok=0
  if DOCKER_HOST="$(engine_host)" docker info >/dev/null 2>&1; then
    echo "engine    up    $(engine_host)"
  else
    echo "engine    down"; ok=1
  fi
  for r in "${REGISTRIES[@]}"; do
    if alive "$STACK/registries/$r/pid"; then
      echo "registry  up    $r 127.0.0.1:$(port_of "$r")"
    else
      echo "registry  down  $r"; ok=1
    fi
  done
  if lazy_running; then echo "lazy      up    containerd $LAZY_SOCK, snapshotter stargz"; fi
  return $ok
}

cmd_reset() {
  # Lazy pulling stops (`lazy` starts it again, afresh) and its images and snapshots go.
  stop_lazy
  rm -rf --one-file-system "$LAZY/containerd" "$LAZY_SN_ROOT"
  # Bounded disk: drop what earlier runs published and built; the hub (base images) stays.
  for r in "${REGISTRIES[@]}"; do
    [[ "$r" == hub ]] && continue
    local dir="$STACK/registries/$r"
    if alive "$dir/pid"; then kill "$(cat "$dir/pid")" || true; fi
    rm -f "$dir/pid"
    rm -rf "$dir/data"
  done
  # The engine first: one that a reboot or a CI harness stopped still holds the containers and
  # images of the runs before (a container an interrupted run left behind outlived a reset that
  # found the engine down and skipped this).
  if own_engine; then
    mkdir -p "$STACK" && chmod 755 "$STACK"
    ensure_packages
    start_engine
  fi
  if DOCKER_HOST="$(engine_host)" docker info >/dev/null 2>&1; then
    DOCKER_HOST="$(engine_host)" docker ps -aq --filter label=io.xpu-release.container \
      | xargs -r env DOCKER_HOST="$(engine_host)" docker rm -f >/dev/null
    if own_engine; then
      # The stack started this engine: everything in it is ours.
      DOCKER_HOST="$(engine_host)" docker system prune -af >/dev/null
    else
      # Another engine (XPU_STACK_DOCKER_HOST): only the images xpu-release made and labelled.
      DOCKER_HOST="$(engine_host)" docker images -q --filter label=io.xpu-release.inputs.sha256 \
        | sort -u | xargs -r env DOCKER_HOST="$(engine_host)" docker rmi -f >/dev/null 2>&1 || true
    fi
  fi
  # xpu-release's own caches: copied blobs, build contexts, smoke markers and kept evaluations
  # (measured on this engine's images: a reset measures again) go; the wheel and artifact cache
  # (content-addressed by the committed locks) stays.
  local cache="${XPU_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/xpu-release}"
  rm -rf "$cache/oci-blobs" "$cache/contexts" "$cache/tested" "$cache/evaluated"
  cmd_up
}

cmd_down() {
  stop_lazy
  for r in "${REGISTRIES[@]}"; do
    local dir="$STACK/registries/$r"
    if alive "$dir/pid"; then kill "$(cat "$dir/pid")"; fi
    rm -f "$dir/pid"
  done
  if alive "$STACK/docker/dockerd.pid"; then
    kill "$(cat "$STACK/docker/dockerd.pid")"
    local deadline=$((SECONDS + 30))
    while alive "$STACK/docker/dockerd.pid" && ((SECONDS < deadline)); do sleep 0.2; done
  fi
  rm -f "$STACK/docker/dockerd.pid" "$OWN_SOCK"
  log "down"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  base) shift; cmd_base "$@" ;;
  lazy) cmd_lazy ;;
  env) cmd_env ;;
  status) cmd_status ;;
  reset) cmd_reset ;;
  down) cmd_down ;;
  *) echo "usage: $0 up [ARCH...]|base ARCH...|lazy|env|status|reset|down" >&2; exit 2 ;;
esac
