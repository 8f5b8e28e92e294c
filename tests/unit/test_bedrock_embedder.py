"""Bedrock embedders: exact request bodies, retry delays on throttling, order under concurrency."""

from __future__ import annotations

import io
import json
import math
import threading
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from ragchat.adapters.aws.bedrock import Backoff, CohereEmbedder, TitanEmbedder
from ragchat.domain.errors import ModelError, TransientError, ValidationError


def _body(payload: dict[str, Any]) -> StreamingBody:
    raw = json.dumps(payload).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def _vector_for(text: str, dim: int) -> list[float]:
    """A deterministic, deliberately non-unit vector that differs per text."""
    seed = sum(map(ord, text)) + len(text)
    return [float((seed * (i + 3)) % 17 + 1) for i in range(dim)]


def _error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "InvokeModel")


class FakeBedrock:
    """Answers ``invoke_model`` like Bedrock from the request body; records every request; can
    throttle a text a number of times, and hold a text's answer until another text was answered."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.requests: list[dict[str, Any]] = []
        self.fail: dict[str, list[str]] = {}  # text → error codes to raise, in order
        self.hold: dict[str, threading.Event] = {}
        self.answered: dict[str, threading.Event] = {}
        self.held_ok: list[bool] = []
        self.lock = threading.Lock()

    def invoke_model(self, **kwargs: Any) -> dict[str, Any]:
        body = json.loads(kwargs["body"])
        with self.lock:
            self.requests.append({**kwargs, "body": body})
        key = body.get("inputText") or body["texts"][0]
        if key in self.hold:
            self.held_ok.append(self.hold[key].wait(timeout=5))
        with self.lock:
            codes = self.fail.get(key)
            code = codes.pop(0) if codes else None
        if code:
            raise _error(code)
        if "inputText" in body:
            payload: dict[str, Any] = {
                "embedding": _vector_for(body["inputText"], body["dimensions"]),
                "inputTextTokenCount": 3,
            }
        else:
            payload = {
                "id": "x",
                "response_type": "embeddings_by_type",
                "texts": body["texts"],
                "embeddings": {"float": [_vector_for(t, self.dim) for t in body["texts"]]},
            }
        self.answered.setdefault(key, threading.Event()).set()
        return {"body": _body(payload), "contentType": "application/json"}


def _backoff(sleeps: list[float], attempts: int = 6) -> Backoff:
    return Backoff(attempts=attempts, base=0.25, cap=8.0, sleep=sleeps.append, jitter=lambda: 1.0)


def _is_unit(v: list[float]) -> bool:
    return math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-9)


def test_titan_request_is_exact_on_the_wire_with_stubber():
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    stubber = Stubber(client)
    stubber.add_response(
        "invoke_model",
        {"body": _body({"embedding": [3.0, 4.0] + [0.0] * 254}), "contentType": "application/json"},
        {
            "modelId": "amazon.titan-embed-text-v2:0",
            "body": json.dumps({"inputText": "hello world", "dimensions": 256, "normalize": True}),
            "contentType": "application/json",
            "accept": "application/json",
        },
    )
    with stubber:
        vector = TitanEmbedder(client, dimension=256, concurrency=1).embed_query("hello world")
    stubber.assert_no_pending_responses()
    assert vector[:2] == [0.6, 0.8] and len(vector) == 256


def test_titan_one_call_per_text_unit_vectors_in_order():
    fake = FakeBedrock()
    texts = [f"text number {i}" for i in range(20)]
    vectors = TitanEmbedder(fake, dimension=256, concurrency=4).embed_documents(texts)
    assert len(vectors) == 20 and all(len(v) == 256 and _is_unit(v) for v in vectors)
    for text, vector in zip(texts, vectors, strict=True):
        raw = _vector_for(text, 256)
        norm = math.sqrt(sum(x * x for x in raw))
        assert vector == pytest.approx([x / norm for x in raw])
    assert sorted(r["body"]["inputText"] for r in fake.requests) == sorted(texts)
    assert {json.dumps(r["body"], sort_keys=True).count("inputText") for r in fake.requests} == {1}
    assert all(r["body"]["dimensions"] == 256 and r["body"]["normalize"] is True for r in fake.requests)


def test_titan_keeps_order_when_answers_arrive_out_of_order():
    fake = FakeBedrock()
    texts = ["first", "second", "third", "fourth"]
    fake.hold["first"] = fake.answered.setdefault("fourth", threading.Event())  # first waits for fourth
    vectors = TitanEmbedder(fake, dimension=256, concurrency=4).embed_documents(texts)
    assert fake.held_ok == [True]  # "first" really was answered after "fourth"
    assert vectors[0] == pytest.approx(TitanEmbedder(FakeBedrock(), dimension=256).embed_query("first"))
    assert vectors[3] == pytest.approx(TitanEmbedder(FakeBedrock(), dimension=256).embed_query("fourth"))


def test_titan_retries_throttling_with_exponential_delays():
    fake = FakeBedrock()
    fake.fail["busy"] = ["ThrottlingException", "ServiceUnavailableException", "ModelTimeoutException"]
    sleeps: list[float] = []
    vector = TitanEmbedder(fake, dimension=256, backoff=_backoff(sleeps)).embed_query("busy")
    assert _is_unit(vector)
    assert sleeps == [0.25, 0.5, 1.0]
    assert len(fake.requests) == 4


def test_backoff_jitter_stays_within_half_to_full_delay_and_is_capped():
    low = Backoff(base=0.25, cap=8.0, jitter=lambda: 0.0)
    assert [low.delay(n) for n in range(7)] == [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    high = Backoff(base=0.25, cap=8.0, jitter=lambda: 1.0)
    assert [high.delay(n) for n in range(7)] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_titan_gives_up_with_a_transient_error_and_does_not_retry_validation():
    fake = FakeBedrock()
    fake.fail["busy"] = ["ThrottlingException"] * 10
    sleeps: list[float] = []
    with pytest.raises(TransientError):
        TitanEmbedder(fake, dimension=256, backoff=_backoff(sleeps, attempts=3)).embed_query("busy")
    assert sleeps == [0.25, 0.5] and len(fake.requests) == 3

    fake.fail["bad"] = ["ValidationException"]
    with pytest.raises(ValidationError):
        TitanEmbedder(fake, dimension=256, backoff=_backoff(sleeps)).embed_query("bad")
    fake.fail["denied"] = ["AccessDeniedException"]
    with pytest.raises(ModelError, match=r"Bedrock denied access to model amazon\.titan-embed-text-v2:0"):
        TitanEmbedder(fake, dimension=256, backoff=_backoff(sleeps)).embed_query("denied")
    assert sleeps == [0.25, 0.5]  # neither a validation error nor access denied is retried


def test_titan_rejects_unsupported_dimensions():
    with pytest.raises(ValueError):
        TitanEmbedder(FakeBedrock(), dimension=768)


def test_cohere_batches_of_96_with_input_types_and_normalized_vectors():
    fake = FakeBedrock(dim=1024)
    texts = [f"passage {i}" for i in range(200)]
    embedder = CohereEmbedder(fake, model_id="cohere.embed-english-v3", concurrency=3)
    vectors = embedder.embed_documents(texts)
    assert sorted(len(r["body"]["texts"]) for r in fake.requests) == [8, 96, 96]
    assert all(r["modelId"] == "cohere.embed-english-v3" for r in fake.requests)
    assert all(
        r["body"]["input_type"] == "search_document" and r["body"]["embedding_types"] == ["float"]
        for r in fake.requests
    )
    assert len(vectors) == 200 and all(_is_unit(v) and len(v) == 1024 for v in vectors)
    raw = _vector_for("passage 150", 1024)
    norm = math.sqrt(sum(x * x for x in raw))
    assert vectors[150] == pytest.approx([x / norm for x in raw])

    fake.requests.clear()
    query = embedder.embed_query("what is x? " + "y" * 3000)
    (request,) = fake.requests
    assert request["body"]["input_type"] == "search_query" and len(request["body"]["texts"][0]) == 2048
    assert _is_unit(query)


def test_cohere_retries_throttling_per_batch():
    fake = FakeBedrock(dim=1024)
    fake.fail["p0"] = ["ThrottlingException", "ThrottlingException"]
    sleeps: list[float] = []
    vectors = CohereEmbedder(fake, concurrency=1, backoff=_backoff(sleeps)).embed_documents(["p0", "p1"])
    assert len(vectors) == 2 and sleeps == [0.25, 0.5]
