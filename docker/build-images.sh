#!/usr/bin/env bash
# Builds lockbench's offline images FROM scratch out of binaries already on this host, for
# machines whose Docker engine cannot pull from any registry:
#
#   $LOCAL_REDIS_IMAGE      (default lockbench/redis:7.0-local)
#       Debian's redis-server, redis-sentinel (same binary, picked by name), redis-cli
#       (healthchecks) and /bin/sh (dash, for the sentinel's writable config), with every
#       shared library ldd reports and the dynamic loader. Runs as uid 999 in /data.
#   $LOCAL_TOXIPROXY_IMAGE  (default lockbench/toxiproxy:local)
#       the lockbench binary (cargo build --release, or $LOCKBENCH_BIN), debug info stripped,
#       with its shared libraries. Entrypoint `lockbench toxiproxy`, default args
#       `--listen 0.0.0.0:8474`. Runs as uid 65534.
#   $LOCAL_LOCKBENCH_IMAGE  (default lockbench/lockbench:local; only with --only lockbench)
#       the lockbench binary as above plus kubectl when the host has it (static), entrypoint
#       `lockbench`: the workers of `run --workers N --launcher compose|kubernetes` and the
#       coordinator's pod (deploy/kubernetes/README.md). Runs as uid 65534 unless told.
#
# Usage: docker/build-images.sh [--rebuild] [--only redis|toxiproxy|lockbench]
#   --rebuild   build even when the image already exists
#   --only X    build just one image (the default builds redis and toxiproxy)
# Environment:
#   LOCAL_REDIS_IMAGE, LOCAL_TOXIPROXY_IMAGE   image names (name:tag)
#   LOCKBENCH_BIN            use this lockbench binary instead of running cargo
#   LOCKBENCH_CARGO_PROFILE  cargo profile to build (default release; `dev` is faster to build)
#
# Idempotent: an existing redis image is kept when its recorded source hash matches the host's
# redis-server; an existing toxiproxy image is kept as is (use --rebuild after changing the
# code); an existing lockbench image is kept when its recorded binary hash matches. Exit codes: 0 ok, 1 build failed, 2 usage error or no Docker engine.
set -euo pipefail

LOCAL_REDIS_IMAGE="${LOCAL_REDIS_IMAGE:-lockbench/redis:7.0-local}"
LOCAL_TOXIPROXY_IMAGE="${LOCAL_TOXIPROXY_IMAGE:-lockbench/toxiproxy:local}"
LOCAL_LOCKBENCH_IMAGE="${LOCAL_LOCKBENCH_IMAGE:-lockbench/lockbench:local}"
LOCKBENCH_BIN="${LOCKBENCH_BIN:-}"
LOCKBENCH_CARGO_PROFILE="${LOCKBENCH_CARGO_PROFILE:-release}"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
prog="docker/build-images.sh"

say() { printf '%s: %s\n' "$prog" "$*"; }
die() {
  local code="$1"
  shift
  printf '%s: error: %s\n' "$prog" "$*" >&2
  exit "$code"
}

rebuild=0
only=all
while [ $# -gt 0 ]; do
  case "$1" in
    --rebuild) rebuild=1 ;;
    --only)
      [ $# -ge 2 ] || die 2 "--only needs an argument: redis, toxiproxy or lockbench"
      only="$2"
      shift
      ;;
    --only=*) only="${1#--only=}" ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die 2 "unknown argument '$1' (try --help)" ;;
  esac
  shift
done
case "$only" in
  all | redis | toxiproxy | lockbench) ;;
  *) die 2 "--only takes redis, toxiproxy or lockbench, not '$only'" ;;
esac

command -v docker >/dev/null 2>&1 ||
  die 2 "the docker CLI is not on PATH: install Docker (Debian: apt-get install docker.io docker-compose) to build images"
if ! docker_info_err="$(docker info 2>&1 >/dev/null)"; then
  die 2 "no Docker engine reachable ($(printf '%s' "$docker_info_err" | tail -n 1)); start dockerd or set DOCKER_HOST"
fi
# Without the buildx plugin, ask explicitly for the classic builder (works on every engine).
if ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi

stage="$(mktemp -d "${TMPDIR:-/tmp}/lockbench-images.XXXXXX")"
trap 'rm -rf "$stage"' EXIT

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
image_label() { docker image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }
image_size_mb() { docker image inspect -f '{{.Size}}' "$1" | awk '{printf "%.1f MB", $1 / 1000000}'; }

# copy_file SRC ROOTFS [DEST]: copies SRC (following symlinks, keeping the mode) to ROOTFS/DEST.
copy_file() {
  local src="$1" rootfs="$2" dest="${3:-$1}"
  mkdir -p "$rootfs$(dirname "$dest")"
  cp -L --preserve=mode "$src" "$rootfs$dest"
}

