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
* A thread acts as whoever started it, and work handed to a thread pool as whoever handed it
  (``principal_follows_threads``, part of ``installed()``): a Lambda function's model-stream thread,
  its embedding pool and the streaming function's server threads make their calls under the
  function's role, as in its sandbox, instead of escaping the check as nobody.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
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


def acting() -> str | None:
    """Whose role the calls made here use (``None``: the test's own calls)."""
    return _ACTING.get()


@contextmanager
def principal_follows_threads() -> Iterator[None]:
    """A started thread acts as its starter; a pool's work item as whoever submitted it."""
    start, submit = threading.Thread.start, ThreadPoolExecutor.submit

    def start_as_starter(self: threading.Thread) -> None:
        principal = _ACTING.get()
        if principal is not None:
            run = self.run

            def run_as() -> None:
                with acting_as(principal):
                    run()

            self.run = run_as  # type: ignore[method-assign]
        start(self)

    def submit_as_submitter(
        self: ThreadPoolExecutor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Future[Any]:
        principal = _ACTING.get()

        def call_as() -> Any:
            token = _ACTING.set(principal)
            try:
                return fn(*args, **kwargs)
            finally:
                _ACTING.reset(token)

        return submit(self, call_as)

    threading.Thread.start = start_as_starter  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = submit_as_submitter  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        threading.Thread.start = start  # type: ignore[method-assign]
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]


@dataclass(frozen=True)
class Denial:
    principal: str
    request: Request
    decision: Decision

    def __str__(self) -> str:
        context = f" with {dict(self.request.context)}" if self.request.context else ""
        what = f"{self.request.action} on {self.request.resource}{context}"
        return f"{self.principal}: {what} is {self.decision.value}"


Implied = Callable[[str, str, Mapping[str, Any]], list[Request]]


@dataclass
class IamChecker:
    statements: Mapping[str, list[dict[str, Any]]]  # principal (logical id) -> its role's statements
    region: str
    checked: list[tuple[str, Request]] = field(default_factory=list)
    denials: list[Denial] = field(default_factory=list)
    # what a service checks besides the call's own action (Bedrock's Marketplace subscription, the KMS
    # key of a secret): (IAM prefix, operation, params) -> further requests, evaluated the same way
    implied: list[Implied] = field(default_factory=list)
    # OpenSearch Serverless: the data-access policies (tests/aws_contracts/opensearch.py) and the role
    # ARN each principal's calls are signed with; the requests checked against them
    data_policies: list[dict[str, Any]] = field(default_factory=list)
    role_arns: Mapping[str, str] = field(default_factory=dict)
    data_checked: list[tuple[str, Request]] = field(default_factory=list)

    def check(self, principal: str, request: Request) -> None:
        """Record the request; raise ``AccessDenied`` (a botocore ``ClientError``) if it is denied."""
        self.checked.append((principal, request))
        decision = evaluate(self.statements[principal], request)
        if decision is not Decision.ALLOWED:
            self._deny(Denial(principal, request, decision))

    def check_data_access(self, principal: str, request: Request) -> None:
        """An OpenSearch Serverless data-plane permission, against the data-access policies."""
        from tests.aws_contracts.opensearch import data_access_allows

        self.data_checked.append((principal, request))
        if not data_access_allows(self.data_policies, self.role_arns.get(principal, principal), request):
            self._deny(Denial(principal, request, Decision.IMPLICIT_DENY))

    def _deny(self, denial: Denial) -> None:
        from botocore.exceptions import ClientError

        request = denial.request
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
        for implied in self.implied:
            requests += implied(prefix, model.name, params)
        for request in requests:
            self.check(principal, request)

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Checks the calls of every botocore session created inside (the test's container's), made
        by the acting principal or by any thread it started or handed work to."""
        with ExitStack() as stack:
            stack.enter_context(session_handler("before-parameter-build", self._before_parameter_build))
            stack.enter_context(principal_follows_threads())
            yield

    def assert_all_allowed(self) -> None:
        if self.denials:
            lines = "\n  ".join(sorted({str(d) for d in self.denials}))
            pytest.fail(
                f"the deployed roles would deny {len(self.denials)} call(s):\n  {lines}", pytrace=False
            )
