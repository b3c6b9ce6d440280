"""Starting ``mkb serve``: the bearer token, the listening socket, uvicorn over the app, the engine's life.

Safe by default: the socket binds 127.0.0.1 unless another host is named; the token is ``MKB_SERVE_TOKEN`` or,
without it, one generated here and printed once (to stderr) at start, never logged nor recorded.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn

from kit.serve import DEFAULT_HOST, DEFAULT_PORT
from kit.serve.app import body_limit, create_app
from kit.serve.engine import Engine
from kit.settings.config import EvalConfig

TOKEN_ENV = "MKB_SERVE_TOKEN"


def token_from_env() -> tuple[str, bool]:
    """``(token, generated)``: ``MKB_SERVE_TOKEN`` when set (not empty), else 32 random bytes, URL-safe."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    return (given, False) if given else (secrets.token_urlsafe(32), True)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (port 0: a free one).

    Raises:
        OSError: the address cannot be bound (names it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"--host/--port: cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@dataclass
class Service:
    """An opened engine behind uvicorn on ``sock``; :meth:`run` serves until stopped (SIGINT/SIGTERM in the main
    thread, or :meth:`stop`), then closes the engine."""

    engine: Engine
    server: uvicorn.Server
    sock: socket.socket
    #: seconds the engine waits for a running check once the server has stopped (None: until it ends); a
    #: check cut short is in its lane's journal and runs again at the next start
    close_wait_s: float | None = 1.0

    @property
    def url(self) -> str:
        host, port = self.sock.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.engine.close(wait_s=self.close_wait_s)
            self.sock.close()

    def stop(self) -> None:
        self.server.should_exit = True


def service(cfg: EvalConfig, token: str, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, workers: int | None = None,
            queue_limit: int = 64, engine_factory: Callable[..., Engine] = Engine) -> Service:
    """Open the engine (its run directories, restored checks, workers) and bind the socket: a :class:`Service`
    ready to :meth:`~Service.run`.

    Raises:
        OSError: the address cannot be bound (before the engine opens).
        what :meth:`kit.serve.engine.Engine.open` raises."""
    sock = bind(host, port)
    try:
        engine = engine_factory(cfg, workers=workers, queue_limit=queue_limit).open()
    except BaseException:
        sock.close()
        raise
    app = create_app(engine, token, body_limit(cfg.candidates.max_file_bytes))
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    return Service(engine, uvicorn.Server(config), sock)


def serve(cfg: EvalConfig, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, workers: int | None = None,
          queue_limit: int = 64) -> int:
    """``mkb serve``: print where it listens (and a generated token, once), serve until interrupted.  Returns 0."""
    token, generated = token_from_env()
    svc = service(cfg, token, host, port, workers, queue_limit)
    where = f" on the Ray cluster at {cfg.dispatch.address}" if svc.engine.on_ray else ""
    print(f"mkb serve: {svc.url} ({svc.engine.stats().workers} worker(s){where}, queue of {queue_limit}; records in "
          f"{cfg.run.dir})",
          file=sys.stderr, flush=True)
    if generated:
        print(f"mkb serve: token (send 'Authorization: Bearer <token>'; set {TOKEN_ENV} to choose it): {token}",
              file=sys.stderr, flush=True)
    svc.run()
    return 0
