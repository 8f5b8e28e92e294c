"""A first deploy into a fresh account, read from the template as CloudFormation would execute it
(issue 18; the template parts of issue 20): the answer model is a current Claude through an
inference profile and IAM allows exactly it, the stack can be deleted and deployed again, API stages
wait for the account's CloudWatch role, alarms can notify, no secret is invented, streamed answers get
the function's time, S3 access is narrowed to the prefixes each function uses, WAF is opt-in, and the
access log carries no query string or token. ``effective(region, **params)`` evaluates the template
for those parameter values in that Region."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.integration.test_template import (
    FUNCTIONS,
    PSEUDO,
    STREAMED,
    _evaluate,
    api_methods,
    as_list,
    transformed,
)
from tests.integration.test_template_cloud import role_statements

HAIKU = "anthropic.claude-haiku-5-5"
ANSWER_ACTIONS = {"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}
CHAT_ROLES = {"ChatApiFunctionRole", "ChatStreamFunctionRole", "NotesApiFunctionRole"}  # GET /?text= answers


def effective(region: str = "us-east-1", **params: str) -> dict[str, Any]:
    """As ``test_template.effective``, from one SAM transform: the parameters these tests vary only
    matter to CloudFormation (conditions, substitutions), not to the SAM translator."""
    resources: dict[str, Any] = _evaluate(transformed(), region, params)["Resources"]
    return resources


def effective_outputs(region: str = "us-east-1", **params: str) -> dict[str, Any]:
    outputs: dict[str, Any] = _evaluate(transformed(), region, params)["Outputs"]
    return outputs


def env(res: dict[str, Any], fn: str) -> dict[str, Any]:
    variables: dict[str, Any] = res[fn]["Properties"]["Environment"]["Variables"]
    return variables


def answer_resources(res: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The role's statements that may invoke the Claude answer model (not the embedders)."""
    return [
        st
        for st in role_statements(res, role)
        if ANSWER_ACTIONS & set(as_list(st["Action"])) and "claude" in json.dumps(st["Resource"])
    ]


# ------------------------------------------------------------------------------ 1. the answer model


@pytest.mark.parametrize(
    ("region", "profile"),
    [
        ("us-east-1", f"us.{HAIKU}"),
        ("us-west-2", f"us.{HAIKU}"),
        ("eu-west-1", f"eu.{HAIKU}"),
        ("ap-southeast-2", f"apac.{HAIKU}"),
        ("sa-east-1", f"global.{HAIKU}"),
    ],
)
def test_by_default_claude_haiku_5_5_answers_through_the_deploy_regions_inference_profile(
    region: str, profile: str
) -> None:
    from ragchat.config import default_bedrock_chat_model

    res = effective(region)
    for fn in FUNCTIONS:
        assert env(res, fn)["BEDROCK_CHAT_MODEL_ID"] == profile, fn
    assert default_bedrock_chat_model(region) == profile  # the code's default is the template's
    assert effective_outputs(region)["ChatModel"]["Value"] == f"bedrock:{profile}"


def test_iam_allows_exactly_the_profile_and_its_model_in_the_destination_regions() -> None:
    res = effective("eu-west-1")
    profile_arn = f"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.{HAIKU}"
    for role in CHAT_ROLES:
        on_profile, on_model = answer_resources(res, role)
        assert set(on_profile["Action"]) == ANSWER_ACTIONS
        assert on_profile["Resource"] == profile_arn
        assert as_list(on_model["Resource"]) == [f"arn:aws:bedrock:*::foundation-model/{HAIKU}"]
        assert on_model["Condition"] == {"StringEquals": {"bedrock:InferenceProfileArn": profile_arn}}
    for role in ("WebUiFunctionRole", "IngestStepsFunctionRole", "S3IngestFunctionRole"):
        assert answer_resources(res, role) == [], role


