"""Every AWS call of a deployed stack under the role that makes it, and every permission statement of
template.yaml shown needed by mutation.

1. For each :data:`~tests.integration.deployed_stack.DEPLOYMENTS` (the defaults; S3 Vectors + Cohere +
   a global Claude profile; an existing domain + the Anthropic key secret under a KMS key), the
   stack runs what its users do (``tests/integration/scenario.py``: a file dropped under uploads/,
   notes, an upload, a presigned upload through the S3 trigger, the Distributed Map, a failed
   ingestion, a question, a streamed and an edited chat turn, the conversation list, a refused
   question in each chat function, reading, disabling and deleting documents (one with a stopped
   run's work files), a shared workspace) through
   the real handlers and AWS adapters, each function under its own role. Any denied call fails it.
2. Every mutation of every permission statement (``tests/aws_contracts/mutations.py``: removed; each
   resource pointed at another of its type; each data-access permission dropped) is evaluated
   against those recorded calls. A mutation no call notices must be in :data:`SURVIVORS` with the
   reason it cannot be exercised here; a new survivor, or a listed one that is now killed, fails.
   The count is printed (``-s``) and kept in docs/security.md ("Every permission, proven needed").
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.aws_contracts.mutations import Recorded, first_denied, survivors
from tests.aws_contracts.roles import Roles
from tests.integration import scenario
from tests.integration.deployed_stack import DEPLOYMENTS, Deployment, deployed_stack

DLQ = (
    "Lambda's asynchronous invocation sends an event that failed every retry to the dead-letter queue "
    "with the function's role; the tests invoke the trigger synchronously and no event fails for good"
)


# Mutations no recorded call can notice, by key ("<statement>: <change>"), with the reason.
SURVIVORS: dict[str, str] = {
    "ChatAnswerPolicy/AnswerModelViaProfile[bedrock]: resource "
    "arn:aws:bedrock:::foundation-model/anthropic.claude-sonnet-4-5-20250929-v1:0 -> "
    "arn:aws:bedrock:::foundation-model/amazon.nova-micro-v1:0": (
        "a global profile's Region-less model ARN is matched by the arn:aws:bedrock:*:: ARN of the same "
        "statement too (IAM's * matches zero characters): kept as AWS documents global-profile grants"
    ),
    "IngestStateMachineRole/IngestStateMachineRolePolicy1/ExecutionLogDelivery[logs]: removed": (
        "Step Functions uses these when CloudFormation creates the state machine with Logging (execution "
        "logs to IngestStateMachineLogs); no call of the code or of a run makes them, and moto does not "
        "deliver logs (their Resource is *: no resource mutation)"
    ),
    "S3IngestFunctionRole/S3IngestFunctionEventInvokeConfigOnFailureSQSPolicy/#0 "
    "S3IngestDeadLetterQueue[sqs]: removed": DLQ,
    "S3IngestFunctionRole/S3IngestFunctionEventInvokeConfigOnFailureSQSPolicy/#0 "
    "S3IngestDeadLetterQueue[sqs]: resource arn:aws:sqs:us-east-1:123456789012:S3IngestDeadLetterQueue -> "
    "arn:aws:sqs:us-east-1:123456789012:S3IngestDeadLetterQueue-other": DLQ,
}


@dataclass
class Recording:
    deployment: Deployment
    resources: dict[str, Any]
    raw: dict[str, Any]
    roles: Roles
    recorded: Recorded
    seen: dict[str, Any]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recording]:
    from tests.aws_contracts.roles import translated_template

    template = translated_template()
    if template is None:
        pytest.skip("no .venv-sam (run `make validate` once)")
    out: dict[str, Recording] = {}
    for n, deployment in enumerate(DEPLOYMENTS):
        with (
            pytest.MonkeyPatch.context() as mp,
            deployed_stack(deployment, tmp_path_factory.mktemp(deployment.name), mp) as stack,
        ):
            seen = scenario.run(stack, distributed=n == 0)
            assert stack.iam is not None and stack.roles is not None
            recorded = Recorded.of(stack.iam.checked, stack.iam.data_checked)
            out[deployment.name] = Recording(
                deployment, stack.resources, template["Resources"], stack.roles, recorded, seen
            )
    return out


def _calls(rec: Recording, principal: str) -> set[tuple[str, str]]:
    return {(r.action, r.resource) for p, r in rec.recorded.checked if p == principal}


def test_the_default_stack_makes_each_call_under_the_role_of_who_makes_it(
    recordings: dict[str, Recording],
) -> None:
    rec = recordings["default"]
    titan = "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0"
    # the ingest function embeds with Titan; the chat functions embed questions and answer with Claude
    assert ("bedrock:InvokeModel", titan) in _calls(rec, "IngestStepsFunction")
    stream = _calls(rec, "ChatStreamFunction")
    assert ("bedrock:InvokeModel", titan) in stream
    assert any(
        a == "bedrock:InvokeModelWithResponseStream" and "inference-profile/us." in r for a, r in stream
    )
    assert any(
        a == "bedrock:InvokeModel" and "inference-profile/" in r for a, r in _calls(rec, "ChatApiFunction")
    )
    # the split step reads a picture with Amazon Textract (a call with no resource type: "*")
    assert ("textract:DetectDocumentText", "*") in _calls(rec, "IngestStepsFunction")
    assert {p for p, r in rec.recorded.checked if r.action.startswith("textract:")} == {"IngestStepsFunction"}
    # the state machine invokes its steps and starts the Distributed Map's children itself
    machine = _calls(rec, "IngestStateMachine")
    assert (
        "states:StartExecution",
        "arn:aws:states:us-east-1:123456789012:stateMachine:ragchat-dev-1b2c3d4e-ingest",
    ) in machine
    assert any(a == "s3:GetObject" and r.endswith("/manifest.json") for a, r in machine)
    # OpenSearch Serverless: every function that writes vectors writes through the data-access policy
    data = {(p, r.action) for p, r in rec.recorded.data_checked}
    assert ("IngestStepsFunction", "aoss:WriteDocument") in data
    assert ("ChatStreamFunction", "aoss:ReadDocument") in data
    # what the user saw
    assert "330" in rec.seen["ask"]["answer"] and "1889" in rec.seen["streamed"]


def test_the_other_deployments_make_each_call_under_its_role(recordings: dict[str, Recording]) -> None:
    vectors = recordings["s3vectors-cohere-global"]
    cohere = "arn:aws:bedrock:us-east-1::foundation-model/cohere.embed-english-v3"
    assert ("bedrock:InvokeModel", cohere) in _calls(vectors, "IngestStepsFunction")
    assert any(a == "s3vectors:PutVectors" for a, _ in _calls(vectors, "IngestStepsFunction"))
    assert any(a == "s3vectors:QueryVectors" for a, _ in _calls(vectors, "ChatStreamFunction"))
    assert any(
        r.startswith("arn:aws:bedrock:::foundation-model/") for _, r in _calls(vectors, "ChatStreamFunction")
    )
    domain = recordings["domain-anthropic-secret"]
    assert any(a == "es:ESHttpPost" for a, _ in _calls(domain, "IngestStepsFunction"))
    # auto mode reads the Anthropic key secret (under its customer managed key) before answering; the
    # value is cached in the process (Powertools, 300 s), so the first function that answers reads it
    actions = {a for p in ("ChatApiFunction", "ChatStreamFunction") for a, _ in _calls(domain, p)}
    assert {"secretsmanager:GetSecretValue", "kms:Decrypt"} <= actions
    assert any(
        a == "es:ESHttpPut" and "/_search/pipeline/" in r for a, r in _calls(domain, "ChatStreamFunction")
    )


def test_every_permission_of_the_template_is_needed_by_a_call(recordings: dict[str, Recording]) -> None:
    runs = [(rec.resources, rec.raw, rec.recorded) for rec in recordings.values()]
    killed, surviving, total = survivors(runs)
    print(
        f"\nIAM mutations of template.yaml: {total} in {len(runs)} deployments, {len(killed)} fail a "
        f"recorded call, {len(surviving)} survive (each listed with its reason)"
    )
    for key in sorted(surviving):
        print(f"  survives: {key}  -- {SURVIVORS.get(key, 'NOT LISTED')}")
    unlisted = sorted(surviving - set(SURVIVORS))
    stale = sorted(set(SURVIVORS) - surviving)
    assert not unlisted, "mutations no test notices (a permission no call needs?):\n  " + "\n  ".join(
        unlisted
    )
    assert not stale, "listed survivors that a call now needs or that no longer exist:\n  " + "\n  ".join(
        stale
    )


def _statement(resources: dict[str, Any], holder: str, sid: str) -> dict[str, Any]:
    for policy in resources[holder]["Properties"].get("Policies", []):
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement.get("Sid") == sid:
                return statement  # type: ignore[no-any-return]
    for statement in resources[holder]["Properties"].get("PolicyDocument", {}).get("Statement", []):
        if statement.get("Sid") == sid:
            return statement  # type: ignore[no-any-return]
    raise KeyError(f"{holder} has no statement {sid}")


def _no_titan_for_ingestion(resources: dict[str, Any]) -> None:
    statement = _statement(resources, "IngestStepsFunctionRole", "EmbedChunks")
    statement["Resource"] = [r for r in statement["Resource"] if "titan" not in r]


def _titan_elsewhere(resources: dict[str, Any]) -> None:
    for holder, sid in (("IngestStepsFunctionRole", "EmbedChunks"), ("ChatAnswerPolicy", "EmbedQuestions")):
        statement = _statement(resources, holder, sid)
        statement["Resource"] = [
            r.replace("titan-embed-text-v2:0", "titan-embed-text-v1") for r in statement["Resource"]
        ]


def _no_write_document(resources: dict[str, Any]) -> None:
    import json

    props = resources["CollectionAccessPolicy"]["Properties"]
    policies = json.loads(props["Policy"])
    for policy in policies:
        for rule in policy["Rules"]:
            rule["Permission"] = [p for p in rule["Permission"] if p != "aoss:WriteDocument"]
    props["Policy"] = json.dumps(policies)


def _no_textract(resources: dict[str, Any]) -> None:
    for policy in resources["IngestStepsFunctionRole"]["Properties"]["Policies"]:
        statements = policy["PolicyDocument"]["Statement"]
        policy["PolicyDocument"]["Statement"] = [s for s in statements if s.get("Sid") != "ReadPicturesByOcr"]


def _no_child_executions(resources: dict[str, Any]) -> None:
    for policy in resources["IngestStateMachineRole"]["Properties"]["Policies"]:
        statements = policy["PolicyDocument"]["Statement"]
        policy["PolicyDocument"]["Statement"] = [
            s for s in statements if s.get("Sid") != "DistributedMapChildExecutions"
        ]


@pytest.mark.parametrize(
    ("mutate", "denied"),
    [
        (
            _no_titan_for_ingestion,
            "IngestStepsFunction: bedrock:InvokeModel on arn:aws:bedrock:us-east-1::foundation-model/"
            "amazon.titan",
        ),
        (
            _titan_elsewhere,
            "bedrock:InvokeModel on arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0",
        ),
        (_no_write_document, "IngestStepsFunction: aoss:WriteDocument"),
        (_no_textract, "IngestStepsFunction: textract:DetectDocumentText on *"),
        (
            _no_child_executions,
            "IngestStateMachine: states:StartExecution on arn:aws:states:us-east-1:123456789012:stateMachine:"
            "ragchat-dev-1b2c3d4e-ingest",
        ),
    ],
    ids=[
        "titan-grant-of-ingest-removed",
        "both-titan-arns-another-model",
        "no-aoss-WriteDocument",
        "no-textract-DetectDocumentText",
        "no-map-StartExecution",
    ],
)
def test_the_mutations_the_issue_names_break_every_upload(
    recordings: dict[str, Recording], mutate: Callable[[dict[str, Any]], None], denied: str
) -> None:
    rec = recordings["default"]
    assert first_denied(rec.resources, rec.raw, rec.recorded) is None  # as deployed: every call allowed
    mutated = copy.deepcopy(rec.resources)
    mutate(mutated)
    got = first_denied(mutated, rec.raw, rec.recorded)
    assert got is not None and denied in got, got


def test_without_its_titan_grant_the_ingest_function_fails_every_upload_end_to_end(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first named mutation made in the translated template itself and run, not evaluated: the
    note is FAILED with Bedrock's AccessDenied, and the fixture would fail the test."""
    from tests.aws_contracts import roles

    template = roles.translated_template()
    if template is None:
        pytest.skip("no .venv-sam (run `make validate` once)")
    mutated = copy.deepcopy(template)
    for policy in mutated["Resources"]["IngestStepsFunctionRole"]["Properties"]["Policies"]:
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement.get("Sid") == "EmbedChunks":
                statement["Resource"] = [r for r in statement["Resource"] if "titan" not in str(r)]
    monkeypatch.setattr(roles, "translated_template", lambda: mutated)
    with deployed_stack(DEPLOYMENTS[0], tmp_path, monkeypatch) as stack:
        notes = stack.handler("notes_api")
        posted = notes(scenario.api("POST", "/notes", {"text": scenario.REEF, "title": "Reef"}), None)
        document = scenario.ingested(stack, posted, status="FAILED")
        got = scenario.body(notes(scenario.api("GET", f"/documents/{document}"), None))
        assert "AccessDenied" in got["error"] or "not authorized" in got["error"], got
        assert stack.iam is not None
        denied = {str(d) for d in stack.iam.denials}
        assert any(
            d.startswith("IngestStepsFunction: bedrock:InvokeModel on ") and "titan" in d for d in denied
        )
        with pytest.raises(pytest.fail.Exception, match="IngestStepsFunction: bedrock:InvokeModel"):
            stack.iam.assert_all_allowed()  # what the fixture's teardown does: the test fails
        stack.iam.denials.clear()
