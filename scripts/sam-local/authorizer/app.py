"""Sign-in under ``sam local start-api``, which cannot emulate the Cognito user-pool authorizer.

A Lambda TOKEN authorizer that only the local template (``scripts/sam-local/local_template.py``)
declares, in place of the Cognito one; it is never deployed. Like ``ragchat serve`` with a token, it
accepts ``Authorization: Bearer <RAGCHAT_API_TOKEN>`` (``env.local.json``) and makes the caller
``RAGCHAT_LOCAL_USER``; anything else is denied (401).
"""

from __future__ import annotations

import hmac
import os
from typing import Any


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    expected = os.environ.get("RAGCHAT_API_TOKEN", "")
    scheme, _, token = str(event.get("authorizationToken") or "").partition(" ")
    allowed = bool(expected) and scheme.lower() == "bearer"
    allowed = allowed and hmac.compare_digest(token.strip().encode(), expected.encode())
    return {
        "principalId": os.environ.get("RAGCHAT_LOCAL_USER") or "local",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow" if allowed else "Deny",
                    "Resource": event.get("methodArn", "*"),
                }
            ],
        },
    }
