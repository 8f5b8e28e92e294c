"""The stack as an account holds it (issue 44, item 4): every ingestion execution that ends
unfinished reaches the reconciler and an alarm; what survives ``sam delete`` can be reached again;
no resource has a fixed name, so two stacks (two stages, or two copies of one) deploy side by side
in one account. ``effective`` evaluates the transformed template as CloudFormation would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_template import (
    ROOT,
    _evaluate,
    as_list,
    effective,
    effective_outputs,
    statements,
    transformed,
)


def _matches(pattern: Any, event: Any) -> bool:
    """EventBridge's matching for the pattern forms used here: a list is the allowed values, a mapping
    descends into the event."""
    if isinstance(pattern, dict):
        return isinstance(event, dict) and all(_matches(v, event.get(k)) for k, v in pattern.items())
    return event in pattern


def test_every_execution_that_ends_unfinished_reaches_the_reconciler_and_an_alarm() -> None:
    res = effective()
    rules = {k: r for k, r in res.items() if r["Type"] == "AWS::Events::Rule"}
    ((name, rule),) = [
        (k, r) for k, r in rules.items() if r["Properties"]["EventPattern"].get("source") == ["aws.states"]
    ]
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail"]["stateMachineArn"] == [{"Ref": "IngestStateMachine"}]
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["IngestStepsFunction", "Arn"]}
    (permission,) = [r for r in res.values() if r["Type"] == "AWS::Lambda::Permission"
                     and r["Properties"].get("SourceArn") == {"Fn::GetAtt": [name, "Arn"]}]  # fmt: skip
    assert permission["Properties"]["Principal"] == "events.amazonaws.com"
    assert permission["Properties"]["FunctionName"] == {"Ref": "IngestStepsFunction"}

    # the event EventBridge sends (events/ingest_execution_timed_out.json) matches, for each way a run
    # ends unfinished, and a success does not
    event = json.loads((ROOT / "events" / "ingest_execution_timed_out.json").read_text())
    event["detail"]["stateMachineArn"] = {"Ref": "IngestStateMachine"}  # this stack's machine
    for status, wanted in {"FAILED": True, "TIMED_OUT": True, "ABORTED": True, "SUCCEEDED": False,
                           "RUNNING": False}.items():  # fmt: skip
        event["detail"]["status"] = status
        assert _matches(pattern, event) is wanted, status

    alarm = res["IngestExecutionsStoppedAlarm"]["Properties"]
    metrics = {m["MetricStat"]["Metric"]["MetricName"]: m["MetricStat"]["Metric"] for m in alarm["Metrics"]
               if "MetricStat" in m}  # fmt: skip
    assert metrics["ExecutionsTimedOut"]["Dimensions"] == [
        {"Name": "StateMachineArn", "Value": {"Ref": "IngestStateMachine"}}
    ]
    assert metrics["IngestionReconciled"]["Namespace"] == "ragchat"
    assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}]


# ---------------------------------------------------------------------------------------- names
# Two stacks of the same stage in one account and Region (a developer's copy beside the team's, or
# a redeploy while the old stack's kept data is still there): every name they give must differ.
OTHER_STACK = {
    "AWS::StackName": "ragchat-dev-copy",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/ragchat-dev-copy/"
    "9f8e7d6c-dddd-eeee-ffff-000033334444",
}
# name properties that cannot meet another stack's: scoped inside a resource of the same stack (the S3
# vector index within its per-stack vector bucket, an API's stage or deployment, a function's alias),
# or naming what a resource refers to rather than itself (the metric an alarm watches)
SCOPED = {
    ("AWS::S3Vectors::Index", "IndexName"),
    ("AWS::ApiGateway::Stage", "StageName"),
    ("AWS::ApiGateway::Deployment", "StageName"),
    ("AWS::Lambda::Alias", "Name"),
    ("AWS::CloudWatch::Alarm", "MetricName"),
}


def _names(resources: dict[str, Any]) -> dict[tuple[str, str], Any]:
    """(logical id, property) → the name each resource gives itself (top-level ``*Name``/``Name``
    properties; WAF metric names too, which CloudWatch keys by name)."""
    found: dict[tuple[str, str], Any] = {}
    for logical_id, resource in resources.items():
        props = resource.get("Properties") or {}
        for key, value in props.items():
            if key.endswith("Name") and (resource["Type"], key) not in SCOPED and not isinstance(value, dict):
                found[(logical_id, key)] = value
        visibility = props.get("VisibilityConfig") or {}
        if "MetricName" in visibility:
            found[(logical_id, "VisibilityConfig.MetricName")] = visibility["MetricName"]
    return found


@pytest.mark.parametrize("vector_store", ["opensearch-nextgen", "s3vectors"])
def test_two_stacks_of_one_stage_share_no_resource_name(vector_store: str) -> None:
    template = transformed(VectorStore=vector_store, EnableApiKeys="true", EnableWaf="true")
    params = {"VectorStore": vector_store, "EnableApiKeys": "true", "EnableWaf": "true"}
    first = _names(_evaluate(template, "us-east-1", params)["Resources"])
    second = _names(_evaluate(template, "us-east-1", {**params, **OTHER_STACK})["Resources"])
    assert first.keys() == second.keys() and len(first) >= 15, sorted(first)
    for where, name in first.items():
        assert isinstance(name, str), (where, name)  # computed from parameters and the stack alone
        assert name != second[where], f"{where} is named {name!r} in both stacks"  # no literal name
    # the alarms and the dashboard watch this stack's API, by its name
    api_name = first[("RagchatApi", "Name")]
    resources = _evaluate(template, "us-east-1", params)["Resources"]
    dimension = next(
        d["Value"]
        for m in resources["Api5xxRateAlarm"]["Properties"]["Metrics"] if "MetricStat" in m
        for d in m["MetricStat"]["Metric"]["Dimensions"] if d["Name"] == "ApiName"
    )  # fmt: skip
    assert dimension == api_name
    text, variables = resources["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]  # a GetAtt inside
    shown = text.replace("${Stage}", "dev").replace("${Id}", variables["Id"])
    assert f'"ApiName","{api_name}"' in shown


# ---------------------------------------------------------------------------- the kept user pool
def test_the_user_pool_outlives_the_stack_and_a_later_stack_re_attaches_it() -> None:
    res = effective()
    assert res["UserPool"]["DeletionPolicy"] == "RetainExceptOnCreate"  # kept, like the data it keys
    assert res["UserPool"]["UpdateReplacePolicy"] == "Retain"
    for kept in ("DocumentsTable", "ConversationsTable", "DocumentsBucket"):
        assert res[kept]["DeletionPolicy"] == "RetainExceptOnCreate", kept

    pool = "us-east-1_OldPool42"
    arn = f"arn:aws:cognito-idp:us-east-1:123456789012:userpool/{pool}"
    again = effective(ExistingUserPoolId=pool)
    assert "UserPool" not in again  # no new pool: the users keep their subs, and their data
    assert again["UserPoolClient"]["Properties"]["UserPoolId"] == pool
    env = again["NotesApiFunction"]["Properties"]["Environment"]["Variables"]
    assert env["COGNITO_USER_POOL_ID"] == pool
    authorizers = [r for r in again.values() if r["Type"] == "AWS::ApiGateway::Authorizer"]
    body = json.dumps(again["RagchatApi"]["Properties"].get("Body", {}))
    assert arn in body or any(arn in json.dumps(a) for a in authorizers)
    listing = [st for st in statements(again["NotesApiFunctionRole"]["Properties"]["Policies"])
               if "cognito-idp:ListUsers" in as_list(st["Action"])]  # fmt: skip
    assert [st["Resource"] for st in listing] == [arn]
    assert effective_outputs(ExistingUserPoolId=pool)["UserPoolId"]["Value"] == pool


# ------------------------------------------------------------------------ the kept data, re-attached
OLD = {
    "ExistingUserPoolId": "us-east-1_OldPool42",
    "ExistingDocumentsTableName": "ragchat-dev-DocumentsTable-OLD1",
    "ExistingConversationsTableName": "ragchat-dev-ConversationsTable-OLD2",
    "ExistingDocumentsBucketName": "ragchat-dev-documents-123456789012-0ld5tack",
    "ExistingVectorBucketName": "ragchat-dev-0ld5tack-vectors-123456789012",
}
OLD_INDEX = (
    f"arn:aws:s3vectors:us-east-1:123456789012:bucket/{OLD['ExistingVectorBucketName']}/index/ragchat-notes"
)
KEPT = ("DocumentsTable", "ConversationsTable", "DocumentsBucket", "NotesVectorBucket", "NotesVectorIndex")


def _rule_holds(node: Any, params: dict[str, str]) -> Any:
    """A rule's condition or assertion, evaluated as CloudFormation would for these parameters."""
    if isinstance(node, list):
        return [_rule_holds(v, params) for v in node]
    if not isinstance(node, dict):
        return node
    ((fn, args),) = node.items()
    if fn == "Ref":
        return params.get(args, "")
    got = _rule_holds(args, params)
    return {"Fn::Equals": lambda: got[0] == got[1], "Fn::Not": lambda: not got[0],
            "Fn::Or": lambda: any(got), "Fn::And": lambda: all(got)}[fn]()  # fmt: skip


