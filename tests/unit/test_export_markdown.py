"""The Markdown export reads like a document (issue 33, item 11): no raw ``[source: id]`` tags, one
"Sources" section with numbered footnotes and document titles, snippets never cut mid-word."""

from __future__ import annotations

from ragchat.domain.export import export_markdown, snippet
from ragchat.domain.models import Conversation, Message, SourceRef

LONG = (
    "The main office opens at 8:30 on weekdays and at 10:00 on Saturdays; on public holidays it stays closed "
    "except for the reception desk, which keeps the regular hours of the week"
)[:160]  # stored excerpts are cut at 160 characters: "… regular h"
SKY = SourceRef("n-sky", "The sky is blue because of Rayleigh scattering.", "d1", "Sky handbook", 3)
HOURS = SourceRef("n-hours", LONG, "d2", "Staff handbook")


def message(role: str, content: str, sources: list[SourceRef] | None = None) -> Message:
    return Message("m", "c1", "u", role, content, sources=sources)  # type: ignore[arg-type]


def test_tags_become_footnotes_in_one_sources_section() -> None:
    conv = Conversation("c1", "u", title="Office")
    md = export_markdown(
        conv,
        [
            message("user", "Why is the sky blue?"),
            message("assistant", "Rayleigh scattering [source: n-sky].\n\nSources: n-sky", [SKY]),
            message("user", "When does the office open?"),
            message(
                "assistant",
                "At 8:30 [source: n-hours], and the sky stays blue [source: n-sky].\n\n"
                "Sources: n-hours, n-sky",
                [HOURS, SKY],
            ),
        ],
    )
    assert "[source:" not in md and "Sources:" not in md
    assert md.count("## Sources") == 1
    assert "Rayleigh scattering[^1]." in md and "At 8:30[^2], and the sky stays blue[^1]." in md
    assert "[^1]: Sky handbook, p. 3 — “The sky is blue because of Rayleigh scattering.”" in md
    footnote = next(line for line in md.splitlines() if line.startswith("[^2]:"))
    assert footnote.startswith("[^2]: Staff handbook — “The main office opens at 8:30")
    assert footnote.endswith("the regular…”")  # the cut word ("hours" → "h") is left out


def test_a_snippet_ends_between_words() -> None:
    assert snippet("short text") == "short text"
    cut = snippet("alpha beta gamma", limit=13)  # "alpha beta ga" was cut inside "gamma"
    assert cut == "alpha beta…"
