"""Direct uploads (issue 11): grant a presigned POST, and ingest what lands on it once.

Flow: ``POST /uploads`` → :meth:`UploadService.presign` (a form ``url`` + ``fields`` and the
``documentId`` the upload becomes) → the client POSTs the file with the fields (to S3, or locally to
``/uploads/local/<token>`` → :meth:`UploadService.receive_local`) → the S3 trigger (or the local
route itself) → :meth:`UploadService.ingest_stored` → the document ``PENDING`` → ``READY``.

Status: nothing is recorded at presign time, so ``GET /documents/{id}`` answers 404 until the file
has landed and been accepted (an abandoned upload leaves no document behind), then ``PENDING`` …
``READY``/``FAILED``. Clients poll and treat 404 as "not arrived yet" until the grant expires. What a
granted upload became is recorded when it lands (:meth:`UploadService.outcome`, ``GET
/uploads/{uploadId}``, kept a day): the document, or the one its bytes already were — a copy the
trigger finds under another name would otherwise leave the grant's ``documentId`` a 404 for good.
An upload the trigger or the receiver refuses (too large, a type it cannot read, the uploader no
longer an editor of the workspace, a byte ceiling) is recorded too, with the status and message
``POST /documents`` answers for the same file (:meth:`UploadService.refused`): nothing is silently
dropped. A replay (409) records nothing (the upload already has its outcome), and a refusal before
the grant is claimed never replaces what the upload already became.

Where the bytes live: a granted upload's key (``uploads/<owner>/<upload id>/<file>``, the upload id
being the grant's) is a one-time staging key. The upload that lands there first claims the grant and
is stored at the document's own place (``documents/…``, like ``POST /documents``); the staged object
is removed. Deleting the document deletes its body. Objects dropped under ``uploads/`` without a
grant are ingested where they lie.

Workspaces (issue 32): ``presign(…, workspace=…)`` grants an upload into a shared workspace (key
``uploads/<workspace>/<uploader>/<upload id>/<file>``) to its editors and owners only; without a
workspace the upload goes to the uploader's personal workspace (the key layout before workspaces).
Every way a file lands (the S3 trigger, the local receiver) checks again, at that moment, that the
uploader may still write there (:meth:`UploadService.check_uploader`): a member removed (or made a
viewer) after the grant was issued gets nothing ingested; the refusal is logged and reported (a
``Forbidden``, never a retryable error) and a granted file is removed.

Single use (docs/security.md): a grant is consumed by the first upload that lands — locally when the
receiver accepts it, on S3 when the trigger ingests it — by a conditional write in the counters
store (``claims``). A replay is refused with 409 and ingests nothing: locally before its body is read
(:meth:`UploadService.check_grant`); on S3 (no conditional form POST: S3 stores the replay) the
replayed bytes land only on the staging key, which the trigger refuses and removes, so the document's
bytes are never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.domain.clock import Clock, system_clock, utc_iso
from ragchat.domain.errors import (
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    RagchatError,
    ValidationError,
)
from ragchat.domain.file_errors import EMPTY_FILE, too_large
from ragchat.domain.ids import new_id
from ragchat.domain.models import Document, DocumentStatus
from ragchat.domain.uploads import (
    PresignedUpload,
    UploadGrant,
    UploadOutcome,
    UploadTarget,
    decode_metadata_value,
    document_id_for_key,
    grant_claim_key,
    is_granted,
    parse_form,
    upload_id_of_key,
    upload_key,
    upload_metadata,
    upload_target,
    validate_upload_request,
)
from ragchat.domain.workspaces import Role, can_write
from ragchat.services.workspaces import role_refused

if TYPE_CHECKING:
    from ragchat.ports import BlobStore, Counters, WorkspaceStore
    from ragchat.services.ingestion import Accepted, IngestionService

logger = Logger(service="ragchat", child=True)

# Room for the form fields and the multipart framing around the file.
FORM_OVERHEAD_BYTES = 64 * 1024
USED = "This upload URL has been used already: ask POST /uploads for a new one"
NOT_TAKEN_IN = "Upload not taken in (yet): nothing has come of it so far"
OUTCOME_SECONDS = 24 * 3600  # how long what an upload became is kept (GET /uploads/{uploadId})
WORKSPACE_NOT_FOUND = "Workspace not found"


class UploaderRefused(Forbidden):
    """A landed file whose uploader may no longer write in its workspace: ``message`` says so for the
    log (``s3_ingest.rejected``); ``said`` is what the uploader is told, as ``POST /documents`` would
    tell them now (404 "Workspace not found" once removed, 403 for a viewer)."""

    def __init__(self, message: str, said: RagchatError) -> None:
        super().__init__(message)
        self.said = said


@dataclass(frozen=True, slots=True)
class UploadTicket:
    """What ``POST /uploads`` answers: where to POST the file, and what it becomes."""

    document_id: str
    key: str
    post: PresignedUpload
    content_type: str
    max_bytes: int
    expires_at: str


class UploadService:
    def __init__(
        self,
        blobs: BlobStore,
        ingestion: IngestionService,
        *,
        max_bytes: int,
        expires_in: int,
        claims: Counters,
        clock: Clock = system_clock,
        workspaces: WorkspaceStore | None = None,
    ) -> None:
        self.blobs = blobs
        self.workspaces = workspaces
        self.ingestion = ingestion
        self.claims = claims
        self.max_bytes = max_bytes
        self.expires_in = expires_in
        self.clock = clock

    def presign(
        self,
        owner: str,
        *,
        filename: object,
        content_type: object = None,
        title: object = None,
        collection: object = None,
        workspace: str | None = None,
    ) -> UploadTicket:
        """Validate (the same title/collection/file-type rules as every other way in) and sign.
        ``workspace``: a shared workspace's id to upload into (``owner`` must be an editor or owner
        of it: ``NotFound`` for a non-member, ``Forbidden`` for a viewer); ``None`` or ``owner``'s
        own id: their personal workspace."""
        req = validate_upload_request(filename, content_type, title, collection)
        key = upload_key(owner, new_id(), req.filename, workspace=workspace)
        target = upload_target(key)
        if target.shared:
            self._require_writer(target, at_request=True)
        post = self.blobs.presign_post(
            key,
            content_type=req.content_type,
            min_bytes=1,
            max_bytes=self.max_bytes,
            expires_in=self.expires_in,
            metadata=upload_metadata(req.title, req.collection),
        )
        logger.info("upload.presigned", extra={"key": key, "contentType": req.content_type})
        return UploadTicket(
            document_id=document_id_for_key(key, req.collection),
            key=key,
            post=post,
            content_type=req.content_type,
            max_bytes=self.max_bytes,
            expires_at=utc_iso(self.clock() + self.expires_in),
        )

    def already_there(
        self,
        owner: str,
        sha256: str,
        *,
        filename: object,
        content_type: object = None,
        title: object = None,
        collection: object = None,
        workspace: str | None = None,
    ) -> Accepted | None:
        """The document these bytes already are in the target workspace (``sha256``: the file's, as
        the client computed it), asked before granting an upload, so a duplicate is said in the
        reply (S3's answer to the form POST is S3's own: it cannot say so, and a duplicate found by
        the trigger leaves the grant's ``documentId`` a 404). The same rule as every other door
        (:meth:`IngestionService.accept`): any document of the workspace with these bytes, except
        a FAILED one; the document this file's name would be, given another title, is a new
        version (``None``). A wrong hash only costs its sender: the caller may write here, so may
        list these documents anyway."""
        from ragchat.services.ingestion import Accepted

        req = validate_upload_request(filename, content_type, title, collection)
        same = self.ingestion.documents.find_by_content(workspace or owner, sha256.lower())
        if same is None or same.status == DocumentStatus.FAILED:
            return None
        named = document_id_for_key(
            upload_key(owner, new_id(), req.filename, workspace=workspace), req.collection
        )
        if same.id == named and req.title is not None and req.title != same.title:
            return None
        logger.info("upload.duplicate", extra={"documentId": same.id, "status": str(same.status)})
        return Accepted(same, duplicate=True, elsewhere=same.id != named)

    def ingest_stored(self, key: str, *, data: bytes, metadata: dict[str, str], source: str) -> Document:
        """Accept an object stored under ``uploads/<owner>/…`` as a document. The owner comes from the
        key only; the id is stable per key (same key → same document). A granted upload (S3 trigger)
        is ingested once and moved to the document's own place; a replay of its presigned POST raises
        ``Conflict`` and its object is removed."""
        return self.accept_stored(key, data=data, metadata=metadata, source=source).document

    def accept_stored(self, key: str, *, data: bytes, metadata: dict[str, str], source: str) -> Accepted:
        """:meth:`ingest_stored`, saying whether the file was a duplicate of the document it names
        (then the existing document stays as it is and the new object is removed).

        A granted upload's key is a one-time staging key (its upload id is the grant's): the first
        object to land there claims the grant and is stored where every document body lives
        (``documents/…``); the staged object is then removed, so the document's bytes are out of
        reach of the presigned POST. A replay lands on the staging key again, is refused (``Conflict``)
        and removed. An object dropped without a grant is ingested where it lies."""
        if not is_granted(metadata):
            self.check_uploader(key)  # refused: the object stays where it was dropped
            return self._accept(key, data, metadata, source=source, stored_key=key)
        try:
            self.check_uploader(key)
        except Forbidden as exc:
            self.refused(key, exc)  # said first: if that fails, the retried event finds the object
            self.blobs.delete(key)  # the grant's staging object: nothing will ever ingest it
            raise
        try:
            self._claim(key, ttl_seconds=self.expires_in + 3600)
        except Conflict:
            self.blobs.delete(key)  # the replay's bytes; the document's body lies elsewhere
            raise
        return self._move_in(key, data, metadata, source=source)

    def _move_in(self, key: str, data: bytes, metadata: dict[str, str], *, source: str) -> Accepted:
        """Ingest a claimed grant's file (stored at the document's own place), then drop the staged
        object. A refused file is dropped too (the grant stays used); on a server-side failure the
        claim is given back and the object kept, so a retry of the event can take it."""
        try:
            accepted = self._accept(key, data, metadata, source=source, stored_key=None)
        except RagchatError as exc:
            if exc.status >= 500:
                self._release(key)
                raise
            try:
                self.refused(key, exc, claimed=True)
            except Exception:
                self._release(key)  # not said: the retried event takes the file again
                raise
            self.blobs.delete(key)
            raise
        except Exception:
            self._release(key)
            raise
        self.blobs.delete(key)
        self._record(key, accepted)
        return accepted

    def _record(self, key: str, accepted: Accepted) -> None:
        """Keep what the grant of ``key`` became (``GET /uploads/{uploadId}``): on S3 nothing else can
        tell the page that its file was a copy of another document (the grant's id stays a 404)."""
        upload_id, target = upload_id_of_key(key), upload_target(key)
        if upload_id is None:
            return
        outcome = UploadOutcome(
            owner=target.workspace,
            upload_id=upload_id,
            uploader=target.uploader,
            document_id=accepted.document.id,
            duplicate=accepted.duplicate,
            other_document=accepted.elsewhere,
        )
        self.ingestion.documents.record_upload(outcome, expires_at=self.clock() + OUTCOME_SECONDS)

    def refused(self, key: str, error: RagchatError, *, claimed: bool = False) -> None:
        """Keep why the granted upload at ``key`` was refused (``GET /uploads/{uploadId}``), as
        ``POST /documents`` says it (an :class:`UploaderRefused`: what the uploader is told). Nothing
        for a key that is no grant's, a server-side error, or a replay (``Conflict`` before the claim:
        the upload already has its outcome); ``claimed``: the grant was claimed by this upload, so this
        is its one outcome, else a refusal never replaces what the upload already became."""
        said = error.said if isinstance(error, UploaderRefused) else error
        upload_id, target = upload_id_of_key(key), upload_target(key)
        if upload_id is None or said.status >= 500 or (isinstance(error, Conflict) and not claimed):
            return
        documents, now = self.ingestion.documents, self.clock()
        if not claimed and documents.upload_outcome(target.workspace, upload_id, now=now) is not None:
            return
        outcome = UploadOutcome(
            owner=target.workspace,
            upload_id=upload_id,
            uploader=target.uploader,
            document_id="",
            refused_status=said.status,
            refused_message=said.message,
        )
        logger.info("upload.refused", extra={"key": key, "status": said.status})
        documents.record_upload(outcome, expires_at=now + OUTCOME_SECONDS)

    def outcome(self, user: str, workspace: str, upload_id: str) -> Accepted | UploadOutcome:
        """What ``user``'s upload ``upload_id`` into ``workspace`` became: its document (and whether it
        was a duplicate), or the refused :class:`UploadOutcome` saying why. ``NotFound`` until it has
        landed (or for anyone else's, or when its document is gone)."""
        from ragchat.services.ingestion import Accepted

        found = self.ingestion.documents.upload_outcome(workspace, upload_id, now=self.clock())
        if found is not None and found.uploader == user and found.refused:
            return found
        doc = None
        if found is not None and found.uploader == user:
            doc = self.ingestion.documents.get_document(workspace, found.document_id)
        if found is None or doc is None:
            raise NotFound(NOT_TAKEN_IN)
        return Accepted(doc, duplicate=found.duplicate, elsewhere=found.other_document)

    def refusal(self, user: str, workspace: str, upload_id: str) -> UploadOutcome | None:
        """``user``'s own upload into ``workspace``, when it was refused: readable even once they are
        no member of it (the refusal is what they are told; no document of the workspace shows)."""
        found = self.ingestion.documents.upload_outcome(workspace, upload_id, now=self.clock())
        return found if found is not None and found.uploader == user and found.refused else None

    def _accept(
        self, key: str, data: bytes, metadata: dict[str, str], *, source: str, stored_key: str | None
    ) -> Accepted:
        title = decode_metadata_value(metadata.get("title") or "").strip()
        collection = metadata.get("collection") or None
        target = upload_target(key)
        return self.ingestion.accept(
            target.workspace,
            body=data,
            filename=key.rsplit("/", 1)[-1],
            content_type=None,
            title=title or None,
            collection=collection,
            source=source,
            document_id=document_id_for_key(key, collection),
            stored_key=stored_key,
            direct_upload=True,
            user=target.uploader,  # the daily ceilings are the uploader's, whatever the workspace
        )

    def check_grant(self, token: str, declared_bytes: int | None = None) -> UploadGrant:
        """What the receiver checks before reading a body: the signature and expiry (403), that the
        grant is unused (409) and that the declared body can fit (413)."""
        grant = self.blobs.upload_grant(token)
        if self.claims.get(grant_claim_key(grant.key), now=self.clock()) > 0:
            raise Conflict(USED)
        if declared_bytes is not None and declared_bytes > grant.max_bytes + FORM_OVERHEAD_BYTES:
            refusal = PayloadTooLarge(too_large(declared_bytes, grant.max_bytes))
            self.refused(grant.key, refusal)
            raise refusal
        return grant

    def receive_local(self, token: str, content_type: str, body: bytes) -> Accepted:
        """The local stand-in for S3's form POST: check the grant (signature, expiry, unused), parse
        the form (bounded), check it against the grant (key, type, size), consume the grant, then
        ingest the file as the S3 trigger would (stored at the document's own place; nothing is
        written at the staging key, since a replay is refused before anything is stored). A file the
        ingestion refuses leaves nothing (the client sees the 400 at once); the grant stays used."""
        grant = self.check_grant(token, len(body))  # no grant, or a used one: nothing to record
        try:
            data = self._checked_form(grant, body, content_type)
            self.check_uploader(grant.key)
        except RagchatError as exc:
            self.refused(grant.key, exc)  # the client hears it too; GET /uploads/{uploadId} says it
            raise
        self._claim(grant.key, ttl_seconds=max(60.0, grant.expires - self.clock() + 60))
        try:
            accepted = self._accept(grant.key, data, grant.metadata, source="api", stored_key=None)
        except RagchatError as exc:
            if exc.status >= 500:
                self._release(grant.key)
            else:
                self.refused(grant.key, exc, claimed=True)
            raise
        self._record(grant.key, accepted)
        return accepted

    @staticmethod
    def _checked_form(grant: UploadGrant, body: bytes, content_type: str) -> bytes:
        """The file of a form POSTed for ``grant``, checked against it (key, type, size)."""
        fields, data = form_fields_and_file(body, content_type)
        if fields.get("key") != grant.key:
            raise Forbidden("The form's key does not match the upload URL")
        declared = fields.get("Content-Type") or fields.get("content-type")
        if declared is not None and declared != grant.content_type:
            raise Forbidden(f"Content-Type must be {grant.content_type} for this upload")
        if len(data) > grant.max_bytes:
            raise PayloadTooLarge(too_large(len(data), grant.max_bytes))
        if len(data) < grant.min_bytes:
            raise ValidationError(EMPTY_FILE)
        return data

    def check_uploader(self, key: str) -> UploadTarget:
        """Whose the upload at ``key`` is, once checked NOW (not when it was granted): a shared
        workspace's upload is accepted only while its uploader is an editor or owner there, else
        ``Forbidden`` saying why (the S3 trigger logs it as ``s3_ingest.rejected``). A personal
        upload is its uploader's own."""
        target = upload_target(key)
        if target.shared:
            self._require_writer(target, at_request=False)
        return target

    def _require_writer(self, target: UploadTarget, *, at_request: bool) -> None:
        """``target.uploader`` may write in ``target.workspace`` now (one consistent read). At a
        request a non-member gets ``NotFound`` (the workspace stays unseen) and a viewer
        ``Forbidden``; a landed file gets ``Forbidden`` with the reason either way."""
        store = self.workspaces
        membership = store.membership(target.workspace, target.uploader) if store is not None else None
        if membership is not None and can_write(membership.role):
            return
        if at_request:
            if membership is None:
                raise NotFound("Workspace not found")
            raise Forbidden("Viewers cannot add documents to this workspace")
        reason = f"a {membership.role} of" if membership is not None else "not a member of"
        said = (
            role_refused(membership.role, Role.EDITOR)
            if membership is not None
            else NotFound(WORKSPACE_NOT_FOUND)
        )
        raise UploaderRefused(
            f"uploader {target.uploader} is {reason} workspace {target.workspace} now "
            "(editors and owners only): not ingested",
            said,
        )

    def _claim(self, key: str, *, ttl_seconds: float) -> None:
        """Mark the grant of ``key`` used (atomic); ``Conflict`` when it already was."""
        claimed = self.claims.increment_up_to(
            grant_claim_key(key), limit=1, ttl_seconds=ttl_seconds, now=self.clock()
        )
        if claimed is None:
            logger.warning("upload.replay_refused", extra={"key": key})
            raise Conflict(USED)

    def _release(self, key: str) -> None:
        """Give a claimed grant back (the upload failed on the server's side: a retry may take it)."""
        self.claims.increment(grant_claim_key(key), amount=-1, ttl_seconds=3600, now=self.clock())


def form_fields_and_file(body: bytes, content_type: str) -> tuple[dict[str, str], bytes]:
    """A form as (text fields, the file's bytes): the file is the part with a file name (or named
    ``file``); parsed by :func:`ragchat.domain.uploads.parse_form` (bounded)."""
    fields: dict[str, str] = {}
    data: bytes | None = None
    for part in parse_form(body, content_type):
        if part.filename is not None or part.name == "file":
            data = part.data
        else:
            fields[part.name] = part.data.decode("utf-8", errors="replace")
    if data is None:
        raise ValidationError("No file part in the form (send the file last, in a field named 'file')")
    return fields, data
