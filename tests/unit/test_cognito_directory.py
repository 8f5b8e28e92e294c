"""Members are added by ``sub`` or e-mail, resolved in the Cognito user pool (issue 32): the exact
``ListUsers`` requests (botocore Stubber on a real ``cognito-idp`` client, which validates them
against the service model) and how the answers become a user id."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from ragchat.adapters.aws.cognito import CognitoUserDirectory
from ragchat.adapters.local.directory import IdentityDirectory
from ragchat.domain.errors import TransientError, ValidationError
from ragchat.ports import UserDirectory

POOL = "eu-west-1_AbCdEf123"
BOB = "8b5e1f3a-2c4d-4e6f-8a9b-0c1d2e3f4a5b"


def user(sub: str, email: str) -> dict[str, Any]:
    """A ``UserType`` as ListUsers returns it with ``AttributesToGet=["sub"]`` (the pool's user name
    is the e-mail: ``UsernameAttributes: [email]``, the user name itself is the sub)."""
    return {
        "Username": sub,
        "Attributes": [{"Name": "sub", "Value": sub}],
        "UserCreateDate": datetime(2026, 1, 1, tzinfo=UTC),
        "UserLastModifiedDate": datetime(2026, 1, 2, tzinfo=UTC),
        "Enabled": True,
        "UserStatus": "CONFIRMED",
    }


def expected(flt: str) -> dict[str, Any]:
    return {"UserPoolId": POOL, "Filter": flt, "AttributesToGet": ["sub"], "Limit": 2}


@pytest.fixture
def stubbed() -> Iterator[tuple[CognitoUserDirectory, Stubber]]:
    client = boto3.client(
        "cognito-idp", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    with Stubber(client) as stub:
        yield CognitoUserDirectory(POOL, client), stub
        stub.assert_no_pending_responses()


def test_an_email_resolves_to_its_users_sub(stubbed: tuple[CognitoUserDirectory, Stubber]) -> None:
    directory, stub = stubbed
    stub.add_response(
        "list_users", {"Users": [user(BOB, "bob@example.com")]}, expected('email = "bob@example.com"')
    )

    assert directory.resolve("  bob@example.com ") == BOB
    assert isinstance(directory, UserDirectory)


def test_a_sub_is_checked_to_exist(stubbed: tuple[CognitoUserDirectory, Stubber]) -> None:
    directory, stub = stubbed
    stub.add_response("list_users", {"Users": [user(BOB, "bob@example.com")]}, expected(f'sub = "{BOB}"'))
    stub.add_response("list_users", {"Users": []}, expected('sub = "8b5e1f3a-typo"'))

    assert directory.resolve(BOB) == BOB
    assert directory.resolve("8b5e1f3a-typo") is None  # a mistyped sub adds nobody


def test_an_unknown_email_names_nobody(stubbed: tuple[CognitoUserDirectory, Stubber]) -> None:
    directory, stub = stubbed
    stub.add_response(
        "list_users", {"Users": [], "PaginationToken": "t"}, expected('email = "eve@example.com"')
    )

    assert directory.resolve("eve@example.com") is None


def test_quotes_and_backslashes_cannot_change_the_filter(
    stubbed: tuple[CognitoUserDirectory, Stubber],
) -> None:
    directory, stub = stubbed
    stub.add_response("list_users", {"Users": []}, expected('email = "a\\" or email ^= \\"\\\\@x"'))

    assert directory.resolve('a" or email ^= "\\@x') is None


def test_an_email_two_users_share_is_refused_rather_than_guessed(
    stubbed: tuple[CognitoUserDirectory, Stubber],
) -> None:
    directory, stub = stubbed
    users = [user(BOB, "x@example.com"), user("another-sub", "x@example.com")]
    stub.add_response("list_users", {"Users": users}, expected('email = "x@example.com"'))

    with pytest.raises(ValidationError, match="several users"):
        directory.resolve("x@example.com")


def test_machine_clients_and_bad_identifiers_need_no_lookup(
    stubbed: tuple[CognitoUserDirectory, Stubber],
) -> None:
    directory, _ = stubbed  # no response queued: any call would fail the test

    assert directory.resolve("apikey:k1") == "apikey:k1"
    assert directory.resolve("   ") is None
    with pytest.raises(ValidationError):
        directory.resolve("x" * 300 + "@example.com")
    with pytest.raises(ValidationError):
        directory.resolve("bob\n@example.com")


def test_throttling_is_retryable(stubbed: tuple[CognitoUserDirectory, Stubber]) -> None:
    directory, stub = stubbed
    stub.add_client_error("list_users", "TooManyRequestsException", http_status_code=429)

    with pytest.raises(TransientError):
        directory.resolve("bob@example.com")


def test_locally_an_identifier_is_the_user_id() -> None:
    assert IdentityDirectory().resolve(" alice ") == "alice"
    assert IdentityDirectory().resolve("") is None
    assert isinstance(IdentityDirectory(), UserDirectory)


def test_the_container_builds_the_cognito_directory_on_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragchat.bootstrap import Container
    from ragchat.config import load_settings

    base = {"RAGCHAT_BACKEND": "aws", "AWS_REGION": "eu-west-1", "DOCUMENTS_TABLE": "d",
            "CONVERSATIONS_TABLE": "c", "COUNTERS_TABLE": "n", "DOCUMENTS_BUCKET": "b",
            "OPENSEARCH_ENDPOINT": "https://search.example.com"}  # fmt: skip
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    settings = load_settings({**base, "COGNITO_USER_POOL_ID": POOL})
    with Container(settings) as container:
        directory = container.user_directory
        assert isinstance(directory, CognitoUserDirectory) and directory.user_pool_id == POOL
