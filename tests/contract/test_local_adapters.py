"""Local adapters: what the shared port contracts cannot see (schema migrations, threads, a second
process writing to the same file, the vector index's cache, unsafe blob keys)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.adapters.local.sqlite_store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SqliteConversationStore,
    SqliteCounters,
    SqliteDatabase,
    SqliteDocumentStore,
)
from ragchat.adapters.local.vector_index import LocalVectorIndex
from ragchat.domain.ids import new_id
from ragchat.domain.models import Conversation, Document, Message, SearchFilter, VectorRecord
from ragchat.domain.retrieval import rrf_scores as rrf

from tests.fakes import FakeClock


@pytest.fixture
def db(tmp_path: Path):
    database = SqliteDatabase(tmp_path / "ragchat.db")
    yield database
    database.close()


def record(id_: str, vector, owner="alice", document_id="d", collection=None, enabled=True, text=None):
    return VectorRecord(
        id=id_,
        vector=list(map(float, vector)),
        text=text or f"text {id_}",
        owner=owner,
        document_id=document_id,
        chunk_index=0,
        collection=collection,
        enabled=enabled,
    )


# ----------------------------------------------------------------------------- database
def test_schema_is_created_in_wal_mode_and_reopening_is_harmless(tmp_path: Path):
    first = SqliteDatabase(tmp_path / "x.db")
    assert first.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)
    SqliteDocumentStore(first).create_document(
        Document(id="d1", owner="a", title="t", content_type="text/plain", source="api", body_key="k")
    )
    first.close()
    second = SqliteDatabase(tmp_path / "x.db")
    assert second.schema_version() == SCHEMA_VERSION
    assert SqliteDocumentStore(second).get_document("a", "d1") is not None
    with second.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    second.close()


def test_an_older_schema_is_migrated_on_open(tmp_path: Path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    conn.execute("INSERT INTO schema_version VALUES (1)")
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("INSERT INTO counters VALUES ('k', 3, 9e12)")
    conn.commit()
    conn.close()
    db = SqliteDatabase(path)
    assert db.schema_version() == SCHEMA_VERSION
    assert SqliteCounters(db).get("k", now=0) == 3  # data kept
    LocalVectorIndex(db, dimension=4).upsert([record("n", [1, 0, 0, 0])])  # new tables exist
    db.close()


def test_messages_stored_before_ratings_existed_load_unrated_and_take_a_rating(tmp_path: Path):
    path = tmp_path / "v5.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    # the file as it was before the feedback step (the steps before it applied)
    feedback_step = MIGRATIONS.index(["ALTER TABLE messages ADD COLUMN feedback TEXT"])
    conn.execute("INSERT INTO schema_version VALUES (?)", (feedback_step,))
    for step in MIGRATIONS[:feedback_step]:
        for statement in step:
            conn.execute(statement)
    conn.execute(
        "INSERT INTO conversations (id, owner, title, created_at, updated_at) "
        "VALUES ('c1', 'alice', '', 't', 't')"
    )
    conn.execute(
        "INSERT INTO messages (id, conversation_id, owner, role, content, created_at) "
        "VALUES ('m1', 'c1', 'alice', 'assistant', 'an old answer', 't')"
    )
    conn.commit()
    conn.close()
    db = SqliteDatabase(path)
    store = SqliteConversationStore(db)
    old = store.get_message("alice", "c1", "m1")
    assert old is not None and old.content == "an old answer" and old.feedback is None
    assert store.set_feedback("alice", "c1", "m1", "up").feedback == "up"
    db.close()


def test_a_newer_schema_is_refused(tmp_path: Path):
    path = tmp_path / "new.db"
    SqliteDatabase(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 999")
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="newer"):
        SqliteDatabase(path)


def test_a_failed_write_rolls_back(db):
    store = SqliteCounters(db)
    with pytest.raises(RuntimeError), db.write() as conn:
        conn.execute("INSERT INTO counters VALUES ('k', 1, 9e12)")
        raise RuntimeError("boom")
    assert store.get("k", now=0) == 0


def test_many_threads_write_and_read_at_once(db):
    clock = FakeClock()
    docs = SqliteDocumentStore(db, clock=clock)
    convs = SqliteConversationStore(db, clock=clock)
    conv = convs.create_conversation(Conversation(id=new_id(), owner="alice"))
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            start.wait()
            for i in range(15):
                docs.create_document(
                    Document(
                        id=f"d-{n}-{i}", owner="alice", title="t", content_type="text/plain",
                        source="api", body_key="k",
                    )
                )  # fmt: skip
                convs.add_message(
                    Message(id=new_id(), conversation_id=conv.id, owner="alice", role="user", content="hi")
                )
                docs.list_documents("alice", limit=5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    seen, cursor = 0, None
    while True:
        page = docs.list_documents("alice", limit=50, cursor=cursor)
        seen += len(page.items)
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == 8 * 15
    assert convs.get_conversation("alice", conv.id).message_count == 8 * 15


# ----------------------------------------------------------------------------- vector index
def test_vectors_persist_in_the_database_file(tmp_path: Path):
    first = SqliteDatabase(tmp_path / "v.db")
    LocalVectorIndex(first, dimension=4).upsert([record("a", [1, 0, 0, 0]), record("b", [0, 1, 0, 0])])
    first.close()
    second = SqliteDatabase(tmp_path / "v.db")
    hits = LocalVectorIndex(second, dimension=4).search([0, 1, 0, 0], SearchFilter("alice"), 1)
    assert [(h.id, h.text) for h in hits] == [("b", "text b")]
    with pytest.raises(ValueError, match="dimension"):
        LocalVectorIndex(second, dimension=8)  # the stored vectors are 4-d: a changed embedder
    second.close()


def test_a_reload_reads_the_table_in_pages_and_keeps_every_row(tmp_path: Path, monkeypatch):
    """The matrix is loaded a page of rows at a time (no copy of every vector at once): every row,
    its filters and its deletions survive pages boundaries."""
    from ragchat.adapters.local import vector_index

    monkeypatch.setattr(vector_index, "_LOAD_ROWS", 4)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(23, 4))
    first = SqliteDatabase(tmp_path / "v.db")
    writer = LocalVectorIndex(first, dimension=4)
    writer.upsert(
        [
            record(f"n{i:02d}", v, owner="bob" if i % 5 == 0 else "alice", document_id=f"d{i % 3}")
            for i, v in enumerate(vectors)
        ]
    )
    writer.delete(["n07"])
    writer.set_enabled("alice", "d1", False)
    second = SqliteDatabase(tmp_path / "v.db")
    reader = LocalVectorIndex(second, dimension=4)
    alice = SearchFilter("alice")
    for query in vectors[:6]:
        assert [h.id for h in reader.search(query, alice, 25)] == [
            h.id for h in writer.search(query, alice, 25)
        ]
    expected = {f"n{i:02d}" for i in range(23) if i % 5 and i != 7 and i % 3 != 1}
    assert {h.id for h in reader.search(vectors[0], alice, 25)} == expected
    assert reader.count("bob") == 5
    first.close()
    second.close()


def test_writes_through_another_connection_are_seen_before_the_next_search(tmp_path: Path):
    server_db, ingest_db = SqliteDatabase(tmp_path / "v.db"), SqliteDatabase(tmp_path / "v.db")
    server = LocalVectorIndex(server_db, dimension=4)
    ingest = LocalVectorIndex(ingest_db, dimension=4)
    alice = SearchFilter("alice")
    server.upsert([record("a", [1, 0, 0, 0])])
    assert [h.id for h in server.search([1, 0, 0, 0], alice, 5)] == ["a"]  # matrix cached
    ingest.upsert([record("b", [1, 1, 0, 0])])
    assert [h.id for h in server.search([1, 0, 0, 0], alice, 5)] == ["a", "b"]
    ingest.set_enabled("alice", "d", False)
    assert server.count("alice") == 0
    ingest.set_enabled("alice", "d", True)
    ingest.delete(["a"])
    assert [h.id for h in server.search([1, 0, 0, 0], alice, 5)] == ["b"]
    server.upsert([record("c", [0, 0, 1, 0])])  # and the other way round
    assert [h.id for h in ingest.search([0, 0, 1, 0], alice, 1)] == ["c"]
    server_db.close()
    ingest_db.close()


def test_a_separate_process_writing_is_noticed(tmp_path: Path):
    path = tmp_path / "v.db"
    db = SqliteDatabase(path)
    index = LocalVectorIndex(db, dimension=4)
    index.upsert([record("a", [1, 0, 0, 0])])
    assert index.count("alice") == 1
    script = textwrap.dedent(
        f"""
        from ragchat.adapters.local.sqlite_store import SqliteDatabase
        from ragchat.adapters.local.vector_index import LocalVectorIndex
        from ragchat.domain.models import VectorRecord
        index = LocalVectorIndex(SqliteDatabase({str(path)!r}), dimension=4)
        index.upsert([VectorRecord(id="p", vector=[0.0, 1.0, 0.0, 0.0], text="from another process",
                                   owner="alice", document_id="d2", chunk_index=0)])
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    hits = index.search([0, 1, 0, 0], SearchFilter("alice"), 1)
    assert [(h.id, h.text) for h in hits] == [("p", "from another process")]
    assert index.count("alice") == 2
    db.close()


