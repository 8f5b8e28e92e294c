"""Composition root: the one place that reads settings and wires adapters into services.

Everything is built lazily on first use (``cached_property``), so a Lambda function pays only for
the adapters its routes touch, and nothing connects or imports a heavy SDK at import time.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from ragchat.config import Settings, load_settings
from ragchat.domain.clock import Clock, system_clock

if TYPE_CHECKING:
    from ragchat.ports import (
        BlobStore,
        ChatModel,
        ConversationStore,
        Counters,
        DocumentStore,
        Embedder,
        IngestionLauncher,
        VectorIndex,
    )
    from ragchat.services.answering import AskService
    from ragchat.services.chat import ChatService
    from ragchat.services.documents import DocumentService
    from ragchat.services.ingestion import IngestionService, IngestSteps
    from ragchat.services.retrieval import Retriever


class Container:
    """Holds the settings and builds each port/service once. Tests pass overrides
    (``Container(settings, embedder=FakeEmbedder())``) instead of patching globals."""

    def __init__(self, settings: Settings | None = None, *, clock: Clock = system_clock, **overrides: Any):
        self.settings = settings or load_settings()
        self.clock = clock
        for name, value in overrides.items():
            # cached_property stores in __dict__: setting it first makes the override win.
            self.__dict__[name] = value

    # ------------------------------------------------------------------ ports
    @cached_property
    def _sqlite(self) -> Any:
        from ragchat.adapters.local.sqlite_store import SqliteDatabase

        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        return SqliteDatabase(self.settings.data_dir / "ragchat.db")

    @cached_property
    def _boto_session(self) -> Any:
        import boto3

        return boto3.session.Session(region_name=self.settings.aws_region)

    @cached_property
    def documents(self) -> DocumentStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoDocumentStore

            assert self.settings.documents_table
            return DynamoDocumentStore(
                self.settings.documents_table, self._boto_session.client("dynamodb"), clock=self.clock
            )
        from ragchat.adapters.local.sqlite_store import SqliteDocumentStore

        return SqliteDocumentStore(self._sqlite, clock=self.clock)

    @cached_property
    def conversations(self) -> ConversationStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoConversationStore

            assert self.settings.conversations_table
            return DynamoConversationStore(
                self.settings.conversations_table, self._boto_session.client("dynamodb"), clock=self.clock
            )
        from ragchat.adapters.local.sqlite_store import SqliteConversationStore

        return SqliteConversationStore(self._sqlite, clock=self.clock)

    @cached_property
    def counters(self) -> Counters:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.dynamodb import DynamoCounters

            assert self.settings.counters_table
            return DynamoCounters(self.settings.counters_table, self._boto_session.client("dynamodb"))
        from ragchat.adapters.local.sqlite_store import SqliteCounters

        return SqliteCounters(self._sqlite)

    @cached_property
    def blobs(self) -> BlobStore:
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.s3 import S3BlobStore

            assert self.settings.documents_bucket
            return S3BlobStore(self.settings.documents_bucket, self._boto_session.client("s3"))
        from ragchat.adapters.local.files import FileBlobStore

        return FileBlobStore(self.settings.data_dir / "blobs")

    @cached_property
    def embedder(self) -> Embedder:
        kind = self.settings.embedder_kind
        if kind in ("titan", "cohere"):
            from botocore.config import Config

            # botocore retries off (the adapter backs off with jitter itself); one pooled connection
            # per concurrent call.
            bedrock = self._boto_session.client(
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
        if self.settings.backend == "aws" and self.settings.opensearch_endpoint:
            from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex

            return OpenSearchVectorIndex.connect(
                endpoint=self.settings.opensearch_endpoint,
                index=self.settings.opensearch_index,
                service=self.settings.opensearch_service,
                region=self.settings.aws_region,
                dimension=self.embedder.dimension,
            )
        from ragchat.adapters.local.vector_index import LocalVectorIndex

        # vectors live in the same SQLite file as everything else (tables ``vectors``/``vectors_fts``)
        return LocalVectorIndex(self._sqlite, dimension=self.embedder.dimension)

    @cached_property
    def launcher(self) -> IngestionLauncher:
        if self.settings.backend == "aws" and self.settings.state_machine_arn:
            from ragchat.adapters.aws.stepfunctions import StepFunctionsLauncher

            return StepFunctionsLauncher(
                self.settings.state_machine_arn, self._boto_session.client("stepfunctions")
            )
        from ragchat.adapters.local.pipeline import InlineIngestionLauncher

        return InlineIngestionLauncher(lambda: self.ingest_steps)

    @cached_property
    def chat_model(self) -> ChatModel:
        choice = self.settings.chat_model
        if choice == "auto":
            choice = "anthropic" if self._anthropic_key() else "extractive"
        if choice == "anthropic":
            from ragchat.adapters.aws.anthropic_model import AnthropicChatModel

            key = self._anthropic_key()
            if not key:
                from ragchat.config import ConfigError

                raise ConfigError("ANTHROPIC_API_KEY: required when RAGCHAT_CHAT_MODEL=anthropic")
            return AnthropicChatModel(api_key=key, model=self.settings.anthropic_model)
        if choice == "bedrock":
            from botocore.config import Config

            from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel

            # botocore retries off: the adapter applies SPEC §7's policy (2 retries, 200/400 ms).
            client = self._boto_session.client(
                "bedrock-runtime", config=Config(retries={"total_max_attempts": 1})
            )
            return BedrockConverseChatModel(client, model_id=self.settings.bedrock_chat_model_id)
        from ragchat.adapters.local.extractive import ExtractiveChatModel

        return ExtractiveChatModel()

    def _anthropic_key(self) -> str | None:
        if self.settings.anthropic_api_key:
            return self.settings.anthropic_api_key
        if self.settings.anthropic_secret_name:
            from aws_lambda_powertools.utilities import parameters

            value = parameters.get_secret(self.settings.anthropic_secret_name, max_age=300)
            return str(value) if value else None
        return None

    # ------------------------------------------------------------------ services
    @cached_property
    def retriever(self) -> Retriever:
        from ragchat.services.retrieval import Retriever

        return Retriever(self.embedder, self.index, self.settings)

    @cached_property
    def ingestion(self) -> IngestionService:
        from ragchat.services.ingestion import IngestionService

        return IngestionService(self.documents, self.blobs, self.launcher, self.settings)

    @cached_property
    def ingest_steps(self) -> IngestSteps:
        from ragchat.services.ingestion import IngestSteps

        return IngestSteps(self.documents, self.blobs, self.embedder, self.index, self.settings)

    @cached_property
    def document_service(self) -> DocumentService:
        from ragchat.services.documents import DocumentService

        return DocumentService(self.documents, self.index, self.blobs)

    @cached_property
    def ask(self) -> AskService:
        from ragchat.services.answering import AskService

        return AskService(self.retriever, self.chat_model, self.settings)

    @cached_property
    def chat(self) -> ChatService:
        from ragchat.services.chat import ChatService

        return ChatService(
            conversations=self.conversations,
            counters=self.counters,
            retriever=self.retriever,
            model=self.chat_model,
            documents=self.documents,
            settings=self.settings,
            clock=self.clock,
        )
