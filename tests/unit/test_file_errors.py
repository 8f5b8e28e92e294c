"""One vocabulary for a refused file (issue 33, item 7): the same plain sentence, sizes in MB with the
limit named, whichever door the file came through — ``POST /documents`` (what ``ragchat ingest --api``
sends), the ingestion service (what ``ragchat ingest`` runs locally) and the page's ``POST /uploads``
form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ragchat.adapters.local.files import FileBlobStore
from ragchat.domain.errors import PayloadTooLarge, ValidationError
from ragchat.domain.file_errors import EMPTY_FILE, limit_note, megabytes, too_large

from tests.unit.api_support import make_api
from tests.unit.test_direct_uploads import post_file, presign

LIMIT = 2_000_000  # MAX_BODY_BYTES 2_400_000 / 1.2
ENV = {"MAX_BODY_BYTES": "2400000", "MAX_UPLOAD_BYTES": str(LIMIT)}
BIG = b"x" * 2_500_000
SENTENCE = "The file is too large (2.5 MB): the limit is 2.0 MB."


def error(response: dict[str, Any]) -> str:
    return str(json.loads(response["body"])["error"])


def test_sizes_read_in_megabytes_never_raw_bytes() -> None:
    assert megabytes(31_457_315) == "31.5 MB"
    assert megabytes(21_779_797) == "21.8 MB"
    assert megabytes(20_000) == "0.02 MB"
    assert too_large(31_457_315, 21_779_797) == "The file is too large (31.5 MB): the limit is 21.8 MB."
    assert limit_note(21_779_797) == "Files up to 21.8 MB."


def test_post_documents_says_the_same_sentence(tmp_path: Path) -> None:
    api = make_api(ENV)
    res = api.call("POST", "/documents", raw_body=BIG, headers={"Content-Type": "text/plain"})
    assert res["statusCode"] == 413
    assert error(res).startswith(SENTENCE)  # followed by the hint to use POST /uploads
    assert "bytes" not in error(res)


def test_a_json_body_too_large_is_not_called_a_file() -> None:
    api = make_api(ENV)
    note = json.dumps({"title": "t", "text": "x" * 2_500_000})
    res = api.call("POST", "/notes", raw_body=note)
    assert res["statusCode"] == 413
    assert error(res) == "The request body is too large (2.5 MB): the limit is 2.0 MB."


def test_the_local_ingestion_says_the_same_sentence() -> None:
    api = make_api(ENV)
    with pytest.raises(PayloadTooLarge) as refused:
        api.container.ingestion.submit_file("u", data=BIG, filename="big.txt", source="cli")
    assert refused.value.message == SENTENCE
    with pytest.raises(ValidationError) as empty:
        api.container.ingestion.submit_file("u", data=b"", filename="empty.pdf", source="cli")
    assert empty.value.message == EMPTY_FILE


def test_the_upload_form_says_the_same_sentence(tmp_path: Path) -> None:
    api = make_api({"MAX_UPLOAD_BYTES": str(LIMIT)}, blobs=FileBlobStore(tmp_path))
    ticket = json.loads(presign(api, {"filename": "big.txt"})["body"])
    res = post_file(api, ticket, BIG)
    assert res["statusCode"] == 413 and error(res) == SENTENCE
    ticket = json.loads(presign(api, {"filename": "empty.txt"})["body"])
    res = post_file(api, ticket, b"")
    assert res["statusCode"] == 400 and error(res) == EMPTY_FILE


def test_the_add_page_states_the_limit_and_checks_it_before_sending() -> None:
    api = make_api({"MAX_UPLOAD_BYTES": str(LIMIT)})
    page = api.call("GET", "/write", principal=None)["body"]
    config = json.loads(page.split('id="ragchat-config">', 1)[1].split("</script>", 1)[0])
    assert config["maxUploadBytes"] == str(LIMIT)
    assert "id=file-limit" in page
    web = Path(__file__).parents[2] / "layers/ragchat/ragchat/web"
    script = (web / "uploads.js").read_text() + (web / "write.js").read_text()
    # the same sentence as the API's, and the file's progress bar reset after any refusal (what a
    # user sees: tests/e2e/test_daily_pages_browser.py::test_the_add_page_takes_several_files_…)
    assert "'The file is too large (' + megabytes(file.size) + '): the limit is '" in script
    assert "'Files up to ' + uploads.megabytes(uploads.LIMIT)" in script
    assert "const refuse = text => { bar.hidden = true; bar.value = 0;" in script
    assert "catch (err) { refuse(describe(err)); }" in script


UNSUPPORTED = (
    "This file type is not supported (notes.pages): add .txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .odt, "
    ".epub, .rtf, .png, .jpg, .tif or .webp files."
)


def test_an_unsupported_file_gets_one_sentence_at_every_door(tmp_path: Path) -> None:
    """Issue 33 item 7: "Unsupported file type: upload …" (API), "Unsupported file 'notes.docx'.
    Supported types: text/plain (.txt), …" (ingestion) and "unsupported type (.txt .md .html .pdf)"
    (the terminal) said one thing three ways."""
    from ragchat.cli.ingest import collect_files

    api = make_api(ENV)
    res = api.call("POST", "/documents", raw_body=b"PK\x03\x04", query={"filename": "notes.pages"})
    assert res["statusCode"] == 400 and error(res) == UNSUPPORTED
    with pytest.raises(ValidationError) as local:
        api.container.ingestion.submit_file("u", data=b"PK\x03\x04", filename="notes.pages", source="cli")
    assert local.value.message == UNSUPPORTED
    docx = tmp_path / "notes.pages"
    docx.write_bytes(b"PK\x03\x04")
    _, (rejected,), _ = collect_files([docx])
    assert rejected.error == UNSUPPORTED.replace(" (notes.pages)", "")  # the table names the file
