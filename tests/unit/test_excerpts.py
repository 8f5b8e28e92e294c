"""What a source shows of its passage: plain text from the sentence the answer quotes, whole words
(issue 33 items 1 and 11: the terminal printed “# How citations work … embedded, t”)."""

from __future__ import annotations

from ragchat.domain.citations import SOURCE_TEXT_CHARS
from ragchat.domain.excerpts import excerpt, source_refs
from ragchat.domain.models import Hit

CHUNK = (
    "# Harbour guide\n\n## Harbour rules\nThe harbour master is on duty from 6:00 to 22:00. Boats must "
    "register at the office on arrival.\n\n## Fuel\nThe fuel dock sells **diesel** and petrol. Payment "
    "is by card only, see [the price list](https://example.org/prices).\n\n- Kayaks launch from the "
    "slipway.\n- Swimming in the harbour is forbidden."
)


def test_the_excerpt_starts_at_the_quoted_sentence_in_plain_text() -> None:
    answer = "Payment is by card only, see the price list. [source: n1]\n\nSources: n1"
    shown = excerpt(CHUNK, answer)
    assert shown.startswith("…Payment is by card only, see the price list.")
    assert "#" not in shown and "**" not in shown and "](" not in shown
    assert len(shown) <= SOURCE_TEXT_CHARS


def test_a_paraphrase_shows_the_passage_from_its_start_in_whole_words() -> None:
    shown = excerpt(CHUNK, "You can pay with a card. [source: n1]")
    assert shown.startswith("The harbour master is on duty from 6:00 to 22:00.")
    assert len(shown) <= SOURCE_TEXT_CHARS
    plain = set(CHUNK.replace("**", "").replace("[", " ").replace("]", " ").split())
    assert all(word in plain for word in shown.rstrip("…").split())  # never half a word


def test_a_sentence_longer_than_the_room_is_cut_between_words() -> None:
    long = "The committee reviewed " + ", ".join(f"item number {i}" for i in range(40)) + "."
    shown = excerpt(long)
    assert len(shown) <= SOURCE_TEXT_CHARS and shown.endswith("…")
    assert shown[:-1].split()[-1].rstrip(",") in long.split(" ") or shown[:-1].split()[-1] in long


def test_stored_sources_carry_the_excerpt_of_what_the_answer_quotes() -> None:
    hits = [Hit("n1", 0.9, CHUNK), Hit("n2", 0.5, "Unrelated text about bees.")]
    answer = "Swimming in the harbour is forbidden. [source: n1]"
    (ref,) = source_refs(hits, ["n1", "missing"], answer)
    assert ref.id == "n1" and ref.text == "…Swimming in the harbour is forbidden."