# copy_libs ROOTFS BINARY...: copies every shared library ldd lists, and the loader, at the
# paths ldd prints (so the loader finds them in its default search directories).
copy_libs() {
  local rootfs="$1" bin out lib
  shift
  for bin in "$@"; do
    if ! out="$(ldd "$bin" 2>&1)"; then
      case "$out" in
        *"not a dynamic executable"* | *"statically linked"*) continue ;;
        *) die 1 "ldd failed on $bin: $out" ;;
      esac
    fi
    if printf '%s\n' "$out" | grep -q 'not found'; then
      die 1 "$bin needs libraries that are missing on this host:"$'\n'"$(printf '%s\n' "$out" | grep 'not found')"
    fi
    while read -r lib; do
      if [ -n "$lib" ] && [ ! -e "$rootfs$lib" ]; then
        copy_file "$lib" "$rootfs"
      fi
    done < <(printf '%s\n' "$out" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
  done
}

# base_etc ROOTFS: the few files glibc and redis look at: users, groups, name service order.
base_etc() {
  local rootfs="$1"
  mkdir -p "$rootfs/etc" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'redis:x:999:999:redis:/data:/bin/sh' \
    'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$rootfs/etc/passwd"
  printf '%s\n' 'root:x:0:' 'redis:x:999:' 'nogroup:x:65534:' >"$rootfs/etc/group"
  printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$rootfs/etc/nsswitch.conf"
}

# docker_build IMAGE CONTEXT DOCKERFILE LABEL...: builds quietly, shows the log on failure.
docker_build() {
  local image="$1" context="$2" dockerfile="$3" label args=() old new
  shift 3
  for label in "$@"; do args+=(--label "$label"); done
  old="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
  if ! docker build --pull=false -f "$dockerfile" -t "$image" "${args[@]}" "$context" >"$stage/build.log" 2>&1; then
    cat "$stage/build.log" >&2
    die 1 "docker build of $image failed (log above)"
  fi
  # Drop the image this one replaces, unless a container or another tag still uses it.
  new="$(docker image inspect -f '{{.Id}}' "$image")"
  if [ -n "$old" ] && [ "$old" != "$new" ]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
}

