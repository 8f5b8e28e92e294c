"""``ragchat serve``: the whole API locally, plus the start-up chores (samples, unfinished documents)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from ragchat.cli.common import SUPPORTED, build_container, fail, load_settings, setup_logging
from ragchat.serving.site import is_loopback

if TYPE_CHECKING:
    from ragchat.bootstrap import Container
    from ragchat.config import Settings
    from ragchat.local_server import LocalServer

SAMPLES_DIR = Path(__file__).parent.parent / "samples"


def sample_document_id(path: Path) -> str:
    from ragchat.domain.ids import stable_document_id

    return stable_document_id(f"samples/{path.name}")


def seed_samples(container: Container) -> list[str]:
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


def resume_pending(container: Container) -> int:
    """Queue every document a previous run left PENDING/PROCESSING, of every user and every
    workspace (a shared server resumes everyone's work, not only the local user's): each is
    resumed, or FAILED with the reason once its runs have started ``INGEST_MAX_ATTEMPTS`` times
    (``IngestAttempts``, at its split), by the same rules for all.

    Their vectors are switched off first: a run killed between switching a document's vectors on
    and marking it READY (two writes) would otherwise leave a PROCESSING document searchable until
    its re-run clears it. The re-run indexes it again and switches them on when it is READY."""
    from ragchat.ports import UnfinishedDocuments

    resume = getattr(container.launcher, "resume", None)
    if resume is None or not isinstance(container.documents, UnfinishedDocuments):
        return 0
    pending = container.documents.unfinished()
    for key in pending:
        container.index.set_enabled(*key, False)
    resume(pending)
    return len(pending)


def _prepare(container: Container, samples: bool) -> None:
    """Warm up and resume before accepting requests: a document posted while a crashed run is being
    re-queued would otherwise be ingested twice."""
    try:
        container.embedder  # load the model now, not on the first question  # noqa: B018
    except Exception as exc:
        typer.secho(
            f"warning: {exc} (ingestion and questions fail until it is prepared)",
            err=True,
            fg=typer.colors.YELLOW,
        )
    try:
        container.reader  # READER=on: the reader too (docs/reader.md); None when off  # noqa: B018
    except Exception as exc:
        typer.secho(f"warning: {exc} (questions fail until it is)", err=True, fg=typer.colors.YELLOW)
    from ragchat.services.chat.stops import release_previous_run

    release_previous_run(container.counters)  # a turn a kill cut short no longer answers 409
    resumed = resume_pending(container)
    if resumed:
        typer.echo(f"Resuming {resumed} unfinished document(s)", err=True)
    if samples:
        submitted = seed_samples(container)
        typer.echo(
            f"Samples: {len(submitted)} queued for ingestion" if submitted else "Samples: already ingested"
        )
    warming = warm_unwarmed(container)
    if warming:
        typer.echo(f"Embedding the evidence of {warming} document(s) in the background", err=True)


def warm_unwarmed(container: Container) -> int:
    """Queue READY documents whose evidence vectors are missing (ingested by ``ragchat ingest``, or
    before this version, or cut short by a stop); the worker embeds them when it is idle. Nothing with
    ``EVIDENCE_WARMING=on_demand`` (no warmer: a question embeds and stores what it reaches)."""
    warmer = container.evidence_warmer
    warm = getattr(container.launcher, "warm", None)
    if warmer is None or warm is None:
        return 0
    # A question that reaches evidence not stored yet embeds and stores it itself (same vectors, same
    # answer as once warmed); the warmer skips what is stored.
    pending = warmer.pending()
    warm(pending)
    return len(pending)


def _banner(settings: Settings, server: LocalServer, token_file: Path | None) -> None:
    """What the server says at start. With its own kept token (``token_file``), the token is shown
    once, in the link that signs a browser in; the examples read it from its file."""
    from ragchat.serving.local_token import sign_in_link

    url = server.url
    if token_file is not None:
        auth = f' -H "Authorization: Bearer $(cat {_shown(token_file)})"'
    else:
        auth = ' -H "Authorization: Bearer $RAGCHAT_API_TOKEN"' if settings.api_token else ""
    where = " (every interface)" if server.everywhere else ""
    listening = f"http://{server.address}{where}"
    typer.echo(f"ragchat {settings.backend} API listening on {listening}  (Ctrl+C to stop)")
    if not settings.api_token:
        loopback = is_loopback(server.address.rsplit(":", 1)[0])
        reach = "every account on this machine" if loopback else "anyone who can reach this address"
        typer.secho(
            f"  WARNING: no token (--insecure-no-auth): {reach} can read and delete your documents",
            err=True,
            fg=typer.colors.RED,
        )
    if token_file is not None and settings.api_token:
        typer.echo(f"  open:    {sign_in_link(url, settings.api_token)}")
        typer.echo(
            f"  token:   {_shown(token_file)} (yours, readable by you only, kept across runs; "
            f"ragchat ask/chat/ingest --api {url} use it; `ragchat token rotate` replaces it)"
        )
    else:
        typer.echo(f"  open:    {url}/ui")
    if settings.users_file:
        typer.echo(f"  users:   {_shown(settings.users_file)} (each opens {url}/ui#token=<their token>)")
    if not settings.api_token:
        typer.echo(f"  docs:    {url}/swagger")
    typer.echo(f"  ask:     curl -s{auth} '{url}/?text=How+does+ingestion+work%3F'")
    typer.echo(
        f"  add:     curl -s{auth} -X POST {url}/notes -H 'Content-Type: application/json' "
        '-d \'{"title": "Hello", "text": "ragchat answers from your notes."}\''
    )
    sys.stdout.flush()


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (``.ragchat/serve.token``)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def serve(
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    samples: Annotated[bool, typer.Option("--samples", help="Ingest the bundled sample documents.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Serve without any token (no RAGCHAT_API_TOKEN, no kept serve.token): every account on "
            "this machine, and anyone who reaches a non-loopback --host, has your data.",
        ),
    ] = False,
) -> None:
    """Run the whole API locally (a local API Gateway in front of the same handlers).

    Without RAGCHAT_API_TOKEN it uses the token kept in the data dir (made the first time): open the
    printed link once to sign a browser in for good; `ragchat ask/chat/ingest --api` read it from the
    data dir; `ragchat token rotate` replaces it."""
    from ragchat.local_server import InsecureBind, LocalServer
    from ragchat.serving.connections import raise_fd_limit
    from ragchat.serving.local_token import TokenFile, stable_token, token_path

    setup_logging(verbose)
    raise_fd_limit()  # before the server counts the connections it can hold
    settings = load_settings()
    own_token = None if settings.api_token or insecure_no_auth else stable_token(settings.data_dir)
    token_file = TokenFile(settings.data_dir, own_token) if own_token is not None else None
    if own_token is not None:  # the pages sign in with it too (``Settings.page_auth``)
        settings = settings.model_copy(update={"api_token": own_token})
    container = build_container(settings)
    try:
        server = LocalServer(
            container, host=host, port=port, insecure_no_auth=insecure_no_auth, token_file=token_file
        )
    except InsecureBind as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    _prepare(container, samples)
    server.start()
    _banner(settings, server, token_path(settings.data_dir) if own_token is not None else None)
    while not stop.wait(0.5):
        pass
    typer.echo("Shutting down…")
    server.stop()