def test_search_matches_brute_force_for_large_and_small_selections(db):
    rng = np.random.default_rng(7)
    dim = 16
    index = LocalVectorIndex(db, dimension=dim)
    records = []
    for i in range(600):
        owner = "big" if i < 560 else "small"  # "small" selects < 1/8 of the rows (gather path)
        records.append(
            record(
                f"n{i:04d}",
                rng.normal(size=dim),
                owner=owner,
                document_id=f"d{i % 7}",
                collection=("c1", "c2", None)[i % 3],
                enabled=i % 11 != 0,
            )
        )
    index.upsert(records)
    index.delete([f"n{i:04d}" for i in range(0, 600, 13)])
    live = {r.id: r for r in records if int(r.id[1:]) % 13 != 0}
    live["n0013"] = record("n0013", rng.normal(size=dim), owner="small", document_id="d1")
    index.upsert([live["n0013"]])  # back after its delete: takes a freed row
    query = rng.normal(size=dim)
    for flt in (
        SearchFilter("big"),
        SearchFilter("small"),
        SearchFilter("big", collection="c2"),
        SearchFilter("small", document_id="d1"),
        SearchFilter("big", collection="c1", document_id="d3"),
    ):
        candidates = [
            r
            for r in live.values()
            if r.owner == flt.owner
            and r.enabled
            and (flt.collection is None or r.collection == flt.collection)
            and (flt.document_id is None or r.document_id == flt.document_id)
        ]
        q = query / np.linalg.norm(query)
        expected = sorted(
            candidates, key=lambda r: -float(np.dot(np.asarray(r.vector) / np.linalg.norm(r.vector), q))
        )[:10]
        hits = index.search(list(query), flt, 10)
        assert [h.id for h in hits] == [r.id for r in expected], flt
    assert index.count("small") == sum(1 for r in live.values() if r.owner == "small" and r.enabled)


