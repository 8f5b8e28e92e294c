"""The stack as template.yaml deploys it, every function in its own container under its own role,
with the real AWS adapters talking to contract fakes.

``deployed_stack(deployment, tmp_path)`` builds, for one set of template parameters (a
:class:`Deployment`):

* the translated template resolved for those parameters (``tests/aws_contracts/roles.py``), and from
  it each function's **environment as deployed** (Globals merged by the SAM transform, ``Ref``/
  ``GetAtt`` resolved to the test's resources) and each role's statements;
* one :class:`~ragchat.bootstrap.Container` per function from that environment, so each function
  builds its own clients and caches (what one function read is not what another may read): the
  real Titan/Cohere embedders and Bedrock Converse model (``tests/contract/fake_bedrock.py`` on the
  wire), the real OpenSearch adapter built by ``OpenSearchVectorIndex.connect`` (SigV4 over
  ``requests`` to ``tests/contract/opensearch_wire.py``) or the real S3 Vectors adapter
  (``tests/contract/s3vectors_wire.py``), DynamoDB, S3, Step Functions, SSM, Secrets Manager, KMS
  and Cognito's ListUsers on ``tests/contract/fake_cognito.py``;
* the IAM harness (``tests/aws_contracts/iam.py``) over all of it: each call is checked against the
  role of the function that makes it, threads included; the state machine's own calls (its Lambda
  tasks, the Distributed Map's item reader and child executions) against the state machine's role
  (``tests/aws_contracts/stepfunctions.py``); OpenSearch Serverless requests against
  ``aoss:APIAccessAll`` and the template's data-access policy; Bedrock's Marketplace check on the
  account's first call to a third-party model; a secret's KMS key through Secrets Manager;
* the streaming function (``chat_stream``) as the web server the Lambda Web Adapter runs
  (``ragchat.lambda_web``), started under its own role (:meth:`DeployedStack.streaming`).

A denied call raises ``AccessDenied`` as AWS would, and the fixture's teardown fails the test.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.aws_contracts.iam import IamChecker, acting, acting_as
from tests.aws_contracts.limits import check_lambda_payload, check_state_io
from tests.aws_contracts.policy import Request
from tests.aws_contracts.roles import ACCOUNT, STACK_ID, Roles
from tests.integration.moto_stack import (
    COUNTERS,
    REGION,
    STEPS_FUNCTION,
    TABLES,
    USER_POOL,
    Stack,
    create_ingest_state_machine,
    load_function,
)

STATE_MACHINE = "ragchat-dev-1b2c3d4e-ingest"  # the template's name (stage dev, the stack id's first part)
COLLECTION_ID = "k3xq7v9rragchat01"
COLLECTION_ENDPOINT = f"https://{COLLECTION_ID}.{REGION}.aoss.amazonaws.com"
DOMAIN_ENDPOINT = f"https://search-ragchat-notes-abc123.{REGION}.es.amazonaws.com"
DOMAIN_ARN = f"arn:aws:es:{REGION}:{ACCOUNT}:domain/ragchat-notes"
ANSWERABILITY = "/ragchat/dev-1b2c3d4e/answerability"  # the template's name


@dataclass(frozen=True)
class Deployment:
    """Template parameters of one way to deploy, and whether it reads an Anthropic key secret (made
    in moto under a customer managed KMS key; its ARNs become AnthropicApiKeySecret*Arn)."""

    name: str
    params: Mapping[str, str]
    secret: bool = False


DEPLOYMENTS = (
    # the defaults (Titan, Claude through the Region's geography profile) on OpenSearch Serverless
    # NextGen (the default store is S3 Vectors, which the next deployment covers)
    Deployment("default", {"VectorStore": "opensearch-nextgen"}),
    # S3 Vectors, Cohere Embed, Claude through a global profile (the Region-less model ARN too)
    Deployment(
        "s3vectors-cohere-global",
        {
            "VectorStore": "s3vectors",
            "Embedder": "cohere",
            "BedrockChatModelId": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        },
    ),
    # an existing OpenSearch Service domain; answers by auto (Anthropic if its secret holds a key,
    # else extractive): the secret is read, under a customer managed key
    Deployment(
        "domain-anthropic-secret",
        {
            "VectorStore": "existing-domain",
            "ExistingOpenSearchEndpoint": DOMAIN_ENDPOINT,
            "ExistingOpenSearchDomainArn": DOMAIN_ARN,
            "ChatModelProvider": "auto",
        },
        secret=True,
    ),
)


@dataclass
class DeployedStack(Stack):
    """:class:`Stack` with one container per function (``containers``: logical id -> container)."""

    deployment: Deployment = DEPLOYMENTS[0]
    roles: Roles | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    containers: dict[str, Any] = field(default_factory=dict)
    bedrock: Any = None
    cluster: Any = None
    vectors: Any = None
    user_pool: str = ""
    pool: Any = None  # tests/contract/fake_cognito.FakeUserPool

    def handler(self, area: str) -> Callable[[dict[str, Any], Any], Any]:
        principal = self.functions[area]
        container = self.containers[principal]
        inner = load_function(area).lambda_handler.with_container(lambda: container)

        def invoke(event: dict[str, Any], context: Any) -> Any:
            from aws_lambda_powertools.utilities.parameters import base as parameters

            # Powertools keeps its parameter clients and cached values module-wide: in one test
            # process that would let one function read what another fetched (each Lambda has its own)
            parameters.DEFAULT_PROVIDERS.clear()
            check_lambda_payload(f"{principal} request", event)
            with acting_as(principal):
                response = inner(event, context)
            check_lambda_payload(f"{principal} response", response)
            return response

        return invoke

    @contextlib.contextmanager
    def streaming(self) -> Iterator[StreamClient]:
        """``chat_stream``'s server (``ragchat.lambda_web``), started under ChatStreamFunction's role:
        every thread it starts and every request it serves acts as that role."""
        from ragchat.lambda_web import create_server

        principal = self.functions["chat_stream"]
        with acting_as(principal):
            server = create_server(self.containers[principal], port=0)
            thread = threading.Thread(target=server.serve_forever, name="chat-stream", daemon=True)
            thread.start()
        try:
            yield StreamClient(server.server_address[1])
        finally:
            server.shutdown()
            server.server_close()
            thread.join(10)


@dataclass
class StreamClient:
    """What the Lambda Web Adapter sends the streaming function: the request with API Gateway's
    request context in ``x-amzn-request-context``."""

    port: int
    count: int = 0

    def send(
        self, method: str, path: str, sub: str, body: Any = None, accept: str = "application/json"
    ) -> tuple[int, dict[str, str], bytes]:
        self.count += 1
        context = {
            "resourcePath": "/chat/conversations/{id}/messages",
            "stage": "Prod",
            "requestId": f"apigw-{self.count}",
            "identity": {"sourceIp": "198.51.100.7"},
            "authorizer": {"claims": {"sub": sub}},
        }
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            data = json.dumps(body).encode() if body is not None else None
            headers = {
                "Content-Type": "application/json",
                "Accept": accept,
                "x-amzn-request-context": json.dumps(context),
                "x-amzn-lambda-context": json.dumps({"request_id": f"lambda-{self.count}"}),
            }
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


def stack_names(stack_id: str) -> dict[str, str]:
    """The names template.yaml gives a stack of stage dev (``stack_id``: its ARN) in the test account."""
    short = stack_id.rsplit("/", 1)[1].split("-")[0]
    return {
        "bucket": f"ragchat-dev-documents-{ACCOUNT}-{short}",
        "state_machine": f"ragchat-dev-{short}-ingest",
        "answerability": f"/ragchat/dev-{short}/answerability",
        "vector_bucket": f"ragchat-dev-{short}-vectors-{ACCOUNT}",
    }


def _physical(deployment: Deployment, machine_arn: str, user_pool: str, stack_id: str) -> dict[str, str]:
    names = stack_names(stack_id)
    vectors = f"arn:aws:s3vectors:{REGION}:{ACCOUNT}:bucket/{names['vector_bucket']}"
    return {
        "DocumentsTable": TABLES["documents"],
        "ConversationsTable": TABLES["conversations"],
        "CountersTable": COUNTERS,
        "DocumentsBucket": names["bucket"],
        "IngestStateMachine": machine_arn,
        "IngestStepsFunction": STEPS_FUNCTION,
        "UserPool": user_pool,
        "UserPoolClient": "ragchatclient01",
        "AnswerabilityParameter": names["answerability"],
        "VectorCollection": COLLECTION_ID,
        "VectorCollection.Arn": f"arn:aws:aoss:{REGION}:{ACCOUNT}:collection/{COLLECTION_ID}",
        "VectorCollection.CollectionEndpoint": COLLECTION_ENDPOINT,
        "NotesVectorBucket.VectorBucketArn": vectors,
        "NotesVectorIndex.IndexArn": f"{vectors}/index/ragchat-notes",
    }


def _opensearch_authorizer(
    checker: IamChecker, service: str, collection_arn: str, collection: str
) -> Callable[[str, str, str], None]:
    from botocore.exceptions import ClientError

    from tests.aws_contracts.opensearch import domain_request, serverless_permission
    from tests.contract.opensearch_wire import Forbidden

    def authorize(method: str, path: str, signed_for: str) -> None:
        principal = acting()
        if signed_for != service:
            raise Forbidden(f"the request is signed for {signed_for!r}, the endpoint is {service!r}")
        if principal is None:
            return  # the test's own look (setup, assertions)
        try:
            if service == "aoss":
                checker.check(principal, Request("aoss:APIAccessAll", collection_arn, {}))
                checker.check_data_access(principal, serverless_permission(method, path, collection))
            else:
                checker.check(principal, domain_request(method, path, DOMAIN_ARN))
        except ClientError as exc:
            raise Forbidden(exc.response["Error"]["Message"]) from None

    return authorize


def _absent_keys_need_list(prefix: str, operation: str, params: Mapping[str, Any]) -> list[Request]:
    """S3 answers a read of an absent key 404 only to a caller that may list the bucket (else 403,
    which the code cannot tell from a real denial): such a read needs ``s3:ListBucket`` too."""
    if prefix != "s3" or operation not in ("GetObject", "HeadObject") or "Key" not in params:
        return []
    from moto.s3.models import s3_backends

    bucket = s3_backends[ACCOUNT]["aws"].buckets.get(params["Bucket"])
    if bucket is None or params["Key"] in bucket.keys:
        return []
    return [Request("s3:ListBucket", f"arn:aws:s3:::{params['Bucket']}", {})]


def _secret_key_requests(key_arn: str) -> Callable[[str, str, Mapping[str, Any]], list[Request]]:
    """Secrets Manager decrypts a secret under a customer managed key with the caller's rights."""

    def implied(prefix: str, operation: str, params: Mapping[str, Any]) -> list[Request]:
        if prefix == "secretsmanager" and operation == "GetSecretValue":
            return [
                Request("kms:Decrypt", key_arn, {"kms:ViaService": f"secretsmanager.{REGION}.amazonaws.com"})
            ]
        return []

    return implied


