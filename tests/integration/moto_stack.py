"""Integration tests: the real Lambda handlers (``functions/*/app.py``) and the real state machine
(``statemachine/ingest.asl.json``) on moto's DynamoDB, S3 and Step Functions.

How the pieces meet
-------------------
* moto executes the ASL (``mock_aws(config={"stepfunctions": {"execute_state_machine": True}})``).
  Its Lambda tasks call ``LambdaFunction._invoke_lambda``, which we replace with an in-process call
  of ``functions/ingest_steps/app.py``'s ``lambda_handler``; an exception becomes a Lambda function
  error ``{"errorType": <class name>, "errorMessage": ...}``, as the real runtime reports it, so the
  state machine's Retry/Catch see e.g. ``TransientError`` or ``ModelError``.
* Each handler gets the test's container with ``handler.with_container(...)`` (no module global):
  settings as the template sets them (``RAGCHAT_BACKEND=aws``, tables, bucket, state machine), the
  DynamoDB/S3/Step Functions adapters on moto, a deterministic fake embedder (Bedrock is not
  emulated) and, with ``RAGCHAT_VECTOR_INDEX=sqlite``, the embedded vector index in a temporary
  folder (the OpenSearch adapter is covered by the contract suite).
* Each ``functions/<area>/app.py`` is loaded fresh per test (by file path): the test calls the very
  handler object the function exports, over the container of that test.
* IAM: every AWS call a handler makes runs as its function's role in the translated template, the
  step handler's as ``IngestStepsFunction``'s, the state machine's Lambda invocations as its own role
  (``tests/aws_contracts/iam.py``); a call the deployed role would deny raises AccessDenied and fails
  the test. The bucket and state machine have the names the template gives them (stage ``dev``, the
  test account), so the template's ARNs are the test's.
* Limits: a handler's event and response are held to Lambda's 6 MB synchronous payload
  (``tests/aws_contracts/limits.py``).
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tests.aws_contracts.iam import acting_as
from tests.aws_contracts.limits import check_lambda_payload

if TYPE_CHECKING:
    from ragchat.bootstrap import Container

    from tests.aws_contracts.iam import IamChecker

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
REGION = "us-east-1"
TABLES = {"documents": "ragchat-test-documents", "conversations": "ragchat-test-conversations"}
COUNTERS = "ragchat-test-counters"
# the template's names for stage dev in account 123456789012 (tests/aws_contracts/roles.py's stack id)
BUCKET = "ragchat-dev-documents-123456789012-1b2c3d4e"
STATE_MACHINE = "ragchat-dev-1b2c3d4e-ingest"
STEPS_FUNCTION = "ragchat-test-ingest-steps"
USER_POOL = "us-east-1_RagchatT1"  # the user pool's id (Cognito is stubbed: botocore Stubber)


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def create_ingest_state_machine(session: Any, name: str, bucket: str) -> str:
    """On moto: the ingest step function (its invocations run in-process: ``_invoke_lambda`` is
    patched by the caller) and the state machine ``name`` of ``statemachine/ingest.asl.json`` with
    the template's substitutions (the step function's ARN, the documents ``bucket``); its ARN."""
    role_arn = session.client("iam").create_role(
        RoleName="ragchat-test-role",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    function_arn = session.client("lambda").create_function(
        FunctionName=STEPS_FUNCTION,
        Runtime="python3.12",
        Role=role_arn,
        Handler="app.lambda_handler",
        Code={"ZipFile": b"not used: invocations run in-process"},
        Architectures=["arm64"],
    )["FunctionArn"]
    definition = (
        (ROOT / "statemachine" / "ingest.asl.json")
        .read_text()
        .replace("${IngestStepsFunctionArn}", function_arn)
        .replace("${DocumentsBucket}", bucket)
    )
    assert "${" not in definition, "every DefinitionSubstitutions placeholder must be substituted"
    arn: str = session.client("stepfunctions").create_state_machine(
        name=name, definition=definition, roleArn=role_arn
    )["stateMachineArn"]
    return arn


def load_function(area: str) -> ModuleType:
    """``functions/<area>/app.py`` as a fresh module (its handler builds its resolver on first use)."""
    path = ROOT / "functions" / area / "app.py"
    spec = importlib.util.spec_from_file_location(f"ragchat_function_{area}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Stack:
    """The deployed stack, on moto."""

    container: Container
    embedder: Any
    sfn: Any
    s3: Any
    state_machine_arn: str
    invocations: list[dict[str, Any]] = field(default_factory=list)
    functions: dict[str, str] = field(default_factory=dict)  # area -> the template's function id
    iam: IamChecker | None = None  # None without the SAM virtualenv outside CI

    def handler(self, area: str) -> Callable[[dict[str, Any], Any], Any]:
        """The function's handler, called as API Gateway or S3 would: its AWS calls act as the
        function's role, its event and response within Lambda's synchronous payload limit."""
        exported = load_function(area).lambda_handler
        inner: Callable[[dict[str, Any], Any], Any] = exported.with_container(lambda: self.container)
        principal = self.functions.get(area, area)

        def invoke(event: dict[str, Any], context: Any) -> Any:
            check_lambda_payload(f"{principal} request", event)
            with acting_as(principal):
                response = inner(event, context)
            check_lambda_payload(f"{principal} response", response)
            return response

        return invoke

    def executions(self) -> list[dict[str, Any]]:
        resp = self.sfn.list_executions(stateMachineArn=self.state_machine_arn)
        executions: list[dict[str, Any]] = resp["executions"]
        return executions

    def wait_for(
        self, execution_arn: str, *, timeout_s: float = 60.0, poll_s: float = 0.02
    ) -> dict[str, Any]:
        """Poll ``describe_execution`` until the run closes (bounded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            desc: dict[str, Any] = self.sfn.describe_execution(executionArn=execution_arn)
            if desc["status"] != "RUNNING":
                return desc
            if time.monotonic() > deadline:
                raise AssertionError(f"execution still RUNNING after {timeout_s}s: {execution_arn}")
            time.sleep(poll_s)

    def wait_for_all(
        self, count: int, *, timeout_s: float = 60.0, poll_s: float = 0.02
    ) -> list[dict[str, Any]]:
        """Wait until ``count`` executions exist and all have closed."""
        deadline = time.monotonic() + timeout_s
        while len(self.executions()) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} executions, saw {len(self.executions())}")
            time.sleep(0.02)
        return [
            self.wait_for(e["executionArn"], timeout_s=timeout_s, poll_s=poll_s) for e in self.executions()
        ]