def test_search_when_the_filter_selects_every_row_then_after_one_is_disabled(db):
    rng = np.random.default_rng(11)
    dim = 8
    index = LocalVectorIndex(db, dimension=dim)
    records = [record(f"n{i:03d}", rng.normal(size=dim), document_id=f"d{i % 2}") for i in range(200)]
    index.upsert(records)
    query = rng.normal(size=dim)
    q = query / np.linalg.norm(query)

    def expected(rows, k):
        def cos(r):
            return -float(np.dot(np.asarray(r.vector) / np.linalg.norm(r.vector), q))

        return [r.id for r in sorted(rows, key=cos)[:k]]

    assert [h.id for h in index.search(list(query), SearchFilter("alice"), 5)] == expected(records, 5)
    index.set_enabled("alice", "d0", False)  # now half the rows are masked out
    kept = [r for r in records if r.document_id == "d1"]
    assert [h.id for h in index.search(list(query), SearchFilter("alice"), 5)] == expected(kept, 5)
    assert len(index.search(list(query), SearchFilter("alice"), 500)) == len(kept) == index.count("alice")


def test_large_matrices_score_through_blas_with_the_same_ranking(db):
    rng = np.random.default_rng(5)
    index = LocalVectorIndex(db, dimension=16)
    index.upsert([record(f"n{i:03d}", rng.normal(size=16), document_id=f"d{i % 3}") for i in range(300)])
    query = list(rng.normal(size=16))
    flt = SearchFilter("alice")
    row_by_row = [(h.id, round(h.score, 5)) for h in index.search(query, flt, 10)]
    large = LocalVectorIndex(db, dimension=16, blas_min_rows=1)  # every matrix counts as large
    through_blas = [(h.id, round(h.score, 5)) for h in large.search(query, flt, 10)]
    assert through_blas == row_by_row