def _refused(params: dict[str, str]) -> list[str]:
    """The AssertDescription of every rule these parameters break (CloudFormation refuses the deploy)."""
    rules = transformed()["Rules"]
    full = {n: str(s.get("Default", "")) for n, s in transformed()["Parameters"].items()} | params
    return [a["AssertDescription"] for r in rules.values()
            if _rule_holds(r.get("RuleCondition", True), full)
            for a in r["Assertions"] if not _rule_holds(a["Assert"], full)]  # fmt: skip


def test_the_data_outlives_the_stack_vectors_included() -> None:
    res = effective()  # the default: S3 Vectors
    for kept in KEPT:
        assert res[kept]["DeletionPolicy"] == "RetainExceptOnCreate", kept  # kept, removed on failed create
        assert res[kept]["UpdateReplacePolicy"] == "Retain", kept
    env = res["NotesApiFunction"]["Properties"]["Environment"]["Variables"]
    assert env["DOCUMENTS_TABLE"] == {"Ref": "DocumentsTable"}
    assert env["S3VECTORS_BUCKET"] == res["NotesVectorBucket"]["Properties"]["VectorBucketName"]
    outputs = effective_outputs()
    assert outputs["DocumentsBucketName"]["Value"] == res["DocumentsBucket"]["Properties"]["BucketName"]
    assert outputs["S3VectorsIndexArn"]["Value"] == {"Fn::GetAtt": ["NotesVectorIndex", "IndexArn"]}


