"""The mutation engine of the IAM mutation test (tests/aws_contracts/mutations.py) on a small
template: which mutations it makes, and that a mutation is killed exactly when a recorded call needs
what it takes away."""

from __future__ import annotations

import json
from typing import Any

from tests.aws_contracts.mutations import Recorded, another, mutations, survivors
from tests.aws_contracts.policy import Request

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/docs"
ROLE = "arn:aws:iam::123456789012:role/FnRole"


def _template() -> tuple[dict[str, Any], dict[str, Any]]:
    resources: dict[str, Any] = {
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Role": ROLE, "Code": {"S3Key": "Fn/functions/fn"}},
        },
        "FnRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Policies": [
                    {
                        "PolicyName": "FnRolePolicy0",
                        "PolicyDocument": {
                            "Statement": [
                                {"Sid": "Table", "Effect": "Allow", "Action": ["dynamodb:GetItem"],
                                 "Resource": [TABLE, f"{TABLE}/index/*"]},
                                {"Sid": "Unused", "Effect": "Allow", "Action": ["sqs:SendMessage"],
                                 "Resource": "arn:aws:sqs:us-east-1:123456789012:dlq"},
                            ]
                        },
                    }
                ],
                "ManagedPolicyArns": ["arn:aws:iam::123456789012:policy/Shared"],
            },
        },
        "Shared": {
            "Type": "AWS::IAM::ManagedPolicy",
            "Properties": {"PolicyDocument": {"Statement": [
                {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogDelivery"], "Resource": "*"}
            ]}},
        },
        "Access": {
            "Type": "AWS::OpenSearchServerless::AccessPolicy",
            "Properties": {"Type": "data", "Policy": json.dumps([{
                "Rules": [{"ResourceType": "index", "Resource": ["index/coll/*"],
                           "Permission": ["aoss:ReadDocument", "aoss:WriteDocument"]}],
                "Principal": [ROLE],
            }])},
        },
    }  # fmt: skip
    raw = {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {
        "Role": {"Fn::GetAtt": ["FnRole", "Arn"]}, "Code": {"S3Key": "Fn/functions/fn"}}}}  # fmt: skip
    return resources, raw


def test_another_resource_is_of_the_same_type_and_star_has_none() -> None:
    assert another(TABLE) == "arn:aws:dynamodb:us-east-1:123456789012:table/docs-other"
    assert another(f"{TABLE}/index/*") == "arn:aws:dynamodb:us-east-1:123456789012:table/docs-other/index/*"
    assert another("arn:aws:s3:::bucket/work/*") == "arn:aws:s3:::bucket-other/work/*"
    model = "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"
    assert another(model) == "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-micro-v1:0"
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-x"
    assert (
        another(profile)
        == "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-micro-v1:0"
    )
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:ragchat-dev-ingest"
    assert another(machine) == f"{machine}-other"
    assert another("arn:aws:states:us-east-1:1:execution:ragchat-dev-ingest/*") == (
        "arn:aws:states:us-east-1:1:execution:ragchat-dev-ingest-other/*"
    )
    assert another("index/ragchat-dev/*") == "index/ragchat-dev-other/*"
    assert another("*") is None


def test_each_statement_is_removed_and_each_resource_moved_and_each_data_permission_dropped() -> None:
    resources, _ = _template()
    keys = {m.key for m in mutations(resources)}
    assert keys == {
        "FnRole/FnRolePolicy0/Table[dynamodb]: removed",
        f"FnRole/FnRolePolicy0/Table[dynamodb]: resource {TABLE} -> {TABLE}-other",
        f"FnRole/FnRolePolicy0/Table[dynamodb]: resource {TABLE}/index/* -> {TABLE}-other/index/*",
        "FnRole/FnRolePolicy0/Unused[sqs]: removed",
        "FnRole/FnRolePolicy0/Unused[sqs]: resource arn:aws:sqs:us-east-1:123456789012:dlq -> "
        "arn:aws:sqs:us-east-1:123456789012:dlq-other",
        "Shared/Logs[logs]: removed",  # "*": no other resource to point at
        "Access/index[aoss-data]: removed",
        "Access/index[aoss-data]: resource index/coll/* -> index/coll-other/*",
        "Access/index[aoss-data]: without aoss:ReadDocument",
        "Access/index[aoss-data]: without aoss:WriteDocument",
    }


def test_a_mutation_survives_exactly_when_no_recorded_call_needs_what_it_takes() -> None:
    resources, raw = _template()
    recorded = Recorded.of(
        [("Fn", Request("dynamodb:GetItem", TABLE, {}))],
        [("Fn", Request("aoss:WriteDocument", "index/coll/notes", {}))],
    )
    killed, surviving, total = survivors([(resources, raw, recorded)])
    assert total == 10
    assert surviving == {
        f"FnRole/FnRolePolicy0/Table[dynamodb]: resource {TABLE}/index/* -> {TABLE}-other/index/*",
        "FnRole/FnRolePolicy0/Unused[sqs]: removed",
        "FnRole/FnRolePolicy0/Unused[sqs]: resource arn:aws:sqs:us-east-1:123456789012:dlq -> "
        "arn:aws:sqs:us-east-1:123456789012:dlq-other",
        "Shared/Logs[logs]: removed",
        "Access/index[aoss-data]: without aoss:ReadDocument",
    }
    assert killed["FnRole/FnRolePolicy0/Table[dynamodb]: removed"] == (
        f"Fn: dynamodb:GetItem on {TABLE} is implicitly denied (no statement allows it)"
    )
    assert "aoss:WriteDocument" in killed["Access/index[aoss-data]: without aoss:WriteDocument"]
