"""The workbench page in a real headless Chromium (Debian's `chromium` and `chromedriver`, driven
by Selenium) against a real listening runner with the scripted agent and a stdio front: the pair
URL opens the session list, a session opened mid-turn shows every marker once, its permission
question is answered in the page, prompts cross between page and front, model text stays text,
a read-only token shows no controls, and the page is served with a strict CSP."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from installs import unavailable
from runner_fronts import Front, cli, runners, scripted_runner
from schema_check import check_agent_frame

HOSTILE = (
    '<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>\n\n'
    "[upper](JAVASCRIPT:window.pwned=3) [data](data:text/html,<b>x</b>) [rel](/acp) "
    '[spaced]( javascript:window.pwned=4) <a href="javascript:window.pwned=5">raw</a> **end**'
)
HAUI = {
    "schema": "hermes.adaptive-ui",
    "version": 1,
    "blocks": [
        {"type": "stat", "label": "Tests", "value": 412, "delta": "+12", "trend": "up"},
        {"type": "stat", "label": "Failures", "value": 0, "delta": "-3", "trend": "down", "caption": "since Monday"},
        {"type": "table", "columns": ["Suite", "Time (s)"], "rows": [["unit <b>", 1.5], ["e2e | slow", 40]]},
        {
            "type": "chart",
            "kind": "bar",
            "title": "Runtime",
            "labels": ["mon", "tue", "wed"],
            "series": [{"name": "e2e", "values": [40, 38, 31]}, {"name": "unit", "values": [2, 1.5, None]}],
        },
        {"type": "notice", "tone": "warning", "title": "Flaky", "body": "`test_upload` failed **once**."},
        {
            "type": "key_value",
            "title": "Build",
            "items": [{"key": "Branch", "value": "main"}, {"key": "Run", "value": 7}],
        },
        {"type": "disclosure", "title": "How it was measured", "body": "Median of five runs."},
        {
            "type": "actions",
            "items": [
                {"label": "Evil", "action": "open_url", "value": "javascript:alert(1)"},
                {"label": "CI run", "action": "open_url", "value": "https://ci.example.com/r/7"},
                {"label": "Re-run", "action": "copy", "value": "pytest -k 'upload'\n  --count 5"},
                {"label": "Why slow?", "action": "ask", "value": "Why is e2e slow?"},
            ],
        },
    ],
}
FENCED = json.dumps({"schema": "hermes.adaptive-ui", "version": 1, "blocks": HAUI["blocks"][:2]})
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
BEFORE = [f"m{n} " for n in range(20)]
AFTER = [f"m{n} " for n in range(20, 40)]
SCRIPT = {
    "scenarios": [
        {
            "match": "markers",
            "steps": [
                {"think": "Markers first, then a file."},
                *({"say": word} for word in BEFORE),
                {
                    "tool": "Write NOTES.md",
                    "kind": "edit",
                    "ask": True,
                    "write_file": {"path": "NOTES.md", "content": "the notes\n"},
                },
                *({"say": word} for word in AFTER),
                {"usage": {"inputTokens": 900, "outputTokens": 60, "costUsd": 0.0021}},
            ],
        },
        {
            "match": "links",
            "steps": [
                {"say": "A [bad link](javascript:alert(1)) and a **good** one: [docs](https://example.com/docs)."}
            ],
        },
        {
            "match": "ask again",
            "steps": [
                {
                    "tool": "Write OTHER.md",
                    "kind": "edit",
                    "ask": True,
                    "write_file": {"path": "OTHER.md", "content": "x\n"},
                }
            ],
        },
        {
            "match": "hostile",
            "steps": [
                {"say": HOSTILE},
                {
                    "tool": '<img src=x onerror="window.pwned=1">',
                    "kind": "execute",
                    "result": "<script>pwned=2</script>",
                },
            ],
        },
        {
            "match": "haui",
            "steps": [{"say": "The suite is green.\n```hermes-ui\n"}, {"say": json.dumps(HAUI)}, {"say": "\n```\n"}],
        },
        {
            "match": "fence",
            "steps": [
                {"say": "Counting.\n```hermes-ui\n"},
                {"say": FENCED[:40]},
                {
                    "tool": "Write COUNT.md",
                    "kind": "edit",
                    "ask": True,
                    "write_file": {"path": "COUNT.md", "content": "1\n"},
                },
                {"say": FENCED[40:]},
                {"say": "\n```\nCounted."},
            ],
        },
        {"match": "", "steps": [{"say": "Heard you."}]},
    ]
}
PAGE = "#view"


@pytest.fixture
def runner_options(tmp_path, monkeypatch) -> Iterator[tuple[str, ...]]:
    with scripted_runner(tmp_path, monkeypatch, SCRIPT) as options:
        yield options


@pytest.fixture
def browser(tmp_path) -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        unavailable(
            "Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1280,800",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def listen(options: tuple[str, ...], *flags: str) -> dict[str, Any]:
    """`runner start --listen` on a free port, then `pair --json`."""
    done = cli("runner", "start", "--listen", "127.0.0.1:0", *options)
    assert done.returncode == 0, done.stderr
    paired = cli("pair", "--json", *flags)
    assert paired.returncode == 0, paired.stderr
    return json.loads(paired.stdout)


def wait(driver: Any, condition: Callable[[Any], Any], what: str, timeout: float = 30) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The page redraws what an update changes: an element the condition found and then read may
    # have been replaced in between; the condition is then asked again, on the new one.
    ignored = (StaleElementReferenceException,)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(
        condition, message=f"the page never showed {what}"
    )


def find(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, css)


def frames_until(front: Front, stop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The front's frames (each checked against the schema) up to and including the first `stop` one."""
    seen = []
    while True:
        frame = front.next_frame(timeout=30)
        assert frame is not None, f"the front closed its stdout{front.exit_report()}"
        seen.append(frame)
        if stop(frame):
            return seen


