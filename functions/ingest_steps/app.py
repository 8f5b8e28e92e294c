"""The ingestion state machine's task: one step (split / embed_index / finalize / fail) per call."""

from ragchat.api.handler import ingest_step_handler

lambda_handler = ingest_step_handler()
