"""The API over the cloud adapters, for suites that run the same requests on every stack (the
cross-member contract suite of issue 32 adds this as its DynamoDB/OpenSearch stack).

:func:`cloud_api` is :func:`tests.unit.api_support.make_api` with the storage parts swapped for the
AWS adapters: DynamoDB (documents, conversations, counters, workspaces, on moto), S3 (blobs, on
moto) and OpenSearch (the adapter over HTTP to the fake cluster, which enforces the service's
request bounds). The embedder stays the deterministic fake and ingestion runs synchronously, as in
every API unit test. Stores stamp times with the API's injected clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.unit.api_support import Api, make_api

DIMENSION = 64  # make_api's fake embedder


@contextmanager
def cloud_api(env: dict[str, str] | None = None, **overrides: Any) -> Iterator[Api]:
    import boto3
    from moto import mock_aws
    from ragchat.adapters.aws.dynamodb import (
        DynamoConversationStore,
        DynamoCounters,
        DynamoDocumentStore,
        DynamoWorkspaceStore,
    )
    from ragchat.adapters.aws.opensearch import OpenSearchVectorIndex
    from ragchat.adapters.aws.s3 import S3_CLIENT_CONFIG, S3BlobStore
    from ragchat.adapters.aws.tables import create_tables

    from tests.contract.fake_opensearch import FakeCluster

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(dynamodb, documents="docs", conversations="convs", counters="counters")
        s3 = boto3.client("s3", region_name="us-east-1", config=S3_CLIENT_CONFIG)
        s3.create_bucket(Bucket="bodies")
        clocks: list[Any] = []  # the API's clock, once make_api has made it

        def clock() -> float:
            return float(clocks[0]())

        parts: dict[str, Any] = {
            "documents": DynamoDocumentStore("docs", dynamodb, clock=clock),
            "conversations": DynamoConversationStore("convs", dynamodb, clock=clock),
            "counters": DynamoCounters("counters", dynamodb),
            "workspace_store": DynamoWorkspaceStore("docs", dynamodb, clock=clock),
            "blobs": S3BlobStore("bodies", s3),
            "index": OpenSearchVectorIndex(FakeCluster().client(), "notes", DIMENSION, service="es"),
            **overrides,
        }
        api = make_api(env, **parts)
        clocks.append(api.clock)
        yield api
