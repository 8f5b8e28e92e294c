"""The extractive reader's training, calibration and test data (plain Python: no torch, so the tests
and the product's virtualenv can read it). docs/reader.md.

Only the sets the answerability README allows to train a model we ship:

- **SQuAD 2.0 dev, full** (``answerability/squad2-dev-full.json``, CC BY-SA 4.0): split by ARTICLE,
  seeded, into train / dev (the threshold is calibrated there) / test (figures are reported there);
  no paragraph, question or title is in two parts. Every question is read against its paragraph
  (the title on the first line, as the product's chunks carry their document's title); an
  answerable question is also read, now and then, against the paragraph of the same article that
  shares the most words with it but holds no answer (a hard negative: "about this, not answered").
- **MTRAG** (``answerability/mtrag/mtragun-reference.jsonl``, Apache-2.0): the last user turn of
  each task. ANSWERABLE tasks: the passage sentence closest to the reference answer (token F1 ≥
  ``MTRAG_MIN_F1``) is the span; UNANSWERABLE tasks (no passage attached): read against the
  passages of the same conversation's other tasks, no answer. All MTRAG goes to training.

The evaluation-only sets (SubjQA, WikiQA, ACE-whQA, INSCIT) are read by ``bench/bench_reader.py``.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SQUAD_FULL = "answerability/squad2-dev-full.json"
MTRAG_FILE = "answerability/mtrag/mtragun-reference.jsonl"
SEED = 42
TEST_SHARE = 0.15
DEV_SHARE = 0.10
HARD_NEGATIVE_RATE = 0.5
MTRAG_MIN_F1 = 0.4
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")
_STOP = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom "  # noqa: SIM905
    "whose when where why how did does do that this these those it its as than into".split()
)


@dataclass(frozen=True, slots=True)
class Example:
    """One question read against one passage; ``answer`` is the (start, end) character span of the
    answer in ``passage``, ``None`` when the passage does not answer it."""

    qid: str
    question: str
    passage: str
    answer: tuple[int, int] | None
    #: every gold answer text (SQuAD lists several), for EM/F1
    answers: tuple[str, ...]
    group: str  # article or conversation
    source: str  # squad, squad-hard-negative, mtrag


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def title_of(article: str) -> str:
    return article.replace("_", " ")


def load_squad(path: Path) -> dict[str, list[tuple[str, list[dict]]]]:
    """{article title: [(context, qas)]} from a SQuAD 2.0 file."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return {str(a["title"]): [(str(p["context"]), list(p["qas"])) for p in a["paragraphs"]] for a in data}


def split_articles(titles: Sequence[str], seed: int = SEED) -> dict[str, list[str]]:
    """{'train', 'dev', 'test'}: whole articles, seeded; test then dev filled to their shares of the
    articles (at least one each)."""
    order = sorted(titles)
    random.Random(seed).shuffle(order)
    n_test = max(1, round(TEST_SHARE * len(order)))
    n_dev = max(1, round(DEV_SHARE * len(order)))
    return {
        "test": order[:n_test],
        "dev": order[n_test : n_test + n_dev],
        "train": order[n_test + n_dev :],
    }


def squad_examples(
    articles: dict[str, list[tuple[str, list[dict]]]],
    titles: Sequence[str],
    *,
    hard_negatives: float = 0.0,
    seed: int = SEED,
) -> list[Example]:
    """Every question of ``titles`` against its paragraph (title on the first line), plus hard
    negatives at rate ``hard_negatives``."""
    rng = random.Random(seed)
    out: list[Example] = []
    for title in titles:
        paragraphs = articles[title]
        head = title_of(title) + "\n"
        bags = [Counter(words(context)) for context, _ in paragraphs]
        for p_index, (context, qas) in enumerate(paragraphs):
            passage = head + context
            for qa in qas:
                texts = tuple(str(a["text"]) for a in qa["answers"])
                answer = None
                if not qa.get("is_impossible") and qa["answers"]:
                    first = qa["answers"][0]
                    start = len(head) + int(first["answer_start"])
                    answer = (start, start + len(str(first["text"])))
                    assert passage[answer[0] : answer[1]] == first["text"]
                out.append(
                    Example(str(qa["id"]), str(qa["question"]), passage, answer, texts, title, "squad")
                )
                if answer is None or len(paragraphs) < 2 or rng.random() >= hard_negatives:
                    continue
                asked = set(words(str(qa["question"])))
                best = max(
                    (
                        i
                        for i in range(len(paragraphs))
                        if i != p_index and not _holds_any(paragraphs[i][0], texts)
                    ),
                    key=lambda i: sum(bags[i][w] > 0 for w in asked),
                    default=None,
                )
                if best is not None:
                    out.append(
                        Example(
                            f"{qa['id']}#neg",
                            str(qa["question"]),
                            head + paragraphs[best][0],
                            None,
                            (),
                            title,
                            "squad-hard-negative",
                        )
                    )
    return out


