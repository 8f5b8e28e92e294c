"""Conversations and messages (buffered JSON; SSE streaming goes through chat_stream).

SnapStart is on for this function: the resolver, settings and the SDK's service models are built
before the snapshot (``warm_before_snapshot``), so restored sandboxes skip ~1.7 s of imports."""

from ragchat.api.handler import http_handler, warm_before_snapshot

lambda_handler = http_handler({"chat"})
warm_before_snapshot(lambda_handler, ("dynamodb", "bedrock-runtime"))
