"""The ``ragchat`` command line: ``serve``, ``ingest``, ``ask``, ``chat``, ``bench``.

``ingest`` and ``ask`` use the local backends in-process (the same container ``ragchat serve``
builds) or, with ``--api URL`` (and ``--token``), a running or deployed API over HTTP.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.container import Container

app = typer.Typer(
    name="ragchat",
    help="Retrieval-augmented notes and chat: run the local API, ingest files, ask questions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

SUPPORTED = {".txt": "text/plain", ".md": "text/markdown", ".html": "text/html", ".htm": "text/html"}
SUPPORTED[".pdf"] = "application/pdf"
SAMPLES_DIR = Path(__file__).parent / "samples"

ApiOption = Annotated[
    str | None, typer.Option("--api", help="Base URL of a ragchat API (default: local backends in-process).")
]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="RAGCHAT_TOKEN", help="Bearer token for --api (env RAGCHAT_TOKEN)."),
]


# --------------------------------------------------------------------------------------------- helpers
def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    return typer.Exit(code)


def _settings() -> Settings:
    from ragchat.config import ConfigError, load_settings

    try:
        return load_settings()
    except ConfigError as exc:
        raise _fail(str(exc), 2) from None


def _container(settings: Settings) -> Container:
    from ragchat.container import Container

    return Container(settings)


def _setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        datefmt="%H:%M:%S",
    )


def sample_document_id(path: Path) -> str:
    from ragchat.domain.ids import stable_document_id

    return stable_document_id(f"samples/{path.name}")


def seed_samples(container: Any) -> list[str]:
    """Ingest ``ragchat/samples/*`` for the local user, once: ids are stable per file name, and a
    sample already present (and not FAILED) is left alone. Returns the ids submitted now."""
    from ragchat.domain.models import DocumentStatus

    owner = container.settings.local_principal
    submitted: list[str] = []
    for path in sorted(SAMPLES_DIR.iterdir()):
        if path.suffix.lower() not in SUPPORTED:
            continue
        doc_id = sample_document_id(path)
        existing = container.documents.get_document(owner, doc_id)
        if existing is not None and existing.status != DocumentStatus.FAILED:
            continue
        container.ingestion.submit_file(
            owner,
            data=path.read_bytes(),
            filename=path.name,
            collection="samples",
            source=f"file:samples/{path.name}",
            document_id=doc_id,
        )
        submitted.append(doc_id)
    return submitted


def resume_pending(container: Any) -> int:
    """Queue the local user's documents a previous run left PENDING/PROCESSING."""
    from ragchat.domain.models import DocumentStatus

    launcher = container.launcher
    resume = getattr(launcher, "resume", None)
    if resume is None:
        return 0
    owner = container.settings.local_principal
    pending: list[tuple[str, str]] = []
    cursor: str | None = None
    while True:
        page = container.documents.list_documents(owner, limit=200, cursor=cursor)
        pending += [
            (owner, d.id)
            for d in page.items
            if d.status in (DocumentStatus.PENDING, DocumentStatus.PROCESSING)
        ]
        cursor = page.cursor
        if not cursor:
            break
    resume(pending)
    return len(pending)


# --------------------------------------------------------------------------------------------- serve
@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    samples: Annotated[bool, typer.Option("--samples", help="Ingest the bundled sample documents.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the whole API locally (a local API Gateway in front of the same handlers)."""
    from ragchat.local_server import LocalServer

    _setup_logging(verbose)
    settings = _settings()
    container = _container(settings)
    try:
        server = LocalServer(container, host=host, port=port)
    except OSError as exc:
        raise _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    # Warm up and resume before accepting requests: a document posted while a crashed run is being
    # re-queued would otherwise be ingested twice.
    try:
        container.embedder  # load the model now, not on the first question  # noqa: B018
    except Exception as exc:
        typer.secho(
            f"warning: the embedding model is not ready ({exc}); run `make model` (ingestion and "
            "questions fail until it is prepared)",
            err=True,
            fg=typer.colors.YELLOW,
        )
    resumed = resume_pending(container)
    if resumed:
        typer.echo(f"Resuming {resumed} unfinished document(s)", err=True)
    if samples:
        submitted = seed_samples(container)
        typer.echo(
            f"Samples: {len(submitted)} queued for ingestion" if submitted else "Samples: already ingested"
        )
    server.start()
    url = server.url
    auth = ' -H "Authorization: Bearer $RAGCHAT_API_TOKEN"' if settings.api_token else ""
    typer.echo(f"ragchat {settings.backend} API listening on {url}  (Ctrl+C to stop)")
    typer.echo(f"  docs:    {url}/swagger")
    typer.echo(f"  ask:     curl -s{auth} '{url}/?text=How+does+ingestion+work%3F'")
    typer.echo(
        f"  add:     curl -s{auth} -X POST {url}/notes -H 'Content-Type: application/json' "
        '-d \'{"title": "Hello", "text": "ragchat answers from your notes."}\''
    )
    sys.stdout.flush()
    while not stop.wait(0.5):
        pass
    typer.echo("Shutting down…")
    server.stop()


# --------------------------------------------------------------------------------------------- ingest
@dataclass
class IngestOutcome:
    path: str
    status: str
    document_id: str = ""
    chunks: int = 0
    error: str = ""


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
                rejected.append(
                    IngestOutcome(str(path), "FAILED", error="unsupported type (.txt .md .html .pdf)")
                )
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


class _LocalIngest:
    def __init__(self, container: Any) -> None:
        self.container = container
        self.owner = container.settings.local_principal

    def submit(self, path: Path, collection: str | None) -> str:
        from ragchat.domain.ids import stable_document_id

        source = f"file:{path.resolve()}"
        doc = self.container.ingestion.submit_file(
            self.owner,
            data=path.read_bytes(),
            filename=path.name,
            collection=collection,
            source=source,
            document_id=stable_document_id(source),
        )
        return str(doc.id)

    def status(self, doc_id: str) -> tuple[str, int, str]:
        doc = self.container.documents.get_document(self.owner, doc_id)
        if doc is None:
            return "FAILED", 0, "document disappeared"
        return str(doc.status), doc.chunk_count, doc.error or ""

    def close(self) -> None:
        close = getattr(self.container.launcher, "close", None)
        if callable(close):
            close()


class _RemoteIngest:
    def __init__(self, api: str, token: str | None) -> None:
        self.api = api.rstrip("/")
        self.token = token

    def submit(self, path: Path, collection: str | None) -> str:
        query = {"filename": path.name}
        if collection:
            query["collection"] = collection
        url = f"{self.api}/documents?{urllib.parse.urlencode(query)}"
        data = _http(
            "POST",
            url,
            self.token,
            body=path.read_bytes(),
            headers={"Content-Type": SUPPORTED[path.suffix.lower()], "X-Filename": path.name},
        )
        return str(data["documentId"])

    def status(self, doc_id: str) -> tuple[str, int, str]:
        data = _http("GET", f"{self.api}/documents/{urllib.parse.quote(doc_id)}", self.token)
        return str(data.get("status")), int(data.get("chunkCount") or 0), str(data.get("error") or "")

    def close(self) -> None:
        pass


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _http(
    method: str,
    url: str,
    token: str | None,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> Any:
    """One JSON request; raises ``ApiError`` with the API's ``error`` message on 4xx/5xx."""
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers or {}))
    req.add_header("Accept", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return json.loads(raw) if raw else {}
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            message = str(json.loads(raw).get("error") or raw.decode(errors="replace"))
        except (ValueError, AttributeError):
            message = raw.decode(errors="replace") or exc.reason
        raise ApiError(exc.code, message) from None
    except urllib.error.URLError as exc:
        raise ApiError(0, f"cannot reach {url}: {exc.reason}") from None


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (.txt .md .html .pdf).")],
    collection: Annotated[str | None, typer.Option(help="Put the documents in this collection.")] = None,
    api: ApiOption = None,
    token: TokenOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each document.")] = 600.0,
) -> None:
    """Ingest files and folders; waits for each, then prints READY/FAILED with reasons."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from ragchat.domain.errors import RagchatError

    console = Console()
    files, outcomes = collect_files(paths)
    if not files and not outcomes:
        raise _fail("nothing to ingest (no .txt .md .html .pdf files found)")
    backend: _LocalIngest | _RemoteIngest
    if api:
        backend = _RemoteIngest(api, token)
    else:
        logging.basicConfig(level=logging.WARNING)
        backend = _LocalIngest(_container(_settings()))
    try:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task("ingesting", total=len(files))
            for path in files:
                progress.update(task, description=f"ingesting {path.name}")
                outcome = IngestOutcome(str(path), "FAILED")
                try:
                    outcome.document_id = backend.submit(path, collection)
                    deadline = time.monotonic() + timeout
                    while True:
                        status, chunks, error = backend.status(outcome.document_id)
                        if status in ("READY", "FAILED"):
                            outcome.status, outcome.chunks, outcome.error = status, chunks, error
                            break
                        if time.monotonic() > deadline:
                            outcome.error = f"still {status} after {timeout:.0f} s"
                            break
                        time.sleep(0.1)
                except (RagchatError, ApiError) as exc:
                    outcome.error = exc.message
                except OSError as exc:
                    outcome.error = str(exc)
                outcomes.append(outcome)
                progress.advance(task)
    finally:
        backend.close()

    table = Table(title="Ingestion summary")
    for column in ("File", "Status", "Chunks", "Document id", "Reason"):
        table.add_column(column)
    for o in outcomes:
        colour = "green" if o.status == "READY" else "red"
        table.add_row(o.path, f"[{colour}]{o.status}[/]", str(o.chunks), o.document_id, o.error)
    console.print(table)
    failed = sum(1 for o in outcomes if o.status != "READY")
    console.print(f"{len(outcomes) - failed} ready, {failed} failed")
    if failed:
        raise typer.Exit(1)


# --------------------------------------------------------------------------------------------- ask
@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    collection: Annotated[str | None, typer.Option(help="Only search this collection.")] = None,
    api: ApiOption = None,
    token: TokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw JSON answer.")] = False,
) -> None:
    """Ask a one-shot question; prints the answer and its sources."""
    from ragchat.domain.errors import RagchatError

    if api:
        query = {"text": question}
        if collection:
            query["collection"] = collection
        try:
            data = _http("GET", f"{api.rstrip('/')}/?{urllib.parse.urlencode(query)}", token)
        except ApiError as exc:
            raise _fail(exc.message if exc.status else str(exc)) from None
    else:
        logging.basicConfig(level=logging.WARNING)
        container = _container(_settings())
        try:
            result = container.ask.ask(container.settings.local_principal, question, collection=collection)
        except RagchatError as exc:
            raise _fail(exc.message) from None
        data = {
            "answer": result.answer,
            "sources": [{"id": s.id, "text": s.text} for s in result.sources],
            "guardUsed": result.guard_used,
        }
    if as_json:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    typer.echo(data.get("answer", ""))
    sources = data.get("sources") or []
    if sources:
        typer.echo("")
        typer.secho("Sources:", bold=True)
        for src in sources:
            typer.echo(f"  [{src['id']}] {src['text']}")


# --------------------------------------------------------------------------------------------- chat
@app.command()
def chat(
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Continue this conversation id.")
    ] = None,
    collection: Annotated[str | None, typer.Option(help="Only retrieve from this collection.")] = None,
    document: Annotated[str | None, typer.Option(help="Only retrieve from this document id.")] = None,
    persona: Annotated[str | None, typer.Option(help="A configured persona (RAGCHAT_PERSONAS_FILE).")] = None,
    api: ApiOption = None,
    token: TokenOption = None,
) -> None:
    """Hold a conversation in the terminal (sources shown under each answer). Type /quit to leave,
    /new for a fresh conversation, /export to print it as markdown."""
    from ragchat.domain.errors import RagchatError

    session: Any = _RemoteChat(api, token) if api else _LocalChat()
    errors: tuple[type[BaseException], ...] = (RagchatError, ApiError)

    def start() -> str:
        conv_id = str(session.create(collection=collection, document_id=document, persona=persona))
        typer.secho(f"conversation {conv_id}", dim=True)
        return conv_id

    try:
        conv_id = conversation or start()
    except errors as exc:
        raise _fail(getattr(exc, "message", str(exc))) from None
    typer.secho("Ask away (/quit, /new, /export).", dim=True)
    while True:
        try:
            line = input("you> ")
        except (EOFError, KeyboardInterrupt):
            typer.echo("")
            break
        text = line.strip()
        if not text:
            continue
        try:
            if text in ("/quit", "/exit"):
                break
            if text == "/new":
                conv_id = start()
                continue
            if text == "/export":
                typer.echo(session.export(conv_id))
                continue
            reply = session.send(conv_id, text)
        except errors as exc:
            typer.secho(f"error: {getattr(exc, 'message', exc)}", fg=typer.colors.RED)
            continue
        typer.secho("assistant> ", bold=True, nl=False)
        typer.echo(reply.get("content", ""))
        sources = reply.get("sources") or []
        if sources:
            typer.secho("  sources:", dim=True)
            for src in sources:
                typer.secho(f"   [{src['id']}] {src['text']}", dim=True)


class _LocalChat:
    def __init__(self) -> None:
        logging.basicConfig(level=logging.WARNING)
        logging.disable(logging.INFO)  # the chat.* events would flood the terminal
        self.container = _container(_settings())
        self.owner = self.container.settings.local_principal

    def create(self, **kwargs: Any) -> str:
        return str(self.container.chat.create_conversation(self.owner, **kwargs).id)

    def send(self, conv_id: str, text: str) -> dict[str, Any]:
        result = self.container.chat.send(self.owner, conv_id, text)
        msg = result.message
        return {"content": msg.content, "sources": [{"id": s.id, "text": s.text} for s in msg.sources or []]}

    def export(self, conv_id: str) -> str:
        return str(self.container.chat.export(self.owner, conv_id, "markdown")[1])


class _RemoteChat:
    def __init__(self, api: str, token: str | None) -> None:
        self.base = api.rstrip("/")
        self.token = token

    def create(self, *, collection: str | None, document_id: str | None, persona: str | None) -> str:
        body = {"collection": collection, "documentId": document_id, "persona": persona}
        payload = json.dumps({k: v for k, v in body.items() if v}).encode()
        data = _http(
            "POST",
            f"{self.base}/chat/conversations",
            self.token,
            body=payload,
            headers={"Content-Type": "application/json"},
        )
        return str(data["id"])

    def send(self, conv_id: str, text: str) -> dict[str, Any]:
        payload = json.dumps({"content": text}).encode()
        data: dict[str, Any] = _http(
            "POST",
            f"{self.base}/chat/conversations/{conv_id}/messages",
            self.token,
            body=payload,
            headers={"Content-Type": "application/json"},
        )
        return data

    def export(self, conv_id: str) -> str:
        url = f"{self.base}/chat/conversations/{conv_id}/export?format=json"
        data = _http("GET", url, self.token)
        lines = [f"# {data.get('title') or 'Conversation'}"]
        for m in data.get("messages", []):
            lines += ["", f"## {m['role']}", "", m["content"]]
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------- bench
@app.command()
def bench() -> None:
    """Run every benchmark (bench/run_all.py in the current checkout); results go to bench/results/."""
    runner = Path("bench/run_all.py")
    if not runner.is_file():
        raise _fail("bench/run_all.py not found: run this from the ragchat repository root")
    raise typer.Exit(subprocess.call([sys.executable, str(runner)]))


def main() -> None:  # pragma: no cover - console entry point alias
    app()
