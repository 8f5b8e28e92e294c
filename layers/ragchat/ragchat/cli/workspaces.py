"""``ragchat workspaces …`` and ``ragchat users …`` (docs/workspaces.md): shared workspaces of the
local backends, managed in-process as one user (``--user``, default ``RAGCHAT_LOCAL_USER``), and
the users of ``ragchat serve`` (``RAGCHAT_USERS_FILE``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from ragchat.cli.common import build_container, fail

if TYPE_CHECKING:
    from ragchat.services.workspaces import WorkspaceService

T = TypeVar("T")

workspaces = typer.Typer(
    name="workspaces", help="Shared workspaces and their members (local backends).", no_args_is_help=True
)
users = typer.Typer(
    name="users", help="The users of ragchat serve (RAGCHAT_USERS_FILE).", no_args_is_help=True
)

UserOption = Annotated[
    str | None, typer.Option("--user", metavar="NAME", help="Act as this user (default: RAGCHAT_LOCAL_USER).")
]
WorkspaceArg = Annotated[
    str, typer.Argument(metavar="WORKSPACE", help="The workspace's name (as listed) or id (ws_…).")
]


@contextmanager
def _service(user: str | None) -> Iterator[tuple[WorkspaceService, str]]:
    from ragchat.domain.errors import RagchatError
    from ragchat.serving.users import users_of

    container = build_container()
    users = users_of(container.settings)
    if users is not None:  # members of a shared workspace are users of the file, as for serve
        container.user_directory = users
    try:
        yield container.workspaces, user or container.settings.local_principal
    except RagchatError as exc:
        raise fail(exc.message) from None
    finally:
        container.close()


def _run(user: str | None, action: Callable[[WorkspaceService, str], T]) -> T:
    with _service(user) as (service, who):
        return action(service, who)


@workspaces.command("list")
def list_workspaces(user: UserOption = None) -> None:
    """Your workspaces: id, your role, name."""
    for access in _run(user, lambda s, who: s.accessible(who)):
        typer.echo(f"{access.id}\t{access.role}\t{access.name}")


@workspaces.command("create")
def create(name: Annotated[str, typer.Argument(metavar="NAME")], user: UserOption = None) -> None:
    """Create a shared workspace (you are its owner); prints its id."""
    typer.echo(_run(user, lambda s, who: s.create(who, name)).id)


@workspaces.command("rename")
def rename(
    workspace: WorkspaceArg, name: Annotated[str, typer.Argument(metavar="NAME")], user: UserOption = None
) -> None:
    """Rename a workspace (owner)."""
    typer.echo(_run(user, lambda s, who: s.rename(who, workspace, name)).name)


@workspaces.command("delete")
def delete(
    workspace: WorkspaceArg,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    user: UserOption = None,
) -> None:
    """Delete a workspace with all its documents (owner)."""
    if not yes:
        typer.confirm(f"Delete {workspace} and every document in it?", abort=True)
    removed = _run(user, lambda s, who: s.delete(who, workspace))
    typer.echo(f"deleted {workspace} ({removed} documents)")


@workspaces.command("members")
def members(workspace: WorkspaceArg, user: UserOption = None) -> None:
    """The members of a workspace and their roles."""
    for m in _run(user, lambda s, who: s.members(who, workspace)):
        typer.echo(f"{m.user_id}\t{m.role}")


@workspaces.command("add-member")
def add_member(
    workspace: WorkspaceArg,
    member: Annotated[str, typer.Argument(metavar="USER", help="The user's name (ragchat users add).")],
    role: Annotated[str, typer.Option(help="viewer, editor or owner.")] = "viewer",
    user: UserOption = None,
) -> None:
    """Add a member, or change their role (owner)."""
    m = _run(user, lambda s, who: s.put_member(who, workspace, member, role))
    typer.echo(f"{m.user_id}\t{m.role}")


@workspaces.command("remove-member")
def remove_member(
    workspace: WorkspaceArg, member: Annotated[str, typer.Argument(metavar="USER")], user: UserOption = None
) -> None:
    """Remove a member (owner), or leave (yourself)."""
    _run(user, lambda s, who: s.remove_member(who, workspace, member))
    typer.echo(f"removed {member}")


def _users_file(file: Path | None) -> Path:
    from ragchat.cli.common import load_settings

    path = file or load_settings().users_file
    if path is None:
        raise fail("set RAGCHAT_USERS_FILE (or pass --file) to say where the users live")
    return path


FileOption = Annotated[
    Path | None, typer.Option("--file", metavar="PATH", help="Default: RAGCHAT_USERS_FILE.")
]


@users.command("add")
def add(name: Annotated[str, typer.Argument(metavar="NAME")], file: FileOption = None) -> None:
    """Add a user (or give them a new token): prints the token once; only its hash is stored."""
    from ragchat.domain.errors import ValidationError
    from ragchat.serving.users import add_user

    path = _users_file(file)
    try:
        token = add_user(path, name)
    except ValidationError as exc:
        raise fail(exc.message) from None
    typer.echo(token)
    typer.echo(f"(shown once; {name} signs in with it. Stored as a hash in {path})", err=True)


@users.command("remove")
def remove(name: Annotated[str, typer.Argument(metavar="NAME")], file: FileOption = None) -> None:
    """Remove a user (their token stops working when ragchat serve restarts)."""
    from ragchat.serving.users import remove_user

    if not remove_user(_users_file(file), name):
        raise fail(f"no user named {name}")
    typer.echo(f"removed {name}")


@users.command("list")
def list_users(file: FileOption = None) -> None:
    """The user names (never their tokens)."""
    from ragchat.serving.users import load_users

    for name in sorted(load_users(_users_file(file))):
        typer.echo(name)
