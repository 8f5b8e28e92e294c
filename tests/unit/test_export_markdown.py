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


def test_quotes_end_at_a_sentence_and_times_read_as_dates_without_guard() -> None:
    """Issue 45: the export had raw ISO timestamps with milliseconds, "(guard)" on refusals, and
    quotes cut mid-sentence."""
    from ragchat.domain.export import readable_time
    from ragchat.domain.messages import GUARD_MODEL

    two = (
        "The ferry leaves at nine from the north pier. Tickets are sold on board and cost four crowns "
        "for adults and two for children under twelve years of age on all crossings of the bay in summer"
    )[:160]
    assert len(two) == 160
    assert snippet(two) == "The ferry leaves at nine from the north pier."
    assert readable_time("2026-11-29T08:19:12.345Z") == "29 Nov 2026, 08:19 UTC"
    assert readable_time("2026-03-01T23:05:00+01:00") == "1 Mar 2026, 22:05 UTC"
    assert readable_time("yesterday") == "yesterday"
    conv = Conversation("c1", "u", title="Ferry", created_at="2026-11-29T08:19:12.345Z")
    refusal = message("assistant", "I don't have sufficiently relevant documents to answer confidently.")
    refusal.model, refusal.created_at = GUARD_MODEL, "2026-11-29T08:19:13.001Z"
    answer = message("assistant", "At nine [source: n-f].", [SourceRef("n-f", two, "d", "Ferry")])
    answer.model, answer.created_at = "extractive", "2026-11-29T08:20:00.000Z"
    md = export_markdown(conv, [refusal, answer])
    assert "- Started: 29 Nov 2026, 08:19 UTC" in md
    assert "## Assistant — 29 Nov 2026, 08:19 UTC\n" in md  # no "(guard)"
    assert "## Assistant — 29 Nov 2026, 08:20 UTC (extractive)" in md
    assert "guard" not in md and ".345" not in md and "T08:" not in md
    assert "[^1]: Ferry — “The ferry leaves at nine from the north pier.”" in md
