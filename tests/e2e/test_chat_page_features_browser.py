"""The chat page (``/ui``) as a user keeps it open, in headless Chromium against ``ragchat serve``'s
server over in-memory fakes (one server for the module, the shared browser): a Markdown answer that
streams in behind a typing indicator, the view following it unless the reader scrolled up; thumbs up
and down stored with the message; Regenerate; timestamps; search over conversation titles; a stored
refusal shown as one; dark mode and a 375 px phone with WCAG AA contrast; keyboard only.

Same driver as ``test_pages_browser.py`` (Playwright with Debian's Chromium; skipped without them,
failing on CI).
"""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_pages_browser import browser  # noqa: F401 (the fixture)
from tests.fakes import FakeChatModel
from tests.integration.serving_support import WAIT, Served, serving

pytestmark = pytest.mark.e2e

QUESTION = "Why is the sky blue?"
ITEMS = [f"- point {i}: **Rayleigh** scattering of light, item number {i}\n" for i in range(1, 13)]
MARKDOWN = [
    "Here is what the notes say:\n\n",
    ITEMS[0],
    *ITEMS[1:],
    "\n| colour | scattered |\n|---|---|\n| blue | most |\n\n",
    "Try `ragchat ask` [source: n-sky].",
]
PLAIN = ["The sky looks blue ", "because of scattering ", "[source: n-sky]", "."]
AGAIN = ["Sunlight is scattered ", "by the air ", "[source: n-sky]", "."]


class ScriptedModel(FakeChatModel):
    """Answers with the next scripted list of deltas (the last one repeats); when ``paced``, streams one
    delta per ``release()``. A JSON turn (an edit, a regenerate) gets the next answer whole."""

    def __init__(self) -> None:
        super().__init__(lambda _request: "".join(self._take()))
        self.answers: list[list[str]] = [PLAIN]
        self.paced = False
        self.gate: queue.Queue[None] = queue.Queue()

    def script(self, *answers: list[str], paced: bool = False) -> None:
        self.answers, self.paced = list(answers), paced

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self.gate.put(None)

    def _take(self) -> list[str]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def stream(self, request: Any) -> Iterator[str]:
        words = self._take()
        self.requests.append(request)
        for word in words:
            if self.paced:
                self.gate.get(timeout=WAIT)
            yield word


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture(scope="module")
def served(model: ScriptedModel) -> Iterator[Served]:
    with serving("serve", model=model) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _plain_answers(model: ScriptedModel) -> None:
    model.script(PLAIN)


def _expect() -> Any:
    from playwright.sync_api import expect

    return expect


def _page(browser: Any, served: Served, *, width: int = 1100, height: int = 900, **context: Any) -> Any:  # noqa: F811
    ctx = browser.new_context(
        base_url=f"http://127.0.0.1:{served.port}", viewport={"width": width, "height": height}, **context
    )
    page = ctx.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    return page


def _close(page: Any) -> None:
    errors = page.errors
    page.context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _api(served: Served, method: str, path: str, body: Any = None) -> Any:
    status, _, raw = served.call(method, path, body)
    assert status < 300, (status, raw)
    return json.loads(raw) if raw else None


def _stored(served: Served, conv_id: str) -> list[dict[str, Any]]:
    return list(_api(served, "GET", f"/chat/conversations/{conv_id}")["messages"])


def _conversation(served: Served, title: str, *questions: str) -> str:
    conv_id = str(_api(served, "POST", "/chat/conversations", {"title": title})["id"])
    for q in questions:
        _api(served, "POST", f"/chat/conversations/{conv_id}/messages", {"content": q})
    return conv_id


def _open(page: Any, title: str) -> None:
    expect = _expect()
    page.goto("/ui")
    if page.viewport_size["width"] < 700:  # the list is a drawer on a phone
        page.get_by_role("button", name="Conversations").click()
    page.locator("#convs li", has_text=title).locator("button.open").click()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()


def _at_bottom(page: Any) -> bool:
    return bool(page.evaluate("nearBottom()"))


