"""What an OpenSearch request needs, and the OpenSearch Serverless data-access policy, as AWS documents
them ("Supported operations and plugins in Amazon OpenSearch Serverless"; "Data access control for
Amazon OpenSearch Serverless"; Amazon OpenSearch Service's ``es:ESHttp*`` actions).

* A Serverless collection: the caller's IAM policy must allow ``aoss:APIAccessAll`` on the collection
  ARN, **and** a data-access policy must name the caller's role with the permission the request
  needs (``aoss:ReadDocument`` for ``_search``/``_count``, ``aoss:WriteDocument`` for ``_bulk`` and
  document writes, ``aoss:DescribeIndex`` for ``HEAD <index>``, ``aoss:CreateIndex`` for
  ``PUT <index>`` …) on ``index/<collection>/<index>`` (or, for aliases and templates,
  ``collection/<collection>``). Either missing: 403.
* A managed domain: the caller's IAM policy must allow ``es:ESHttp<Method>`` on
  ``<domain ARN>/<path>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tests.aws_contracts.policy import Request, matches
from tests.aws_contracts.requests import Unmapped

_READ = {"_search", "_msearch", "_count", "_mget", "_explain", "_validate", "_field_caps", "_termvectors"}
_WRITE = {"_bulk", "_create", "_update", "_delete_by_query", "_update_by_query"}
_DESCRIBE = {"_mapping", "_mappings", "_setting", "_settings", "_stats"}


def serverless_permission(method: str, path: str, collection: str) -> Request:
    """The data-access permission and resource a request to a Serverless collection needs."""
    parts = [p for p in path.split("/") if p]
    method = method.upper()
    if not parts:
        raise Unmapped(f"aoss {method} /")
    head = parts[0]
    if head.startswith("_"):
        if head in ("_alias", "_aliases", "_index_template", "_template"):
            permission = (
                "aoss:DescribeCollectionItems" if method in ("GET", "HEAD") else "aoss:UpdateCollectionItems"
            )
            return Request(permission, f"collection/{collection}", {})
        if head in _READ:
            return Request("aoss:ReadDocument", f"index/{collection}/*", {})
        if head == "_bulk":
            return Request("aoss:WriteDocument", f"index/{collection}/*", {})
        if head in ("_mapping", "_mappings") or parts[:2] == ["_cat", "indices"]:
            return Request("aoss:DescribeIndex", f"index/{collection}/*", {})
        raise Unmapped(f"aoss {method} {path}")
    resource = f"index/{collection}/{head}"
    rest = parts[1] if len(parts) > 1 else None
    if rest is None:
        permission = {"PUT": "aoss:CreateIndex", "DELETE": "aoss:DeleteIndex"}.get(
            method, "aoss:DescribeIndex"
        )
    elif rest in _READ or (rest == "_doc" and method in ("GET", "HEAD")):
        permission = "aoss:ReadDocument"
    elif rest in _WRITE or rest == "_doc":
        permission = "aoss:WriteDocument"
    elif rest in _DESCRIBE:
        permission = "aoss:DescribeIndex" if method in ("GET", "HEAD") else "aoss:UpdateIndex"
    else:
        raise Unmapped(f"aoss {method} {path}")
    return Request(permission, resource, {})


def domain_request(method: str, path: str, domain_arn: str) -> Request:
    return Request(f"es:ESHttp{method.capitalize()}", f"{domain_arn}/{path.lstrip('/')}", {})


def data_access_policies(resources: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every rule set of the template's ``AWS::OpenSearchServerless::AccessPolicy`` (type data),
    resolved (``resolve_template``): ``[{"Rules": [...], "Principal": [...]}, ...]``."""
    out: list[dict[str, Any]] = []
    for resource in resources.values():
        if resource["Type"] == "AWS::OpenSearchServerless::AccessPolicy":
            props = resource["Properties"]
            if props.get("Type") == "data":
                policy = props["Policy"]
                out.extend(json.loads(policy) if isinstance(policy, str) else policy)
    return out


def data_access_allows(policies: Sequence[Mapping[str, Any]], role_arn: str, request: Request) -> bool:
    """Whether any policy names ``role_arn`` and has a rule of the request's resource type granting
    the permission on a matching resource (data-access policies only allow; no deny)."""
    kind = request.resource.split("/", 1)[0]
    for policy in policies:
        if not any(matches(p, role_arn) for p in policy.get("Principal", [])):
            continue
        for rule in policy.get("Rules", []):
            if rule.get("ResourceType") != kind:
                continue
            if not any(matches(r, request.resource) for r in rule.get("Resource", [])):
                continue
            if any(matches(p, request.action, ignore_case=True) for p in rule.get("Permission", [])):
                return True
    return False
