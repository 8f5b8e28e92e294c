"""Issue 45 item 3: identical bytes in one workspace are one document whichever door brought them:
a note (``POST /notes``), the page's upload (``POST /documents``), a direct upload (``POST
/uploads``), ``ragchat ingest --api`` and ``ragchat ingest`` (local). The reply says it was already
there, with its title and id; nothing new is stored."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import TOKEN, run_server
from tests.e2e.test_cli_ingest import needs_model, run

pytestmark = pytest.mark.e2e

TEXT = "# Bike shed\n\nThe bike shed behind building C opens with your badge from 7:00.\n"
ALREADY = re.compile(r"Already there: “(?P<title>[^”]+)” \((?P<id>[0-9A-Za-z_-]+)\) has exactly this content")


def test_the_same_content_by_every_door_is_one_document(tmp_path: Path) -> None:
    needs_model()
    (tmp_path / "server").mkdir()
    with run_server(tmp_path / "server") as srv:
        first = srv.request("POST", "/notes", body={"text": TEXT, "title": "Bike shed"})
        assert first.status == 202, first.body
        doc_id = first.json()["documentId"]
        assert srv.wait_document(doc_id)["status"] == "READY"

        again = srv.request("POST", "/notes", body={"text": TEXT})  # the same note again
        assert again.status == 200
        assert again.json()["duplicate"] is True and again.json()["documentId"] == doc_id
        assert ALREADY.search(again.json()["message"])["title"] == "Bike shed"

        page = srv.request(  # the page's upload of a file holding the same bytes
            "POST",
            "/documents?filename=bike-shed.md",
            data=TEXT.encode(),
            headers={"Content-Type": "text/markdown"},
        )
        assert page.status == 200 and page.json()["otherDocument"] is True
        assert page.json()["documentId"] == doc_id

        grant = srv.request("POST", "/uploads", body={"filename": "shed-copy.md"}).json()
        boundary = "b0undary"
        form = "".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
            for k, v in grant["fields"].items()
        )
        form += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="shed-copy.md"\r\n'
            f"Content-Type: text/markdown\r\n\r\n{TEXT}\r\n--{boundary}--\r\n"
        )
        direct = srv.request(
            "POST",
            urlsplit(grant["url"]).path,
            data=form.encode(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert direct.status == 200, direct.body
        assert direct.json()["duplicate"] is True and direct.json()["documentId"] == doc_id

        file = tmp_path / "shed.md"
        file.write_text(TEXT)
        # a relative path: the long temporary one would make the summary table wrap the note
        cli = run(
            ["ingest", "--api", srv.url, "--token", TOKEN, file.name], tmp_path / "unused", cwd=tmp_path
        )
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert f"Already there: “Bike shed” ({doc_id}) has exactly this" in cli.stdout, cli.stdout
        assert "1 ready (1 already there), 0 failed" in cli.stdout

        items = srv.request("GET", "/documents").json()["items"]
        assert [d["id"] for d in items] == [doc_id]
