"""Observability (docs/deploy.md): the metrics the services emit, the EMF lines CloudWatch reads, the
correlation id in the Lambda log lines and the local terminal's log lines with their fields."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ragchat.api.handler import http_handler
from ragchat.cli.common import log_handler
from ragchat.domain.errors import ModelError
from ragchat.domain.models import SearchFilter
from ragchat.entrypoints.ingest_steps import ingest_step_handler
from ragchat.entrypoints.s3_ingest import s3_ingest_handler
from ragchat.observability import NoTracer, PowertoolsMetrics, powertools_metrics, root_logger, tracer
from ragchat.services import metrics as names
from ragchat.services.metrics import NO_METRICS, PHASES
from ragchat.services.retrieval import logger as retrieval_logger

from tests.events import api_event, json_body
from tests.fakes import FakeChatModel, FakeEmbedder, run_to_end
from tests.fakes.metrics import RecordingMetrics
from tests.unit.api_support import Api, make_api

SKY = "The sky appears blue because of Rayleigh scattering of sunlight."


class LambdaContext:
    function_name = "ragchat-chat"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:ragchat-chat"

    def __init__(self, request_id: str) -> None:
        self.aws_request_id = request_id


def chat_api(**overrides: Any) -> Api:
    overrides.setdefault("metrics", RecordingMetrics())
    overrides.setdefault("chat_model", FakeChatModel(lambda req: f"Blue [source: {req.sources[0].id}]"))
    return make_api(**overrides)


def add_note(api: Api, text: str = SKY) -> str:
    created = api.call("POST", "/notes", body={"text": text})
    assert created["statusCode"] == 202, created
    return str(json_body(created)["documentId"])


def say(api: Api, text: str, conv_id: str | None = None) -> tuple[str, dict[str, Any]]:
    conv_id = conv_id or json_body(api.call("POST", "/chat/conversations", body={}))["id"]
    reply = api.call("POST", f"/chat/conversations/{conv_id}/messages", body={"content": text})
    assert reply["statusCode"] == 200, reply
    return conv_id, json_body(reply)


def recorded(api: Api) -> RecordingMetrics:
    metrics = api.container.metrics
    assert isinstance(metrics, RecordingMetrics)
    return metrics


# ------------------------------------------------------------------------- metrics of the services
def test_a_guard_refusal_adds_one_to_guard_refusals_and_counts_the_turn() -> None:
    api = chat_api()
    _, reply = say(api, "What is the capital of Peru?")  # nothing stored: the guard answers
    assert reply["guardUsed"] is True
    metrics = recorded(api)
    assert metrics.total("GuardRefusals") == 1
    assert metrics.total("Turns") == 1
    assert metrics.total("ModelFailures") == 0


def test_an_answered_turn_records_the_latency_of_each_phase() -> None:
    api = chat_api()
    add_note(api)
    say(api, "Why is the sky blue?")
    metrics = recorded(api)
    assert metrics.total("Turns") == 1 and metrics.total("GuardRefusals") == 0
    phases = {r.dimensions["phase"] for r in metrics.of("PhaseLatencyMs")}
    assert {"embedding_generation", "vector_search", "ai_completion", "db_write"} <= phases <= set(PHASES)
    assert all(r.unit == "Milliseconds" and r.value >= 0 for r in metrics.of("PhaseLatencyMs"))


def test_model_failures_are_counted_and_the_breaker_opens_once() -> None:
    api = chat_api()
    add_note(api)
    model = api.container.chat_model
    assert isinstance(model, FakeChatModel)
    model.fail_with = ModelError("model down")
    conv_id, reply = say(api, "Why is the sky blue?")
    assert reply["model"] == "fallback"
    metrics = recorded(api)
    assert metrics.total("ModelFailures") == 1 and metrics.total("BreakerOpens") == 0
    for _ in range(4):  # the fifth consecutive failure opens the conversation's breaker
        say(api, "Why is the sky blue?", conv_id)
    assert metrics.total("ModelFailures") == 5 and metrics.total("BreakerOpens") == 1
    calls = model.calls
    say(api, "Why is the sky blue?", conv_id)  # open: answered without calling the model
    assert model.calls == calls
    assert metrics.total("ModelFailures") == 5 and metrics.total("BreakerOpens") == 1
    assert metrics.total("Turns") == 6


def test_a_failed_question_counts_a_model_failure() -> None:
    api = chat_api()
    add_note(api)
    model = api.container.chat_model
    assert isinstance(model, FakeChatModel)
    model.fail_with = ModelError("model down")
    answered = api.call("GET", "/", query={"text": "Why is the sky blue?"})
    assert answered["statusCode"] == 200
    assert recorded(api).total("ModelFailures") == 1 and recorded(api).total("Turns") == 1


def test_ingestion_failures_and_durations_are_counted() -> None:
    embedder = FakeEmbedder(dimension=64)
    api = chat_api(embedder=embedder, run_pipeline=False)
    metrics = recorded(api)
    failing = add_note(api, "A note the embedder cannot read.")
    embedder.fail_with = ModelError("embedding model down")
    run_to_end(api.container.ingest_steps, [("alice", failing)])
    assert json_body(api.call("GET", f"/documents/{failing}"))["status"] == "FAILED"
    assert metrics.total("IngestionFailed") == 1 and metrics.of("IngestionSeconds") == []
    embedder.fail_with = None
    ready = add_note(api)
    api.clock.advance(12)  # queued for 12 s before the pipeline ran
    run_to_end(api.container.ingest_steps, [("alice", ready)])
    assert json_body(api.call("GET", f"/documents/{ready}"))["status"] == "READY"
    (duration,) = metrics.of("IngestionSeconds")
    assert duration.value == pytest.approx(12.0) and duration.unit == "Seconds"
    assert metrics.total("IngestionFailed") == 1


def test_the_templates_alarms_and_dashboard_watch_the_metrics_the_services_emit() -> None:
    template = (Path(__file__).resolve().parents[2] / "template.yaml").read_text()
    alarmed = set(re.findall(r"Namespace: ragchat\s+MetricName: (\w+)", template))
    charted = set(re.findall(r'\["ragchat","(\w+)"', template))
    emitted = {value for key, value in vars(names).items() if key.isupper() and isinstance(value, str)}
    assert {"BreakerOpens", "IngestionFailed"} <= alarmed
    assert alarmed | charted <= emitted


def test_the_container_emits_emf_only_on_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    assert make_api().container.metrics is NO_METRICS
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "ragchat-chat")
    assert isinstance(make_api().container.metrics, PowertoolsMetrics)


def test_tracing_is_off_locally_and_when_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    tracer.cache_clear()
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    assert isinstance(tracer(), NoTracer)
    tracer.cache_clear()
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "ragchat-chat")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    assert isinstance(tracer(), NoTracer)
    tracer.cache_clear()


# ------------------------------------------------------------------------------- on Lambda: EMF
@pytest.fixture
def on_lambda(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A Lambda environment without X-Ray (the tracer stays a no-op) and an empty EMF metric set."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "ragchat-chat")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    tracer.cache_clear()
    powertools_metrics().clear_metrics()
    yield
    tracer.cache_clear()
    powertools_metrics().clear_metrics()


def emf_lines(out: str) -> list[dict[str, Any]]:
    blobs = [json.loads(line) for line in out.splitlines() if line.startswith('{"_aws"')]
    for blob in blobs:
        (directive,) = blob["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "ragchat"
        assert blob["service"] == "ragchat"
    return blobs


def metric_names(blob: dict[str, Any]) -> list[str]:
    return [m["Name"] for m in blob["_aws"]["CloudWatchMetrics"][0]["Metrics"]]


@pytest.mark.usefixtures("on_lambda")
def test_the_http_handler_prints_the_turns_metrics_as_emf(capsys: pytest.CaptureFixture[str]) -> None:
    api = make_api()
    assert isinstance(api.container.metrics, PowertoolsMetrics)
    handler = http_handler({"chat"}, container=lambda: api.container)
    created = handler(api_event("POST", "/chat/conversations", body={}), LambdaContext("l-1"))
    conv_id = json_body(created)["id"]
    capsys.readouterr()
    event = api_event("POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Peru?"})
    assert handler(event, LambdaContext("l-2"))["statusCode"] == 200
    blobs = emf_lines(capsys.readouterr().out)
    # the counters of the invocation: flushed once, as one line, when it ends
    (counters,) = [b for b in blobs if "Turns" in b]
    assert counters["Turns"] == [1.0] and counters["GuardRefusals"] == [1.0]
    assert set(metric_names(counters)) == {"Turns", "GuardRefusals"}
    assert blobs[-1] is counters
    # a latency per phase, each with its phase as a dimension
    phases = {b["phase"]: b["PhaseLatencyMs"] for b in blobs if "PhaseLatencyMs" in b}
    assert "db_write" in phases and set(phases) <= set(PHASES)
    assert all(b["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service", "phase"]] for b in blobs[:-1])


@pytest.mark.usefixtures("on_lambda")
def test_a_metric_outside_an_invocation_is_printed_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The chat_stream web server has no per-invocation wrapper: nothing may wait for a flush."""
    PowertoolsMetrics().add("ModelFailures")
    (blob,) = emf_lines(capsys.readouterr().out)
    assert blob["ModelFailures"] == [1.0] and metric_names(blob) == ["ModelFailures"]