@contextlib.contextmanager
def deployed_stack(
    deployment: Deployment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    stack_id: str = STACK_ID,
    in_account: bool = False,
    kept_vectors: Any = None,
) -> Iterator[DeployedStack]:
    """``stack_id``: the stack's ARN (its id names the bucket, state machine, ...). ``in_account``: the
    caller holds moto's account (``mock_aws``), so what an earlier stack kept is still there, and the
    tables and buckets the deployment's ``Existing*`` parameters name are used, not created;
    ``kept_vectors``: that earlier stack's S3 Vectors fake (its bucket and index, with their vectors)."""
    import boto3
    from aws_lambda_powertools.utilities.parameters import base as parameters
    from moto import mock_aws
    from moto.awslambda.models import LambdaFunction
    from ragchat.adapters.aws.tables import COUNTERS_TABLE, COUNTERS_TTL, create_tables
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    from tests.aws_contracts.opensearch import data_access_policies
    from tests.aws_contracts.roles import resolve_template, roles_of, translated_template
    from tests.aws_contracts.stepfunctions import executions_act_as
    from tests.contract.fake_bedrock import FakeBedrock
    from tests.contract.fake_cognito import FakeUserPool
    from tests.contract.fake_opensearch import FakeCluster
    from tests.contract.fake_s3vectors import FakeS3Vectors
    from tests.contract.opensearch_wire import OpenSearchWire
    from tests.contract.s3vectors_wire import S3VectorsWire

    template = translated_template()
    if template is None:
        pytest.skip("no .venv-sam (run `make validate` once)")
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    parameters.DEFAULT_PROVIDERS.clear()  # Powertools keeps its clients (and values) module-wide

    bedrock = FakeBedrock()
    names = stack_names(stack_id.format(region=REGION))
    machine_arn = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{names['state_machine']}"
    containers: dict[str, Any] = {}
    invocations: list[dict[str, Any]] = []
    holder: dict[str, Any] = {}

    def invoke_in_process(self: Any, event: Any = None) -> tuple[str, bool, str]:
        payload = json.loads(event) if isinstance(event, str) else (event or {})
        invocations.append(payload)
        assert self.function_name == STEPS_FUNCTION, self.function_name
        check_state_io("ingest step input", payload)
        check_lambda_payload("ingest step request", payload)
        try:
            with acting_as("IngestStepsFunction"):
                result = holder["steps"](payload, None)
        except Exception as exc:  # the Lambda runtime's unhandled-error shape
            return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}), True, ""
        check_lambda_payload("ingest step response", result)
        check_state_io("ingest step result", result)
        return json.dumps(result), False, ""

    monkeypatch.setattr(LambdaFunction, "_invoke_lambda", invoke_in_process)

    with contextlib.ExitStack() as stack:
        if not in_account:
            stack.enter_context(mock_aws(config={"stepfunctions": {"execute_state_machine": True}}))
        session = boto3.session.Session(region_name=REGION)
        params = dict(deployment.params)
        dynamodb = session.client("dynamodb")
        if "ExistingDocumentsTableName" in params:  # kept by an earlier stack: only the counters are new
            dynamodb.create_table(TableName=COUNTERS, **COUNTERS_TABLE)
            dynamodb.update_time_to_live(TableName=COUNTERS, TimeToLiveSpecification=COUNTERS_TTL)  # type: ignore[arg-type]
        else:
            create_tables(
                dynamodb,
                documents=TABLES["documents"],
                conversations=TABLES["conversations"],
                counters=COUNTERS,
            )
        s3 = session.client("s3")
        if "ExistingDocumentsBucketName" not in params:
            s3.create_bucket(Bucket=names["bucket"])
        user_pool = params.get("ExistingUserPoolId", USER_POOL)
        session.client("ssm").put_parameter(Name=names["answerability"], Value="{}", Type="String")
        key_arn = ""
        if deployment.secret:
            key_arn = session.client("kms").create_key(Description="the team's key")["KeyMetadata"]["Arn"]
            secret = session.client("secretsmanager").create_secret(
                Name="ragchat/anthropic", SecretString="paste-your-key-here", KmsKeyId=key_arn
            )
            params.update(AnthropicApiKeySecretArn=secret["ARN"], AnthropicApiKeySecretKmsKeyArn=key_arn)

        resources = resolve_template(
            template,
            REGION,
            _physical(deployment, machine_arn, user_pool, stack_id),
            stack_id=stack_id,
            **params,
        )
        roles = roles_of(resources, template["Resources"])
        checker = IamChecker(
            roles.statements,
            REGION,
            implied=[bedrock.implied_requests, _absent_keys_need_list]
            + ([_secret_key_requests(key_arn)] if key_arn else []),
            data_policies=data_access_policies(resources),
            role_arns=roles.role_arns,
        )
        stack.enter_context(checker.installed())
        stack.enter_context(executions_act_as(roles.state_machine, checker))
        stack.enter_context(bedrock.installed())
        pool = FakeUserPool(user_pool)
        stack.enter_context(pool.installed())

        env_of = {
            lid: dict(resources[lid]["Properties"].get("Environment", {}).get("Variables", {}))
            for lid in roles.functions_by_area.values()
        }
        store = env_of["NotesApiFunction"].get("RAGCHAT_VECTOR_INDEX")
        cluster = vectors = None
        if store == "s3vectors":
            env = env_of["NotesApiFunction"]
            vectors = kept_vectors or FakeS3Vectors(env["S3VECTORS_BUCKET"], env["S3VECTORS_INDEX"], 1024)
            # the functions address the bucket and index the template gives them: the kept ones
            assert (vectors.bucket, vectors.index) == (env["S3VECTORS_BUCKET"], env["S3VECTORS_INDEX"])
            stack.enter_context(S3VectorsWire(vectors).installed())
        else:
            env = env_of["NotesApiFunction"]
            service = env["OPENSEARCH_SERVICE"]
            cluster = FakeCluster(serverless=service == "aoss")
            collection = str(resources.get("VectorCollection", {}).get("Properties", {}).get("Name", ""))
            authorize = _opensearch_authorizer(
                checker, service, f"arn:aws:aoss:{REGION}:{ACCOUNT}:collection/{COLLECTION_ID}", collection
            )
            stack.enter_context(OpenSearchWire(cluster, env["OPENSEARCH_ENDPOINT"], authorize).installed())

        bucket = resources["IngestStateMachine"]["Properties"]["DefinitionSubstitutions"]["DocumentsBucket"]
        assert create_ingest_state_machine(session, names["state_machine"], bucket) == machine_arn
        sfn = session.client("stepfunctions")

        # small chunks (one a batch, tests/integration/scenario.py): a note of a few KB takes the
        # Distributed Map, whose children are what its checks are about
        env_of["IngestStepsFunction"].update(CHUNK_SIZE="200", CHUNK_OVERLAP="0")
        for lid, env in env_of.items():
            env.update(AWS_REGION=REGION, RAGCHAT_DATA_DIR=str(tmp_path / lid))
            containers[lid] = Container(load_settings(env))
            stack.callback(containers[lid].close)
        holder["steps"] = load_function("ingest_steps").lambda_handler.with_container(
            lambda: containers["IngestStepsFunction"]
        )
        deployed = DeployedStack(
            containers["NotesApiFunction"],
            None,
            sfn,
            s3,
            machine_arn,
            invocations,
            dict(roles.functions_by_area),
            checker,
            deployment=deployment,
            roles=roles,
            resources=resources,
            containers=containers,
            bedrock=bedrock,
            cluster=cluster,
            vectors=vectors,
            user_pool=user_pool,
            pool=pool,
        )
        yield deployed
    parameters.DEFAULT_PROVIDERS.clear()
    checker.assert_all_allowed()
