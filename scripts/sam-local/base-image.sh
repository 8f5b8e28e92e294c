#!/usr/bin/env bash
# Make sure the Lambda Python 3.12 base image that `sam local` runs functions on is present:
#   public.ecr.aws/lambda/python:3.12-x86_64
# 1. already in the engine (cached: nothing to do); 2. `docker pull` (the official image);
# 3. otherwise built offline, as a stand-in with the same tag: `debootstrap --variant=minbase
#    bookworm` from the Debian mirror -> `docker import`; the machine's CPython 3.12 (pyenv or PATH)
#    as /var/lang, its shared libraries installed in the root file system; `awslambdaric` (and boto3,
#    as in the managed runtime) from PyPI in /var/runtime, started by /var/runtime/bootstrap.
# The stand-in is also saved as ${SAM_LOCAL_CACHE}/base-image.tar.gz and loaded from there when the
# engine lacks it. SAM_LOCAL_REBUILD_IMAGE=1 rebuilds it. Cold build ~4-5 min; loaded ~20 s.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
IMAGE="${SAM_LOCAL_BASE_IMAGE:-public.ecr.aws/lambda/python:3.12-x86_64}"
ROOTFS_IMAGE=ragchat-sam-local/bookworm-minbase:latest
CACHE="${SAM_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragchat-sam-local}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The shared libraries CPython's extension modules link (ssl, ctypes, sqlite3, readline, ...) and
# what onnxruntime/tokenizers need (libstdc++, libgcc, from minbase).
DEB_LIBS=libssl3,libffi8,libsqlite3-0,libreadline8,libncursesw6,libexpat1,libuuid1,libbz2-1.0,liblzma5,zlib1g,libnsl2,libtirpc3,libgdbm6,ca-certificates

log() { echo "sam-local: $*" >&2; }

# One build at a time (a second run waits, then finds the image cached).
mkdir -p "$CACHE"
exec 9>"$CACHE/base-image.lock"
flock 9

# debootstrap mounts /proc (and maybe /sys) in the tree: unmount before deleting anything in it.
remove_tree() {
  local dir="$1" m
  [[ -d "$dir" ]] || return 0
  for m in $(awk -v d="$dir" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" || true
  done
  rm -rf --one-file-system "$dir"
}

if [[ "${SAM_LOCAL_REBUILD_IMAGE:-0}" != 1 ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "base image $IMAGE is cached"
  exit 0
fi
if [[ "${SAM_LOCAL_REBUILD_IMAGE:-0}" != 1 ]] && timeout 120 docker pull -q "$IMAGE" >/dev/null 2>&1; then
  log "pulled $IMAGE"
  exit 0
fi
SAVED="$CACHE/base-image.tar.gz"
if [[ "${SAM_LOCAL_REBUILD_IMAGE:-0}" != 1 && -f "$SAVED" ]] && gunzip -c "$SAVED" | docker load -q >/dev/null; then
  log "cannot pull $IMAGE: loaded the stand-in saved in $SAVED"
  exit 0
fi
log "cannot pull $IMAGE: building the offline stand-in"

python312() {
  # (a pyenv shim on PATH may exist without answering: ask it)
  if python3.12 --version >/dev/null 2>&1; then python3.12 -c 'import sys; print(sys.executable)'; return; fi
  local root; root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  local found; found="$(ls -d "$root"/versions/3.12* 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$found" && -x "$found/bin/python3.12" ]] && { echo "$found/bin/python3.12"; return; }
  log "no CPython 3.12 found (PATH or pyenv): cannot build the stand-in image"; exit 1
}
PY="$(python312)"
PREFIX="$("$PY" -c 'import sys; print(sys.base_prefix)')"

start=$(date +%s)
if ! docker image inspect "$ROOTFS_IMAGE" >/dev/null 2>&1; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    [[ "$(id -u)" == 0 ]] || { log "debootstrap is missing (needs root to install)"; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  rootfs="$CACHE/rootfs"
  remove_tree "$rootfs"
  log "debootstrap --variant=minbase bookworm ($MIRROR)..."
  debootstrap --variant=minbase --include="$DEB_LIBS" bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  for m in proc sys dev/pts dev; do mountpoint -q "$rootfs/$m" && umount -l "$rootfs/$m"; done
  tar -C "$rootfs" -c . | docker import - "$ROOTFS_IMAGE" >/dev/null
  remove_tree "$rootfs"
fi

ctx="$CACHE/context"
rm -rf "$ctx" && mkdir -p "$ctx/lang" "$ctx/runtime"
log "copying CPython from $PREFIX as /var/lang (no site-packages, tests or tkinter)"
tar -C "$PREFIX" -c \
  --exclude='lib/python3.12/site-packages/*' --exclude='lib/python3.12/test' \
  --exclude='lib/python3.12/idlelib' --exclude='lib/python3.12/tkinter' \
  --exclude='lib/python3.12/lib-dynload/_tkinter*' --exclude='__pycache__' . | tar -C "$ctx/lang" -x
log "pip install awslambdaric boto3 -> /var/runtime"
"$PY" -m pip install --quiet --disable-pip-version-check --no-compile --target "$ctx/runtime" \
  awslambdaric boto3
cp "$HERE/bootstrap" "$ctx/runtime/bootstrap"
cp "$HERE/Dockerfile" "$ctx/Dockerfile"
# The preinstalled docker client's BuildKit path needs buildx; the classic builder needs nothing.
DOCKER_BUILDKIT=0 docker build -q --build-arg ROOTFS_IMAGE="$ROOTFS_IMAGE" -t "$IMAGE" "$ctx" \
  >"$CACHE/docker-build.log" 2>&1 || { tail -n 30 "$CACHE/docker-build.log" >&2; exit 1; }
rm -rf "$ctx"
# Saved next to the other caches: a new engine (a fresh CI machine restoring ~/.cache) loads it in
# seconds instead of rebuilding.
docker save "$IMAGE" | gzip -1 >"$SAVED.tmp" && mv "$SAVED.tmp" "$SAVED"
log "built the stand-in $IMAGE in $(( $(date +%s) - start )) s (saved: $SAVED)"
