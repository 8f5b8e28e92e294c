"""The chat model and what it shares with retrieval and evidence warming: the passage-vector cache
and the precomputed evidence store. Both the chat root and the ingestion root build on this (the
local ingestion worker warms the evidence the answerer reads)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from ragchat.bootstrap.backends import Backends, close_client
from ragchat.config import ConfigError, is_anthropic_key

if TYPE_CHECKING:
    from ragchat.ports import ChatModel, EvidenceStore, Reader
    from ragchat.services.retrieval import PassageVectors


class Models(Backends):
    @cached_property
    def evidence_store(self) -> EvidenceStore | None:
        """Precomputed passage and sentence vectors (local SQLite index only; ``None`` elsewhere or
        with ``PRECOMPUTE_EVIDENCE=false``)."""
        if not self.settings.precompute_evidence or self.settings.vector_index_kind != "sqlite":
            return None
        from ragchat.adapters.local.sqlite_store.evidence import SqliteEvidenceStore

        return SqliteEvidenceStore(self._sqlite, evidence_model_key(self.embedder))

    @cached_property
    def reader(self) -> Reader | None:
        """The extractive reader (``READER=on``; docs/reader.md): the models cache's, else the one
        shipped in the package; ``None`` when off. A missing model is a clear start-up error."""
        if self.settings.reader != "on":
            return None
        from ragchat.adapters.local.reader import OnnxReader

        return OnnxReader.from_cache(self.settings.models_path)

    def reader_threshold(self) -> float:
        """The reader's operating point: ``READER_THRESHOLD``, else the model's calibrated one."""
        from ragchat.domain.answerability import reader_threshold

        reader = self.reader
        return reader_threshold(
            getattr(reader, "sha256", None),
            getattr(reader, "threshold", None),
            self.settings.reader_threshold,
        )

    @cached_property
    def passage_vectors(self) -> PassageVectors:
        """Embeddings of passages and sentences by text, shared by the retriever's answerability
        decision and the extractive answerer."""
        from ragchat.services.retrieval import PassageVectors

        return PassageVectors(self.embedder, store=self.evidence_store)

    def extractive_by_meaning(self) -> bool:
        """Whether answers are extractive by meaning (as built or given, else as it would be built)."""
        from ragchat.adapters.local.extractive import ExtractiveChatModel

        if "chat_model" in self.__dict__:
            model = self.__dict__["chat_model"]
            return isinstance(model, ExtractiveChatModel) and model.relevance_vectors is not None
        return self.chat_choice() == "extractive" and self._sentences_by_meaning()

    def chat_choice(self) -> str:
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
        choice = self.chat_choice()
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
                thinking=self.settings.model_thinking,
                effort=self.settings.model_effort,
            )
            self._opened(lambda: close_client(model))
            return model
        if choice == "bedrock":
            from ragchat.adapters.aws.bedrock_chat import BedrockConverseChatModel, client_config

            # botocore retries off: the adapter applies docs/retrieval.md's policy (2 retries, 200/400 ms).
            config = client_config(
                connect_timeout=self.settings.model_connect_timeout_s,
                first_token_timeout=self.settings.model_first_token_timeout_s,
            )
            client = self._client("bedrock-runtime", config=config)
            return BedrockConverseChatModel(
                client,
                model_id=self.settings.bedrock_chat_model_id,
                first_token_timeout=self.settings.model_first_token_timeout_s,
                thinking=self.settings.model_thinking,
                effort=self.settings.model_effort,
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
            # a secret left empty or holding a placeholder is "no key": auto mode never sends it
            return value.strip() if is_anthropic_key(value) else None
        return None


def evidence_model_key(embedder: object) -> str:
    """What stored evidence vectors are keyed by: the embedding model and, when not fp32, the
    precision of its weights (``EMBEDDER_PRECISION=int8``), so vectors of the two never mix."""
    model_id = str(getattr(embedder, "model_id", ""))
    precision = getattr(embedder, "precision", "fp32")
    return model_id if precision in ("fp32", None) else f"{model_id}@{precision}"