def test_a_later_stack_uses_the_kept_tables_buckets_and_index_in_place_of_new_ones() -> None:
    res = effective(**OLD)
    for kept in KEPT:
        assert kept not in res, f"{kept} would be created again"
    text = json.dumps(res)
    for kept in KEPT:  # nothing refers to a resource that is not there (the deploy would fail)
        assert f'"Ref": "{kept}"' not in text and f'"Fn::GetAtt": ["{kept}"' not in text, kept
    fresh = effective()["DocumentsBucket"]["Properties"]["BucketName"]
    assert fresh not in text  # the new stack's own bucket name appears nowhere
    table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/"
    for lid, resource in res.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        env = resource["Properties"].get("Environment", {}).get("Variables", {})
        assert env["DOCUMENTS_TABLE"] == OLD["ExistingDocumentsTableName"], lid
        assert env["CONVERSATIONS_TABLE"] == OLD["ExistingConversationsTableName"], lid
        assert env["DOCUMENTS_BUCKET"] == OLD["ExistingDocumentsBucketName"], lid
        assert env["S3VECTORS_BUCKET"] == OLD["ExistingVectorBucketName"], lid
    granted = {lid: [r for st in statements(res[lid]["Properties"].get("Policies", []))
                     for r in as_list(st["Resource"])]
               for lid in ("NotesApiFunctionRole", "ChatApiFunctionRole", "IngestStepsFunctionRole",
                           "S3IngestFunctionRole")}  # fmt: skip
    assert f"{table_arn}{OLD['ExistingDocumentsTableName']}" in granted["NotesApiFunctionRole"]
    assert f"{table_arn}{OLD['ExistingConversationsTableName']}" in granted["ChatApiFunctionRole"]
    bucket = f"arn:aws:s3:::{OLD['ExistingDocumentsBucketName']}"
    assert f"{bucket}/documents/*" in granted["IngestStepsFunctionRole"]
    assert f"{bucket}/uploads/*" in granted["S3IngestFunctionRole"]
    for policy in ("ChatAnswerPolicy", "VectorIndexWritePolicy"):
        (vector,) = [st for st in statements(res[policy]["Properties"]["PolicyDocument"])
                     if st.get("Sid") == "VectorIndex"]  # fmt: skip
        assert vector["Resource"] == OLD_INDEX, policy
    # the kept bucket gets its TLS-only policy back; the state machine reads its manifests there
    assert res["DocumentsBucketPolicy"]["Properties"]["Bucket"] == OLD["ExistingDocumentsBucketName"]
    denied = res["DocumentsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"]
    assert denied == [bucket, f"{bucket}/*"]
    machine = res["IngestStateMachine"]["Properties"]["DefinitionSubstitutions"]
    assert machine["DocumentsBucket"] == OLD["ExistingDocumentsBucketName"]
    # S3 may invoke the upload function for any bucket of the account: the kept bucket's notification,
    # set after the deploy (docs/deploy.md), needs no other permission
    (permission,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::Lambda::Permission"
                     and r["Properties"]["Principal"] == "s3.amazonaws.com"]  # fmt: skip
    assert permission["FunctionName"] == {"Ref": "S3IngestFunction"} and "SourceArn" not in permission
    assert permission["SourceAccount"] == "123456789012"
    outputs = effective_outputs(**OLD)
    assert outputs["DocumentsTableName"]["Value"] == OLD["ExistingDocumentsTableName"]
    assert outputs["ConversationsTableName"]["Value"] == OLD["ExistingConversationsTableName"]
    assert outputs["DocumentsBucketName"]["Value"] == OLD["ExistingDocumentsBucketName"]
    assert outputs["S3VectorsIndexArn"]["Value"] == OLD_INDEX
    assert outputs["S3IngestFunctionArn"]["Value"] == {"Fn::GetAtt": ["S3IngestFunction", "Arn"]}


