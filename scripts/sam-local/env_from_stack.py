"""Write the ``--env-vars`` file that runs the local containers against a deployed stack.

    .venv/bin/python scripts/sam-local/env_from_stack.py [--stack ragchat-dev] [--region us-east-1] \
        [--out env.dev.json]

Reads the stack's outputs (CloudFormation ``DescribeStacks``, with your AWS credentials) and maps
them onto the variables the functions read, with ``RAGCHAT_BACKEND=aws``: the containers then use
the stack's tables, bucket, state machine, vector collection and models. ``sam local`` passes your
credentials (``AWS_PROFILE`` / environment) into the containers, so they act as you, not as the
functions' roles. Under ``start-api`` the local token authorizer still signs you in: you are
``RAGCHAT_LOCAL_USER`` (set it to your Cognito ``sub`` to see your own documents).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# stack output -> variable
OUTPUTS = {
    "DocumentsTableName": "DOCUMENTS_TABLE",
    "ConversationsTableName": "CONVERSATIONS_TABLE",
    "CountersTableName": "COUNTERS_TABLE",
    "DocumentsBucketName": "DOCUMENTS_BUCKET",
    "IngestStateMachineArn": "STATE_MACHINE_ARN",
    "OpenSearchEndpoint": "OPENSEARCH_ENDPOINT",
    "AnthropicSecretArn": "ANTHROPIC_SECRET_NAME",
}


def env_from_outputs(outputs: dict[str, str], token: str, user: str) -> dict[str, Any]:
    """The ``--env-vars`` document for a stack with these outputs."""
    variables = {var: outputs[key] for key, var in OUTPUTS.items() if outputs.get(key)}
    endpoint = variables.get("OPENSEARCH_ENDPOINT", "")
    # arn:aws:s3vectors:<region>:<account>:bucket/<bucket>/index/<index>
    index_arn = outputs.get("S3VectorsIndexArn", "")
    if "/index/" in index_arn:
        bucket, _, index = index_arn.split(":bucket/", 1)[1].partition("/index/")
        variables.update({"S3VECTORS_BUCKET": bucket, "S3VECTORS_INDEX": index})
    variables.update(
        {
            "RAGCHAT_BACKEND": "aws",
            "RAGCHAT_VECTOR_INDEX": "s3vectors" if "/index/" in index_arn else "opensearch",
            "OPENSEARCH_SERVICE": "aoss" if ".aoss." in endpoint else "es",
            # the pages under start-api sign in with the local token, not Cognito
            "COGNITO_CLIENT_ID": "",
            "RAGCHAT_API_TOKEN": token,
            "RAGCHAT_LOCAL_USER": user,
        }
    )
    return {"Parameters": variables}


def stack_outputs(stack: str, region: str) -> dict[str, str]:
    import boto3

    described = boto3.client("cloudformation", region_name=region).describe_stacks(StackName=stack)
    return {o["OutputKey"]: o["OutputValue"] for o in described["Stacks"][0].get("Outputs", [])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="ragchat-dev")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--out", type=Path, default=Path("env.dev.json"))
    parser.add_argument("--token", default="local-dev-token", help="the start-api bearer token")
    parser.add_argument("--user", default="local", help="who you are under start-api")
    args = parser.parse_args(argv)
    env = env_from_outputs(stack_outputs(args.stack, args.region), args.token, args.user)
    args.out.write_text(json.dumps(env, indent=2) + "\n")
    print(f"wrote {args.out}: {', '.join(sorted(env['Parameters']))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