def _holds_any(context: str, texts: Sequence[str]) -> bool:
    low = context.lower()
    return any(t.lower() in low for t in texts if t)


def token_f1(a: str, b: str) -> float:
    x, y = _WORD.findall(a.lower()), _WORD.findall(b.lower())
    common = sum((Counter(x) & Counter(y)).values())
    if not common:
        return 0.0
    precision, recall = common / len(x), common / len(y)
    return 2 * precision * recall / (precision + recall)


def _sentences(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _SENTENCE.finditer(text):
        a, b = m.start(), m.end()
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b - a >= 20:
            spans.append((a, b))
    return spans


def mtrag_examples(path: Path, seed: int = SEED) -> list[Example]:
    rng = random.Random(seed)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    by_conversation: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_conversation[row["conversation_id"]].append(row)
    out: list[Example] = []
    for row in rows:
        labels = row.get("answerability") or []
        users = [t for t in row["input"] if t.get("speaker") == "user"]
        if not users:
            continue
        question = str(users[-1]["text"]).strip()
        target = " ".join(str(t["text"]) for t in row.get("targets") or [])
        contexts = [
            str(c["text"]).strip() for c in row.get("contexts") or [] if str(c.get("text", "")).strip()
        ]
        if "ANSWERABLE" in labels and contexts and target:
            scored = [(token_f1(c[a:b], target), c, (a, b)) for c in contexts for a, b in _sentences(c)]
            if scored:
                f1, passage, span = max(scored, key=lambda t: t[0])
                if f1 >= MTRAG_MIN_F1 and len(passage[span[0] : span[1]].split()) <= 30:
                    out.append(
                        Example(
                            str(row["task_id"]),
                            question,
                            passage,
                            span,
                            (passage[span[0] : span[1]],),
                            str(row["conversation_id"]),
                            "mtrag",
                        )
                    )
        elif "UNANSWERABLE" in labels:
            others = [
                str(c["text"]).strip()
                for other in by_conversation[row["conversation_id"]]
                if other is not row
                for c in other.get("contexts") or []
                if str(c.get("text", "")).strip()
            ]
            for passage in rng.sample(others, min(2, len(others))):
                out.append(
                    Example(
                        str(row["task_id"]), question, passage, None, (), str(row["conversation_id"]), "mtrag"
                    )
                )
    return out


def datasets(bench: Path, seed: int = SEED) -> dict[str, list[Example]]:
    """{'train', 'dev', 'test'} examples, and the article split under ``'split'`` (see module doc)."""
    articles = load_squad(bench / SQUAD_FULL)
    parts = split_articles(list(articles), seed)
    train = squad_examples(articles, parts["train"], hard_negatives=HARD_NEGATIVE_RATE, seed=seed)
    mtrag = bench / MTRAG_FILE
    if mtrag.is_file():
        train += mtrag_examples(mtrag, seed)
    random.Random(seed).shuffle(train)
    return {
        "train": train,
        "dev": squad_examples(articles, parts["dev"], hard_negatives=HARD_NEGATIVE_RATE, seed=seed + 1),
        "test": squad_examples(articles, parts["test"], hard_negatives=HARD_NEGATIVE_RATE, seed=seed + 2),
        "split": [Example("", "", "", None, (), t, f"split:{k}") for k, ts in parts.items() for t in ts],
    }


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = re.sub(r"\b(a|an|the)\b", " ", re.sub(r"[^\w\s]", " ", text.lower()))
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    if not golds:
        return float(not prediction)
    return max(float(normalize_answer(prediction) == normalize_answer(g)) for g in golds)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    if not golds:
        return float(not prediction)
    best = 0.0
    for gold in golds:
        p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
        common = sum((Counter(p) & Counter(g)).values())
        if common:
            precision, recall = common / len(p), common / len(g)
            best = max(best, 2 * precision * recall / (precision + recall))
    return best


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve (rank statistic, ties counted half)."""
    ranked = sorted(zip(scores, labels, strict=True), key=lambda t: t[0])
    pos = sum(labels)
    neg = len(labels) - pos
    if not pos or not neg:
        return float("nan")
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        rank_sum += (i + j + 1) / 2 * sum(y for _, y in ranked[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
