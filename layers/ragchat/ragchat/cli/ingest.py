"""``ragchat ingest``: files and folders into the local backends or, with ``--api``, a running API.

Either way a file's identity is its absolute path (``file:<path>``): ingesting a changed file again
replaces its document instead of adding a second one, and an unchanged file is left as it is
(reported "unchanged").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from ragchat.cli.common import (
    EXIT_FAILED,
    EXIT_MISSING,
    SUPPORTED,
    SUPPORTED_LIST,
    ApiOption,
    TokenOption,
    VerboseOption,
    WorkspaceOption,
    api_token_for,
    build_container,
    fail,
    quiet_logging,
)
from ragchat.domain.extraction import IMAGES_NOT_READ, is_image, supported_extensions
from ragchat.domain.file_errors import unsupported_type
from ragchat.domain.intake import already_there

if TYPE_CHECKING:
    from rich.console import Console

    from ragchat.bootstrap import Container
    from ragchat.cli.client import Accepted, ApiClient, DocumentState

UNCHANGED = "unchanged: already ingested"
NEW_VERSION = "new version: replaces the earlier one"
MISSING = "no such file or folder"
LONG_PATH = 30  # a longer path shows its folder and its file name on lines of their own
WIDE = 110  # narrower terminals get one block of lines per file instead of a table


@dataclass
class IngestOutcome:
    path: str
    status: str
    document_id: str = ""
    chunks: int = 0
    error: str = ""
    title: str = ""
    duplicate: bool = False
    new_version: bool = False
    elsewhere: bool = False  # a duplicate of another document (the same content by another door)


def collect_files(paths: list[Path]) -> tuple[list[Path], list[IngestOutcome], list[Path]]:
    """Files to ingest (folders recursively, supported types only), the paths rejected outright and
    the files a folder held that are not a supported type (reported as skipped, by name)."""
    files: list[Path] = []
    rejected: list[IngestOutcome] = []
    skipped: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            files += [p for p in inside if p.suffix.lower() in SUPPORTED]
            skipped += [p for p in inside if p.suffix.lower() not in SUPPORTED]
        elif path.is_file():
            if path.suffix.lower() in SUPPORTED:
                files.append(path)
            else:
                error = (
                    IMAGES_NOT_READ if is_image(path.name) else unsupported_type(None, supported_extensions())
                )
                rejected.append(IngestOutcome(str(path), "FAILED", error=error))
        else:
            rejected.append(IngestOutcome(str(path), "FAILED", error=MISSING))
    seen: set[Path] = set()
    unique = []
    for f in files:
        resolved = f.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(f)
    return unique, rejected, skipped


def file_source(path: Path) -> str:
    """The identity of a file being ingested: its absolute path."""
    return f"file:{path.resolve()}"


class IngestBackend(Protocol):
    def submit(self, path: Path, collection: str | None) -> Accepted: ...
    def status(self, doc_id: str) -> DocumentState: ...
    def close(self) -> None: ...


class LocalIngest:
    """The local backends in-process (the container ``ragchat serve`` builds)."""

    def __init__(self, container: Container, workspace: str | None = None) -> None:
        from ragchat.domain.workspaces import Role

        self.container = container
        user = container.settings.local_principal
        self.owner = container.workspaces.require(user, workspace, Role.EDITOR).id
        self.user = user

    def submit(self, path: Path, collection: str | None) -> Accepted:
        from ragchat.cli.client import Accepted
        from ragchat.domain.ids import stable_document_id

        source = file_source(path)
        shared = self.owner != self.user  # a shared workspace's ids are its own (as the API makes them)
        accepted = self.container.ingestion.accept(
            self.owner,
            user=self.user,
            body=path.read_bytes(),
            filename=path.name,
            collection=collection,
            source=source,
            document_id=stable_document_id(f"{self.owner}\n{source}" if shared else source),
        )
        doc = accepted.document
        return Accepted(
            str(doc.id), str(doc.status), accepted.duplicate, accepted.new_version, accepted.elsewhere
        )

    def status(self, doc_id: str) -> DocumentState:
        from ragchat.cli.client import DocumentState
        from ragchat.domain.progress import describe, progress_of

        doc = self.container.documents.get_document(self.owner, doc_id)
        if doc is None:
            return DocumentState(doc_id, "FAILED", 0, "document disappeared")
        progress = progress_of(doc, self.container.clock())
        told = describe(progress) if progress is not None else ""
        return DocumentState(doc_id, str(doc.status), doc.chunk_count, doc.error or "", doc.title, told)

    def close(self) -> None:
        close = getattr(self.container.launcher, "close", None)
        if callable(close):
            close()


class RemoteIngest:
    """A running or deployed API (``--api``); the API derives the document id from the source."""

    def __init__(self, client: ApiClient, workspace: str | None = None) -> None:
        self.client = client
        self.workspace = workspace

    def submit(self, path: Path, collection: str | None) -> Accepted:
        return self.client.upload(
            path, collection=collection, source=file_source(path), workspace=self.workspace
        )

    def status(self, doc_id: str) -> DocumentState:
        return self.client.document(doc_id)

    def close(self) -> None:
        pass


def ingest_one(
    backend: IngestBackend,
    path: Path,
    collection: str | None,
    timeout: float,
    told: Callable[[str], None] = lambda _: None,
) -> IngestOutcome:
    """Submit one file and wait (bounded) until it is READY or FAILED; ``told`` hears its progress
    ("12 / 40 chunks (30%), about 1 min left") each time it changes."""
    from ragchat.cli.client import ApiError
    from ragchat.domain.errors import RagchatError

    outcome = IngestOutcome(str(path), "FAILED")
    try:
        accepted = backend.submit(path, collection)
        outcome.document_id, outcome.duplicate = accepted.document_id, accepted.duplicate
        outcome.new_version, outcome.elsewhere = accepted.new_version, accepted.elsewhere
        deadline = time.monotonic() + timeout
        while True:
            state = backend.status(outcome.document_id)
            outcome.title = state.title
            if state.progress:
                told(state.progress)
            if state.status in ("READY", "FAILED"):
                outcome.status, outcome.chunks, outcome.error = state.status, state.chunk_count, state.error
                break
            if time.monotonic() > deadline:
                outcome.error = f"still {state.status} after {timeout:.0f} s"
                break
            time.sleep(0.1)
    except (RagchatError, ApiError) as exc:
        outcome.error = exc.message
    except OSError as exc:
        outcome.error = str(exc)
    return outcome


def _ingest_all(
    console: Console, backend: IngestBackend, files: list[Path], collection: str | None, timeout: float
) -> list[IngestOutcome]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    outcomes: list[IngestOutcome] = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("ingesting", total=len(files))
        for path in files:
            progress.update(task, description=f"ingesting {path.name}")

            def told(text: str, name: str = path.name) -> None:
                progress.update(task, description=f"ingesting {name}: {text}")

            outcomes.append(ingest_one(backend, path, collection, timeout, told))
            progress.update(task, description=f"ingesting {path.name}")
            progress.advance(task)
    return outcomes


def _note(outcome: IngestOutcome) -> str:
    """What the summary's Note column says of a file that did not fail."""
    if outcome.elsewhere:
        return already_there(outcome.title, outcome.document_id)
    return UNCHANGED if outcome.duplicate else NEW_VERSION if outcome.new_version else ""