def test_hybrid_hits_carry_the_vector_similarity_for_gating(db):
    index = LocalVectorIndex(db, dimension=4)
    index.upsert(
        [
            record("vec", [1, 0, 0, 0], text="unrelated words"),
            record("kw", [0, 1, 0, 0], text="zeppelin maintenance"),
        ]
    )
    hits = {h.id: h for h in index.hybrid_search("zeppelin", [1, 0, 0, 0], SearchFilter("alice"), 5)}
    assert hits["vec"].similarity == pytest.approx(1.0, abs=1e-5)
    assert hits["kw"].similarity == pytest.approx(0.0, abs=1e-5)
    # score is the fused RRF score: "kw" is 2nd by vector and 1st by keyword, "vec" 1st by vector only
    assert hits["kw"].score == pytest.approx(1 / 62 + 1 / 61)
    assert hits["vec"].score == pytest.approx(1 / 61)
    plain = index.search([1, 0, 0, 0], SearchFilter("alice"), 1)[0]
    assert plain.similarity == plain.score == pytest.approx(1.0, abs=1e-5)


def test_keyword_search_tolerates_fts_syntax_in_the_question(db):
    index = LocalVectorIndex(db, dimension=4)
    index.upsert([record("a", [1, 0, 0, 0], text='what is "NEAR" AND OR the * answer')])
    for question in ('"unbalanced', "NEAR(a b)", "AND OR NOT", "*", "col:umn", "   ", "é ü ß"):
        index.hybrid_search(question, [1, 0, 0, 0], SearchFilter("alice"), 3)
    hits = index.hybrid_search("answer", [0, 1, 0, 0], SearchFilter("alice"), 3)
    assert [h.id for h in hits] == ["a"]


