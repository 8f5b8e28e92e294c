"""Request limits of OpenSearch's HTTP API, for :mod:`ragchat.adapters.aws.opensearch`.

A ``_bulk`` body is kept under ``MAX_BULK_BYTES`` (5 MiB: half of 10 MiB, the smallest HTTP payload
limit of OpenSearch Service, which Serverless refuses large ``_bulk`` requests over as well): NDJSON
lines are grouped per action (:func:`request_actions`, an ``index`` action with its source) so a
request is cut only between actions. A ``terms`` query may name at most ``index.max_terms_count``
values (65,536 by default): :func:`term_batches` splits a longer one into queries over disjoint
batches, whose hits and counts add up.
"""

from __future__ import annotations

import json
from typing import Any

MAX_BULK_BYTES = 5 * 1024 * 1024
MAX_TERMS = 65_536  # index.max_terms_count's default


def term_batches(query: dict[str, Any], max_terms: int) -> list[dict[str, Any]]:
    """``query`` (a ``terms`` query, or a ``bool`` whose ``filter`` holds one) as queries of at most
    ``max_terms`` values each; the values are made unique, so the parts match disjoint sets."""
    clauses = query["bool"]["filter"] if "bool" in query else [query]
    for i, clause in enumerate(clauses):
        if "terms" not in clause:
            continue
        ((field, values),) = clause["terms"].items()
        if len(values) <= max_terms:
            return [query]
        unique = list(dict.fromkeys(values))
        parts = []
        for start in range(0, len(unique), max_terms):
            terms = {"terms": {field: unique[start : start + max_terms]}}
            if "bool" not in query:
                parts.append(terms)
            else:
                parts.append({"bool": {**query["bool"], "filter": [*clauses[:i], terms, *clauses[i + 1 :]]}})
        return parts
    return [query]


def bulk_failures(actions: list[tuple[str, str | None]], resp: dict[str, Any]) -> dict[str, str]:
    """Note id → reason for every action a ``_bulk`` response reports failed (a delete's 404 is fine)."""
    if not resp.get("errors"):
        return {}
    failed: dict[str, str] = {}
    for (_, note), item in zip(actions, resp.get("items", []), strict=False):
        ((action, result),) = item.items()
        status = int(result.get("status", 500))
        if action == "delete" and status == 404:
            continue
        if status >= 300 or "error" in result:
            error = result.get("error", {})
            reason = error.get("reason", str(error)) if isinstance(error, dict) else str(error)
            failed[note or str(result.get("_id"))] = f"{status} {reason}"
    return failed


def ndjson(line: dict[str, Any]) -> str:
    return json.dumps(line, separators=(",", ":")) + "\n"


def request_actions(lines: list[dict[str, Any]], ids: list[str | None]) -> list[tuple[str, str | None]]:
    """NDJSON lines → one (text, note id) per action, its source line included (``ids`` per action)."""
    out: list[tuple[str, str | None]] = []
    for line in lines:
        if is_action(line):
            out.append((ndjson(line), ids[len(out)] if len(out) < len(ids) else None))
        else:
            text, note = out[-1]
            out[-1] = (text + ndjson(line), note)
    return out


def too_large(exc: Any) -> bool:
    """A request refused for its size: 413, or a 400 whose error says so."""
    if exc.status_code == 413:
        return True
    # only the request's size: "exceeded" alone also names mapping limits (total fields), which a
    # smaller request would not cure
    text = str(getattr(exc, "info", "") or exc.error).lower()
    return exc.status_code == 400 and any(
        w in text for w in ("too large", "too long", "content length", "request size")
    )


def is_action(line: dict[str, Any]) -> bool:
    return len(line) == 1 and next(iter(line)) in ("index", "delete", "create", "update")
