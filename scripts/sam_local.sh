#!/usr/bin/env bash
# `make sam-local`: the functions in real Lambda containers (`sam local`), on the LOCAL backend.
#   bash scripts/sam_local.sh            engine, base image, extras, build, invoke every event, start-api
#   bash scripts/sam_local.sh build      ...up to `sam build` (then run `sam local` yourself, docs/deploy.md)
#   bash scripts/sam_local.sh invoke|api only that part (after a build)
#   bash scripts/sam_local.sh sam start-api [ARGS]   `sam local start-api` on that build (also
#                                        `sam invoke FUNCTION -e EVENT`, `sam start-lambda`)
# Steps (each cached, so a warm run only builds what changed and runs the checks):
#   1. a Docker engine (scripts/sam-local/engine.sh: installs docker.io and starts dockerd as root
#      with apt-get; elsewhere, with no engine running, prints why and exits 0 = skipped, or 1 when
#      SAM_LOCAL_REQUIRED=1);
#   2. public.ecr.aws/lambda/python:3.12-x86_64, pulled or built offline (scripts/sam-local/base-image.sh);
#   3. the local extras layer: numpy, onnxruntime, tokenizers (cp312 manylinux x86_64 wheels, the
#      versions .venv runs) and the exported MiniLM model from $RAGCHAT_DATA_DIR/models;
#   4. the local template (scripts/sam-local/local_template.py) and `sam build` of it for x86_64
#      into .aws-sam/local/build;
#   5. scripts/sam-local/smoke.py: `sam local invoke --skip-pull-image` of every event in events/,
#      each response checked, then `sam local start-api` on 127.0.0.1 with a few requests.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export SAM_CLI_TELEMETRY=0
export SAM_LOCAL_CACHE="${SAM_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ragchat-sam-local}"
OUT=.aws-sam/local
PY="$ROOT/.venv/bin/python"
# the per-user model cache every command reads (RAGCHAT_MODEL_DIR, else ~/.cache/ragchat/models)
MODELS="$("$PY" -c 'from ragchat.config import load_settings; print(load_settings().models_path)' 2>/dev/null || echo "${RAGCHAT_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ragchat/models}")"
EXTRAS_PKGS=(numpy onnxruntime tokenizers)

log() { echo "sam-local: $*" >&2; }

engine() {
  local rc=0
  bash scripts/sam-local/engine.sh || rc=$?
  if [[ $rc == 3 ]]; then
    if [[ "${SAM_LOCAL_REQUIRED:-0}" == 1 ]]; then
      log "SAM_LOCAL_REQUIRED=1 and no Docker engine: failing"; exit 1
    fi
    log "SKIPPED: no Docker engine here (start one, or run as root with apt-get to have it installed)"
    exit 0
  fi
  [[ $rc == 0 ]] || exit "$rc"
}

# The extras the LOCAL backend imports and the ragchat layer does not ship (it is built for the
# cloud backend), plus the model; one cached directory per (versions, model) combination.
extras() {
  local pins=() name version
  for name in "${EXTRAS_PKGS[@]}"; do
    version="$("$PY" -c "import importlib.metadata as m; print(m.version('$name'))")"
    pins+=("$name==$version")
  done
  [[ -f "$MODELS/all-MiniLM-L6-v2/model.onnx" ]] || { log "no exported model in $MODELS: run 'make model'"; exit 1; }
  local key; key="$(echo "${pins[*]}" "$(cat "$MODELS/all-MiniLM-L6-v2/manifest.json" 2>/dev/null)" | sha1sum | cut -c1-12)"
  EXTRAS="$SAM_LOCAL_CACHE/extras-$key"
  if [[ -f "$EXTRAS/.done" ]]; then
    return 0
  fi
  log "local extras layer: ${pins[*]} + MiniLM -> $EXTRAS"
  rm -rf "$EXTRAS" && mkdir -p "$EXTRAS/python" "$EXTRAS/models"
  # --no-deps: the embedder needs only these three (onnxruntime's own deps serve its tooling).
  "$PY" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps --target "$EXTRAS/python" \
    --implementation cp --python-version 3.12 --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    "${pins[@]}"
  cp -r "$MODELS/all-MiniLM-L6-v2" "$EXTRAS/models/"
  touch "$EXTRAS/.done"
}

