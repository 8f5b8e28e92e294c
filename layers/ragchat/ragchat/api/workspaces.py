"""Workspaces and their members (docs/workspaces.md, docs/api.md): ``/workspaces`` routes.

A workspace the caller is not a member of answers 404 (never 403), whatever the route; a member
whose role does not allow the action gets 403. Access is read again on every request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from ragchat.api.auth import principal
from ragchat.api.limits import rate_limit
from ragchat.domain.workspaces import Membership

if TYPE_CHECKING:
    from ragchat.bootstrap import Container

#: how long one DELETE /workspaces/{id} deletes documents before answering 202 (API Gateway: 29 s)
DELETE_SECONDS = 20.0


class WorkspaceIn(BaseModel):
    """``POST /workspaces``, ``PATCH /workspaces/{id}``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=1000, description="1-100 characters, one line.")


class MemberIn(BaseModel):
    """``PUT /workspaces/{id}/members/{userId}``."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(description="viewer (ask, read), editor (also add and change documents) or owner.")


def member_json(m: Membership) -> dict[str, Any]:
    return {"userId": m.user_id, "role": str(m.role), "workspaceId": m.workspace_id}


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    def who() -> str:
        return principal(r.current_event)

    @r.post("/workspaces", status_code=201, summary="Create a shared workspace", tags=["workspaces"])
    def create(body: Annotated[WorkspaceIn, Body()]) -> Response[dict[str, Any]]:
        rate_limit(container, "notes", r.current_event)  # counted with the other writes
        access = container.workspaces.create(who(), body.name)
        return _json(201, access.json())

    @r.get("/workspaces", summary="Your workspaces with your role (personal first)", tags=["workspaces"])
    def list_workspaces() -> dict[str, Any]:
        return {"items": [a.json() for a in container.workspaces.accessible(who())]}

    @r.patch("/workspaces/<workspace_id>", summary="Rename a workspace (owner)", tags=["workspaces"])
    def rename(workspace_id: Annotated[str, Path()], body: Annotated[WorkspaceIn, Body()]) -> dict[str, Any]:
        return container.workspaces.rename(who(), workspace_id, body.name).json()

    @r.delete(
        "/workspaces/<workspace_id>",
        summary="Delete a workspace with its documents (owner)",
        description="Its documents, notes, vectors and files go too; conversations that searched it "
        f"keep their messages. 204 when done; a workspace too large for one request ({DELETE_SECONDS:.0f} s)"
        " answers 202 with the documents deleted so far: repeat the DELETE to carry on.",
        tags=["workspaces"],
    )
    def delete(workspace_id: Annotated[str, Path()]) -> Response[Any]:
        done = container.workspaces.delete_within(who(), workspace_id, DELETE_SECONDS)
        if done.finished:
            return Response(status_code=204, content_type=None, body=None)
        body = {
            "id": workspace_id,
            "documentsDeleted": done.documents,
            "chunksDeleted": done.chunks,
            "finished": False,
            "message": f"Deleted {done.documents} document(s) and {done.chunks} chunk(s) so far: "
            "repeat the DELETE to delete the rest",
        }
        return Response(status_code=202, content_type=content_types.APPLICATION_JSON, body=body)

    _member_routes(r, container, who)
    return r


def _member_routes(r: APIGatewayRouter, container: Container, who: Callable[[], str]) -> None:
    @r.get("/workspaces/<workspace_id>/members", summary="The members and their roles", tags=["workspaces"])
    def members(workspace_id: Annotated[str, Path()]) -> dict[str, Any]:
        return {"items": [member_json(m) for m in container.workspaces.members(who(), workspace_id)]}

    @r.put(
        "/workspaces/<workspace_id>/members/<user_id>",
        summary="Add a member or change their role (owner)",
        description="The last owner cannot be demoted (409). Locally, a user is known by name.",
        tags=["workspaces"],
    )
    def put_member(
        workspace_id: Annotated[str, Path()],
        user_id: Annotated[str, Path()],
        body: Annotated[MemberIn, Body()],
    ) -> dict[str, Any]:
        rate_limit(container, "notes", r.current_event)
        return member_json(container.workspaces.put_member(who(), workspace_id, user_id, body.role))

    @r.delete(
        "/workspaces/<workspace_id>/members/<user_id>",
        summary="Remove a member (owner), or leave (yourself)",
        description="The last owner cannot leave (409). A removed member loses access at once.",
        tags=["workspaces"],
    )
    def remove_member(
        workspace_id: Annotated[str, Path()], user_id: Annotated[str, Path()]
    ) -> Response[None]:
        container.workspaces.remove_member(who(), workspace_id, user_id)
        return Response(status_code=204, content_type=None, body=None)


def _json(status: int, body: dict[str, Any]) -> Response[dict[str, Any]]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)
