"""The reader's training and held-out data, from SQuAD 2.0 dev (plain Python: no torch, so the tests
and the product's virtualenv can read it).

- Split by ARTICLE (:func:`split_articles`): a seeded shuffle of the articles, held out until at
  least ``holdout`` of the questions are; no paragraph, question or title is in both parts.
- Units (:func:`paragraph_units`): each paragraph's sentences (``ragchat.domain.extractive``'s own
  splitter) and windows of two consecutive sentences, both prefixed with the article's title words
  ("Steam engine: …"), as the product scores two-sentence passages prefixed with their title.
- Pairs (:func:`training_pairs`): for an answerable question, one unit holding an answer span
  (label 1) and the paragraph's other units as hard negatives, most word-overlapping first (label
  0); for an unanswerable question (written to look answerable: the near-topic case) its
  paragraph's most overlapping units (label 0); now and then a unit of another article (label 0).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragchat.domain.extractive import split_sentences

SQUAD_FILE = "squad2-dev.json"
HOLDOUT = 0.15
SEED = 34
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom "  # noqa: SIM905
    "whose when where why how did does do that this these those it its as than into".split()
)


@dataclass(frozen=True, slots=True)
class Question:
    article: str
    paragraph: int
    text: str
    answerable: bool
    #: (start, end) character spans of the answers in the paragraph
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class Unit:
    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Article:
    title: str
    paragraphs: tuple[str, ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True, slots=True)
class Pair:
    question: str
    passage: str
    label: int
    article: str


def load_articles(path: Path) -> list[Article]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    out = []
    for art in data:
        title = str(art["title"])
        paragraphs, questions = [], []
        for i, para in enumerate(art["paragraphs"]):
            paragraphs.append(str(para["context"]))
            for qa in para["qas"]:
                spans = tuple(
                    (int(a["answer_start"]), int(a["answer_start"]) + len(a["text"])) for a in qa["answers"]
                )
                questions.append(Question(title, i, str(qa["question"]), not qa["is_impossible"], spans))
        out.append(Article(title, tuple(paragraphs), tuple(questions)))
    return out


def split_articles(
    articles: Sequence[Article], holdout: float = HOLDOUT, seed: int = SEED
) -> tuple[list[Article], list[Article]]:
    """(train, held out): whole articles, seeded; held out until ≥ ``holdout`` of the questions."""
    order = sorted(articles, key=lambda a: a.title)
    random.Random(seed).shuffle(order)
    total = sum(len(a.questions) for a in order)
    held: list[Article] = []
    while order and sum(len(a.questions) for a in held) < holdout * total:
        held.append(order.pop())
    return order, held


def title_of(article: str) -> str:
    return article.replace("_", " ")


def paragraph_units(context: str, title: str, windows: bool = True) -> list[Unit]:
    """Sentences and (``windows``) two-sentence windows of one paragraph, title-prefixed, with their
    spans."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sentence in split_sentences(context):
        start = context.find(sentence, cursor)
        if start < 0:
            continue
        spans.append((start, start + len(sentence)))
        cursor = start + len(sentence)
    units = [Unit(f"{title}: {context[a:b]}", a, b) for a, b in spans]
    if not windows:
        return units
    units += [Unit(f"{title}: {context[a[0] : b[1]]}", a[0], b[1]) for a, b in itertools.pairwise(spans)]
    return units


def holds_answer(unit: Unit, question: Question) -> bool:
    return question.answerable and any(unit.start <= a and b <= unit.end for a, b in question.spans)


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _overlap(question: str, unit: Unit) -> float:
    asked = words(question)
    return len(asked & words(unit.text)) / len(asked) if asked else 0.0


def question_units(article: Article, question: Question, windows: bool = True) -> list[tuple[Unit, int]]:
    """Every unit of the question's paragraph with its label (1: holds an answer)."""
    units = paragraph_units(article.paragraphs[question.paragraph], title_of(article.title), windows)
    return [(u, int(holds_answer(u, question))) for u in units]


def training_pairs(
    articles: Sequence[Article], seed: int = SEED, negatives: int = 2, foreign: float = 0.1
) -> list[Pair]:
    """The training pairs (module docstring), shuffled with ``seed``."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for article in articles:
        for q in article.questions:
            labelled = question_units(article, q)
            pos = [u for u, y in labelled if y]
            neg = sorted((u for u, y in labelled if not y), key=lambda u: -_overlap(q.text, u))
            if pos:
                pairs.append(Pair(q.text, rng.choice(pos).text, 1, article.title))
            # the hardest negatives, plus one drawn at random from the rest of the paragraph
            chosen = neg[:negatives]
            if len(neg) > negatives:
                chosen.append(rng.choice(neg[negatives:]))
            pairs.extend(Pair(q.text, u.text, 0, article.title) for u in chosen)
            if rng.random() < foreign and len(articles) > 1:
                other = rng.choice([a for a in articles if a is not article])
                unit = rng.choice(paragraph_units(rng.choice(other.paragraphs), title_of(other.title)))
                pairs.append(Pair(q.text, unit.text, 0, article.title))
    rng.shuffle(pairs)
    return pairs


def eval_questions(
    articles: Sequence[Article], windows: bool = False
) -> Iterator[tuple[Question, list[tuple[Unit, int]]]]:
    """Held-out questions with their paragraph's units (sentences only by default: the cost bound)."""
    for article in articles:
        for q in article.questions:
            yield q, question_units(article, q, windows)


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
        mid = (i + j + 1) / 2  # 1-based average rank of the tie group
        rank_sum += mid * sum(y for _, y in ranked[i:j])
        i = j
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def balanced_accuracy(scores: Sequence[float], labels: Sequence[int], cut: float) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    return (sum(s >= cut for s in pos) / len(pos) + sum(s < cut for s in neg) / len(neg)) / 2
