"""Over HTTP against ``ragchat serve`` (with its token): ``/`` opens the app for a browser, API clients
keep their JSON, and a file uploaded twice is one document."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import Server

pytestmark = pytest.mark.e2e

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


def raw_get(server: Server, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One GET, redirects not followed."""
    conn = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_a_browser_at_the_root_lands_on_the_chat_page(server: Server) -> None:
    for headers in ({"Accept": BROWSER}, {"Accept": BROWSER, "Authorization": f"Bearer {server.token}"}):
        status, got, _ = raw_get(server, "/", headers)
        assert (status, got.get("location")) == (302, "/ui"), headers
    page = server.request("GET", "/ui", token=False, headers={"Accept": BROWSER})
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")


def test_api_clients_at_the_root_keep_their_json(server: Server) -> None:
    status, got, body = raw_get(server, "/", {"Accept": "*/*"})
    assert status == 401 and got["content-type"].startswith("application/json"), body
    missing = server.request("GET", "/")
    assert missing.status == 400 and "text" in missing.json()["error"]
    asked = server.request("GET", "/?text=What+is+ragchat%3F")
    assert asked.status == 200 and "answer" in asked.json()


def test_the_same_file_twice_is_one_document(server: Server) -> None:
    data = b"The canteen serves lunch from 11:45 to 14:00 on weekdays."

    def upload(body: bytes) -> tuple[int, dict[str, object]]:
        res = server.request(
            "POST", "/documents?filename=canteen.txt&collection=e2e-dupes", data=body,
            headers={"Content-Type": "text/plain"},
        )  # fmt: skip
        return res.status, res.json()

    status, first = upload(data)
    assert status == 202 and first["duplicate"] is False
    assert server.wait_document(str(first["documentId"]))["status"] == "READY"
    status, again = upload(data)
    assert (status, again["documentId"], again["duplicate"]) == (200, first["documentId"], True)
    listed = server.request("GET", "/documents?collection=e2e-dupes").json()["items"]
    assert [d["id"] for d in listed] == [first["documentId"]]
