"""BlobStore contract: every adapter registered in ``conftest.BLOB_STORES`` must pass."""

from __future__ import annotations

import pytest


def test_put_then_get_round_trips_bytes(blob_store):
    data = bytes(range(256)) * 10
    blob_store.put("documents/alice/d1/body", data, content_type="application/pdf")
    assert blob_store.get("documents/alice/d1/body") == data


def test_put_overwrites(blob_store):
    blob_store.put("k/one", b"first")
    blob_store.put("k/one", b"second")
    assert blob_store.get("k/one") == b"second"


def test_empty_blob(blob_store):
    blob_store.put("k/empty", b"")
    assert blob_store.get("k/empty") == b""


def test_get_of_an_absent_key_raises_key_error(blob_store):
    with pytest.raises(KeyError):
        blob_store.get("nothing/here")


def test_delete_removes_and_tolerates_absent_keys(blob_store):
    blob_store.put("k/a", b"a")
    blob_store.delete("k/a")
    with pytest.raises(KeyError):
        blob_store.get("k/a")
    blob_store.delete("k/a")
    blob_store.delete("never/was")


def test_delete_prefix_removes_exactly_the_matching_keys(blob_store):
    for key in ("documents/alice/d1/body", "documents/alice/d1/pages/1", "documents/alice/d12/body"):
        blob_store.put(key, b"x")
    blob_store.put("documents/bob/d1/body", b"keep")
    assert blob_store.delete_prefix("documents/alice/d1/") == 2
    with pytest.raises(KeyError):
        blob_store.get("documents/alice/d1/pages/1")
    assert blob_store.get("documents/alice/d12/body") == b"x"
    assert blob_store.get("documents/bob/d1/body") == b"keep"
    assert blob_store.delete_prefix("documents/alice/d1") == 1  # a plain string prefix, as in S3
    with pytest.raises(KeyError):
        blob_store.get("documents/alice/d12/body")
    assert blob_store.delete_prefix("documents/nobody/") == 0
    assert blob_store.get("documents/bob/d1/body") == b"keep"


def test_get_with_metadata_returns_the_bytes_and_a_metadata_mapping(blob_store):
    blob_store.put("uploads/alice/a.txt", b"hello")
    data, metadata = blob_store.get_with_metadata("uploads/alice/a.txt")
    assert data == b"hello"
    assert isinstance(metadata, dict)
    with pytest.raises(KeyError):
        blob_store.get_with_metadata("uploads/alice/missing.txt")


def test_a_presigned_post_stores_exactly_the_signed_key(blob_store):
    """Direct uploads: the form pins the key, the content type and the metadata. S3 takes the POST
    itself; a store that serves the URL itself hands back the grant behind its token."""
    key = "uploads/alice/u1/a.md"
    post = blob_store.presign_post(
        key, content_type="text/markdown", min_bytes=1, max_bytes=100, expires_in=600, metadata={"title": "T"}
    )
    assert post.fields["key"] == key
    assert (post.fields["Content-Type"], post.fields["x-amz-meta-title"]) == ("text/markdown", "T")
    if post.url.startswith("/"):
        grant = blob_store.upload_grant(post.url.rsplit("/", 1)[1])
        assert (grant.key, grant.content_type, grant.min_bytes, grant.max_bytes) == (
            key,
            "text/markdown",
            1,
            100,
        )
        assert grant.metadata == {"title": "T"}
    else:
        import requests

        response = requests.post(post.url, data=post.fields, files={"file": ("a.md", b"hello")}, timeout=30)
        assert response.status_code == 204, response.text
        assert blob_store.get_with_metadata(key) == (b"hello", {"title": "T"})


def test_a_link_reads_the_object_or_the_store_gives_none_and_an_absent_key_is_key_error(blob_store):
    """``link``: a presigned GET on S3 (fetched here as a browser would), ``None`` locally (the
    caller sends the bytes); either way an absent key is ``KeyError``, never a dead link."""
    data = "Ünïcode text\n".encode() * 100
    blob_store.put("extracted/alice/d1.txt", data, content_type="text/plain; charset=utf-8")
    url = blob_store.link("extracted/alice/d1.txt", content_type="text/plain; charset=utf-8", expires_in=900)
    if url is not None:
        import requests

        got = requests.get(url, timeout=10)
        assert got.status_code == 200 and got.content == data
        assert got.headers["Content-Type"] == "text/plain; charset=utf-8"
    with pytest.raises(KeyError):
        blob_store.link("nothing/here", content_type="text/plain", expires_in=900)