def test_kept_data_is_re_attached_only_with_its_users_and_whole() -> None:
    assert _refused(OLD) == []
    assert _refused({}) == []
    no_pool = {k: v for k, v in OLD.items() if k != "ExistingUserPoolId"}
    assert any("ExistingUserPoolId" in m for m in _refused(no_pool))
    rows_only = {k: OLD[k] for k in ("ExistingUserPoolId", "ExistingDocumentsTableName")}
    assert any("ExistingDocumentsBucketName" in m for m in _refused(rows_only))
    bodies_only = {k: OLD[k] for k in ("ExistingUserPoolId", "ExistingDocumentsBucketName")}
    assert any("ExistingDocumentsTableName" in m for m in _refused(bodies_only))
    assert any("s3vectors" in m for m in _refused({**OLD, "VectorStore": "opensearch-nextgen"}))
    # a stack kept before its vectors were (or on OpenSearch): tables and bucket alone are accepted
    assert _refused({k: v for k, v in OLD.items() if k != "ExistingVectorBucketName"}) == []
    # an OpenSearch stack re-attaching tables and bucket creates no S3 Vectors resource
    nextgen = effective(**{k: v for k, v in OLD.items() if k != "ExistingVectorBucketName"},
                        VectorStore="opensearch-nextgen")  # fmt: skip
    assert "NotesVectorBucket" not in nextgen and "VectorCollection" in nextgen
