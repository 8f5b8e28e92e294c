"""The docs stay true: every setting is documented, every relative link resolves, and nothing points
at a document that is not in the repository."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from pydantic import AliasChoices
from ragchat.config import Settings

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def setting_names() -> list[str]:
    """Each setting's environment variable (the first name when it has several)."""
    names = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, AliasChoices) else None
        names.append(str(alias.choices[0]) if alias else str(field.alias or name).upper())
    return names


def test_every_setting_is_documented_in_configuration_md() -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", page))
    missing = [name for name in setting_names() if name not in documented]
    assert not missing, f"docs/configuration.md does not document: {', '.join(missing)}"


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the headings of ``page``."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")
        out.add(slug)
    return out


def relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return [t for t in _LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: broken links {broken}"


def test_the_readme_is_a_front_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "docs/screenshots/chat-1280.png" in readme
    for command in ("make run", "make test"):
        assert command in readme


# Where a reference to a document outside the repository, or to a README section that moved into
# docs/, must not appear. The outside design documents are spelled in parts, so that this file does
# not cite them itself.
_OUTSIDE = "|".join(("ARCHI" + r"TECTURE\.md", "SP" + r"EC\.md", "SP" + "EC §"))
CITING = {
    "tests": re.compile(_OUTSIDE + r"|README [\"“§(]|README\.md [\"“§]|README section"),
    "bench": re.compile(_OUTSIDE + r"|README [\"“§(]|README section"),
    "scripts": re.compile(_OUTSIDE + r"|README [\"“§(,)]|README section"),
    "docs": re.compile(_OUTSIDE + r"|README [\"“§]|README section"),
    "layers": re.compile(_OUTSIDE + r"|README [\"“§(,)]|README section|see the README"),
    "functions": re.compile(_OUTSIDE + r"|README [\"“§(,)]|README section"),
}


def test_nothing_cites_documents_outside_the_repository() -> None:
    """Tests, benchmarks, scripts and docs cite files in the repository: no outside design document
    (:data:`_OUTSIDE`), no README section that moved into ``docs/``."""
    offenders = []
    for folder, pattern in CITING.items():
        for path in (REPO / folder).rglob("*"):
            if (
                path.suffix not in (".py", ".md", ".sh", ".json", ".toml", ".yaml", ".js")
                or not path.is_file()
            ):
                continue
            if path == Path(__file__):
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)
