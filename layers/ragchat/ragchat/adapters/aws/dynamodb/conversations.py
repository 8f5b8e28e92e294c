"""``ConversationStore`` on DynamoDB: conversations and messages in one table.

Items, keys and access patterns: "Conversations table" in :mod:`ragchat.adapters.aws.tables`.
Messages sort by a per-conversation sequence number taken with an atomic ``ADD``; the writes of one
message (the message, its id pointer and its client-id marker) go in one transaction.
"""

from __future__ import annotations

import json
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
from ragchat.domain.errors import Conflict, NotFound, TransientError
from ragchat.domain.models import Conversation, Feedback, Message, Page, source_from_json, source_json

_CONV_MUTABLE = {"title", "collection", "document_id", "persona", "summary_cursor", "last_summary_id"}


def _id_pk(conv_id: str) -> str:
    """The conversation-id pointer's key (``find_conversation``)."""
    return f"CONVID#{conv_id}"


def _conv_pk(owner: str, conv_id: str) -> str:
    return f"CONV#{owner}#{conv_id}"


def _seq_sk(seq: int) -> str:
    return f"MSG#{seq:012d}"


class DynamoConversationStore(TableStore):
    """Conversations and messages in one table (see :mod:`ragchat.adapters.aws.tables`)."""

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
            workspace=v.get("workspace"),
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
            sources=None if sources is None else [source_from_json(s) for s in json.loads(sources)],
            model=v.get("model"),
            client_message_id=v.get("client_message_id"),
            interrupted=bool(v.get("interrupted", False)),
            created_at=v.get("created_at", ""),
            feedback=v.get("feedback"),
            query=v.get("query"),
        )

    # -- conversations
    def create_conversation(self, conv: Conversation) -> Conversation:
        now = self._now()
        stored = Conversation(**{f.name: getattr(conv, f.name) for f in fields(Conversation)})
        stored.created_at = stored.updated_at = now
        stored.message_count = 0
        item = to_item(
            {
                "pk": owner_pk(conv.owner),
                "sk": f"CONV#{conv.id}",
                "gsi1pk": owner_pk(conv.owner),
                "gsi1sk": "CONV#" + order_sk(now, conv.id),
                "type": "CONV",
                "seq": 0,
                **{f.name: getattr(stored, f.name) for f in fields(Conversation)},
            }
        )
        # the id pointer first (an id already taken is a Conflict before anything is written), then
        # the conversation; a conversation that cannot be written takes its pointer back
        pointer = to_item({"pk": _id_pk(conv.id), "sk": "CONVID", "owner": conv.owner})
        new_only = "attribute_not_exists(pk)"
        try:
            self._t.call("put_item", TableName=self._t.name, Item=pointer, ConditionExpression=new_only)
        except ClientError as exc:
            if condition_failed(exc):
                raise Conflict(f"conversation {conv.id} already exists") from exc
            raise
        try:
            self._t.call("put_item", TableName=self._t.name, Item=item, ConditionExpression=new_only)
        except ClientError as exc:
            self._t.call("delete_item", TableName=self._t.name, Key=item_key(_id_pk(conv.id), "CONVID"))
            if condition_failed(exc):
                raise Conflict(f"conversation {conv.id} already exists") from exc
            raise
        return stored

    def get_conversation(self, owner: str, conv_id: str) -> Conversation | None:
        resp = self._t.call(
            "get_item",
            TableName=self._t.name,
            Key=item_key(owner_pk(owner), f"CONV#{conv_id}"),
            ConsistentRead=True,
        )
        return self._conv(resp["Item"]) if "Item" in resp else None

    def find_conversation(self, conv_id: str) -> Conversation | None:
        resp = self._t.call(
            "get_item", TableName=self._t.name, Key=item_key(_id_pk(conv_id), "CONVID"), ConsistentRead=True
        )
        if "Item" not in resp:  # none, or a conversation created before pointers were written
            return None
        return self.get_conversation(str(from_item(resp["Item"])["owner"]), conv_id)

    def list_conversations(
        self, owner: str, *, limit: int = 50, cursor: str | None = None
    ) -> Page[Conversation]:
        params = {
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
            "ExpressionAttributeValues": {":pk": {"S": owner_pk(owner)}, ":prefix": {"S": "CONV#"}},
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
        values: dict[str, Any] = {":now": now, ":gsi1sk": "CONV#" + order_sk(now, conv_id)}
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
            "Key": item_key(owner_pk(owner), f"CONV#{conv_id}"),
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
            if condition_failed(exc):
                return None
            raise
        return self._conv(resp["Attributes"])

    def delete_conversation(self, owner: str, conv_id: str) -> bool:
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=item_key(owner_pk(owner), f"CONV#{conv_id}"),
            ReturnValues="ALL_OLD",
        )
        children = self._t.query_all(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": _conv_pk(owner, conv_id)}},
            ProjectionExpression="pk, sk",
            ConsistentRead=True,
        )
        self._t.delete_keys(list(children))
        if "Attributes" in resp:
            self._t.call("delete_item", TableName=self._t.name, Key=item_key(_id_pk(conv_id), "CONVID"))
        return "Attributes" in resp

    # -- messages
    def _bump(self, owner: str, conv_id: str, *, count: int, now: str) -> int:
        """Atomically take the next sequence number and count the message; NotFound if no conversation."""
        try:
            resp = self._t.call(
                "update_item",
                TableName=self._t.name,
                Key=item_key(owner_pk(owner), f"CONV#{conv_id}"),
                UpdateExpression="ADD seq :one, message_count :count SET updated_at = :now, gsi1sk = :gsi1sk",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=to_item(
                    {":one": 1, ":count": count, ":now": now, ":gsi1sk": "CONV#" + order_sk(now, conv_id)}
                ),
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if condition_failed(exc):
                raise NotFound(f"conversation {conv_id} not found") from exc
            raise
        return int(resp["Attributes"]["seq"]["N"])

    def _add_count(self, owner: str, conv_id: str, delta: int) -> None:
        if delta:
            try:
                self._t.call(
                    "update_item",
                    TableName=self._t.name,
                    Key=item_key(owner_pk(owner), f"CONV#{conv_id}"),
                    UpdateExpression="ADD message_count :d",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":d": {"N": str(delta)}},
                )
            except ClientError as exc:
                if not condition_failed(exc):
                    raise

    @staticmethod
    def _message_item(msg: Message, pk: str, seq: int) -> Item:
        return to_item(
            {
                "pk": pk,
                "sk": _seq_sk(seq),
                "type": "MSG",
                "seq": seq,
                "id": msg.id,
                "conversation_id": msg.conversation_id,
                "owner": msg.owner,
                "role": msg.role,
                "content": msg.content,
                "sources": None if msg.sources is None else json.dumps([source_json(s) for s in msg.sources]),
                "model": msg.model,
                "client_message_id": msg.client_message_id,
                "interrupted": msg.interrupted,
                "created_at": msg.created_at,
                "feedback": msg.feedback,
                "query": msg.query,
            }
        )

    def _message_writes(self, msg: Message, seq: int) -> list[dict[str, Any]]:
        """The message, its id pointer and (with a client message id) its idempotency marker."""
        pk = _conv_pk(msg.owner, msg.conversation_id)
        name = self._t.name
        # Never overwrite a message: a sequence number is handed out once by the atomic ADD.
        new_only = "attribute_not_exists(pk)"
        writes: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": name,
                    "Item": self._message_item(msg, pk, seq),
                    "ConditionExpression": new_only,
                }
            },
            {"Put": {"TableName": name, "Item": to_item({"pk": pk, "sk": f"MID#{msg.id}", "seq": seq})}},
        ]
        if msg.client_message_id is not None:
            marker = to_item(
                {"pk": pk, "sk": f"CMID#{msg.client_message_id}#{msg.role}", "seq": seq, "message_id": msg.id}
            )
            writes.append({"Put": {"TableName": name, "Item": marker, "ConditionExpression": new_only}})
        return writes

    def add_message(self, msg: Message) -> Message:
        now = self._now()
        stored = Message(**{f.name: getattr(msg, f.name) for f in fields(Message)})
        stored.created_at = now
        seq = self._bump(msg.owner, msg.conversation_id, count=1, now=now)
        try:
            self._t.call("transact_write_items", TransactItems=self._message_writes(stored, seq))
        except ClientError as exc:
            self._add_count(msg.owner, msg.conversation_id, -1)  # the message was not written
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons[2:3] == ["ConditionalCheckFailed"]:  # the client-id marker already exists
                raise Conflict(
                    f"client message id {stored.client_message_id} already used for a {stored.role} message"
                ) from exc
            raise TransientError(f"message {stored.id} could not be written ({reasons})") from exc
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
            Key=item_key(_conv_pk(owner, conv_id), f"MID#{message_id}"),
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
            Key=item_key(_conv_pk(owner, conv_id), _seq_sk(seq)),
            ConsistentRead=True,
        )
        return self._msg(resp["Item"]) if "Item" in resp else None

    def set_feedback(
        self, owner: str, conv_id: str, message_id: str, feedback: Feedback | None
    ) -> Message | None:
        seq = self._seq_of(owner, conv_id, message_id)
        if seq is None:
            return None
        params: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": item_key(_conv_pk(owner, conv_id), _seq_sk(seq)),
            # the message may have been deleted (an edit) since its pointer was read
            "ConditionExpression": "attribute_exists(pk) AND #id = :id",
            "ExpressionAttributeNames": {"#id": "id", "#f": "feedback"},
            "ReturnValues": "ALL_NEW",
        }
        if feedback is None:
            params["UpdateExpression"] = "REMOVE #f"
            params["ExpressionAttributeValues"] = to_item({":id": message_id})
        else:
            params["UpdateExpression"] = "SET #f = :f"
            params["ExpressionAttributeValues"] = to_item({":id": message_id, ":f": feedback})
        try:
            resp = self._t.call("update_item", **params)
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        return self._msg(resp["Attributes"])

    def find_by_client_message_id(self, owner: str, conv_id: str, client_message_id: str) -> list[Message]:
        pk = _conv_pk(owner, conv_id)
        markers = list(
            self._t.query_all(
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ExpressionAttributeValues={":pk": {"S": pk}, ":prefix": {"S": f"CMID#{client_message_id}#"}},
                ConsistentRead=True,
            )
        )
        keys = [item_key(pk, _seq_sk(int(m["seq"]["N"]))) for m in markers]
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
            keys.append(item_key(pk, f"MID#{item['id']['S']}"))
            if "client_message_id" in item:
                keys.append(item_key(pk, f"CMID#{item['client_message_id']['S']}#{item['role']['S']}"))
        self._t.delete_keys(keys)
        self._add_count(owner, conv_id, -len(later))
        return len(later)
