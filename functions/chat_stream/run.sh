#!/bin/bash
# chat_stream: the startup command of the Lambda Web Adapter (LWA) function that streams chat answers
# as Server-Sent Events (docs/chat.md). The function's handler is this script; the LWA layer
# (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap) runs it, waits for GET /health to answer 200 on
# 127.0.0.1:$AWS_LWA_PORT, then forwards each API Gateway request to that server and streams the
# response back (AWS_LWA_INVOKE_MODE=response_stream). See ragchat/lambda_web.py.
# The ragchat layer's packages are in /opt/python; `python` is the runtime's interpreter from PATH.
set -euo pipefail
PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}/opt/python${LAMBDA_RUNTIME_DIR:+:$LAMBDA_RUNTIME_DIR}"
export PYTHONPATH
exec python -m ragchat.lambda_web
