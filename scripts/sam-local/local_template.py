"""Write the template ``sam local`` runs: ``template.yaml`` adapted to local containers.

    python scripts/sam-local/local_template.py OUT.yaml [--arch x86_64]

``template.yaml`` stays the deployed truth; this copy changes only what ``sam local`` cannot do:

* every function and the ragchat layer are built and run for ``--arch`` (x86_64: the stand-in
  base image and the machine's Python are x86_64): the ``Architecture`` parameter defaults to it
  and only the layer built for it is kept;
* the machine API (API-key clients) is left out: ``start-api`` keeps one route per path and
  method, the last defined, so its routes would replace the main API's;
* the Cognito authorizer becomes a local Lambda TOKEN authorizer (``authorizer/app.py``): sign in
  with ``Authorization: Bearer $RAGCHAT_API_TOKEN`` (``env.local.json``);
* ``ChatStreamFunction`` runs behind the Lambda Web Adapter, a remote layer ``sam local`` cannot
  fetch without AWS credentials: it keeps no route and no remote layer, and its route (chat turns,
  JSON) is served by ``ChatApiFunction``, whose router has it too;
* no function names a layer: the built ragchat layer and the local extras (numpy, onnxruntime,
  tokenizers, the exported MiniLM: what the LOCAL backend needs and the layer does not ship) are
  baked into the image ``sam_local.sh`` passes as ``--invoke-image`` (``layers_in_the_image``);
* the variables ``env.local.json`` sets are declared (``--env-vars`` only overrides variables the
  template declares).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MAIN_API = "RagchatApi"
MACHINE_API = "MachineApi"
STREAM_FUNCTION = "ChatStreamFunction"
CHAT_FUNCTION = "ChatApiFunction"
AUTHORIZER = "LocalTokenAuthorizer"
AUTHORIZER_FUNCTION = "LocalTokenAuthorizerFunction"
# Declared so env.local.json can set them (values here are the local defaults).
LOCAL_VARIABLES = {
    "RAGCHAT_DATA_DIR": "/tmp/ragchat",  # /var/task is read-only; /tmp is the writable place
    "RAGCHAT_MODEL_DIR": "/opt/models",  # the exported MiniLM, baked into the invoke image
    "RAGCHAT_API_TOKEN": "",
    "RAGCHAT_LOCAL_USER": "local",
}


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML with CloudFormation's short tags (``!Ref x`` -> ``{"Ref": "x"}``, ``!Sub`` -> ``Fn::Sub``)."""


def _intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_Loader.add_multi_constructor("!", _intrinsic)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(path.read_text(), Loader=_Loader)
    return data


def references(node: Any, name: str) -> bool:
    """Whether ``node`` refers to the resource ``name`` (Ref, GetAtt, ``${name}``/``${name.x}`` in a Sub)."""
    if isinstance(node, dict):
        if node.get("Ref") == name:
            return True
        att = node.get("Fn::GetAtt")
        if isinstance(att, list) and att and att[0] == name:
            return True
        sub = node.get("Fn::Sub")
        text = sub[0] if isinstance(sub, list) and sub else sub
        if isinstance(text, str) and ("${" + name + "}" in text or "${" + name + "." in text):
            return True
        return any(references(v, name) for v in node.values())
    if isinstance(node, list):
        return any(references(v, name) for v in node)
    return False


def remove_resource(template: dict[str, Any], name: str) -> None:
    """Drop ``name`` and, transitively, every resource and output that refers to or depends on it."""
    resources = template["Resources"]
    resources.pop(name, None)
    for other in [k for k, v in resources.items() if references(v, name) or _depends_on(v, name)]:
        remove_resource(template, other)
    outputs = template.get("Outputs") or {}
    for key in [k for k, v in outputs.items() if references(v, name)]:
        del outputs[key]


def _depends_on(resource: dict[str, Any], name: str) -> bool:
    deps = resource.get("DependsOn") or []
    return name in ([deps] if isinstance(deps, str) else deps) or any(
        str(d).startswith(name) for d in ([deps] if isinstance(deps, str) else deps)
    )


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v.get("Type") == "AWS::Serverless::Function"}


def set_architecture(template: dict[str, Any], arch: str) -> str:
    """Everything built and run for ``arch``; returns the logical id of the ragchat layer kept.

    The template has one layer per architecture (``Architecture`` parameter; the wheels are
    compiled): the copy keeps the one built for ``arch``, unconditionally, and drops the others (so
    ``sam build`` does not build them). A template with a single layer has it rebuilt for ``arch``.
    """
    template.setdefault("Globals", {}).setdefault("Function", {})["Architectures"] = [arch]
    if "Architecture" in (template.get("Parameters") or {}):
        template["Parameters"]["Architecture"]["Default"] = arch
    resources = template["Resources"]
    for props in (f.get("Properties") or {} for f in functions(template).values()):
        if "Architectures" in props:
            props["Architectures"] = [arch]
    layers: list[str] = [k for k, v in resources.items() if v.get("Type") == "AWS::Serverless::LayerVersion"]
    if not layers:
        raise SystemExit("template.yaml has no AWS::Serverless::LayerVersion (the ragchat layer)")
    built_for = {k: (resources[k].get("Metadata") or {}).get("BuildArchitecture") for k in layers}
    keep = next((k for k in layers if built_for[k] == arch), layers[0])
    for other in (k for k in layers if k != keep):
        del resources[other]
    layer = resources[keep]
    layer.pop("Condition", None)
    layer.setdefault("Properties", {})["CompatibleArchitectures"] = [arch]
    layer.setdefault("Metadata", {})["BuildArchitecture"] = arch
    return keep