def check_page_frames(driver: Any) -> int:
    """Every WebSocket frame the runner sent the page (from Chromium's DevTools log) checked against
    the ACP schema; how many there were."""
    sent: dict[Any, str] = {}
    received = []
    for entry in driver.get_log("performance"):
        event = json.loads(entry["message"])["message"]
        if event["method"] == "Network.webSocketFrameSent":
            frame = json.loads(event["params"]["response"]["payloadData"])
            if "method" in frame and "id" in frame:
                sent[frame["id"]] = frame["method"]
        elif event["method"] == "Network.webSocketFrameReceived":
            received.append(json.loads(event["params"]["response"]["payloadData"]))
    for frame in received:
        check_agent_frame(frame, None if "method" in frame else sent.get(frame.get("id")))
    return len(received)


def markers(text: str) -> list[str]:
    return re.findall(r"\bm\d+\b", text)


def open_session(driver: Any, session_id: str) -> None:
    row = wait(driver, lambda d: find(d, f'li.session[data-session-id="{session_id}"] button'), "the session")
    row[0].click()
    wait(driver, lambda d: find(d, f'{PAGE}[data-loaded="true"]'), "the loaded session")


def test_a_session_started_at_a_stdio_front_is_watched_approved_and_continued_from_the_page(
    tmp_path, runner_options, browser
):
    paired = listen(runner_options)
    front = Front(*runner_options)
    try:
        session_id = front.start_session(str(tmp_path))
        turn = front.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "markers"}]}
        )
        asked = frames_until(front, lambda f: f.get("method") == "session/request_permission")[-1]

        browser.get(paired["url"])
        open_session(browser, session_id)  # mid-turn: the question is open at the front
        assert "token" not in browser.current_url  # taken from the address bar...
        assert browser.execute_script("return sessionStorage.getItem('acp-token')") == paired["token"]  # ...kept here
        question = wait(browser, lambda d: find(d, ".question"), "the permission question")[0]
        assert "Write NOTES.md" in question.text and "+ the notes" in question.text  # the diff to approve
        assert markers(find(browser, ".log")[0].text) == [w.strip() for w in BEFORE]
        shot(browser, tmp_path, "question-phone", 390, 844, mobile=True)
        allow = [b for b in find(question, "button") if b.get_attribute("class") == "option option-allow_once"]
        allow[0].click()

        rest = frames_until(front, lambda f: f.get("id") == turn and "method" not in f)
        assert rest[-1]["result"]["stopReason"] == "end_turn"
        cancels = [f for f in rest if f.get("method") == "$/cancel_request"]
        assert [c["params"]["requestId"] for c in cancels] == [asked["id"]]  # the page answered first
        states = [f["params"]["update"].get("status") for f in rest if f.get("method") == "session/update"]
        assert "completed" in states
        assert (tmp_path / "NOTES.md").read_text() == "the notes\n"
        wait(browser, lambda d: "m39" in find(d, ".log")[0].text, "the turn's end")
        assert markers(find(browser, ".log")[0].text) == [w.strip() for w in BEFORE + AFTER]  # each once, in order
        assert not find(browser, ".question")
        assert find(browser, ".tool")[0].get_attribute("data-status") == "completed"
        wait(browser, lambda d: "tokens" in find(d, ".usage")[0].text, "the usage")

        box = find(browser, "#message")[0]
        box.send_keys("ask again\n")  # Enter sends
        wait(browser, lambda d: find(d, ".question"), "the page's own question")
        box.send_keys("hello from the page\n")  # behind the turn waiting on the question
        queued = wait(browser, lambda d: find(d, ".queue li.queued"), "the queued prompt")
        assert queued[0].text == "Queued: hello from the page"
        find(browser, ".question button.option-allow_once")[0].click()
        frames = frames_until(front, lambda f: "hello from the page" in json.dumps(f))
        assert frames[-1]["params"]["update"]["sessionUpdate"] == "user_message_chunk"  # shown at the front
        assert (tmp_path / "OTHER.md").read_text() == "x\n"
        wait(browser, lambda d: "Heard you." in find(d, ".log")[0].text, "the page's reply")
        assert not find(browser, ".queue li")
        users = [m.text for m in find(browser, ".message.user .body")]
        assert users == ["markers", "ask again", "hello from the page"]

        box.send_keys("links please\n")
        wait(browser, lambda d: "docs" in find(d, ".message.agent")[-1].text, "the links")
        last = find(browser, ".message.agent")[-1]
        hrefs = [a.get_attribute("href") for a in find(last, "a")]
        assert hrefs == ["https://example.com/docs"]  # the javascript: one is text
        assert "bad link (javascript:alert(1))" in last.text
        assert find(last, "strong")[0].text == "good"
        shots(browser, tmp_path)
    finally:
        front.close_stdin()
        front.wait()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []  # nothing refused by the CSP, no script errors
    assert check_page_frames(browser) > 20