@pytest.mark.parametrize(
    ("params", "profile"),
    [
        ({"BedrockInferenceGeo": "global"}, f"global.{HAIKU}"),
        ({"BedrockChatModelId": "global.anthropic.claude-sonnet-4-5-20250929-v1:0"}, None),
        ({"BedrockChatModelId": "us.anthropic.claude-opus-4-1-20250805-v1:0"}, None),
        ({"BedrockChatModelId": "jp.anthropic.claude-sonnet-4-6"}, None),
        ({"BedrockChatModelId": "us.anthropic.claude-haiku-4-5-20251001-v1:0"}, None),
        ({"BedrockChatModelId": "global.anthropic.claude-opus-5-5"}, None),
        ({"BedrockChatModelId": "eu.anthropic.claude-sonnet-5-5"}, None),
    ],
)
def test_any_claude_profile_can_be_chosen_and_iam_follows_it(
    params: dict[str, str], profile: str | None
) -> None:
    profile = profile or params["BedrockChatModelId"]
    model = "anthropic." + profile.split(".", 2)[2]
    res = effective("us-east-1", **params)
    assert env(res, "ChatStreamFunction")["BEDROCK_CHAT_MODEL_ID"] == profile
    on_profile, on_model = answer_resources(res, "ChatApiFunctionRole")
    assert on_profile["Resource"] == f"arn:aws:bedrock:us-east-1:123456789012:inference-profile/{profile}"
    expected = [f"arn:aws:bedrock:*::foundation-model/{model}"]
    if profile.startswith("global."):  # a global profile is also authorised on the region-less ARN
        expected.append(f"arn:aws:bedrock:::foundation-model/{model}")
    assert as_list(on_model["Resource"]) == expected


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("", True),
        (f"us.{HAIKU}", True),
        ("global.anthropic.claude-sonnet-5-5", True),
        ("us.anthropic.claude-opus-5-5", True),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", True),  # 4.5 stays selectable
        ("global.anthropic.claude-opus-4-5-20251101-v1:0", True),
        ("apac.anthropic.claude-sonnet-4-20250514-v1:0", True),
        ("anthropic.claude-3-5-haiku-20241022-v1:0", False),  # retired, and not a profile
        (HAIKU, False),  # a foundation-model id: on-demand invocation is refused for current Claude
        ("us.anthropic.claude-haiku-5-5-preview", False),
        ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", False),
        ("us.amazon.nova-pro-v1:0", False),
        ("us.anthropic.claude-haiku-4-5.evil", False),  # the derived model id could not be trusted
    ],
)
def test_the_model_parameter_takes_only_claude_inference_profiles(value: str, accepted: bool) -> None:
    pattern = transformed()["Parameters"]["BedrockChatModelId"]["AllowedPattern"]
    assert bool(re.fullmatch(pattern, value)) == accepted


@pytest.mark.parametrize("provider", ["anthropic", "extractive", "auto"])
def test_no_role_may_invoke_claude_on_bedrock_unless_bedrock_answers(provider: str) -> None:
    params = {"ChatModelProvider": provider, "AnthropicApiKeySecretArn": SECRET}
    res = effective("us-east-1", **params)
    for role in CHAT_ROLES:
        assert answer_resources(res, role) == [], role
    assert effective_outputs("us-east-1", **params)["ChatModel"]["Value"] == provider


# --------------------------------------------------------------------------------- 2. redeployable

NAME_PROPERTIES = ("BucketName", "TableName", "VectorBucketName", "QueueName", "TopicName", "Name")


def test_nothing_kept_after_delete_has_a_name_a_redeploy_would_collide_with() -> None:
    """Whatever survives ``sam delete`` (Retain*) either has a generated name or one unique to the
    stack; stacks with different ids (a redeploy after delete) get different names."""
    template = transformed()
    first = effective()
    other_id = PSEUDO["AWS::StackId"].replace("1b2c3d4e", "9f8e7d6c")
    second = _evaluate(template, "us-east-1", {"AWS::StackId": other_id})["Resources"]
    kept = {
        k
        for k, v in template["Resources"].items()
        if "Retain" in str(v.get("DeletionPolicy", "")) and v["Type"] != "AWS::Lambda::Version"  # no name
    }
    assert {"DocumentsBucket", "DocumentsTable", "ConversationsTable"} <= kept
    for logical_id in kept:
        resource = template["Resources"][logical_id]
        # a failed first create leaves nothing behind; except the account's API Gateway CloudWatch
        # role, which the account setting may point at whatever happens to the stack
        wanted = "Retain" if logical_id == "ApiGatewayCloudWatchRole" else "RetainExceptOnCreate"
        assert resource["DeletionPolicy"] == wanted, logical_id
        for prop in NAME_PROPERTIES:
            names = [stack[logical_id]["Properties"].get(prop) for stack in (first, second)]
            assert names[0] is None or names[0] != names[1], (logical_id, prop)
    bucket = first["DocumentsBucket"]["Properties"]["BucketName"]
    assert bucket == "ragchat-dev-documents-123456789012-1b2c3d4e" and len(bucket) <= 63
    for fn in FUNCTIONS:
        assert env(first, fn)["DOCUMENTS_BUCKET"] == bucket, fn
    substitutions = first["IngestStateMachine"]["Properties"]["DefinitionSubstitutions"]
    assert substitutions["DocumentsBucket"] == bucket


