"""The DynamoDB plumbing the three stores share: item (de)serialization, opaque cursors, and
:class:`Table` (throttling as ``TransientError``, batch writes/gets with retry, paged queries).

The tables themselves (key schema, indexes) and the key design with every access pattern are in
:mod:`ragchat.adapters.aws.tables`, one section per table, beside the table definitions.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import TransientError, ValidationError

Item = dict[str, Any]  # DynamoDB JSON: {"attr": {"S": "..."}}

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()

BATCH_WRITE_MAX = 25
BATCH_GET_MAX = 100
MAX_BATCH_ATTEMPTS = 8
_THROTTLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}


def _plain(value: Any) -> Any:
    """Python value → something TypeSerializer accepts (floats become Decimals)."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def to_item(values: dict[str, Any]) -> Item:
    """Serialize, leaving out ``None`` (DynamoDB has no use for absent optional attributes)."""
    return {k: _SERIALIZER.serialize(_plain(v)) for k, v in values.items() if v is not None}


def _python(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_python(v) for v in value]
    return value


def from_item(item: Item) -> dict[str, Any]:
    return {k: _python(_DESERIALIZER.deserialize(v)) for k, v in item.items()}


def encode_cursor(key: Item) -> str:
    raw = json.dumps(key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Item:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):  # RecursionError: deep nesting
        raise ValidationError("Invalid cursor") from None
    if not isinstance(key, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) and set(v) == {"S"} and isinstance(v["S"], str)
        for k, v in key.items()
    ):
        raise ValidationError("Invalid cursor")
    try:  # "\ud800" in JSON decodes to a lone surrogate, which no request to DynamoDB can carry
        json.dumps(key, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("Invalid cursor") from None
    return key


def params_match(start: Item, params: dict[str, Any]) -> bool:
    """A cursor must continue the same listing: its partition key is the one being queried."""
    wanted = params.get("ExpressionAttributeValues", {}).get(":pk")
    index = params.get("IndexName")
    pk_name = f"{index}pk" if index else "pk"
    return wanted is None or start.get(pk_name) == wanted


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Table:
    """The few table operations the stores share: batch writes/gets with retry, paged queries."""

    def __init__(self, name: str, client: Any, sleep: Callable[[float], None]) -> None:
        self.name = name
        self.client = client
        self._sleep = sleep

    def call(self, operation: str, **params: Any) -> Any:
        try:
            return getattr(self.client, operation)(**params)
        except ClientError as exc:
            if error_code(exc) in _THROTTLE_CODES:
                raise TransientError(f"DynamoDB {operation} throttled: {error_code(exc)}") from exc
            raise

    def _backoff(self, attempt: int) -> None:
        self._sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random() / 2))

    def batch_write(self, requests: Sequence[Item]) -> None:
        """BatchWriteItem 25 at a time, resubmitting UnprocessedItems with backoff (never dropped)."""
        for chunk in _chunks(list(requests), BATCH_WRITE_MAX):
            pending: list[Item] = list(chunk)
            for attempt in range(MAX_BATCH_ATTEMPTS):
                resp = self.call("batch_write_item", RequestItems={self.name: pending})
                pending = resp.get("UnprocessedItems", {}).get(self.name, [])
                if not pending:
                    break
                self._backoff(attempt)
            else:
                raise TransientError(f"DynamoDB left {len(pending)} writes unprocessed after retries")

    def batch_get(self, keys: Sequence[Item], *, consistent: bool = True) -> list[Item]:
        """BatchGetItem 100 at a time, retrying UnprocessedKeys. Order is not preserved."""
        unique: dict[str, Item] = {}
        for key in keys:
            unique.setdefault(json.dumps(key, sort_keys=True), key)
        found: list[Item] = []
        for chunk in _chunks(list(unique.values()), BATCH_GET_MAX):
            request: dict[str, Any] = {"Keys": list(chunk), "ConsistentRead": consistent}
            for attempt in range(MAX_BATCH_ATTEMPTS):
                resp = self.call("batch_get_item", RequestItems={self.name: request})
                found.extend(resp.get("Responses", {}).get(self.name, []))
                left = resp.get("UnprocessedKeys", {}).get(self.name)
                if not left or not left.get("Keys"):
                    break
                request = left
                self._backoff(attempt)
            else:
                raise TransientError("DynamoDB left keys unprocessed after retries")
        return found

    def query_all(self, **params: Any) -> Iterator[Item]:
        while True:
            resp = self.call("query", TableName=self.name, **params)
            yield from resp.get("Items", [])
            lek = resp.get("LastEvaluatedKey")
            if not lek:
                return
            params["ExclusiveStartKey"] = lek

    def query_page(
        self, params: dict[str, Any], *, limit: int, cursor: str | None, key_names: Sequence[str]
    ) -> tuple[list[Item], str | None]:
        """At most ``limit`` items and a cursor only when more exist (fetches ``limit + 1``)."""
        if limit <= 0:
            return [], None
        params = dict(params, TableName=self.name)
        if cursor:
            start = decode_cursor(cursor)
            if set(start) != {k for k in key_names} or not params_match(start, params):
                raise ValidationError("Invalid cursor")
            params["ExclusiveStartKey"] = start
        items: list[Item] = []
        while True:
            try:
                resp = self.call("query", Limit=limit + 1 - len(items), **params)
            except ClientError as exc:
                if cursor and error_code(exc) == "ValidationException":
                    raise ValidationError("Invalid cursor") from exc
                raise
            items.extend(resp.get("Items", []))
            lek = resp.get("LastEvaluatedKey")
            if len(items) > limit or not lek:
                break
            params["ExclusiveStartKey"] = lek
        if len(items) <= limit:
            return items, None
        items = items[:limit]
        last = items[-1]
        return items, encode_cursor({k: last[k] for k in key_names if k in last})

    def delete_keys(self, keys: Iterable[Item]) -> None:
        self.batch_write([{"DeleteRequest": {"Key": key}} for key in keys])


def order_sk(timestamp: str, record_id: str) -> str:
    """Sort key for newest-first listings: the stored timestamp, then a wall-clock nanosecond
    tiebreak (records written within the same millisecond, or under a frozen test clock, keep their
    write order), then the id."""
    return f"{timestamp}#{time.time_ns():020d}#{record_id}"


def item_key(pk: str, sk: str) -> Item:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def condition_failed(exc: ClientError) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


def owner_pk(owner: str) -> str:
    return f"OWNER#{owner}"


class TableStore:
    """A store over one table that stamps what it writes with its clock (the documents,
    conversations and workspace stores)."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        clock: Clock = system_clock,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._t = Table(table_name, client, sleep)
        self._clock = clock

    def _now(self) -> str:
        return utc_iso(self._clock())
