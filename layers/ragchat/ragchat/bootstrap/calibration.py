"""The answer mode and the answerability coefficients the chat's guard reads: whether a language
model answers (the guard's ``reader`` policy) and what ``ragchat calibrate`` stored for the embedder
(an SSM parameter in the cloud, a file of the data directory locally); and the calibrator itself."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from ragchat.bootstrap.models import Models

if TYPE_CHECKING:
    from ragchat.domain.answerability import Coefficients
    from ragchat.ports import CalibrationStore
    from ragchat.services.calibration import Calibrator

logger = Logger(service="ragchat", child=True)


class CalibrationRoot(Models):
    def model_reads(self) -> bool:
        """Whether a language model (Claude) writes the answers, as built or as it would be built."""
        from ragchat.adapters.local.extractive import ExtractiveChatModel

        if "chat_model" in self.__dict__:
            return not isinstance(self.__dict__["chat_model"], ExtractiveChatModel)
        return self.chat_choice() != "extractive"

    def guard_policy(self) -> str:
        """The answerability decision's policy: ``reader`` when a language model answers."""
        from ragchat.domain.answerability import EXTRACTIVE_POLICY, READER_POLICY

        return READER_POLICY if self.model_reads() else EXTRACTIVE_POLICY

    @cached_property
    def calibration_store(self) -> CalibrationStore:
        """Where ``ragchat calibrate`` stores the coefficients: the SSM parameter the stack names,
        else the data directory's file."""
        if self.settings.answerability_parameter:
            from ragchat.adapters.aws.ssm_calibration import SsmCalibration

            return SsmCalibration(self._client("ssm"), self.settings.answerability_parameter)
        from ragchat.adapters.local.calibration_file import FileCalibration

        return FileCalibration(self.settings.calibration_file)

    @cached_property
    def stored_calibration(self) -> Coefficients | None:
        """The embedder's coefficients from ``ragchat calibrate`` (``None``: none stored, or they
        could not be read; the built-in ones, else the uncalibrated rules, decide)."""
        from ragchat.domain.answerability import Coefficients

        if self.settings.answerability != "calibrated":
            return None  # the top-1 rule reads no coefficients: no parameter read
        model_id = str(getattr(self.embedder, "model_id", ""))
        try:
            entry = self.calibration_store.load().get(model_id)
            return None if entry is None else Coefficients.from_json(entry)
        except Exception as exc:  # a refinement: never fails a question
            logger.warning("calibration.read_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            return None

    def calibrator(self, store: CalibrationStore, owner: str) -> Calibrator:
        """Signals of ``owner``'s questions over this container's knowledge base, passages embedded
        (``ragchat calibrate`` ingests the grounding set into a throwaway one), fitted into ``store``."""
        from ragchat.services.calibration import Calibrator, probe
        from ragchat.services.retrieval import Retriever
        from ragchat.services.titles import DocumentTitles

        retriever = Retriever(
            self.embedder,
            self.index,
            self.settings,
            titles=DocumentTitles(self.documents),
            passage_vectors=self.passage_vectors,
            calibration=probe(self.settings.similarity_threshold),
        )
        model_id = str(getattr(self.embedder, "model_id", self.settings.embedding_model_id))
        return Calibrator(retriever, store, model_id=model_id, owner=owner)
