"""Evidence vectors pooled from a chunk's own model pass (``EVIDENCE_VECTORS=pooled_sentences`` or
``pooled``): a text's vector is the normalised mean of the chunk's token vectors inside its words,
the chunk's own vector is unchanged, and a text the pass did not cover is embedded alone."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ragchat.adapters.local.span_vectors import pooled_vectors
from ragchat.bootstrap import Container
from ragchat.config import load_settings

from tests.unit.test_extractive_semantic import MODELS

PASSAGE = "Expense policy\nSubmit reports within 30 days. Late ones need approval."
# one token per word (and the [CLS]/[SEP] specials at (0, 0)); "30" is one token
WORDS = ["Expense", "policy", "Submit", "reports", "within", "30", "days", "Late", "ones", "need", "approval"]


def _tokens(cut: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    offsets, at = [(0, 0)], 0
    for word in WORDS[:cut]:
        start = PASSAGE.index(word, at)
        offsets.append((start, start + len(word)))
        at = start + len(word)
    offsets.append((0, 0))
    hidden = np.zeros((len(offsets), 16), dtype=np.float32)
    for i in range(len(offsets)):
        hidden[i, i] = 1.0  # token i points along axis i
    return np.asarray(offsets, dtype=np.int64), hidden


def _axes(vector: list[float] | None) -> set[int]:
    assert vector is not None
    assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-5)
    return {i for i, v in enumerate(vector) if v > 1e-6}


def test_a_text_is_pooled_from_its_own_words_tokens_only() -> None:
    offsets, hidden = _tokens()
    sentence, passage, missing = pooled_vectors(
        offsets,
        hidden,
        PASSAGE,
        [
            "Late ones need approval.",
            "expense policy: Submit reports within 30 days. Late ones need approval.",
            "Receipts are required.",
        ],
    )
    assert _axes(sentence) == {8, 9, 10, 11}  # its four tokens, not the specials nor the others
    assert _axes(passage) == set(range(1, 12))  # the title's words in the header, then both sentences
    assert missing is None  # words the chunk does not have: embedded alone by the caller


def test_a_text_past_the_truncation_is_left_to_be_embedded_alone() -> None:
    offsets, hidden = _tokens(cut=7)  # the pass stopped after "days"
    first, second = pooled_vectors(
        offsets, hidden, PASSAGE, ["Submit reports within 30 days.", "Late ones need approval."]
    )
    assert _axes(first) == {3, 4, 5, 6, 7}
    assert second is None


@pytest.mark.skipif(MODELS is None, reason="MiniLM ONNX model not prepared: run `make model`")
def test_with_pooled_sentences_a_document_is_ready_with_its_sentences_and_chunk_vectors_unchanged(
    tmp_path: Path,
) -> None:
    text = (
        "Submit every expense report within 30 days of the purchase. Late reports need your manager's "
        "approval. The finance team reimburses approved reports with the next salary payment."
    )
    vectors = {}
    for mode in ("embedded", "pooled_sentences"):
        env = {
            "RAGCHAT_DATA_DIR": str(tmp_path / mode),
            "RAGCHAT_MODEL_DIR": str(MODELS),
            "RAGCHAT_CHAT_MODEL": "extractive",
            "EVIDENCE_VECTORS": mode,
        }
        with Container(load_settings(env)) as box:
            box.launcher._warmer = None  # type: ignore[attr-defined]  # what READY itself has
            box.ingestion.submit_file("local", data=text.encode(), filename="expense-policy.txt")
            assert box.launcher.wait_idle(60)
            with box._sqlite.read() as conn:
                rows = conn.execute("SELECT COUNT(*) FROM evidence_vectors").fetchone()[0]
                vectors[mode] = conn.execute("SELECT vector FROM vectors").fetchone()[0]
            # pooled: its three sentences; embedded (a small document): its three sentences and two
            # passages, embedded alone in the chunk's own embedder call
            assert rows == (3 if mode == "pooled_sentences" else 5)
            result = box.ask.ask("local", "How long do I have to hand in an expense report?")
            assert not result.guard_used and "30 days" in result.answer
    assert vectors["embedded"] == vectors["pooled_sentences"]
