"""An in-memory stand-in for the boto3 ``s3vectors`` client (moto has no S3 Vectors query API).

It honours the service's API shapes: every request is validated against the botocore service
model installed in the venv (unknown or missing parameters, list bounds, types), and answers have
the documented response shapes. Semantics emulated:

* one vector bucket / index, ``distanceMetric`` cosine, ``float32`` data (stored rounded to
  float32 as the service does), key overwrite on ``put_vectors``, strongly consistent reads;
* ``query_vectors``: ``topK`` 1–100, results ordered by cosine distance (``1 - cosine``),
  ``distance``/``metadata`` only when asked for; metadata filters with ``$eq $ne $gt $gte $lt
  $lte $in $nin $exists $and $or`` and the ``{"key": value}`` shorthand; non-filterable keys
  (``text`` here) cannot be filtered on;
* metadata values may not be ``null``; filterable metadata is limited to 2 KB per vector;
* ``get_vectors`` ≤ 100 keys, ``delete_vectors`` ≤ 500 keys (missing keys are not an error);
* errors are ``botocore.exceptions.ClientError`` with the service's error codes.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import botocore.session
from botocore.exceptions import ClientError, ParamValidationError
from botocore.validate import ParamValidator

_MODEL = botocore.session.get_session().get_service_model("s3vectors")
_OPS = {
    "put_vectors": "PutVectors",
    "query_vectors": "QueryVectors",
    "get_vectors": "GetVectors",
    "delete_vectors": "DeleteVectors",
    "list_vectors": "ListVectors",
}
FILTERABLE_LIMIT = 2048


def _error(code: str, message: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, op)


def _f32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", float(x)))[0])


def _compare(op: str, actual: Any, expected: Any) -> bool:
    if op in ("$in", "$nin") and (not isinstance(expected, list) or not expected):
        raise ValueError(f"{op} takes a non-empty array of values")
    if op == "$exists":
        return (actual is not None) == bool(expected)
    if actual is None:
        return op in ("$ne", "$nin")
    if op == "$eq":
        return bool(actual == expected)
    if op == "$ne":
        return bool(actual != expected)
    if op == "$in":
        return actual in expected
    if op == "$nin":
        return actual not in expected
    ordering = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
                "$lte": lambda a, b: a <= b}  # fmt: skip
    if op in ordering:
        return bool(ordering[op](actual, expected))
    raise ValueError(f"unsupported filter operator {op}")


def matches(flt: dict[str, Any], meta: dict[str, Any], non_filterable: frozenset[str]) -> bool:
    """Evaluate an S3 Vectors metadata filter document against one vector's metadata."""
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            results = [matches(sub, meta, non_filterable) for sub in cond]
            if not (all(results) if key == "$and" else any(results)):
                return False
            continue
        if key.startswith("$"):
            raise ValueError(f"unsupported filter operator {key}")
        if key in non_filterable:
            raise ValueError(f"metadata key {key!r} is not filterable")
        conditions = cond if isinstance(cond, dict) else {"$eq": cond}
        if not all(_compare(op, meta.get(key), value) for op, value in conditions.items()):
            return False
    return True


class FakeS3Vectors:
    """The subset of the ``s3vectors`` client the adapter uses, plus ``list_vectors`` and a call log."""

    def __init__(
        self, bucket: str, index: str, dimension: int, *, non_filterable: tuple[str, ...] = ("text",)
    ):
        self.bucket = bucket
        self.index = index
        self.dimension = dimension
        self.non_filterable = frozenset(non_filterable)
        self.vectors: dict[str, tuple[list[float], dict[str, Any]]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    # ------------------------------------------------------------------ plumbing
    def _enter(self, method: str, params: dict[str, Any]) -> None:
        op = _OPS[method]
        report = ParamValidator().validate(params, _MODEL.operation_model(op).input_shape)
        if report.has_errors():
            raise ParamValidationError(report=report.generate_report())
        if params.get("vectorBucketName") != self.bucket or params.get("indexName") != self.index:
            raise _error("NotFoundException", "The specified index could not be found", op)
        self.calls.append((method, params))

    def _vector(self, data: dict[str, Any], op: str) -> list[float]:
        values = data.get("float32")
        if not isinstance(values, list) or len(values) != self.dimension:
            raise _error("ValidationException", f"Invalid vector dimension, expected {self.dimension}", op)
        if not all(math.isfinite(float(x)) for x in values):
            raise _error("ValidationException", "Vector values must be finite", op)
        return [_f32(x) for x in values]

    def _check_metadata(self, meta: dict[str, Any], op: str) -> None:
        if any(v is None for v in meta.values()):
            raise _error("ValidationException", "Metadata values cannot be null", op)
        filterable = {k: v for k, v in meta.items() if k not in self.non_filterable}
        if len(json.dumps(filterable).encode()) > FILTERABLE_LIMIT:
            raise _error("ValidationException", "Filterable metadata exceeds 2 KB", op)

    # ------------------------------------------------------------------ API
    def put_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("put_vectors", params)
        staged = {}
        for v in params["vectors"]:
            meta = dict(v.get("metadata") or {})
            self._check_metadata(meta, "PutVectors")
            staged[v["key"]] = (self._vector(v["data"], "PutVectors"), meta)
        self.vectors.update(staged)  # all or nothing
        return {}

    def query_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("query_vectors", params)
        top_k = params["topK"]
        if top_k > 100:
            raise _error("ValidationException", "topK must be between 1 and 100", "QueryVectors")
        query = self._vector(params["queryVector"], "QueryVectors")
        flt = params.get("filter")
        try:
            if flt is not None:
                matches(flt, {}, self.non_filterable)  # reject a bad filter even on an empty index
            found = [(key, vec, meta) for key, (vec, meta) in self.vectors.items()
                     if flt is None or matches(flt, meta, self.non_filterable)]  # fmt: skip
        except ValueError as exc:
            raise _error("ValidationException", str(exc), "QueryVectors") from exc
        ranked = sorted(
            ((self._distance(query, vec), key, meta) for key, vec, meta in found), key=lambda t: t[:2]
        )
        out = []
        for distance, key, meta in ranked[:top_k]:
            item: dict[str, Any] = {"key": key}
            if params.get("returnDistance"):
                item["distance"] = distance
            if params.get("returnMetadata"):
                item["metadata"] = dict(meta)
            out.append(item)
        return {"vectors": out, "distanceMetric": "cosine"}

    @staticmethod
    def _distance(a: list[float], b: list[float]) -> float:
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(x * x for x in b))
        if not na or not nb:
            return 1.0
        return _f32(1.0 - sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb))

    def get_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("get_vectors", params)
        out = []
        for key in params["keys"]:
            if key not in self.vectors:
                continue
            vec, meta = self.vectors[key]
            item: dict[str, Any] = {"key": key}
            if params.get("returnData"):
                item["data"] = {"float32": list(vec)}
            if params.get("returnMetadata"):
                item["metadata"] = dict(meta)
            out.append(item)
        return {"vectors": out}

    def delete_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("delete_vectors", params)
        for key in params["keys"]:
            self.vectors.pop(key, None)
        return {}

    def list_vectors(self, **params: Any) -> dict[str, Any]:
        self._enter("list_vectors", params)
        keys = sorted(self.vectors)
        return {"vectors": [{"key": k} for k in keys]}
