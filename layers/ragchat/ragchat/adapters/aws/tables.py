"""DynamoDB table definitions, keys designed from the access patterns (docs/api.md).

Each definition is a dict usable as ``client.create_table(TableName=..., **DEFINITION)``; the SAM
template declares the same ``AttributeDefinitions``/``KeySchema``/``GlobalSecondaryIndexes`` (plus
``BillingMode: PAY_PER_REQUEST`` and, for counters, ``TimeToLiveSpecification`` on ``ttl``).
Every request path is a ``GetItem``/``Query``/``BatchGetItem``/``UpdateItem``/``TransactWriteItems``:
nothing ever Scans.

Documents table (documents + notes)
===================================
Items (``pk`` / ``sk``; GSI keys only where shown):

- Document: ``OWNER#<owner>`` / ``DOC#<doc id>``;
  gsi1 ``OWNER#<owner>`` / ``DOC#<created>#<tiebreak>#<id>``;
  gsi2 (only with a collection) ``COLL#<owner>#<collection>`` / same sort key as gsi1.
- Note: ``OWNER#<owner>`` / ``NOTE#<note id>``;
  gsi1 ``OWNER#<owner>`` / ``NOTE#<created>#<tiebreak>#<id>``;
  gsi2 (only with a document) ``DOCNOTES#<owner>#<doc id>`` / ``<chunk index, 8 digits>#<id>``.

- Document-id guard: ``DOCID#<doc id>`` / ``DOCID#<doc id>`` (``owner``): written in the same
  transaction as the document, conditioned on "absent or same owner", so ids stay globally unique
  (another owner gets ``Conflict``) while the owner may re-create (replace) the document.
- Content pointer: ``HASH#<owner>#<sha-256 of the bytes>`` / same (``id``): written in the same
  transaction as a document that has a hash; read back through the document it names, which must
  still exist and still have that hash (a stale pointer, left by a replacement, reads as none).
- Upload outcome: ``OWNER#<owner>`` / ``UPLOAD#<upload id>`` (``uploader``, ``document_id``,
  ``duplicate``, ``other_document``, ``expires_at``, ``ttl``; ``refused_status``,
  ``refused_message`` when the trigger refused it): what a granted upload became, written
  when it lands (PutItem), read by ``GET /uploads/{uploadId}`` (GetItem, consistent; an expired one
  reads as none); no GSI keys, so no listing sees it; DynamoDB TTL removes it after a day.

Access patterns:

- get a document: GetItem ``OWNER#o`` / ``DOC#id`` (strongly consistent).
- a workspace's document with these bytes (one document per content): GetItem ``HASH#o#h``, then
  GetItem of the document it names.
- progress of a run (chunks indexed): UpdateItem ``ADD chunks_done :n`` on the document, conditioned
  on its ``version`` (embed steps run in parallel; ``ADD`` is atomic).
- documents by owner, newest first: Query gsi1 ``gsi1pk = OWNER#o AND begins_with(gsi1sk, "DOC#")``,
  ``ScanIndexForward=false``; within a collection: Query gsi2 ``gsi2pk = COLL#o#c``, descending.
- notes by ids (retrieval, one batch): BatchGetItem ``OWNER#o`` / ``NOTE#id`` (100 a call; another
  owner's ids simply miss).
- notes of a document in chunk order: Query gsi2 ``gsi2pk = DOCNOTES#o#d`` ascending.
- an owner's notes, newest first: Query gsi1 ``begins_with(gsi1sk, "NOTE#")`` descending.
- delete a document and its notes: DeleteItem + Query gsi2 (DOCNOTES) + BatchWriteItem (25 a call).

The owner is in every partition key, so no read can reach another owner's items. Notes are keyed by
note id in the base table (not under their document) so retrieval fetches them by id in one strongly
consistent BatchGetItem; the GSIs give the ordered listings. The ``<tiebreak>`` (wall-clock
nanoseconds at write) keeps write order among records stamped in the same millisecond.

Workspaces (in the documents table)
===================================
Shared workspaces and their members live in the documents table, in partitions of their own (``WS#``
and ``USERWS#`` never collide with ``OWNER#``/``DOCID#``), so the functions that read documents can
read memberships with the grants they already have. Personal workspaces are implicit (their id is
the user id: the ``OWNER#<user>`` partition above) and have no items here.

- Workspace: ``WS#<id>`` / ``WS`` (``name``, ``created_at``, ``updated_at``, ``members_version``).
- Membership: ``WS#<id>`` / ``MEMBER#<user>`` (``role``).
- Its inverse: ``USERWS#<user>`` / ``WS#<id>`` (``role``), written and deleted with the membership
  in one TransactWriteItems that also bumps the workspace item's ``members_version`` on condition it
  is the version read with the members (optimistic concurrency: the last-owner rule is decided on
  members no other change can have altered; a cancelled writer re-reads, up to 5 times).

Access patterns (all strongly consistent: a removed member loses access on the very next request):

- a user's workspaces: Query ``pk = USERWS#u`` (ConsistentRead) + BatchGetItem of the ``WS`` items
  for the names. An inverse item rather than a GSI, because a GSI cannot be read consistently.
- a membership (every request on a shared workspace): BatchGetItem ``WS#w``/``WS`` + ``WS#w``/``MEMBER#u``.
- a workspace's members: Query ``pk = WS#w`` (the workspace item and its members in one partition).
- rename: UpdateItem on ``WS`` (names are never copied into memberships).
- delete: DeleteItem ``WS`` (nothing can join after: adding a member checks it), then Query
  ``pk = WS#w`` + BatchWriteItem deleting both halves of every membership.

Conversations table (conversations + messages)
==============================================
Items:

- Conversation: ``OWNER#<owner>`` / ``CONV#<conv id>``; gsi1 ``OWNER#<owner>`` /
  ``CONV#<updated>#<tiebreak>#<id>``. Holds ``message_count`` and ``seq``, both kept with ``ADD``.
- Message: ``CONV#<owner>#<conv id>`` / ``MSG#<seq, 12 digits>``.
- Message-id pointer: ``CONV#<owner>#<conv id>`` / ``MID#<message id>`` (holds ``seq``).
- Client-id marker: ``CONV#<owner>#<conv id>`` / ``CMID#<client id>#<role>`` (``seq``, ``message_id``).
- Conversation-id pointer: ``CONVID#<conv id>`` / ``CONVID`` (``owner``), written before the
  conversation (conditioned on being new) and deleted with it (conversations created before it
  existed have none: they are found by their owner only).

``seq`` is a per-conversation counter (``UpdateItem ADD seq 1``) so messages sort by creation even
when two share a millisecond.

Access patterns:

- conversations by owner, most recently updated first: Query gsi1 descending (``message_count`` is
  on the item, no extra reads).
- messages newest first with a limit: Query ``pk = CONV#o#c AND begins_with(sk, "MSG#")``,
  ``ScanIndexForward=false``, ``Limit=n`` (one query); ascending with a cursor for the history.
- a message by id: GetItem ``MID#id`` then GetItem ``MSG#seq``.
- idempotency per (client message id, role): TransactWriteItems Put marker
  (``attribute_not_exists``) + Put message + Put pointer; a racing duplicate fails the condition →
  ``Conflict`` and writes nothing.
- messages of a client message id: Query ``begins_with(sk, "CMID#<client id>#")`` → BatchGetItem.
- delete messages after one (edit): GetItem ``MID#id`` → Query ``sk BETWEEN MSG#<seq+1> AND MSG#~``
  → BatchWriteItem deletes (messages, pointers, markers).
- a conversation by id alone (to tell a member of its workspace that it is another member's):
  GetItem ``CONVID#c`` then GetItem the conversation.
- delete a conversation: DeleteItem + Query ``pk = CONV#o#c`` (the item collection) + BatchWriteItem,
  then DeleteItem its id pointer.

Counters table
==============
- Item: ``pk = <key>`` (``ip:…``, ``conv:…``, ``breaker:conv:…``), ``value`` N, ``expires_at`` N
  (exact epoch seconds: what reads compare with ``now``), ``ttl`` N (whole epoch seconds: DynamoDB
  TTL removes expired items eventually; reads never rely on it).
- increment: UpdateItem ``ADD value`` conditioned on "exists and expires_at > now"; if that fails,
  UpdateItem ``SET value = amount, expires_at = now + ttl`` conditioned on "missing or expires_at <=
  now"; if that fails too another caller restarted it, so go round again (bounded). Atomic under
  concurrency without transactions or read-modify-write.
- get / get_many: GetItem / BatchGetItem with ConsistentRead.
- put (a flag: ``stream:conv:…`` an answer in flight, ``stop:conv:…`` its stop request): PutItem,
  replacing the item with the new value and expiry.
- put_new (a workspace byte ledger's first count, ``ws-bytes:…``): PutItem conditioned on "missing
  or expires_at <= now"; a failed condition writes nothing (another count is already there).
"""

