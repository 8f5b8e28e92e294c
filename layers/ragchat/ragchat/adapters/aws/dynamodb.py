"""DynamoDB adapters: DocumentStore, ConversationStore and Counters on the low-level client.

Key design and access patterns are written down next to the table definitions in
:mod:`ragchat.adapters.aws.tables`. Timestamps come from the injected clock at write time and the
records returned are the records as written. Lists paginate with an opaque cursor (base64 of the
last returned item's key), fetching one extra item so the last page really has ``cursor=None``.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import fields
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import Conflict, NotFound, PayloadTooLarge, TransientError, ValidationError
from ragchat.domain.models import (
    Conversation,
    Document,
    DocumentStatus,
    Message,
    Note,
    Page,
    SourceRef,
)

Item = dict[str, Any]  # DynamoDB JSON: {"attr": {"S": "..."}}

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()

BATCH_WRITE_MAX = 25
BATCH_GET_MAX = 100
MAX_BATCH_ATTEMPTS = 8
#: DynamoDB items are capped at 400 KB; keep a margin for keys and attributes.
MAX_NOTE_TEXT_BYTES = 350_000
_THROTTLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}


# ---------------------------------------------------------------------------- plumbing
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
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ValidationError("invalid cursor") from exc
    if not isinstance(key, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) and set(v) == {"S"} and isinstance(v["S"], str)
        for k, v in key.items()
    ):
        raise ValidationError("invalid cursor")
    return key


def params_match(start: Item, params: dict[str, Any]) -> bool:
    """A cursor must continue the same listing: its partition key is the one being queried."""
    wanted = params.get("ExpressionAttributeValues", {}).get(":pk")
    index = params.get("IndexName")
    pk_name = f"{index}pk" if index else "pk"
    return wanted is None or start.get(pk_name) == wanted


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _Table:
    """The few table operations the stores share: batch writes/gets with retry, paged queries."""

    def __init__(self, name: str, client: Any, sleep: Callable[[float], None]) -> None:
        self.name = name
        self.client = client
        self._sleep = sleep

    def call(self, operation: str, **params: Any) -> Any:
        try:
            return getattr(self.client, operation)(**params)
        except ClientError as exc:
            if _code(exc) in _THROTTLE_CODES:
                raise TransientError(f"DynamoDB {operation} throttled: {_code(exc)}") from exc
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
                raise ValidationError("invalid cursor")
            params["ExclusiveStartKey"] = start
        items: list[Item] = []
        while True:
            try:
                resp = self.call("query", Limit=limit + 1 - len(items), **params)
            except ClientError as exc:
                if cursor and _code(exc) == "ValidationException":
                    raise ValidationError("invalid cursor") from exc
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


def _order(timestamp: str, record_id: str) -> str:
    """Sort key for newest-first listings: the stored timestamp, then a wall-clock nanosecond
    tiebreak (records written within the same millisecond, or under a frozen test clock, keep their
    write order), then the id."""
    return f"{timestamp}#{time.time_ns():020d}#{record_id}"


def _key(pk: str, sk: str) -> Item:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _condition_failed(exc: ClientError) -> bool:
    return _code(exc) == "ConditionalCheckFailedException"


# ---------------------------------------------------------------------------- documents
_DOC_FIELDS = {f.name for f in fields(Document)}
_DOC_MUTABLE = _DOC_FIELDS - {"id", "owner", "created_at", "updated_at"}


def _owner_pk(owner: str) -> str:
    return f"OWNER#{owner}"


class DynamoDocumentStore:
    """Documents and notes in one table (see :mod:`ragchat.adapters.aws.tables`)."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        clock: Clock = system_clock,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._t = _Table(table_name, client, sleep)
        self._clock = clock

    # -- item mapping
    @staticmethod
    def _doc_item(doc: Document) -> Item:
        values: dict[str, Any] = {
            "pk": _owner_pk(doc.owner),
            "sk": f"DOC#{doc.id}",
            "gsi1pk": _owner_pk(doc.owner),
            "gsi1sk": "DOC#" + _order(doc.created_at, doc.id),
            "type": "DOC",
            "id": doc.id,
            "owner": doc.owner,
            "title": doc.title,
            "content_type": doc.content_type,
            "source": doc.source,
            "body_key": doc.body_key,
            "metadata": json.dumps(doc.metadata),
            "collection": doc.collection,
            "status": str(doc.status),
            "error": doc.error,
            "chunk_count": doc.chunk_count,
            "enabled": doc.enabled,
            "split": doc.split,
            "created_at": doc.created_at,
            "updated_at": doc.updated_at,
        }
        if doc.collection is not None:
            values["gsi2pk"] = f"COLL#{doc.owner}#{doc.collection}"
            values["gsi2sk"] = "DOC#" + _order(doc.created_at, doc.id)
        return to_item(values)

    @staticmethod
    def _doc(item: Item) -> Document:
        v = from_item(item)
        return Document(
            id=v["id"],
            owner=v["owner"],
            title=v.get("title", ""),
            content_type=v.get("content_type", ""),
            source=v.get("source", ""),
            body_key=v.get("body_key", ""),
            metadata=json.loads(v.get("metadata") or "{}"),
            collection=v.get("collection"),
            status=DocumentStatus(v.get("status", "PENDING")),
            error=v.get("error"),
            chunk_count=int(v.get("chunk_count", 0)),
            enabled=bool(v.get("enabled", True)),
            split=bool(v.get("split", True)),
            created_at=v.get("created_at", ""),
            updated_at=v.get("updated_at", ""),
        )

    @staticmethod
    def _note_item(note: Note) -> Item:
        values: dict[str, Any] = {
            "pk": _owner_pk(note.owner),
            "sk": f"NOTE#{note.id}",
            "gsi1pk": _owner_pk(note.owner),
            "gsi1sk": "NOTE#" + _order(note.created_at, note.id),
            "type": "NOTE",
            "id": note.id,
            "document_id": note.document_id,
            "chunk_index": note.chunk_index,
            "text": note.text,
            "owner": note.owner,
            "collection": note.collection,
            "metadata": json.dumps(note.metadata),
            "created_at": note.created_at,
        }
        if note.document_id is not None:
            values["gsi2pk"] = f"DOCNOTES#{note.owner}#{note.document_id}"
            values["gsi2sk"] = f"{note.chunk_index:08d}#{note.id}"
        return to_item(values)

    @staticmethod
    def _note(item: Item) -> Note:
        v = from_item(item)
        return Note(
            id=v["id"],
            document_id=v.get("document_id"),
            chunk_index=int(v.get("chunk_index", 0)),
            text=v.get("text", ""),
            owner=v["owner"],
            collection=v.get("collection"),
            metadata=json.loads(v.get("metadata") or "{}"),
            created_at=v.get("created_at", ""),
        )

    def _now(self) -> str:
        return utc_iso(self._clock())

    # -- documents
    def create_document(self, doc: Document) -> Document:
        now = self._now()
        stored = Document(**{f: getattr(doc, f) for f in _DOC_FIELDS})
        stored.created_at = stored.updated_at = now
        stored.status = DocumentStatus(stored.status)
        # Document ids are global: a guard item claims the id for its owner, so another owner can
        # never replace (or shadow) it; the same owner re-creating it replaces the document.
        guard = to_item({"pk": f"DOCID#{doc.id}", "sk": f"DOCID#{doc.id}", "owner": doc.owner})
        try:
            self._t.call(
                "transact_write_items",
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._t.name,
                            "Item": guard,
                            "ConditionExpression": "attribute_not_exists(pk) OR #owner = :owner",
                            "ExpressionAttributeNames": {"#owner": "owner"},
                            "ExpressionAttributeValues": {":owner": {"S": doc.owner}},
                        }
                    },
                    {"Put": {"TableName": self._t.name, "Item": self._doc_item(stored)}},
                ],
            )
        except ClientError as exc:
            if _code(exc) == "TransactionCanceledException":
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                if reasons[:1] == ["ConditionalCheckFailed"]:
                    raise Conflict(f"document id {doc.id} is already taken") from exc
            raise
        return stored

    def get_document(self, owner: str, doc_id: str) -> Document | None:
        resp = self._t.call(
            "get_item",
            TableName=self._t.name,
            Key=_key(_owner_pk(owner), f"DOC#{doc_id}"),
            ConsistentRead=True,
        )
        return self._doc(resp["Item"]) if "Item" in resp else None

    def list_documents(
        self, owner: str, *, collection: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Document]:
        if collection is None:
            params: dict[str, Any] = {
                "IndexName": "gsi1",
                "KeyConditionExpression": "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
                "ExpressionAttributeValues": {":pk": {"S": _owner_pk(owner)}, ":prefix": {"S": "DOC#"}},
                "ScanIndexForward": False,
            }
            key_names = ("pk", "sk", "gsi1pk", "gsi1sk")
        else:
            params = {
                "IndexName": "gsi2",
                "KeyConditionExpression": "gsi2pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": f"COLL#{owner}#{collection}"}},
                "ScanIndexForward": False,
            }
            key_names = ("pk", "sk", "gsi2pk", "gsi2sk")
        items, next_cursor = self._t.query_page(params, limit=limit, cursor=cursor, key_names=key_names)
        return Page([self._doc(i) for i in items], next_cursor)

    def update_document(self, owner: str, doc_id: str, changes: dict[str, Any]) -> Document | None:
        unknown = set(changes) - _DOC_MUTABLE
        if unknown:
            raise ValueError(f"cannot update document field(s): {', '.join(sorted(unknown))}")
        key = _key(_owner_pk(owner), f"DOC#{doc_id}")
        sets: list[str] = ["#updated_at = :updated_at"]
        removes: list[str] = []
        names: dict[str, str] = {"#updated_at": "updated_at"}
        values: dict[str, Any] = {":updated_at": self._now()}
        condition = "attribute_exists(pk)"
        for name, value in changes.items():
            names[f"#{name}"] = name
            if name == "metadata":
                value = json.dumps(value or {})
            elif name == "status":
                value = str(DocumentStatus(value))
            if value is None:
                removes.append(f"#{name}")
            else:
                sets.append(f"#{name} = :{name}")
                values[f":{name}"] = value
        if "collection" in changes:
            # The collection is part of gsi2's key: rewrite it, ordered like gsi1 (fixed at creation).
            current = self._t.call("get_item", TableName=self._t.name, Key=key, ConsistentRead=True)
            if "Item" not in current:
                return None
            order_key = current["Item"]["gsi1sk"]["S"]
            names.update({"#gsi2pk": "gsi2pk", "#gsi2sk": "gsi2sk", "#gsi1sk": "gsi1sk"})
            condition += " AND #gsi1sk = :gsi1sk"
            values[":gsi1sk"] = order_key
            if changes["collection"] is None:
                removes += ["#gsi2pk", "#gsi2sk"]
            else:
                sets += ["#gsi2pk = :gsi2pk", "#gsi2sk = :gsi1sk"]
                values[":gsi2pk"] = f"COLL#{owner}#{changes['collection']}"
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            resp = self._t.call(
                "update_item",
                TableName=self._t.name,
                Key=key,
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_item(values),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _condition_failed(exc):
                return None
            raise
        return self._doc(resp["Attributes"])

    def delete_document(self, owner: str, doc_id: str) -> bool:
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=_key(_owner_pk(owner), f"DOC#{doc_id}"),
            ReturnValues="ALL_OLD",
        )
        self.delete_notes_of_document(owner, doc_id)
        if "Attributes" in resp:
            self._t.call(
                "delete_item",
                TableName=self._t.name,
                Key=_key(f"DOCID#{doc_id}", f"DOCID#{doc_id}"),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
        return "Attributes" in resp

    # -- notes
    def put_notes(self, notes: Sequence[Note]) -> list[Note]:
        now = self._now()
        stored: list[Note] = []
        latest: dict[str, Item] = {}  # a batch may not name the same key twice: the last one wins
        for note in notes:
            if len(note.text.encode("utf-8")) > MAX_NOTE_TEXT_BYTES:
                raise PayloadTooLarge(
                    f"note {note.id} is too large for one record ({MAX_NOTE_TEXT_BYTES} bytes max): split it"
                )
            copy = Note(**{f.name: getattr(note, f.name) for f in fields(Note)})
            copy.created_at = now
            stored.append(copy)
            latest[f"{copy.owner}\x00{copy.id}"] = self._note_item(copy)
        self._t.batch_write([{"PutRequest": {"Item": item}} for item in latest.values()])
        return stored

    def get_notes(self, owner: str, ids: Sequence[str]) -> list[Note]:
        keys = [_key(_owner_pk(owner), f"NOTE#{i}") for i in ids]
        by_id = {n.id: n for n in (self._note(i) for i in self._t.batch_get(keys))}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def list_notes(
        self, owner: str, *, document_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Note]:
        if document_id is not None:
            params: dict[str, Any] = {
                "IndexName": "gsi2",
                "KeyConditionExpression": "gsi2pk = :pk",
                "ExpressionAttributeValues": {":pk": {"S": f"DOCNOTES#{owner}#{document_id}"}},
                "ScanIndexForward": True,
            }
            key_names: tuple[str, ...] = ("pk", "sk", "gsi2pk", "gsi2sk")
        else:
            params = {
                "IndexName": "gsi1",
                "KeyConditionExpression": "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
                "ExpressionAttributeValues": {":pk": {"S": _owner_pk(owner)}, ":prefix": {"S": "NOTE#"}},
                "ScanIndexForward": False,
            }
            key_names = ("pk", "sk", "gsi1pk", "gsi1sk")
        items, next_cursor = self._t.query_page(params, limit=limit, cursor=cursor, key_names=key_names)
        return Page([self._note(i) for i in items], next_cursor)

    def delete_note(self, owner: str, note_id: str) -> Note | None:
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=_key(_owner_pk(owner), f"NOTE#{note_id}"),
            ReturnValues="ALL_OLD",
        )
        return self._note(resp["Attributes"]) if "Attributes" in resp else None

    def delete_notes_of_document(self, owner: str, doc_id: str) -> list[str]:
        found = list(
            self._t.query_all(
                IndexName="gsi2",
                KeyConditionExpression="gsi2pk = :pk",
                ExpressionAttributeValues={":pk": {"S": f"DOCNOTES#{owner}#{doc_id}"}},
                ProjectionExpression="pk, sk, id",
            )
        )
        self._t.delete_keys({"pk": i["pk"], "sk": i["sk"]} for i in found)
        return [i["id"]["S"] for i in found]


