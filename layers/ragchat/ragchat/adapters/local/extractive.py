"""The extractive answerer: a ``ChatModel`` with no LLM behind it (SPEC §7, seed 004).

It answers from the retrieved notes alone: the best sentences of the top qualifying chunks (at most
three), each followed by its ``[source: id]``, then the ``Sources:`` line. Deterministic. Used
locally when no Claude key is configured.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ragchat.domain.models import Completion, ModelRequest

_PIECES = re.compile(r"\S+\s*")
WORDS_PER_DELTA = 6


class ExtractiveChatModel:
    model_id = "extractive"

    def complete(self, request: ModelRequest) -> Completion:
        from ragchat.domain.extractive import extractive_answer

        return Completion(text=extractive_answer(request.question, request.sources), model=self.model_id)

    def stream(self, request: ModelRequest) -> Iterator[str]:
        """The same answer, in deltas of a few words (their concatenation is the answer)."""
        text = self.complete(request).text
        pieces = _PIECES.findall(text)
        lead = text[: len(text) - len(text.lstrip())]
        if lead:
            yield lead
        for i in range(0, len(pieces), WORDS_PER_DELTA):
            yield "".join(pieces[i : i + WORDS_PER_DELTA])