def test_a_markdown_answer_streams_in_behind_a_typing_indicator_and_the_view_follows(
    browser: Any,  # noqa: F811
    served: Served,
    model: ScriptedModel,
) -> None:
    expect = _expect()
    model.script(MARKDOWN, paced=True)
    page = _page(browser, served, height=460)
    try:
        page.goto("/ui")
        new = page.get_by_role("button", name="New conversation")
        new.focus()
        page.keyboard.press("Enter")  # keyboard only: the composer takes the focus
        message = page.get_by_label("Message", exact=True)
        expect(message).to_be_focused()
        page.keyboard.type(QUESTION)
        page.keyboard.press("Enter")
        answer = page.locator(".msg.assistant")
        expect(answer.get_by_role("img", name="Assistant is typing")).to_be_visible()  # no empty bubble
        expect(answer.locator(".content")).to_have_text("")
        expect(answer.get_by_role("button", name="Copy")).to_be_hidden()

        model.release()
        expect(answer.locator(".typing")).to_have_count(0)
        expect(answer.locator(".content p")).to_have_text("Here is what the notes say:")
        model.release(4)
        expect(answer.locator(".content li")).to_have_count(4)  # a list, growing
        expect(answer.locator(".content li strong").first).to_have_text("Rayleigh")
        model.release(8)
        expect(answer.locator(".content li")).to_have_count(12)
        assert _at_bottom(page)  # the view followed the answer
        assert page.locator("#scroller").evaluate("s => s.scrollHeight - s.clientHeight") > 200

        page.locator("#scroller").evaluate("s => { s.scrollTop = 0; }")  # the reader scrolls up
        model.release()
        expect(answer.locator(".content table td")).to_have_text(["blue", "most"])
        assert page.locator("#scroller").evaluate("s => s.scrollTop") == 0  # it stays where they are
        jump = page.get_by_role("button", name="Jump to latest")
        expect(jump).to_be_visible()
        jump.click()
        assert _at_bottom(page)
        expect(jump).to_be_hidden()

        model.release(len(MARKDOWN))
        expect(answer.get_by_role("button", name="Copy")).to_be_visible()
        expect(answer.locator(".content table th")).to_have_text(["colour", "scattered"])
        expect(answer.locator(".content table td")).to_have_text(["blue", "most"])
        expect(answer.locator(".content code")).to_have_text("ragchat ask")
        expect(answer.get_by_role("button", name="Source 1")).to_have_text("[1]")
        assert "[source:" not in answer.inner_text() and "Sources:" not in answer.inner_text()
        stored = _stored(served, page.evaluate("current"))[1]  # the API contract keeps the tags
        assert "[source: n-sky]" in stored["content"] and stored["content"].endswith("Sources: n-sky")
    finally:
        model.release(len(MARKDOWN))
        _close(page)


def test_thumbs_regenerate_and_timestamps_are_kept_with_the_messages(
    browser: Any,  # noqa: F811
    served: Served,
    model: ScriptedModel,
) -> None:
    expect = _expect()
    conv_id = _conversation(served, "Thumbs", QUESTION)
    page = _page(browser, served)
    try:
        _open(page, "Thumbs")
        answer = page.locator(".msg.assistant")
        stored = _stored(served, conv_id)
        for shown, kept in zip(page.locator(".msg").all(), stored, strict=True):
            expect(shown.locator("time")).to_have_attribute("datetime", kept["createdAt"])
            expect(shown.locator("time")).not_to_have_text("")

        good, bad = (
            answer.get_by_role("button", name="Good answer"),
            answer.get_by_role("button", name="Bad answer"),
        )
        expect(good).to_have_attribute("aria-pressed", "false")
        good.click()
        expect(good).to_have_attribute("aria-pressed", "true")
        assert _stored(served, conv_id)[1]["feedback"] == "up"
        good.click()  # pressed again: taken back
        expect(good).to_have_attribute("aria-pressed", "false")
        assert "feedback" not in _stored(served, conv_id)[1]
        bad.click()
        expect(bad).to_have_attribute("aria-pressed", "true")
        expect(good).to_have_attribute("aria-pressed", "false")
        assert _stored(served, conv_id)[1]["feedback"] == "down"
        _open(page, "Thumbs")  # reopened: the rating is still there
        expect(answer.get_by_role("button", name="Bad answer")).to_have_attribute("aria-pressed", "true")

        model.script(AGAIN)
        answer.get_by_role("button", name="Regenerate").click()
        expect(answer.locator(".content")).to_have_text("Sunlight is scattered by the air[1].")
        expect(page.locator(".msg")).to_have_count(2)
        kept = _stored(served, conv_id)
        assert [m["role"] for m in kept] == ["user", "assistant"]
        assert kept[1]["content"].startswith("Sunlight is scattered") and "feedback" not in kept[1]

        model.script(PLAIN)
        page.get_by_label("Message", exact=True).fill("And at sunset?")
        page.keyboard.press("Enter")
        expect(answer).to_have_count(2)
        expect(answer.nth(1).get_by_role("button", name="Copy")).to_be_visible()
        expect(answer.nth(0).get_by_role("button", name="Regenerate")).to_be_hidden()  # the last answer only
        expect(answer.nth(1).get_by_role("button", name="Regenerate")).to_be_visible()
        kept = _stored(served, conv_id)
        expect(page.locator(".msg").nth(3).locator("time")).to_have_attribute(
            "datetime", kept[3]["createdAt"]
        )
    finally:
        _close(page)


