#!/usr/bin/env bash
# Run the AWS SAM CLI from its own virtualenv (.venv-sam), creating it on first use.
#   bash scripts/sam.sh build            -> sam build (python3.12/arm64, no Docker)
#   bash scripts/sam.sh deploy --guided  -> any other sam command is passed through
# The SAM CLI is kept out of .venv: its pins (boto3, jsonschema, ...) would fight the project's.
set -euo pipefail
cd "$(dirname "$0")/.."

SAM_VERSION="${SAM_VERSION:-1.170.0}"
SAM_VENV=.venv-sam
export SAM_CLI_TELEMETRY=0
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

ensure_sam() {
  if [[ -x "$SAM_VENV/bin/sam" ]] && [[ -f "$SAM_VENV/.sam-$SAM_VERSION" ]]; then
    return 0
  fi
  echo "Installing aws-sam-cli==$SAM_VERSION into $SAM_VENV (one time, ~1 min)..." >&2
  ensure_python312  # the SAM CLI's venv on the project's one Python minor version too
  local py="${PYTHON:-python3.12}"
  [[ -x "$SAM_VENV/bin/python" ]] || "$py" -m venv "$SAM_VENV"
  "$SAM_VENV/bin/pip" install --quiet --disable-pip-version-check "aws-sam-cli==$SAM_VERSION" 2>&1 \
    | grep -v "^WARNING: Location" >&2 || true
  "$SAM_VENV/bin/sam" --version >/dev/null
  touch "$SAM_VENV/.sam-$SAM_VERSION"
}

# `sam build` for runtime python3.12 needs a python3.12 on PATH (it pip-installs for that version
# and downloads manylinux aarch64 wheels). Use one from PATH, else from pyenv.
ensure_python312() {
  if python3.12 --version >/dev/null 2>&1; then
    return 0
  fi
  local root candidate
  root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for candidate in "$root"/versions/3.12*/bin; do
    if [[ -x "$candidate/python3.12" ]]; then
      export PATH="$candidate:$PATH"
      return 0
    fi
  done
  echo "sam build needs Python 3.12 on PATH (the Lambda runtime is python3.12)." >&2
  echo "Install it (e.g. 'pyenv install 3.12' or your OS package) and retry." >&2
  exit 1
}

ensure_sam
case "${1:-}" in
  build)
    shift
    ensure_python312
    exec "$SAM_VENV/bin/sam" build --cached --parallel "$@"
    ;;
  "")
    exec "$SAM_VENV/bin/sam" --help
    ;;
  *)
    exec "$SAM_VENV/bin/sam" "$@"
    ;;
esac
