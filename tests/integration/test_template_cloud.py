"""The cloud shape after the SAM transform (issues 8 and 11): the vector store chosen by the
``VectorStore`` parameter (resources, IAM, environment), nothing unused, the S3 ingest dead-letter
queue, alarms and dashboard, reserved concurrency as a cost guard, and the state machine's patience
with a sleeping vector store. ``effective(**params)`` evaluates the template's conditions the way
CloudFormation would for those parameter values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_template import FUNCTIONS, ROOT, as_list, effective, statements, transformed

DASHBOARD_METRICS = ("5XXError", "Turns", "GuardRefusals", "ModelFailures", "BreakerOpens",
                     "PhaseLatencyMs", "IngestionFailed", "IngestionSeconds",
                     "ApproximateNumberOfMessagesVisible", "Throttles")  # fmt: skip
STORES = ["s3vectors", "opensearch-nextgen", "existing-domain"]
EXISTING = {"ExistingOpenSearchEndpoint": "https://search-x.us-east-1.es.amazonaws.com",
            "ExistingOpenSearchDomainArn": "arn:aws:es:us-east-1:123456789012:domain/x"}  # fmt: skip
STORE_RESOURCES = {
    "opensearch-nextgen": {"VectorCollectionGroup", "VectorCollection", "CollectionAccessPolicy",
                           "CollectionEncryptionPolicy", "CollectionNetworkPolicy"},
    "s3vectors": {"NotesVectorBucket", "NotesVectorIndex"},
    "existing-domain": set(),
}  # fmt: skip


def store(vector_store: str) -> dict[str, Any]:
    params = {"VectorStore": vector_store, **(EXISTING if vector_store == "existing-domain" else {})}
    return effective(**params)


def role_statements(res: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """A role's inline statements plus those of the template's managed policies it attaches."""
    props = res[role]["Properties"]
    found = list(statements(props.get("Policies", [])))
    for ref in props.get("ManagedPolicyArns", []):
        if isinstance(ref, dict) and ref.get("Ref") in res:
            found += statements(res[ref["Ref"]]["Properties"]["PolicyDocument"])
    return found


def vector_actions(res: dict[str, Any], role: str) -> dict[str, Any]:
    """Vector-store action → its resource, for one role."""
    out = {}
    for st in role_statements(res, role):
        for action in as_list(st["Action"]):
            if action.split(":")[0] in ("aoss", "es", "s3vectors"):
                out[action] = st["Resource"]
    return out


def test_the_default_vector_store_is_an_s3_vectors_index_searchable_by_text() -> None:
    """Nothing to wake up, hybrid in the service: the chunk text is full-text searchable and stays
    out of the 2 KB of filterable metadata."""
    assert transformed()["Parameters"]["VectorStore"]["Default"] == "s3vectors"
    res = effective()
    assert "VectorCollection" not in res and "VectorCollectionGroup" not in res
    meta = res["NotesVectorIndex"]["Properties"]["MetadataConfiguration"]
    assert meta["NonFilterableMetadataKeys"] == ["text"]
    assert meta["TextSearchConfigurations"] == [{"MetadataKey": "text", "Language": "en"}]
    assert res["NotesVectorIndex"]["Properties"]["Dimension"] == 1024


def test_the_nextgen_vector_store_is_a_collection_group_that_scales_to_zero() -> None:
    res = effective(VectorStore="opensearch-nextgen")
    group = res["VectorCollectionGroup"]["Properties"]
    assert group["Generation"] == "NEXTGEN"
    assert group["CapacityLimits"]["MinIndexingCapacityInOcu"] == 0
    assert group["CapacityLimits"]["MinSearchCapacityInOcu"] == 0
    assert group["CapacityLimits"]["MaxSearchCapacityInOcu"] == "2"  # CollectionMaxOcu: the cost ceiling
    collection = res["VectorCollection"]
    assert collection["Properties"]["CollectionGroupName"] == group["Name"]
    assert collection["Properties"]["Type"] == "VECTORSEARCH"
    assert "VectorCollectionGroup" in collection["DependsOn"]


@pytest.mark.parametrize("vector_store", STORES)
def test_each_vector_store_creates_only_its_own_resources(vector_store: str) -> None:
    res = store(vector_store)
    for kind, wanted in STORE_RESOURCES.items():
        if kind == vector_store:
            assert wanted <= set(res), kind
        else:
            assert not (wanted - STORE_RESOURCES[vector_store]) & set(res), kind


def test_the_s3_vectors_index_matches_what_the_adapter_writes() -> None:
    from ragchat.adapters.aws.s3vectors import record_metadata
    from ragchat.domain.models import VectorRecord

    index = store("s3vectors")["NotesVectorIndex"]["Properties"]
    assert (index["DataType"], index["Dimension"], index["DistanceMetric"]) == ("float32", 1024, "cosine")
    assert index["MetadataConfiguration"]["NonFilterableMetadataKeys"] == ["text"]
    meta = record_metadata(VectorRecord("n", [1.0], "t", "o", "d", 0, "c"))
    assert "text" in meta and {"owner", "document_id", "collection", "enabled"} <= set(meta)


@pytest.mark.parametrize("vector_store", STORES)
def test_each_function_is_told_which_vector_store_to_use(vector_store: str) -> None:
    res = store(vector_store)
    for fn in FUNCTIONS:
        env = res[fn]["Properties"]["Environment"]["Variables"]
        assert env["ENABLE_RATE_LIMITING"] == "true", fn
        assert "IDEMPOTENCY_TABLE" not in env, fn
        if vector_store == "s3vectors":
            assert env["RAGCHAT_VECTOR_INDEX"] == "s3vectors"
            assert env["S3VECTORS_INDEX"] == "ragchat-notes"
            assert env["S3VECTORS_BUCKET"] == res["NotesVectorBucket"]["Properties"]["VectorBucketName"]
            assert "OPENSEARCH_ENDPOINT" not in env
        else:
            assert env["RAGCHAT_VECTOR_INDEX"] == "opensearch"
            assert "S3VECTORS_BUCKET" not in env
            if vector_store == "existing-domain":
                assert (env["OPENSEARCH_SERVICE"], env["OPENSEARCH_ENDPOINT"]) == (
                    "es",
                    EXISTING["ExistingOpenSearchEndpoint"],
                )
            else:
                assert env["OPENSEARCH_SERVICE"] == "aoss"
                assert env["OPENSEARCH_ENDPOINT"] == {
                    "Fn::GetAtt": ["VectorCollection", "CollectionEndpoint"]
                }


@pytest.mark.parametrize("vector_store", STORES)
def test_vector_permissions_follow_the_store_and_only_the_roles_that_use_it_get_them(
    vector_store: str,
) -> None:
    res = store(vector_store)
    index_arn = {"Fn::GetAtt": ["NotesVectorIndex", "IndexArn"]}
    writers, readers = (
        {"NotesApiFunctionRole", "IngestStepsFunctionRole"},
        {"ChatApiFunctionRole", "ChatStreamFunctionRole"},
    )
    for role in ("S3IngestFunctionRole", "WebUiFunctionRole"):
        assert vector_actions(res, role) == {}, role
    for role in writers | readers:
        actions = vector_actions(res, role)
        if vector_store == "s3vectors":
            expected = {"s3vectors:QueryVectors", "s3vectors:GetVectors"}
            if role in writers:
                expected |= {"s3vectors:PutVectors", "s3vectors:DeleteVectors"}
            assert actions == dict.fromkeys(expected, index_arn), role
        elif vector_store == "existing-domain":
            assert {"es:ESHttpGet", "es:ESHttpPost"} <= set(actions) and all(
                a.startswith("es:") for a in actions
            )
            assert ("es:ESHttpDelete" in actions) == (role in writers), role
        else:
            assert actions == {"aoss:APIAccessAll": {"Fn::GetAtt": ["VectorCollection", "Arn"]}}, role


def test_nothing_unused_is_provisioned() -> None:
    res = effective()
    assert not any("Idempotency" in logical_id for logical_id in res)
    assert "Idempotency" not in json.dumps(transformed()["Outputs"])


def test_failed_s3_ingest_events_go_to_an_alarmed_dead_letter_queue() -> None:
    res = effective()
    config = res["S3IngestFunctionEventInvokeConfig"]["Properties"]
    assert config["FunctionName"] == {"Ref": "S3IngestFunction"}
    dlq = {"Fn::GetAtt": ["S3IngestDeadLetterQueue", "Arn"]}
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == dlq
    assert config["MaximumRetryAttempts"] == 2
    sends = [
        st
        for st in role_statements(res, "S3IngestFunctionRole")
        if "sqs:SendMessage" in as_list(st["Action"])
    ]
    assert [st["Resource"] for st in sends] == [dlq]
    alarm = res["S3IngestDeadLetterAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": ["S3IngestDeadLetterQueue", "QueueName"]}}
    ]
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")


def alarm_metrics(alarm: dict[str, Any]) -> set[tuple[str, str]]:
    props = alarm["Properties"]
    if "MetricName" in props:
        return {(props["Namespace"], props["MetricName"])}
    return {(m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"])
            for m in props["Metrics"] if "MetricStat" in m}  # fmt: skip


def test_alarms_watch_5xx_rate_breaker_ingestion_failures_and_dead_letters_and_notify_one_topic() -> None:
    res = effective()
    alarms = {k: v for k, v in res.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    watched = {k: alarm_metrics(v) for k, v in alarms.items()}
    assert watched == {
        "Api5xxRateAlarm": {("AWS/ApiGateway", "5XXError"), ("AWS/ApiGateway", "Count")},
        "BreakerOpenAlarm": {("ragchat", "BreakerOpens")},
        "IngestionFailedAlarm": {("ragchat", "IngestionFailed"), ("AWS/States", "ExecutionsFailed")},
        "IngestExecutionsStoppedAlarm": {
            ("AWS/States", "ExecutionsTimedOut"),
            ("ragchat", "IngestionReconciled"),
        },
        "S3IngestDeadLetterAlarm": {("AWS/SQS", "ApproximateNumberOfMessagesVisible")},
    }
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}], logical_id
        assert alarm["Properties"]["TreatMissingData"] == "notBreaching", logical_id
    api_name = res["RagchatApi"]["Properties"]["Name"]
    metrics = alarms["Api5xxRateAlarm"]["Properties"]["Metrics"]
    dims = [m["MetricStat"]["Metric"]["Dimensions"] for m in metrics if "MetricStat" in m]
    assert all({"Name": "ApiName", "Value": api_name} in d for d in dims)
    # the app's EMF metrics carry Powertools' default dimension service=POWERTOOLS_SERVICE_NAME
    env = res["ChatApiFunction"]["Properties"]["Environment"]["Variables"]
    assert alarms["BreakerOpenAlarm"]["Properties"]["Dimensions"] == [
        {"Name": "service", "Value": env["POWERTOOLS_SERVICE_NAME"]}
    ]
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "ragchat"
    assert "AlarmEmailSubscription" not in res
    assert "AlarmEmailSubscription" in effective(AlarmEmail="ops@example.com")
    body = json.dumps(res["Dashboard"]["Properties"]["DashboardBody"])
    for metric in DASHBOARD_METRICS:
        assert metric in body, metric


@pytest.mark.parametrize(("params", "api", "ingest"), [({}, None, None), ({"ApiReservedConcurrency": "3",
                         "IngestReservedConcurrency": "12"}, "3", "12"), ({"ApiReservedConcurrency": "-1",
                         "IngestReservedConcurrency": "-1"}, None, None)])  # fmt: skip
def test_reserved_concurrency_is_an_opt_in_cost_guard(
    params: dict[str, str], api: str | None, ingest: str | None
) -> None:
    res = effective(**params)
    for fn in FUNCTIONS:
        wanted = ingest if fn in ("IngestStepsFunction", "S3IngestFunction") else api
        assert res[fn]["Properties"].get("ReservedConcurrentExecutions") == wanted, fn


def test_the_index_steps_wait_for_a_sleeping_vector_store() -> None:
    """``VectorIndexWaking`` (the OpenSearch adapter's error once a wake-up outlasts its deadline) is
    retried by every step (each writes or deletes vectors), with pauses long enough for a 10-30 s wake-up."""
    definition = json.loads((ROOT / "statemachine" / "ingest.asl.json").read_text())

    def tasks(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        for name, state in states.items():
            yield name, state
            if "ItemProcessor" in state:
                yield from tasks(state["ItemProcessor"]["States"])

    waking = {}
    for name, state in tasks(definition["States"]):
        for retrier in state.get("Retry", []):
            if "VectorIndexWaking" in retrier["ErrorEquals"]:
                waking[name] = retrier
    # split and fail (and its further steps) remove earlier vectors, embed_index writes them, finalize
    # switches them on
    assert set(waking) == {
        "Split",
        "EmbedIndex",
        "EmbedIndexBatch",
        "Finalize",
        "MarkFailed",
        "MarkFailedMore",
    }
    for retrier in waking.values():
        pauses, pause = [], float(retrier["IntervalSeconds"])
        for _ in range(retrier["MaxAttempts"]):
            pauses.append(min(pause, retrier.get("MaxDelaySeconds", pause)))
            pause *= retrier["BackoffRate"]
        assert pauses[0] >= 5 and sum(pauses) >= 120 and retrier["JitterStrategy"] == "NONE"


@pytest.mark.parametrize("vector_store", STORES)
def test_every_function_starts_with_the_settings_the_template_gives_it(vector_store: str) -> None:
    """The app's start-up check (``Settings``) accepts each function's environment for each store
    (values CloudFormation fills in at deploy time stand in as placeholders)."""
    from ragchat.config import load_settings

    res = store(vector_store)
    for fn in FUNCTIONS:
        env = res[fn]["Properties"]["Environment"]["Variables"]
        settings = load_settings({k: v if isinstance(v, str) else "placeholder" for k, v in env.items()})
        assert settings.vector_index_kind == ("s3vectors" if vector_store == "s3vectors" else "opensearch"), (
            fn
        )
        assert settings.enable_rate_limiting, fn
