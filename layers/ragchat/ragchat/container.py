"""Composition root: the one place that reads settings and wires adapters into services.

Everything is built lazily on first use (``cached_property``), so a Lambda function pays only for
the adapters its routes touch, and nothing connects or imports a heavy SDK at import time. What must
be right for the process to be useful is checked when the container is made (start-up): the settings
the chosen backends need (``Settings``) and the persona file (``RAGCHAT_PERSONAS_FILE``).
``close()`` closes what the container opened (SQLite, SDK clients, the inline ingestion worker).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragchat.config import ConfigError, Part, RateLimitedRoute, Settings, load_settings
from ragchat.domain.clock import Clock, system_clock

if TYPE_CHECKING:
    from boto3.session import Session

    from ragchat.adapters.local.sqlite_store import SqliteDatabase
    from ragchat.ports import (
        BlobStore,
        ChatModel,
        ConversationStore,
        Counters,
        DocumentStore,
        Embedder,
        EvidenceStore,
        IngestionLauncher,
        Metrics,
        VectorIndex,
    )
    from ragchat.services.answering import AskService
    from ragchat.services.chat import ChatService
    from ragchat.services.documents import DocumentService
    from ragchat.services.evidence import EvidenceWarmer
    from ragchat.services.ingestion import IngestionService, IngestSteps
    from ragchat.services.limits import RequestLimiter
    from ragchat.services.retrieval import PassageVectors, Retriever

logger = logging.getLogger("ragchat.container")

ContainerFactory = Callable[[], "Container"]


class Container:
    """Holds the settings and builds each port/service once. Tests pass overrides
    (``Container(settings, embedder=FakeEmbedder())``) instead of patching globals.

    Entry points build one lazily through :class:`LazyContainer` (tests hand them a factory of
    their own container instead of patching a module global)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        clock: Clock = system_clock,
        personas: Mapping[str, str] | None = None,
        **overrides: object,
    ):
        self.settings = settings or load_settings()
        self.clock = clock
        self.personas: dict[str, str] = (
            dict(personas) if personas is not None else load_personas(self.settings.personas_file)
        )
        self._closers: list[Callable[[], object]] = []
        for name, value in overrides.items():
            if not isinstance(getattr(type(self), name, None), cached_property):
                raise TypeError(f"Container has no part {name!r} to override")
            # cached_property stores in __dict__: setting it first makes the override win.
            self.__dict__[name] = value

    def close(self) -> None:
        """Close what this container opened, newest first (overrides belong to whoever made them).
        Safe to call twice."""
        closers, self._closers = self._closers, []
        for close in reversed(closers):
            try:
                close()
            except Exception:  # closing must not hide the error that made us close
                logger.warning("container.close: %r failed", close, exc_info=True)

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _opened(self, close: Callable[[], object]) -> None:
        self._closers.append(close)

    # ------------------------------------------------------------------ ports
    @cached_property
    def _sqlite(self) -> SqliteDatabase:
        from ragchat.adapters.local.sqlite_store import SqliteDatabase

        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        db = SqliteDatabase(self.settings.data_dir / "ragchat.db")
        self._opened(db.close)
        return db

    @cached_property
    def _boto_session(self) -> Session:
        import boto3

        return boto3.session.Session(region_name=self.settings.aws_region)

    def _client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client that ``close()`` closes."""
        client = self._boto_session.client(service, **kwargs)  # type: ignore[call-overload]
        self._opened(client.close)
        return client

    @cached_property
    def _dynamodb(self) -> Any:
        return self._client("dynamodb")

    @cached_property
    def documents(self) -> DocumentStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoDocumentStore

            return DynamoDocumentStore(
                _required(self.settings.documents_table, "DOCUMENTS_TABLE"), self._dynamodb, clock=self.clock
            )
        from ragchat.adapters.local.sqlite_store import SqliteDocumentStore

        return SqliteDocumentStore(self._sqlite, clock=self.clock)

    @cached_property
    def conversations(self) -> ConversationStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoConversationStore

            return DynamoConversationStore(
                _required(self.settings.conversations_table, "CONVERSATIONS_TABLE"),
                self._dynamodb,
                clock=self.clock,
            )
        from ragchat.adapters.local.sqlite_store import SqliteConversationStore

        return SqliteConversationStore(self._sqlite, clock=self.clock)

    @cached_property
    def counters(self) -> Counters:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoCounters

            return DynamoCounters(_required(self.settings.counters_table, "COUNTERS_TABLE"), self._dynamodb)
        from ragchat.adapters.local.sqlite_store import SqliteCounters

        return SqliteCounters(self._sqlite)

    @cached_property
    def blobs(self) -> BlobStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.s3 import S3_CLIENT_CONFIG, S3BlobStore

            return S3BlobStore(
                _required(self.settings.documents_bucket, "DOCUMENTS_BUCKET"),
                self._client("s3", config=S3_CLIENT_CONFIG),
            )
        from ragchat.adapters.local.files import FileBlobStore

        return FileBlobStore(self.settings.data_dir / "blobs")

    @cached_property
    def embedder(self) -> Embedder:
        kind = self.settings.embedder_kind
        if kind in ("titan", "cohere"):
            from botocore.config import Config

            # botocore retries off (the adapter backs off with jitter itself); one pooled connection
            # per concurrent call.
            bedrock = self._client(
                "bedrock-runtime",
                config=Config(
                    retries={"total_max_attempts": 1},
                    max_pool_connections=max(10, self.settings.embed_concurrency),
                ),
            )
        if kind == "titan":
            from ragchat.adapters.aws.bedrock import TitanEmbedder

            return TitanEmbedder(
                bedrock,
                dimension=self.settings.titan_dimension,
                concurrency=self.settings.embed_concurrency,
            )
        if kind == "cohere":
            from ragchat.adapters.aws.bedrock import CohereEmbedder

            return CohereEmbedder(
                bedrock,
                model_id=self.settings.cohere_model_id,
                concurrency=self.settings.embed_concurrency,
            )
        from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder.from_cache(self.settings.models_path)

    @cached_property
    def index(self) -> VectorIndex:
        if self.settings.vector_index_kind == "s3vectors":
            from ragchat.adapters.aws.s3vectors import S3VectorsIndex

            return S3VectorsIndex(
                self._client("s3vectors"),
                _required(self.settings.s3vectors_bucket, "S3VECTORS_BUCKET"),
                self.settings.s3vectors_index,
                dimension=self.embedder.dimension,
            )
        if self.settings.vector_index_kind == "opensearch":
            from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex

            index = OpenSearchVectorIndex.connect(
                endpoint=_required(self.settings.opensearch_endpoint, "OPENSEARCH_ENDPOINT"),
                index=self.settings.opensearch_index,
                service=self.settings.opensearch_service,
                region=self.settings.aws_region,
                dimension=self.embedder.dimension,
            )
            self._opened(lambda: _close_client(index))
            return index
        from ragchat.adapters.local.vector_index import LocalVectorIndex

        # vectors live in the same SQLite file as everything else (tables ``vectors``/``vectors_fts``)
        return LocalVectorIndex(self._sqlite, dimension=self.embedder.dimension)

    @cached_property
    def launcher(self) -> IngestionLauncher:
        if self.settings.backend == "aws":
            # never an in-process thread pool inside a Lambda: the state machine or a start-up error
            from ragchat.adapters.aws.stepfunctions import StepFunctionsLauncher

            arn = _required(self.settings.state_machine_arn, "STATE_MACHINE_ARN")
            return StepFunctionsLauncher(arn, self._client("stepfunctions"))
        from ragchat.adapters.local.pipeline import InlineIngestionLauncher

        launcher = InlineIngestionLauncher(lambda: self.ingest_steps, warmer=self.evidence_warmer)
        self._opened(launcher.close)
        return launcher

    @cached_property
    def evidence_store(self) -> EvidenceStore | None:
        """Precomputed passage and sentence vectors (local SQLite index only; ``None`` elsewhere or
        with ``PRECOMPUTE_EVIDENCE=false``)."""
        if not self.settings.precompute_evidence or self.settings.vector_index_kind != "sqlite":
            return None
        from ragchat.adapters.local.sqlite_store.evidence import SqliteEvidenceStore

        return SqliteEvidenceStore(self._sqlite, getattr(self.embedder, "model_id", ""))

    @cached_property
    def evidence_warmer(self) -> EvidenceWarmer | None:
        """Embeds READY documents' passages (calibrated embedder) and sentences (extractive by meaning)."""
        store = self.evidence_store
        if store is None:
            return None
        from ragchat.domain.answerability import CALIBRATED
        from ragchat.services.evidence import EvidenceWarmer

        model_id = getattr(self.embedder, "model_id", "")
        passages = self.settings.answerability == "calibrated" and model_id in CALIBRATED
        sentences = self._extractive_by_meaning()
        if not (passages or sentences):
            return None
        return EvidenceWarmer(self.documents, store, self.embedder, passages=passages, sentences=sentences)

    def _extractive_by_meaning(self) -> bool:
        """Whether answers are extractive by meaning (as built or given, else as it would be built)."""
        from ragchat.adapters.local.extractive import ExtractiveChatModel

        if "chat_model" in self.__dict__:
            model = self.__dict__["chat_model"]
            return isinstance(model, ExtractiveChatModel) and model.relevance_vectors is not None
        return self._chat_choice() == "extractive" and self._sentences_by_meaning()

    def _chat_choice(self) -> str:
        """``RAGCHAT_CHAT_MODEL`` with ``auto`` resolved: Claude when a key is configured."""
        choice = self.settings.chat_model
        if choice == "auto":
            return "anthropic" if self._anthropic_key() else "extractive"
        return choice

    def _sentences_by_meaning(self) -> bool:
        """Local embedder only (a Bedrock one would bill every answer's sentences), unless ``words``."""
        return self.settings.embedder_kind == "minilm" and self.settings.extractive_sentences == "meaning"

    @cached_property
    def chat_model(self) -> ChatModel:
        choice = self._chat_choice()
        if choice == "anthropic":
            from ragchat.adapters.aws.anthropic_model import AnthropicChatModel

            key = self._anthropic_key()
            if not key:
                raise ConfigError("ANTHROPIC_API_KEY: required when RAGCHAT_CHAT_MODEL=anthropic")
            model = AnthropicChatModel(
                api_key=key,
                model=self.settings.anthropic_model,
                connect_timeout=self.settings.model_connect_timeout_s,
                first_token_timeout=self.settings.model_first_token_timeout_s,
            )
            self._opened(lambda: _close_client(model))
            return model
        if choice == "bedrock":
            from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel, client_config

            # botocore retries off: the adapter applies SPEC §7's policy (2 retries, 200/400 ms).
            config = client_config(
                connect_timeout=self.settings.model_connect_timeout_s,
                first_token_timeout=self.settings.model_first_token_timeout_s,
            )
            client = self._client("bedrock-runtime", config=config)
            return BedrockConverseChatModel(
                client,
                model_id=self.settings.bedrock_chat_model_id,
                first_token_timeout=self.settings.model_first_token_timeout_s,
            )
        from ragchat.adapters.local.extractive import ExtractiveChatModel

        if not self._sentences_by_meaning():
            return ExtractiveChatModel()
        # Sentences by meaning with the local embedder, through the retriever's passage cache (what
        # the answerability decision embedded is not embedded twice).
        return ExtractiveChatModel(self.passage_vectors, query_embedder=self.embedder)

    def _anthropic_key(self) -> str | None:
        if self.settings.anthropic_api_key:
            return self.settings.anthropic_api_key
        if self.settings.anthropic_secret_name:
            from aws_lambda_powertools.utilities import parameters

            value = parameters.get_secret(self.settings.anthropic_secret_name, max_age=300)
            return str(value) if value else None
        return None

    @cached_property
    def metrics(self) -> Metrics:
        """CloudWatch EMF on Lambda, nothing elsewhere (``ragchat.observability``)."""
        from ragchat.observability import metrics_port

        return metrics_port()

    # ------------------------------------------------------------------ services
    @cached_property
    def passage_vectors(self) -> PassageVectors:
        """Embeddings of passages and sentences by text, shared by the retriever's answerability
        decision and the extractive answerer."""
        from ragchat.services.retrieval import PassageVectors

        return PassageVectors(self.embedder, store=self.evidence_store)

    @cached_property
    def retriever(self) -> Retriever:
        from ragchat.services.retrieval import Retriever
        from ragchat.services.titles import DocumentTitles

        return Retriever(
            self.embedder,
            self.index,
            self.settings,
            metrics=self.metrics,
            titles=DocumentTitles(self.documents),
            passage_vectors=self.passage_vectors,
        )

    @cached_property
    def ingestion(self) -> IngestionService:
        from ragchat.services.ingestion import IngestionService

        return IngestionService(self.documents, self.blobs, self.launcher, self.settings)

    @cached_property
    def ingest_steps(self) -> IngestSteps:
        from ragchat.services.ingestion import IngestSteps

        return IngestSteps(
            self.documents,
            self.blobs,
            self.embedder,
            self.index,
            self.settings,
            self.clock,
            metrics=self.metrics,
        )

    @cached_property
    def document_service(self) -> DocumentService:
        from ragchat.services.documents import DocumentService

        return DocumentService(self.documents, self.index, self.blobs)

    @cached_property
    def limiter(self) -> RequestLimiter:
        """Rate limits of the costly routes but chat (``ENABLE_RATE_LIMITING``; off: passes all)."""
        from ragchat.domain.limits import Rule
        from ragchat.services.limits import RequestLimiter

        s = self.settings
        routes: tuple[RateLimitedRoute, ...] = ("ask", "notes", "uploads") if s.enable_rate_limiting else ()
        rules: dict[str, Rule] = {route: Rule(*s.rate_limit(route)) for route in routes}
        return RequestLimiter(self.counters, self.clock, rules, ip_requests=s.rate_limit_ip_requests)

    @cached_property
    def ask(self) -> AskService:
        from ragchat.services.answering import AskService

        return AskService(
            self.retriever, self.chat_model, self.settings, metrics=self.metrics, documents=self.documents
        )

    @cached_property
    def chat(self) -> ChatService:
        from ragchat.adapters.local.extractive import ExtractiveChatModel
        from ragchat.services.chat import ChatService, ExtractiveSummarizer

        # No LLM behind the extractive answerer: its history summaries are extractive too.
        extractive = isinstance(self.chat_model, ExtractiveChatModel)
        return ChatService(
            conversations=self.conversations,
            counters=self.counters,
            retriever=self.retriever,
            model=self.chat_model,
            documents=self.documents,
            settings=self.settings,
            clock=self.clock,
            personas=dict(self.personas),
            summarizer=ExtractiveSummarizer() if extractive else None,
            metrics=self.metrics,
        )


