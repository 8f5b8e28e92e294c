"""The template ``sam local`` runs (``scripts/sam-local/local_template.py``) and the local sign-in
(``scripts/sam-local/authorizer``): what a user of ``make sam-local`` / ``start-api`` relies on."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "sam-local"


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lt() -> ModuleType:
    return _module(SCRIPTS / "local_template.py", "sam_local_template")


@pytest.fixture(scope="module")
def local(lt: ModuleType) -> dict[str, Any]:
    out: dict[str, Any] = lt.local_template(lt.load(ROOT / "template.yaml"))
    return out


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        k: v["Properties"]
        for k, v in template["Resources"].items()
        if v["Type"] == "AWS::Serverless::Function"
    }


def _routes(template: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (name, e["Properties"]["Method"].upper(), e["Properties"]["Path"])
        for name, props in _functions(template).items()
        for e in (props.get("Events") or {}).values()
        if e["Type"] == "Api"
    ]


def test_every_route_is_served_once_and_none_by_the_machine_api(local: dict[str, Any]) -> None:
    routes = _routes(local)
    keys = [(method, path) for _, method, path in routes]
    assert len(keys) == len(set(keys))
    assert "MachineApi" not in local["Resources"]
    assert "MachineApi" not in json.dumps(local["Resources"])


def test_chat_turns_are_served_by_the_chat_api_function(local: dict[str, Any]) -> None:
    turn = ("POST", "/chat/conversations/{id}/messages")
    assert [name for name, m, p in _routes(local) if (m, p) == turn] == ["ChatApiFunction"]
    stream = _functions(local)["ChatStreamFunction"]
    assert "Layers" not in stream and not stream.get("Events")


def test_everything_runs_on_x86_64_with_no_layer_to_mount(local: dict[str, Any]) -> None:
    globals_ = local["Globals"]["Function"]
    assert globals_["Architectures"] == ["x86_64"]
    assert "Layers" not in globals_
    assert all("Layers" not in props for props in _functions(local).values())
    layers = [k for k, v in local["Resources"].items() if v["Type"] == "AWS::Serverless::LayerVersion"]
    assert layers == [local["Metadata"]["RagchatLocalLayer"]]
    layer = local["Resources"][layers[0]]
    assert layer["Metadata"]["BuildArchitecture"] == "x86_64" and "Condition" not in layer
    if "Architecture" in local["Parameters"]:
        assert local["Parameters"]["Architecture"]["Default"] == "x86_64"


def test_the_variables_env_local_json_sets_are_declared(local: dict[str, Any]) -> None:
    declared = set(local["Globals"]["Function"]["Environment"]["Variables"])
    for props in _functions(local).values():
        declared |= set((props.get("Environment") or {}).get("Variables") or {})
    wanted = set(json.loads((ROOT / "env.local.json").read_text())["Parameters"])
    assert wanted <= declared
    assert local["Globals"]["Function"]["Environment"]["Variables"]["RAGCHAT_DATA_DIR"].startswith("/tmp")


def test_the_api_signs_in_with_the_local_token(local: dict[str, Any]) -> None:
    auth = local["Resources"]["RagchatApi"]["Properties"]["Auth"]
    assert auth["DefaultAuthorizer"] == "LocalTokenAuthorizer"
    assert list(auth["Authorizers"]) == ["LocalTokenAuthorizer"]
    code = Path(_functions(local)["LocalTokenAuthorizerFunction"]["CodeUri"])
    assert (code / "app.py").is_file()


def test_paths_are_absolute_so_the_copy_builds_from_anywhere(local: dict[str, Any]) -> None:
    for props in _functions(local).values():
        assert Path(props["CodeUri"]).is_absolute() and Path(props["CodeUri"]).is_dir()


@pytest.fixture
def authorizer(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("RAGCHAT_API_TOKEN", "s3cret")
    monkeypatch.setenv("RAGCHAT_LOCAL_USER", "alice")
    return _module(SCRIPTS / "authorizer" / "app.py", "sam_local_authorizer")


@pytest.mark.parametrize(
    ("header", "effect"),
    [
        ("Bearer s3cret", "Allow"),
        ("bearer s3cret", "Allow"),
        ("Bearer nope", "Deny"),
        ("s3cret", "Deny"),
        ("", "Deny"),
    ],
)
def test_the_local_authorizer_admits_only_the_token(authorizer: ModuleType, header: str, effect: str) -> None:
    policy = authorizer.handler({"authorizationToken": header, "methodArn": "arn:x"}, None)
    assert policy["policyDocument"]["Statement"][0]["Effect"] == effect
    assert policy["principalId"] == "alice"


def test_without_a_token_configured_nobody_signs_in(
    authorizer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGCHAT_API_TOKEN", "")
    policy = authorizer.handler({"authorizationToken": "Bearer ", "methodArn": "arn:x"}, None)
    assert policy["policyDocument"]["Statement"][0]["Effect"] == "Deny"


def test_env_for_a_deployed_stack_points_every_store_at_the_stack() -> None:
    module = _module(SCRIPTS / "env_from_stack.py", "sam_local_env_from_stack")
    outputs = {
        "DocumentsTableName": "ragchat-dev-documents",
        "ConversationsTableName": "ragchat-dev-conversations",
        "CountersTableName": "ragchat-dev-counters",
        "DocumentsBucketName": "ragchat-dev-documents-1-us-east-1",
        "IngestStateMachineArn": "arn:aws:states:us-east-1:1:stateMachine:x",
        "OpenSearchEndpoint": "https://abc.us-east-1.aoss.amazonaws.com",
        "ApiUrl": "https://x.execute-api.us-east-1.amazonaws.com/dev",
    }
    env = module.env_from_outputs(outputs, "tok", "me")["Parameters"]
    assert env["RAGCHAT_BACKEND"] == "aws"
    assert env["DOCUMENTS_TABLE"] == "ragchat-dev-documents"
    assert env["DOCUMENTS_BUCKET"] == "ragchat-dev-documents-1-us-east-1"
    assert env["OPENSEARCH_SERVICE"] == "aoss"
    assert (env["RAGCHAT_API_TOKEN"], env["RAGCHAT_LOCAL_USER"]) == ("tok", "me")
    from ragchat.config import load_settings

    settings = load_settings(env)
    assert settings.backend == "aws" and settings.page_auth == "token"
    assert settings.vector_index_kind == "opensearch" and not settings.missing()

    s3v = dict(
        outputs, S3VectorsIndexArn="arn:aws:s3vectors:us-east-1:1:bucket/ragchat-dev-vectors-1/index/notes"
    )
    del s3v["OpenSearchEndpoint"]
    env = module.env_from_outputs(s3v, "tok", "me")["Parameters"]
    assert (env["S3VECTORS_BUCKET"], env["S3VECTORS_INDEX"]) == ("ragchat-dev-vectors-1", "notes")
    assert load_settings(env).vector_index_kind == "s3vectors" and not load_settings(env).missing()


def test_env_local_json_is_the_local_backend_signed_in_with_a_token() -> None:
    from ragchat.config import load_settings

    env = json.loads((ROOT / "env.local.json").read_text())["Parameters"]
    settings = load_settings(env)
    assert settings.backend == "local" and settings.embedder_kind == "minilm"
    assert str(settings.data_dir).startswith("/tmp/") and settings.page_auth == "token"
    assert settings.vector_index_kind == "sqlite" and not settings.missing()
