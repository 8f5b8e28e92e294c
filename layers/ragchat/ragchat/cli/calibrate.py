"""``ragchat calibrate``: fit the answerability decision for the configured embedder and store it.

The grounding dev set (``bench/grounding/`` of the repository: documents and labelled questions)
is ingested into a throwaway local knowledge base through the configured embedder — MiniLM
locally; ``RAGCHAT_EMBEDDER=titan|cohere`` with AWS credentials for a deployment's Bedrock model —
and its questions' signals are fitted (``ragchat.services.calibration``). The coefficients go where
the chat functions read them: the SSM parameter named by ``ANSWERABILITY_PARAMETER`` (the deployed
stack's), else ``<RAGCHAT_DATA_DIR>/answerability.json``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragchat.cli.common import fail, load_settings, quiet_logging

if TYPE_CHECKING:
    from ragchat.config import Settings
    from ragchat.services.calibration import Calibration, LabelledQuestion

OWNER = "calibration"
DEFAULT_SET = Path("bench/grounding")


def read_set(folder: Path, split: str = "dev") -> tuple[dict[str, bytes], list[LabelledQuestion]]:
    """The set's documents (file name → bytes; a ``.pdf.txt`` page text is ingested as ``.txt``)
    and its ``split`` questions, from ``questions.json`` and ``docs/``."""
    from ragchat.services.calibration import LabelledQuestion

    data = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    rows = [q for q in data["questions"] if q.get("split", split) == split]
    questions = [LabelledQuestion(q["question"], q["kind"]) for q in rows]
    docs = {}
    for path in sorted((folder / "docs").iterdir()):
        if path.is_file():
            name = path.name.replace(".pdf.txt", ".txt")
            docs[name] = path.read_bytes().replace(b"\f", b"\n\n")
    return docs, questions


def run_calibration(
    settings: Settings,
    docs: dict[str, bytes],
    questions: list[LabelledQuestion],
    *,
    save: bool = True,
    workdir: str | None = None,
) -> Calibration:
    """Ingest ``docs`` into a throwaway local knowledge base on ``settings``' embedder, fit, and
    store in ``settings``' calibration store."""
    from ragchat.bootstrap import Container

    store_root = Container(settings)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        scratch = settings.model_copy(
            update={
                "data_dir": Path(tmp),
                "backend": "local",
                # the deployment's embedder (its default follows the backend) into a local index
                "embedder": settings.embedder_kind,
                "vector_index": "sqlite",
                "chat_model": "extractive",
                "answerability_parameter": "",
            }
        )
        kb = Container(scratch)
        try:
            for name, data in docs.items():
                kb.ingestion.submit_file(OWNER, data=data, filename=name)
            from ragchat.adapters.local.pipeline import InlineIngestionLauncher

            launcher = kb.launcher  # always local here: the scratch knowledge base
            if isinstance(launcher, InlineIngestionLauncher) and not launcher.wait_idle(1800):
                raise ValueError("the grounding set's documents were not ingested within 30 minutes")
            calibrator = kb.calibrator(store_root.calibration_store, OWNER)
            return calibrator.run(questions, save=save)
        finally:
            kb.close()
            store_root.close()


def print_figures(result: Calibration, where: str) -> None:
    c = result.coefficients
    typer.echo(f"embedding model: {result.model_id}")
    weights = ", ".join(f"{k} {v:+.3f}" for k, v in c.weights.items())
    typer.echo(f"fitted at MIN_SIMILARITY {c.threshold:.2f}: intercept {c.intercept:+.3f}, {weights}")
    typer.echo(f"cutoffs: extractive {c.cutoff:.2f}, reader (Claude) {c.reader_cutoff:.2f}")
    if result.figures.get("note"):
        typer.echo(str(result.figures["note"]))
    for policy in ("extractive", "reader"):
        f = result.figures[policy]
        a, off, near = f["answerable"], f["off_topic"], f["near_topic"]
        typer.echo(
            f"  {policy:10} dev answerable let through {a[0]}/{a[1]}, off-topic refused "
            f"{off[1] - off[0]}/{off[1]}, near-topic refused {near[1] - near[0]}/{near[1]}"
        )
    typer.echo(where)


def calibrate(
    set_dir: Annotated[
        Path, typer.Option("--set", metavar="DIR", help="The grounding set (questions.json and docs/).")
    ] = DEFAULT_SET,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Fit and print; store nothing.")] = False,
) -> None:
    """Fit the answer-or-refuse decision for the configured embedder on the grounding dev set and
    store it where the chat reads it (ANSWERABILITY_PARAMETER's SSM parameter, else the data dir)."""
    if not (set_dir / "questions.json").is_file():
        raise fail(f"{set_dir}/questions.json not found: run this from the repository root, or pass --set")
    settings = load_settings()
    docs, questions = read_set(set_dir)
    if not questions:
        raise fail(f"{set_dir}/questions.json has no dev questions")
    with quiet_logging(False):
        try:
            result = run_calibration(settings, docs, questions, save=not dry_run)
        except ValueError as exc:
            raise fail(str(exc)) from None
    if dry_run:
        where = "dry run: nothing stored"
    elif settings.answerability_parameter:
        where = f"stored in SSM parameter {settings.answerability_parameter}"
    else:
        where = f"stored in {settings.calibration_file}"
    print_figures(result, where)
