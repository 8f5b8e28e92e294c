"""Logging, metrics and tracing of every entry point, set up in one place (docs/deploy.md).

- **Logger**: ``root_logger()`` is the Powertools logger ``ragchat`` (JSON lines on stdout, which Lambda
  captures); the services' child loggers propagate to it. It is made by the Lambda entry points only
  (``ragchat.api.handler`` and ``ragchat.entrypoints``): locally the CLI formats log lines itself
  with :class:`FieldsFormatter`, one readable line per event with its fields.
- **Correlation id**: the request id, set by :func:`start_invocation` (the equivalent of
  ``logger.inject_lambda_context(correlation_id_path=..., clear_state=True)`` that also works without
  a Lambda context): the API Gateway request id, the S3 request id, else the Lambda request id.
- **Metrics**: CloudWatch EMF, namespace ``ragchat``, dimension ``service``. The services emit through
  the ``Metrics`` port (names in ``ragchat.services.metrics``); :func:`metrics_port` gives them
  :class:`PowertoolsMetrics` on Lambda and nothing elsewhere. Inside an invocation wrapped by
  :func:`lambda_entry` counters are buffered and flushed once at its end (one EMF line); outside
  one (the chat_stream web server, worker threads) and for a metric with dimensions
  (``PhaseLatencyMs`` per ``phase``), each value is its own EMF line at once.
- **Tracer**: made on the first invocation, and only on Lambda (``AWS_LAMBDA_FUNCTION_NAME`` set,
  ``POWERTOOLS_TRACE_DISABLED`` not true): creating one imports the X-Ray SDK and patches botocore
  (~0.1 s; patching every supported library costs ~0.4 s). Elsewhere, or without ``aws-xray-sdk``,
  a no-op. Handler responses are not recorded in traces (they hold user data).

- **Redaction**: logs never hold query strings, questions or tokens (docs/security.md). The access log line
  names a request by :func:`redact_target` (query values and upload grant tokens replaced by ``***``)
  and :class:`FieldsFormatter` passes every message through :func:`redact` (bearer tokens,
  ``token=``/``text=``-style parameters, upload URLs).

Nothing here imports Powertools at import time: the CLI imports this module for its log format.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools import Metrics as PowertoolsMetricSet

    from ragchat.ports import Metrics

Handler = Callable[[dict[str, Any], Any], Any]

SERVICE = "ragchat"
NAMESPACE = "ragchat"
# Where an event carries its request id (the correlation id).
API_GATEWAY_REQUEST_ID = "requestContext.requestId"
S3_REQUEST_ID = 'Records[0].responseElements."x-amz-request-id"'
# Libraries the tracer patches: every AWS call (DynamoDB, S3, Bedrock, Step Functions) goes through
# botocore; patching the rest (requests, httpx, sqlite3, ...) would triple the tracer's start-up cost.
TRACED_MODULES = ("botocore",)

_in_invocation: contextvars.ContextVar[bool] = contextvars.ContextVar("ragchat_in_invocation", default=False)
_cold_start = True
_log = logging.getLogger("ragchat.observability")


def on_lambda() -> bool:
    """Running inside a Lambda execution environment (also ``sam local`` and the Web Adapter)."""
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------------------------------- logger
@functools.cache
def root_logger() -> Logger:
    """The Powertools logger ``ragchat`` (made once; only Lambda entry points make it). Its handlers
    redact every line (:class:`RedactingFilter`), the child loggers' lines included."""
    from aws_lambda_powertools import Logger

    made = Logger(service=SERVICE)
    for handler in made.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    return made


def start_invocation(event: Mapping[str, Any], context: Any, correlation_id_path: str | None = None) -> None:
    """Fresh log keys for one invocation: the Lambda context's (``function_name``,
    ``function_request_id``, ... and ``cold_start``) when there is one, and the correlation id: the
    value at ``correlation_id_path`` in the event, else the Lambda request id."""
    global _cold_start
    log = root_logger()
    log.clear_state()
    request_id = getattr(context, "aws_request_id", None)
    if context is not None:
        cold, _cold_start = _cold_start, False
        log.append_keys(cold_start=cold, **_context_keys(context))
    correlation_id = _query(event, correlation_id_path) if correlation_id_path else None
    log.set_correlation_id(correlation_id or request_id)


