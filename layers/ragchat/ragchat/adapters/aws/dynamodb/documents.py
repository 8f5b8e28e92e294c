"""``DocumentStore`` on DynamoDB: documents and notes in one table.

Items, keys and access patterns: "Documents table" in :mod:`ragchat.adapters.aws.tables`.
Timestamps come from the injected clock at write time and the records returned are the records as
written. Lists paginate with an opaque cursor (base64 of the last returned item's key), fetching one
extra item so the last page really has ``cursor=None``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from botocore.exceptions import ClientError

from ragchat.adapters.aws.dynamodb.table import (
    Item,
    TableStore,
    condition_failed,
    error_code,
    from_item,
    item_key,
    order_sk,
    owner_pk,
    to_item,
)
from ragchat.domain.errors import Conflict, PayloadTooLarge
from ragchat.domain.models import Document, DocumentStatus, Note, Page
from ragchat.domain.uploads import UploadOutcome

_DOC_FIELDS = {f.name for f in fields(Document)}
_DOC_MUTABLE = _DOC_FIELDS - {"id", "owner", "created_at", "updated_at"}
#: DynamoDB items are capped at 400 KB; keep a margin for keys and attributes.
MAX_NOTE_TEXT_BYTES = 350_000


def _hash_key(owner: str, content_hash: str) -> Item:
    """The content pointer's key (:mod:`ragchat.adapters.aws.tables`)."""
    return item_key(f"HASH#{owner}#{content_hash}", f"HASH#{owner}#{content_hash}")


