"""Mutations of template.yaml's permissions, each evaluated against the calls a deployed stack made.

A **statement** is one IAM policy statement of a role's inline policy or of a customer managed policy
of the template (SAM policy templates expanded by the transform), or one rule of an OpenSearch
Serverless data-access policy. For every statement present in a deployment (the template resolved
for its parameters) there is a mutation that **removes** it and, for each of its resources other
than ``*``, one that **points that resource at another resource of the same type**
(:func:`another`); a data-access rule also loses each of its permissions in turn.

A mutation is **killed** when one of the recorded calls (``IamChecker.checked`` and
``data_checked`` of a stack run, ``tests/integration/scenario.py``) would be denied under the
mutated template: that run would then fail its test, since the stack fixture fails on any denial.
Recording once and evaluating per mutation is what makes hundreds of mutations affordable; the calls
are the real adapters' own (``tests/integration/deployed_stack.py``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.aws_contracts.opensearch import data_access_allows, data_access_policies
from tests.aws_contracts.policy import Decision, Request, evaluate
from tests.aws_contracts.roles import roles_of

Resources = dict[str, Any]


@dataclass(frozen=True)
class Mutation:
    statement: str  # "ChatAnswerPolicy/EmbedQuestions[bedrock]"
    change: str  # "removed", "resource <arn> -> <arn>", "without aoss:WriteDocument"
    apply: Callable[[Resources], None]  # changes a copy of the resolved resources in place

    @property
    def key(self) -> str:
        return f"{self.statement}: {self.change}"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def another(resource: str) -> str | None:
    """Another resource of the same type (``None`` for ``*``, which names no resource): another
    bucket's objects, another table, another model, another state machine, another parameter …"""
    if resource == "*":
        return None
    if resource.startswith("arn:aws:s3:::"):
        bucket, sep, key = resource.removeprefix("arn:aws:s3:::").partition("/")
        return f"arn:aws:s3:::{bucket}-other{sep}{key}"
    if "foundation-model/" in resource or "inference-profile/" in resource:
        head, _, model = resource.rpartition("/")
        geo = model.split(".", 1)[0] + "." if "inference-profile/" in resource else ""
        return f"{head}/{geo}amazon.nova-micro-v1:0"
    if not resource.startswith("arn:"):  # a data-access policy resource: index/<collection>/<index>
        kind, _, rest = resource.partition("/")
        name, sep, tail = rest.partition("/")
        return f"{kind}/{name}-other{sep}{tail}"
    parts = resource.split(":", 5)
    match = re.match(r"([A-Za-z-]+)([/:])([^/:*]+)(.*)$", parts[5])
    if match is None:  # the resource is the name itself (a queue, a topic)
        parts[5] = f"{parts[5]}-other"
        return ":".join(parts) if "*" not in parts[5] else None
    kind, sep, name, tail = match.groups()
    parts[5] = f"{kind}{sep}{name}-other{tail}"
    return ":".join(parts)


def _label(statement: Mapping[str, Any], fallback: str) -> str:
    """The statement's Sid, or (SAM policy templates have none) its position and first resource's
    name (``#0 table/ragchat-test-counters``); then its actions' services."""
    actions = _as_list(statement.get("Action", statement.get("NotAction", [])))
    services = sorted({str(a).split(":", 1)[0] for a in actions})
    sid = statement.get("Sid")
    if not sid:
        first = str((_as_list(statement.get("Resource", [])) or [""])[0])
        sid = f"{fallback} {first.rsplit(':', 1)[-1]}".strip()
    return f"{sid}[{','.join(services)}]"


