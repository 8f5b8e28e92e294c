"""What the ingestion side is made of: submitting (notes, files, direct uploads), the steps (split →
embed → index → finalize), the launcher that runs them (the state machine on AWS, the in-process
worker locally), document management, and the evidence warmer that runs after a document is READY."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from ragchat.bootstrap.backends import required
from ragchat.bootstrap.models import Models
from ragchat.domain.file_errors import MB

if TYPE_CHECKING:
    from collections.abc import Callable

    from ragchat.ports import DocumentParser, IngestionLauncher, TextRecognizer
    from ragchat.services.documents import DocumentService
    from ragchat.services.evidence import EvidenceWarmer, IngestEvidence, InlineEvidence, Pool
    from ragchat.services.ingest_attempts import IngestAttempts
    from ragchat.services.ingestion import IngestionService, IngestSteps
    from ragchat.services.uploads import UploadService


class IngestionRoot(Models):
    @cached_property
    def launcher(self) -> IngestionLauncher:
        if self.settings.backend == "aws":
            # never an in-process thread pool inside a Lambda: the state machine or a start-up error
            from ragchat.adapters.aws.stepfunctions import StepFunctionsLauncher

            arn = required(self.settings.state_machine_arn, "STATE_MACHINE_ARN")
            return StepFunctionsLauncher(arn, self._client("stepfunctions"))
        from ragchat.adapters.local.pipeline import MAX_DOCUMENTS_PER_RUN, InlineIngestionLauncher
        from ragchat.services.ingest_lane import ReadingLane
        from ragchat.services.ingest_runner import SlicedRunner

        self.parser  # noqa: B018 - made first, so it is closed after the worker (closers run newest first)
        # PDFs, pages and Office files are read on a lane of their own: the rounds go on meanwhile
        runner = SlicedRunner(max_new_per_round=MAX_DOCUMENTS_PER_RUN, lane=ReadingLane())
        launcher = InlineIngestionLauncher(
            lambda: self.ingest_steps, runner=runner, warmer=self.evidence_warmer
        )
        self._opened(launcher.close)
        return launcher

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
            evidence=self._ingest_evidence(),
            parser=self.parser,
            attempts=self._attempts(),
        )

    def _attempts(self) -> IngestAttempts | None:
        return self.ingest_attempts

    @cached_property
    def parser(self) -> DocumentParser:
        """Reads uploads: locally in child processes under the ``PARSE_*`` limits (a hostile document
        cannot hold the server; text and PDF/HTML/Office each in a child of their own, so a note
        never waits for a PDF being read); in a Lambda (its own process, bounded by its timeout) or with
        ``PARSE_ISOLATION=off``, in this process."""
        s = self.settings
        if s.backend == "aws" or s.parse_isolation == "off":
            from ragchat.domain.parsing import InProcessParser

            return InProcessParser(self.ocr)
        from functools import partial

        from ragchat.adapters.local.parse_process import LanedParser, ProcessParser
        from ragchat.domain.parsing import parse_document

        def child() -> ProcessParser:
            return ProcessParser(
                cpu_seconds=s.parse_cpu_s,
                memory_bytes=s.parse_memory_mb * MB,
                wall_seconds=s.parse_wall_s,
                parse=partial(parse_document, ocr=self.ocr),  # Tesseract runs under the child's limits
            )

        parser = LanedParser(child)  # text and the documents read apart: a child each
        self._opened(parser.close)
        return parser

    @cached_property
    def ocr(self) -> TextRecognizer:
        """What reads pictures and scanned pages: Tesseract in the ``OCR`` languages locally (when
        it is not installed, a picture is refused saying how to install it), Amazon Textract on AWS
        (its client made when the split step first reads one); nothing with ``OCR=off`` (a 400)."""
        from ragchat.domain.images import NO_OCR, NoOcr

        if self.settings.ocr == "off":
            return NoOcr(NO_OCR)
        if self.settings.backend == "aws":
            from ragchat.adapters.aws.textract import TextractOcr

            return TextractOcr(lambda: self._client("textract"))
        from ragchat.adapters.local.tesseract import TesseractOcr

        return TesseractOcr(languages=self.settings.ocr)

    def _evidence_kinds(self) -> tuple[bool, bool]:
        """Which evidence vectors are kept: passages (calibrated embedder), sentences (extractive by
        meaning)."""
        from ragchat.domain.answerability import CALIBRATED

        model_id = getattr(self.embedder, "model_id", "")
        passages = self.settings.answerability == "calibrated" and model_id in CALIBRATED
        return passages, self.extractive_by_meaning()

    def _ingest_evidence(self) -> IngestEvidence | InlineEvidence | None:
        """Evidence vectors made in the ingestion pass, before READY (local, with the evidence
        store): pooled from it (``EVIDENCE_VECTORS=pooled|pooled_sentences``, MiniLM), or, by
        default (``embedded``), embedded alone in the same call for small documents; ``None``
        otherwise."""
        from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

        store, embedder = self.evidence_store, self.embedder
        passages, sentences = self._evidence_kinds()
        mode = self.settings.evidence_vectors
        if store is None or not (passages or sentences):
            return None
        if mode == "embedded":
            if self.settings.evidence_warming == "on_demand" or not self.settings.evidence_inline_chunks:
                return None  # nothing embedded for chunks nobody asks about
            from ragchat.services.evidence import InlineEvidence

            most = self.settings.evidence_inline_chunks
            return InlineEvidence(embedder, store, passages=passages, sentences=sentences, max_chunks=most)
        passages = passages and mode == "pooled"  # with "pooled_sentences" the warmer embeds them
        if not isinstance(embedder, OnnxMiniLMEmbedder) or not (passages or sentences):
            return None
        from ragchat.adapters.local.span_vectors import chunks_and_pooled
        from ragchat.services.evidence import IngestEvidence

        def pool(chunks: list[tuple[str, list[str]]]) -> list[tuple[list[float], list[list[float] | None]]]:
            return chunks_and_pooled(embedder, chunks)

        return IngestEvidence(pool, store, passages=passages, sentences=sentences)

    @cached_property
    def ingestion(self) -> IngestionService:
        from ragchat.services.ingestion import IngestionService
        from ragchat.services.limits import RequestLimiter

        limiter = RequestLimiter.of(self.settings, self.counters, self.clock)
        return IngestionService(
            self.documents,
            self.blobs,
            self.launcher,
            self.settings,
            limiter=limiter,
            pdf_check=self._pdf_check(),
            held=self.workspace_bytes,
            ocr=self.ocr,
        )

    def _pdf_check(self) -> Callable[[bytes], object] | None:
        """The PDF check before the 202: locally in a child process of its own under
        ``PDF_CHECK_CPU_SECONDS`` (and 2.5 times that in wall-clock time, at least 5 s); in a Lambda
        (bounded by its timeout) or with ``PARSE_ISOLATION=off``, in this process (``None``)."""
        s = self.settings
        if s.backend == "aws" or s.parse_isolation == "off":
            return None
        from ragchat.adapters.local.parse_process import ProcessPdfCheck

        check = ProcessPdfCheck(
            cpu_seconds=s.pdf_check_cpu_s,
            wall_seconds=max(5.0, 2.5 * s.pdf_check_cpu_s),  # (a check stuck in C code)
            memory_bytes=s.parse_memory_mb * MB,
        )
        self._opened(check.close)
        return check

    @cached_property
    def uploads(self) -> UploadService:
        """Direct uploads over the blob store and ingestion. The local server takes a body up to its
        request limit, so a local grant never allows more than that."""
        from ragchat.services.uploads import FORM_OVERHEAD_BYTES, UploadService

        s = self.settings
        max_bytes = s.max_upload_bytes
        if s.backend != "aws":
            max_bytes = min(max_bytes, s.body_limit_bytes - FORM_OVERHEAD_BYTES)
        return UploadService(
            self.blobs,
            self.ingestion,
            max_bytes=max_bytes,
            expires_in=s.upload_url_expires_s,
            claims=self.counters,
            clock=self.clock,
            workspaces=self.workspace_store,
        )

    @cached_property
    def document_service(self) -> DocumentService:
        """Pages of PDFs are drawn as uploads are read: in a child process under the ``PARSE_*``
        limits locally, in this process in a Lambda or with ``PARSE_ISOLATION=off`` (pypdfium2 is
        imported only when a page is rendered)."""
        from ragchat.adapters.local.pdf_pages import PdfiumPages, ProcessPages
        from ragchat.services.documents import DocumentService

        s = self.settings
        pages: PdfiumPages | ProcessPages = PdfiumPages()
        if s.backend != "aws" and s.parse_isolation != "off":
            pages = ProcessPages(
                cpu_seconds=s.parse_cpu_s, memory_bytes=s.parse_memory_mb * MB, wall_seconds=s.parse_wall_s
            )
            self._opened(pages.close)
        return DocumentService(
            self.documents,
            self.index,
            self.blobs,
            pages,
            held=self.workspace_bytes,
            attempts=self.ingest_attempts,
            clock=self.clock,
        )

    @cached_property
    def evidence_warmer(self) -> EvidenceWarmer | None:
        """Embeds READY documents' passages (calibrated embedder) and sentences (extractive by meaning)
        in the background; ``None`` with ``EVIDENCE_WARMING=on_demand`` (a question embeds and stores
        those of the chunks it reaches, ``PassageVectors``)."""
        store = self.evidence_store
        if store is None or self.settings.evidence_warming == "on_demand":
            return None
        from ragchat.services.evidence import EvidenceWarmer

        passages, sentences = self._evidence_kinds()
        if not (passages or sentences):
            return None
        return EvidenceWarmer(
            self.documents, store, self.embedder, passages=passages, sentences=sentences, pool=self._pool()
        )

    def _pool(self) -> Pool | None:
        """Evidence vectors pooled from one pass over each chunk (``EVIDENCE_VECTORS=pooled``, local
        MiniLM only; ``None`` otherwise: each text is embedded alone)."""
        from ragchat.adapters.local.onnx_embedder import OnnxMiniLMEmbedder

        embedder = self.embedder
        if self.settings.evidence_vectors != "pooled" or not isinstance(embedder, OnnxMiniLMEmbedder):
            return None
        from ragchat.adapters.local.span_vectors import pooled_vectors, token_states

        def pool(chunks: list[tuple[str, list[str]]]) -> list[list[list[float] | None]]:
            states = token_states(embedder, [text for text, _ in chunks])
            return [
                pooled_vectors(offsets, hidden, text, wanted)
                for (text, wanted), (offsets, hidden) in zip(chunks, states, strict=True)
            ]

        return pool