def test_rrf_fuses_by_reciprocal_rank():
    fused = dict(rrf([["a", "b", "c"], ["c", "a"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    assert [i for i, _ in rrf([["a", "b", "c"], ["c", "a"]])] == ["a", "c", "b"]


# ----------------------------------------------------------------------------- blobs
@pytest.mark.parametrize(
    "key", ["", "/etc/passwd", "../outside", "a/../../b", "a//b", "a/./b", "a\\b", ".tmp/x"]
)
def test_unsafe_blob_keys_are_rejected(tmp_path: Path, key: str):
    store = FileBlobStore(tmp_path / "blobs")
    with pytest.raises(ValueError):
        store.put(key, b"x")
    with pytest.raises(ValueError):
        store.get(key)
    assert not (tmp_path / "outside").exists()


def test_blob_writes_leave_no_temporary_files_and_prune_empty_folders(tmp_path: Path):
    store = FileBlobStore(tmp_path / "blobs")
    store.put("documents/alice/d1/body", b"one")
    store.put("documents/alice/d1/body", b"two")
    files = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
    assert files == [tmp_path / "blobs" / "documents" / "alice" / "d1" / "body"]
    store.delete("documents/alice/d1/body")
    assert not (tmp_path / "blobs" / "documents").exists()
    with pytest.raises(ValueError):
        store.delete_prefix("")


def test_hybrid_search_leaves_out_terms_found_in_most_notes_of_a_large_index(db):
    index = LocalVectorIndex(db, dimension=4)
    index.upsert(
        [record(f"n{i}", [1, 0, 0, 0], text=f"common words everywhere item{i}") for i in range(1200)]
        + [record("rare", [0, 1, 0, 0], text="common words and one zeppelin")]
    )
    hits = index.hybrid_search("common zeppelin", [0, 0, 1, 0], SearchFilter("alice"), 3)
    assert "rare" in [h.id for h in hits]  # found by keyword: its vector is no nearer than the others
    # "absent" is in no note: looking it up would find nothing
    assert index._informative(["common", "zeppelin", "absent"]) == ["zeppelin"]


def test_keyword_search_looks_up_the_rarest_words_within_a_budget_of_matches(db, monkeypatch):
    """In a large index the common words of a question are left out once the rarer ones already
    match ``KEYWORD_POSTINGS`` notes (FTS5 ranks every match: the cost grows with them); a word is
    counted under the form the index stores ("reimbursed" as "reimburs")."""
    from ragchat.adapters.local import keyword_terms

    monkeypatch.setattr(keyword_terms, "KEYWORD_POSTINGS", 600)
    index = LocalVectorIndex(db, dimension=4)
    notes = [record(f"a{i}", [1, 0, 0, 0], text=f"travel booking item{i}") for i in range(500)]
    notes += [record(f"b{i}", [1, 0, 0, 0], text=f"hotel stay item{i}") for i in range(500)]
    notes += [record(f"c{i}", [1, 0, 0, 0], text=f"reimbursed expense item{i}") for i in range(100)]
    notes += [record("z", [0, 1, 0, 0], text="a zeppelin ride, reimbursed")]
    index.upsert(notes)
    index.count("alice")
    words = ["travel", "hotel", "reimbursing", "zeppelins", "unknown"]
    # zeppelin (1 note) + reimburs (101) + travel (500) = 602 > 600: travel and hotel are left out
    assert index._informative(words) == ["reimbursing", "zeppelins"]
    monkeypatch.setattr(keyword_terms, "KEYWORD_POSTINGS", 5000)
    assert index._informative(words) == ["travel", "hotel", "reimbursing", "zeppelins"]
    hits = index.hybrid_search("zeppelins reimbursing", [0, 0, 1, 0], SearchFilter("alice"), 3)
    assert hits[0].id == "z"


def test_fts5_stems_are_what_the_index_stores():
    from ragchat.adapters.local.keyword_terms import Stems

    assert Stems()(["reimbursed", "Zeppelins", "foo_bar", "ünïcode"]) == [
        ["reimburs"],
        ["zeppelin"],
        ["foo", "bar"],
        ["unicod"],
    ]


def test_messages_stored_before_sources_said_where_still_load(db):
    store = SqliteConversationStore(db)
    store.create_conversation(Conversation(id="c1", owner="alice"))
    store.add_message(
        Message(id="m1", conversation_id="c1", owner="alice", role="assistant", content="a", sources=[])
    )
    with db.write() as conn:
        conn.execute("UPDATE messages SET sources = ? WHERE id = ?", ('[{"id": "n1", "text": "old"}]', "m1"))
    [src] = store.get_message("alice", "c1", "m1").sources
    assert (src.id, src.text, src.document_id, src.title, src.page) == ("n1", "old", None, None, None)


def test_a_repeated_query_sees_what_was_written_in_between(db):
    """The vector ranking a question's search and hybrid search share is never stale: a note added,
    disabled or deleted between two identical queries shows in the second."""
    index = LocalVectorIndex(db, dimension=4)
    index.upsert([record("a", [1, 0, 0, 0], text="alpha"), record("b", [0.6, 0.8, 0, 0], text="beta")])
    query, flt = [1, 0.1, 0, 0], SearchFilter("alice")
    assert [h.id for h in index.search(query, flt, 2)] == ["a", "b"]
    index.upsert([record("c", [1, 0.1, 0, 0], text="gamma")])
    assert [h.id for h in index.search(query, flt, 2)] == ["c", "a"]
    assert [h.id for h in index.hybrid_search("zzz", query, flt, 2)] == ["c", "a"]
    index.delete(["c"])
    assert [h.id for h in index.hybrid_search("zzz", query, flt, 2)] == ["a", "b"]
    assert [h.id for h in index.search(query, SearchFilter("alice", document_id="nope"), 2)] == []
