"""Page weight and first paint of the HTML pages (``/ui``, ``/write``, ``/documents/ui``).

Method: a ``ragchat serve --insecure-no-auth`` subprocess on 127.0.0.1 with an empty data directory.

- Weight: the bytes a first visit fetches for each page (the HTML shell, its style sheet and
  scripts, found in the shell), raw and gzip-compressed (level 6, what a compressing proxy sends).
- Paint: Debian's Chromium (headless, through Playwright), a fresh browser context per load (nothing
  cached), at 1280 x 800 and 375 x 740; per load the browser's own ``first-contentful-paint`` entry
  and the moment the page's script has shown the app (``#app`` visible), both from navigation start.
  Median of ``--runs`` loads per page and width.

Goal (issue 33): no regression beyond 20 % in weight or first paint when the pages grow features.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchdata import models_path, results_dir, smoke

PAGES = ("/ui", "/write", "/documents/ui")
WIDTHS = ((1280, 800), (375, 740))
ASSET = re.compile(r'(?:src|href)="([^"]+\.(?:js|css))"')
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return bytes(resp.read())


def _start(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {**os.environ, "RAGCHAT_DATA_DIR": str(data_dir), "RAGCHAT_MODEL_DIR": str(models_path())}
    env.pop("RAGCHAT_API_TOKEN", None)
    env.pop("ANTHROPIC_API_KEY", None)
    log = (data_dir / "serve.log").open("wb")
    cli = str(Path(sys.executable).with_name("ragchat"))
    proc = subprocess.Popen(
        [cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--insecure-no-auth"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            _get(url + "/health")
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"ragchat serve did not start; see {data_dir / 'serve.log'}") from None
            time.sleep(0.2)


def weight(url: str, path: str) -> dict[str, int]:
    html = _get(url + path)
    files = [html]
    base = url + path.rsplit("/", 1)[0] + "/"
    for ref in ASSET.findall(html.decode("utf-8")):
        files.append(_get(urllib.request.urljoin(base, ref)))
    return {
        "files": len(files),
        "bytes": sum(len(f) for f in files),
        "gzip_bytes": sum(len(gzip.compress(f, 6)) for f in files),
    }


PAINT_JS = """() => new Promise(done => {
  const fcp = () => (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime;
  const check = () => { const app = document.getElementById('app');
    if (app && !app.hidden && fcp() !== undefined) done({fcp: fcp(), app: window.__appShown || null});
    else setTimeout(check, 5); };
  check(); })"""
# Records when #app stops being hidden (the page's script shows it after boot()).
APP_SHOWN = """new MutationObserver((_, obs) => { const app = document.getElementById('app');
  if (app && !app.hidden) { window.__appShown = performance.now(); obs.disconnect(); } })
  .observe(document, {subtree: true, attributes: true, childList: true});"""


def paint(browser: Any, url: str, path: str, size: tuple[int, int], runs: int) -> dict[str, float]:
    fcps, apps = [], []
    for _ in range(runs):
        context = browser.new_context(viewport={"width": size[0], "height": size[1]})
        context.add_init_script(APP_SHOWN)
        page = context.new_page()
        page.goto(url + path, wait_until="load")
        got = page.evaluate(PAINT_JS)
        fcps.append(float(got["fcp"]))
        apps.append(float(got["app"] or got["fcp"]))
        context.close()
    return {
        "fcp_ms_median": round(statistics.median(fcps), 1),
        "app_ms_median": round(statistics.median(apps), 1),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2 if smoke() else 9)
    parser.add_argument("--tag", default="", help="suffix of the result files (e.g. 'before')")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise SystemExit("Chromium is not installed (as root: `make ensure-chromium`)")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start(Path(tmp))
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
                try:
                    for path in PAGES:
                        w = weight(url, path)
                        for size in WIDTHS:
                            painted = paint(browser, url, path, size, args.runs)
                            rows.append({"page": path, "width": size[0], **w, **painted})
                finally:
                    browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    result = {
        "runs": args.runs,
        "rows": rows,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
    }
    name = "pages" + (f"-{args.tag}" if args.tag else "")
    out = results_dir()
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [
        "### Page weight and first paint (`ragchat serve`, headless Chromium, empty data)",
        "",
        "| Page | Width | Files | Bytes | gzip bytes | First contentful paint ms | App shown ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['page']}` | {r['width']} | {r['files']} | {r['bytes']:,} | {r['gzip_bytes']:,} | "
            f"{r['fcp_ms_median']} | {r['app_ms_median']} |"
        )
    lines += ["", f"Median of {args.runs} loads per row, each in a fresh browser context (nothing cached)."]
    (out / f"{name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()
