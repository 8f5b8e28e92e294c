"""Fixtures for the integration tests; see ``tests/integration/moto_stack.py`` for how they work."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.aws_contracts.roles import ACCOUNT, Roles
from tests.integration.moto_stack import (
    BUCKET,
    COUNTERS,
    REGION,
    STATE_MACHINE,
    STEPS_FUNCTION,
    TABLES,
    USER_POOL,
    Stack,
    create_ingest_state_machine,
    load_function,
)


def iam_roles() -> Roles | None:
    """The roles of the translated template, resolved to the names of the stack below (its tables,
    bucket, state machine and step function); ``None`` without the SAM virtualenv outside CI."""
    from tests.aws_contracts.roles import resolve_template, roles_of, translated_template

    template = translated_template()
    if template is None:
        return None
    machine_arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{STATE_MACHINE}"
    physical = {
        "DocumentsTable": TABLES["documents"],
        "ConversationsTable": TABLES["conversations"],
        "CountersTable": COUNTERS,
        "DocumentsBucket": BUCKET,
        "IngestStateMachine": machine_arn,
        "IngestStepsFunction": STEPS_FUNCTION,
        "UserPool": USER_POOL,
    }
    return roles_of(resolve_template(template, REGION, physical), template["Resources"])


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    import boto3
    from moto import mock_aws
    from moto.awslambda.models import LambdaFunction
    from ragchat.adapters.aws.tables import create_tables
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    from tests.aws_contracts.iam import IamChecker, acting_as
    from tests.aws_contracts.limits import check_lambda_payload, check_state_io
    from tests.aws_contracts.stepfunctions import executions_act_as
    from tests.fakes import FakeEmbedder

    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)

    built: list[Container] = []  # the stack's container, made below once the AWS resources exist
    steps_handler = load_function("ingest_steps").lambda_handler.with_container(lambda: built[0])
    invocations: list[dict[str, Any]] = []

    roles = iam_roles()
    checker = IamChecker(roles.statements, REGION) if roles else None
    checks = checker.installed() if checker is not None else contextlib.nullcontext()

    def invoke_in_process(self: Any, event: Any = None) -> tuple[str, bool, str]:
        payload = json.loads(event) if isinstance(event, str) else (event or {})
        invocations.append(payload)
        assert self.function_name == STEPS_FUNCTION, self.function_name
        # (the state machine's lambda:InvokeFunction was checked by the IAM hook: executions act as
        # the state machine's role, tests/aws_contracts/stepfunctions.py)
        check_state_io("ingest step input", payload)
        check_lambda_payload("ingest step request", payload)
        try:
            with acting_as(roles.functions_by_area["ingest_steps"] if roles else "ingest_steps"):
                result = steps_handler(payload, None)
        except Exception as exc:  # the Lambda runtime's unhandled-error shape
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}), True, ""
        check_lambda_payload("ingest step response", result)
        check_state_io("ingest step result", result)
        return json.dumps(result), False, ""

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", invoke_in_process)

    machine = roles.state_machine if roles else "IngestStateMachine"
    with (
        checks,
        executions_act_as(machine, checker),
        mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
    ):
        session = boto3.session.Session(region_name=REGION)
        create_tables(
            session.client("dynamodb"),
            documents=TABLES["documents"],
            conversations=TABLES["conversations"],
            counters=COUNTERS,
        )
        s3 = session.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        sfn = session.client("stepfunctions")
        state_machine_arn = create_ingest_state_machine(session, STATE_MACHINE, BUCKET)

        settings = load_settings(
            {
                "RAGCHAT_BACKEND": "aws",
                "AWS_REGION": REGION,
                "DOCUMENTS_TABLE": TABLES["documents"],
                "CONVERSATIONS_TABLE": TABLES["conversations"],
                "COUNTERS_TABLE": COUNTERS,
                "DOCUMENTS_BUCKET": BUCKET,
                "STATE_MACHINE_ARN": state_machine_arn,
                "RAGCHAT_DATA_DIR": str(tmp_path / "data"),
                "RAGCHAT_VECTOR_INDEX": "sqlite",  # OpenSearch is covered by the contract suite
                "RAGCHAT_CHAT_MODEL": "extractive",
                "MIN_SIMILARITY": "0.2",
            }
        )
        embedder = FakeEmbedder(dimension=64)
        container = Container(settings, embedder=embedder)
        built.append(container)
        functions = dict(roles.functions_by_area) if roles else {}
        try:
            yield Stack(container, embedder, sfn, s3, state_machine_arn, invocations, functions, checker)
        finally:
            container.close()
        if checker is not None:
            checker.assert_all_allowed()