def drop_machine_api(template: dict[str, Any]) -> None:
    for function in functions(template).values():
        events = (function.get("Properties") or {}).get("Events") or {}
        for key in [k for k, e in events.items() if references(e, MACHINE_API)]:
            del events[key]
    remove_resource(template, MACHINE_API)


def serve_chat_turns_without_adapter(template: dict[str, Any]) -> None:
    fns = functions(template)
    stream, chat = fns.get(STREAM_FUNCTION), fns.get(CHAT_FUNCTION)
    if stream is None or chat is None:
        return
    props = stream["Properties"]
    for key, event in (props.pop("Events", None) or {}).items():
        if event.get("Type") == "Api" and references(event, MAIN_API):
            event = copy.deepcopy(event)
            event["Properties"].pop("ResponseTransferMode", None)
            chat["Properties"].setdefault("Events", {})[f"Local{key}"] = event
    props.pop("Layers", None)
    props.pop("ProvisionedConcurrencyConfig", None)
    variables = (props.get("Environment") or {}).get("Variables") or {}
    variables.pop("AWS_LAMBDA_EXEC_WRAPPER", None)


def local_authorizer(template: dict[str, Any]) -> None:
    api = template["Resources"][MAIN_API]["Properties"]
    auth = api.setdefault("Auth", {})
    previous = auth.get("DefaultAuthorizer")
    auth["DefaultAuthorizer"] = AUTHORIZER
    auth["Authorizers"] = {
        AUTHORIZER: {
            "FunctionArn": {"Fn::GetAtt": [AUTHORIZER_FUNCTION, "Arn"]},
            "Identity": {"Header": "Authorization", "ReauthorizeEvery": 0},
        }
    }
    for function in functions(template).values():
        for event in ((function.get("Properties") or {}).get("Events") or {}).values():
            event_auth = (event.get("Properties") or {}).get("Auth") or {}
            if previous and event_auth.get("Authorizer") == previous:
                event_auth["Authorizer"] = AUTHORIZER
    template["Resources"][AUTHORIZER_FUNCTION] = {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            "Description": "local only: Bearer $RAGCHAT_API_TOKEN -> RAGCHAT_LOCAL_USER",
            "CodeUri": str(Path(__file__).resolve().parent / "authorizer"),
            "Handler": "app.handler",
            "MemorySize": 256,
            "Timeout": 10,
        },
    }


def layers_in_the_image(template: dict[str, Any]) -> None:
    """No function names a layer: ``sam local`` rebuilds its image on every invocation when a layer
    is defined in the template (~15 s each), so ``sam_local.sh`` bakes the built ragchat layer and
    the local extras into the image it passes as ``--invoke-image`` (under /opt, as layers are)."""
    function = template.setdefault("Globals", {}).setdefault("Function", {})
    function.pop("Layers", None)
    for props in (f.get("Properties") or {} for f in functions(template).values()):
        props.pop("Layers", None)
    variables = function.setdefault("Environment", {}).setdefault("Variables", {})
    for key, value in LOCAL_VARIABLES.items():
        variables.setdefault(key, value)


def absolute_paths(template: dict[str, Any], root: Path) -> None:
    """The copy lives elsewhere: local CodeUri/ContentUri/DefinitionUri become absolute."""
    for resource in template["Resources"].values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri", "DefinitionUri"):
            value = props.get(key)
            if isinstance(value, str) and not value.startswith("s3://"):
                props[key] = str((root / value).resolve())


def local_template(template: dict[str, Any], arch: str = "x86_64") -> dict[str, Any]:
    """The local copy; ``Metadata.RagchatLocalLayer`` names the layer to bake into the image."""
    out = copy.deepcopy(template)
    absolute_paths(out, ROOT)
    out.setdefault("Metadata", {})["RagchatLocalLayer"] = set_architecture(out, arch)
    drop_machine_api(out)
    serve_chat_turns_without_adapter(out)
    local_authorizer(out)
    layers_in_the_image(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--template", type=Path, default=ROOT / "template.yaml")
    parser.add_argument("--arch", default="x86_64", choices=["x86_64", "arm64"])
    parser.add_argument("--layer-out", type=Path, help="write the kept layer's logical id here")
    args = parser.parse_args(argv)
    out = local_template(load(args.template), args.arch)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.layer_out:  # a fresh clone has no .aws-sam/local yet
        args.layer_out.parent.mkdir(parents=True, exist_ok=True)
        args.layer_out.write_text(out["Metadata"]["RagchatLocalLayer"] + "\n")
    args.out.write_text(yaml.safe_dump(out, sort_keys=False, width=120))
    return 0


if __name__ == "__main__":
    sys.exit(main())
