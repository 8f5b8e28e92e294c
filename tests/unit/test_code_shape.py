"""The house rules that keep the package readable, checked on every run (ARCHITECTURE.md):

- dependencies point inward: the domain imports only the domain; services import no adapter, api,
  serving, CLI, entry point, container or config module at run time (``TYPE_CHECKING`` imports are
  annotations only);
- a room holds one job: no module under ``ragchat/`` over 500 lines, no function over 60.
"""

from __future__ import annotations

import ast
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
    "ragchat.container",
    "ragchat.config",
    "ragchat.local_server",
    "ragchat.lambda_web",
    "ragchat.observability",
)
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def modules(sub: str = "") -> list[Path]:
    return sorted((PACKAGE / sub).rglob("*.py"))


def runtime_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
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
