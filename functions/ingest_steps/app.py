"""The ingestion state machine's task: one step (split / embed_index / finalize / fail) per call."""

from ragchat.entrypoints.ingest_steps import ingest_step_handler

lambda_handler = ingest_step_handler()
