"""``WorkspaceStore`` on DynamoDB: shared workspaces and their members, in the documents table.

Items, keys and access patterns: "Workspaces" in :mod:`ragchat.adapters.aws.tables`. In short:

- workspace ``WS#<id>`` / ``WS`` (name, timestamps);
- membership ``WS#<id>`` / ``MEMBER#<user>`` (role), for the members of a workspace;
- its inverse ``USERWS#<user>`` / ``WS#<id>`` (role), for the workspaces of a user.

The inverse item (not a GSI) is what makes ``memberships(user)`` a strongly consistent Query: a GSI
is only eventually consistent, and a member removed a moment ago must not be found by the very next
request. Both items of a membership are written and deleted in one transaction, conditioned on the
workspace existing, so they never disagree. Names are read from the workspace item (one
``BatchGetItem``), never copied into memberships, so a rename shows at once everywhere.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ragchat.adapters.aws.dynamodb.table import Item, TableStore, error_code, from_item, item_key, to_item
from ragchat.domain.errors import Conflict, NotFound
from ragchat.domain.workspaces import Membership, Role, Workspace, last_owner, leaves_no_owner

_META = "WS"
_MEMBER = "MEMBER#"
_VERSION = "members_version"  # bumped by every membership change (optimistic concurrency)
_ATTEMPTS = 5


def _ws_pk(workspace_id: str) -> str:
    return f"WS#{workspace_id}"


def _user_pk(user_id: str) -> str:
    return f"USERWS#{user_id}"


def _cancelled_by(exc: ClientError, *codes: str) -> bool:
    """A cancelled transaction with one of ``codes`` among its reasons (``ConditionalCheckFailed``;
    ``TransactionConflict``: another transaction was writing the same item at that moment)."""
    if error_code(exc) != "TransactionCanceledException":
        return False
    return any(r.get("Code") in codes for r in exc.response.get("CancellationReasons", []))


class DynamoWorkspaceStore(TableStore):
    """Shared workspaces and memberships (see :mod:`ragchat.adapters.aws.tables`, "Workspaces")."""

    @staticmethod
    def _workspace(item: Item) -> Workspace:
        v = from_item(item)
        return Workspace(
            id=v["id"],
            name=v.get("name", ""),
            created_at=v.get("created_at", ""),
            updated_at=v.get("updated_at", ""),
        )

    def _member_puts(self, workspace_id: str, user_id: str, role: Role) -> list[dict[str, Any]]:
        """The two items of one membership (the workspace's, the user's inverse), as transaction Puts."""
        values = {"workspace_id": workspace_id, "user_id": user_id, "role": str(role), "type": "MEMBER"}
        forward = to_item({"pk": _ws_pk(workspace_id), "sk": _MEMBER + user_id, **values})
        inverse = to_item({"pk": _user_pk(user_id), "sk": _ws_pk(workspace_id), **values})
        return [{"Put": {"TableName": self._t.name, "Item": item}} for item in (forward, inverse)]

    # -- workspaces
    def create_workspace(self, workspace: Workspace, owner: str) -> Workspace:
        now = self._now()
        stored = Workspace(id=workspace.id, name=workspace.name, created_at=now, updated_at=now)
        meta = to_item(
            {
                "pk": _ws_pk(stored.id),
                "sk": _META,
                "type": "WS",
                "id": stored.id,
                "name": stored.name,
                "created_at": now,
                "updated_at": now,
            }
        )
        put_meta = {
            "Put": {
                "TableName": self._t.name,
                "Item": meta,
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        try:
            self._t.call(
                "transact_write_items",
                TransactItems=[put_meta, *self._member_puts(stored.id, owner, Role.OWNER)],
            )
        except ClientError as exc:
            if _cancelled_by(exc, "ConditionalCheckFailed"):
                raise Conflict(f"workspace {stored.id} already exists") from exc
            raise
        return stored

    def get_workspace(self, workspace_id: str) -> Workspace | None:
        resp = self._t.call(
            "get_item", TableName=self._t.name, Key=item_key(_ws_pk(workspace_id), _META), ConsistentRead=True
        )
        return self._workspace(resp["Item"]) if "Item" in resp else None

    def rename_workspace(self, workspace_id: str, name: str) -> Workspace | None:
        try:
            resp = self._t.call(
                "update_item",
                TableName=self._t.name,
                Key=item_key(_ws_pk(workspace_id), _META),
                UpdateExpression="SET #name = :name, updated_at = :now",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#name": "name"},
                ExpressionAttributeValues=to_item({":name": name, ":now": self._now()}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        return self._workspace(resp["Attributes"])

    def delete_workspace(self, workspace_id: str) -> bool:
        """The workspace item goes first (nothing can join it after), then every membership, both
        halves (a member's ``memberships`` never lists a workspace that is gone: it is read too)."""
        resp = self._t.call(
            "delete_item",
            TableName=self._t.name,
            Key=item_key(_ws_pk(workspace_id), _META),
            ReturnValues="ALL_OLD",
        )
        keys: list[Item] = []
        for item in self._partition(workspace_id):
            keys.append({"pk": item["pk"], "sk": item["sk"]})
            if item["sk"]["S"].startswith(_MEMBER):
                keys.append(item_key(_user_pk(item["user_id"]["S"]), _ws_pk(workspace_id)))
        self._t.delete_keys(keys)
        return "Attributes" in resp

    def _partition(self, workspace_id: str) -> list[Item]:
        return list(
            self._t.query_all(
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": _ws_pk(workspace_id)}},
                ConsistentRead=True,
            )
        )

    # -- members
    def memberships(self, user_id: str) -> list[Membership]:
        """One consistent Query of the user's inverse items, one BatchGetItem for the names. A
        workspace deleted meanwhile (its item gone, memberships not yet) is left out."""
        found = list(
            self._t.query_all(
                KeyConditionExpression="pk = :pk AND begins_with(sk, :ws)",
                ExpressionAttributeValues={":pk": {"S": _user_pk(user_id)}, ":ws": {"S": "WS#"}},
                ConsistentRead=True,
            )
        )
        if not found:
            return []
        metas = self._t.batch_get([item_key(i["sk"]["S"], _META) for i in found])
        names = {m["id"]["S"]: m.get("name", {}).get("S", "") for m in metas}
        out = []
        for item in found:
            ws = item["workspace_id"]["S"]
            if ws in names:
                out.append(Membership(ws, user_id, Role(item["role"]["S"]), names[ws]))
        return sorted(out, key=lambda m: (m.workspace_name, m.workspace_id))

    def membership(self, workspace_id: str, user_id: str) -> Membership | None:
        """One consistent BatchGetItem: the membership and its workspace (both must exist)."""
        items = self._t.batch_get(
            [item_key(_ws_pk(workspace_id), _META), item_key(_ws_pk(workspace_id), _MEMBER + user_id)]
        )
        by_sk = {i["sk"]["S"]: i for i in items}
        if _META not in by_sk or _MEMBER + user_id not in by_sk:
            return None
        role = Role(by_sk[_MEMBER + user_id]["role"]["S"])
        return Membership(workspace_id, user_id, role, by_sk[_META].get("name", {}).get("S", ""))

    def members(self, workspace_id: str) -> list[Membership]:
        """One consistent Query of the workspace's partition (its item and its members)."""
        items = self._partition(workspace_id)
        meta = next((i for i in items if i["sk"]["S"] == _META), None)
        if meta is None:
            return []
        name = meta.get("name", {}).get("S", "")
        return [
            Membership(workspace_id, i["user_id"]["S"], Role(i["role"]["S"]), name)
            for i in items
            if i["sk"]["S"].startswith(_MEMBER)
        ]

    def put_member(
        self, workspace_id: str, user_id: str, role: Role, *, keep_owner: bool = False
    ) -> Membership:
        """Both halves in one transaction with the workspace's version (``NotFound`` when it is gone)."""
        role = Role(role)
        self._change_members(
            workspace_id, user_id, role, keep_owner, self._member_puts(workspace_id, user_id, role)
        )
        found = self.membership(workspace_id, user_id)
        return found or Membership(workspace_id, user_id, role)

    def remove_member(self, workspace_id: str, user_id: str, *, keep_owner: bool = False) -> bool:
        """Both halves in one transaction; ``False`` when ``user_id`` was not a member."""
        deletes = [
            {"Delete": {"TableName": self._t.name, "Key": item_key(_ws_pk(workspace_id), _MEMBER + user_id)}},
            {"Delete": {"TableName": self._t.name, "Key": item_key(_user_pk(user_id), _ws_pk(workspace_id))}},
        ]
        try:
            return self._change_members(workspace_id, user_id, None, keep_owner, deletes)
        except NotFound:
            return False

    def _change_members(
        self,
        workspace_id: str,
        user_id: str,
        role: Role | None,
        keep_owner: bool,
        writes: list[dict[str, Any]],
    ) -> bool:
        """Optimistic concurrency on the workspace item's ``members_version``: read the members
        (consistent), decide, and write the membership items in one transaction that also bumps the
        version on condition it is unchanged. Two owners demoting each other at the same instant:
        the second transaction is cancelled, re-reads, finds one owner left and gets ``Conflict``.
        ``False`` (nothing written) when removing someone who is not a member."""
        for _ in range(_ATTEMPTS):
            items = self._partition(workspace_id)
            meta = next((i for i in items if i["sk"]["S"] == _META), None)
            if meta is None:
                raise NotFound("Workspace not found")
            members = [
                Membership(workspace_id, i["user_id"]["S"], Role(i["role"]["S"]))
                for i in items
                if i["sk"]["S"].startswith(_MEMBER)
            ]
            if role is None and user_id not in {m.user_id for m in members}:
                return False
            if keep_owner and leaves_no_owner(members, user_id, role):
                raise last_owner(role)
            version = int(meta.get(_VERSION, {"N": "0"})["N"])
            bump = {
                "Update": {
                    "TableName": self._t.name,
                    "Key": item_key(_ws_pk(workspace_id), _META),
                    "UpdateExpression": f"SET {_VERSION} = :next",
                    "ConditionExpression": (
                        f"attribute_exists(pk) AND ({_VERSION} = :seen OR "
                        f"(attribute_not_exists({_VERSION}) AND :seen = :zero))"
                    ),
                    "ExpressionAttributeValues": {
                        ":next": {"N": str(version + 1)},
                        ":seen": {"N": str(version)},
                        ":zero": {"N": "0"},
                    },
                }
            }
            try:
                self._t.call("transact_write_items", TransactItems=[bump, *writes])
                return True
            except ClientError as exc:
                if not _cancelled_by(exc, "ConditionalCheckFailed", "TransactionConflict"):
                    raise
        raise Conflict("The workspace's members were changing at the same time: try again")
