"""The backends: settings, clock, personas and every port (stores, blobs, embedder, vector index,
metrics), chosen by the settings. Built lazily on first use (``cached_property``), so a Lambda
function pays only for what its routes touch, and nothing connects or imports a heavy SDK at import
time. ``close()`` closes what was opened (SQLite, SDK clients, the inline ingestion worker).

The feature roots (:mod:`.ingestion`, :mod:`.chat`) build the services over these ports;
:class:`ragchat.bootstrap.web.Container` is all of them together.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragchat.config import ConfigError, Settings, load_settings
from ragchat.domain.clock import Clock, system_clock

if TYPE_CHECKING:
    from boto3.session import Session

    from ragchat.adapters.local.sqlite_store import SqliteDatabase
    from ragchat.ports import (
        BlobStore,
        ConversationStore,
        Counters,
        DocumentStore,
        Embedder,
        Metrics,
        UserDirectory,
        VectorIndex,
        WorkspaceStore,
    )
    from ragchat.services.ingest_attempts import IngestAttempts
    from ragchat.services.storage_ceiling import WorkspaceBytes

logger = logging.getLogger("ragchat.bootstrap")


class Backends:
    """Holds the settings and builds each port once. Tests pass overrides
    (``Container(settings, embedder=FakeEmbedder())``) instead of patching globals."""

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
        """Close what was opened, newest first (overrides belong to whoever made them). Safe twice."""
        closers, self._closers = self._closers, []
        for close in reversed(closers):
            try:
                close()
            except Exception:  # closing must not hide the error that made us close
                logger.warning("container.close: %r failed", close, exc_info=True)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _opened(self, close: Callable[[], object]) -> None:
        self._closers.append(close)

    # ------------------------------------------------------------------ connections
    @cached_property
    def _sqlite(self) -> SqliteDatabase:
        from ragchat.adapters.local.files import private_dir
        from ragchat.adapters.local.sqlite_store import SqliteDatabase

        private_dir(self.settings.data_dir)  # 0700 whatever the umask (docs/security.md)
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

    # ------------------------------------------------------------------ ports
    @cached_property
    def documents(self) -> DocumentStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoDocumentStore

            return DynamoDocumentStore(
                required(self.settings.documents_table, "DOCUMENTS_TABLE"), self._dynamodb, clock=self.clock
            )
        from ragchat.adapters.local.sqlite_store import SqliteDocumentStore

        return SqliteDocumentStore(self._sqlite, clock=self.clock)

    @cached_property
    def conversations(self) -> ConversationStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoConversationStore

            return DynamoConversationStore(
                required(self.settings.conversations_table, "CONVERSATIONS_TABLE"),
                self._dynamodb,
                clock=self.clock,
            )
        from ragchat.adapters.local.sqlite_store import SqliteConversationStore

        return SqliteConversationStore(self._sqlite, clock=self.clock)

    @cached_property
    def counters(self) -> Counters:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoCounters

            return DynamoCounters(required(self.settings.counters_table, "COUNTERS_TABLE"), self._dynamodb)
        from ragchat.adapters.local.sqlite_store import SqliteCounters

        return SqliteCounters(self._sqlite)

    @cached_property
    def workspace_bytes(self) -> WorkspaceBytes:
        """Each workspace's byte ledger against ``MAX_WORKSPACE_BYTES`` (in the counters store)."""
        from ragchat.services.storage_ceiling import WorkspaceBytes

        return WorkspaceBytes(self.counters, self.documents, self.settings.max_workspace_bytes, self.clock)

    @cached_property
    def ingest_attempts(self) -> IngestAttempts | None:
        """Runs started per document version, so a poison document is FAILED rather than resumed at
        every start (local: the cloud's state machine never resumes)."""
        if self.settings.backend == "aws":
            return None
        from ragchat.services.ingest_attempts import IngestAttempts

        return IngestAttempts(self.counters, self.settings.ingest_max_attempts, self.clock)

    @cached_property
    def workspace_store(self) -> WorkspaceStore:
        """Shared workspaces and members: in the documents table on AWS, in SQLite locally."""
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoWorkspaceStore

            return DynamoWorkspaceStore(
                required(self.settings.documents_table, "DOCUMENTS_TABLE"), self._dynamodb, clock=self.clock
            )
        from ragchat.adapters.local.sqlite_store import SqliteWorkspaceStore

        return SqliteWorkspaceStore(self._sqlite, clock=self.clock)

    @cached_property
    def user_directory(self) -> UserDirectory:
        """Who a member identifier (user id or e-mail) names: the Cognito user pool on AWS; locally,
        the identifier is the user id."""
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.cognito import CognitoUserDirectory

            pool = required(self.settings.cognito_user_pool_id, "COGNITO_USER_POOL_ID")
            return CognitoUserDirectory(pool, self._client("cognito-idp"))
        from ragchat.adapters.local.directory import IdentityDirectory

        return IdentityDirectory()

    @cached_property
    def blobs(self) -> BlobStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.s3 import S3_CLIENT_CONFIG, S3BlobStore

            return S3BlobStore(
                required(self.settings.documents_bucket, "DOCUMENTS_BUCKET"),
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

        return OnnxMiniLMEmbedder.from_cache(
            self.settings.models_path, precision=self.settings.embedder_precision
        )

    @cached_property
    def index(self) -> VectorIndex:
        if self.settings.vector_index_kind == "s3vectors":
            from ragchat.adapters.aws.s3vectors import S3VectorsIndex

            return S3VectorsIndex(
                self._client("s3vectors"),
                required(self.settings.s3vectors_bucket, "S3VECTORS_BUCKET"),
                self.settings.s3vectors_index,
                dimension=self.embedder.dimension,
            )
        if self.settings.vector_index_kind == "opensearch":
            from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex

            index = OpenSearchVectorIndex.connect(
                endpoint=required(self.settings.opensearch_endpoint, "OPENSEARCH_ENDPOINT"),
                index=self.settings.opensearch_index,
                service=self.settings.opensearch_service,
                region=self.settings.aws_region,
                dimension=self.embedder.dimension,
            )
            self._opened(lambda: close_client(index))
            return index
        from ragchat.adapters.local.vector_index import LocalVectorIndex

        # vectors live in the same SQLite file as everything else (tables ``vectors``/``vectors_fts``)
        return LocalVectorIndex(self._sqlite, dimension=self.embedder.dimension)

    @cached_property
    def metrics(self) -> Metrics:
        """CloudWatch EMF on Lambda, nothing elsewhere (``ragchat.observability``)."""
        from ragchat.observability import metrics_port

        return metrics_port()


def required(value: str | None, variable: str) -> str:
    """A setting the part being built needs (``Settings`` checks them at start-up; this keeps a
    hand-made ``Settings`` honest too, and survives ``python -O`` unlike ``assert``)."""
    if not value:
        raise ConfigError(f"{variable} must be set for this part of the wiring")
    return value


def close_client(owner: object) -> None:
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
