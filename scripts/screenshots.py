"""Screenshots of the three pages (``/ui``, ``/write``, ``/documents/ui``) at 1280 px and 375 px wide,
of the chat page in dark mode (``chat-dark-*.png``), its start page (``chat-start-*.png``), a
citation's side panel (``citation-*.png``) and a PDF open in the document viewer (``pdf-viewer-*.png``:
the page's image with its text below), written to ``docs/screenshots/*.png``.

Runs ``ragchat serve --samples`` (extractive answerer, SQLite, the MiniLM model of ``make model``) in a
throwaway data directory, asks two questions in a conversation, and photographs the pages in headless
Chromium (Playwright driving Debian's ``/usr/bin/chromium``, as the browser tests do)::

    PYTHONPATH=layers/ragchat .venv/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "screenshots"
QUESTIONS = ("How does ingestion work?", "How are citations checked?")
SIZES = {"1280": {"width": 1280, "height": 800}, "375": {"width": 375, "height": 760}}


# the server's token (RAGCHAT_API_TOKEN for its run): the API calls send it, the pages get it as a
# signed-in tab does (sessionStorage)
TOKEN = secrets.token_urlsafe(24)
SIGNED_IN = f"sessionStorage.setItem('ragchat.authorization', 'Bearer {TOKEN}');"


def _call(url: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read() or b"null")


def _wait(what: str, check: Any, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.2)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=10):
            return True
    except OSError:
        return False


def _all_ingested(url: str) -> bool:
    items = _call(url + "/documents?limit=50")["items"]
    return bool(items) and all(d["status"] in ("READY", "FAILED") for d in items)


def start_server(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "RAGCHAT_DATA_DIR": str(data), "RAGCHAT_CHAT_MODEL": "extractive"}
    for name in ("ANTHROPIC_API_KEY", "COGNITO_CLIENT_ID"):
        env.pop(name, None)
    env["RAGCHAT_API_TOKEN"] = TOKEN
    cli = Path(sys.executable).with_name("ragchat")
    log = (data / "server.log").open("wb")
    args = [str(cli), "serve", "--samples", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=data)
    url = f"http://127.0.0.1:{port}"
    _wait("ragchat serve", lambda: _ready(url))
    _wait("the samples", lambda: _all_ingested(url))
    return proc, url


# A one-page harbour guide, printed to PDF by Chromium itself (no binary file in git).
GUIDE_HTML = """<body style="font:15px/1.5 Georgia,serif;margin:2cm"><h1 style="font:600 28px sans-serif">
Harbour guide</h1><p style="color:#555">Kestrel Bay marina · season 2026</p><h2 style="font:600 18px
sans-serif">Fuel</h2><p><b>Tools.</b> The fuel dock opens at 7 every morning and sells diesel and
petrol. Payment is by card only.</p><h2 style="font:600 18px sans-serif">Mooring</h2><table border=1
cellpadding=6 style="border-collapse:collapse"><tr><th>Boat length</th><th>Per night</th></tr><tr>
<td>up to 8 m</td><td>24 pounds</td></tr><tr><td>8 to 12 m</td><td>31 pounds</td></tr></table>
<p>Swimming in the harbour is forbidden for everyone.</p></body>"""


def upload_guide(browser: Any, url: str) -> str:
    page = browser.new_page()
    page.set_content(GUIDE_HTML)
    pdf = page.pdf(format="A5")
    page.close()
    req = urllib.request.Request(
        url + "/documents?filename=harbour-guide.pdf&title=Harbour%20guide",
        data=pdf,
        method="POST",
        headers={"Content-Type": "application/pdf", "Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        doc_id = str(json.loads(resp.read())["documentId"])
    _wait("the guide", lambda: _call(f"{url}/documents/{doc_id}")["status"] == "READY")
    return doc_id


def seed_conversation(url: str) -> None:
    conv = _call(url + "/chat/conversations", "POST", {})
    for question in QUESTIONS:
        _call(f"{url}/chat/conversations/{conv['id']}/messages", "POST", {"content": question})
    _call(url + "/chat/conversations", "POST", {"collection": "handbook"})


def shoot(url: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
    OUT.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=exe, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        guide = upload_guide(browser, url)
        for size, viewport in SIZES.items():
            dark = _context(browser, url, viewport, "dark").new_page()
            written.append(_chat(dark, viewport, f"chat-dark-{size}.png"))
            dark.context.close()
            page = _context(browser, url, viewport, "light").new_page()
            page.goto("/ui")
            page.locator("#suggested button").first.wait_for()
            written.append(_save(page, f"chat-start-{size}.png"))
            written.append(_chat(page, viewport, f"chat-{size}.png"))
            page.locator(".msg.assistant").last.locator(".cite").first.click()
            page.locator("#panel .passage mark").first.wait_for()
            written.append(_save(page, f"citation-{size}.png"))
            page.goto("/write")
            page.fill("#title", "Team handbook")
            page.fill("#text", "Expenses are approved by the team lead within five working days.")
            page.fill("#collection", "handbook")
            if size == "1280":  # added once; the narrow shot shows the filled form
                page.get_by_role("button", name="Add note").click()
                page.locator("#status").filter(has_text="READY").wait_for()
            files = [{"name": f"travel-policy-{size}.md", "mimeType": "text/markdown",
                      "buffer": b"# Travel\n\nTrain tickets are booked through the office."},
                     {"name": "scan.pdf", "mimeType": "application/pdf", "buffer": b""}]  # fmt: skip
            page.set_input_files("#file", files=files)
            page.get_by_role("button", name="Upload").click()
            page.locator("#uploads .file-status").filter(has_text="READY").wait_for()
            written.append(_save(page, f"write-{size}.png"))
            page.goto("/documents/ui")
            page.locator("#rows tr").first.wait_for()
            written.append(_save(page, f"documents-{size}.png"))
            page.locator(f"tr[data-id='{guide}'] button", has_text="View").click()
            shown = "() => (document.querySelector('#panel .pdf-page img') || {}).naturalWidth > 0"
            page.wait_for_function(shown)
            written.append(_save(page, f"pdf-viewer-{size}.png"))
            page.context.close()
        browser.close()
    return written


def _context(browser: Any, url: str, viewport: dict[str, int], scheme: str) -> Any:
    context = browser.new_context(base_url=url, viewport=viewport, color_scheme=scheme)
    context.add_init_script(SIGNED_IN)
    return context


def _chat(page: Any, viewport: dict[str, int], name: str) -> Path:
    page.goto("/ui")
    if viewport["width"] < 700:  # the conversation list is a drawer behind the menu button
        page.get_by_role("button", name="Conversations").click()
    page.locator("#convs li", has_text=QUESTIONS[0]).locator("button.open").click()
    page.locator(".msg.assistant .chip").first.wait_for()
    page.wait_for_timeout(400)  # the drawer's closing slide (0.2 s) is over
    page.locator("#scroller").evaluate("s => { s.scrollTop = s.scrollHeight; }")
    page.get_by_label("Message", exact=True).fill("What file types can I upload?")
    return _save(page, name)


def _save(page: Any, name: str) -> Path:
    path = OUT / name
    page.screenshot(path=str(path))
    return path


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="ragchat-shots-") as tmp:
        proc, url = start_server(Path(tmp))
        try:
            seed_conversation(url)
            for path in shoot(url):
                print(f"{path.relative_to(REPO)}  {path.stat().st_size // 1024} KiB")
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
