"""What a brand-new account trips over on its first deploy and first use (issue 29), read from the
template as CloudFormation and IAM would run it: the roles that start ingestion may make every call
the Step Functions launcher makes, a default deploy reserves no concurrency, both APIs are REGIONAL,
the account's API Gateway role survives ``sam delete``, the first call to a third-party model may
subscribe the account, an absent upload reads 404, the secret parameter takes only an ARN IAM will
match (and its CMK), the collection's standby replicas follow the group's, the dead-letter queue's
name is generated, and every function logs to a log group of the stack with a retention.

``allows`` is a small, targeted IAM check (Allow statements, ``*``/``?`` wildcards in actions and
resource ARNs); the general evaluation of every recorded AWS call lives elsewhere."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

import pytest
from ragchat.adapters.aws.stepfunctions import StepFunctionsLauncher, execution_name

from tests.integration.test_template import ROOT, as_list, transformed
from tests.integration.test_template_cloud import role_statements
from tests.integration.test_template_deploy import FUNCTIONS, answer_resources, effective, env

ACCOUNT_REGION = "us-east-1:123456789012"
BUCKET_ARN = "arn:aws:s3:::ragchat-dev-documents-123456789012-1b2c3d4e"
DEPLOY_DOC = (ROOT / "docs" / "deploy.md").read_text()


def allows(res: dict[str, Any], role: str, action: str, arn: str) -> bool:
    """Whether one of ``role``'s Allow statements grants ``action`` on ``arn`` (no Deny is used)."""
    for st in role_statements(res, role):
        if st.get("Effect") != "Allow":
            continue
        if not any(fnmatchcase(action.lower(), str(a).lower()) for a in as_list(st["Action"])):
            continue
        if any(isinstance(r, str) and fnmatchcase(arn, r) for r in as_list(st["Resource"])):
            return True
    return False


def launcher_calls(res: dict[str, Any]) -> list[tuple[str, str]]:
    """(action, ARN) of every call StepFunctionsLauncher makes, for the stack's state machine."""
    name = res["IngestStateMachine"]["Properties"]["StateMachineName"]
    arn = f"arn:aws:states:{ACCOUNT_REGION}:stateMachine:{name}"
    launcher = StepFunctionsLauncher(arn, client=None)
    execution = launcher._execution_prefix + execution_name("a-document", 2)
    return [
        ("states:DescribeExecution", execution),
        ("states:StopExecution", execution),
        ("states:StartExecution", arn),
    ]


# ------------------------------------------------------------------------------ ingestion starts


def test_every_function_that_starts_ingestion_may_make_each_call_of_the_launcher() -> None:
    """The launcher looks attempts up (DescribeExecution), stops a superseded run and starts one: a
    role with only StartExecution makes the first ``POST /notes`` fail with AccessDenied."""
    res = effective()
    launchers = {fn for fn in FUNCTIONS if "STATE_MACHINE_ARN" in env(res, fn)}
    assert launchers == {"NotesApiFunction", "S3IngestFunction"}
    for fn in launchers:
        for action, arn in launcher_calls(res):
            assert allows(res, f"{fn}Role", action, arn), (fn, action, arn)


# ------------------------------------------------------------------------------ account quotas


def required_concurrency_quota(res: dict[str, Any]) -> int:
    """Lambda refuses a reservation that leaves fewer than 100 executions unreserved."""
    reserved = sum(int(v["Properties"].get("ReservedConcurrentExecutions", 0)) for v in res.values()
                   if v["Type"] == "AWS::Lambda::Function")  # fmt: skip
    return reserved + 100


def test_a_default_deploy_reserves_no_concurrency_and_the_docs_give_the_quota_formula() -> None:
    assert required_concurrency_quota(effective()) == 100  # any account: nothing reserved
    # what the formula in the docs and parameters says, for the old defaults and a prod-like choice
    assert (
        required_concurrency_quota(effective(ApiReservedConcurrency="10", IngestReservedConcurrency="15"))
        == 170
    )
    assert (
        required_concurrency_quota(effective(ApiReservedConcurrency="50", IngestReservedConcurrency="20"))
        == 340
    )
    formula = "4 × ApiReservedConcurrency + 2 × IngestReservedConcurrency + 100"
    assert formula in DEPLOY_DOC
    description = transformed()["Parameters"]["ApiReservedConcurrency"]["Description"]
    assert "4 x ApiReservedConcurrency + 2 x IngestReservedConcurrency + 100" in description


# ------------------------------------------------------------------------------ streams, account role


def test_both_apis_are_regional_so_a_stream_may_idle_past_30_seconds() -> None:
    res = effective()
    for api in ("RagchatApi", "MachineApi"):
        assert res[api]["Properties"]["EndpointConfiguration"] == {"Types": ["REGIONAL"]}, api


