"""What IAM is asked for an AWS API call: the action(s) and the resource ARN(s), built from the
call's parameters as the service's authorization reference defines them (one call may need several:
``TransactWriteItems`` needs the item action on every table it writes; ``DeleteObjects`` needs
``s3:DeleteObject`` on every key; ``ListObjectsV2`` is ``s3:ListBucket`` with the ``s3:prefix`` key).

A call this module can't map raises ``Unmapped``: a new kind of call must be taught here rather than
pass unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.aws_contracts.policy import Request
from tests.aws_contracts.roles import ACCOUNT


class Unmapped(Exception):
    """The harness does not know which action/ARN this call needs."""


# operations whose IAM action is not "<prefix>:<OperationName>"
_ACTIONS = {
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("bedrock", "Converse"): "bedrock:InvokeModel",
    ("bedrock", "ConverseStream"): "bedrock:InvokeModelWithResponseStream",
}
_TRANSACT = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _table(region: str, name: str, index: str | None = None) -> str:
    arn = name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{name}"
    return f"{arn}/index/{index}" if index else arn


def _dynamodb(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return [Request(f"dynamodb:{operation}", _table(region, t), {}) for t in params["RequestItems"]]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for item in params["TransactItems"]:
            ((kind, body),) = item.items()
            action = "GetItem" if kind == "Get" else _TRANSACT[kind]
            out.append(Request(f"dynamodb:{action}", _table(region, body["TableName"]), {}))
        return out
    if "TableName" in params:
        return [
            Request(f"dynamodb:{operation}", _table(region, params["TableName"], params.get("IndexName")), {})
        ]
    raise Unmapped(f"dynamodb:{operation}")


def _s3(operation: str, params: Mapping[str, Any]) -> list[Request]:
    bucket = params["Bucket"]
    action = _ACTIONS.get(("s3", operation), f"s3:{operation}")
    if operation == "DeleteObjects":
        keys = [o["Key"] for o in params["Delete"]["Objects"]]
        return [Request("s3:DeleteObject", f"arn:aws:s3:::{bucket}/{k}", {}) for k in keys]
    if operation in ("ListObjectsV2", "ListObjects", "HeadBucket"):
        context = {"s3:prefix": params["Prefix"]} if "Prefix" in params else {}
        return [Request(action, f"arn:aws:s3:::{bucket}", context)]
    if "Key" in params:
        out = [Request(action, f"arn:aws:s3:::{bucket}/{params['Key']}", {})]
        if operation == "CopyObject":
            source = params["CopySource"]
            source = source if isinstance(source, str) else f"{source['Bucket']}/{source['Key']}"
            out.append(Request("s3:GetObject", f"arn:aws:s3:::{source.lstrip('/')}", {}))
        return out
    raise Unmapped(f"s3:{operation}")


def _states(operation: str, params: Mapping[str, Any]) -> list[Request]:
    arn = params.get("executionArn") or params.get("stateMachineArn")
    if arn is None:
        raise Unmapped(f"states:{operation}")
    return [Request(f"states:{operation}", arn, {})]


# Where a cross-Region inference profile may send a request (Bedrock's "supported Regions and models
# for inference profiles"; a sample of each geography is enough here: IAM must allow every one, since
# any may serve a call). A global profile may use any commercial Region.
PROFILE_DESTINATIONS = {
    "us": ("us-east-1", "us-east-2", "us-west-2"),
    "eu": ("eu-central-1", "eu-west-1", "eu-west-3", "eu-north-1"),
    "apac": ("ap-northeast-1", "ap-south-1", "ap-southeast-2"),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "ca": ("ca-central-1", "ca-west-1"),
    "global": ("us-east-1", "eu-west-1", "ap-northeast-1", "sa-east-1"),
}


def _bedrock(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    """A foundation model: its ARN in the Region. A cross-Region inference profile: the profile in
    this account and Region, then the foundation model in each Region it may route to, with
    ``bedrock:InferenceProfileArn`` set (and, for a global profile, the Region-less model ARN), as
    Bedrock authorizes such a call."""
    model = params["modelId"]
    action = _ACTIONS.get(("bedrock", operation), f"bedrock:{operation}")
    if model.startswith("arn:"):
        return [Request(action, model, {})]
    geo, _, base = model.partition(".")
    if geo in PROFILE_DESTINATIONS:
        profile = f"arn:aws:bedrock:{region}:{ACCOUNT}:inference-profile/{model}"
        via = {"bedrock:InferenceProfileArn": profile}
        out = [Request(action, profile, {})]
        out += [
            Request(action, f"arn:aws:bedrock:{r}::foundation-model/{base}", via)
            for r in PROFILE_DESTINATIONS[geo]
        ]
        if geo == "global":
            out.append(Request(action, f"arn:aws:bedrock:::foundation-model/{base}", via))
        return out
    return [Request(action, f"arn:aws:bedrock:{region}::foundation-model/{model}", {})]


def _lambda(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    name = params.get("FunctionName")
    if name is None or operation != "Invoke":
        raise Unmapped(f"lambda:{operation}")
    arn = name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}"
    return [Request("lambda:InvokeFunction", arn, {})]


def _ssm(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    name = params.get("Name")
    if name is None:
        raise Unmapped(f"ssm:{operation}")
    arn = name if name.startswith("arn:") else f"arn:aws:ssm:{region}:{ACCOUNT}:parameter/{name.lstrip('/')}"
    return [Request(f"ssm:{operation}", arn, {})]


def _s3vectors(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    arn = params.get("indexArn") or (
        f"arn:aws:s3vectors:{region}:{ACCOUNT}:bucket/{params['vectorBucketName']}/index/{params['indexName']}"
    )
    return [Request(f"s3vectors:{operation}", arn, {})]


def _sqs(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    name = params["QueueUrl"].rstrip("/").rsplit("/", 1)[-1]
    return [Request(f"sqs:{operation}", f"arn:aws:sqs:{region}:{ACCOUNT}:{name}", {})]


def _secrets(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    secret = params["SecretId"]
    # a name resolves to the secret's full ARN: the name and AWS's six random characters
    arn = (
        secret
        if secret.startswith("arn:")
        else f"arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{secret}-AbCdEf"
    )
    return [Request(f"secretsmanager:{operation}", arn, {})]


def _cognito(operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    pool = params.get("UserPoolId")
    if pool is None:
        raise Unmapped(f"cognito-idp:{operation}")
    return [
        Request(f"cognito-idp:{operation}", f"arn:aws:cognito-idp:{region}:{ACCOUNT}:userpool/{pool}", {})
    ]


def requests_for(prefix: str, operation: str, params: Mapping[str, Any], region: str) -> list[Request]:
    """``prefix``: the service's IAM prefix (its signing name: dynamodb, s3, states, bedrock, ...)."""
    if prefix == "dynamodb":
        return _dynamodb(operation, params, region)
    if prefix == "s3":
        return _s3(operation, params)
    if prefix == "states":
        return _states(operation, params)
    if prefix == "bedrock":
        return _bedrock(operation, params, region)
    if prefix == "s3vectors":
        return _s3vectors(operation, params, region)
    if prefix == "sqs":
        return _sqs(operation, params, region)
    if prefix == "secretsmanager":
        return _secrets(operation, params, region)
    if prefix == "cognito-idp":
        return _cognito(operation, params, region)
    if prefix == "lambda":
        return _lambda(operation, params, region)
    if prefix == "ssm":
        return _ssm(operation, params, region)
    if prefix == "textract" and operation == "DetectDocumentText" and "Bytes" in params.get("Document", {}):
        return [Request("textract:DetectDocumentText", "*", {})]  # no resource type: IAM takes only "*"
    raise Unmapped(f"{prefix}:{operation}")
