"""IAM policy evaluation for identity policies, as AWS documents it.

moto ships a matcher (``moto.iam.access_control.IAMPolicyStatement``) but it does not fit: it has no
``?`` wildcard, no ``NotResource``, matches action names case-sensitively and turns a failed
condition on an *Allow* statement into a *Deny*. This one follows the documented logic:

* an explicit ``Deny`` that applies wins; otherwise an ``Allow`` that applies allows; otherwise the
  request is implicitly denied;
* a statement applies when its ``Action``/``NotAction``, ``Resource``/``NotResource`` and every
  ``Condition`` match; ``*`` matches any run of characters and ``?`` any one; action names compare
  case-insensitively, resource ARNs case-sensitively;
* conditions: the ``String*``, ``Arn*`` and ``Bool`` operators, ``...IfExists``, and the
  ``ForAnyValue:``/``ForAllValues:`` set qualifiers; a missing key fails a positive operator and
  satisfies a negated one (``StringNotEquals`` ...), as AWS evaluates them.

``tests/integration/test_aws_contracts.py`` checks it on AWS's documented examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Any


class Decision(Enum):
    ALLOWED = "allowed"
    EXPLICIT_DENY = "explicitly denied"
    IMPLICIT_DENY = "implicitly denied (no statement allows it)"


@cache
def _pattern(glob: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{body}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def matches(glob: str, value: str, *, ignore_case: bool = False) -> bool:
    return _pattern(glob, ignore_case).match(value) is not None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_OPERATORS = {
    "StringEquals": lambda want, got: want == got,
    "StringEqualsIgnoreCase": lambda want, got: want.lower() == got.lower(),
    "StringLike": lambda want, got: matches(want, got),
    "ArnEquals": lambda want, got: matches(want, got),
    "ArnLike": lambda want, got: matches(want, got),
    "Bool": lambda want, got: want.lower() == got.lower(),
}
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}


def _condition_holds(operator: str, key: str, wanted: Any, context: Mapping[str, Any]) -> bool:
    qualifier, _, operator = operator.rpartition(":")
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    present = key in context  # condition keys are case-insensitive: callers pass them as AWS spells them
    if not present:
        return if_exists or operator in _NEGATED or qualifier == "ForAllValues"
    negated = operator in _NEGATED
    compare = _OPERATORS[_NEGATED.get(operator, operator)]
    wants = [str(w) for w in _as_list(wanted)]
    got = [str(v) for v in _as_list(context[key])]

    def one(value: str) -> bool:
        hit = any(compare(w, value) for w in wants)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(one(v) for v in got)
    return any(one(v) for v in got)  # ForAnyValue, or a single-valued key


@dataclass(frozen=True)
class Request:
    action: str  # "service:Operation"
    resource: str  # the ARN (or "*" for actions that take none)
    context: Mapping[str, Any]  # condition keys ("s3:prefix": "work/abc/")


def _applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "NotAction" in statement:
        if any(matches(a, request.action, ignore_case=True) for a in _as_list(statement["NotAction"])):
            return False
    elif not any(matches(a, request.action, ignore_case=True) for a in _as_list(statement["Action"])):
        return False
    if "NotResource" in statement:
        if any(matches(r, request.resource) for r in _as_list(statement["NotResource"])):
            return False
    elif not any(matches(r, request.resource) for r in _as_list(statement.get("Resource", []))):
        return False
    for operator, keys in (statement.get("Condition") or {}).items():
        for key, wanted in keys.items():
            if not _condition_holds(operator, key, wanted, request.context):
                return False
    return True


def evaluate(statements: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    allowed = False
    for statement in statements:
        if _applies(statement, request):
            if statement["Effect"] == "Deny":
                return Decision.EXPLICIT_DENY
            allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY


def statements_of(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every statement of these policy documents (``Statement`` may be one object or a list)."""
    return [dict(s) for doc in documents for s in _as_list(doc.get("Statement", []))]
