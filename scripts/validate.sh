#!/usr/bin/env bash
# `make validate`: the deployment definition is well-formed before anything is deployed.
#   1. cfn-lint on template.yaml (from .venv, the dev extra)
#   2. sam validate --lint (SAM transform + lint) from .venv-sam, created on first use
#   3. every events/*.json and the state machine parse as JSON; the ASL is JSONPath only
# No AWS credentials are needed.
set -euo pipefail
cd "$(dirname "$0")/.."

export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export SAM_CLI_TELEMETRY=0
PY=.venv/bin/python
SAM_VERSION="${SAM_VERSION:-1.170.0}"

echo "validate: cfn-lint template.yaml"
.venv/bin/cfn-lint template.yaml

echo "validate: sam validate --lint"
if [[ ! -x .venv-sam/bin/sam || ! -f ".venv-sam/.sam-$SAM_VERSION" ]]; then
  # the project's one Python minor version (the Lambda runtime's): python3.12 on PATH, else pyenv's
  py="${PYTHON:-$(python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null ||
    ls -d "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python3.12 2>/dev/null | sort -V | tail -n 1)}"
  [[ -n "$py" ]] || py=python3
  if { [[ -x .venv-sam/bin/python ]] || "$py" -m venv .venv-sam; } &&
    .venv-sam/bin/pip install --quiet --disable-pip-version-check "aws-sam-cli==$SAM_VERSION" >/tmp/ragchat-sam-install.log 2>&1 &&
    .venv-sam/bin/sam --version >/dev/null; then
    touch ".venv-sam/.sam-$SAM_VERSION"
  else
    echo "validate: SKIPPED sam validate: could not install aws-sam-cli==$SAM_VERSION into .venv-sam" >&2
    grep -v "^WARNING: Location" /tmp/ragchat-sam-install.log | tail -5 >&2 || true
  fi
fi
if [[ -f ".venv-sam/.sam-$SAM_VERSION" ]]; then
  .venv-sam/bin/sam validate --lint --template template.yaml
fi

echo "validate: events/*.json and statemachine/*.asl.json"
"$PY" - <<'EOF'
import json
import pathlib
import sys

problems = []
events = sorted(pathlib.Path("events").glob("*.json"))
if not events:
    problems.append("events/: no sample events")
for path in events:
    try:
        json.loads(path.read_text())
    except ValueError as exc:
        problems.append(f"{path}: invalid JSON: {exc}")


def walk(node, where):
    if isinstance(node, dict):
        if node.get("QueryLanguage") == "JSONata":
            problems.append(f"{where}: QueryLanguage JSONata (the test emulator runs JSONPath only)")
        for key, value in node.items():
            if key in ("Assign", "Arguments", "Output"):
                problems.append(f"{where}.{key}: JSONata/variables are not allowed (JSONPath only)")
            walk(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            walk(value, f"{where}[{i}]")
    elif isinstance(node, str) and "{%" in node:
        problems.append(f"{where}: JSONata expression {node!r}")


machines = sorted(pathlib.Path("statemachine").glob("*.asl.json"))
if not machines:
    problems.append("statemachine/: no *.asl.json")
for path in machines:
    try:
        definition = json.loads(path.read_text())
    except ValueError as exc:
        problems.append(f"{path}: invalid JSON: {exc}")
        continue
    walk(definition, path.name)

for p in problems:
    print(f"validate: {p}", file=sys.stderr)
print(f"validate: {len(events)} events, {len(machines)} state machine(s) checked")
sys.exit(1 if problems else 0)
EOF

# `sam build` must work offline from Docker (issue: "sam build succeeds offline in CI"): build the
# layer and every function for python3.12/arm64, then check the layer really holds our package and
# Linux aarch64 binaries (not the x86_64 wheels of this machine).
echo "validate: sam build (layers arm64 + x86_64, functions, python3.12)"
if ! bash scripts/sam.sh build >/tmp/ragchat-sam-build.log 2>&1; then
  grep -v "^WARNING: Location" /tmp/ragchat-sam-build.log | tail -20 >&2
  echo "validate: sam build failed" >&2
  exit 1
fi
layer=.aws-sam/build/RagchatLayer/python
test -f "$layer/ragchat/__init__.py" || { echo "validate: layer lacks the ragchat package" >&2; exit 1; }
test -f "$layer/ragchat/samples/what-is-ragchat.md" || { echo "validate: layer lacks package data" >&2; exit 1; }
ls "$layer"/pydantic_core/_pydantic_core.cpython-312-aarch64-linux-gnu.so >/dev/null 2>&1 ||
  { echo "validate: layer lacks the python3.12 aarch64 pydantic_core binary" >&2; exit 1; }
# the layer holds exactly requirements.txt (layers/ragchat/Makefile): boto3 whole, no gRPC
test -f "$layer/boto3/__init__.py" && test -f "$layer/botocore/__init__.py" ||
  { echo "validate: the layer lacks boto3/botocore (bundled whole)" >&2; exit 1; }
if ls -d "$layer"/grpc "$layer"/google/protobuf "$layer"/opensearch_protobufs >/dev/null 2>&1; then
  echo "validate: the layer bundles gRPC/protobuf, which ragchat never imports" >&2; exit 1
fi
# Architecture=x86_64 (for `sam local` on x86_64 machines) uses its own layer build
ls .aws-sam/build/RagchatLayerX86/python/pydantic_core/_pydantic_core.cpython-312-x86_64-linux-gnu.so >/dev/null 2>&1 ||
  { echo "validate: RagchatLayerX86 lacks the python3.12 x86_64 pydantic_core binary" >&2; exit 1; }
for fn in NotesApiFunction ChatApiFunction WebUiFunction IngestStepsFunction S3IngestFunction; do
  test -f ".aws-sam/build/$fn/app.py" || { echo "validate: $fn was not built" >&2; exit 1; }
done
# the streaming function is a web server started by the Lambda Web Adapter: run.sh must stay executable
test -x .aws-sam/build/ChatStreamFunction/run.sh ||
  { echo "validate: ChatStreamFunction/run.sh missing or not executable in the build" >&2; exit 1; }
echo "validate: sam build OK ($(du -sh --apparent-size .aws-sam/build/RagchatLayer | cut -f1) layer unzipped)"
echo "validate: OK"
