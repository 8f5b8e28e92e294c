"""Contract tests: one suite per storage port, run against every registered adapter.

How to add an adapter to a suite
================================
Each port has a registry below (``DOCUMENT_STORES``, ``CONVERSATION_STORES``, ``COUNTERS``,
``VECTOR_INDEXES``, ``BLOB_STORES``, ``WORKSPACE_STORES``): a dict from a short name (it becomes
the test id, e.g. ``test_pagination[dynamodb]``) to a *factory*. A factory is a context-manager
function that takes a :class:`ContractEnv` and yields a ready, **empty** adapter; whatever it needs
around the adapter (a moto ``mock_aws()`` context, tables, a temporary folder) it sets up before the
``yield`` and tears down after it. Import heavy SDKs inside the factory, not at module level::

    @contextmanager
    def dynamodb_document_store(env: ContractEnv) -> Iterator[DocumentStore]:
        import boto3
        from moto import mock_aws

        from ragchat.adapters.aws.dynamodb import DynamoDocumentStore
        from ragchat.adapters.aws.tables import create_tables

        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            create_tables(client, documents="docs", conversations="convs", counters="counters")
            yield DynamoDocumentStore("docs", client, clock=env.clock)

    DOCUMENT_STORES["dynamodb"] = dynamodb_document_store      # the one-line registration

Rules every factory follows:

* timestamps come from ``env.clock`` (a :class:`tests.fakes.FakeClock`; tests move it with
  ``clock.advance(seconds)`` and never sleep) — the suites assert the exact stored times;
* vector indexes are built with ``dimension=env.dimension``;
* the adapter starts empty and nothing is shared between tests.

The suites then receive the adapter through the fixtures ``document_store``, ``conversation_store``,
``counters``, ``vector_index``, ``blob_store`` and ``workspace_store``, parametrized over the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ragchat.ports import BlobStore, ConversationStore, Counters, DocumentStore, VectorIndex, WorkspaceStore

from tests.fakes import FakeClock


@dataclass
class ContractEnv:
    """What a factory gets: a fresh folder, the injected clock and the vector dimension."""

    tmp_path: Path
    clock: FakeClock
    dimension: int = 8


Factory = Callable[[ContractEnv], AbstractContextManager[Any]]


# ------------------------------------------------------------------------------ local (SQLite) adapters
@contextmanager
def _sqlite_db(env: ContractEnv) -> Iterator[Any]:
    from ragchat.adapters.local.sqlite_store import SqliteDatabase

    db = SqliteDatabase(env.tmp_path / "ragchat.db")
    try:
        yield db
    finally:
        db.close()


@contextmanager
def sqlite_document_store(env: ContractEnv) -> Iterator[DocumentStore]:
    from ragchat.adapters.local.sqlite_store import SqliteDocumentStore

    with _sqlite_db(env) as db:
        yield SqliteDocumentStore(db, clock=env.clock)


@contextmanager
def sqlite_conversation_store(env: ContractEnv) -> Iterator[ConversationStore]:
    from ragchat.adapters.local.sqlite_store import SqliteConversationStore

    with _sqlite_db(env) as db:
        yield SqliteConversationStore(db, clock=env.clock)


@contextmanager
def sqlite_counters(env: ContractEnv) -> Iterator[Counters]:
    from ragchat.adapters.local.sqlite_store import SqliteCounters

    with _sqlite_db(env) as db:
        yield SqliteCounters(db)


@contextmanager
def sqlite_workspace_store(env: ContractEnv) -> Iterator[WorkspaceStore]:
    from ragchat.adapters.local.sqlite_store import SqliteWorkspaceStore

    with _sqlite_db(env) as db:
        yield SqliteWorkspaceStore(db, clock=env.clock)


@contextmanager
def local_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    from ragchat.adapters.local.vector_index import LocalVectorIndex

    with _sqlite_db(env) as db:
        yield LocalVectorIndex(db, dimension=env.dimension)


@contextmanager
def local_ann_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    """The local index with its approximate snapshot from the first row, rewritten after every
    write: every search goes through the memory-mapped snapshot (``vector_ann``)."""
    from ragchat.adapters.local.vector_index import LocalVectorIndex

    with _sqlite_db(env) as db:
        yield LocalVectorIndex(db, dimension=env.dimension, ann_min_rows=1, ann_merge_rows=1)


@contextmanager
def local_ann_delta_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    """The snapshot written at the first write and never again: later rows, changes and deletes
    are the exact delta, and the snapshot holds stale rows."""
    from ragchat.adapters.local.vector_index import LocalVectorIndex

    with _sqlite_db(env) as db:
        yield LocalVectorIndex(db, dimension=env.dimension, ann_min_rows=1, ann_merge_rows=10**9)


@contextmanager
def file_blob_store(env: ContractEnv) -> Iterator[BlobStore]:
    from ragchat.adapters.local.files import FileBlobStore

    yield FileBlobStore(env.tmp_path / "blobs")


# ------------------------------------------------------------------------------ AWS adapters on moto
class _OneRequestAtATime:
    """DynamoDB applies each request atomically (an ``UpdateItem`` with a condition is one atomic
    step); moto does not lock, so concurrent requests can interleave inside its emulation. This
    wrapper restores exactly the service's per-request atomicity and nothing more: an adapter that
    read-modify-writes across two requests still races and fails the concurrency contracts."""

    def __init__(self, client: Any) -> None:
        import threading

        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


@contextmanager
def _dynamodb(env: ContractEnv) -> Iterator[Any]:
    import boto3
    from moto import mock_aws
    from ragchat.adapters.aws.tables import create_tables

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(client, documents="docs", conversations="convs", counters="counters")
        yield _OneRequestAtATime(client)


@contextmanager
def dynamodb_document_store(env: ContractEnv) -> Iterator[DocumentStore]:
    from ragchat.adapters.aws.dynamodb import DynamoDocumentStore

    with _dynamodb(env) as client:
        yield DynamoDocumentStore("docs", client, clock=env.clock)


@contextmanager
def dynamodb_conversation_store(env: ContractEnv) -> Iterator[ConversationStore]:
    from ragchat.adapters.aws.dynamodb import DynamoConversationStore

    with _dynamodb(env) as client:
        yield DynamoConversationStore("convs", client, clock=env.clock)


@contextmanager
def dynamodb_counters(env: ContractEnv) -> Iterator[Counters]:
    from ragchat.adapters.aws.dynamodb import DynamoCounters

    with _dynamodb(env) as client:
        yield DynamoCounters("counters", client)


@contextmanager
def dynamodb_workspace_store(env: ContractEnv) -> Iterator[WorkspaceStore]:
    """Workspaces and memberships live in the documents table (its own partitions)."""
    from ragchat.adapters.aws.dynamodb import DynamoWorkspaceStore

    with _dynamodb(env) as client:
        yield DynamoWorkspaceStore("docs", client, clock=env.clock)


@contextmanager
def s3_blob_store(env: ContractEnv) -> Iterator[BlobStore]:
    import boto3
    from moto import mock_aws
    from ragchat.adapters.aws.s3 import S3_CLIENT_CONFIG, S3BlobStore

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1", config=S3_CLIENT_CONFIG)
        client.create_bucket(Bucket="docs")
        yield S3BlobStore("docs", client)


@contextmanager
def opensearch_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    """The OpenSearch adapter over opensearch-py, talking HTTP to an in-process fake cluster."""
    from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex

    from tests.contract.fake_opensearch import FakeCluster

    yield OpenSearchVectorIndex(FakeCluster().client(), "notes", env.dimension, service="es")


@contextmanager
def opensearch_serverless_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    """Same, with the fake behaving like a Serverless vector collection (no custom ids, no
    ``*_by_query``, no search pipelines, no refresh)."""
    from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex

    from tests.contract.fake_opensearch import FakeCluster

    yield OpenSearchVectorIndex(FakeCluster(serverless=True).client(), "notes", env.dimension, service="aoss")


@contextmanager
def s3vectors_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    """The S3 Vectors adapter over an in-memory fake of the ``s3vectors`` client (moto has no query
    API); the fake validates every request against the botocore service model."""
    from ragchat.adapters.aws.s3vectors import S3VectorsIndex

    from tests.contract.fake_s3vectors import FakeS3Vectors

    yield S3VectorsIndex(FakeS3Vectors("vectors", "notes", env.dimension), "vectors", "notes", env.dimension)


# ------------------------------------------------------------------------------ in-memory fakes
# The fakes in tests/fakes.py stand in for the adapters in every unit test: they are held to the same
# contracts, so a unit test never passes against behaviour no real adapter has.
@contextmanager
def fake_document_store(env: ContractEnv) -> Iterator[DocumentStore]:
    from tests.fakes import FakeDocumentStore

    yield FakeDocumentStore(clock=env.clock)


@contextmanager
def fake_conversation_store(env: ContractEnv) -> Iterator[ConversationStore]:
    from tests.fakes import FakeConversationStore

    yield FakeConversationStore(clock=env.clock)


@contextmanager
def fake_counters(env: ContractEnv) -> Iterator[Counters]:
    from tests.fakes import FakeCounters

    yield FakeCounters()


@contextmanager
def fake_workspace_store(env: ContractEnv) -> Iterator[WorkspaceStore]:
    from tests.fakes import FakeWorkspaceStore

    yield FakeWorkspaceStore(clock=env.clock)


@contextmanager
def fake_vector_index(env: ContractEnv) -> Iterator[VectorIndex]:
    from tests.fakes import FakeVectorIndex

    yield FakeVectorIndex(dimension=env.dimension)


@contextmanager
def fake_blob_store(env: ContractEnv) -> Iterator[BlobStore]:
    from tests.fakes import FakeBlobStore

    yield FakeBlobStore()


# ------------------------------------------------------------------------------ registries
DOCUMENT_STORES: dict[str, Factory] = {"sqlite": sqlite_document_store}
CONVERSATION_STORES: dict[str, Factory] = {"sqlite": sqlite_conversation_store}
COUNTERS: dict[str, Factory] = {"sqlite": sqlite_counters}
VECTOR_INDEXES: dict[str, Factory] = {
    "local": local_vector_index,
    "local-ann": local_ann_vector_index,
    "local-ann-delta": local_ann_delta_vector_index,
}
BLOB_STORES: dict[str, Factory] = {"files": file_blob_store}
WORKSPACE_STORES: dict[str, Factory] = {"sqlite": sqlite_workspace_store, "fake": fake_workspace_store}
# The vector indexes that confine a search to several owners (``SearchFilter.owners``, issue 32):
# test_vector_partitions.py runs over these; add an index here once it honours ``flt.partitions``.
PARTITIONED_INDEXES = {"local", "local-ann", "local-ann-delta", "fake"}
# Register further adapters here, one line each (see the module docstring), e.g.
# DOCUMENT_STORES["dynamodb"] = dynamodb_document_store
DOCUMENT_STORES["dynamodb"] = dynamodb_document_store
CONVERSATION_STORES["dynamodb"] = dynamodb_conversation_store
COUNTERS["dynamodb"] = dynamodb_counters
BLOB_STORES["s3"] = s3_blob_store
VECTOR_INDEXES["opensearch"] = opensearch_vector_index
VECTOR_INDEXES["opensearch-aoss"] = opensearch_serverless_vector_index
DOCUMENT_STORES["fake"] = fake_document_store
CONVERSATION_STORES["fake"] = fake_conversation_store
COUNTERS["fake"] = fake_counters
VECTOR_INDEXES["fake"] = fake_vector_index
BLOB_STORES["fake"] = fake_blob_store
VECTOR_INDEXES["s3vectors"] = s3vectors_vector_index
WORKSPACE_STORES["dynamodb"] = dynamodb_workspace_store


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def contract_env(tmp_path: Path, clock: FakeClock) -> ContractEnv:
    return ContractEnv(tmp_path=tmp_path, clock=clock)


def _adapter(registry: dict[str, Factory], request: pytest.FixtureRequest, env: ContractEnv) -> Iterator[Any]:
    with registry[request.param](env) as adapter:
        yield adapter


@pytest.fixture(params=sorted(DOCUMENT_STORES))
def document_store(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[DocumentStore]:
    yield from _adapter(DOCUMENT_STORES, request, contract_env)


@pytest.fixture(params=sorted(CONVERSATION_STORES))
def conversation_store(
    request: pytest.FixtureRequest, contract_env: ContractEnv
) -> Iterator[ConversationStore]:
    yield from _adapter(CONVERSATION_STORES, request, contract_env)


@pytest.fixture(params=sorted(COUNTERS))
def counters(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[Counters]:
    yield from _adapter(COUNTERS, request, contract_env)


@pytest.fixture(params=sorted(VECTOR_INDEXES))
def vector_index(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[VectorIndex]:
    yield from _adapter(VECTOR_INDEXES, request, contract_env)


@pytest.fixture(params=sorted(WORKSPACE_STORES))
def workspace_store(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[WorkspaceStore]:
    yield from _adapter(WORKSPACE_STORES, request, contract_env)


@pytest.fixture(params=sorted(n for n in VECTOR_INDEXES if n in PARTITIONED_INDEXES))
def partitioned_index(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[VectorIndex]:
    yield from _adapter(VECTOR_INDEXES, request, contract_env)


@pytest.fixture(params=sorted(BLOB_STORES))
def blob_store(request: pytest.FixtureRequest, contract_env: ContractEnv) -> Iterator[BlobStore]:
    yield from _adapter(BLOB_STORES, request, contract_env)