ensure_redis_binaries() {
  local missing=0 b
  for b in redis-server redis-sentinel redis-cli; do
    [ -x "/usr/bin/$b" ] || missing=1
  done
  [ "$missing" = 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing redis-server redis-sentinel redis-tools with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      redis-server redis-sentinel redis-tools >/dev/null
  else
    die 1 "redis-server, redis-sentinel and redis-cli must be in /usr/bin: install them with \`apt-get install redis-server redis-sentinel redis-tools\` (as root)"
  fi
}

build_redis() {
  ensure_redis_binaries
  local real sha version rootfs t0
  real="$(readlink -f /usr/bin/redis-server)"
  sha="$(sha256sum "$real" | cut -d' ' -f1)"
  version="$(/usr/bin/redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')"
  if [ "$rebuild" = 0 ] && image_exists "$LOCAL_REDIS_IMAGE"; then
    if [ "$(image_label "$LOCAL_REDIS_IMAGE" org.lockbench.source-sha256)" = "$sha" ]; then
      say "$LOCAL_REDIS_IMAGE is up to date (redis $version, $(image_size_mb "$LOCAL_REDIS_IMAGE")); skipping (--rebuild forces)"
      return 0
    fi
    say "$LOCAL_REDIS_IMAGE was built from another redis-server binary; rebuilding"
  fi
  t0=$SECONDS
  rootfs="$stage/redis/rootfs"
  mkdir -p "$rootfs" "$stage/redis/data"
  base_etc "$rootfs"
  # redis picks its mode from argv[0]: redis-sentinel must be a link named redis-sentinel.
  copy_file "$real" "$rootfs" /usr/bin/redis-server
  ln -s redis-server "$rootfs/usr/bin/redis-sentinel"
  copy_file /usr/bin/redis-cli "$rootfs"
  copy_file "$(readlink -f /bin/sh)" "$rootfs" /bin/sh
  copy_libs "$rootfs" "$real" /usr/bin/redis-cli "$(readlink -f /bin/sh)"
  docker_build "$LOCAL_REDIS_IMAGE" "$stage/redis" "$script_dir/redis/Dockerfile" \
    "org.lockbench.source-sha256=$sha" "org.lockbench.redis-version=$version" \
    "org.opencontainers.image.description=redis $version from the host's Debian binaries"
  say "built $LOCAL_REDIS_IMAGE (redis $version, $(image_size_mb "$LOCAL_REDIS_IMAGE")) in $((SECONDS - t0)) s"
}

lockbench_binary() {
  if [ -n "$LOCKBENCH_BIN" ]; then
    [ -x "$LOCKBENCH_BIN" ] || die 1 "LOCKBENCH_BIN=$LOCKBENCH_BIN is not an executable file"
    printf '%s\n' "$LOCKBENCH_BIN"
    return 0
  fi
  command -v cargo >/dev/null 2>&1 ||
    die 1 "cargo is not on PATH: install Rust (rustup) or point LOCKBENCH_BIN at a built lockbench binary"
  local dir="$LOCKBENCH_CARGO_PROFILE"
  [ "$dir" = dev ] && dir=debug
  say "cargo build --profile $LOCKBENCH_CARGO_PROFILE --bin lockbench (in $repo_root)" >&2
  (cd "$repo_root" && cargo build --quiet --profile "$LOCKBENCH_CARGO_PROFILE" --bin lockbench) >&2 ||
    die 1 "cargo build failed"
  printf '%s\n' "${CARGO_TARGET_DIR:-$repo_root/target}/$dir/lockbench"
}

# stage_lockbench ROOTFS BIN: the base files, BIN as /usr/local/bin/lockbench (debug info
# stripped) and its shared libraries.
stage_lockbench() {
  local rootfs="$1" bin="$2"
  mkdir -p "$rootfs"
  base_etc "$rootfs"
  copy_file "$bin" "$rootfs" /usr/local/bin/lockbench
  if command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$rootfs/usr/local/bin/lockbench"
  fi
  copy_libs "$rootfs" "$bin"
}

build_toxiproxy() {
  if [ "$rebuild" = 0 ] && image_exists "$LOCAL_TOXIPROXY_IMAGE"; then
    say "$LOCAL_TOXIPROXY_IMAGE exists (binary sha256 $(image_label "$LOCAL_TOXIPROXY_IMAGE" org.lockbench.source-sha256 | cut -c1-12), $(image_size_mb "$LOCAL_TOXIPROXY_IMAGE")); skipping (--rebuild refreshes it from the current code)"
    return 0
  fi
  local t0=$SECONDS bin sha rootfs
  bin="$(lockbench_binary)"
  sha="$(sha256sum "$bin" | cut -d' ' -f1)"
  rootfs="$stage/toxiproxy/rootfs"
  stage_lockbench "$rootfs" "$bin"
  docker_build "$LOCAL_TOXIPROXY_IMAGE" "$stage/toxiproxy" "$script_dir/toxiproxy/Dockerfile" \
    "org.lockbench.source-sha256=$sha" \
    "org.lockbench.git-commit=$(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "org.opencontainers.image.description=lockbench's Toxiproxy-compatible server"
  say "built $LOCAL_TOXIPROXY_IMAGE ($(image_size_mb "$LOCAL_TOXIPROXY_IMAGE")) in $((SECONDS - t0)) s"
}

build_lockbench() {
  local t0=$SECONDS bin sha rootfs
  bin="$(lockbench_binary)"
  sha="$(sha256sum "$bin" | cut -d' ' -f1)"
  if [ "$rebuild" = 0 ] && image_exists "$LOCAL_LOCKBENCH_IMAGE" &&
    [ "$(image_label "$LOCAL_LOCKBENCH_IMAGE" org.lockbench.source-sha256)" = "$sha" ]; then
    say "$LOCAL_LOCKBENCH_IMAGE holds this lockbench binary ($(image_size_mb "$LOCAL_LOCKBENCH_IMAGE")); skipping (--rebuild forces)"
    return 0
  fi
  rootfs="$stage/lockbench/rootfs"
  stage_lockbench "$rootfs" "$bin"
  if command -v kubectl >/dev/null 2>&1; then
    copy_file "$(readlink -f "$(command -v kubectl)")" "$rootfs" /usr/local/bin/kubectl
    copy_libs "$rootfs" "$rootfs/usr/local/bin/kubectl"
  fi
  docker_build "$LOCAL_LOCKBENCH_IMAGE" "$stage/lockbench" "$script_dir/lockbench/Dockerfile" \
    "org.lockbench.source-sha256=$sha" \
    "org.lockbench.git-commit=$(git -C "$repo_root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    "org.opencontainers.image.description=lockbench (workers and coordinator of multi-worker runs)"
  say "built $LOCAL_LOCKBENCH_IMAGE ($(image_size_mb "$LOCAL_LOCKBENCH_IMAGE")) in $((SECONDS - t0)) s"
}

t_all=$SECONDS
case "$only" in
  all)
    build_redis
    build_toxiproxy
    ;;
  redis) build_redis ;;
  toxiproxy) build_toxiproxy ;;
  lockbench) build_lockbench ;;
esac
say "done in $((SECONDS - t_all)) s. Use them with: docker compose --env-file docker/local.env ... (REDIS_IMAGE=$LOCAL_REDIS_IMAGE TOXIPROXY_IMAGE=$LOCAL_TOXIPROXY_IMAGE)"
