"""Request bodies of the OpenSearch vector index (:mod:`ragchat.adapters.aws.opensearch`): the index
mapping, the hybrid search pipeline and the filter clauses every search carries."""

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


def filter_clauses(flt: SearchFilter) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = [{"term": {"owner": flt.owner}}, {"term": {"enabled": True}}]
    if flt.collection is not None:
        clauses.append({"term": {"collection": flt.collection}})
    if flt.document_id is not None:
        clauses.append({"term": {"document_id": flt.document_id}})
    return clauses
