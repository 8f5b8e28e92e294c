"""Direct uploads (issue 11): ``POST /uploads`` grants a presigned POST; locally the POST itself lands
on ``POST /uploads/local/{token}`` (the stand-in for S3, reached through ``ragchat serve``).

Client contract (the same in the cloud and locally):
1. ``POST /uploads`` ``{filename, contentType?, title?, collection?, sha256?}`` → 201
   ``{documentId, key, url, fields, contentType, maxBytes, expiresAt}``; or, when ``sha256`` names
   bytes the workspace already holds, 200 ``{documentId, status, duplicate: true, title, message,
   otherDocument}`` (``POST /documents``' duplicate reply) and nothing to send.
2. ``POST url`` as ``multipart/form-data``: every entry of ``fields`` first, the file last (field
   name ``file``), no ``Authorization`` header. S3 answers 204; the local route 201.
3. Poll ``GET /documents/{documentId}``: 404 until the upload has landed and been accepted, then
   ``PENDING``/``PROCESSING`` → ``READY`` (or ``FAILED`` with ``error``). While it is 404, ``GET
   /uploads/{uploadId}`` says what the upload became once it has landed: 200 with the document (as
   ``POST /documents`` answers: ``duplicate: true``, ``title``, ``message`` when its bytes already
   were a document, whose ``documentId`` then is not the grant's), or ``refused: {status, message}``
   when the receiver or the S3 trigger refused it (as ``POST /documents`` would), 404 until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from pydantic import BaseModel, ConfigDict, Field

from ragchat.api.auth import principal
from ragchat.api.body import decode_body
from ragchat.api.limits import rate_limit
from ragchat.api.schemas import accepted_json
from ragchat.domain.errors import NotFound
from ragchat.domain.labels import MAX_TITLE_CHARS
from ragchat.domain.uploads import UploadOutcome, upload_id_of_key
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
    sha256: str | None = Field(
        None,
        pattern="^[0-9a-fA-F]{64}$",
        description="The file's SHA-256 (hex). When the workspace already holds these bytes, the answer is "
        "200 with `duplicate: true` (as `POST /documents` answers) and no upload is granted.",
    )


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    @r.post(
        "/uploads",
        status_code=201,
        summary="Get a presigned POST for a large file (200 when its bytes are already a document)",
        tags=["documents"],
    )
    def post_upload(upload: Annotated[UploadIn, Body()]) -> Response[dict[str, Any]]:
        rate_limit(container, "uploads", r.current_event)
        user = principal(r.current_event)
        # The caller is the uploader (their key segment, their daily ceilings); the workspace is
        # where the document goes (their personal one: the key layout before workspaces).
        workspace = container.workspaces.require(user, upload.workspace, Role.EDITOR).id
        if upload.sha256 is not None:
            already = container.uploads.already_there(
                user,
                upload.sha256,
                filename=upload.filename,
                content_type=upload.content_type,
                title=upload.title,
                collection=upload.collection,
                workspace=workspace,
            )
            if already is not None:  # nothing to send: said now, not after S3's reply (which cannot)
                status, body = accepted_json(already)
                return _json(status, body)
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

    _status_route(r, container)
    return r


def _status_route(r: APIGatewayRouter, container: Container) -> None:
    """``GET /uploads/{uploadId}``: what the caller's upload became, once it has landed (on S3 the
    form POST's reply is S3's, and a copy the trigger finds leaves the grant's document a 404)."""

    @r.get(
        "/uploads/<upload_id>",
        summary="What an upload became: its document, the one its bytes already were, or why it was refused "
        "(404 until taken in)",
        tags=["documents"],
    )
    def get_upload(
        upload_id: Annotated[str, Path(max_length=64)],
        workspace: Annotated[str | None, Query(max_length=256)] = None,
    ) -> Response[dict[str, Any]]:
        user = principal(r.current_event)
        try:
            ws = container.workspaces.require(user, workspace).id
        except NotFound:  # removed since: their own upload's refusal (and only that) is still theirs
            refused = container.uploads.refusal(user, (workspace or "").strip(), upload_id)
            if refused is None:
                raise
            return _json(200, refusal_json(refused))
        outcome = container.uploads.outcome(user, ws, upload_id)
        if isinstance(outcome, UploadOutcome):
            return _json(200, refusal_json(outcome))
        _, body = accepted_json(outcome)
        return _json(200, {"uploadId": upload_id, **body})


def refusal_json(outcome: UploadOutcome) -> dict[str, Any]:
    """A refused upload: ``refused`` carries the status and message ``POST /documents`` answers."""
    refused = {"status": outcome.refused_status, "message": outcome.refused_message}
    return {"uploadId": outcome.upload_id, "refused": refused}


def ticket_json(ticket: UploadTicket, event: Any) -> dict[str, Any]:
    return {
        "documentId": ticket.document_id,
        "uploadId": upload_id_of_key(ticket.key),
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