def shot(driver: Any, tmp_path: Path, name: str, width: int, height: int, *, mobile: bool = False) -> None:
    """A screenshot of what is on screen at this size, the last question scrolled into view."""
    into = Path(os.environ.get("ACP_WORKBENCH_SCREENSHOTS", tmp_path))
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    wait(driver, lambda d: d.execute_script("return window.innerWidth") == width, f"a {width} px window")
    driver.execute_script("document.querySelector('.question:last-child')?.scrollIntoView({block: 'end'})")
    driver.save_screenshot(str(into / f"workbench-{name}.png"))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def shots(driver: Any, tmp_path: Path) -> None:
    """Screenshots at a phone's 390x844 and a desktop's 1280x800 (into ACP_WORKBENCH_SCREENSHOTS
    when set: docs/images/ keeps them)."""
    into = Path(os.environ.get("ACP_WORKBENCH_SCREENSHOTS", tmp_path))
    for name, (width, height, mobile) in {"phone": (390, 844, True), "desktop": (1280, 800, False)}.items():
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        wait(driver, lambda d, w=width: d.execute_script("return window.innerWidth") == w, f"a {width} px window")
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
        driver.save_screenshot(str(into / f"workbench-session-{name}.png"))
        find(driver, "#back")[0].click()
        wait(driver, lambda d: find(d, "li.session"), "the session list")
        driver.save_screenshot(str(into / f"workbench-sessions-{name}.png"))
        find(driver, "li.session button")[0].click()
        wait(driver, lambda d: find(d, f'{PAGE}[data-loaded="true"]'), "the session again")