def test_the_account_api_gateway_role_outlives_the_stack_that_set_it() -> None:
    """``AWS::ApiGateway::Account`` is account-wide and never reset: deleting the role it points at
    would break access logging for every stack in the Region."""
    template = transformed()["Resources"]
    role = template["ApiGatewayCloudWatchRole"]
    assert role["DeletionPolicy"] == "Retain" and role["UpdateReplacePolicy"] == "Retain"
    assert "RoleName" not in role["Properties"]  # a second stack's role never collides with it
    assert "CreateApiGatewayAccountRole" in DEPLOY_DOC


# ------------------------------------------------------------------------------ first question


@pytest.mark.parametrize(("params", "subscribers"), [
    ({}, {"ChatApiFunctionRole", "ChatStreamFunctionRole", "NotesApiFunctionRole"}),
    ({"Embedder": "cohere"}, {"ChatApiFunctionRole", "ChatStreamFunctionRole", "NotesApiFunctionRole",
                              "IngestStepsFunctionRole"}),
    ({"ChatModelProvider": "extractive"}, set()),
])  # fmt: skip
def test_the_roles_calling_third_party_models_may_subscribe_on_the_first_call(
    params: dict[str, str], subscribers: set[str]
) -> None:
    res = effective(**params)
    roles = {k for k, v in res.items() if v["Type"] == "AWS::IAM::Role"}
    for role in roles:
        may = all(
            allows(res, role, a, "*")
            for a in ("aws-marketplace:ViewSubscriptions", "aws-marketplace:Subscribe")
        )
        assert may == (role in subscribers), role
    for role in subscribers - {"IngestStepsFunctionRole"}:
        assert answer_resources(res, role) or params, role  # the answering roles call Claude
    assert "aws bedrock-runtime converse" in DEPLOY_DOC  # the documented first call


# ------------------------------------------------------------------------------ S3, secrets


@pytest.mark.parametrize("role", ["S3IngestFunctionRole", "NotesApiFunctionRole", "IngestStepsFunctionRole"])
def test_roles_that_read_keys_which_may_be_absent_may_list_the_bucket_so_they_read_404(role: str) -> None:
    """S3IngestFunction: a duplicate event for a claimed, removed upload; NotesApiFunction: a PDF's
    text before the split step kept it (409), a body gone (404); IngestStepsFunction: a body or batch
    file gone. Each expects NoSuchKey; without ``s3:ListBucket`` S3 answers 403 AccessDenied."""
    res = effective()
    assert allows(res, role, "s3:ListBucket", BUCKET_ARN)
    listing = [st for st in role_statements(res, role) if "s3:ListBucket" in as_list(st["Action"])]
    assert all("Condition" not in st for st in listing)  # GetObject carries no s3:prefix


SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ragchat/anthropic-a1B2c3"


@pytest.mark.parametrize(("value", "accepted"), [
    ("", True),
    (SECRET, True),
    ("arn:aws:secretsmanager:us-east-1:123456789012:secret:ragchat/anthropic", False),  # partial
    ("arn:aws:secretsmanager:us-east-1:123456789012:secret:ragchat/anthropic-*", False),
    ("arn:aws:secretsmanager:us-east-1:123456789012:secret:", False),
])  # fmt: skip
def test_the_secret_parameter_takes_only_a_complete_arn(value: str, accepted: bool) -> None:
    pattern = transformed()["Parameters"]["AnthropicApiKeySecretArn"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, value)) == accepted


def test_a_secret_under_a_customer_managed_key_can_be_decrypted_through_secrets_manager_only() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    res = effective(AnthropicApiKeySecretArn=SECRET, AnthropicApiKeySecretKmsKeyArn=key)
    readers = {"NotesApiFunctionRole", "ChatApiFunctionRole", "ChatStreamFunctionRole", "WebUiFunctionRole"}
    for role in readers:
        assert allows(res, role, "secretsmanager:GetSecretValue", SECRET), role
        (decrypt,) = [st for st in role_statements(res, role) if "kms:Decrypt" in as_list(st["Action"])]
        assert decrypt["Resource"] == key
        assert decrypt["Condition"] == {
            "StringEquals": {"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"}
        }
    without_key = effective(AnthropicApiKeySecretArn=SECRET)
    for role in readers:
        assert not allows(without_key, role, "kms:Decrypt", key), role


# ------------------------------------------------------------------------------ names, logs


@pytest.mark.parametrize("standby", ["ENABLED", "DISABLED"])
def test_the_collection_has_the_standby_replicas_of_its_group(standby: str) -> None:
    res = effective(VectorStore="opensearch-nextgen", CollectionStandbyReplicas=standby)
    assert res["VectorCollectionGroup"]["Properties"]["StandbyReplicas"] == standby
    assert res["VectorCollection"]["Properties"]["StandbyReplicas"] == standby


