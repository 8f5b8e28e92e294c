"""Claude mode condenses every follow-up that leans on the conversation (issue 36 item 3), not only
one-word ones, within the condense step's own deadline, falling back to the carried query; the
searched question is what the turn returns."""

from __future__ import annotations

import pytest
from ragchat.domain.errors import TransientError
from ragchat.domain.followups import needs_condensing
from ragchat.domain.models import ModelRequest
from ragchat.domain.prompts import CONDENSE_PROMPT
from ragchat.services.questions import CONDENSE_BUDGET_S

from tests.fakes import FakeChatModel, FakeClock
from tests.unit.test_chat_service import Rig

CONDENSED = "Does the Rayleigh scattering of sunlight also make the ocean look blue?"


def test_every_message_leaning_on_the_conversation_is_condensed_whatever_its_length() -> None:
    assert needs_condensing("Does that also apply to contractors working from home in another country?")
    assert needs_condensing("And at the weekend?")
    assert needs_condensing("Why?")
    assert not needs_condensing("Why is grass green?")  # stands alone: no model call
    assert not needs_condensing("Is there a sauna in the spa building?")


def _reply(req: ModelRequest) -> str:
    if req.system == CONDENSE_PROMPT:
        return CONDENSED
    return f"Because of light [source: {req.sources[0].id}]" if req.sources else "No sources."


def test_a_long_referring_follow_up_is_condensed_and_its_standalone_question_searched() -> None:
    model = FakeChatModel(_reply)
    rig = Rig(model=model)
    c = rig.conv()
    rig.say(c, "Why is the sky blue?")
    out = rig.say(c, "Does that same scattering explain the colour of the sea and the ocean water too?")
    condense = [r for r in model.requests if r.system == CONDENSE_PROMPT]
    assert len(condense) == 1
    assert out.message.query == CONDENSED


class SlowCondense(FakeChatModel):
    """The condense call takes longer than its own budget (the clock moves), then times out."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(_reply)
        self.clock = clock

    def complete(self, request: ModelRequest):  # type: ignore[no-untyped-def]
        if request.system == CONDENSE_PROMPT:
            self.requests.append(request)
            self.clock.advance(CONDENSE_BUDGET_S + 1)
            raise TransientError("read timed out")
        return super().complete(request)


def test_the_condense_call_keeps_its_own_deadline_and_the_turn_falls_back_to_the_carried_query() -> None:
    clock = FakeClock()
    model = SlowCondense(clock)
    rig = Rig(model=model, clock=clock)
    c = rig.conv()
    rig.say(c, "Why is the sky blue?")
    out = rig.say(c, "And that?")
    condense = [r for r in model.requests if r.system == CONDENSE_PROMPT]
    # one attempt, given at most the condense budget: no retry past its own deadline
    assert len(condense) == 1
    assert condense[0].timeout_s is not None and condense[0].timeout_s <= CONDENSE_BUDGET_S
    # the turn still answers, from the local carried query, with the turn's budget left
    answer = [r for r in model.requests if r.system != CONDENSE_PROMPT][-1]
    assert not out.guard_used and "n-sky" in [h.id for h in answer.sources]
    assert out.message.query == "Why is the sky blue? And that?"


def _retriever(policy: str):  # type: ignore[no-untyped-def]
    from ragchat.config import load_settings
    from ragchat.domain.models import VectorRecord
    from ragchat.services.retrieval import Retriever

    from tests.fakes import FakeEmbedder, FakeVectorIndex

    settings = load_settings({"MIN_SIMILARITY": "0.3", "RETRIEVAL_MODE": "vector"})
    embedder = FakeEmbedder(dimension=4096)  # no hash collisions between these few words
    index = FakeVectorIndex(dimension=embedder.dimension)
    for note, text in (
        ("n-ferry", "A return ferry ticket to Brindle Island costs twelve pounds for adults."),
        ("n-cafe", "The harbour cafe sells sandwiches and hot drinks until six."),
    ):
        index.upsert([VectorRecord(note, embedder.vector_for(text), text, "alice", note, 0)])
    return Retriever(embedder, index, settings, policy=policy)


def test_claudes_standalone_question_is_searched_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragchat.domain.answerability import EXTRACTIVE_POLICY, READER_POLICY
    from ragchat.domain.models import SearchFilter
    from ragchat.services import questions
    from ragchat.services.questions import retrieve_question

    previous = ["What does the harbour cafe sell?"]
    condensed = "How much is a return ferry ticket to Brindle Island for adults?"
    flt = SearchFilter(owner="alice")
    # the local fit check (made for the pasted carried query) would reject the rewrite...
    monkeypatch.setattr(questions, "_carried_fits", lambda *a, **k: False)
    local = retrieve_question(
        _retriever(EXTRACTIVE_POLICY), "And the crossing?", flt, previous=previous, condensed=condensed
    )
    assert local.query != condensed
    # ...but Claude's own rewrite is searched as written and its note reaches the model
    claude = retrieve_question(
        _retriever(READER_POLICY), "And the crossing?", flt, previous=previous, condensed=condensed
    )
    assert claude.query == condensed and not claude.guard and claude.hits[0].id == "n-ferry"


def test_when_claudes_rewrite_finds_nothing_to_answer_from_the_carried_query_is_tried() -> None:
    """A rewrite built on the wrong earlier message ("What about kids?" after "Do I have to pay extra
    for one?" rewritten around the price) lands on notes that never mention children: refused. The
    local carried query (the conversation's subject question + the message) finds the children's
    rule, and the turn answers from it, as it does without Claude. (Before: refused.)"""
    from ragchat.config import load_settings
    from ragchat.domain.answerability import READER_POLICY
    from ragchat.domain.models import SearchFilter, VectorRecord
    from ragchat.services.questions import retrieve_question
    from ragchat.services.retrieval import Retriever

    from tests.fakes import FakeEmbedder, FakeVectorIndex

    settings = load_settings({"MIN_SIMILARITY": "0.3", "RETRIEVAL_MODE": "vector"})
    embedder = FakeEmbedder(dimension=4096)
    index = FakeVectorIndex(dimension=embedder.dimension)
    for note, text in (
        ("n-price", "A kayak costs 20 pounds a day and you pay nothing extra for the paddle."),
        ("n-kids", "Everyone must wear a life jacket when kayaking; children under 12 get a small one."),
    ):
        index.upsert([VectorRecord(note, embedder.vector_for(text), text, "alice", f"d-{note}", 0)])
    retriever = Retriever(embedder, index, settings, policy=READER_POLICY)
    previous = ["Do I need to wear a life jacket when kayaking?", "Do I have to pay extra for one?"]
    out = retrieve_question(
        retriever,
        "What about kids?",
        SearchFilter(owner="alice"),
        previous=previous,
        condensed="Do I have to pay extra for one? What about kids?",
    )
    assert not out.guard and out.hits[0].id == "n-kids"
    assert out.query == "Do I need to wear a life jacket when kayaking? What about kids?"