def test_a_read_only_token_shows_the_session_but_no_controls(tmp_path, runner_options, browser):
    listen(runner_options)
    front = Front(*runner_options)
    try:
        session_id = front.start_session(str(tmp_path))
        front.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]})
    finally:
        front.close_stdin()
        front.wait()
    watcher = json.loads(cli("pair", "--json", "--read-only").stdout)
    browser.get(watcher["url"])
    wait(browser, lambda d: find(d, "#status")[0].text == "read-only", "the read-only status")
    open_session(browser, session_id)
    wait(browser, lambda d: "Heard you." in find(d, ".log")[0].text, "the history")
    assert not find(browser, "#message") and not find(browser, "button.send") and not find(browser, "button.cancel")
    assert [b.text for b in find(browser, "button") if b.is_displayed()] == ["Sessions"]


def test_the_page_is_served_with_a_strict_content_security_policy_and_no_token(runner_options):
    paired = listen(runner_options)
    base = paired["url"].split("#")[0]
    with urllib.request.urlopen(base) as page:
        policy = page.headers["Content-Security-Policy"]
        assert '<script type="module" src="/ui/app.js">' in page.read().decode()
    assert "script-src 'self';" in policy and "unsafe" not in policy
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    port = base.rstrip("/").rpartition(":")[2]
    assert f"connect-src 'self' ws://127.0.0.1:{port};" in policy
    with urllib.request.urlopen(base + "ui/app.js") as script:
        assert script.headers["Content-Type"].startswith("text/javascript")
    for missing in ("ui/../page.py", "ui/page.py", "ui/.hidden.js"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + missing)
        assert refused.value.code == 404
    assert runners()[0]["listen"]["url"] == base


def tab_titles(driver: Any) -> list[str]:
    return [t["title"] for t in driver.execute_cdp_cmd("Target.getTargets", {})["targetInfos"] if t["type"] == "page"]


def test_keys_a_question_in_a_background_tab_and_hostile_model_text(tmp_path, runner_options, browser):
    paired = listen(runner_options)
    front = Front(*runner_options)
    try:
        session_id = front.start_session(str(tmp_path))
        front.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hostile"}]})
        browser.get(paired["url"])
        open_session(browser, session_id)
        reply = wait(browser, lambda d: find(d, ".message.agent"), "the hostile reply")[-1]
        assert not find(browser, "#view img, #view script, #view b")  # raw HTML stayed text
        assert [a.get_attribute("href") for a in find(reply, "a")] == []  # no javascript:, data: or relative link
        assert '<img src=x onerror="window.pwned=1">' in reply.text and "end" in find(reply, "strong")[0].text
        assert "<img src=x" in find(browser, ".tool .tool-title")[0].text
        assert browser.execute_script("return window.pwned") is None

        box = find(browser, "#message")[0]
        from selenium.webdriver.common.keys import Keys

        box.send_keys("line one", Keys.SHIFT, Keys.ENTER, Keys.SHIFT, "line two")  # Shift+Enter: a new line
        assert box.get_attribute("value") == "line one\nline two"
        box.send_keys(Keys.ENTER)
        wait(browser, lambda d: "Heard you." in find(d, ".log")[0].text, "the reply")
        assert find(browser, ".message.user .body")[-1].text == "line one\nline two"

        page = browser.current_window_handle
        browser.switch_to.new_window("tab")  # the workbench is now a background tab
        wait(browser, lambda d: not d.execute_script("return document.hidden"), "the new tab in front")
        asking = front.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "ask again"}]}
        )
        wait(browser, lambda d: any(t.startswith("waiting for you") for t in tab_titles(d)), "the waiting title")
        browser.close()
        browser.switch_to.window(page)
        wait(browser, lambda d: find(d, ".question"), "the question")
        find(browser, "#message")[0].send_keys(Keys.ESCAPE)  # Esc cancels the turn
        answer = frames_until(front, lambda f: f.get("id") == asking and "method" not in f)[-1]
        assert answer["result"]["stopReason"] == "cancelled"
        wait(browser, lambda d: not find(d, ".question"), "the question withdrawn")
        wait(browser, lambda d: not d.title.startswith("waiting for you"), "the title restored")

        from selenium.webdriver.support.ui import Select

        haui = '.options-bar select[data-config-id="haui"]'
        assert [o.get_attribute("value") for o in find(browser, haui + " option")] == ["on", "off"]
        Select(find(browser, haui)[0]).select_by_value("off")  # session/set_config_option
        wait(browser, lambda d: find(d, haui + ' option[value="off"]')[0].is_selected(), "the option changed")
        browser.refresh()  # the token is still in this tab's sessionStorage; the option is the runner's
        open_session(browser, session_id)
        wait(browser, lambda d: find(d, haui + ' option[value="off"]')[0].is_selected(), "the option after a reload")
    finally:
        front.close_stdin()
        front.wait()
    check_page_frames(browser)


