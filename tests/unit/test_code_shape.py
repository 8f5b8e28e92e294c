"""The house rules that keep the package readable, checked on every run (docs/architecture.md):

- dependencies point inward: the domain imports only the domain; services import no adapter, api,
  serving, CLI, entry point, container or config module at run time (``TYPE_CHECKING`` imports are
  annotations only);
- a room holds one job: no module under ``ragchat/`` over 500 lines, no function over 60;
- no import cycle inside the package (run-time imports, at module level or in a function); the
  non-HTTP entry points do not import the API;
- services never construct services: ``ragchat/bootstrap`` builds them (the rule is defined above
  ``test_services_never_construct_services``).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "ragchat" / "ragchat"
OUTER = (
    "ragchat.adapters",
    "ragchat.api",
    "ragchat.serving",
    "ragchat.cli",
    "ragchat.entrypoints",
    "ragchat.bootstrap",
    "ragchat.config",
    "ragchat.local_server",
    "ragchat.lambda_web",
    "ragchat.observability",
)
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


@cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per test run."""
    return ast.parse(path.read_text(encoding="utf-8"))


def modules(sub: str = "") -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    tree = parsed(path)
    annotation_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            annotation_only.update(id(inner) for inner in ast.walk(node))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in annotation_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # ``from package import module`` imports that module too
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def test_the_domain_imports_only_the_domain() -> None:
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in modules("domain")
        for line, name in runtime_imports(path)
        if name.startswith("ragchat") and not name.startswith("ragchat.domain")
    ]
    assert wrong == []


def test_services_import_no_outer_layer_at_run_time() -> None:
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in modules("services")
        for line, name in runtime_imports(path)
        if name.startswith(OUTER)
    ]
    assert wrong == []


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_small(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES
    long_functions = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long_functions == []


# ----------------------------------------------------------------------------- the import graph
def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module → the package modules it imports at run time (at module level or inside a function;
    ``from a import b`` counts as importing ``a.b`` when that is a module)."""
    names = {module_name(path) for path in modules()}
    graph: dict[str, set[str]] = {}
    for path in modules():
        graph[module_name(path)] = {n for _, n in runtime_imports(path) if n in names} - {module_name(path)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert cycles(graph) == []
    # the check itself finds one
    assert cycles({**graph, "ragchat.domain.models": graph["ragchat.domain.models"] | {"ragchat.ports"}})


def test_entry_points_do_not_import_the_http_api() -> None:
    """The S3 and ingestion-step Lambdas are not HTTP: they get their services from the bootstrap."""
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in modules("entrypoints")
        for line, name in runtime_imports(path)
        if name.startswith("ragchat.api")
    ]
    assert wrong == []


# ----------------------------------------------------------------------------- who builds services
# A *service* is a class defined under ``ragchat/services`` that is not a value object (a dataclass,
# an Enum, a NamedTuple/TypedDict/Protocol, an exception). Services are built in ``ragchat/bootstrap``
# and received as arguments; inside ``ragchat/services`` a call may construct one only if it is the
# state of one call (built and dropped within a request, a turn or a run) or the null object below.
PER_CALL = {
    "TurnStream": "one streaming answer",
    "DeltaPump": "the pump of one stream",
    "ScopedNoteTools": "the note tools of one turn's conversation",
}
NULL_OBJECTS = {"NoMetrics"}  # NO_METRICS, the default metrics port
# Known and left for their owners' branches (issue 22's report): a Retriever made without a shared
# passage cache makes its own; the limiters build their sliding-window helper over the counters.
NOT_YET = {("services/retrieval.py", "PassageVectors"), ("services/limits.py", "SlidingWindows")}


def _is_value_object(node: ast.ClassDef) -> bool:
    if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
        return True
    bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
    values = {"Enum", "StrEnum", "IntEnum", "NamedTuple", "TypedDict", "Protocol", "Exception"}
    return any(b in values or b in _DOMAIN_ERRORS or b.endswith(("Error", "Exception")) for b in bases)


def _domain_errors() -> set[str]:
    """The exception classes of ``ragchat.domain.errors`` (``Forbidden``, ``NotFound``…): a class
    deriving from one is an error, not a service."""
    import inspect

    from ragchat.domain import errors

    return {name for name, c in vars(errors).items() if inspect.isclass(c) and issubclass(c, BaseException)}


_DOMAIN_ERRORS = _domain_errors()


def service_classes() -> set[str]:
    return {
        node.name
        for path in modules("services")
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.ClassDef) and not _is_value_object(node)
    }


def constructions(path: Path, names: set[str]) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in names:
                found.append((node.lineno, name))
    return found


def test_services_never_construct_services() -> None:
    services = service_classes()
    assert {"Turns", "ModelCaller", "IngestSteps", "Answerer"} <= services  # the rule sees them
    allowed = set(PER_CALL) | NULL_OBJECTS
    found = [
        (str(path.relative_to(PACKAGE)), line, name)
        for path in modules("services")
        for line, name in constructions(path, services - allowed)
    ]
    wrong = [f"{path}:{line} constructs {name}" for path, line, name in found if (path, name) not in NOT_YET]
    assert wrong == []
    assert {(path, name) for path, _, name in found} >= NOT_YET  # a fixed one leaves the list


def test_what_a_chat_lambda_is_made_of_reads_in_one_short_file() -> None:
    assert len((PACKAGE / "bootstrap" / "chat.py").read_text(encoding="utf-8").splitlines()) <= 150


def test_one_place_constructs_the_services_of_a_runtime() -> None:
    """Outside ``ragchat/services`` only the bootstrap builds services (the CLI, the servers, the
    routes and the entry points receive them)."""
    services = service_classes() - set(PER_CALL) - NULL_OBJECTS
    outside = [p for p in modules() if not str(p.relative_to(PACKAGE)).startswith(("services", "bootstrap"))]
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} constructs {name}"
        for path in outside
        for line, name in constructions(path, services)
    ]
    assert wrong == []


def test_only_public_powertools_apis_are_used() -> None:
    """No private name of a Powertools resolver or router (they change without notice)."""
    from aws_lambda_powertools.event_handler import APIGatewayRestResolver
    from aws_lambda_powertools.event_handler.router import APIGatewayRouter

    private = {
        name
        for cls in (APIGatewayRestResolver, APIGatewayRouter)
        for name in dir(cls)
        if name.startswith("_") and not name.startswith("__")
    }
    assert "_to_proxy_event" in private
    ours = {  # private names our own classes define (e.g. ``self._lock``) are ours to use
        node.attr
        for path in modules()
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    } | {
        node.name
        for path in modules()
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    wrong = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} uses {node.attr}"
        for path in modules()
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.Attribute) and node.attr in private - ours
    ]
    wrong += [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in modules()
        for line, name in runtime_imports(path)
        if name.startswith("aws_lambda_powertools") and any(part.startswith("_") for part in name.split("."))
    ]
    assert wrong == []


def test_the_local_worker_receives_its_sliced_runner_from_the_bootstrap() -> None:
    """The worker's runner is built by the composition root only (issue 31 item 5); tests run
    documents to the end with ``tests.fakes.run_to_end``."""
    builders = {str(path.relative_to(PACKAGE)) for path in modules() if constructions(path, {"SlicedRunner"})}
    assert builders == {"bootstrap/ingestion.py"}
