"""How many tokens each side of the Chroma side by side (``bench_chroma.py``) gives the model.

Both sides embed with the same MiniLM, which reads at most 256 tokens of a text. Chroma gets one text
per SciFact abstract (title, blank line, abstract), so the tokens past 256 are never embedded nor
searchable; ragchat reads the same text as its split step does (``parse_document`` with the
settings: 1,000-character chunks, 100 characters of overlap, the title header on each chunk) and
embeds all of it. Counting only (the tokenizer, no model call; a few seconds):
``python bench/chroma_tokens.py [--docs N]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchdata import models_path

sys.path.insert(0, str(Path(__file__).resolve().parent))

MAX_TOKENS = 256  # what MiniLM reads of one text (the embedder truncates there, on both sides)


def count(n_docs: int) -> dict[str, Any]:
    from bench_chroma import _body, _docs, product_chunks
    from ragchat.adapters.local.onnx_embedder import model_dir
    from ragchat.config import load_settings
    from tokenizers import Tokenizer

    settings = load_settings()
    tokenizer = Tokenizer.from_file(str(model_dir(models_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def tokens(text: str) -> int:
        return len(tokenizer.encode(text).ids)

    docs = _docs(n_docs)
    whole = [tokens(_body(d)) for d in docs]
    chunks = []
    for d in docs:  # as the split step reads them: parse_document with the settings
        chunks += [embeds for _, embeds in product_chunks(d, settings)]
    chroma = sum(min(MAX_TOKENS, t) for t in whole)
    ragchat = sum(min(MAX_TOKENS, tokens(c)) for c in chunks)
    return {
        "abstracts": len(docs),
        "text_tokens": sum(whole),
        "chroma_tokens_embedded": chroma,
        "abstracts_cut_at_256": sum(1 for t in whole if t > MAX_TOKENS),
        "chroma_tokens_never_embedded": sum(whole) - chroma,
        "ragchat_chunks": len(chunks),
        "ragchat_tokens_embedded": ragchat,
        "ratio_ragchat_to_chroma": round(ragchat / chroma, 3),
        "ratio_ragchat_to_text": round(ragchat / sum(whole), 3),
        "chunk_size": settings.chunk_size,
        "chunk_overlap": settings.chunk_overlap,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=5183)
    print(json.dumps(count(parser.parse_args().docs), indent=2))


if __name__ == "__main__":
    main()