def test_the_page_follows_the_systems_light_or_dark_setting(tmp_path, runner_options, browser):
    paired = listen(runner_options)
    browser.get(paired["url"])
    wait(browser, lambda d: find(d, ".session-list"), "the session list")
    backgrounds = []
    for scheme in ("light", "dark"):
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
        )
        backgrounds.append(browser.execute_script("return getComputedStyle(document.body).backgroundColor"))
    assert backgrounds == ["rgb(251, 251, 250)", "rgb(20, 20, 22)"]


def test_a_haui_reply_is_drawn_natively_and_the_same_after_a_reload(tmp_path, runner_options, browser):
    paired = listen(runner_options)
    front = Front(*runner_options)
    try:
        session_id = front.start_session(str(tmp_path))
        front.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "haui"}]})
    finally:
        front.close_stdin()
        front.wait()
    browser.get(paired["url"])
    open_session(browser, session_id)
    haui = wait(browser, lambda d: find(d, ".message.agent .haui"), "the blocks")[0]
    drawn = haui.get_attribute("outerHTML")
    haui_shots(browser, tmp_path)
    (grid,) = find(haui, ".stat-grid")  # the two neighbouring stats: one grid of cards
    assert [c.text.split("\n") for c in find(grid, ".stat")] == [
        ["Tests", "412", "▲ +12"],
        ["Failures", "0", "▼ -3", "since Monday"],
    ]
    table = find(haui, ".haui-table table")[0]
    assert [[c.text for c in find(row, "th, td")] for row in find(table, "tr")] == [
        ["Suite", "Time (s)"],
        ["unit <b>", "1.5"],
        ["e2e | slow", "40"],
    ]
    assert [c.get_attribute("class") for c in find(table, "td")] == ["", "align-right"] * 2  # numbers right
    chart = find(haui, "figure.chart")[0]
    bars = find(chart, "svg rect")
    assert [b.find_element("css selector", "title").get_attribute("textContent") for b in bars] == [
        "e2e, mon: 40",
        "e2e, tue: 38",
        "e2e, wed: 31",
        "unit, mon: 2",
        "unit, tue: 1.5",
    ]
    numbers = find(chart, ".haui-table")[0]
    assert not numbers.is_displayed()
    press(browser, find(chart, "button.table-view")[0])  # the same numbers as a table
    assert numbers.is_displayed() and not find(chart, "svg")[0].is_displayed()
    assert [[c.text for c in find(row, "th, td")] for row in find(numbers, "tr")] == [
        ["", "e2e", "unit"],
        ["mon", "40", "2"],
        ["tue", "38", "1.5"],
        ["wed", "31", ""],
    ]
    assert find(haui, ".notice.tone-warning code")[0].text == "test_upload"
    assert [d.text for d in find(haui, ".key-value dd")] == ["main", "7"]
    assert find(haui, "details.disclosure")[0].get_attribute("open") is None  # closed
    links = find(browser, ".message.agent a")
    assert [a.get_attribute("href") for a in links] == ["https://ci.example.com/r/7"]  # never the javascript: one
    assert find(links[0], ".link-host")[0].text == "ci.example.com"
    assert "Evil" not in haui.text and browser.execute_script("return window.pwned") is None
    preview = find(haui, ".copy-preview")[0]
    assert preview.get_attribute("textContent") == "pytest -k 'upload'\n  --count 5"  # exactly what is copied
    press(browser, find(haui, "button.ask")[0])
    assert find(browser, "#message")[0].get_attribute("value") == "Why is e2e slow?"  # in the box, not sent
    reply = find(browser, ".message.agent")[-1]
    assert "hermes.adaptive-ui" not in reply.text and "{" not in reply.text

    browser.refresh()
    open_session(browser, session_id)
    again = wait(browser, lambda d: find(d, ".message.agent .haui"), "the blocks after a reload")[0]
    assert again.get_attribute("outerHTML") == drawn  # the same blocks, drawn the same
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    check_page_frames(browser)


