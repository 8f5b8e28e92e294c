"""The state machine's own calls, under its own role, in moto's Step Functions emulator.

* ``executions_act_as(machine)``: every execution moto runs acts as the state machine's role (moto
  runs it in worker threads started from the ``StartExecution`` call; without this they would act as
  whoever started the execution, or as nobody). Its Lambda task invocations (``lambda:Invoke``) and
  the Distributed Map's ``ItemReader`` (``s3:GetObject`` of the manifest) go through botocore and are
  checked by the IAM harness's hook like any call.
* Distributed Map children: Step Functions runs each item as a child workflow execution of the same
  state machine, started and watched with the state machine's role (AWS's "IAM policies for using
  Distributed Map states": ``states:StartExecution`` on the state machine, ``states:DescribeExecution``
  and ``states:StopExecution`` on its executions ``<name>/<map run label>:<id>``). moto runs the items
  in threads with no API call, so ``executions_act_as`` checks, per item, ``StartExecution`` on the
  state machine and ``DescribeExecution`` on the child's ARN, and, when the Map Run fails,
  ``StopExecution`` on the children it stops. A refused check fails the Map Run, as it would on AWS.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.aws_contracts.iam import IamChecker, acting_as
from tests.aws_contracts.policy import Request


@contextmanager
def executions_act_as(machine: str, checker: IamChecker | None) -> Iterator[None]:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import (
        distributed_iteration_component as distributed,
    )
    from moto.stepfunctions.parser.backend.execution import Execution

    start = Execution.start
    map_run = distributed.DistributedIterationComponent._map_run

    def start_as_machine(self: Any) -> None:
        with acting_as(machine):
            start(self)

    def map_run_as_machine(self: Any, env: Any, eval_input: Any) -> None:
        if checker is None:
            map_run(self, env, eval_input)
            return
        record = eval_input.map_run_record
        machine_arn = record.map_state_machine_arn.split("/", 1)[0]
        label = record.map_state_machine_arn.split("/", 1)[1]
        executions = machine_arn.replace(":stateMachine:", ":execution:")
        items = env.stack[-1] if env.stack and isinstance(env.stack[-1], list) else []
        children = [f"{executions}/{label}:{uuid.uuid4()}" for _ in items]
        for child in children:
            checker.check(machine, Request("states:StartExecution", machine_arn, {}))
            checker.check(machine, Request("states:DescribeExecution", child, {}))
        try:
            map_run(self, env, eval_input)
        except Exception:
            for child in children:  # the Map Run fails: Step Functions stops the children still running
                checker.check(machine, Request("states:StopExecution", child, {}))
            raise

    Execution.start = start_as_machine  # type: ignore[method-assign]
    distributed.DistributedIterationComponent._map_run = map_run_as_machine  # type: ignore[method-assign]
    try:
        yield
    finally:
        Execution.start = start  # type: ignore[method-assign]
        distributed.DistributedIterationComponent._map_run = map_run  # type: ignore[method-assign]
