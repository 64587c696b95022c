"""Benchmark: the workbench page opening a long session. A stdio front runs N short turns (each
reply a little Markdown: bold, code, a link, a list) on a listening runner; then headless Chromium
opens the pair URL and the session, and this prints the time from the click to the history loaded
(`session/load` answered) and to the first paint after it, how many text parts the page left to
draw later (off screen), the page's DOM size, and the time each
frame takes while scrolling from the top to the bottom. A benchmark, not a test: nothing is asserted about speed.

    .venv/bin/python bench/workbench.py [--turns 200,2000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner import REPO, Client, text

REPLY = "Done: **step** with `code`, see [the docs](https://example.com/docs).\n\n- one\n- two\n"
PAINTED = (
    "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now())));"
)


def browser(profile: str) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1280,800"):  # fmt: skip
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))


def measure(turns: int, tmp: str) -> dict[str, float]:
    env = dict(os.environ, XDG_RUNTIME_DIR=f"{tmp}/run{turns}", XDG_DATA_HOME=f"{tmp}/data{turns}")
    os.makedirs(env["XDG_RUNTIME_DIR"])
    script = Path(tmp) / "script.json"
    script.write_text(json.dumps({"scenarios": [{"match": "", "steps": [{"say": REPLY}]}]}))
    options = ["--agent", "scripted", "--script", str(script), "--db", f"{tmp}/w{turns}.db"]
    cli = [sys.executable, "-m", "acp_server"]
    subprocess.run([*cli, "runner", "start", "--listen", "127.0.0.1:0", *options], env=env, cwd=REPO, check=True)
    url = json.loads(
        subprocess.run([*cli, "pair", "--json"], env=env, cwd=REPO, check=True, capture_output=True).stdout
    )["url"]
    front = Client(["--runner", *options], env)
    session_id = front.session(tmp)
    started = time.perf_counter()
    for n in range(turns):
        front.call("session/prompt", {"sessionId": session_id, "prompt": [text(f"turn {n}")]})
    made = time.perf_counter() - started
    front.close()
    driver = browser(f"{tmp}/profile{turns}")
    try:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        driver.set_script_timeout(300)
        driver.get(url)
        row = WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "li.session button"))
        clicked = driver.execute_script("return performance.now()")
        row[0].click()
        WebDriverWait(driver, 600).until(lambda d: d.find_elements(By.CSS_SELECTOR, '#view[data-loaded="true"]'))
        loaded = driver.execute_script("return performance.now()")
        painted = driver.execute_async_script(PAINTED)
        nodes = driver.execute_script("return document.getElementsByTagName('*').length")
        later = driver.execute_script("return document.getElementById('view').dataset.drawnLater || '-'")
        driver.execute_script("window.scrollTo(0, 0)")
        frames = driver.execute_async_script(
            "const done = arguments[0]; const times = [performance.now()]; const step = () => {"
            " times.push(performance.now()); window.scrollBy(0, 800);"
            " if (window.scrollY + innerHeight >= document.scrollingElement.scrollHeight - 1 || times.length > 5000)"
            " done(times); else requestAnimationFrame(step); }; requestAnimationFrame(step);"
        )
        gaps = sorted(b - a for a, b in itertools.pairwise(frames[1:]))
    finally:
        driver.quit()
        subprocess.run([*cli, "runner", "stop"], env=env, cwd=REPO, check=True, capture_output=True)
    return {
        "made": made,
        "loaded": loaded - clicked,
        "painted": painted - clicked,
        "nodes": nodes,
        "later": later,
        "frames": len(gaps),
        "median": gaps[len(gaps) // 2],
        "p95": gaps[int(len(gaps) * 0.95)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default="200,2000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="acpw-", dir="/tmp") as tmp:
        for turns in (int(n) for n in args.turns.split(",")):
            got = measure(turns, tmp)
            print(
                f"{turns:5} turns (made in {got['made']:.1f} s): click -> history loaded {got['loaded']:.0f} ms, "
                f"-> first paint {got['painted']:.0f} ms ({got['later']} text parts left to draw later); "
                f"{got['nodes']} DOM elements; "
                f"scrolling top to bottom, 800 px a frame: {got['frames']} frames, "
                f"median {got['median']:.0f} ms, p95 {got['p95']:.0f} ms a frame"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
