"""Configuration: one pydantic settings model, read from the environment once and validated.

Everything else receives values from here, never from ``os.environ``. An invalid value stops
start-up with a message that names the variable (``ConfigError``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Calibrated similarity thresholds per embedding model: MIN_SIMILARITY's default. For a model without
# answerability coefficients (ragchat.domain.answerability.CALIBRATED) the service refuses when the
# top hit's cosine similarity is below it (the seeds' rule). For a calibrated model it is the point
# the decision was fitted at: the decision reads every similarity relative to MIN_SIMILARITY, so
# setting it 0.05 higher than the default acts as if every similarity were 0.05 lower (fewer answers)
# and lower the reverse. See docs/retrieval.md ("Answerability and MIN_SIMILARITY") and bench/results/.
DEFAULT_MIN_SIMILARITY: dict[str, float] = {
    "bge-base-768": 0.65,  # the seeds' value for a 768-d BGE model
    "all-MiniLM-L6-v2": 0.40,  # measured: bench/results/calibration.md
    "amazon.titan-embed-text-v2:0": 0.35,
    "cohere.embed-english-v3": 0.35,
    "cohere.embed-multilingual-v3": 0.35,
}

MiB = 1024 * 1024
# A body sent straight to an API function (POST /documents, /notes) travels inside the Lambda
# invocation's event: Lambda takes at most 6 MiB per synchronous request, event included, and API
# Gateway base64-encodes a binary body (4 characters per 3 bytes). Keeping 64 KiB for the event's
# headers, request context and JSON, the largest raw body that always arrives is (6 MiB - 64 KiB) x 3/4
# = 4,669,440 bytes; a larger one is refused by Lambda before the app runs, so the AWS backend's limit
# is that (larger files: POST /uploads, up to MAX_UPLOAD_BYTES).
LAMBDA_SYNC_PAYLOAD_BYTES = 6 * MiB
LAMBDA_EVENT_ALLOWANCE_BYTES = 64 * 1024
LAMBDA_DIRECT_BODY_BYTES = (LAMBDA_SYNC_PAYLOAD_BYTES - LAMBDA_EVENT_ALLOWANCE_BYTES) * 3 // 4
AWS_REGION_PATTERN = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
# An S3 bucket name (it becomes a host name in the pages' CSP: nothing else may pass).
S3_BUCKET_PATTERN = re.compile(r"[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?")


# Parts of the wiring that need settings only some functions get (``Settings.require``).
Part = Literal["launcher"]
# The rate-limited routes (``Settings.rate_limit``; ``ragchat.services.limits``).
RateLimitedRoute = Literal["chat", "ask", "notes", "uploads", "receiver", "conversations"]
RATE_LIMITED_ROUTES: tuple[RateLimitedRoute, ...] = (
    "chat",
    "ask",
    "notes",
    "uploads",
    "receiver",
    "conversations",
)
DAY_S = 24 * 3600

# the default Claude models: Haiku 5.5 through the Region's inference profile (ragchat.domain.claude)
from ragchat.domain.claude import DEFAULT_ANTHROPIC_MODEL, default_bedrock_chat_model  # noqa: E402


def is_anthropic_key(value: object) -> bool:
    """Whether a configured Anthropic key can be real: a non-blank ``sk-...`` token. A secret left
    empty or holding a placeholder (``none``, ``changeme``, ``{}``) means "no key"."""
    if not isinstance(value, str):
        return False
    key = value.strip()
    return key.startswith("sk-") and len(key) > 3 and not any(c.isspace() for c in key)


_NOT_ONLY_AWS = {"OPENSEARCH_ENDPOINT", "S3VECTORS_BUCKET", "ANTHROPIC_API_KEY"}  # needed locally too


class ConfigError(ValueError):
    """Invalid configuration; the message names the offending environment variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, case_sensitive=False)

    # --- docs/configuration.md feature flags -------------------------------------------------------------
    enable_text_splitting: bool = Field(True, alias="ENABLE_TEXT_SPLITTING")
    enable_chat_summarization: bool = Field(False, alias="ENABLE_CHAT_SUMMARIZATION")
    enable_rate_limiting: bool = Field(False, alias="ENABLE_RATE_LIMITING")
    enable_citation_validation: bool = Field(True, alias="ENABLE_CITATION_VALIDATION")
    max_chat_history: int = Field(12, alias="MAX_CHAT_HISTORY", ge=4, le=200)
    min_similarity: float | None = Field(None, alias="MIN_SIMILARITY", ge=-1.0, le=1.0)
    # hybrid (keyword + vector fusion) measures better on SciFact (nDCG@10 0.720 vs 0.684) and on the
    # grounding set (bench/results/scifact.md, grounding.md); S3 Vectors fuses in the service.
    retrieval_mode: Literal["vector", "hybrid"] = Field("hybrid", alias="RETRIEVAL_MODE")
    # answer-or-refuse: the calibrated decision (the question against the top chunks' title-prefixed
    # passages: more accurate; their vectors precomputed, see below) or the top-1 rule
    answerability: Literal["calibrated", "similarity"] = Field("calibrated", alias="ANSWERABILITY")
    # where ``ragchat calibrate`` stores the fitted answerability coefficients and the deployed
    # functions read them: an SSM parameter (the stack sets its name), else a file in the data dir
    answerability_parameter: str = Field("", alias="ANSWERABILITY_PARAMETER")
    # the extractive answerer picks sentences by meaning (MiniLM) or shared words (BM25; Bedrock embedders)
    extractive_sentences: Literal["meaning", "words"] = Field("meaning", alias="EXTRACTIVE_SENTENCES")
    # local (SQLite index): embed those passages and sentences once a document is READY, in the
    # background, so a question embeds only itself (ragchat.services.evidence; ~7 KB per chunk)
    precompute_evidence: bool = Field(True, alias="PRECOMPUTE_EVIDENCE")
    # how those vectors are made: each text embedded alone; or pooled from the chunk's own pass
    # (local MiniLM): the answer's sentences only ("pooled_sentences") or all ("pooled")
    evidence_vectors: Literal["embedded", "pooled_sentences", "pooled"] = Field(
        "embedded", alias="EVIDENCE_VECTORS"
    )
    # when the vectors embedded alone are made: for every chunk of a READY document, in the
    # background ("background"), or only for the chunks a question reaches, on that question, and
    # stored for the next one ("on_demand": nothing embedded for chunks nobody asks about)
    evidence_warming: Literal["background", "on_demand"] = Field("background", alias="EVIDENCE_WARMING")
    # with "background": a document of at most this many chunks gets them before READY, in its own pass
    evidence_inline_chunks: int = Field(16, ge=0, alias="EVIDENCE_INLINE_CHUNKS")
    chat_mode: Literal["rag", "tools"] = Field("rag", alias="CHAT_MODE")
    reader: Literal["off", "on"] = Field("off", alias="READER")  # the extractive reader, docs/reader.md
    reader_threshold: float | None = Field(None, alias="READER_THRESHOLD")  # margin cut, docs/reader.md

    # --- backends ----------------------------------------------------------------------------
    backend: Literal["local", "aws"] = Field("local", alias="RAGCHAT_BACKEND")
    data_dir: Path = Field(Path(".ragchat"), alias="RAGCHAT_DATA_DIR")
    embedder: Literal["minilm", "titan", "cohere"] | None = Field(None, alias="RAGCHAT_EMBEDDER")
    chat_model: Literal["auto", "extractive", "anthropic", "bedrock"] = Field(
        "auto", alias="RAGCHAT_CHAT_MODEL"
    )
    # local model cache (the exported ONNX MiniLM), per user: default the user's cache + /ragchat/models
    model_dir: Path | None = Field(None, alias="RAGCHAT_MODEL_DIR")
    xdg_cache_home: Path | None = Field(None, alias="XDG_CACHE_HOME")
    # the local MiniLM's weights: fp32 or int8 (1.32x faster, one grounding answer fewer: not the
    # default; docs/benchmarks.md); re-ingest after changing it
    embedder_precision: Literal["fp32", "int8"] = Field("fp32", alias="EMBEDDER_PRECISION")

    # --- retrieval ---------------------------------------------------------------------------
    top_k: int = Field(3, alias="TOP_K", ge=1, le=50)
    adaptive_top_k: int = Field(5, alias="ADAPTIVE_TOP_K", ge=1, le=50)
    adaptive_spread: float = Field(0.05, alias="ADAPTIVE_SPREAD", ge=0.0, le=2.0)
    context_chars: int = Field(1200, alias="CONTEXT_CHARS", ge=100)
    chunk_size: int = Field(1000, alias="CHUNK_SIZE", ge=100)
    chunk_overlap: int = Field(100, alias="CHUNK_OVERLAP", ge=0)
    # Embed each chunk as "title — nearest heading" + newline + text (re-ingest after changing it)
    chunk_headers: bool = Field(True, alias="CHUNK_HEADERS")

    # --- limits ------------------------------------------------------------------------------
    max_body_bytes: int = Field(25 * MiB, alias="MAX_BODY_BYTES", ge=1024)  # a body: size * 1.2 <= it
    max_message_chars: int = Field(4000, alias="MAX_MESSAGE_CHARS", ge=1)
    rate_limit_requests: int = Field(60, alias="RATE_LIMIT_REQUESTS", ge=1)
    rate_limit_window_s: int = Field(300, alias="RATE_LIMIT_WINDOW_SECONDS", ge=1)
    # Per-route overrides (unset: the two above) and the per-IP limit (unset: the route's limit).
    rate_limit_chat_requests: int | None = Field(None, alias="RATE_LIMIT_CHAT_REQUESTS", ge=1)
    rate_limit_chat_window_s: int | None = Field(None, alias="RATE_LIMIT_CHAT_WINDOW_SECONDS", ge=1)
    rate_limit_ask_requests: int | None = Field(None, alias="RATE_LIMIT_ASK_REQUESTS", ge=1)
    rate_limit_ask_window_s: int | None = Field(None, alias="RATE_LIMIT_ASK_WINDOW_SECONDS", ge=1)
    rate_limit_notes_requests: int | None = Field(None, alias="RATE_LIMIT_NOTES_REQUESTS", ge=1)
    rate_limit_notes_window_s: int | None = Field(None, alias="RATE_LIMIT_NOTES_WINDOW_SECONDS", ge=1)
    rate_limit_uploads_requests: int | None = Field(None, alias="RATE_LIMIT_UPLOADS_REQUESTS", ge=1)
    rate_limit_uploads_window_s: int | None = Field(None, alias="RATE_LIMIT_UPLOADS_WINDOW_SECONDS", ge=1)
    # the local upload receiver (POST /uploads/local/<token>): per IP only (the grant has no principal)
    rate_limit_receiver_requests: int | None = Field(None, alias="RATE_LIMIT_RECEIVER_REQUESTS", ge=1)
    rate_limit_receiver_window_s: int | None = Field(None, alias="RATE_LIMIT_RECEIVER_WINDOW_SECONDS", ge=1)
    rate_limit_conversations_requests: int | None = Field(
        None, alias="RATE_LIMIT_CONVERSATIONS_REQUESTS", ge=1
    )
    rate_limit_conversations_window_s: int | None = Field(
        None, alias="RATE_LIMIT_CONVERSATIONS_WINDOW_SECONDS", ge=1
    )
    rate_limit_ip_requests: int | None = Field(None, alias="RATE_LIMIT_IP_REQUESTS", ge=1)
    # Chat turns per owner across all their conversations (unset: the chat limit), in the chat window.
    rate_limit_chat_owner_requests: int | None = Field(None, alias="RATE_LIMIT_CHAT_OWNER_REQUESTS", ge=1)
    # Per-owner ingestion ceilings over a sliding day, whatever the door (API, uploads, S3 trigger).
    ingest_documents_per_day: int = Field(1000, alias="INGEST_DOCUMENTS_PER_DAY", ge=1)
    ingest_bytes_per_day: int = Field(2 * 1024 * MiB, alias="INGEST_BYTES_PER_DAY", ge=1)
    # Direct uploads (POST /uploads): the largest file a presigned POST accepts, how long it is valid
    max_upload_bytes: int = Field(500 * MiB, alias="MAX_UPLOAD_BYTES", ge=1)
    # PDFs cost far more CPU per byte than text (a dense 25 MB PDF: 50 s, bench/results/memory.md)
    max_pdf_bytes: int = Field(20 * MiB, alias="MAX_PDF_BYTES", ge=1)
    ocr: str = Field("eng", alias="OCR", pattern=r"^(off|[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*)$")
    upload_url_expires_s: int = Field(900, alias="UPLOAD_URL_EXPIRES_SECONDS", ge=60, le=7 * 24 * 3600)
    # Reading an upload: CPU s; in a child memory, wall s; runs interrupted before FAILED (security.md)
    parse_isolation: Literal["process", "off"] = Field("process", alias="PARSE_ISOLATION")
    parse_cpu_s: float = Field(60.0, alias="PARSE_CPU_SECONDS", gt=0, le=3600)
    parse_memory_mb: int = Field(4096, alias="PARSE_MEMORY_MB", ge=256)
    parse_wall_s: float = Field(180.0, alias="PARSE_WALL_SECONDS", gt=0, le=4 * 3600)
    ingest_max_attempts: int = Field(3, alias="INGEST_MAX_ATTEMPTS", ge=1, le=100)
    # CPU of the PDF check before the 202 (a child's, locally); ceilings of what one document becomes
    pdf_check_cpu_s: float = Field(2.0, alias="PDF_CHECK_CPU_SECONDS", gt=0, le=600)
    max_extracted_chars: int = Field(40_000_000, alias="MAX_EXTRACTED_CHARS", ge=1000)
    max_text_expansion: float = Field(200.0, alias="MAX_TEXT_EXPANSION", ge=0)
    max_chunks_per_document: int = Field(50_000, alias="MAX_CHUNKS_PER_DOCUMENT", ge=1)
    finalize_step_chunks: int = Field(1000, alias="FINALIZE_STEP_CHUNKS", ge=1)  # chunks per finalize step
    max_workspace_bytes: int = Field(0, alias="MAX_WORKSPACE_BYTES", ge=0)  # 0: no storage ceiling

    # --- auth (local) --------------------------------------------------------------------------
    api_token: str | None = Field(None, alias="RAGCHAT_API_TOKEN")
    local_principal: str = Field("local", alias="RAGCHAT_LOCAL_USER")
    users_file: Path | None = Field(None, alias="RAGCHAT_USERS_FILE")  # several users (serving/users.py)
    # --- the local server's browser rules (``ragchat.serving.site``; comma-separated lists) ---------
    # Host names served besides localhost, 127.0.0.1, [::1] and the bound address ("*": any).
    allowed_hosts: str = Field("", alias="RAGCHAT_ALLOWED_HOSTS")
    # Origins (scheme://host:port) other than the server's own that may call it from a browser.
    cors_origins: str = Field("", alias="RAGCHAT_CORS_ORIGINS")
    # Proxies whose X-Forwarded-For is believed (addresses or CIDR ranges); unset: the socket's peer.
    trusted_proxies: str = Field("", alias="RAGCHAT_TRUSTED_PROXIES")
    # --- auth (HTML pages in the cloud) ----------------------------------------------------------
    # The Cognito user-pool app client the pages sign in with (template: !Ref UserPoolClient); with it
    # set, the pages call Cognito's InitiateAuth in AWS_REGION (see ``page_auth``).
    cognito_client_id: str | None = Field(None, alias="COGNITO_CLIENT_ID", pattern=r"^[\w+]{1,128}$")
    cognito_user_pool_id: str | None = Field(None, alias="COGNITO_USER_POOL_ID", pattern=r"^[\w-]{1,55}$")
    # chat_stream function: the port the Lambda Web Adapter forwards to (ragchat.lambda_web)
    lwa_port: int = Field(8080, alias="AWS_LWA_PORT", ge=1, le=65535)
    # --- the HTTP server of ``ragchat serve`` and the chat_stream function (``serving.asgi.Limits``)
    serve_max_concurrency: int = Field(128, alias="SERVE_MAX_CONCURRENCY", ge=1, le=10_000)
    serve_header_timeout_s: float = Field(10.0, alias="SERVE_HEADER_TIMEOUT_SECONDS", gt=0, le=3600)
    serve_body_timeout_s: float = Field(30.0, alias="SERVE_BODY_TIMEOUT_SECONDS", gt=0, le=3600)
    serve_keepalive_s: float = Field(5.0, alias="SERVE_KEEPALIVE_SECONDS", gt=0, le=3600)
    serve_backlog: int = Field(2048, alias="SERVE_BACKLOG", ge=1, le=65535)
    # open connections at once, overall (never more than the descriptor limit leaves) and per client
    # address among those that carried an authenticated request (docs/security.md, "Connection floods")
    serve_max_connections: int = Field(1024, alias="SERVE_MAX_CONNECTIONS", ge=1, le=1_000_000)
    serve_max_connections_per_ip: int = Field(256, alias="SERVE_MAX_CONNECTIONS_PER_IP", ge=1, le=1_000_000)

    # --- chat models -----------------------------------------------------------------------------
    anthropic_api_key: str | None = Field(None, alias="ANTHROPIC_API_KEY", repr=False)
    anthropic_secret_name: str | None = Field(None, alias="ANTHROPIC_SECRET_NAME")
    anthropic_model: str = Field(DEFAULT_ANTHROPIC_MODEL, alias="ANTHROPIC_MODEL")
    # A Claude inference-profile id (``us.anthropic.claude-haiku-5-5``); unset: Claude Haiku 5.5
    # through the profile of AWS_REGION's geography (``default_bedrock_chat_model``), as the
    # template's BedrockChatModelId does.
    bedrock_chat_model_id: str = Field("", alias="BEDROCK_CHAT_MODEL_ID")
    # Thinking and effort of the models that think adaptively (Claude 4.6 and later; docs/chat.md,
    # "Models"): off and low by default, chosen for the first token (bench/bench_thinking.py: Haiku
    # 5.5's own default, adaptive at medium, thinks before the first word of most answers). A model
    # that always thinks (Opus 5.5) thinks at MODEL_EFFORT whatever MODEL_THINKING says.
    model_thinking: Literal["off", "adaptive"] = Field("off", alias="MODEL_THINKING")
    model_effort: Literal["low", "medium", "high"] = Field("low", alias="MODEL_EFFORT")
    # Model-call deadlines (issue 8): a hung model costs a turn at most the budget, then the fallback.
    # The budget must fit inside the function timeout with margin (29 s behind API Gateway).
    model_connect_timeout_s: float = Field(3.0, alias="MODEL_CONNECT_TIMEOUT_SECONDS", gt=0, le=60)
    model_first_token_timeout_s: float = Field(10.0, alias="MODEL_FIRST_TOKEN_TIMEOUT_SECONDS", gt=0, le=120)
    model_turn_budget_s: float = Field(15.0, alias="MODEL_TURN_BUDGET_SECONDS", gt=0, le=120)
    # A retried messageId whose first attempt stored the question but no answer this long ago is
    # presumed dead (e.g. its process was killed): the retry answers in its place (issue 8).
    idempotency_takeover_s: float = Field(60.0, alias="IDEMPOTENCY_TAKEOVER_SECONDS", gt=0, le=3600)
    personas_file: Path | None = Field(None, alias="RAGCHAT_PERSONAS_FILE")

    # --- AWS -------------------------------------------------------------------------------------
    aws_region: str = Field("us-east-1", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION"))
    documents_table: str | None = Field(None, alias="DOCUMENTS_TABLE")
    conversations_table: str | None = Field(None, alias="CONVERSATIONS_TABLE")
    counters_table: str | None = Field(None, alias="COUNTERS_TABLE")
    documents_bucket: str | None = Field(None, alias="DOCUMENTS_BUCKET")
    state_machine_arn: str | None = Field(None, alias="STATE_MACHINE_ARN")
    opensearch_endpoint: str | None = Field(None, alias="OPENSEARCH_ENDPOINT")
    # Where vectors live: ``opensearch`` (default with RAGCHAT_BACKEND=aws; needs OPENSEARCH_ENDPOINT),
    # ``s3vectors`` (Amazon S3 Vectors; needs S3VECTORS_BUCKET) or ``sqlite`` (the embedded index in
    # RAGCHAT_DATA_DIR; default locally). Never chosen by fallback.
    vector_index: Literal["opensearch", "s3vectors", "sqlite"] | None = Field(
        None, alias="RAGCHAT_VECTOR_INDEX"
    )
    opensearch_service: Literal["aoss", "es"] = Field("aoss", alias="OPENSEARCH_SERVICE")
    opensearch_index: str = Field("ragchat-notes", alias="OPENSEARCH_INDEX")
    s3vectors_bucket: str | None = Field(None, alias="S3VECTORS_BUCKET")
    s3vectors_index: str = Field("ragchat-notes", alias="S3VECTORS_INDEX")
    titan_dimension: Literal[256, 512, 1024] = Field(1024, alias="TITAN_DIMENSION")
    cohere_model_id: str = Field("cohere.embed-english-v3", alias="COHERE_MODEL_ID")
    embed_concurrency: int = Field(8, alias="EMBED_CONCURRENCY", ge=1, le=64)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("CHUNK_OVERLAP must be smaller than CHUNK_SIZE")
        if not self.bedrock_chat_model_id.strip():
            self.bedrock_chat_model_id = default_bedrock_chat_model(self.aws_region)
        missing = self.missing()
        if missing:
            raise ValueError(f"{', '.join(missing)} must be set ({self._why(missing)})")
        self._check_bucket()
        if self.cognito_client_id and not AWS_REGION_PATTERN.fullmatch(self.aws_region):
            raise ValueError(
                f"AWS_REGION must be an AWS region such as eu-west-1 when COGNITO_CLIENT_ID is set "
                f"(got {self.aws_region!r})"
            )
        return self

    def _check_bucket(self) -> None:
        """The documents bucket becomes an origin in the pages' CSP (``documents_bucket_origin``)."""
        if self.backend != "aws" or not self.documents_bucket:
            return
        if not S3_BUCKET_PATTERN.fullmatch(self.documents_bucket):
            raise ValueError(
                "DOCUMENTS_BUCKET must be an S3 bucket name (lowercase letters, digits, '.' and '-') "
                f"(got {self.documents_bucket!r})"
            )
        if not AWS_REGION_PATTERN.fullmatch(self.aws_region):
            raise ValueError(
                f"AWS_REGION must be an AWS region such as eu-west-1 with RAGCHAT_BACKEND=aws "
                f"(got {self.aws_region!r})"
            )

    @property
    def documents_bucket_origin(self) -> str | None:
        """Where a browser sends a direct upload on AWS: the documents bucket's regional
        virtual-host origin, the URL ``adapters/aws/s3.py`` presigns POSTs for. ``None`` locally
        (uploads go to the server itself)."""
        if self.backend != "aws" or not self.documents_bucket:
            return None
        return f"https://{self.documents_bucket}.s3.{self.aws_region}.amazonaws.com"

    def rate_limit(self, route: RateLimitedRoute) -> tuple[int, int]:
        """(requests, window seconds) for ``route``: its own ``RATE_LIMIT_<ROUTE>_*`` settings, each
        defaulting to ``RATE_LIMIT_REQUESTS`` / ``RATE_LIMIT_WINDOW_SECONDS``."""
        requests: int | None = getattr(self, f"rate_limit_{route}_requests")
        window_s: int | None = getattr(self, f"rate_limit_{route}_window_s")
        return requests or self.rate_limit_requests, window_s or self.rate_limit_window_s

    def limit_rules(self) -> dict[str, tuple[int, int]]:
        """Every limit of ``ragchat.services.limits.RequestLimiter`` as route → (requests, window
        seconds): the routes' rate limits and the daily ingestion ceilings; none when
        ``ENABLE_RATE_LIMITING`` is off."""
        if not self.enable_rate_limiting:
            return {}
        rules: dict[str, tuple[int, int]] = {route: self.rate_limit(route) for route in RATE_LIMITED_ROUTES}
        chat_requests, chat_window = rules["chat"]
        rules["chat:owner"] = (self.rate_limit_chat_owner_requests or chat_requests, chat_window)
        rules["ingest_documents"] = (self.ingest_documents_per_day, DAY_S)
        rules["ingest_bytes"] = (self.ingest_bytes_per_day, DAY_S)
        return rules

    def missing(self, *parts: Part) -> list[str]:
        """The unset variables the chosen backends need (plus those of ``parts``, e.g. ``launcher``:
        only the functions that start ingestion get STATE_MACHINE_ARN)."""
        needed: list[tuple[str, object]] = []
        if self.backend == "aws":
            needed += [
                ("DOCUMENTS_TABLE", self.documents_table),
                ("CONVERSATIONS_TABLE", self.conversations_table),
                ("COUNTERS_TABLE", self.counters_table),
                ("DOCUMENTS_BUCKET", self.documents_bucket),
            ]
            if "launcher" in parts:
                needed.append(("STATE_MACHINE_ARN", self.state_machine_arn))
        if self.vector_index_kind == "opensearch":
            needed.append(("OPENSEARCH_ENDPOINT", self.opensearch_endpoint))
        if self.vector_index_kind == "s3vectors":
            needed.append(("S3VECTORS_BUCKET", self.s3vectors_bucket))
        if self.chat_model == "anthropic":
            needed.append(("ANTHROPIC_API_KEY", self.anthropic_api_key or self.anthropic_secret_name))
        return [name for name, value in needed if not value]

    def require(self, *parts: Part) -> None:
        """Raise ``ConfigError`` naming every unset variable that the backends and ``parts`` need."""
        missing = self.missing(*parts)
        if missing:
            raise ConfigError(
                f"Invalid configuration — {', '.join(missing)} must be set ({self._why(missing)})"
            )

    def _why(self, missing: list[str]) -> str:
        reasons = []
        if self.backend == "aws" and set(missing) - _NOT_ONLY_AWS:
            reasons.append("RAGCHAT_BACKEND=aws")
        if "OPENSEARCH_ENDPOINT" in missing:
            reasons.append("the vector index is OpenSearch; RAGCHAT_VECTOR_INDEX=sqlite keeps it embedded")
        if "S3VECTORS_BUCKET" in missing:
            reasons.append("RAGCHAT_VECTOR_INDEX=s3vectors")
        if "ANTHROPIC_API_KEY" in missing:
            reasons.append("RAGCHAT_CHAT_MODEL=anthropic; or set ANTHROPIC_SECRET_NAME")
        return "; ".join(reasons)

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        import ipaddress

        for part in _csv(value):
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not an IP address or CIDR range") from None
        return value

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        for part in _csv(value):
            if part != "*" and not re.fullmatch(r"https?://[^/\s]+", part.rstrip("/")):
                raise ValueError(f"{part!r} is not an origin (scheme://host[:port])")
        return value

    @field_validator(
        "cognito_client_id", "cognito_user_pool_id", "model_dir", "xdg_cache_home", mode="before"
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    # --- derived values ----------------------------------------------------------------------------
    @property
    def embedder_kind(self) -> str:
        return self.embedder or ("titan" if self.backend == "aws" else "minilm")

    @property
    def vector_index_kind(self) -> Literal["opensearch", "s3vectors", "sqlite"]:
        return self.vector_index or ("opensearch" if self.backend == "aws" else "sqlite")

    @property
    def embedding_model_id(self) -> str:
        return {
            "minilm": "all-MiniLM-L6-v2",
            "titan": "amazon.titan-embed-text-v2:0",
            "cohere": self.cohere_model_id,
        }[self.embedder_kind]

    @property
    def calibration_file(self) -> Path:
        """Local calibration (``ragchat calibrate`` without ``ANSWERABILITY_PARAMETER``)."""
        return self.data_dir / "answerability.json"

    @property
    def similarity_threshold(self) -> float:
        if self.min_similarity is not None:
            return self.min_similarity
        return DEFAULT_MIN_SIMILARITY.get(self.embedding_model_id, 0.35)

    @property
    def models_path(self) -> Path:
        """Where the prepared embedding model is cached: ``RAGCHAT_MODEL_DIR``, else the per-user
        cache (``<user cache dir>/ragchat/models``), the same from any working directory and for any
        ``RAGCHAT_DATA_DIR``."""
        if self.model_dir is not None:
            return self.model_dir.expanduser().absolute()
        return user_cache_dir(self.xdg_cache_home) / "ragchat" / "models"

    @property
    def page_auth(self) -> Literal["cognito", "token", "none"]:
        """How the HTML pages sign in: ``cognito`` (email + password against the user pool's app
        client, in the cloud), ``token`` (the local ``RAGCHAT_API_TOKEN``), ``none`` (local, open)."""
        if self.cognito_client_id:
            return "cognito"
        return "token" if self.api_token else "none"

    @property
    def allowed_host_list(self) -> list[str]:
        return _csv(self.allowed_hosts)

    @property
    def cors_origin_list(self) -> list[str]:
        return _csv(self.cors_origins)

    @property
    def trusted_proxy_list(self) -> list[str]:
        return _csv(self.trusted_proxies)

    @property
    def body_limit_bytes(self) -> int:
        """The largest raw body accepted: ``size * 1.2 <= max_body_bytes``, and on the AWS backend no
        more than a Lambda invocation carries (``LAMBDA_DIRECT_BODY_BYTES``)."""
        limit = int(self.max_body_bytes / 1.2)
        return min(limit, LAMBDA_DIRECT_BODY_BYTES) if self.backend == "aws" else limit


def _csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def user_cache_dir(xdg_cache_home: Path | None = None) -> Path:
    """The per-user cache folder: ``$XDG_CACHE_HOME`` (when absolute), else ``~/Library/Caches`` on
    macOS, ``%LOCALAPPDATA%`` on Windows and ``~/.cache`` elsewhere (the XDG base-directory rule)."""
    if xdg_cache_home is not None and xdg_cache_home.is_absolute():
        return xdg_cache_home
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else Path.home() / "AppData" / "Local"
    return Path.home() / ".cache"


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read settings from ``env`` (default: the process environment). Raises ``ConfigError`` naming
    the bad variable."""
    try:
        if env is None:
            return Settings()
        # Only the given mapping: tests and tools pass their own environment.
        return Settings.model_validate({k: v for k, v in env.items()})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "configuration"
            problems.append(f"{_env_name(loc)}: {err['msg']}")
        raise ConfigError("Invalid configuration — " + "; ".join(problems)) from None


def _env_name(field_name: str) -> str:
    info = Settings.model_fields.get(field_name)
    if info is not None and isinstance(info.alias, str):
        return info.alias
    return field_name.upper()