def _context_keys(context: Any) -> dict[str, Any]:
    from aws_lambda_powertools.logging.lambda_context import build_lambda_context_model

    try:
        return dict(build_lambda_context_model(context).__dict__)
    except AttributeError:  # a partial stand-in context (tests, local callers)
        return {"function_request_id": getattr(context, "aws_request_id", None)}


def _query(event: Mapping[str, Any], path: str) -> str | None:
    from aws_lambda_powertools.utilities.jmespath_utils import query

    try:
        value = query(envelope=path, data=dict(event))
    except Exception:  # a malformed event has no correlation id, it still gets handled
        return None
    return str(value) if value else None


# --------------------------------------------------------------------------------------- metrics
@functools.cache
def powertools_metrics() -> PowertoolsMetricSet:
    """The Powertools EMF metric set (namespace ``ragchat``, dimension ``service``), made once."""
    from aws_lambda_powertools import Metrics as PowertoolsMetricSet

    return PowertoolsMetricSet(namespace=NAMESPACE, service=SERVICE)


def flush_metrics() -> None:
    """Publish the invocation's buffered metrics as one EMF line (``metrics.log_metrics`` does this
    too, but warns on every invocation that recorded none)."""
    metric_set = powertools_metrics()
    if metric_set.metric_set:
        metric_set.flush_metrics()


class PowertoolsMetrics:
    """The ``Metrics`` port as CloudWatch EMF lines on stdout (see the module docstring)."""

    def __init__(self, metric_set: PowertoolsMetricSet | None = None) -> None:
        self.metric_set = metric_set or powertools_metrics()

    def add(
        self,
        name: str,
        value: float = 1.0,
        *,
        unit: str = "Count",
        dimensions: Mapping[str, str] | None = None,
    ) -> None:
        try:
            if dimensions or not _in_invocation.get():
                self._emit(name, value, unit, dimensions or {})
            else:
                self.metric_set.add_metric(name=name, unit=unit, value=value)
        except Exception:  # a metric never fails a request
            _log.warning("metric %s dropped", name, exc_info=True)

    def _emit(self, name: str, value: float, unit: str, dimensions: Mapping[str, str]) -> None:
        from aws_lambda_powertools.metrics import single_metric

        defaults = dict(self.metric_set.default_dimensions) or {"service": SERVICE}
        with single_metric(
            name=name,
            unit=unit,  # type: ignore[arg-type]  # Powertools validates unit names given as strings
            value=value,
            namespace=NAMESPACE,
            default_dimensions=defaults,
        ) as metric:
            for key, dim in dimensions.items():
                metric.add_dimension(name=key, value=dim)


def metrics_port() -> Metrics:
    """What the container gives the services: EMF on Lambda, nothing elsewhere."""
    if on_lambda():
        return PowertoolsMetrics()
    from ragchat.services.metrics import NO_METRICS

    return NO_METRICS


# ---------------------------------------------------------------------------------------- tracer
class Tracer(Protocol):
    def capture_lambda_handler(
        self, lambda_handler: Handler, capture_response: bool | None = None
    ) -> Handler: ...


class NoTracer:
    """Tracing off: handlers run as they are."""

    def capture_lambda_handler(
        self, lambda_handler: Handler, capture_response: bool | None = None
    ) -> Handler:
        return lambda_handler


@functools.cache
def tracer() -> Tracer:
    """The Powertools tracer on Lambda (made on first use), else :class:`NoTracer`."""
    if not on_lambda() or _truthy("POWERTOOLS_TRACE_DISABLED"):
        return NoTracer()
    try:
        from aws_lambda_powertools import Tracer as PowertoolsTracer

        made: Tracer = PowertoolsTracer(service=SERVICE, patch_modules=list(TRACED_MODULES))
        return made
    except ImportError:
        _log.warning("tracing is off: aws-xray-sdk is not installed")
        return NoTracer()