def _iam_documents(resources: Resources) -> Iterator[tuple[str, list[str]]]:
    """(holder, path to its ``PolicyDocument``) for every role inline policy and managed policy."""
    for lid, resource in sorted(resources.items()):
        if resource["Type"] == "AWS::IAM::Role":
            for i, policy in enumerate(resource["Properties"].get("Policies", [])):
                yield (
                    f"{lid}/{policy.get('PolicyName', i)}",
                    [lid, "Properties", "Policies", i, "PolicyDocument"],
                )
        elif resource["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            yield lid, [lid, "Properties", "PolicyDocument"]


def _at(root: Any, path: Iterable[Any]) -> Any:
    for step in path:
        root = root[step]
    return root


def mutations(resources: Resources) -> list[Mutation]:
    """Every mutation of this deployment's permission statements (see the module docstring)."""
    out: list[Mutation] = []
    for holder, path in _iam_documents(resources):
        document = _at(resources, path)
        for j, statement in enumerate(_as_list(document.get("Statement", []))):
            name = f"{holder}/{_label(statement, f'#{j}')}"
            out.append(Mutation(name, "removed", _remove_statement(path, j)))
            for k, resource in enumerate(_as_list(statement.get("Resource", []))):
                other = another(str(resource))
                if other is not None:
                    out.append(
                        Mutation(name, f"resource {resource} -> {other}", _set_resource(path, j, k, other))
                    )
    for lid, resource in sorted(resources.items()):
        if resource["Type"] != "AWS::OpenSearchServerless::AccessPolicy":
            continue
        for p, policy in enumerate(data_access_policies({lid: resource})):
            for r, rule in enumerate(policy.get("Rules", [])):
                name = f"{lid}/{rule.get('ResourceType')}[aoss-data]"
                out.append(Mutation(name, "removed", _edit_rule(lid, p, r, lambda rule: None)))
                for k, res in enumerate(rule.get("Resource", [])):
                    other = another(res)
                    out.append(
                        Mutation(
                            name,
                            f"resource {res} -> {other}",
                            _edit_rule(lid, p, r, _rule_resource(k, other)),
                        )
                    )
                for permission in rule.get("Permission", []):
                    out.append(
                        Mutation(
                            name, f"without {permission}", _edit_rule(lid, p, r, _rule_without(permission))
                        )
                    )
    return out


def _remove_statement(path: list[Any], j: int) -> Callable[[Resources], None]:
    def apply(resources: Resources) -> None:
        document = _at(resources, path)
        statements = _as_list(document["Statement"])
        document["Statement"] = statements[:j] + statements[j + 1 :]

    return apply


def _set_resource(path: list[Any], j: int, k: int, other: str) -> Callable[[Resources], None]:
    def apply(resources: Resources) -> None:
        document = _at(resources, path)
        statements = _as_list(document["Statement"])
        document["Statement"] = statements
        values = _as_list(statements[j]["Resource"])
        statements[j]["Resource"] = [*values[:k], other, *values[k + 1 :]]

    return apply


def _edit_rule(
    lid: str, p: int, r: int, edit: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> Callable[[Resources], None]:
    def apply(resources: Resources) -> None:
        props = resources[lid]["Properties"]
        policies = json.loads(props["Policy"]) if isinstance(props["Policy"], str) else props["Policy"]
        rules = policies[p]["Rules"]
        edited = edit(copy.deepcopy(rules[r]))
        policies[p]["Rules"] = rules[:r] + ([edited] if edited is not None else []) + rules[r + 1 :]
        props["Policy"] = json.dumps(policies)

    return apply


def _rule_resource(k: int, other: str | None) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def edit(rule: dict[str, Any]) -> dict[str, Any] | None:
        rule["Resource"] = [*rule["Resource"][:k], other, *rule["Resource"][k + 1 :]]
        return rule

    return edit


def _rule_without(permission: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    def edit(rule: dict[str, Any]) -> dict[str, Any] | None:
        rule["Permission"] = [p for p in rule["Permission"] if p != permission]
        return rule

    return edit


@dataclass(frozen=True)
class Recorded:
    """What one stack run called: (principal, request) pairs, deduplicated."""

    checked: frozenset[tuple[str, Request]]
    data_checked: frozenset[tuple[str, Request]]

    @classmethod
    def of(cls, checked: Iterable[tuple[str, Request]], data: Iterable[tuple[str, Request]]) -> Recorded:
        def frozen(pairs: Iterable[tuple[str, Request]]) -> frozenset[tuple[str, Request]]:
            return frozenset((p, Request(r.action, r.resource, _Frozen(r.context))) for p, r in pairs)

        return cls(frozen(checked), frozen(data))


class _Frozen(dict[str, Any]):
    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted((k, str(v)) for k, v in self.items())))


def first_denied(
    resources: Resources,
    raw: Mapping[str, Any],
    recorded: Recorded,
    *,
    only: Iterable[str] | None = None,
    data: bool = True,
) -> str | None:
    """The first recorded call the (mutated) resources would deny, or ``None`` if all are allowed.
    ``only``: check just these principals' IAM calls; ``data``: check the data-access calls too."""
    roles = roles_of(resources, raw)
    who = set(roles.statements) if only is None else set(only)
    for principal, request in sorted(recorded.checked, key=lambda pr: (pr[0], pr[1].action, pr[1].resource)):
        if principal not in who:
            continue
        decision = evaluate(roles.statements[principal], request)
        if decision is not Decision.ALLOWED:
            return f"{principal}: {request.action} on {request.resource} is {decision.value}"
    if not data:
        return None
    policies = data_access_policies(resources)
    for principal, request in sorted(
        recorded.data_checked, key=lambda pr: (pr[0], pr[1].action, pr[1].resource)
    ):
        if not data_access_allows(policies, roles.role_arns[principal], request):
            return f"{principal}: {request.action} on {request.resource} is not in the data-access policy"
    return None


def survivors(
    runs: Iterable[tuple[Resources, Mapping[str, Any], Recorded]],
) -> tuple[dict[str, str], set[str], int]:
    """Evaluate every mutation of every run. Returns (killed: key -> the call it denies, surviving
    keys, the number of mutations): a key present in several deployments is killed if any kills it."""
    killed: dict[str, str] = {}
    seen: set[str] = set()
    for resources, raw, recorded in runs:
        baseline = roles_of(resources, raw).statements
        for mutation in mutations(resources):
            seen.add(mutation.key)
            if mutation.key in killed:
                continue
            mutated = copy.deepcopy(resources)
            mutation.apply(mutated)
            statements = roles_of(mutated, raw).statements
            changed = {p for p in baseline if statements[p] != baseline[p]}
            data = mutation.statement.endswith("[aoss-data]")
            denied = first_denied(mutated, raw, recorded, only=changed, data=data)
            if denied is not None:
                killed[mutation.key] = denied
    return killed, seen - set(killed), len(seen)
