"""``Counters`` on DynamoDB: expiring counters (rate limits, circuit breaker), one item per key.

Items and the increment protocol: "Counters table" in :mod:`ragchat.adapters.aws.tables`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from ragchat.adapters.aws.dynamodb.table import Item, Table, condition_failed, from_item, to_item
from ragchat.domain.errors import TransientError

MAX_INCREMENT_ATTEMPTS = 20


class DynamoCounters:
    """Expiring counters, atomic with conditional ``UpdateItem`` (no transactions, no read-modify-write)."""

    def __init__(self, table_name: str, client: Any, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._t = Table(table_name, client, sleep)

    def increment(self, key: str, *, amount: int = 1, ttl_seconds: float, now: float) -> int:
        k = {"pk": {"S": key}}
        for _ in range(MAX_INCREMENT_ATTEMPTS):
            try:  # live counter: add, keep its expiry
                resp = self._t.call(
                    "update_item",
                    TableName=self._t.name,
                    Key=k,
                    UpdateExpression="ADD #v :amount",
                    ConditionExpression="attribute_exists(pk) AND expires_at > :now",
                    ExpressionAttributeNames={"#v": "value"},
                    ExpressionAttributeValues=to_item({":amount": amount, ":now": now}),
                    ReturnValues="UPDATED_NEW",
                )
                return int(resp["Attributes"]["value"]["N"])
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
            if self._start(key, amount=amount, ttl_seconds=ttl_seconds, now=now):  # missing or expired
                return amount
            # Someone else reset it between our two calls: it is live again, so go round.
        raise TransientError(f"counter {key}: too much contention")

    def increment_up_to(
        self, key: str, *, limit: int, amount: int = 1, ttl_seconds: float, now: float
    ) -> int | None:
        if amount > limit:
            return None
        k = {"pk": {"S": key}}
        for _ in range(MAX_INCREMENT_ATTEMPTS):
            try:  # live and room left: add (one conditional UpdateItem, so check and add are atomic)
                resp = self._t.call(
                    "update_item",
                    TableName=self._t.name,
                    Key=k,
                    UpdateExpression="ADD #v :amount",
                    ConditionExpression="attribute_exists(pk) AND expires_at > :now AND #v <= :most",
                    ExpressionAttributeNames={"#v": "value"},
                    ExpressionAttributeValues=to_item(
                        {":amount": amount, ":now": now, ":most": limit - amount}
                    ),
                    ReturnValues="UPDATED_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return int(resp["Attributes"]["value"]["N"])
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                old: Item | None = exc.response.get("Item")  # type: ignore[assignment]
                if _live(old, now):
                    return None  # live and full: refused, nothing written
            if self._start(key, amount=amount, ttl_seconds=ttl_seconds, now=now):
                return amount
            # Someone else started it between our two calls: it is live again, so go round.
        raise TransientError(f"counter {key}: too much contention")

    def _start(self, key: str, *, amount: int, ttl_seconds: float, now: float) -> bool:
        """Set a missing or expired counter to ``amount``; False when it is live (nothing written)."""
        expires_at = now + ttl_seconds
        try:
            self._t.call(
                "update_item",
                TableName=self._t.name,
                Key={"pk": {"S": key}},
                UpdateExpression="SET #v = :amount, expires_at = :expires_at, #ttl = :ttl",
                ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                ExpressionAttributeNames={"#v": "value", "#ttl": "ttl"},
                ExpressionAttributeValues=to_item(
                    {":amount": amount, ":expires_at": expires_at, ":ttl": int(expires_at) + 1, ":now": now}
                ),
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def get(self, key: str, *, now: float) -> int:
        resp = self._t.call("get_item", TableName=self._t.name, Key={"pk": {"S": key}}, ConsistentRead=True)
        return self._live_value(resp.get("Item"), now)

    @staticmethod
    def _live_value(item: Item | None, now: float) -> int:
        if not item:
            return 0
        v = from_item(item)
        return int(v.get("value", 0)) if float(v.get("expires_at", 0)) > now else 0

    def get_many(self, keys: Sequence[str], *, now: float) -> dict[str, int]:
        items = self._t.batch_get([{"pk": {"S": k}} for k in keys]) if keys else []
        by_key = {i["pk"]["S"]: i for i in items}
        return {k: self._live_value(by_key.get(k), now) for k in keys}

    def reset(self, key: str) -> None:
        self._t.call("delete_item", TableName=self._t.name, Key={"pk": {"S": key}})

    def put_new(self, key: str, value: int, *, ttl_seconds: float, now: float) -> bool:
        """One conditional ``PutItem``: written only when the item is missing or expired."""
        expires_at = now + ttl_seconds
        try:
            self._t.call(
                "put_item",
                TableName=self._t.name,
                Item=to_item(
                    {"pk": key, "value": int(value), "expires_at": expires_at, "ttl": int(expires_at) + 1}
                ),
                ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                ExpressionAttributeValues=to_item({":now": now}),
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
        return True

    def put(self, key: str, value: int, *, ttl_seconds: float, now: float) -> None:
        expires_at = now + ttl_seconds
        self._t.call(
            "put_item",
            TableName=self._t.name,
            Item=to_item(
                {"pk": key, "value": int(value), "expires_at": expires_at, "ttl": int(expires_at) + 1}
            ),
        )


def _live(item: Item | None, now: float) -> bool:
    return item is not None and float(from_item(item).get("expires_at", 0)) > now
