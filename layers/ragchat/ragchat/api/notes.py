"""Area "notes": notes, documents and one-shot questions (docs/api.md).

Built by :func:`router` from the container; handlers capture the container and touch its services
only when called, so building the router (e.g. for the OpenAPI document) costs nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ragchat.api.auth import principal
from ragchat.api.limits import rate_limit
from ragchat.api.negotiation import app_location, wants_html
from ragchat.api.schemas import (
    DocumentPatch,
    NoteIn,
    accepted_json,
    document_json,
    note_json,
    page_json,
    source_json,
)
from ragchat.domain.errors import ValidationError
from ragchat.domain.extraction import (
    IMAGES_NOT_READ,
    is_image,
    supported_extensions,
    supported_type,
    type_for_filename,
)
from ragchat.domain.file_errors import EMPTY_FILE, unsupported_type
from ragchat.domain.ids import named_document_id, stable_document_id
from ragchat.domain.labels import MAX_TITLE_CHARS, validate_collection
from ragchat.domain.page_images import MAX_FIND, MAX_FIND_CHARS
from ragchat.domain.uploads import safe_filename
from ragchat.domain.workspaces import Role

if TYPE_CHECKING:
    from ragchat.bootstrap import Container


#: how long one DELETE /documents/{id} deletes chunks before answering 202 (API Gateway: 29 s)
DELETE_SECONDS = 20.0
INCLUDE_BODY = (
    "`body` to include the full text: `body` itself, or on AWS `bodyUrl`, a link that reads it"
    " (text/plain; charset=utf-8) for `bodyExpiresIn` seconds."
)


Limit = Annotated[int, Query(ge=1, le=200, description="Page size.")]
Cursor = Annotated[str | None, Query(description="Opaque cursor from the previous page.")]
WorkspaceQuery = Annotated[
    str | None,
    Query(max_length=256, description="A workspace id (GET /workspaces); default: your personal workspace."),
]
Source = Annotated[
    str | None,
    Query(
        max_length=1024,
        pattern=r"^file:.+",
        description="Where the file comes from (file:<path>). The document id is derived from it (per "
        "caller), so uploading the same source again replaces that document instead of adding another.",
    ),
]


def router(container: Container) -> APIGatewayRouter:
    r = APIGatewayRouter()  # type: ignore[no-untyped-call]

    def owner() -> str:
        return principal(r.current_event)

    _note_routes(r, container, owner)
    _document_list_route(r, container, owner)
    _document_routes(r, container, owner)
    _document_page_route(r, container, owner)
    _document_edit_routes(r, container, owner)
    _ask_route(r, container, owner)
    return r


def _note_routes(r: APIGatewayRouter, container: Container, owner: Callable[[], str]) -> None:
    @r.post("/notes", status_code=202, summary="Add a note (starts ingestion)", tags=["notes"])
    def post_note(note: Annotated[NoteIn, Body()]) -> Response[dict[str, Any]]:
        user = owner()
        rate_limit(container, "notes", r.current_event)
        who = container.workspaces.require(user, note.workspace, Role.EDITOR).id
        accepted = container.ingestion.accept(
            who,
            user=user,
            text=note.text,
            title=note.title,
            content_type=note.content_type,
            metadata=note.metadata,
            collection=note.collection,
            split=note.split,
            source=note.source or "api",
            document_id=stable_document_id(f"{who}\n{note.source}") if note.source else None,
        )
        return _json(*accepted_json(accepted))

    def list_notes(
        limit: int, cursor: str | None, document_id: str | None, workspace: str | None
    ) -> dict[str, Any]:
        user = owner()
        if document_id:  # the document's workspace, among the caller's
            ws = container.workspaces.find_document(user, document_id)[0].id
        else:
            ws = container.workspaces.require(user, workspace).id
        page = container.document_service.list_notes(ws, document_id=document_id, limit=limit, cursor=cursor)
        return page_json(page, note_json)

    @r.get("/notes", summary="List notes", tags=["notes"])
    def get_notes(
        limit: Limit = 50,
        cursor: Cursor = None,
        documentId: Annotated[str | None, Query()] = None,
        workspace: WorkspaceQuery = None,
    ) -> dict[str, Any]:
        return list_notes(limit, cursor, documentId, workspace)

    @r.get("/notes.json", summary="List notes (alias)", tags=["notes"])
    def get_notes_json(
        limit: Limit = 50,
        cursor: Cursor = None,
        documentId: Annotated[str | None, Query()] = None,
        workspace: WorkspaceQuery = None,
    ) -> dict[str, Any]:
        return list_notes(limit, cursor, documentId, workspace)

    @r.get("/notes/<note_id>", summary="One note (a chunk), whole: e.g. a cited passage", tags=["notes"])
    def get_note(note_id: Annotated[str, Path()]) -> dict[str, Any]:
        _, note = container.workspaces.find_note(owner(), note_id)  # in any workspace the caller reads
        return note_json(note)

    @r.delete("/notes/<note_id>", summary="Delete a note and its vector", tags=["notes"])
    def delete_note(note_id: Annotated[str, Path()]) -> Response[None]:
        access, _ = container.workspaces.find_note(owner(), note_id, Role.EDITOR)
        container.document_service.delete_note(access.id, note_id)
        return Response(status_code=204, content_type=None, body=None)


def _document_list_route(r: APIGatewayRouter, container: Container, owner: Callable[[], str]) -> None:
    @r.get("/documents", summary="List documents (newest first)", tags=["documents"])
    def get_documents(
        limit: Limit = 50,
        cursor: Cursor = None,
        collection: Annotated[str | None, Query()] = None,
        workspace: WorkspaceQuery = None,
    ) -> dict[str, Any]:
        access = container.workspaces.require(owner(), workspace)
        page = container.document_service.list_documents(
            access.id, collection=collection, limit=limit, cursor=cursor
        )
        now = container.clock()
        return page_json(page, lambda doc: document_json(doc, access, now=now))


def _document_routes(r: APIGatewayRouter, container: Container, owner: Callable[[], str]) -> None:
    @r.post(
        "/documents",
        status_code=202,
        summary="Upload a file (.txt .md .html .pdf .docx .pptx .xlsx .odt .epub .rtf; pictures by OCR)",
        description="The same bytes under the same file name (or `source`) in the same collection answer "
        '200 with `"duplicate": true` and the existing document; changed bytes are a new version of it.',
        tags=["documents"],
    )
    def upload_document(
        title: Annotated[str | None, Query(max_length=MAX_TITLE_CHARS)] = None,
        collection: Annotated[str | None, Query()] = None,
        filename: Annotated[str | None, Query()] = None,
        source: Source = None,
        workspace: WorkspaceQuery = None,
    ) -> Response[dict[str, Any]]:
        user = owner()
        rate_limit(container, "notes", r.current_event)
        who = container.workspaces.require(user, workspace, Role.EDITOR).id
        name, content_type, data = _read_upload(r.current_event, filename)
        document_id = _upload_document_id(who, source, collection, name)
        accepted = container.ingestion.accept(
            who,
            user=user,
            body=data,
            filename=name or "upload",
            content_type=content_type,
            title=title,
            collection=collection,
            source=source or "api",
            document_id=document_id,
        )
        return _json(*accepted_json(accepted))

    @r.get(
        "/documents/<document_id>", summary="A document: metadata, status, chunk count", tags=["documents"]
    )
    def get_document(
        document_id: Annotated[str, Path()],
        include: Annotated[str | None, Query(description=INCLUDE_BODY)] = None,
    ) -> dict[str, Any]:
        access, _ = container.workspaces.find_document(owner(), document_id)
        who = access.id
        doc = container.document_service.get(who, document_id)
        out = document_json(doc, access, now=container.clock())
        if include:
            wanted = {part.strip() for part in include.split(",")}
            if not wanted <= {"body"}:
                raise ValidationError("include: only 'body' is supported")
            body = container.document_service.body(who, document_id)
            if body.url is not None:  # on S3: read it there (any size; Lambda answers at most 6 MB)
                out["bodyUrl"], out["bodyExpiresIn"] = body.url, body.expires_in
            else:
                out["body"] = body.text
        return out


def _document_page_route(r: APIGatewayRouter, container: Container, owner: Callable[[], str]) -> None:
    @r.get(
        "/documents/<document_id>/pages/<page>",
        summary="A PDF's page, or a picture, as an image (the document viewer)",
        description="`image` is a PNG data URL, at most 900 pixels wide; `pages` is the page count. A "
        "picture (PNG, JPEG, WebP up to 3 MB) is its own one page, as it was uploaded. "
        "`find`: passages to mark on the image (the cited sentences), one per line: `marks` are boxes over "
        "where they stand on the page (`x`, `y`, `width`, `height` as fractions of the image from its top "
        "left), found by their words; none for a passage not on the page.",
        tags=["documents"],
    )
    def get_document_page(
        document_id: Annotated[str, Path()],
        page: Annotated[str, Path()],
        find: Annotated[str | None, Query(max_length=MAX_FIND_CHARS)] = None,
    ) -> dict[str, Any]:
        if not page.isascii() or not page.isdigit() or len(page) > 6:
            raise ValidationError("page must be a positive integer (the first page is 1)")
        wanted = [line for line in (find or "").splitlines() if line.strip()]
        if len(wanted) > MAX_FIND:
            raise ValidationError(f"find: at most {MAX_FIND} passages, one per line")
        access, _ = container.workspaces.find_document(owner(), document_id)
        shown = container.document_service.page_image(access.id, document_id, int(page), wanted)
        return {
            "documentId": document_id,
            "page": shown.page,
            "pages": shown.pages,
            "width": shown.width,
            "height": shown.height,
            "image": f"data:{shown.mime};base64," + base64.b64encode(shown.png).decode("ascii"),
            "marks": [{"x": m.x, "y": m.y, "width": m.width, "height": m.height} for m in shown.marks],
        }


def _document_edit_routes(r: APIGatewayRouter, container: Container, owner: Callable[[], str]) -> None:
    @r.patch(
        "/documents/<document_id>",
        summary="Enable/disable, rename or re-tag",
        description="200 with the document when done; enabling or disabling a document too large for one"
        f" request ({DELETE_SECONDS:.0f} s) answers 202 with the chunks switched so far: repeat the PATCH"
        " to carry on (the document says `switching` until then).",
        tags=["documents"],
    )
    def patch_document(
        document_id: Annotated[str, Path()], patch: Annotated[DocumentPatch, Body()]
    ) -> Response[Any]:
        changes = patch.changes()
        if not changes:
            raise ValidationError("Nothing to update: give at least one of enabled, title, metadata")
        access, _ = container.workspaces.find_document(owner(), document_id, Role.EDITOR)
        service = container.document_service
        doc, switched, finished = service.update_within(access.id, document_id, changes, DELETE_SECONDS)
        if finished:
            body = document_json(doc, access)
        else:
            state = "on" if changes["enabled"] else "off"
            body = {
                "id": document_id,
                "enabled": changes["enabled"],
                "chunksSwitched": switched,
                "chunkCount": doc.chunk_count,
                "finished": False,
                "message": f"Switched {switched} of {doc.chunk_count} chunk(s) {state} so far: repeat the"
                " PATCH to switch the rest",
            }
        return Response(
            status_code=200 if finished else 202, content_type=content_types.APPLICATION_JSON, body=body
        )

    @r.delete(
        "/documents/<document_id>",
        summary="Delete a document, its notes, vectors and body",
        description=f"204 when done; a document too large for one request ({DELETE_SECONDS:.0f} s) answers"
        " 202 with the chunks deleted so far: repeat the DELETE to carry on.",
        tags=["documents"],
    )
    def delete_document(document_id: Annotated[str, Path()]) -> Response[Any]:
        access, _ = container.workspaces.find_document(owner(), document_id, Role.EDITOR)
        removed, finished = container.document_service.delete_within(access.id, document_id, DELETE_SECONDS)
        if finished:
            return Response(status_code=204, content_type=None, body=None)
        body = {
            "id": document_id,
            "chunksDeleted": removed,
            "finished": False,
            "message": f"Deleted {removed} chunk(s) so far: repeat the DELETE to delete the rest",
        }
        return Response(status_code=202, content_type=content_types.APPLICATION_JSON, body=body)


def _ask_route(r: APIGatewayRouter, container: Container, owner: Callable[[], str]) -> None:
    @r.get(
        "/",
        summary="Ask a one-shot question",
        description="Without `text`, a browser (`Accept: text/html`) is redirected to the chat page `/ui`.",
        tags=["ask"],
    )
    def ask(
        text: Annotated[str | None, Query(description="The question.")] = None,
        collection: Annotated[str | None, Query()] = None,
        workspace: Annotated[
            str | None,
            Query(
                max_length=256, description="Search only this workspace (default: every one you belong to)."
            ),
        ] = None,
    ) -> Response[Any]:  # the answer, or a browser's redirect (no body)
        event = r.current_event
        if text is None and wants_html((event.headers or {}).get("accept")):
            # A browser opening the API's root gets the app (API clients keep their JSON 400).
            return Response(
                status_code=302,
                content_type=None,
                body=None,
                headers={"Location": app_location(event.raw_event)},
            )
        who = owner()
        if text is None or not text.strip():
            raise ValidationError("text: a question is required (GET /?text=...)")
        rate_limit(container, "ask", r.current_event)
        if workspace:
            access = container.workspaces.require(who, workspace)
            names = {access.id: access.name}
        else:
            names = container.workspaces.names(who)
        result = container.ask.ask(who, text, collection=validate_collection(collection), workspaces=names)
        body = {
            "answer": result.answer,
            "sources": [source_json(s) for s in result.sources],
            "guardUsed": result.guard_used,
        }
        if result.suggestions:  # a refusal's closest passages (READER=on)
            body["suggestions"] = list(result.suggestions)
        return _json(
            200,
            body,
            headers={"x-model-used": result.model, "x-source-count": str(len(result.sources))},
        )


def _json(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Response[dict[str, Any]]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body,
        headers=headers or {},
    )


def _upload_document_id(who: str, source: str | None, collection: str | None, name: str) -> str | None:
    """Which document an upload is: the one its ``source`` names, else the file of that name in that
    collection (as for a direct upload); a nameless upload is a new document."""
    if source:
        return stable_document_id(f"{who}\n{source}")
    if name:
        return named_document_id(who, validate_collection(collection), safe_filename(name))
    return None


def _read_upload(event: Any, filename: str | None) -> tuple[str, str, bytes]:
    """The uploaded file from a raw body (``Content-Type`` of the file, name in ``?filename=`` or the
    ``X-Filename`` header) or from ``multipart/form-data`` (first file part)."""
    raw = event.body or ""
    data = base64.b64decode(raw) if event.is_base64_encoded else raw.encode("utf-8")
    if not data:
        raise ValidationError(EMPTY_FILE)  # the same words at every door (docs/api.md)
    headers = {k.lower(): v for k, v in (event.headers or {}).items()}
    ctype = headers.get("content-type", "application/octet-stream")
    name = filename or unquote(headers.get("x-filename", "") or "")
    if ctype.lower().startswith("multipart/form-data"):
        name, ctype, data = _first_multipart_file(ctype, data, name)
    if not type_for_filename(name) and is_image(name, ctype):
        raise ValidationError(IMAGES_NOT_READ)
    ctype = type_for_filename(name) or supported_type(ctype) or ""
    if not ctype:
        raise ValidationError(
            unsupported_type(name or None, supported_extensions())
            + ("" if name else " Name the file with ?filename= or X-Filename.")
        )
    return name, ctype, data


def _first_multipart_file(ctype: str, data: bytes, fallback_name: str) -> tuple[str, str, bytes]:
    from ragchat.domain.uploads import parse_form

    for part in parse_form(data, ctype):  # bounded: part count and header size capped
        if part.filename is None:
            continue
        if not part.data:
            raise ValidationError(EMPTY_FILE)
        return part.filename or fallback_name, part.content_type, part.data
    raise ValidationError("No file part in the multipart body (expected a field with a filename)")
