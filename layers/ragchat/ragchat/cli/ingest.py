"""``ragchat ingest``: files and folders into the local backends or, with ``--api``, a running API.

Either way a file's identity is its absolute path (``file:<path>``): ingesting a changed file again
replaces its document instead of adding a second one, and an unchanged file is left as it is
(reported "unchanged").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from ragchat.cli.common import (
    SUPPORTED,
    SUPPORTED_LIST,
    ApiOption,
    TokenOption,
    VerboseOption,
    api_token_for,
    build_container,
    fail,
    quiet_logging,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ragchat.bootstrap import Container
    from ragchat.cli.client import Accepted, ApiClient, DocumentState

UNCHANGED = "unchanged: already ingested"
NEW_VERSION = "new version: replaces the earlier one"


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


def collect_files(paths: list[Path]) -> tuple[list[Path], list[IngestOutcome]]:
    """Files to ingest (folders recursively, supported types only) and the paths rejected outright."""
    files: list[Path] = []
    rejected: list[IngestOutcome] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUPPORTED)
        elif path.is_file():
            if path.suffix.lower() in SUPPORTED:
                files.append(path)
            else:
                error = f"unsupported type ({SUPPORTED_LIST})"
                rejected.append(IngestOutcome(str(path), "FAILED", error=error))
        else:
            rejected.append(IngestOutcome(str(path), "FAILED", error="no such file or folder"))
    seen: set[Path] = set()
    unique = []
    for f in files:
        resolved = f.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append(f)
    return unique, rejected


def file_source(path: Path) -> str:
    """The identity of a file being ingested: its absolute path."""
    return f"file:{path.resolve()}"


class IngestBackend(Protocol):
    def submit(self, path: Path, collection: str | None) -> Accepted: ...
    def status(self, doc_id: str) -> DocumentState: ...
    def close(self) -> None: ...


class LocalIngest:
    """The local backends in-process (the container ``ragchat serve`` builds)."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self.owner = container.settings.local_principal

    def submit(self, path: Path, collection: str | None) -> Accepted:
        from ragchat.cli.client import Accepted
        from ragchat.domain.ids import stable_document_id

        source = file_source(path)
        accepted = self.container.ingestion.accept(
            self.owner,
            body=path.read_bytes(),
            filename=path.name,
            collection=collection,
            source=source,
            document_id=stable_document_id(source),
        )
        doc = accepted.document
        return Accepted(str(doc.id), str(doc.status), accepted.duplicate, accepted.new_version)

    def status(self, doc_id: str) -> DocumentState:
        from ragchat.cli.client import DocumentState

        doc = self.container.documents.get_document(self.owner, doc_id)
        if doc is None:
            return DocumentState(doc_id, "FAILED", 0, "document disappeared")
        return DocumentState(doc_id, str(doc.status), doc.chunk_count, doc.error or "", doc.title)

    def close(self) -> None:
        close = getattr(self.container.launcher, "close", None)
        if callable(close):
            close()


class RemoteIngest:
    """A running or deployed API (``--api``); the API derives the document id from the source."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    def submit(self, path: Path, collection: str | None) -> Accepted:
        return self.client.upload(path, collection=collection, source=file_source(path))

    def status(self, doc_id: str) -> DocumentState:
        return self.client.document(doc_id)

    def close(self) -> None:
        pass


def ingest_one(backend: IngestBackend, path: Path, collection: str | None, timeout: float) -> IngestOutcome:
    """Submit one file and wait (bounded) until it is READY or FAILED."""
    from ragchat.cli.client import ApiError
    from ragchat.domain.errors import RagchatError

    outcome = IngestOutcome(str(path), "FAILED")
    try:
        accepted = backend.submit(path, collection)
        outcome.document_id, outcome.duplicate = accepted.document_id, accepted.duplicate
        outcome.new_version = accepted.new_version
        deadline = time.monotonic() + timeout
        while True:
            state = backend.status(outcome.document_id)
            outcome.title = state.title
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
            outcomes.append(ingest_one(backend, path, collection, timeout))
            progress.advance(task)
    return outcomes


def _note(outcome: IngestOutcome) -> str:
    """What the summary's Note column says of a file that did not fail."""
    return UNCHANGED if outcome.duplicate else NEW_VERSION if outcome.new_version else ""


def _print_summary(console: Console, outcomes: list[IngestOutcome]) -> int:
    """The summary table; returns how many did not end READY."""
    from rich.markup import escape
    from rich.table import Table

    notes = [o.error or _note(o) for o in outcomes]
    table = Table(title="Ingestion summary")
    # Long paths, titles, ids and reasons wrap onto more lines rather than being cut with "…"; the
    # Note column is there when a file has one.
    table.add_column("File", overflow="fold")
    table.add_column("Title", overflow="fold")
    table.add_column("Status", overflow="fold")
    table.add_column("Chunks", overflow="fold", justify="right")
    table.add_column("Document id", overflow="fold")
    if any(notes):
        table.add_column("Note", overflow="fold")
    for o, note in zip(outcomes, notes, strict=True):
        colour = "green" if o.status == "READY" else "red"
        cells = [escape(o.path), escape(o.title), f"[{colour}]{o.status}[/]", str(o.chunks), o.document_id]
        table.add_row(*cells, *([escape(note)] if any(notes) else []))
    console.print(table)
    failed = sum(1 for o in outcomes if o.status != "READY")
    unchanged = sum(1 for o in outcomes if o.duplicate and o.status == "READY")
    versions = sum(1 for o in outcomes if o.new_version and o.status == "READY")
    told = [f"{unchanged} unchanged"] if unchanged else []
    told += [f"{versions} new version" + "s" * (versions > 1)] if versions else []
    ready = f"{len(outcomes) - failed} ready" + (f" ({', '.join(told)})" if told else "")
    console.print(f"{ready}, {failed} failed", markup=False)
    return failed


def ingest(
    paths: Annotated[
        list[Path], typer.Argument(metavar="PATH", help="Files or folders (.txt .md .html .pdf).")
    ],
    collection: Annotated[
        str | None, typer.Option(metavar="NAME", help="Put the documents in this collection.")
    ] = None,
    api: ApiOption = None,
    token: TokenOption = None,
    timeout: Annotated[
        float, typer.Option(metavar="SECONDS", help="Seconds to wait for each document.")
    ] = 600.0,
    verbose: VerboseOption = False,
) -> None:
    """Ingest files and folders; waits for each, then prints READY/FAILED with reasons. A changed
    file ingested again replaces its document; an unchanged one is left as it is ("unchanged")."""
    from rich.console import Console

    from ragchat.cli.client import ApiClient

    console = Console()
    files, outcomes = collect_files(paths)
    if not files and not outcomes:
        raise fail(f"nothing to ingest (no {SUPPORTED_LIST} files found)")
    with quiet_logging(verbose):
        backend: IngestBackend
        if api:
            backend = RemoteIngest(ApiClient(api, api_token_for(api, token)))
        else:
            backend = LocalIngest(build_container())
        try:
            outcomes += _ingest_all(console, backend, files, collection, timeout)
        finally:
            backend.close()
    if _print_summary(console, outcomes):
        raise typer.Exit(1)
