"""Serving the resolver over HTTP: API Gateway event translation (``events``), the ASGI application
with its limits (``asgi``) and the uvicorn server (``server``). ``ragchat serve`` and the
``chat_stream`` function (``ragchat.lambda_web``) both run it."""