# ------------------------------------------------------------------------- on Lambda: log lines
@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """What the Powertools logger "ragchat" prints (JSON lines on stdout in Lambda)."""
    handler = root_logger().registered_handler
    assert isinstance(handler, logging.StreamHandler)
    out = io.StringIO()
    previous = handler.setStream(out)
    try:
        yield out
    finally:
        handler.setStream(previous)
        root_logger().clear_state()


def log_records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


@pytest.mark.usefixtures("on_lambda")
def test_the_http_handler_correlates_its_log_lines_by_request_id(json_log: io.StringIO) -> None:
    api = make_api()
    handler = http_handler({"chat"}, container=lambda: api.container)
    created = handler(api_event("POST", "/chat/conversations", body={}, request_id="req-1"), None)
    conv_id = json_body(created)["id"]
    event = api_event(
        "POST", f"/chat/conversations/{conv_id}/messages", body={"content": "Peru?"}, request_id="req-42"
    )
    handler(event, LambdaContext("lambda-42"))
    lines = [r for r in log_records(json_log) if str(r.get("message", "")).startswith("chat.")]
    assert {r["message"] for r in lines} >= {"chat.event", "chat.guard", "chat.metrics"}
    assert {r["correlation_id"] for r in lines} == {"req-42"}
    assert {r["function_request_id"] for r in lines} == {"lambda-42"}
    guard = next(r for r in lines if r["message"] == "chat.guard")
    assert guard["conversationId"] == conv_id and guard["reason"]