def _required(value: str | None, variable: str) -> str:
    """A setting the part being built needs (``Settings`` checks them at start-up; this keeps a
    hand-made ``Settings`` honest too, and survives ``python -O`` unlike ``assert``)."""
    if not value:
        raise ConfigError(f"{variable} must be set for this part of the wiring")
    return value


def _close_client(owner: object) -> None:
    """Close an adapter's lazily made SDK client, if it made one."""
    client = getattr(owner, "_client", None)
    close = getattr(client, "close", None)
    if callable(close):
        close()


def load_personas(path: Path | None) -> dict[str, str]:
    """The persona registry from ``RAGCHAT_PERSONAS_FILE`` (JSON, or TOML by the ``.toml`` suffix);
    the built-in ones without a file. A missing or invalid file is a start-up error naming the
    variable (not a 500 on every chat message later)."""
    from ragchat.domain.personas import BUILTIN_PERSONAS, parse_personas

    if path is None:
        return dict(BUILTIN_PERSONAS)
    try:
        raw = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(raw)
        else:
            data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("expected a table/object of personas")
        return parse_personas(data)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"RAGCHAT_PERSONAS_FILE: cannot load personas from {path}: {exc}") from None


class LazyContainer:
    """The container of one entry point, made on first use (not at import time) by ``factory``
    (default: from the environment), then checked for the ``needs`` of that entry point (e.g. the
    functions that start ingestion need STATE_MACHINE_ARN on AWS). Thread-safe."""

    def __init__(self, factory: ContainerFactory = Container, needs: tuple[Part, ...] = ()) -> None:
        self.factory = factory
        self.needs = needs
        self._value: Container | None = None
        self._lock = threading.Lock()

    def get(self) -> Container:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    built = self.factory()
                    built.settings.require(*self.needs)
                    self._value = built
                value = self._value
        return value
