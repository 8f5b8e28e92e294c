"""Each function's and the state machine's role, read from the translated template (the SAM
transform's output: SAM policy templates expanded into statements) and resolved to the ARNs of the
stack under test.

``Ref``/``Fn::GetAtt``/``Fn::Sub``/``Fn::Join``/``Fn::Select``/``Fn::Split``/``Fn::If`` are evaluated
with the parameters' defaults (or the values given), CloudFormation's pseudo parameters for account
123456789012 in the test's region, and the physical names the test gave its resources (a table's
``Ref`` is the moto table's name, the state machine's ``Ref`` its ARN, ...). A role's policies are its
inline ``Policies``, the customer managed policies of the template it lists in ``ManagedPolicyArns``
and every ``AWS::IAM::Policy``/``ManagedPolicy`` that names it in ``Roles``. AWS managed policies
(basic execution, X-Ray) grant logs and traces only, which the code never calls through boto3.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.aws_contracts.policy import statements_of

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"  # moto's default account, and the one test_template deploys to
STACK_ID = (
    f"arn:aws:cloudformation:{{region}}:{ACCOUNT}:stack/ragchat-dev/1b2c3d4e-aaaa-bbbb-cccc-000011112222"
)
_ARN_KINDS = {
    "AWS::Lambda::Function": "arn:aws:lambda:{region}:{account}:function:{name}",
    "AWS::SQS::Queue": "arn:aws:sqs:{region}:{account}:{name}",
    "AWS::DynamoDB::Table": "arn:aws:dynamodb:{region}:{account}:table/{name}",
    "AWS::S3::Bucket": "arn:aws:s3:::{name}",
    "AWS::KMS::Key": "arn:aws:kms:{region}:{account}:key/{name}",
    "AWS::SNS::Topic": "arn:aws:sns:{region}:{account}:{name}",
    "AWS::IAM::Role": "arn:aws:iam::{account}:role/{name}",
    "AWS::Cognito::UserPool": "arn:aws:cognito-idp:{region}:{account}:userpool/{name}",
}
_NO_VALUE = object()


@dataclass(frozen=True)
class Roles:
    """The statements of each principal: a function's logical id, or the state machine's."""

    statements: Mapping[str, list[dict[str, Any]]]
    functions_by_area: Mapping[str, str]  # "notes_api" -> "NotesApiFunction"
    state_machine: str  # the state machine's logical id (its role's statements are under it)
    role_arns: Mapping[str, str] = field(default_factory=dict)  # principal -> its role's ARN


def resolve_template(
    template: Mapping[str, Any],
    region: str,
    physical: Mapping[str, str],
    *,
    stack_id: str = STACK_ID,
    **params: str,
) -> dict[str, Any]:
    """The template's resources with every intrinsic function evaluated (see the module's doc).
    ``physical`` maps logical ids to the names the test's resources have (a state machine's: its ARN,
    as its ``Ref``); ``GetAtt X.Arn`` is built from the resource's type, ``GetAtt X.Name`` is the
    name (for a state machine: the last part of its ARN). A key ``"X.Attribute"`` in ``physical``
    gives that attribute's value (``"VectorCollection.CollectionEndpoint"``). ``stack_id``: the
    stack's ARN (``{region}`` filled in), whose id names most resources."""
    values: dict[str, Any] = {n: str(s.get("Default", "")) for n, s in template["Parameters"].items()}
    values.update(params)
    values.update(
        {
            "AWS::Region": region,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": stack_id.split("/")[1],
            "AWS::StackId": stack_id.format(region=region),
        }
    )
    resources = template["Resources"]
    for logical_id, resource in resources.items():
        default = logical_id  # a resource the test has no counterpart of: its Ref is its logical id
        if resource["Type"] == "AWS::IAM::ManagedPolicy":
            default = f"arn:aws:iam::{ACCOUNT}:policy/{logical_id}"
        name = physical.get(logical_id, default)
        values[logical_id] = name
        short = name.rsplit(":", 1)[-1]
        kind = _ARN_KINDS.get(resource["Type"])
        values[f"{logical_id}.Name"] = short
        values[f"{logical_id}.Arn"] = (
            kind.format(region=region, account=ACCOUNT, name=short) if kind else name
        )

    values.update({key: value for key, value in physical.items() if "." in key})

    def holds(name: str) -> bool:
        return bool(resolve(template["Conditions"][name]))

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (resolve(v) for v in node) if v is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((fn, args),) = node.items()
            if fn == "Ref":
                return _NO_VALUE if args == "AWS::NoValue" else values[args]
            if fn == "Fn::GetAtt":
                key = ".".join(args) if isinstance(args, list) else args
                return values.get(key, key)  # an attribute no policy of ours uses: its name
            if fn == "Condition":
                return holds(args)
            if fn == "Fn::If":
                name, yes, no = args
                return resolve(yes if holds(name) else no)
            got = resolve(args)
            if fn == "Fn::Equals":
                return str(got[0]) == str(got[1])
            if fn == "Fn::Not":
                return not got[0]
            if fn == "Fn::And":
                return all(got)
            if fn == "Fn::Or":
                return any(got)
            if fn == "Fn::Sub":
                text, variables = (got, {}) if isinstance(got, str) else got
                known = {**values, **variables}
                return re.sub(r"\$\{([^}!]+)\}", lambda m: str(known.get(m.group(1), m.group(1))), text)
            if fn == "Fn::Join":
                return got[0].join(got[1])
            if fn == "Fn::Split":
                return got[1].split(got[0])
            if fn == "Fn::Select":
                return got[1][int(got[0])]
        out = {k: resolve(v) for k, v in node.items()}
        return {k: v for k, v in out.items() if v is not _NO_VALUE}

    return {
        logical_id: resolve(copy.deepcopy(resource))
        for logical_id, resource in resources.items()
        if "Condition" not in resource or holds(resource["Condition"])
    }


