"""What the reader costs (docs/reader.md): resident memory of the loaded model, and the time to score
one question against the 8 passages the decision gives it (median of 21 runs, one thread as the
server's request threads run it). Writes bench/results/reader_cost.json."""

from __future__ import annotations

import json
import os
import statistics
import time

from benchdata import models_path, results_dir

QUESTION = "How long do refunds take to reach the customer's card?"
PASSAGES = [
    "Refund policy: Refunds reach the customer's card within five business days. Card fees are kept.",
    "Refund policy: Refunds are requested from the orders page by the account owner. Staff approve them.",
    "Expense policy: Travel is booked through the portal. Economy class for flights under six hours.",
    "Support SLA: Production incidents get a first reply within one hour, around the clock.",
    "Onboarding: New hires receive a laptop on their first day. Accounts are created by IT the day before.",
    "Security: Two-factor authentication is required for every account. Hardware keys are supported.",
    "Office guide: The kitchen is on the second floor. Bring your own mug.",
    "Garden club: Tomatoes grow well on a sunny balcony in large pots, watered every evening.",
]


def rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    import onnxruntime  # noqa: F401  (loaded before the baseline: the embedder has it anyway)
    from ragchat.adapters.local.onnx_embedder import ModelNotPreparedError
    from ragchat.adapters.local.reader import OnnxReader

    before = rss_mb()
    try:
        reader = OnnxReader.from_cache(models_path())
    except ModelNotPreparedError:  # the reader is off by default: `make reader` trains it
        print("bench reader: SKIPPED: the reader model is not prepared (make reader)")
        return
    loaded = rss_mb()
    reader.score(QUESTION, PASSAGES)
    times = []
    for _ in range(21):
        t = time.perf_counter()
        scores = reader.score(QUESTION, PASSAGES)
        times.append((time.perf_counter() - t) * 1000)
    after = rss_mb()
    result = {
        "rss_mb_before": round(before, 1),
        "rss_mb_loaded": round(loaded, 1),
        "rss_mb_after_scoring": round(after, 1),
        "score_8_passages_ms_median": round(statistics.median(times), 1),
        "score_8_passages_ms_min": round(min(times), 1),
        "scores": [round(s, 4) for s in scores],
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    print(json.dumps(result, indent=1))
    (results_dir() / "reader_cost.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