LONG_TITLE = "Holiday rota for the support team in December and January, including the weekend shifts"


def test_search_over_titles_tooltips_and_a_stored_refusal(browser: Any, served: Served) -> None:  # noqa: F811
    expect = _expect()
    for title in ("Tea budget", LONG_TITLE, "Sky colours"):
        _conversation(served, title)
    refused_id = _conversation(served, "Off topic")
    turn = _api(served, "POST", f"/chat/conversations/{refused_id}/messages", {"content": "zqx vbnm plork?"})
    assert turn["guardUsed"] is True, turn
    page = _page(browser, served)
    try:
        page.goto("/ui")
        search = page.get_by_label("Search conversations")
        items = page.locator("#convs li")
        expect(items.filter(has_text="Tea budget")).to_have_count(1)
        search.fill("colours")
        expect(items).to_have_count(1)
        expect(items).to_contain_text("Sky colours")
        search.fill("holiday  WEEKEND")  # every word, any case
        expect(items).to_have_count(1)
        button = items.locator("button.open")
        expect(button).to_have_attribute("title", LONG_TITLE)  # the whole title in the tooltip
        title = button.locator(".conv-title")
        assert title.evaluate("e => e.scrollWidth > e.clientWidth")  # cut on screen, whole in the tooltip
        search.fill("zzz")
        expect(items).to_have_count(0)
        expect(page.locator("#convs-none")).to_have_text("No conversation title matches “zzz”.")
        search.press("Escape")
        expect(search).to_have_value("")
        expect(items.filter(has_text="Tea budget")).to_have_count(1)

        message = page.get_by_label("Message", exact=True)  # from the start page: refused the same way
        message.fill("zqx vbnm plork?")
        message.press("Enter")
        asked = page.locator(".msg.assistant.refusal")
        expect(asked.locator(".refusal-label")).to_have_text("Not answered from your notes")
        expect(asked.locator(".content")).to_have_text(turn["content"])

        _open(page, "Off topic")
        refused = page.locator(".msg.assistant")
        expect(refused).to_have_class("msg assistant refusal")
        expect(refused.locator(".refusal-label")).to_have_text("Not answered from your notes")
        expect(refused.locator(".content")).to_have_text(turn["content"])
    finally:
        _close(page)