class DynamoDocumentStore(TableStore):
    """Documents and notes in one table (see :mod:`ragchat.adapters.aws.tables`)."""

    # -- item mapping
    @staticmethod
    def _doc_item(doc: Document) -> Item:
        values: dict[str, Any] = {
            "pk": owner_pk(doc.owner),
            "sk": f"DOC#{doc.id}",
            "gsi1pk": owner_pk(doc.owner),
            "gsi1sk": "DOC#" + order_sk(doc.created_at, doc.id),
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
            "version": doc.version,
            "content_hash": doc.content_hash,
            "size": doc.size,
            "chunks_total": doc.chunks_total,
            "chunks_done": doc.chunks_done,
            "indexing_since": doc.indexing_since,
            "switching": doc.switching,
        }
        if doc.collection is not None:
            values["gsi2pk"] = f"COLL#{doc.owner}#{doc.collection}"
            values["gsi2sk"] = "DOC#" + order_sk(doc.created_at, doc.id)
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
            version=v.get("version"),
            content_hash=v.get("content_hash"),
            size=None if v.get("size") is None else int(v["size"]),
            chunks_total=None if v.get("chunks_total") is None else int(v["chunks_total"]),
            chunks_done=int(v.get("chunks_done") or 0),
            indexing_since=v.get("indexing_since"),
            switching=v.get("switching"),
        )

    @staticmethod
    def _note_item(note: Note) -> Item:
        values: dict[str, Any] = {
            "pk": owner_pk(note.owner),
            "sk": f"NOTE#{note.id}",
            "gsi1pk": owner_pk(note.owner),
            "gsi1sk": "NOTE#" + order_sk(note.created_at, note.id),
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

    # -- documents
    def create_document(self, doc: Document) -> Document:
        now = self._now()
        stored = Document(**{f: getattr(doc, f) for f in _DOC_FIELDS})
        stored.created_at = stored.updated_at = now
        stored.status = DocumentStatus(stored.status)
        # Document ids are global: a guard item claims the id for its owner, so another owner can
        # never replace (or shadow) it; the same owner re-creating it replaces the document.
        guard = to_item({"pk": f"DOCID#{doc.id}", "sk": f"DOCID#{doc.id}", "owner": doc.owner})
        writes: list[dict[str, Any]] = [
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
        ]
        if doc.content_hash:  # the workspace's document with these bytes is now this one
            pointer = _hash_key(doc.owner, doc.content_hash)
            writes.append({"Put": {"TableName": self._t.name, "Item": {**pointer, "id": {"S": doc.id}}}})
        try:
            self._t.call("transact_write_items", TransactItems=writes)
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
                if reasons[:1] == ["ConditionalCheckFailed"]:
                    raise Conflict(f"document id {doc.id} is already taken") from exc
            raise
        return stored

    def get_document(self, owner: str, doc_id: str) -> Document | None:
        resp = self._t.call(
            "get_item",
            TableName=self._t.name,
            Key=item_key(owner_pk(owner), f"DOC#{doc_id}"),
            ConsistentRead=True,
        )
        return self._doc(resp["Item"]) if "Item" in resp else None

    def find_by_content(self, owner: str, content_hash: str) -> Document | None:
        resp = self._t.call(
            "get_item", TableName=self._t.name, Key=_hash_key(owner, content_hash), ConsistentRead=True
        )
        if "Item" not in resp:
            return None
        doc = self.get_document(owner, resp["Item"]["id"]["S"])
        return doc if doc is not None and doc.content_hash == content_hash else None  # stale: none

    def record_upload(self, outcome: UploadOutcome, *, expires_at: float) -> None:
        item = {
            **item_key(owner_pk(outcome.owner), f"UPLOAD#{outcome.upload_id}"),
            "uploader": {"S": outcome.uploader},
            "document_id": {"S": outcome.document_id},
            "duplicate": {"BOOL": outcome.duplicate},
            "other_document": {"BOOL": outcome.other_document},
            "expires_at": {"N": repr(float(expires_at))},
            "ttl": {"N": str(int(expires_at) + 1)},  # DynamoDB TTL removes it eventually
        }
        if outcome.refused:  # why the trigger refused it (no document came of it)
            item["refused_status"] = {"N": str(outcome.refused_status)}
            item["refused_message"] = {"S": outcome.refused_message}
        self._t.call("put_item", TableName=self._t.name, Item=item)

    def upload_outcome(self, owner: str, upload_id: str, *, now: float) -> UploadOutcome | None:
        key = item_key(owner_pk(owner), f"UPLOAD#{upload_id}")
        item = self._t.call("get_item", TableName=self._t.name, Key=key, ConsistentRead=True).get("Item")
        if item is None or float(item["expires_at"]["N"]) <= now:
            return None
        return UploadOutcome(
            owner=owner,
            upload_id=upload_id,
            uploader=item["uploader"]["S"],
            document_id=item["document_id"]["S"],
            duplicate=item["duplicate"]["BOOL"],
            other_document=item["other_document"]["BOOL"],
            refused_status=int(item.get("refused_status", {}).get("N", "0")),
            refused_message=item.get("refused_message", {}).get("S", ""),
        )

    def add_chunks_done(self, owner: str, doc_id: str, version: str | None, count: int) -> Document | None:
        condition = "attribute_exists(pk)"
        values: dict[str, Any] = {":n": {"N": str(int(count))}, ":now": {"S": self._now()}}
        if version is not None:
            condition += " AND (attribute_not_exists(#version) OR #version = :version)"
            values[":version"] = {"S": version}
        return self._updated(
            Key=item_key(owner_pk(owner), f"DOC#{doc_id}"),
            UpdateExpression="ADD chunks_done :n SET updated_at = :now",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
            **({"ExpressionAttributeNames": {"#version": "version"}} if version is not None else {}),
        )

    def _updated(self, **params: Any) -> Document | None:
        """``UpdateItem`` on the table with ``params``: the document as it now is, or ``None`` when
        its condition failed (no such document, or another version's)."""
        try:
            resp = self._t.call("update_item", TableName=self._t.name, ReturnValues="ALL_NEW", **params)
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        return self._doc(resp["Attributes"])

    def list_documents(
        self, owner: str, *, collection: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[Document]:
        if collection is None:
            params: dict[str, Any] = {
                "IndexName": "gsi1",
                "KeyConditionExpression": "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
                "ExpressionAttributeValues": {":pk": {"S": owner_pk(owner)}, ":prefix": {"S": "DOC#"}},
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
        key = item_key(owner_pk(owner), f"DOC#{doc_id}")
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
        return self._updated(
            Key=key,
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_item(values),
        )

    def delete_document(self, owner: str, doc_id: str) -> bool:
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=item_key(owner_pk(owner), f"DOC#{doc_id}"),
            ReturnValues="ALL_OLD",
        )
        self.delete_notes_of_document(owner, doc_id)
        if "Attributes" in resp:
            self._t.call(
                "delete_item",
                TableName=self._t.name,
                Key=item_key(f"DOCID#{doc_id}", f"DOCID#{doc_id}"),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": {"S": owner}},
            )
            old_hash = resp["Attributes"].get("content_hash", {}).get("S")
            if old_hash:  # the pointer goes too, unless it already names another document
                try:
                    self._t.call(
                        "delete_item",
                        TableName=self._t.name,
                        Key=_hash_key(owner, old_hash),
                        ConditionExpression="id = :id",
                        ExpressionAttributeValues={":id": {"S": doc_id}},
                    )
                except ClientError as exc:
                    if not condition_failed(exc):
                        raise
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
        keys = [item_key(owner_pk(owner), f"NOTE#{i}") for i in ids]
        by_id = {n.id: n for n in (self._note(i) for i in self._t.batch_get(keys))}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    def get_notes_and_documents(
        self, owner: str, note_ids: Sequence[str], document_ids: Sequence[str]
    ) -> tuple[list[Note], list[Document]]:
        """One BatchGetItem for both (notes and documents share the owner's partition)."""
        n_ids, d_ids = list(dict.fromkeys(note_ids)), list(dict.fromkeys(document_ids))
        keys = [item_key(owner_pk(owner), f"NOTE#{i}") for i in n_ids]
        keys += [item_key(owner_pk(owner), f"DOC#{i}") for i in d_ids]
        items = self._t.batch_get(keys) if keys else []
        notes = {n.id: n for n in (self._note(i) for i in items if i["sk"]["S"].startswith("NOTE#"))}
        docs = {d.id: d for d in (self._doc(i) for i in items if i["sk"]["S"].startswith("DOC#"))}
        return [notes[i] for i in n_ids if i in notes], [docs[i] for i in d_ids if i in docs]

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
                "ExpressionAttributeValues": {":pk": {"S": owner_pk(owner)}, ":prefix": {"S": "NOTE#"}},
                "ScanIndexForward": False,
            }
            key_names = ("pk", "sk", "gsi1pk", "gsi1sk")
        items, next_cursor = self._t.query_page(params, limit=limit, cursor=cursor, key_names=key_names)
        return Page([self._note(i) for i in items], next_cursor)

    def delete_note(self, owner: str, note_id: str) -> Note | None:
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=item_key(owner_pk(owner), f"NOTE#{note_id}"),
            ReturnValues="ALL_OLD",
        )
        return self._note(resp["Attributes"]) if "Attributes" in resp else None

    def delete_notes_of_document(self, owner: str, doc_id: str, *, limit: int | None = None) -> list[str]:
        query = {
            "IndexName": "gsi2",
            "KeyConditionExpression": "gsi2pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"DOCNOTES#{owner}#{doc_id}"}},
            "ProjectionExpression": "pk, sk, id",
        }
        found = list(itertools.islice(self._t.query_all(**query), limit))
        self._t.delete_keys({"pk": i["pk"], "sk": i["sk"]} for i in found)
        return [i["id"]["S"] for i in found]