@pytest.mark.usefixtures("on_lambda")
def test_the_ingestion_entry_points_correlate_and_count(
    json_log: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    api = make_api(run_pipeline=False)
    doc_id = add_note(api)
    steps = ingest_step_handler(lambda: api.container)
    steps({"step": "fail", "owner": "alice", "documentId": doc_id, "error": "boom"}, LambdaContext("step-7"))
    (failed,) = [r for r in log_records(json_log) if r.get("message") == "ingest.failed"]
    assert failed["correlation_id"] == "step-7" and failed["documentId"] == doc_id
    (blob,) = emf_lines(capsys.readouterr().out)
    assert blob["IngestionFailed"] == [1.0]
    api.container.blobs.put("uploads/alice/a.txt", b"Hello from S3.")
    event = {
        "Records": [
            {
                "s3": {"bucket": {"name": "docs"}, "object": {"key": "uploads/alice/a.txt"}},
                "responseElements": {"x-amz-request-id": "s3-req-9"},
            }
        ]
    }
    assert s3_ingest_handler(lambda: api.container)(event, LambdaContext("s3-lambda-1"))["accepted"]
    (accepted,) = [r for r in log_records(json_log) if r.get("message") == "s3_ingest.accepted"]
    assert accepted["correlation_id"] == "s3-req-9" and accepted["key"] == "uploads/alice/a.txt"


# --------------------------------------------------------------------------- local terminal lines
@pytest.fixture
def terminal() -> Iterator[io.StringIO]:
    """The log lines ``ragchat serve`` prints (``cli.common.log_handler``), for the services' events."""
    out = io.StringIO()
    handler = log_handler(out)
    target = logging.getLogger(retrieval_logger.name)
    target.addHandler(handler)
    try:
        yield out
    finally:
        target.removeHandler(handler)


def test_local_log_lines_show_each_events_fields(terminal: io.StringIO) -> None:
    api = make_api()
    note_id = add_note(api)
    retrieval = api.container.retriever.retrieve(
        "Why is the sky blue?", SearchFilter(owner="alice"), conversation_id="c-1"
    )
    api.container.retriever.retrieve("Who won the 1930 World Cup?", SearchFilter(owner="bob"))
    lines = terminal.getvalue().splitlines()
    (line,) = [ln for ln in lines if " chat.retrieval " in ln]
    (hit,) = retrieval.hits
    assert hit.id.startswith(note_id)
    assert f'chat.retrieval conversationId=c-1 ids=["{hit.id}"] scores=[{round(hit.score, 4)}]' in line
    assert " INFO ragchat.services.retrieval " in line
    (guard,) = [ln for ln in lines if " chat.guard " in ln]
    assert guard.endswith("chat.guard conversationId=null reason=empty_knowledge_base")


def test_local_log_lines_quote_text_and_keep_one_line_per_event() -> None:
    out = io.StringIO()
    log = logging.getLogger("ragchat.test_observability")
    log.propagate = False
    log.addHandler(log_handler(out))
    log.warning("chat.error", extra={"conversationId": "c-2", "message_": "model timed out\nafter 3 s"})
    log.removeHandler(log.handlers[0])
    (line,) = out.getvalue().splitlines()
    assert line.endswith('chat.error conversationId=c-2 message_="model timed out\\nafter 3 s"')
