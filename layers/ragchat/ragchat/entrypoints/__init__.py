"""Entry points that are not HTTP: S3 ``ObjectCreated`` events (``s3_ingest``) and the ingestion state
machine's task (``ingest_steps``). Like the HTTP handlers (``ragchat.api.handler``), each handler
builds its container on first use and takes a factory of it (tests pass their own)."""
