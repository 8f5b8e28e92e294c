"""Request bodies of the OpenSearch vector index (:mod:`ragchat.adapters.aws.opensearch`): the index
mapping, the hybrid search pipeline and the filter clauses every search carries (the owner clause
is a ``terms`` over every workspace a search may see)."""

from __future__ import annotations

from typing import Any

from ragchat.domain.models import SearchFilter

HYBRID_PIPELINE = "ragchat-hybrid"
HYBRID_WEIGHTS = (0.3, 0.7)  # keyword, vector


def index_body(dimension: int) -> dict[str, Any]:
    return {
        "settings": {"index": {"knn": True}},
        "mappings": {
            "properties": {
                "vector": {
                    "type": "knn_vector",
                    "dimension": dimension,
                    "method": {
                        "name": "hnsw",
                        "engine": "faiss",
                        "space_type": "innerproduct",
                        "parameters": {"m": 16, "ef_construction": 128},
                    },
                },
                "text": {"type": "text"},
                "note_id": {"type": "keyword"},
                "document_id": {"type": "keyword"},
                "owner": {"type": "keyword"},
                "collection": {"type": "keyword"},
                "chunk_index": {"type": "integer"},
                "enabled": {"type": "boolean"},
            }
        },
    }


def pipeline_body() -> dict[str, Any]:
    return {
        "description": "ragchat hybrid search: min-max normalization, weighted mean (keyword, vector)",
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": "min_max"},
                    "combination": {
                        "technique": "arithmetic_mean",
                        "parameters": {"weights": list(HYBRID_WEIGHTS)},
                    },
                }
            }
        ],
    }


def owned_query(owner: str, document_id: str, chunks: tuple[int, int] | None = None) -> dict[str, Any]:
    """One document's notes (delete, enable/disable: always within one owner); with ``chunks``
    ``(start, stop)``, those of chunk indexes ``start <= i < stop`` (a step of finalize)."""
    clauses: list[dict[str, Any]] = [{"term": {"owner": owner}}, {"term": {"document_id": document_id}}]
    if chunks is not None:
        clauses.append({"range": {"chunk_index": {"gte": int(chunks[0]), "lt": int(chunks[1])}}})
    return {"bool": {"filter": clauses}}


def owner_clause(owners: tuple[str, ...]) -> dict[str, Any]:
    """One owner: a ``term``; several (a search over the caller's workspaces): one ``terms``."""
    if len(owners) == 1:
        return {"term": {"owner": owners[0]}}
    return {"terms": {"owner": list(owners)}}


def filter_clauses(flt: SearchFilter) -> list[dict[str, Any]]:
    """What every search and hybrid search carries: the owners (``flt.partitions``: the workspaces
    searched), enabled notes only, then the collection and the document when given."""
    clauses: list[dict[str, Any]] = [owner_clause(flt.partitions), {"term": {"enabled": True}}]
    if flt.collection is not None:
        clauses.append({"term": {"collection": flt.collection}})
    if flt.document_id is not None:
        clauses.append({"term": {"document_id": flt.document_id}})
    return clauses
