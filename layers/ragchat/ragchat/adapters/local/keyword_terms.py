"""Which of a question's words the local keyword search (SQLite FTS5, BM25) looks up.

FTS5 ranks every note matching any of the words, reading each match's positions: about 2–5 µs
per matching note on 2 cores. A question's common words match thousands of notes in a big index (at
100k chunks SciFact claims took 180 ms of keyword search) while adding almost nothing to BM25, whose
weight is in the rare words. So, in an index of at least ``PRUNE_MIN_NOTES`` notes, the words are
taken rarest first until their matches add up to ``KEYWORD_POSTINGS`` (the rarest is always taken),
and words found in more than half the notes are left out (BM25 gives them ~0 anyway: FTS5 clamps
their idf to 1e-6).

A word's number of matching notes is read from the index's own vocabulary (``vectors_vocab``) under
the form FTS5 stores, which :class:`Stems` gets from FTS5's own tokenizer (``porter unicode61``), so
"reimbursed" is counted as the index's "reimburs". Words the index does not hold match nothing and
are left out.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence

#: below this many notes keyword search is cheap: every word is looked up
PRUNE_MIN_NOTES = 1000
#: matching notes the chosen words may add up to (the rarest word is always taken)
KEYWORD_POSTINGS = 3000


class Stems:
    """The terms FTS5's ``porter unicode61`` tokenizer makes of each word (an in-memory FTS5 table
    of the same tokenizer; thread-safe)."""

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute("CREATE VIRTUAL TABLE words USING fts5(word, tokenize='porter unicode61')")
        self._conn.execute("CREATE VIRTUAL TABLE word_terms USING fts5vocab(words, 'instance')")
        self._lock = threading.Lock()

    def __call__(self, words: Sequence[str]) -> list[list[str]]:
        with self._lock:
            self._conn.execute("DELETE FROM words")
            self._conn.executemany(
                "INSERT INTO words (rowid, word) VALUES (?, ?)", [(i + 1, w) for i, w in enumerate(words)]
            )
            rows = self._conn.execute("SELECT doc, term FROM word_terms ORDER BY doc, offset").fetchall()
        out: list[list[str]] = [[] for _ in words]
        for doc, term in rows:
            out[int(doc) - 1].append(str(term))
        return out


def choose(
    words: Sequence[str],
    stems: Sequence[Sequence[str]],
    frequency: Callable[[str], int],
    total: int,
    budget: int | None = None,
) -> list[str]:
    """The words to look up, in their order: held by the index, in at most half its ``total`` notes,
    rarest first within ``budget`` matching notes (default ``KEYWORD_POSTINGS``; a word counts as its
    most frequent term)."""
    limit = KEYWORD_POSTINGS if budget is None else budget
    counted: list[tuple[int, int]] = []  # (matches, position)
    for i, terms in enumerate(stems):
        matches = max((frequency(t) for t in terms), default=0)
        if matches > 0 and matches * 2 <= total:
            counted.append((matches, i))
    taken: list[int] = []
    spent = 0
    for matches, i in sorted(counted):
        if taken and spent + matches > limit:
            break
        taken.append(i)
        spent += matches
    return [words[i] for i in sorted(taken)]