def _file_cell(path: str) -> str:
    """A long path as its folder, then its file name on a line of its own: a narrow column folds the
    folder if it must, never the name (unless the name alone is wider than the column)."""
    folder, sep, name = path.rpartition("/")
    return f"{folder}{sep}\n{name}" if sep and folder and len(path) > LONG_PATH else path


def _print_blocks(console: Console, outcomes: list[IngestOutcome], notes: list[str]) -> None:
    """The summary for a narrow terminal: per file, its status, name, chunks and id on one line (each
    a whole token), then its folder, title and note; lines wrap between words, never inside an id."""
    from rich.markup import escape

    for o, note in zip(outcomes, notes, strict=True):
        folder, _, name = o.path.rpartition("/")
        colour = "green" if o.status == "READY" else "red"
        chunks = f"{o.chunks} chunk" + "s" * (o.chunks != 1)
        head = f"[{colour}]{o.status}[/] {escape(name)}" + (
            f"  {chunks}  {o.document_id}" if o.document_id else ""
        )
        console.print(head, overflow="fold")
        for label, value in (("in", folder + "/" if folder else ""), ("title", o.title), ("note", note)):
            if value:
                console.print(f"  {label}: " + escape(value), overflow="fold")


def _print_summary(console: Console, outcomes: list[IngestOutcome], skipped: list[Path] = ()) -> int:  # type: ignore[assignment]
    """The summary table; returns how many did not end READY. Ids, statuses and counts are never
    split: their columns do not wrap, and the id column is as wide as the longest id."""
    from rich.markup import escape
    from rich.table import Table

    notes = [o.error or _note(o) for o in outcomes]
    table = Table(title="Ingestion summary")
    id_width = max((len(o.document_id) for o in outcomes), default=0)
    table.add_column("File", overflow="fold")
    table.add_column("Title", overflow="fold")
    table.add_column("Status", no_wrap=True)
    table.add_column("Chunks", no_wrap=True, justify="right")
    table.add_column("Document id", no_wrap=True, min_width=max(id_width, 2))
    if any(notes):
        table.add_column("Note", overflow="fold")
    for o, note in zip(outcomes, notes, strict=True):
        colour = "green" if o.status == "READY" else "red"
        cells = [escape(_file_cell(o.path)), escape(o.title), f"[{colour}]{o.status}[/]", str(o.chunks)]
        table.add_row(*cells, o.document_id, *([escape(note)] if any(notes) else []))
    if outcomes and console.width >= WIDE:
        console.print(table)
    elif outcomes:
        _print_blocks(console, outcomes, notes)
    failed = sum(1 for o in outcomes if o.status != "READY")
    unchanged = sum(1 for o in outcomes if o.duplicate and not o.elsewhere and o.status == "READY")
    there = sum(1 for o in outcomes if o.elsewhere and o.status == "READY")
    versions = sum(1 for o in outcomes if o.new_version and o.status == "READY")
    told = [f"{unchanged} unchanged"] if unchanged else []
    told += [f"{there} already there"] if there else []
    told += [f"{versions} new version" + "s" * (versions > 1)] if versions else []
    ready = f"{len(outcomes) - failed} ready" + (f" ({', '.join(told)})" if told else "")
    names = ", ".join(p.name for p in skipped)
    tail = f", {len(skipped)} skipped (unsupported: {names})" if skipped else ""
    console.print(f"{ready}, {failed} failed{tail}", markup=False)
    return failed