# ---------------------------------------------------------------------------- conversations
_CONV_MUTABLE = {"title", "collection", "document_id", "persona", "summary_cursor", "last_summary_id"}


def _conv_pk(owner: str, conv_id: str) -> str:
    return f"CONV#{owner}#{conv_id}"


def _seq_sk(seq: int) -> str:
    return f"MSG#{seq:012d}"


class DynamoConversationStore:
    """Conversations and messages in one table (see :mod:`ragchat.adapters.aws.tables`)."""

    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        clock: Clock = system_clock,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._t = _Table(table_name, client, sleep)
        self._clock = clock

    def _now(self) -> str:
        return utc_iso(self._clock())

    @staticmethod
    def _conv(item: Item) -> Conversation:
        v = from_item(item)
        return Conversation(
            id=v["id"],
            owner=v["owner"],
            title=v.get("title", ""),
            collection=v.get("collection"),
            document_id=v.get("document_id"),
            persona=v.get("persona"),
            summary_cursor=v.get("summary_cursor"),
            last_summary_id=v.get("last_summary_id"),
            message_count=max(0, int(v.get("message_count", 0))),
            created_at=v.get("created_at", ""),
            updated_at=v.get("updated_at", ""),
        )

    @staticmethod
    def _msg(item: Item) -> Message:
        v = from_item(item)
        sources = v.get("sources")
        return Message(
            id=v["id"],
            conversation_id=v["conversation_id"],
            owner=v["owner"],
            role=v["role"],
            content=v.get("content", ""),
            sources=None if sources is None else [SourceRef(**s) for s in json.loads(sources)],
            model=v.get("model"),
            client_message_id=v.get("client_message_id"),
            interrupted=bool(v.get("interrupted", False)),
            created_at=v.get("created_at", ""),
        )

    # -- conversations
    def create_conversation(self, conv: Conversation) -> Conversation:
        now = self._now()
        stored = Conversation(**{f.name: getattr(conv, f.name) for f in fields(Conversation)})
        stored.created_at = stored.updated_at = now
        stored.message_count = 0
        item = to_item(
            {
                "pk": _owner_pk(conv.owner),
                "sk": f"CONV#{conv.id}",
                "gsi1pk": _owner_pk(conv.owner),
                "gsi1sk": "CONV#" + _order(now, conv.id),
                "type": "CONV",
                "seq": 0,
                **{f.name: getattr(stored, f.name) for f in fields(Conversation)},
            }
        )
        try:
            self._t.call(
                "put_item", TableName=self._t.name, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if _condition_failed(exc):
                raise Conflict(f"conversation {conv.id} already exists") from exc
            raise
        return stored

    def get_conversation(self, owner: str, conv_id: str) -> Conversation | None:
        resp = self._t.call(
            "get_item",
            TableName=self._t.name,
            Key=_key(_owner_pk(owner), f"CONV#{conv_id}"),
            ConsistentRead=True,
        )
        return self._conv(resp["Item"]) if "Item" in resp else None

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        params = {
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": _owner_pk(owner)}, ":prefix": {"S": "CONV#"}},
            "ScanIndexForward": False,
        }
        items, next_cursor = self._t.query_page(
            params, limit=limit, cursor=cursor, key_names=("pk", "sk", "gsi1pk", "gsi1sk")
        )
        return Page([self._conv(i) for i in items], next_cursor)

    def update_conversation(self, owner: str, conv_id: str, changes: dict[str, Any]) -> Conversation | None:
        unknown = set(changes) - _CONV_MUTABLE
        if unknown:
            raise ValueError(f"cannot update conversation field(s): {', '.join(sorted(unknown))}")
        now = self._now()
        sets = ["updated_at = :now", "gsi1sk = :gsi1sk"]
        removes: list[str] = []
        names: dict[str, str] = {}
        values: dict[str, Any] = {":now": now, ":gsi1sk": "CONV#" + _order(now, conv_id)}
        for name, value in changes.items():
            names[f"#{name}"] = name
            if value is None:
                removes.append(f"#{name}")
            else:
                sets.append(f"#{name} = :{name}")
                values[f":{name}"] = value
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        params: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": _key(_owner_pk(owner), f"CONV#{conv_id}"),
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": to_item(values),
            "ReturnValues": "ALL_NEW",
        }
        if names:
            params["ExpressionAttributeNames"] = names
        try:
            resp = self._t.call("update_item", **params)
        except ClientError as exc:
            if _condition_failed(exc):
                return None
            raise
        return self._conv(resp["Attributes"])

    def delete_conversation(self, owner: str, conv_id: str) -> bool:
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=_key(_owner_pk(owner), f"CONV#{conv_id}"),
            ReturnValues="ALL_OLD",
        )
        children = self._t.query_all(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": _conv_pk(owner, conv_id)}},
            ProjectionExpression="pk, sk",
            ConsistentRead=True,
        )
        self._t.delete_keys(list(children))
        return "Attributes" in resp

    # -- messages
    def _bump(self, owner: str, conv_id: str, *, count: int, now: str) -> int:
        """Atomically take the next sequence number and count the message; NotFound if no conversation."""
        try:
            resp = self._t.call(
                "update_item",
                TableName=self._t.name,
                Key=_key(_owner_pk(owner), f"CONV#{conv_id}"),
                UpdateExpression="ADD seq :one, message_count :count SET updated_at = :now, gsi1sk = :gsi1sk",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=to_item(
                    {":one": 1, ":count": count, ":now": now, ":gsi1sk": "CONV#" + _order(now, conv_id)}
                ),
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if _condition_failed(exc):
                raise NotFound(f"conversation {conv_id} not found") from exc
            raise
        return int(resp["Attributes"]["seq"]["N"])

    def _add_count(self, owner: str, conv_id: str, delta: int) -> None:
        if delta:
            try:
                self._t.call(
                    "update_item",
                    TableName=self._t.name,
                    Key=_key(_owner_pk(owner), f"CONV#{conv_id}"),
                    UpdateExpression="ADD message_count :d",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":d": {"N": str(delta)}},
                )
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise

    def add_message(self, msg: Message) -> Message:
        now = self._now()
        stored = Message(**{f.name: getattr(msg, f.name) for f in fields(Message)})
        stored.created_at = now
        seq = self._bump(msg.owner, msg.conversation_id, count=1, now=now)
        pk = _conv_pk(msg.owner, msg.conversation_id)
        item = to_item(
            {
                "pk": pk,
                "sk": _seq_sk(seq),
                "type": "MSG",
                "seq": seq,
                "id": stored.id,
                "conversation_id": stored.conversation_id,
                "owner": stored.owner,
                "role": stored.role,
                "content": stored.content,
                "sources": None
                if stored.sources is None
                else json.dumps([{"id": s.id, "text": s.text} for s in stored.sources]),
                "model": stored.model,
                "client_message_id": stored.client_message_id,
                "interrupted": stored.interrupted,
                "created_at": now,
            }
        )
        writes: list[dict[str, Any]] = [
            # Never overwrite a message: a sequence number is handed out once by the atomic ADD.
            {
                "Put": {
                    "TableName": self._t.name,
                    "Item": item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self._t.name,
                    "Item": to_item({"pk": pk, "sk": f"MID#{stored.id}", "seq": seq}),
                }
            },
        ]
        if stored.client_message_id is not None:
            marker = to_item(
                {
                    "pk": pk,
                    "sk": f"CMID#{stored.client_message_id}#{stored.role}",
                    "seq": seq,
                    "message_id": stored.id,
                }
            )
            writes.append(
                {
                    "Put": {
                        "TableName": self._t.name,
                        "Item": marker,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        try:
            self._t.call("transact_write_items", TransactItems=writes)
        except ClientError as exc:
            self._add_count(msg.owner, msg.conversation_id, -1)  # the message was not written
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if _code(exc) == "TransactionCanceledException" and reasons[2:3] == ["ConditionalCheckFailed"]:
                raise Conflict(
                    f"client message id {stored.client_message_id} already used for a {stored.role} message"
                ) from exc
            if _code(exc) == "TransactionCanceledException":
                raise TransientError(f"message {stored.id} could not be written ({reasons})") from exc
            raise
        return stored

    def recent_messages(self, owner: str, conv_id: str, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        resp = self._t.call(
            "query",
            TableName=self._t.name,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": _conv_pk(owner, conv_id)}, ":prefix": {"S": "MSG#"}},
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return [self._msg(i) for i in resp.get("Items", [])]

    def list_messages(
        self, owner: str, conv_id: str, *, limit: int = 1000, cursor: str | None = None
    ) -> Page[Message]:
        params = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": _conv_pk(owner, conv_id)}, ":prefix": {"S": "MSG#"}},
            "ScanIndexForward": True,
            "ConsistentRead": True,
        }
        items, next_cursor = self._t.query_page(params, limit=limit, cursor=cursor, key_names=("pk", "sk"))
        return Page([self._msg(i) for i in items], next_cursor)

    def _seq_of(self, owner: str, conv_id: str, message_id: str) -> int | None:
        resp = self._t.call(
            "get_item",
            TableName=self._t.name,
            Key=_key(_conv_pk(owner, conv_id), f"MID#{message_id}"),
            ConsistentRead=True,
        )
        return int(resp["Item"]["seq"]["N"]) if "Item" in resp else None

    def get_message(self, owner: str, conv_id: str, message_id: str) -> Message | None:
        seq = self._seq_of(owner, conv_id, message_id)
        if seq is None:
            return None
        resp = self._t.call(
            "get_item",
            TableName=self._t.name,
            Key=_key(_conv_pk(owner, conv_id), _seq_sk(seq)),
            ConsistentRead=True,
        )
        return self._msg(resp["Item"]) if "Item" in resp else None

    def find_by_client_message_id(self, owner: str, conv_id: str, client_message_id: str) -> list[Message]:
        pk = _conv_pk(owner, conv_id)
        markers = list(
            self._t.query_all(
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": f"CMID#{client_message_id}#"}},
                ConsistentRead=True,
            )
        )
        keys = [_key(pk, _seq_sk(int(m["seq"]["N"]))) for m in markers]
        items = self._t.batch_get(keys) if keys else []
        items.sort(key=lambda i: int(i["seq"]["N"]))
        return [self._msg(i) for i in items]

    def delete_messages_after(self, owner: str, conv_id: str, message_id: str | None) -> int:
        seq = 0 if message_id is None else self._seq_of(owner, conv_id, message_id)  # seqs start at 1
        if seq is None:
            return 0
        pk = _conv_pk(owner, conv_id)
        later = list(
            self._t.query_all(
                KeyConditionExpression="pk = :pk AND sk BETWEEN :after AND :end",
                ExpressionAttributeValues={
                    ":pk": {"S": pk},
                    ":after": {"S": _seq_sk(seq + 1)},
                    ":end": {"S": "MSG#~"},
                },
                ProjectionExpression="pk, sk, id, #role, client_message_id",
                ExpressionAttributeNames={"#role": "role"},
                ConsistentRead=True,
            )
        )
        keys: list[Item] = []
        for item in later:
            keys.append({"pk": item["pk"], "sk": item["sk"]})
            keys.append(_key(pk, f"MID#{item['id']['S']}"))
            if "client_message_id" in item:
                keys.append(_key(pk, f"CMID#{item['client_message_id']['S']}#{item['role']['S']}"))
        self._t.delete_keys(keys)
        self._add_count(owner, conv_id, -len(later))
        return len(later)


# ---------------------------------------------------------------------------- counters
MAX_INCREMENT_ATTEMPTS = 20


class DynamoCounters:
    """Expiring counters, atomic with conditional ``UpdateItem`` (no transactions, no read-modify-write)."""

    def __init__(self, table_name: str, client: Any, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._t = _Table(table_name, client, sleep)

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
                if not _condition_failed(exc):
                    raise
            expires_at = now + ttl_seconds
            try:  # missing or expired: start over (only if it is still missing or expired)
                self._t.call(
                    "update_item",
                    TableName=self._t.name,
                    Key=k,
                    UpdateExpression="SET #v = :amount, expires_at = :expires_at, #ttl = :ttl",
                    ConditionExpression="attribute_not_exists(pk) OR expires_at <= :now",
                    ExpressionAttributeNames={"#v": "value", "#ttl": "ttl"},
                    ExpressionAttributeValues=to_item(
                        {
                            ":amount": amount,
                            ":expires_at": expires_at,
                            ":ttl": int(expires_at) + 1,
                            ":now": now,
                        }
                    ),
                )
                return amount
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise
            # Someone else reset it between our two calls: it is live again, so go round.
        raise TransientError(f"counter {key}: too much contention")

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
