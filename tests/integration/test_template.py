"""What CloudFormation would really get from ``template.yaml`` after the SAM transform.

``cfn-lint`` and ``sam validate`` say the template is well formed; these tests say it is *right*:
every route the app serves is wired to the function that serves it (a route missing here would be a
403 "Missing Authentication Token" in production), the Cognito API and the machine-client API ask for
the right credential on every method, streaming goes to the streaming function, and no data-plane
permission is granted on ``*``.

The transform runs in the SAM virtualenv (``scripts/sam_transform.py``; aws-sam-translator pins a
pydantic the app can't share), which ``make validate`` creates before the tests run.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAM_PYTHON = ROOT / ".venv-sam" / "bin" / "python"
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}
# the web_ui function's pages and documents: browser-facing, not for API-key machine clients
BROWSER_ONLY = {("GET", "/health"), ("GET", "/openapi.json"), ("GET", "/swagger"), ("GET", "/ui"),
                ("GET", "/ui/c/{}"), ("GET", "/write"), ("GET", "/documents/ui"),
                ("GET", "/static/{}"), ("GET", "/favicon.ico")}  # fmt: skip
STREAMED = ("POST", "/chat/conversations/{}/messages")
FUNCTIONS = {"NotesApiFunction", "ChatApiFunction", "ChatStreamFunction", "WebUiFunction",
             "IngestStepsFunction", "S3IngestFunction"}  # fmt: skip
# Served by ``ragchat serve`` only: in the cloud the presigned POST goes to S3 itself.
LOCAL_ONLY = {("POST", "/uploads/local/{}")}


@cache
def transformed(**params: str) -> dict[str, Any]:
    if not SAM_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(".venv-sam is missing: `make validate` creates it before the tests")
        pytest.skip("no .venv-sam (run `make validate` once)")
    args = [str(SAM_PYTHON), "scripts/sam_transform.py", "template.yaml"]
    args += [f"{k}={v}" for k, v in params.items()]
    out = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def resources(**params: str) -> dict[str, Any]:
    res: dict[str, Any] = transformed(**params)["Resources"]
    return res


NO_VALUE = object()
# CloudFormation's pseudo parameters, as a deploy to account 123456789012 would see them
PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "ragchat-dev",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/ragchat-dev/"
    "1b2c3d4e-aaaa-bbbb-cccc-000011112222",
}


def effective(region: str = "us-east-1", **params: str) -> dict[str, Any]:
    """The resources CloudFormation would create for these parameter values in ``region``:
    conditions evaluated, resources whose condition is false dropped, ``Fn::If`` resolved,
    ``AWS::NoValue`` removed, and ``Fn::Sub``/``Join``/``Select``/``Split`` computed wherever they only
    use parameters and pseudo parameters (a reference to a resource stays as it is)."""
    return _evaluate(transformed(**params), region, params)["Resources"]


def effective_outputs(region: str = "us-east-1", **params: str) -> dict[str, Any]:
    return _evaluate(transformed(**params), region, params)["Outputs"]


def _evaluate(template: dict[str, Any], region: str, params: dict[str, str]) -> dict[str, Any]:
    values = {name: str(spec.get("Default", "")) for name, spec in template["Parameters"].items()}
    values.update({**PSEUDO, "AWS::Region": region})
    values["AWS::StackId"] = PSEUDO["AWS::StackId"].replace("us-east-1", region)
    values.update(params)

    def holds(name: str) -> bool:
        result = resolve(template["Conditions"][name])
        assert isinstance(result, bool), (name, result)
        return result

    def resolve(node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (resolve(v) for v in node) if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((fn, args),) = node.items()
            if fn == "Ref":
                return NO_VALUE if args == "AWS::NoValue" else values.get(args, node)
            if fn == "Condition":
                return holds(args)
            if fn == "Fn::If":
                name, yes, no = args
                return resolve(yes if holds(name) else no)
            if fn in ("Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or"):
                got = [resolve(a) for a in args]
                return {"Fn::Equals": lambda: str(got[0]) == str(got[1]), "Fn::Not": lambda: not got[0],
                        "Fn::And": lambda: all(got), "Fn::Or": lambda: any(got)}[fn]()  # fmt: skip
            if fn in ("Fn::Sub", "Fn::Join", "Fn::Select", "Fn::Split"):
                return _function(fn, resolve(args), values, node)
        out = {k: resolve(v) for k, v in node.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    return {
        "Resources": {
            logical_id: resolve(resource)
            for logical_id, resource in template["Resources"].items()
            if "Condition" not in resource or holds(resource["Condition"])
        },
        "Outputs": {
            name: resolve(output)
            for name, output in template.get("Outputs", {}).items()
            if "Condition" not in output or holds(output["Condition"])
        },
    }


def _function(fn: str, args: Any, values: dict[str, str], node: Any) -> Any:
    """``Fn::Sub``/``Join``/``Select``/``Split`` over resolved arguments; ``node`` unchanged when an
    argument is still unresolved (a resource reference)."""
    if fn == "Fn::Sub":
        text, variables = (args, {}) if isinstance(args, str) else args
        names = re.findall(r"\$\{([^}!]+)\}", text)
        known = {**values, **variables}
        if not all(isinstance(known.get(n), str) for n in names):
            return {fn: args}
        return re.sub(r"\$\{([^}!]+)\}", lambda m: known[m.group(1)], text)
    if fn == "Fn::Join":
        sep, items = args
        return sep.join(items) if all(isinstance(i, str) for i in items) else {fn: args}
    if fn == "Fn::Split":
        sep, text = args
        return text.split(sep) if isinstance(text, str) else {fn: args}
    index, items = args
    return items[int(index)] if isinstance(items, list) else {fn: args}


def normalize(path: str) -> str:
    """``/documents/<document_id>`` (Powertools) and ``/documents/{id}`` (API Gateway) → ``/documents/{}``."""
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path)


def api_methods(api: str, **params: str) -> dict[tuple[str, str], dict[str, Any]]:
    paths = resources(**params)[api]["Properties"]["Body"]["paths"]
    return {
        (verb.upper(), normalize(path)): spec
        for path, item in paths.items()
        for verb, spec in item.items()
        if verb in HTTP_METHODS
    }


def target_function(method: dict[str, Any]) -> str:
    uri = json.dumps(method["x-amazon-apigateway-integration"]["uri"])
    found = re.search(r"\$\{(\w+Function)[.\w]*\}", uri)
    assert found, uri
    return found.group(1)


def function_areas() -> dict[str, set[str]]:
    """Template function → the app areas its handler serves (from ``functions/*/app.py``)."""
    res = resources()
    areas: dict[str, set[str]] = {}
    for logical_id, resource in res.items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        code = resource["Properties"]["Code"]["S3Key"]  # packaged from CodeUri: <id>/functions/<dir>
        folder = ROOT / code.split("/", 1)[1]
        app = folder / "app.py"
        if app.exists():
            found = re.search(r"http_handler\((\{[^}]*\})\)", app.read_text())
            if found:
                areas[logical_id] = set(ast.literal_eval(found.group(1)))
    return areas


def app_routes(areas: set[str] | None = None) -> set[tuple[str, str]]:
    from ragchat.api.app import create_app

    from tests.unit.api_support import make_api

    app = create_app(make_api().container, areas=areas)
    routes = [*app._static_routes, *app._dynamic_routes]
    return {(r.method.upper(), normalize(r.path)) for r in routes} - LOCAL_ONLY


# ------------------------------------------------------------------------------------------ routes


def test_every_route_of_the_app_is_on_the_cognito_api_and_nothing_else_is() -> None:
    assert set(api_methods("RagchatApi")) == app_routes()


def test_each_route_goes_to_a_function_whose_handler_serves_it() -> None:
    areas = function_areas()
    assert set(areas) >= {"NotesApiFunction", "ChatApiFunction", "WebUiFunction"}
    for api in ("RagchatApi", "MachineApi"):
        for route, method in api_methods(api).items():
            function = target_function(method)
            if route == STREAMED:
                assert function == "ChatStreamFunction", (api, route)
                assert route in app_routes({"chat"})
                continue
            assert function in areas, (api, route, function)
            assert route in app_routes(areas[function]), (api, route, function)


def test_machine_clients_get_every_data_route_but_no_browser_pages() -> None:
    assert set(api_methods("MachineApi")) == app_routes() - BROWSER_ONLY


# -------------------------------------------------------------------------------------------- auth


# no user data behind these: /health, the HTML page shells (the page signs in with Cognito itself) and
# their static assets (/static/*, the /favicon.ico browsers ask for on every page load)
OPEN_ROUTES = {("GET", "/health"), ("GET", "/ui"), ("GET", "/ui/c/{}"), ("GET", "/write"),
               ("GET", "/documents/ui"), ("GET", "/static/{}"), ("GET", "/favicon.ico")}  # fmt: skip


def test_the_cognito_api_needs_a_user_token_everywhere_but_health_and_the_pages_never_an_api_key() -> None:
    methods = api_methods("RagchatApi")
    assert set(methods) >= OPEN_ROUTES
    for route, method in methods.items():
        expected: list[dict[str, list[str]]] = (
            [{"NONE": []}] if route in OPEN_ROUTES else [{"CognitoAuthorizer": []}]
        )
        assert method["security"] == expected, route
        assert "api_key" not in json.dumps(method["security"]), route


def test_the_wildcard_cors_of_the_api_lets_no_other_origin_act_without_the_token() -> None:
    """docs/security.md ("The deployed API"): ``Access-Control-Allow-Origin: *`` is safe only because
    no request is authenticated by anything a browser attaches on its own. Cognito reads the
    ``Authorization`` header, the machine API ``x-api-key``; credentials are never allowed cross-origin
    (a browser sends no cookie with a ``*`` CORS request); the routes without a token are GETs of
    pages that hold no user data."""
    body = resources()["RagchatApi"]["Properties"]["Body"]
    preflights = [item["options"] for item in body["paths"].values() if "options" in item]
    assert preflights
    for preflight in preflights:
        headers = preflight["x-amazon-apigateway-integration"]["responses"]["default"]["responseParameters"]
        assert headers["method.response.header.Access-Control-Allow-Origin"] == "'*'"
        assert not [h for h in headers if "Allow-Credentials" in h]
    (authorizer,) = body["securityDefinitions"].values()
    assert (authorizer["in"], authorizer["name"]) == ("header", "Authorization")
    for api in ("RagchatApi", "MachineApi"):
        for (verb, path), method in api_methods(api).items():
            if method["security"] == [{"NONE": []}]:
                assert verb == "GET" and (verb, path) in OPEN_ROUTES, (api, verb, path)


def test_the_pages_sign_in_with_the_stacks_user_pool_client() -> None:
    env = resources()["WebUiFunction"]["Properties"]["Environment"]["Variables"]
    assert env["COGNITO_CLIENT_ID"] == {"Ref": "UserPoolClient"}


@pytest.mark.parametrize("enable", ["true", "false"])
def test_the_machine_api_needs_an_api_key_on_every_route_and_no_user_token(enable: str) -> None:
    methods = api_methods("MachineApi", EnableApiKeys=enable)
    assert methods
    for route, method in methods.items():
        assert method["security"] == [{"api_key": []}], route
    body = resources(EnableApiKeys=enable)["MachineApi"]["Properties"]["Body"]
    assert body["securityDefinitions"]["api_key"] == {"type": "apiKey", "name": "x-api-key", "in": "header"}


def test_the_usage_plan_and_key_exist_only_with_enable_api_keys_and_belong_to_the_machine_api() -> None:
    res = resources(EnableApiKeys="true")
    conditions = transformed(EnableApiKeys="true")["Conditions"]
    assert conditions["UseApiKeys"] == {"Fn::Equals": [{"Ref": "EnableApiKeys"}, "true"]}
    for name in ("ApiUsagePlan", "ApiKey", "ApiUsagePlanKey"):
        assert res[name]["Condition"] == "UseApiKeys", name
    (stage,) = res["ApiUsagePlan"]["Properties"]["ApiStages"]
    assert stage["ApiId"] == {"Ref": "MachineApi"}
    assert res["ApiKey"]["Properties"]["StageKeys"][0]["RestApiId"] == {"Ref": "MachineApi"}
    assert res["ApiUsagePlan"]["Properties"]["Quota"]["Period"] == "DAY"


# --------------------------------------------------------------------------------------- streaming


def test_message_posts_stream_through_the_lambda_web_adapter_function() -> None:
    for api in ("RagchatApi", "MachineApi"):
        integration = api_methods(api)[STREAMED]["x-amazon-apigateway-integration"]
        assert integration["responseTransferMode"] == "STREAM", api
        assert "/response-streaming-invocations" in json.dumps(integration["uri"]), api
    fn = effective()["ChatStreamFunction"]["Properties"]
    env = fn["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/health"
    assert fn["Handler"] == "run.sh"
    assert any("LambdaAdapterLayerArm64" in json.dumps(layer) for layer in fn["Layers"])
    assert fn["Architectures"] == ["arm64"]
    run_sh = ROOT / "functions" / "chat_stream" / "run.sh"
    assert os.access(run_sh, os.X_OK)


def test_warm_streaming_sandboxes_are_opt_in() -> None:
    alias = resources()["ChatStreamFunctionAliaslive"]["Properties"]
    assert alias["ProvisionedConcurrencyConfig"]["Fn::If"][0] == "WarmChatStream"
    condition = transformed()["Conditions"]["WarmChatStream"]
    assert condition == {"Fn::Not": [{"Fn::Equals": [{"Ref": "ChatStreamProvisionedConcurrency"}, 0]}]}
    params = transformed()["Parameters"]["ChatStreamProvisionedConcurrency"]
    assert params["Default"] == 0


# ------------------------------------------------------------------------------------ functions/IAM


def statements(node: Any) -> Iterator[dict[str, Any]]:
    """Every IAM statement under ``node``, through ``Fn::If`` branches."""
    if isinstance(node, dict):
        if "Effect" in node and ("Action" in node or "NotAction" in node):
            yield node
            return
        for value in node.values():
            yield from statements(value)
    elif isinstance(node, list):
        for value in node:
            yield from statements(value)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# actions that only exist account-wide (no resource ARN): log delivery for the state machine's logs
# actions IAM defines with no resource type (they only take "*")
RESOURCELESS = re.compile(
    r"^logs:((Create|Get|Update|Delete|List)LogDeliver(y|ies)"
    r"|PutResourcePolicy|DescribeResourcePolicies|DescribeLogGroups)$"
    r"|^aws-marketplace:(ViewSubscriptions|Subscribe)$"
    r"|^textract:DetectDocumentText$"
)


def test_no_data_plane_permission_is_granted_on_every_resource() -> None:
    for logical_id, resource in resources().items():
        if resource["Type"] not in ("AWS::IAM::Role", "AWS::IAM::ManagedPolicy"):
            continue
        props = resource["Properties"]
        for statement in statements([props.get("Policies", []), props.get("PolicyDocument", {})]):
            if "*" in as_list(statement["Resource"]):
                actions = as_list(statement["Action"])
                loose = [a for a in actions if not RESOURCELESS.match(a)]
                assert not loose, (logical_id, loose)


def test_every_role_that_may_search_the_collection_is_in_its_data_access_policy() -> None:
    res = resources()
    search_policies = {
        k for k, v in res.items() if v["Type"] == "AWS::IAM::ManagedPolicy" and "aoss:" in json.dumps(v)
    }
    needs = set()
    for logical_id, resource in res.items():
        if resource["Type"] != "AWS::IAM::Role":
            continue
        props = resource["Properties"]
        managed = {ref.get("Ref") for ref in props.get("ManagedPolicyArns", []) if isinstance(ref, dict)}
        if "aoss:APIAccessAll" in json.dumps(props.get("Policies", [])) or managed & search_policies:
            needs.add(logical_id)
    assert {"ChatApiFunctionRole", "ChatStreamFunctionRole", "IngestStepsFunctionRole"} <= needs
    text, variables = res["CollectionAccessPolicy"]["Properties"]["Policy"]["Fn::Sub"]
    (rule,) = json.loads(text)
    principals = {variables[name[2:-1]]["Fn::GetAtt"][0] for name in rule["Principal"]}
    assert principals == needs


@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_every_function_is_python312_on_the_chosen_architecture_with_the_shared_layer(arch: str) -> None:
    params = {} if arch == "arm64" else {"Architecture": arch}
    res = effective(**params)
    functions = {k: v for k, v in res.items() if v["Type"] == "AWS::Lambda::Function"}
    assert set(functions) == FUNCTIONS
    layers = {k: v for k, v in res.items() if v["Type"] == "AWS::Lambda::LayerVersion"}
    (layer_id,) = layers  # one ragchat layer, built for that architecture
    assert layers[layer_id]["Properties"]["CompatibleArchitectures"] == [arch]
    for logical_id, fn in functions.items():
        props = fn["Properties"]
        assert props["Runtime"] == "python3.12", logical_id
        assert props["Architectures"] == [arch], logical_id
        assert {"Ref": layer_id} in props["Layers"], logical_id
    adapter = [
        layer
        for layer in functions["ChatStreamFunction"]["Properties"]["Layers"]
        if "LambdaAdapterLayer" in str(layer)
    ]
    name = "LambdaAdapterLayerArm64" if arch == "arm64" else "LambdaAdapterLayerX86"
    assert adapter == [f"arn:aws:lambda:us-east-1:753240598075:layer:{name}:26"]
    assert transformed()["Parameters"]["Architecture"]["Default"] == "arm64"


def test_the_state_machine_gets_every_substitution_its_definition_uses() -> None:
    definition = (ROOT / "statemachine" / "ingest.asl.json").read_text()
    used = set(re.findall(r"\$\{(\w+)\}", definition))
    assert used
    given = set(resources()["IngestStateMachine"]["Properties"]["DefinitionSubstitutions"])
    assert used == given
