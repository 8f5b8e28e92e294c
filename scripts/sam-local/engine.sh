#!/usr/bin/env bash
# Make sure a Docker engine answers (`sam local` runs each function in a container).
#   exit 0: `docker info` works (already running, or installed and started here)
#   exit 3: no engine and none can be set up here (not root, or no apt-get): callers skip
# As root with apt-get (CI, these machines): `apt-get install docker.io` when dockerd is missing,
# then a plain `dockerd` in the background (overlay2 storage, default bridge), logging to
# ${SAM_LOCAL_CACHE}/dockerd.log. It stays up for later runs.
set -euo pipefail
CACHE="${SAM_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragchat-sam-local}"

if docker info >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "sam-local: no Docker engine answers and none can be installed here (needs root and apt-get)" >&2
  exit 3
fi
mkdir -p "$CACHE"
if ! command -v dockerd >/dev/null 2>&1; then
  echo "sam-local: installing docker.io (apt-get)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "sam-local: starting dockerd (overlay2), log: $CACHE/dockerd.log" >&2
  # setsid: the engine outlives this script (and the make/pytest process that started it).
  setsid dockerd --storage-driver=overlay2 >"$CACHE/dockerd.log" 2>&1 </dev/null &
fi
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 1
done
echo "sam-local: dockerd did not answer within 60 s; see $CACHE/dockerd.log" >&2
tail -n 20 "$CACHE/dockerd.log" >&2 || true
exit 1