from __future__ import annotations

from typing import Any

_PROJECTION_ALL = {"ProjectionType": "ALL"}
_ON_DEMAND = {"BillingMode": "PAY_PER_REQUEST"}


def _gsi(name: str, pk: str, sk: str) -> dict[str, Any]:
    return {
        "IndexName": name,
        "KeySchema": [{"AttributeName": pk, "KeyType": "HASH"}, {"AttributeName": sk, "KeyType": "RANGE"}],
        "Projection": _PROJECTION_ALL,
    }


DOCUMENTS_TABLE: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": name, "AttributeType": "S"}
        for name in ("pk", "sk", "gsi1pk", "gsi1sk", "gsi2pk", "gsi2sk")
    ],
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "GlobalSecondaryIndexes": [_gsi("gsi1", "gsi1pk", "gsi1sk"), _gsi("gsi2", "gsi2pk", "gsi2sk")],
    **_ON_DEMAND,
}

CONVERSATIONS_TABLE: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "gsi1pk", "gsi1sk")
    ],
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    "GlobalSecondaryIndexes": [_gsi("gsi1", "gsi1pk", "gsi1sk")],
    **_ON_DEMAND,
}

COUNTERS_TABLE: dict[str, Any] = {
    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    **_ON_DEMAND,
}

#: ``UpdateTimeToLive`` specification for the counters and documents tables (SAM:
#: ``TimeToLiveSpecification``; in the documents table only upload outcomes carry ``ttl``).
COUNTERS_TTL = {"AttributeName": "ttl", "Enabled": True}


def create_tables(client: Any, *, documents: str, conversations: str, counters: str) -> None:
    """Create the three tables (tests, local tooling). The SAM template owns them in the cloud."""
    client.create_table(TableName=documents, **DOCUMENTS_TABLE)
    client.create_table(TableName=conversations, **CONVERSATIONS_TABLE)
    client.create_table(TableName=counters, **COUNTERS_TABLE)
    client.update_time_to_live(TableName=counters, TimeToLiveSpecification=COUNTERS_TTL)
    client.update_time_to_live(TableName=documents, TimeToLiveSpecification=COUNTERS_TTL)