def test_queues_have_generated_names() -> None:
    """A deleted queue's name can't be reused for 60 s: a redeploy right after ``sam delete`` failed."""
    for logical_id, resource in effective().items():
        if resource["Type"] == "AWS::SQS::Queue":
            assert "QueueName" not in resource["Properties"], logical_id


@pytest.mark.parametrize(("stage", "days"), [("dev", 14), ("prod", 90)])
def test_every_function_and_the_state_machine_log_to_a_group_of_the_stack_with_a_retention(
    stage: str, days: int
) -> None:
    res = effective(Stage=stage)
    groups = {k for k, v in res.items() if v["Type"] == "AWS::Logs::LogGroup"}
    for fn in FUNCTIONS:
        ref = res[fn]["Properties"]["LoggingConfig"]["LogGroup"]
        assert ref["Ref"] in groups, fn
    logged = res["IngestStateMachine"]["Properties"]["LoggingConfiguration"]["Destinations"]
    assert logged[0]["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0] in groups
    names = set()
    for group in groups:
        props = res[group]["Properties"]
        assert props["RetentionInDays"] == days, group
        assert "DeletionPolicy" not in res[group], group  # deleted with the stack
        names.add(props["LogGroupName"])
    assert len(names) == len(groups)


@pytest.mark.parametrize(("stage", "versioned"), [("dev", False), ("prod", True)])
def test_the_kept_bucket_can_be_removed_with_the_documented_commands(stage: str, versioned: bool) -> None:
    """A bucket that ever had versioning (even Suspended) keeps delete markers that ``aws s3 rb
    --force`` can't remove: dev has none; prod's versions are deleted by the documented loop."""
    bucket = effective(Stage=stage)["DocumentsBucket"]["Properties"]
    assert ("VersioningConfiguration" in bucket) == versioned
    if versioned:
        assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    delete = DEPLOY_DOC.split("**5. Delete.**", 1)[1]
    assert "aws s3 rb s3://$B --force" in delete
    assert "list-object-versions" in delete and "delete-objects" in delete


def test_no_function_pays_for_a_snapstart_cache_while_idle() -> None:
    """SnapStart's cache is billed per GB-second while a version is active (~$5.9 a month for the
    1.5 GB chat function) to save ~0.8 s on a conversations request: off; the idle-cost table in the
    docs lists what a deployed, idle stack does cost (KMS key, alarms)."""
    for logical_id, resource in effective().items():
        if resource["Type"] == "AWS::Lambda::Function":
            assert "SnapStart" not in resource["Properties"], logical_id
    idle = DEPLOY_DOC.split("### Idle cost", 1)[1].split("\n## ", 1)[0]
    for item in ("KMS key", "alarms", "SnapStart"):
        assert item in idle, item


def test_the_idle_cost_table_adds_up_what_a_default_deploy_bills_with_no_traffic() -> None:
    """$1 per KMS key-month, $0.10 per alarm metric-month; nothing billed by the hour by default."""
    res = effective()
    keys = [k for k, v in res.items() if v["Type"] == "AWS::KMS::Key"]
    alarms = [v["Properties"] for v in res.values() if v["Type"] == "AWS::CloudWatch::Alarm"]
    metrics = sum(len([m for m in a.get("Metrics", []) if "MetricStat" in m]) or 1 for a in alarms)
    assert (len(keys), len(alarms), metrics) == (1, 5, 8)
    idle = DEPLOY_DOC.split("### Idle cost", 1)[1].split("\n### ", 1)[0]
    assert (
        "| alarms: 5xx rate, breaker opened, ingestion failed, ingestion runs stopped unfinished,"
        f" dead letters | {0.10 * metrics:.2f} |" in idle
    )
    assert f"| **total** | **≈ {1.00 * len(keys) + 0.10 * metrics:.2f}**" in idle
    for resource in res.values():  # nothing warm by default
        props = resource.get("Properties", {})
        assert "ProvisionedConcurrencyConfig" not in props and "SnapStart" not in props
    # the default vector store is S3 Vectors: storage-priced, no compute and no collection group
    types = {v["Type"] for v in res.values()}
    assert {"AWS::S3Vectors::VectorBucket", "AWS::S3Vectors::Index"} <= types
    assert "VectorCollectionGroup" not in res
    assert "| S3 Vectors bucket and index (default) | 0 + $0.06/GB stored |" in idle
    # the OpenSearch option, chosen, still idles at 0 OCU
    group = effective(VectorStore="opensearch-nextgen")["VectorCollectionGroup"]
    limits = group["Properties"]["CapacityLimits"]
    assert limits["MinIndexingCapacityInOcu"] == limits["MinSearchCapacityInOcu"] == 0