# ----------------------------------------------------------------------------------- entry points
def lambda_entry(fn: Handler, *, name: str, correlation_id_path: str | None = None) -> Handler:
    """``fn(event, context)`` as a Lambda entry point: log keys and correlation id
    (:func:`start_invocation`; ``logger.inject_lambda_context``), metrics buffered and flushed once
    (``metrics.log_metrics``), traced (``tracer.capture_lambda_handler``). The tracer is made on the
    first call."""
    traced: list[Handler] = []

    def handler(event: dict[str, Any], context: Any) -> Any:
        return fn(event, context)

    handler.__name__ = handler.__qualname__ = name

    def entry(event: dict[str, Any], context: Any) -> Any:
        if not traced:
            traced.append(tracer().capture_lambda_handler(handler, capture_response=False))
        start_invocation(event, context, correlation_id_path)
        token = _in_invocation.set(True)
        try:
            return traced[0](event, context)
        finally:
            _in_invocation.reset(token)
            flush_metrics()

    entry.__name__ = entry.__qualname__ = name
    return entry


# ------------------------------------------------------------------------------------ redaction
MASK = "***"
# Path segments that are secrets: the grant token of a local upload URL.
_SECRET_PATH = re.compile(r"(/uploads/local/)[^/?#\s]+")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+")
# A parameter's name, then ``=`` and its value when it has one. A name without ``=`` is matched too
# (and left as it is) so the search resumes after it: otherwise each ``?`` of a long run of them was
# a new start that scanned the same run (issue 30: quadratic).
_QUERY = re.compile(r"([?&])([^=&\s#\"']++)(=[^&\s#\"']*+)?")


def _mask_value(match: re.Match[str]) -> str:
    return match.group(0) if match.group(3) is None else f"{match.group(1)}{match.group(2)}={MASK}"


def redact_target(target: str) -> str:
    """A request target fit for a log: the path with upload tokens masked, and each query parameter
    by name only (``/?text=what+is+it`` → ``/?text=***``)."""
    path, sep, query = target.partition("?")
    path = _SECRET_PATH.sub(rf"\1{MASK}", path)
    if not sep:
        return path
    names = [part.split("=", 1)[0] for part in query.split("&") if part]
    return path + "?" + "&".join(f"{name}={MASK}" for name in names)


def redact(text: str) -> str:
    """``text`` with bearer tokens, query-string values and upload tokens masked."""
    text = _BEARER.sub(rf"\1 {MASK}", text)
    text = _SECRET_PATH.sub(rf"\1{MASK}", text)
    return _QUERY.sub(_mask_value, text)


class RedactingFilter(logging.Filter):
    """A handler filter: the record's message passed through :func:`redact` (bearer tokens, query
    values, upload tokens), whichever logger it came from."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            message = record.getMessage()
            cleaned = redact(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


# ------------------------------------------------------------------------------------ local lines
_RECORD_KEYS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's coloured copy of the message: not a field
}


def _field(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"'=" for c in value):
        return value
    return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))


def event_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a log call passed in ``extra`` (docs/deploy.md: ``conversationId``, ...)."""
    return {k: v for k, v in record.__dict__.items() if k not in _RECORD_KEYS and not k.startswith("_")}


class FieldsFormatter(logging.Formatter):
    """Local log lines (``ragchat serve``, ``--verbose``): the usual line followed by the event's fields
    as ``key=value`` (strings bare when they can be, anything else as compact JSON), one line per event:
    ``12:00:01 INFO ragchat.services.retrieval chat.retrieval conversationId=c1 ids=["n1"] scores=[0.8]``.
    The Powertools child loggers' doubled prefix (``ragchat.ragchat.services...``) is shortened."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        name = record.name
        record.name = name.replace("ragchat.ragchat.", "ragchat.", 1)
        try:
            line = super().formatMessage(record)
        finally:
            record.name = name
        fields = " ".join(f"{key}={_field(value)}" for key, value in event_fields(record).items())
        return redact(f"{line} {fields}" if fields else line)
