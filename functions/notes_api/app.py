"""Notes, documents and one-shot questions (``GET /?text=``)."""

from ragchat.api.handler import http_handler

lambda_handler = http_handler({"notes"})
