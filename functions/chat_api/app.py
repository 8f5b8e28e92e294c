"""Conversations and messages (buffered JSON; SSE streaming goes through chat_stream).

SnapStart is off in the template (its cache would cost more idle than the rest of the stack; see
docs/deploy.md, "Cold starts"). Turned on, the resolver, settings and the SDK's service models are
built before the snapshot (``warm_before_snapshot``; without SnapStart it does nothing)."""

from ragchat.api.handler import http_handler, warm_before_snapshot

lambda_handler = http_handler({"chat"})
warm_before_snapshot(lambda_handler, ("dynamodb", "bedrock-runtime"))
