"""Who is calling. Every API route but ``/health`` needs a principal (docs/security.md); the HTML page
shells (``ragchat.api.pages``) hold no data and load without one, then sign the user in.

Cloud: the Cognito user-pool authorizer puts the JWT claims in
``requestContext.authorizer.claims`` (we use ``sub``); an API-key / custom (Lambda) authorizer puts
``requestContext.authorizer.principalId``. Machine clients on the API-key API (template
``MachineApi``: ``ApiKeyRequired``, no authorizer) are known by the key API Gateway validated,
``requestContext.identity.apiKeyId``: each key is its own owner, ``apikey:<id>``. API Gateway only
fills ``apiKeyId`` on methods that require a key, and on the Cognito API the claims come first, so
a key sent there never changes who the caller is. Locally, ``ragchat serve`` injects
``authorizer.claims.sub`` after checking its bearer token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragchat.domain.errors import Unauthenticated

API_KEY_OWNER_PREFIX = "apikey:"


def principal(event: Any) -> str:
    """The caller's id from an API Gateway REST event (raw dict or Powertools event); 401 if none."""
    raw: Mapping[str, Any] = event.raw_event if hasattr(event, "raw_event") else event
    ctx = raw.get("requestContext") or {}
    authorizer = ctx.get("authorizer") or {}
    claims = authorizer.get("claims") or {}
    if isinstance(claims, Mapping):
        sub = claims.get("sub")
        if isinstance(sub, str) and sub.strip():
            return sub.strip()
    pid = authorizer.get("principalId")
    if isinstance(pid, str) and pid.strip():
        return pid.strip()
    identity = ctx.get("identity") or {}
    key_id = identity.get("apiKeyId") if isinstance(identity, Mapping) else None
    if isinstance(key_id, str) and key_id.strip():
        return API_KEY_OWNER_PREFIX + key_id.strip()
    raise Unauthenticated("Unauthorized")
