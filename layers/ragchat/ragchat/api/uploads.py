"""Direct uploads (issue 11): ``POST /uploads`` grants a presigned POST; locally the POST itself lands
on ``POST /uploads/local/{token}`` (the stand-in for S3, reached through ``ragchat serve``).

Client contract (the same in the cloud and locally):
1. ``POST /uploads`` ``{filename, contentType?, title?, collection?}`` → 201
   ``{documentId, key, url, fields, contentType, maxBytes, expiresAt}``.
2. ``POST url`` as ``multipart/form-data``: every entry of ``fields`` first, the file last (field
   name ``file``), no ``Authorization`` header. S3 answers 204; the local route 201.
3. Poll ``GET /documents/{documentId}``: 404 until the upload has landed and been accepted, then
   ``PENDING``/``PROCESSING`` → ``READY`` (or ``FAILED`` with ``error``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from ragchat.api.auth import principal
from ragchat.api.body import decode_body
from ragchat.api.limits import rate_limit
from ragchat.api.schemas import accepted_json
from ragchat.domain.labels import MAX_TITLE_CHARS
from ragchat.domain.workspaces import Role
from ragchat.services.uploads import UploadTicket

if TYPE_CHECKING:
    from ragchat.bootstrap import Container


class UploadIn(BaseModel):
    """``POST /uploads``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    filename: str = Field(
        description="The file's name; its extension (.txt .md .html .pdf .docx .pptx .xlsx .odt .epub "
        ".rtf, or a picture read by OCR: .png .jpg .tif .webp) sets the type."
    )
    content_type: str | None = Field(None, alias="contentType", description="Pinned in the signed form.")
    title: str | None = Field(None, max_length=MAX_TITLE_CHARS)
    collection: str | None = Field(None, description="1-64 letters, digits, '_', '-', '.', ':'.")
    workspace: str | None = Field(
        None, max_length=256, description="The workspace to add it to (editor); default: your personal one."
    )


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    @r.post("/uploads", status_code=201, summary="Get a presigned POST for a large file", tags=["documents"])
    def post_upload(upload: Annotated[UploadIn, Body()]) -> Response[dict[str, Any]]:
        rate_limit(container, "uploads", r.current_event)
        user = principal(r.current_event)
        # The caller is the uploader (their key segment, their daily ceilings); the workspace is
        # where the document goes (their personal one: the key layout before workspaces).
        workspace = container.workspaces.require(user, upload.workspace, Role.EDITOR).id
        ticket = container.uploads.presign(
            user,
            filename=upload.filename,
            content_type=upload.content_type,
            title=upload.title,
            collection=upload.collection,
            workspace=workspace,
        )
        return _json(201, ticket_json(ticket, r.current_event))

    @r.post(
        "/uploads/local/<token>",
        status_code=201,
        summary="Receive a presigned upload (local server only)",
        tags=["documents"],
        include_in_schema=False,
    )
    def receive_local(token: Annotated[str, Path()]) -> Response[dict[str, Any]]:

        event = r.current_event
        rate_limit(container, "receiver", event)  # per IP: whoever holds a URL has no principal
        ctype = {k.lower(): v for k, v in (event.headers or {}).items()}.get("content-type", "")
        accepted = container.uploads.receive_local(token, ctype, decode_body(event.raw_event))
        status, body = accepted_json(accepted)
        return _json(201 if status == 202 else status, body)

    return r


def ticket_json(ticket: UploadTicket, event: Any) -> dict[str, Any]:
    return {
        "documentId": ticket.document_id,
        "key": ticket.key,
        "url": absolute_url(ticket.post.url, event),
        "fields": ticket.post.fields,
        "contentType": ticket.content_type,
        "maxBytes": ticket.max_bytes,
        "expiresAt": ticket.expires_at,
    }


def absolute_url(url: str, event: Any) -> str:
    """A URL on this server (``/uploads/local/…``) made absolute from the request's ``Host``."""
    if not url.startswith("/"):
        return url
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    host = headers.get("host")
    if not host:
        return url
    scheme = headers.get("x-forwarded-proto", "http").split(",")[0].strip() or "http"
    return f"{scheme}://{host}{url}"


def _json(status: int, body: dict[str, Any]) -> Response[dict[str, Any]]:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)