build() {
  [[ "${SAM_LOCAL_SKIP_IMAGE:-0}" == 1 ]] || bash scripts/sam-local/base-image.sh
  extras
  "$PY" scripts/sam-local/local_template.py "$OUT/template.yaml" --layer-out "$OUT/layer-id"
  local start; start=$(date +%s)
  bash scripts/sam.sh build --template-file "$OUT/template.yaml" --build-dir "$OUT/build" \
    --cache-dir "$OUT/cache" >"$OUT/build.log" 2>&1 || { tail -n 30 "$OUT/build.log" >&2; exit 1; }
  log "sam build (x86_64) in $(( $(date +%s) - start )) s: $OUT/build/template.yaml"
  runtime_image
}

# The image every function runs on: the base image + the built ragchat layer + the local extras,
# under /opt as `sam local` would mount layers (it would rebuild its image on every invocation).
# One repository per content hash: `sam local` derives its own image's name from the repository.
runtime_image() {
  local layer="$OUT/build/$(cat "$OUT/layer-id")" base key image
  base="$(docker image inspect -f '{{.Id}}' public.ecr.aws/lambda/python:3.12-x86_64)"
  key="$( (echo "$base $EXTRAS"; tar -c --sort=name --mtime=@0 --owner=0 --group=0 -C "$layer" .) | sha1sum | cut -c1-12)"
  image="ragchat-sam-local/runtime-$key:latest"
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    local start; start=$(date +%s)
    printf 'FROM public.ecr.aws/lambda/python:3.12-x86_64\nCOPY python /opt/python\nCOPY models /opt/models\n' \
      >"$OUT/Dockerfile.runtime"
    tar -c -C "$OUT" --transform 's|^Dockerfile.runtime$|Dockerfile|' Dockerfile.runtime \
      -C "$ROOT/$layer" python -C "$EXTRAS" python models \
      | DOCKER_BUILDKIT=0 docker build -q -t "$image" - >"$OUT/runtime-image.log" 2>&1 \
      || { tail -n 30 "$OUT/runtime-image.log" >&2; exit 1; }
    # older runtime images (and the rapid images `sam local` built on them) are dead weight now
    docker images --format '{{.Repository}}:{{.Tag}}' | grep '^ragchat-sam-local/runtime-' \
      | grep -v "^ragchat-sam-local/runtime-$key:" | xargs -r docker rmi -f >/dev/null 2>&1 || true
    log "runtime image $image in $(( $(date +%s) - start )) s"
  fi
  echo "$image" >"$OUT/invoke-image"
}

smoke() {
  "$PY" scripts/sam-local/smoke.py "$@" --template "$OUT/build/template.yaml" --env-vars env.local.json \
    --invoke-image "$(cat "$OUT/invoke-image")"
}

# `bash scripts/sam_local.sh sam invoke|start-api|start-lambda ARGS`: `sam local ...` on the local
# build, with env.local.json (or SAM_LOCAL_ENV_VARS), --skip-pull-image and the runtime image.
sam_local() {
  local cmd="$1"; shift
  exec bash scripts/sam.sh local "$cmd" --template "$OUT/build/template.yaml" \
    --env-vars "${SAM_LOCAL_ENV_VARS:-env.local.json}" --skip-pull-image \
    --invoke-image "$(cat "$OUT/invoke-image")" "$@"
}

case "${1:-all}" in
  all) engine; build; smoke invoke; smoke api ;;
  _build-only) SAM_LOCAL_SKIP_IMAGE=1 build ;;
  build) engine; build ;;
  invoke | api) engine; smoke "$1" ;;
  sam) shift; engine; sam_local "$@" ;;
  *) echo "usage: $0 [all|build|invoke|api|sam invoke|start-api|start-lambda ARGS]" >&2; exit 2 ;;
esac
