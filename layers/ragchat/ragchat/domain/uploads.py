"""Direct uploads (issue 11): the rules for a presigned upload, independent of where it lands.

- Key: the workspace, then the uploader (issue 32). In a shared workspace
  ``uploads/<workspace>/<uploader>/<upload id>/<file name>``; in the uploader's personal workspace
  (whose id is the user id) the two are one segment, ``uploads/<owner>/<upload id>/<file name>``,
  the layout keys had before workspaces, so old keys and grants keep working unchanged. The second
  segment tells them apart: shared workspace ids start with ``ws_`` and user ids never do
  (:func:`upload_target`). Only the key names the workspace and the uploader (never metadata); the
  S3 trigger ingests a shared workspace's upload only if the uploader is an editor or owner of it at
  that moment. The document id comes from the workspace, the collection and the file name
  (``document_id_for_key``), so it is known when the upload is granted, and uploading the same
  name again is that document again (unchanged bytes: a duplicate; changed: a new version).
- The file name keeps its extension (the trigger detects the type from it) and loses anything that
  is not plainly safe in a key.
- Title and collection travel as object metadata (``x-amz-meta-title``/``x-amz-meta-collection``).
  S3 metadata is US-ASCII: other text is carried as an RFC 2047 encoded word (what S3 itself uses),
  and :func:`decode_metadata_value` reads either form back.
- A local upload grant is a signed token (HMAC-SHA256 over the grant as JSON, with an expiry).
- A grant is single-use: the upload that lands first claims it (``grant_claim_key``, a conditional
  write in the counters store); a replay is refused (409) and ingests nothing. Granted uploads carry
  the metadata ``grant`` so the S3 trigger can tell them from objects dropped into the bucket; their
  key (the upload id is the grant's) is only a staging key: the file is moved to the document's own
  place once claimed, so a replayed POST cannot overwrite it.
- Forms are parsed by :func:`parse_form`, linear and bounded: at most :data:`MAX_FORM_PARTS` parts,
  each with at most :data:`MAX_PART_HEADER_BYTES` of headers (200,000 tiny parts cost a minute of
  CPU with ``email.parser``; here they are refused at the 33rd part).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import asdict, dataclass, field
from email.header import decode_header, make_header

from ragchat.domain.errors import Forbidden, ValidationError
from ragchat.domain.extraction import detect_content_type, supported_extensions
from ragchat.domain.ids import named_document_id, stable_document_id
from ragchat.domain.labels import optional_title, validate_collection
from ragchat.domain.workspaces import is_shared

UPLOADS_PREFIX = "uploads/"
MAX_FILENAME_CHARS = 128
# S3 user metadata: at most 2 KB (names and values, UTF-8 bytes).
MAX_METADATA_BYTES = 2048
# A form: the grant's fields (key, Content-Type, x-amz-meta-*) and the file; nothing needs more.
MAX_FORM_PARTS = 32
MAX_PART_HEADER_BYTES = 8 * 1024
GRANT_MARKER = "grant"  # object metadata of a granted upload (``x-amz-meta-grant``)
_SAFE_OWNER = re.compile(r"^[A-Za-z0-9_.@+:-]{1,128}$")  # Cognito subs, apikey:<id>, local names
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.()+-]+")
_UPLOAD_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")  # a ULID, as ``POST /uploads`` makes them


@dataclass(frozen=True, slots=True)
class PresignedUpload:
    """Where and how to POST one file: a form ``url`` and the ``fields`` to send before the file."""

    url: str
    fields: dict[str, str]


@dataclass(frozen=True, slots=True)
class UploadGrant:
    """What a presigned upload allows: one key, one content type, a size range, until ``expires``."""

    key: str
    content_type: str
    min_bytes: int
    max_bytes: int
    expires: float
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UploadOutcome:
    """What a granted upload became, recorded when it lands (``GET /uploads/{uploadId}``): the
    document ``document_id`` of workspace ``owner``, new, or (``duplicate``) the one its bytes already
    were, another than the grant named when ``other_document``; or, when the trigger or the receiver
    refused it (``refused_status`` > 0, ``document_id`` empty), why: the status and the message
    ``POST /documents`` answers for the same file. Only ``uploader`` reads it."""

    owner: str
    upload_id: str
    uploader: str
    document_id: str
    duplicate: bool = False
    other_document: bool = False
    refused_status: int = 0
    refused_message: str = ""

    @property
    def refused(self) -> bool:
        return self.refused_status > 0


@dataclass(frozen=True, slots=True)
class UploadRequest:
    """A validated ``POST /uploads`` body."""

    filename: str
    content_type: str
    title: str | None
    collection: str | None


def validate_upload_request(
    filename: object, content_type: object = None, title: object = None, collection: object = None
) -> UploadRequest:
    """The domain rules for a direct upload: a supported file name, a title, a collection."""
    if not isinstance(filename, str) or not filename.strip():
        raise ValidationError("filename is required (e.g. report.pdf)")
    if content_type is not None and not isinstance(content_type, str):
        raise ValidationError("contentType must be a string")
    name = safe_filename(filename)
    ctype = detect_content_type(name, content_type)
    if "." not in name:  # the trigger detects the type from the key's extension
        raise ValidationError(f"filename needs an extension: upload {supported_extensions()}")
    return UploadRequest(
        filename=name,
        content_type=ctype,
        title=optional_title(title),
        collection=validate_collection(collection),
    )


def safe_filename(filename: str) -> str:
    """The last path segment of ``filename`` with unsafe characters replaced by ``_`` (extension kept)."""
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    stem = _UNSAFE_NAME_CHARS.sub("_", stem).strip("._") or "upload"
    ext = _UNSAFE_NAME_CHARS.sub("", ext).lower()
    room = MAX_FILENAME_CHARS - (len(ext) + 1 if ext else 0)
    return stem[:room] + (f".{ext}" if ext else "")


@dataclass(frozen=True, slots=True)
class UploadTarget:
    """Whose an upload key is: the workspace its document goes to and the user who uploaded it (the
    same id for a personal workspace)."""

    workspace: str
    uploader: str

    @property
    def shared(self) -> bool:
        return self.workspace != self.uploader


def _key_segment(value: str) -> bool:
    return bool(_SAFE_OWNER.match(value)) and value not in (".", "..")


def upload_key(owner: str, upload_id: str, filename: str, *, workspace: str | None = None) -> str:
    """Where ``owner`` uploads a file: ``uploads/<owner>/<upload id>/<file name>`` into their personal
    workspace (``workspace`` None or their own id), ``uploads/<workspace>/<owner>/<upload id>/<file>``
    into a shared one. An owner that cannot be a key segment as-is (the trigger reads it back
    verbatim) cannot upload directly."""
    if not _key_segment(owner) or is_shared(owner):
        raise Forbidden("This account cannot upload directly; use POST /documents")
    name = safe_filename(filename)
    if workspace is None or workspace == owner:
        return f"{UPLOADS_PREFIX}{owner}/{upload_id}/{name}"
    if not is_shared(workspace) or not _key_segment(workspace):
        raise ValidationError("workspace must be the id of a shared workspace (ws_...) or your own")
    return f"{UPLOADS_PREFIX}{workspace}/{owner}/{upload_id}/{name}"


def upload_target(key: str) -> UploadTarget:
    """The workspace and uploader an upload key names; nothing else can name them.
    ``uploads/ws_…/<uploader>/…`` is a shared workspace's; ``uploads/<owner>/…`` is ``<owner>``'s
    personal workspace, uploaded by ``<owner>`` (the layout before workspaces)."""
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != "uploads" or not parts[1].strip():
        raise ValidationError(f"{key}: no owner (upload under uploads/<owner>/<file>)")
    workspace = parts[1].strip()
    if not is_shared(workspace):
        return UploadTarget(workspace, workspace)
    if len(parts) < 4 or not parts[2].strip() or is_shared(parts[2].strip()):
        raise ValidationError(f"{key}: no uploader (upload under uploads/<workspace>/<uploader>/<file>)")
    return UploadTarget(workspace, parts[2].strip())


def owner_of_key(key: str) -> str:
    """The owner (workspace) of the document an upload key becomes; see :func:`upload_target`."""
    return upload_target(key).workspace


def document_id_for_key(key: str, collection: str | None = None) -> str:
    """The id the S3 trigger gives the document an upload key becomes. A presigned upload's key
    (``uploads/<owner>/<ULID>/<file>``, or ``uploads/<workspace>/<uploader>/<ULID>/<file>``) is the
    file ``<file>`` of that workspace in ``collection`` (:func:`named_document_id`: uploading the
    same name again is the same document, whoever in the workspace uploads it, whichever way it came
    in); any other key is known by the whole key."""
    if upload_id_of_key(key) is not None:
        return named_document_id(key.split("/")[1], collection, key.rsplit("/", 1)[-1])
    return stable_document_id(key)


def upload_id_of_key(key: str) -> str | None:
    """The upload id (the grant's ULID) of a presigned upload's key; ``None`` for any other key."""
    parts = key.split("/")
    if parts[0] + "/" != UPLOADS_PREFIX or len(parts) < 4:
        return None
    if len(parts) == (5 if is_shared(parts[1]) else 4) and _UPLOAD_ID.match(parts[-2]):
        return parts[-2]
    return None


def upload_metadata(title: str | None, collection: str | None) -> dict[str, str]:
    """Object metadata for a granted upload (names without the ``x-amz-meta-`` prefix), ASCII-safe;
    ``grant`` marks it single-use."""
    meta: dict[str, str] = {GRANT_MARKER: "1"}
    if title:
        meta["title"] = encode_metadata_value(title)
    if collection:
        meta["collection"] = collection
    size = sum(len(k) + len(v) for k, v in meta.items())
    if size > MAX_METADATA_BYTES:
        raise ValidationError("title is too long for a direct upload (object metadata is limited to 2 KB)")
    return meta


def encode_metadata_value(value: str) -> str:
    """ASCII text as-is (runs of whitespace become one space); anything else as one RFC 2047 word."""
    value = " ".join(value.split())
    if value.isascii() and not value.startswith("=?"):
        return value
    return "=?UTF-8?B?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def decode_metadata_value(value: str) -> str:
    """Inverse of :func:`encode_metadata_value`; plain values pass through."""
    if "=?" not in value:
        return value
    try:
        return str(make_header(decode_header(value)))
    except (ValueError, LookupError, UnicodeDecodeError):
        return value


# ------------------------------------------------------------------------------ local upload tokens
def sign_grant(grant: UploadGrant, secret: bytes) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(asdict(grant), sort_keys=True).encode()).rstrip(b"=")
    mac = base64.urlsafe_b64encode(hmac.new(secret, payload, hashlib.sha256).digest()).rstrip(b"=")
    return f"{payload.decode()}.{mac.decode()}"


def verify_grant(token: str, secret: bytes, now: float) -> UploadGrant:
    """The grant a token carries; ``Forbidden`` when forged, altered or expired."""
    payload, _, mac = token.partition(".")
    expected = base64.urlsafe_b64encode(hmac.new(secret, payload.encode(), hashlib.sha256).digest())
    if not mac or not hmac.compare_digest(expected.rstrip(b"="), mac.encode()):
        raise Forbidden("Invalid upload token")
    try:
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        grant = UploadGrant(**data)
    except (ValueError, TypeError):
        raise Forbidden("Invalid upload token") from None
    if now >= grant.expires:
        raise Forbidden("The upload URL has expired: ask POST /uploads for a new one")
    return grant


def grant_claim_key(key: str) -> str:
    """The counter that records an upload grant (one per key) as used."""
    return "grant:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def is_granted(metadata: dict[str, str]) -> bool:
    return metadata.get(GRANT_MARKER) == "1"


# ------------------------------------------------------------------------------ multipart forms
_BOUNDARY = re.compile(r'boundary="?([^";]{1,70})"?', re.IGNORECASE)
_PARAM = re.compile(r'(?i);\s*(name|filename)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class FormPart:
    name: str
    filename: str | None
    content_type: str
    data: bytes


def parse_form(
    body: bytes,
    content_type: str,
    *,
    max_parts: int = MAX_FORM_PARTS,
    max_header_bytes: int = MAX_PART_HEADER_BYTES,
) -> list[FormPart]:
    """The parts of a ``multipart/form-data`` body, in order. Linear in the body (each byte is
    searched once); ``ValidationError`` (400) for a malformed form, more than ``max_parts`` parts or
    a part whose headers are longer than ``max_header_bytes``."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise ValidationError("Send the upload as multipart/form-data: the fields, then the file")
    match = _BOUNDARY.search(content_type)
    if match is None:
        raise ValidationError("Malformed multipart body: no boundary in the Content-Type")
    delimiter = b"--" + match.group(1).encode("latin-1")
    pos = body.find(delimiter)
    if pos < 0:
        raise ValidationError("Malformed multipart body: the boundary never appears")
    parts: list[FormPart] = []
    pos += len(delimiter)
    while True:
        if body.startswith(b"--", pos):
            return parts
        if not body.startswith(b"\r\n", pos):
            raise ValidationError("Malformed multipart body: a boundary is not followed by a line break")
        if len(parts) >= max_parts:
            raise ValidationError(f"Too many parts in the form (at most {max_parts})")
        head_start = pos + 2
        head_end = body.find(b"\r\n\r\n", head_start, head_start + max_header_bytes + 4)
        if head_end < 0:
            raise ValidationError(
                f"Malformed multipart body: part headers missing or over {max_header_bytes} bytes"
            )
        end = body.find(b"\r\n" + delimiter, head_end + 4)
        if end < 0:
            raise ValidationError("Malformed multipart body: a part is not closed by the boundary")
        parts.append(_form_part(body[head_start:head_end], body[head_end + 4 : end]))
        pos = end + 2 + len(delimiter)


def _form_part(head: bytes, data: bytes) -> FormPart:
    headers: dict[str, str] = {}
    for line in head.decode("utf-8", errors="replace").split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    disposition = headers.get("content-disposition", "")
    if not disposition.lower().startswith("form-data"):
        raise ValidationError("Malformed multipart body: a part without Content-Disposition: form-data")
    params = {k.lower(): v.replace('\\"', '"') for k, v in _PARAM.findall(disposition)}
    return FormPart(
        name=params.get("name", ""),
        filename=params.get("filename"),
        content_type=headers.get("content-type", "text/plain"),
        data=data,
    )
