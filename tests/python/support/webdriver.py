"""A minimal W3C WebDriver client over urllib for Debian's chromedriver: start a headless Chromium
session, navigate, run scripts, wait for a condition, take a screenshot. No browser package from
PyPI is needed; chromedriver and chromium come from the system (tools/aethercl's apt list)."""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser")
DRIVER_CANDIDATES = ("chromedriver",)


def find_browser() -> Optional[tuple]:
    """(chromium, chromedriver) paths, or None when either is missing."""
    browser = next((shutil.which(n) for n in CHROMIUM_CANDIDATES if shutil.which(n)), None)
    driver = next((shutil.which(n) for n in DRIVER_CANDIDATES if shutil.which(n)), None)
    if driver is None and Path("/usr/lib/chromium/chromedriver").is_file():
        driver = "/usr/lib/chromium/chromedriver"
    return (browser, driver) if browser and driver else None


def clean_environment() -> dict:
    """The environment without sanitizer preloads (a sanitized test run must not reach the
    browser) and with a private HOME so no profile state leaks between runs."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")}
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    pass


class Browser:
    """One headless Chromium session driven through chromedriver. Use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 1500, timeout_s: float = 20.0):
        found = find_browser()
        if found is None:
            raise FileNotFoundError("chromium and chromedriver are needed (apt-get install "
                                    "chromium chromium-driver; tools/aethercl setup does it)")
        self.browser_path, driver_path = found
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="aethercl-chromium-")
        env = clean_environment()
        env["HOME"] = self.profile
        # Its own process group: close() ends chromedriver and the browsers it started, nothing else.
        # chromedriver's log (and the browser's stderr, which it passes on) is kept in the
        # profile: a browser that fails to start is explained by it (see _start_failure).
        self.log_path = os.path.join(self.profile, "chromedriver.log")
        self.process = subprocess.Popen([driver_path, f"--port={self.port}",
                                         f"--log-path={self.log_path}", "--log-level=INFO"],
                                        env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._call("GET", "/status")["value"].get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise WebDriverError("chromedriver did not start")
            time.sleep(0.05)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                f"--window-size={width},{height}", f"--user-data-dir={self.profile}/data"]
        capabilities = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": self.browser_path, "args": args}}}}
        try:
            self.session = self._call("POST", "/session", capabilities)["value"]["sessionId"]
        except WebDriverError as error:
            failure = self._start_failure(error)
            self.close()
            raise failure from None
        except BaseException:
            self.close()
            raise

    def _start_failure(self, error: WebDriverError) -> WebDriverError:
        """The session error with the end of chromedriver's log, where the browser's own reason
        for not starting (a missing library, a sandbox or shared-memory failure) appears."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                tail = [line.rstrip() for line in log.readlines()
                        if "[SEVERE]" in line or "[WARNING]" in line or "ERROR:" in line][-15:]
        except OSError:
            tail = []
        detail = "\n".join(tail) if tail else "(chromedriver logged no warnings)"
        return WebDriverError(f"{error}\nthe end of chromedriver's log:\n{detail}")

    def _call(self, method: str, path: str, payload: Any = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise WebDriverError(f"{method} {path}: {error.read()[:500]!r}") from None

    def _session(self, method: str, path: str, payload: Any = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", payload)["value"]

    def get(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def script(self, source: str, *args: Any) -> Any:
        """Runs `source` as a function body (return a value; it may return a Promise)."""
        return self._session("POST", "/execute/sync", {"script": source, "args": list(args)})

    def wait_for(self, condition: Callable[[], Any], timeout_s: float = 20.0,
                 what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
            time.sleep(0.2)

    def screenshot(self, path) -> Path:
        path = Path(path)
        path.write_bytes(base64.b64decode(self._session("GET", "/screenshot")))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "session", None):
                self._call("DELETE", f"/session/{self.session}")
        except (OSError, WebDriverError):
            pass
        finally:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