# ------------------------------------------------------------------------------------- 3. ordering


def depends_on(res: dict[str, Any], start: str) -> set[str]:
    """Every resource ``start`` waits for: DependsOn, Ref, GetAtt and ``${X}`` in Sub, transitively."""

    def direct(node: Any) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            if "Ref" in node and node["Ref"] in res:
                found.add(node["Ref"])
            if "Fn::GetAtt" in node:
                found.add(node["Fn::GetAtt"][0])
            if "Fn::Sub" in node:
                text = node["Fn::Sub"] if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"][0]
                found |= {name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", text)} & set(res)
            for value in node.values():
                found |= direct(value)
        elif isinstance(node, list):
            for value in node:
                found |= direct(value)
        return found

    seen: set[str] = set()
    todo = [start]
    while todo:
        resource = res[todo.pop()]
        edges = direct(resource.get("Properties", {})) | direct(resource.get("Metadata", {}))
        edges |= set(as_list(resource.get("DependsOn", [])))
        for name in edges - seen:
            seen.add(name)
            todo.append(name)
    return seen


def test_each_api_stage_waits_for_the_account_cloudwatch_role_the_stack_creates() -> None:
    res = effective(CreateApiGatewayAccountRole="true")
    stages = [k for k, v in res.items() if v["Type"] == "AWS::ApiGateway::Stage"]
    assert sorted(stages) == ["MachineApiStage", "RagchatApiStage"]
    for stage in stages:
        assert res[stage]["Properties"]["AccessLogSetting"]["DestinationArn"]  # the reason it must wait
        assert {"ApiGatewayAccount", "ApiGatewayCloudWatchRole"} <= depends_on(res, stage), stage
    # without the role the handle stays (DependsOn must name something) and references nothing
    without = effective(CreateApiGatewayAccountRole="false")
    assert "ApiGatewayAccount" not in without
    assert without["ApiGatewayAccountReady"]["Metadata"] == {"AccountSettings": "none"}
    assert "ApiGatewayAccountReady" in depends_on(without, "RagchatApiStage")


# --------------------------------------------------------------------------------------- 4. alarms


def test_alarms_publish_to_a_topic_whose_key_cloudwatch_may_use_and_email_is_optional() -> None:
    res = effective()
    key_ref = res["AlarmTopic"]["Properties"]["KmsMasterKeyId"]
    assert key_ref == {"Ref": "AlarmTopicKey"}  # not alias/aws/sns: CloudWatch can't use that key
    policy = res["AlarmTopicKey"]["Properties"]["KeyPolicy"]["Statement"]
    cloudwatch = [st for st in policy if st["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
    assert len(cloudwatch) == 1
    assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(cloudwatch[0]["Action"])
    assert cloudwatch[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    assert res["AlarmTopicKey"]["Properties"]["EnableKeyRotation"] is True
    assert "AlarmEmailSubscription" not in res
    subscribed = effective(AlarmEmail="ops@example.com")["AlarmEmailSubscription"]["Properties"]
    assert subscribed["TopicArn"] == {"Ref": "AlarmTopic"}
    assert (subscribed["Protocol"], subscribed["Endpoint"]) == ("email", "ops@example.com")
    pattern = transformed()["Parameters"]["AlarmEmail"]["AllowedPattern"]
    assert re.fullmatch(pattern, "") and re.fullmatch(pattern, "ops@example.com")
    assert not re.fullmatch(pattern, "not an address")


# -------------------------------------------------------------------------------------- 5. secrets

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ragchat/anthropic-AbCdEf"


def secret_readers(res: dict[str, Any]) -> dict[str, Any]:
    roles = [k for k, v in res.items() if v["Type"] == "AWS::IAM::Role"]
    return {
        role: st["Resource"]
        for role in roles
        for st in role_statements(res, role)
        if any(a.startswith("secretsmanager:") for a in as_list(st["Action"]))
    }


def test_the_stack_invents_no_secret_and_without_one_nothing_reads_or_sends_a_key() -> None:
    text = json.dumps(transformed())
    assert "GenerateSecretString" not in text and "AWS::SecretsManager::Secret" not in text
    res = effective()
    assert secret_readers(res) == {}
    for fn in FUNCTIONS:
        assert "ANTHROPIC_SECRET_NAME" not in env(res, fn), fn
    rule = transformed()["Rules"]["AnthropicNeedsItsKey"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "ChatModelProvider"}, "anthropic"]}


def test_a_given_secret_is_read_by_the_answering_functions_and_health_only() -> None:
    from ragchat.config import load_settings

    res = effective(ChatModelProvider="auto", AnthropicApiKeySecretArn=SECRET)
    assert secret_readers(res) == dict.fromkeys(
        ["ChatApiFunctionRole", "ChatStreamFunctionRole", "NotesApiFunctionRole", "WebUiFunctionRole"], SECRET
    )
    for fn in FUNCTIONS:
        variables = env(res, fn)
        assert variables["ANTHROPIC_SECRET_NAME"] == SECRET and variables["RAGCHAT_CHAT_MODEL"] == "auto"
        given = {k: v if isinstance(v, str) else "placeholder" for k, v in variables.items()}
        assert load_settings(given).anthropic_secret_name == SECRET


# ------------------------------------------------------------------------------------ 6. streaming


def test_streamed_answers_may_last_as_long_as_the_streaming_function() -> None:
    res = effective()
    timeout_ms = int(res["ChatStreamFunction"]["Properties"]["Timeout"]) * 1000
    assert timeout_ms > 29_000
    for api in ("RagchatApi", "MachineApi"):
        for route, method in api_methods(api).items():
            integration = method["x-amazon-apigateway-integration"]
            if route == STREAMED:
                assert integration["responseTransferMode"] == "STREAM", api
                assert integration["timeoutInMillis"] == timeout_ms, api
            else:  # a buffered integration can't go past 29 s
                assert integration.get("timeoutInMillis", 29_000) <= 29_000, (api, route)


# ------------------------------------------------------------------ issue 20: S3 prefixes, WAF, logs

BUCKET_ARN = "arn:aws:s3:::ragchat-dev-documents-123456789012-1b2c3d4e"
S3_OBJECT_ACCESS = {
    "NotesApiFunctionRole": {
        "documents/*": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
        "uploads/*": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
        "extracted/*": {"s3:GetObject", "s3:DeleteObject"},
        "work/*": {"s3:DeleteObject"},
    },
    "IngestStepsFunctionRole": {
        "documents/*": {"s3:GetObject"},
        "uploads/*": {"s3:GetObject"},
        "extracted/*": {"s3:PutObject"},
        "work/*": {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
    },
    "S3IngestFunctionRole": {
        "uploads/*": {"s3:GetObject", "s3:DeleteObject"},
        "documents/*": {"s3:PutObject", "s3:DeleteObject"},
    },
    "IngestStateMachineRole": {"work/*": {"s3:GetObject"}},
}


LISTERS = {"NotesApiFunctionRole", "IngestStepsFunctionRole", "S3IngestFunctionRole"}


def s3_access(res: dict[str, Any], role: str) -> tuple[dict[str, set[str]], list[Any]]:
    """Object prefix → S3 actions of ``role``, and the conditions of its bucket-level statements."""
    objects: dict[str, set[str]] = {}
    listing = []
    for st in role_statements(res, role):
        actions = {a for a in as_list(st["Action"]) if a.startswith("s3:")}
        if not actions:
            continue
        for arn in as_list(st["Resource"]):
            assert isinstance(arn, str) and arn.startswith(BUCKET_ARN), (role, arn)
            if arn == BUCKET_ARN:
                assert actions == {"s3:ListBucket"}, role
                listing.append(st.get("Condition"))
            else:
                objects.setdefault(arn.removeprefix(BUCKET_ARN + "/"), set()).update(actions)
    return objects, listing


def test_each_role_reaches_only_the_bucket_prefixes_it_uses() -> None:
    res = effective()
    roles = [k for k, v in res.items() if v["Type"] == "AWS::IAM::Role"]
    for role in roles:
        objects, listing = s3_access(res, role)
        assert objects == S3_OBJECT_ACCESS.get(role, {}), role
        assert "*" not in objects, role  # never every object of the bucket
        # listing the bucket: only the roles that read keys that may be absent (S3 answers those 404
        # only to a role that may list, else 403), unconditioned (a GetObject carries no s3:prefix)
        assert listing == ([None] if role in LISTERS else []), role
    assert "S3CrudPolicy" not in json.dumps(transformed())


STAGE_ARN = "arn:${AWS::Partition}:apigateway:${AWS::Region}::/restapis/${API}/stages/${Stage}"


def test_every_function_that_counts_may_update_the_counters_table() -> None:
    """Rate limits (every API function: ENABLE_RATE_LIMITING) and single-use upload grants (the S3
    trigger claims them) are conditional updates in the counters table."""
    res = effective()
    counting = ["NotesApiFunctionRole", "ChatApiFunctionRole", "ChatStreamFunctionRole"]
    counting.append("S3IngestFunctionRole")
    for role in counting:
        statements = role_statements(res, role)
        updates = [st for st in statements if "dynamodb:UpdateItem" in as_list(st["Action"])]
        assert any("CountersTable" in json.dumps(st["Resource"]) for st in updates), role


def test_waf_is_opt_in_and_rate_limits_each_ip_on_both_apis() -> None:
    off = effective()
    assert not [k for k, v in off.items() if v["Type"].startswith("AWS::WAFv2::")]
    res = effective(EnableWaf="true", WafRateLimit="500")
    acl = res["WebAcl"]["Properties"]
    assert acl["Scope"] == "REGIONAL" and acl["DefaultAction"] == {"Allow": {}}
    (rate,) = [r for r in acl["Rules"] if "RateBasedStatement" in r["Statement"]]
    assert rate["Action"] == {"Block": {}}
    assert rate["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "IP"
    assert rate["Statement"]["RateBasedStatement"]["Limit"] == "500"
    associations = {k: v for k, v in res.items() if v["Type"] == "AWS::WAFv2::WebACLAssociation"}
    apis = set()
    for association in associations.values():
        assert association["Properties"]["WebACLArn"] == {"Fn::GetAtt": ["WebAcl", "Arn"]}
        arn = association["Properties"]["ResourceArn"]["Fn::Sub"]
        found = re.fullmatch(re.escape(STAGE_ARN).replace("API", r"(\w+)"), arn)
        assert found, arn
        apis.add(found.group(1))
        assert association["DependsOn"] == f"{found.group(1)}Stage"  # the stage must exist first
    assert apis == {"RagchatApi", "MachineApi"}


# $context variables an access log line may carry: no query string, raw path, header, API key value
# or token (``$context.resourcePath`` is the route template, ``/documents/{id}``)
ALLOWED_LOG_FIELDS = {
    "$context.requestId", "$context.identity.sourceIp", "$context.authorizer.claims.sub",
    "$context.identity.apiKeyId", "$context.httpMethod", "$context.resourcePath", "$context.status",
    "$context.responseLatency", "$context.integrationLatency", "$context.responseLength",
}  # fmt: skip


def test_the_access_log_carries_no_query_string_or_token() -> None:
    res = effective()
    for stage in ("RagchatApiStage", "MachineApiStage"):
        log_format = res[stage]["Properties"]["AccessLogSetting"]["Format"]
        line = json.loads(re.sub(r"\$context\.[\w.]+", "x", log_format))  # one JSON object per request
        assert "requestId" in line and "status" in line
        used = set(re.findall(r"\$context\.[\w.]+", log_format))
        assert used <= ALLOWED_LOG_FIELDS, (stage, used - ALLOWED_LOG_FIELDS)
        assert "$input" not in log_format and "$method" not in log_format
