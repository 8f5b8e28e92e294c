"""S3 ObjectCreated under uploads/ → the same ingestion pipeline (stable document id per key)."""

from ragchat.entrypoints.s3_ingest import s3_ingest_handler

lambda_handler = s3_ingest_handler()
