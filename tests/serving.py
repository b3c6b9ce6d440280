"""Helpers of the ``mkb serve`` tests: a service run by a thread of the test's process, and a candidate folder's
files as a request carries them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from kit.serve.server import Service

TOKEN = "test-token-of-the-serve-tests"


def files_of(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


class Running:
    """A :class:`kit.serve.server.Service` served by a thread of this process until :meth:`stop`."""

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        svc.close_wait_s = None  # a stop waits for the running check: the next service gets the same workspace
        self.thread = threading.Thread(target=svc.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not svc.server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert svc.server.started, "the service did not start"

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.svc.url, headers=headers, timeout=httpx.Timeout(330.0))

    def stop(self) -> None:
        if self.thread.is_alive():
            self.svc.stop()
            self.thread.join(300)
        assert not self.thread.is_alive()
