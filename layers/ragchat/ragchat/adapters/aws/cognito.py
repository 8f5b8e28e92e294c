"""``UserDirectory`` on a Cognito user pool (boto3 ``cognito-idp``): workspace members are added by
their ``sub`` or their e-mail (issue 32).

One ``ListUsers`` per lookup, filtered on the one attribute that identifies the user exactly
(``email = "…"`` or ``sub = "…"``, the value escaped as the API asks: backslash before ``"`` and
``\\``), ``AttributesToGet=["sub"]`` (every user has one) and ``Limit=2`` so that an e-mail shared by
two users (impossible in the template's pool, where the e-mail is the user name) is refused instead
of guessed. A ``sub`` is checked to exist, so a mistyped one adds nobody. ``apikey:<id>`` principals
(machine clients) are not Cognito users and name themselves. IAM: ``cognito-idp:ListUsers`` on the
pool.
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import ClientError

from ragchat.domain.errors import TransientError, ValidationError

MAX_IDENTIFIER_CHARS = 256
_THROTTLED = {"TooManyRequestsException", "InternalErrorException", "LimitExceededException"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
API_KEY_PREFIX = "apikey:"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class CognitoUserDirectory:
    """Resolves a member identifier against one user pool."""

    def __init__(self, user_pool_id: str, client: Any) -> None:
        self.user_pool_id = user_pool_id
        self._client = client

    def resolve(self, identifier: str) -> str | None:
        value = identifier.strip()
        if not value:
            return None
        if len(value) > MAX_IDENTIFIER_CHARS or _CONTROL.search(value):
            raise ValidationError(
                f"a member is a user id or an e-mail of at most {MAX_IDENTIFIER_CHARS} characters"
            )
        if value.startswith(API_KEY_PREFIX):
            return value
        attribute = "email" if "@" in value else "sub"
        users = self._list(f"{attribute} = {_quoted(value)}")
        if len(users) > 1:
            raise ValidationError("several users have that e-mail: add the member by id")
        if not users:
            return None
        subs = [a["Value"] for a in users[0].get("Attributes", []) if a.get("Name") == "sub"]
        return subs[0] if subs else None

    def _list(self, flt: str) -> list[dict[str, Any]]:
        try:
            resp = self._client.list_users(
                UserPoolId=self.user_pool_id, Filter=flt, AttributesToGet=["sub"], Limit=2
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _THROTTLED:
                raise TransientError(f"Cognito ListUsers: {code}") from exc
            raise
        users: list[dict[str, Any]] = resp.get("Users", [])
        return users