# Every visible text on the page against the background it is drawn on (WCAG 2.x relative luminance;
# AA: 4.5:1, 3:1 for large text). Hidden, faded (opacity < 1) and disabled elements are left out.
CONTRAST_FAILURES = """() => {
  const rgb = c => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const lum = ([r, g, b]) => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const over = (top, under) => [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3]));
  const background = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let base = [255, 255, 255]; for (const c of layers.reverse()) base = over(c, base); return base; };
  const faded = el => { for (let e = el; e; e = e.parentElement)
    if (Number(getComputedStyle(e).opacity) < 1) return true; return false; };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.nodeValue.trim());
    if (!own || !el.getClientRects().length || el.closest('.sr-only,[hidden]')) continue;
    if (el.disabled || faded(el)) continue;
    const s = getComputedStyle(el); if (s.visibility !== 'visible') continue;
    const fg = rgb(s.color), bg = background(el), color = over(fg, bg);
    const [a, b] = [lum(color), lum(bg)], ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(s.fontSize), large = size >= 24 || (size >= 18.66 && Number(s.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) out.push({text: el.textContent.trim().slice(0, 40), cls: el.className,
      ratio: Math.round(ratio * 100) / 100, color: s.color, bg: 'rgb(' + bg.map(Math.round).join(',') + ')'});
  }
  return out; }"""


@pytest.mark.parametrize(
    ("scheme", "width"), [("light", 1280), ("dark", 1280), ("light", 375), ("dark", 375)]
)
def test_light_and_dark_at_1280_and_375_px_keep_aa_contrast_and_the_composer_whole(
    browser: Any,  # noqa: F811
    served: Served,
    scheme: str,
    width: int,
) -> None:
    expect = _expect()
    title = f"Look {scheme} {width}"
    conv_id = _conversation(served, title, QUESTION)
    _api(served, "POST", f"/chat/conversations/{conv_id}/messages", {"content": "zqx vbnm plork?"})
    height = 740 if width == 375 else 800
    page = _page(browser, served, width=width, height=height, color_scheme=scheme)
    try:
        _open(page, title)
        expect(page.locator(".msg.assistant.refusal")).to_have_count(1)
        page.locator(".msg.assistant .chip").first.click()
        expect(page.get_by_role("dialog").locator(".passage")).not_to_be_empty()  # the side panel
        page.get_by_label("Message", exact=True).fill("A question typed on a small screen")
        dark = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
        assert dark is (scheme == "dark")
        body = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (body == "rgb(15, 17, 23)") is (scheme == "dark"), body

        assert page.evaluate(CONTRAST_FAILURES) == []

        # nothing sideways, and the whole composer (box and Send) on screen
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        for part in (page.locator("#chat-form"), page.get_by_role("button", name="Send")):
            box = part.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
            assert box["y"] >= 0 and box["y"] + box["height"] <= height, box
        assert page.get_by_label("Message", exact=True).bounding_box()["width"] > 150
    finally:
        _close(page)


def test_keyboard_only_finds_opens_answers_and_rates(browser: Any, served: Served) -> None:  # noqa: F811
    expect = _expect()
    _conversation(served, "Keyboard walk", QUESTION)
    page = _page(browser, served)
    focused = "document.activeElement"
    try:
        page.goto("/ui")
        search = page.get_by_label("Search conversations")
        expect(page.locator("#convs li", has_text="Keyboard walk")).to_have_count(1)
        search.focus()
        page.keyboard.type("keyboard walk")
        page.keyboard.press("Tab")  # from the search box to the one conversation left
        assert page.evaluate(f"{focused}.closest('li').textContent").startswith("Keyboard walk")
        page.keyboard.press("Enter")
        message = page.get_by_label("Message", exact=True)
        expect(message).to_be_focused()  # opened, ready to type
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Attach files")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Send")).to_be_focused()
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Shift+Tab")  # back past the box: the last answer's controls
        bad = page.locator(".msg.assistant").get_by_role("button", name="Bad answer")
        expect(bad).to_be_focused()
        page.keyboard.press("Enter")
        expect(bad).to_have_attribute("aria-pressed", "true")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Shift+Tab")  # Good, Regenerate, Copy
        expect(page.locator(".msg.assistant").get_by_role("button", name="Copy")).to_be_focused()
        page.keyboard.press("Shift+Tab")  # the source chip, opened with Enter
        chip = page.locator(".msg.assistant .chip")
        expect(chip).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_role("dialog")).to_be_visible()  # the passage in the side panel, Close focused
        expect(page.get_by_role("dialog").get_by_role("button", name="Close")).to_be_focused()
        page.keyboard.press("Escape")
        expect(chip).to_be_focused()
    finally:
        _close(page)