def press(driver: Any, button: Any) -> None:
    """A click on `button` scrolled to the middle of the screen (clear of the sticky bars)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()


def haui_shots(driver: Any, tmp_path: Path) -> None:
    """The HAUI reply on screen at 390x844 and 1280x800 (docs/images keeps them)."""
    into = Path(os.environ.get("ACP_WORKBENCH_SCREENSHOTS", tmp_path))
    for name, (width, height, mobile) in {"phone": (390, 844, True), "desktop": (1280, 800, False)}.items():
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        wait(driver, lambda d, w=width: d.execute_script("return window.innerWidth") == w, f"a {width} px window")
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
        driver.execute_script("document.querySelector('.haui').scrollIntoView({block: 'start'})")
        driver.save_screenshot(str(into / f"workbench-haui-{name}.png"))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_a_fence_still_streaming_is_a_placeholder_and_the_list_says_waiting_for_you(tmp_path, runner_options, browser):
    paired = listen(runner_options)
    front = Front(*runner_options)
    try:
        session_id = front.start_session(str(tmp_path))
        turn = front.request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "fence"}]})
        frames_until(front, lambda f: f.get("method") == "session/request_permission")  # mid-fence
        browser.get(paired["url"])
        row = f'li.session[data-session-id="{session_id}"]'
        wait(browser, lambda d: any("waiting for you" in r.text for r in find(d, row)), "waiting for you in the list")
        shot(browser, tmp_path, "waiting-phone", 390, 844, mobile=True)
        open_session(browser, session_id)
        pending = wait(browser, lambda d: find(d, ".haui-pending"), "the placeholder")[0]
        assert pending.size["height"] == browser.execute_script(
            "return 6 * parseFloat(getComputedStyle(document.documentElement).fontSize)"
        )
        log = find(browser, ".log")[0].text
        assert "Counting." in log and "{" not in log and "hermes" not in log  # never the partial JSON
        find(browser, ".question button.option-allow_once")[0].click()
        rest = frames_until(front, lambda f: f.get("id") == turn and "method" not in f)
        assert rest[-1]["result"]["stopReason"] == "end_turn"
        wait(browser, lambda d: "Counted." in find(d, ".log")[0].text, "the turn's end")
        assert not find(browser, ".haui-pending")
        assert [s.text.split("\n")[0] for s in find(browser, ".haui .stat")] == ["Tests", "Failures"]
        find(browser, "#back")[0].click()
        wait(browser, lambda d: find(d, row), "the list again")
        assert "waiting for you" not in find(browser, row)[0].text
    finally:
        front.close_stdin()
        front.wait()
    check_page_frames(browser)


def test_a_long_session_draws_what_is_on_screen_and_the_rest_as_it_scrolls_near(tmp_path, runner_options, browser):
    paired = listen(runner_options)
    front = Front(*runner_options)
    try:
        session_id = front.start_session(str(tmp_path))
        for n in range(80):
            front.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": f"turn {n}"}]})
    finally:
        front.close_stdin()
        front.wait()
    browser.get(paired["url"])
    open_session(browser, session_id)
    wait(browser, lambda d: "turn 79" in find(d, ".log")[0].text, "the last turn")
    assert len(find(browser, ".message.user .body")) == 80
    # at the first paint only the last screens' text was drawn: 160 messages, most left for later
    # (drawn as they come near the view, or in idle time)
    assert int(find(browser, PAGE)[0].get_attribute("data-drawn-later")) > 100
    browser.execute_script("window.scrollTo(0, 0)")
    wait(browser, lambda d: find(d, ".message.user .body")[0].text == "turn 0", "the first turn drawn near the view")
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
