"""The IAM harness fails a test when the template takes away a permission the code uses: the
translated template, mutated in memory, is what the ``stack`` fixture's roles are read from."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.aws_contracts import roles
from tests.integration.moto_stack import Stack, load_event


def without_action(template: dict[str, Any], role: str, action: str) -> dict[str, Any]:
    """The template with ``action`` taken out of every policy ``role`` has: its inline policies and the
    template's managed policies it attaches (``ManagedPolicyArns: [!Ref …]``)."""
    mutated = copy.deepcopy(template)
    resources = mutated["Resources"]
    properties = resources[role]["Properties"]
    documents = [policy["PolicyDocument"] for policy in properties.get("Policies", [])]
    for arn in properties.get("ManagedPolicyArns", []):
        name = arn.get("Ref") if isinstance(arn, dict) else None
        if name in resources and resources[name]["Type"] == "AWS::IAM::ManagedPolicy":
            documents.append(resources[name]["Properties"]["PolicyDocument"])
    dropped = 0
    for document in documents:
        statements = document["Statement"]
        for statement in statements if isinstance(statements, list) else [statements]:
            if "Action" not in statement:  # a NotAction statement grants nothing named here
                continue
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            dropped += action in actions
            statement["Action"] = [a for a in actions if a != action]
    assert dropped, f"{role} has no {action} to drop"
    return mutated


@pytest.fixture
def no_describe_execution(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    template = roles.translated_template()
    if template is None:
        pytest.skip("no .venv-sam (run `make validate` once)")
    mutated = without_action(template, "NotesApiFunctionRole", "states:DescribeExecution")
    monkeypatch.setattr(roles, "translated_template", lambda: mutated)
    yield


def test_dropping_describe_execution_from_the_template_fails_post_notes(
    no_describe_execution: None, stack: Stack
) -> None:
    assert stack.iam is not None
    response = stack.handler("notes_api")(load_event("notes_post.json"), None)

    # what AWS would do: the launcher's describe_execution is refused, the note is not ingested
    assert response["statusCode"] == 500, response
    assert stack.executions() == []
    (denial,) = {str(d) for d in stack.iam.denials}
    assert denial.startswith("NotesApiFunction: states:DescribeExecution on arn:aws:states:us-east-1:")
    assert ":execution:ragchat-dev-1b2c3d4e-ingest:" in denial
    with pytest.raises(pytest.fail.Exception, match="NotesApiFunction: states:DescribeExecution"):
        stack.iam.assert_all_allowed()  # what the fixture's teardown does: the test fails
    stack.iam.denials.clear()


def test_with_the_template_as_it_is_post_notes_is_allowed_everything_it_calls(stack: Stack) -> None:
    if stack.iam is None:
        pytest.skip("no .venv-sam (run `make validate` once)")
    response = stack.handler("notes_api")(load_event("notes_post.json"), None)
    assert response["statusCode"] == 202, response
    (execution,) = stack.wait_for_all(1)
    assert execution["status"] == "SUCCEEDED"
    called = {(who, r.action) for who, r in stack.iam.checked}
    expected = {
        ("NotesApiFunction", "states:DescribeExecution"),
        ("NotesApiFunction", "states:StartExecution"),
        ("IngestStateMachine", "lambda:InvokeFunction"),
        ("IngestStepsFunction", "s3:GetObject"),
    }
    assert expected <= called
    assert stack.iam.denials == []
    assert json.loads(execution["output"])["result"]["status"] == "READY"
