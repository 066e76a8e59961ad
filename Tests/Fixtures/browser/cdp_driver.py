#!/usr/bin/env python3
"""Drives Debian's headless chromium as a person would use a page, over the Chrome DevTools Protocol (PyPI
`websockets` as its client), for chaos's browser tests.

  cdp_driver.py --chromium PATH --steps STEPS.json [--timeout S]

STEPS.json is a list of steps, done in order:
  {"navigate": URL}                      open the page (waits for its load event)
  {"wait": JS, "timeout": S}             wait until the expression is true (fails after S seconds, default 20)
  {"eval": JS, "as": NAME}               the expression's value (JSON), reported under NAME
  {"click": CSS}                         click the first element the selector finds
  {"type": CSS, "text": TEXT}            set an input's value and fire its input event
  {"screenshot": PATH}                   a PNG of the page as drawn
  {"sleep": S}                           wait
Prints one JSON object: {"ok": true, "values": {NAME: value, ...}} or {"ok": false, "error": ..., "values": ...}.
The browser is started with a profile of its own, on a DevTools port the kernel picks, and always stopped.
"""
import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

from websockets.sync.client import connect


class Page:
    def __init__(self, socket):
        self.socket = socket
        self.next_id = 0

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        mine = self.next_id
        self.socket.send(json.dumps({"id": mine, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            message = json.loads(self.socket.recv(timeout=left))
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')} "
                               f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result.get("result", {}).get("value")


def start_browser(chromium, profile):
    process = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1280,1800",
         f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = os.path.join(profile, "DevToolsActivePort")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(port_file):
            lines = open(port_file).read().split("\n")
            if lines and lines[0].isdigit():
                return process, int(lines[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before it listened")
        time.sleep(0.1)
    raise RuntimeError("chromium did not open its DevTools port within 30 s")


def page_socket(port):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
        pages = [t for t in targets if t.get("type") == "page"]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    raise RuntimeError("chromium has no page")


def run(page, steps, values):
    for step in steps:
        if "navigate" in step:
            page.call("Page.enable")
            page.call("Page.navigate", {"url": step["navigate"]})
            wait(page, "document.readyState === 'complete'", 20)
        elif "wait" in step:
            wait(page, step["wait"], step.get("timeout", 20))
        elif "eval" in step:
            values[step["as"]] = page.evaluate(step["eval"])
        elif "click" in step:
            page.evaluate(f"document.querySelector({json.dumps(step['click'])}).click(), true")
        elif "type" in step:
            selector, text = json.dumps(step["type"]), json.dumps(step["text"])
            page.evaluate(f"(() => {{ const e = document.querySelector({selector}); e.value = {text}; "
                          f"e.dispatchEvent(new Event('input')); return true; }})()")
        elif "screenshot" in step:
            data = page.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})["data"]
            with open(step["screenshot"], "wb") as out:
                out.write(base64.b64decode(data))
        elif "sleep" in step:
            time.sleep(step["sleep"])
        else:
            raise RuntimeError(f"unknown step {step}")


def wait(page, expression, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if page.evaluate(f"!!({expression})"):
                return
        except RuntimeError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true within {timeout} s: {expression}")
        time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--steps", required=True)
    args = parser.parse_args()
    steps = json.load(open(args.steps))
    profile = tempfile.mkdtemp(prefix="chaos-cdp-")
    values = {}
    process = None
    try:
        process, port = start_browser(args.chromium, profile)
        with connect(page_socket(port), max_size=64 << 20, open_timeout=10) as socket:
            run(Page(socket), steps, values)
        print(json.dumps({"ok": True, "values": values}))
        return 0
    except Exception as error:  # the test prints what failed, with what was read before it
        print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}", "values": values}))
        return 1
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