def roles_of(resources: Mapping[str, Any], raw: Mapping[str, Any]) -> Roles:
    """``resources``: resolved (``resolve_template``); ``raw``: the translated template's resources
    (to follow a ``GetAtt Role.Arn`` back to the role's logical id)."""
    by_role: dict[str, list[dict[str, Any]]] = {}
    arn_to_policy = {
        f"arn:aws:iam::{ACCOUNT}:policy/{lid}": lid
        for lid, res in resources.items()
        if res["Type"] == "AWS::IAM::ManagedPolicy"
    }
    for lid, res in resources.items():
        if res["Type"] != "AWS::IAM::Role":
            continue
        docs = [p["PolicyDocument"] for p in res["Properties"].get("Policies", [])]
        for arn in res["Properties"].get("ManagedPolicyArns", []):
            policy = arn_to_policy.get(arn)
            if policy is not None:
                docs.append(resources[policy]["Properties"]["PolicyDocument"])
        by_role[lid] = statements_of(docs)
    for res in resources.values():
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            for role in res["Properties"].get("Roles", []):  # a role's Ref: its logical id (above)
                if role in by_role:
                    by_role[role].extend(statements_of([res["Properties"]["PolicyDocument"]]))

    def role_id(node: Any) -> str:
        return str(node["Fn::GetAtt"][0])

    statements: dict[str, list[dict[str, Any]]] = {}
    areas: dict[str, str] = {}
    arns: dict[str, str] = {}
    machine = ""
    for lid, res in raw.items():
        if lid not in resources:
            continue
        if res["Type"] == "AWS::Lambda::Function":
            statements[lid] = by_role[role_id(res["Properties"]["Role"])]
            arns[lid] = str(resources[lid]["Properties"]["Role"])
            key = res["Properties"]["Code"]["S3Key"]  # "<Function>/functions/<area>" once packaged
            if "/functions/" in key:
                areas[key.rsplit("/", 1)[-1]] = lid
        elif res["Type"] == "AWS::StepFunctions::StateMachine":
            statements[lid] = by_role[role_id(res["Properties"]["RoleArn"])]
            arns[lid] = str(resources[lid]["Properties"]["RoleArn"])
            machine = lid
    return Roles(statements, areas, machine, arns)


def translated_template() -> dict[str, Any] | None:
    """The SAM transform's output for the default parameters (``scripts/sam_transform.py`` in the SAM
    virtualenv that ``make validate`` creates before ``make test``), or ``None`` without that
    virtualenv outside CI (the IAM checks are then off, with a warning)."""
    return _translated()


@cache
def _translated() -> dict[str, Any] | None:
    sam_python = ROOT / ".venv-sam" / "bin" / "python"
    if not sam_python.exists():
        if os.environ.get("CI"):
            pytest.fail(".venv-sam is missing: `make validate` creates it before the tests")
        warnings.warn("no .venv-sam (run `make validate` once): IAM checks are off", stacklevel=2)
        return None
    args = [str(sam_python), "scripts/sam_transform.py", "template.yaml"]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, Any] = json.loads(out.stdout)
    return result
