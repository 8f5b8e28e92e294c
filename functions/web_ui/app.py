"""Operations and pages: /health, /openapi.json, /swagger, /ui, /write, /documents/ui."""

from ragchat.api.handler import http_handler

lambda_handler = http_handler({"ops", "ui"})
