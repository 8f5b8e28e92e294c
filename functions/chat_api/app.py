"""Conversations and messages (buffered JSON; SSE streaming goes through chat_stream)."""

from ragchat.api.handler import http_handler

lambda_handler = http_handler({"chat"})