def ingest(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Files or folders (.txt .md .html .pdf .docx .pptx .xlsx .odt .epub .rtf; "
            ".png .jpg .tif .webp pictures, read by OCR).",
        ),
    ],
    collection: Annotated[
        str | None, typer.Option(metavar="NAME", help="Put the documents in this collection.")
    ] = None,
    workspace: WorkspaceOption = None,
    api: ApiOption = None,
    token: TokenOption = None,
    timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds to wait for each document.")
    ] = 600.0,
    verbose: VerboseOption = False,
) -> None:
    """Ingest files and folders; waits for each, then prints READY/FAILED with reasons. A changed
    file ingested again replaces its document; an unchanged one is left as it is ("unchanged").
    Files up to {limit} each (MAX_BODY_BYTES / 1.2); a folder's other files are listed as skipped."""
    from rich.console import Console

    from ragchat.cli.client import ApiClient

    console = Console()
    files, outcomes, skipped = collect_files(paths)
    missing = [o.path for o in outcomes if o.error == MISSING]
    if missing:  # said at once, before anything is sent: no progress bar, no table
        raise fail("no such file or folder: " + ", ".join(missing), code=EXIT_MISSING)
    if not files and not outcomes:
        names = f" (skipped: {', '.join(p.name for p in skipped)})" if skipped else ""
        raise fail(f"nothing to ingest (no {SUPPORTED_LIST} files found){names}")
    with quiet_logging(verbose):
        backend: IngestBackend
        if api:
            backend = RemoteIngest(ApiClient(api, api_token_for(api, token)), workspace)
        else:
            backend = _local_ingest(workspace)
        try:
            if files:  # only unsupported files given: no 0/0 progress bar
                outcomes += _ingest_all(console, backend, files, collection, timeout)
        finally:
            backend.close()
    if _print_summary(console, outcomes, skipped):
        raise typer.Exit(EXIT_FAILED)


def _local_ingest(workspace: str | None) -> LocalIngest:
    from ragchat.domain.errors import RagchatError

    try:
        return LocalIngest(build_container(), workspace)
    except RagchatError as exc:  # no such workspace (404) or not an editor there (403)
        raise fail(f"--workspace {workspace}: {exc.message}") from None


def _default_limit() -> str:
    """The default size limit, as ``--help`` states it (the configuration's default, no env read)."""
    from ragchat.config import Settings
    from ragchat.domain.file_errors import megabytes

    return megabytes(int(Settings.model_fields["max_body_bytes"].default / 1.2))


ingest.__doc__ = (ingest.__doc__ or "").replace("{limit}", _default_limit())
