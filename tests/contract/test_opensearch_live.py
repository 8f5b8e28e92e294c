"""The VectorIndex contract against a real OpenSearch cluster, when ``OPENSEARCH_URL`` is set
(e.g. ``http://localhost:9200`` for a local single-node cluster with the k-NN and neural-search
plugins and security disabled). Each test uses a fresh index, deleted afterwards."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.contract import test_vector_index_contract as contract
from tests.contract import test_vector_index_workspaces as workspaces

URL = os.environ.get("OPENSEARCH_URL")  # tests may read the environment; the package never does
pytestmark = pytest.mark.skipif(not URL, reason="OPENSEARCH_URL is not set: no live OpenSearch cluster")


@pytest.fixture
def vector_index() -> Iterator[object]:
    from opensearchpy import OpenSearch
    from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex

    client = OpenSearch(hosts=[URL], timeout=30)
    name = f"ragchat-contract-{uuid.uuid4().hex[:10]}"
    try:
        yield OpenSearchVectorIndex(client, name, contract.DIM, service="es")
    finally:
        client.indices.delete(index=name, ignore=[404])


# Re-run every contract test of the suite (and of the search over several workspaces) with the
# live fixture above.
for _suite in (contract, workspaces):
    for _name in dir(_suite):
        if _name.startswith("test_"):
            globals()[_name] = getattr(_suite, _name)
