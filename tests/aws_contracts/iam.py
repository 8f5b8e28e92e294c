"""Every AWS call a handler or the state machine makes in a test, checked against the role it would
run with once deployed.

* ``acting_as(principal)`` (a context manager over a ``ContextVar``) says whose role the calls made
  inside it use: ``Stack.handler`` wraps each handler call in its function's logical id, the Lambda
  task patch in the step function's; the state machine's own Lambda invocations are checked as the
  state machine's role.
* ``IamChecker.installed()`` adds a botocore ``before-parameter-build`` handler to the
  handlers every new botocore session registers (moto adds its own the same way), so every client the
  container builds is covered. For a call made while a principal acts, the handler builds the
  action(s) and ARN(s) from the call's parameters (``tests/aws_contracts/requests.py``) and
  evaluates them against that principal's statements (``tests/aws_contracts/policy.py``). A denied
  call raises ``AccessDenied`` as AWS would, and is kept: ``assert_all_allowed()`` at the fixture's
  teardown fails the test with function, action and ARN even when the code swallowed the error.
  Calls made by the test itself (setup, polling) act as nobody and are not checked.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.aws_contracts.hooks import session_handler
from tests.aws_contracts.policy import Decision, Request, evaluate
from tests.aws_contracts.requests import Unmapped, requests_for

_ACTING: contextvars.ContextVar[str | None] = contextvars.ContextVar("aws_principal", default=None)


@contextmanager
def acting_as(principal: str) -> Iterator[None]:
    token = _ACTING.set(principal)
    try:
        yield
    finally:
        _ACTING.reset(token)


@dataclass(frozen=True)
class Denial:
    principal: str
    request: Request
    decision: Decision

    def __str__(self) -> str:
        context = f" with {dict(self.request.context)}" if self.request.context else ""
        what = f"{self.request.action} on {self.request.resource}{context}"
        return f"{self.principal}: {what} is {self.decision.value}"


@dataclass
class IamChecker:
    statements: Mapping[str, list[dict[str, Any]]]  # principal (logical id) -> its role's statements
    region: str
    checked: list[tuple[str, Request]] = field(default_factory=list)
    denials: list[Denial] = field(default_factory=list)

    def check(self, principal: str, request: Request) -> None:
        """Record the request; raise ``AccessDenied`` (a botocore ``ClientError``) if it is denied."""
        from botocore.exceptions import ClientError

        self.checked.append((principal, request))
        decision = evaluate(self.statements[principal], request)
        if decision is Decision.ALLOWED:
            return
        denial = Denial(principal, request, decision)
        self.denials.append(denial)
        code = "AccessDenied" if request.action.startswith("s3:") else "AccessDeniedException"
        raise ClientError(
            {"Error": {"Code": code, "Message": f"not authorized (IAM harness): {denial}"}},
            request.action.split(":", 1)[1],
        )

    def _before_parameter_build(
        self, params: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any
    ) -> None:
        principal = _ACTING.get()
        if principal is None:
            return
        if context.get("is_presign_request") and model.name == "CreateBucket":
            # generate_presigned_post signs with a stand-in operation and no key: the POST the
            # browser makes later is checked by S3 against the signer's s3:PutObject, which the
            # template test of the uploads/ grant covers, not this hook
            return
        prefix = model.service_model.signing_name
        try:
            requests = requests_for(prefix, model.name, params, self.region)
        except Unmapped as exc:
            pytest.fail(f"{principal} calls {exc}: teach tests/aws_contracts/requests.py its action and ARN")
        for request in requests:
            self.check(principal, request)

    def installed(self) -> AbstractContextManager[None]:
        """Checks the calls of every botocore session created inside (the test's container's)."""
        return session_handler("before-parameter-build", self._before_parameter_build)

    def assert_all_allowed(self) -> None:
        if self.denials:
            lines = "\n  ".join(sorted({str(d) for d in self.denials}))
            pytest.fail(
                f"the deployed roles would deny {len(self.denials)} call(s):\n  {lines}", pytrace=False
            )
