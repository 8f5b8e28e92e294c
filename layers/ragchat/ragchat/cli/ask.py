"""``ragchat ask``: one question, its answer and sources."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from ragchat.cli.common import (
    EXIT_REFUSED,
    EXIT_UNKNOWN_COLLECTION,
    ApiOption,
    TokenOption,
    VerboseOption,
    WorkspaceOption,
    api_token_for,
    build_container,
    fail,
    quiet_logging,
)

if TYPE_CHECKING:
    from ragchat.cli.client import Answer


def ask_local(question: str, collection: str | None, workspace: str | None = None) -> Answer:
    from ragchat.cli.client import Answer, sources_of
    from ragchat.domain.models import source_json

    container = build_container()
    user = container.settings.local_principal
    if workspace:
        access = container.workspaces.require(user, workspace)
        names = {access.id: access.name}
    else:
        names = container.workspaces.names(user)
    result = container.ask.ask(user, question, collection=collection, workspaces=names)
    raw = {
        "answer": result.answer,
        "sources": [source_json(s) for s in result.sources],  # the API's shape
        "guardUsed": result.guard_used,
    }
    return Answer(result.answer, sources_of(raw["sources"]), result.guard_used, raw)


def local_collections() -> set[str]:
    """The collections of the local documents (every page of the list)."""
    container = build_container()
    owner, found, cursor = container.settings.local_principal, set(), None
    while True:
        page = container.documents.list_documents(owner, limit=100, cursor=cursor)
        found |= {str(d.collection) for d in page.items if d.collection}
        if not (cursor := page.cursor):
            return found


def unknown_collection(collection: str, existing: set[str]) -> str:
    """The error for a ``--collection`` no document is in, naming the ones there are."""
    names = ", ".join(sorted(existing)) if existing else "none yet"
    return f'no collection named "{collection}" (your collections: {names})'


def print_answer(answer: Answer) -> None:
    """The answer with numbered markers, then its sources once, numbered, with their titles."""
    from ragchat.cli.render import numbered, source_lines

    body, items = numbered(answer.answer, answer.sources)
    typer.echo(body)
    if items:
        typer.echo("")
        typer.secho("Sources:", bold=True)
        for line in source_lines(items):
            typer.echo(line)


def ask(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.")],
    collection: Annotated[
        str | None, typer.Option(metavar="NAME", help="Only search this collection.")
    ] = None,
    workspace: WorkspaceOption = None,
    api: ApiOption = None,
    token: TokenOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw JSON answer.")] = False,
    verbose: VerboseOption = False,
) -> None:
    """Ask a one-shot question; prints the answer and its sources."""
    from ragchat.cli.client import ApiClient, ApiError
    from ragchat.domain.errors import RagchatError

    with quiet_logging(verbose):
        try:
            if api:
                client = ApiClient(api, api_token_for(api, token))
                answer = client.ask(question, collection=collection, workspace=workspace)
            else:
                answer = ask_local(question, collection, workspace)
            if answer.guard_used and collection:
                existing = (
                    ApiClient(api, api_token_for(api, token)).collections() if api else local_collections()
                )
                if collection not in existing:
                    raise fail(unknown_collection(collection, existing), EXIT_UNKNOWN_COLLECTION)
        except (ApiError, RagchatError) as exc:
            raise fail(exc.message) from None
    if as_json:
        typer.echo(json.dumps(answer.raw, indent=2, ensure_ascii=False))
    else:
        print_answer(answer)
    if answer.guard_used:  # refused: nothing found that answers (the reply says what was missing)
        raise typer.Exit(EXIT_REFUSED)
