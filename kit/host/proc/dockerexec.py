"""The bridge that runs one command inside a worker's container: what :mod:`kit.host.proc` starts in place of the
command when a container is in use (:mod:`kit.host.proc.containermode`), so timeouts, limits, pauses and the status
mapping stay those of :func:`kit.host.proc.run`.

    python -I dockerexec.py exec DOCKER_HOST CONTAINER WORKDIR PIDFILE -- ARGV...
    python -I dockerexec.py reap DOCKER_HOST OWNER_PID CONTAINER [VOLUME ...]

``exec``: ``exec_create`` + ``exec_start`` through the Docker SDK with this process's own environment as the
command's; this process's stdin is copied to the command, the command's stdout and stderr (Docker's
multiplexed stream: 8-byte frame headers) to this process's.  The command's host pid goes into ``PIDFILE``
as soon as the daemon reports it: a command exec'd by Docker leads a session of its own (measured with Docker
20.10: sid = pgid = its pid, as seen from the host), which :mod:`kit.host.proc.sessions` then signals with this
process's own (SIGSTOP for a pause, SIGKILL at a timeout and at the end).  SIGTERM is passed on to the
command's session.  Exit status: the command's; 128 + N (killed by signal N, as runc reports it) becomes
this process dying by signal N, so :class:`kit.host.proc.ProcResult` says ``signal = N`` as for a host process.

``reap``: waits until ``OWNER_PID`` (a worker) is gone, however it ended, then removes its container and
volumes: nothing of a SIGKILLed worker is left behind.  The owner may remove them itself first.

Imports nothing of the kit (it runs with ``python -I``, by path); needs the ``docker`` package.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

#: exit status of a bridge that could not start the command (no daemon, no container)
BRIDGE_FAILED = 125


def _client(host: str):
    import docker

    return docker.DockerClient(base_url=host, timeout=3600) if host else docker.from_env(timeout=3600)


class _Demux:
    """Docker's stream framing without a TTY: ``[stream, 0, 0, 0, size (uint32 BE)]`` then ``size`` bytes."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self.buf += data
        out = []
        while len(self.buf) >= 8:
            stream, size = self.buf[0], struct.unpack(">I", self.buf[4:8])[0]
            if len(self.buf) < 8 + size:
                break
            out.append((stream, self.buf[8:8 + size]))
            self.buf = self.buf[8 + size:]
        return out


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data):]
        except BrokenPipeError:
            return  # the kit stopped reading: the command's output goes nowhere


def _relay(sock: socket.socket) -> None:
    """Copy stdin to ``sock`` (half-closed at stdin's EOF) and the demultiplexed stream to stdout/stderr
    until the daemon closes the stream (the command ended)."""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "sock")
    try:
        sel.register(0, selectors.EVENT_READ, "stdin")
    except (ValueError, OSError):  # no stdin at all
        sock.shutdown(socket.SHUT_WR)
    demux = _Demux()
    while True:
        for key, _ in sel.select():
            if key.data == "stdin":
                data = os.read(0, 65536)
                if data:
                    sock.sendall(data)
                else:
                    sel.unregister(0)
                    sock.shutdown(socket.SHUT_WR)
                continue
            data = sock.recv(65536)
            if not data:
                return
            for stream, payload in demux.feed(data):
                _write_all(2 if stream == 2 else 1, payload)


def _exec(host: str, container: str, workdir: str, pidfile: str, argv: list[str]) -> int:
    inner: list[int] = []
    terminated: list[int] = []

    def on_term(signum: int, _frame: object) -> None:
        terminated.append(signum)
        for pid in inner:
            try:
                os.killpg(pid, signum)
            except OSError:
                pass

    signal.signal(signal.SIGTERM, on_term)
    c = _client(host)
    api = c.api
    exec_id = api.exec_create(container, argv, stdin=True, stdout=True, stderr=True,
                              environment=dict(os.environ), workdir=workdir or None)["Id"]
    sock = api.exec_start(exec_id, socket=True)._sock
    for _ in range(200):  # the daemon reports the pid once the process runs (a few ms)
        info = api.exec_inspect(exec_id)
        if info.get("Pid") or not info.get("Running", True):
            break
        time.sleep(0.005)
    if info.get("Pid"):
        inner.append(int(info["Pid"]))
        with open(pidfile + ".tmp", "w") as f:
            f.write(str(inner[0]))
        os.replace(pidfile + ".tmp", pidfile)
        if terminated:
            on_term(terminated[0], None)
    _relay(sock)
    code = api.exec_inspect(exec_id).get("ExitCode")
    return int(code) if code is not None else BRIDGE_FAILED


def _reap(host: str, owner: int, container: str, volumes: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C of the kit's terminal is not the owner's end
    while True:
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            break
        except PermissionError:
            pass
        time.sleep(0.5)
    c = _client(host)
    try:
        c.api.remove_container(container, force=True)
    except Exception:  # noqa: BLE001 - gone already (the owner removed it)
        pass
    for v in volumes:
        # the daemon may still be removing the container that uses the volume ("volume is in use"): retry
        for _ in range(60):
            try:
                c.api.remove_volume(v, force=True)
                break
            except Exception as exc:  # noqa: BLE001 - gone already, or still in use
                if "in use" not in str(exc):
                    break
                time.sleep(0.5)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 6 and argv[0] == "exec" and argv[5] == "--":
        try:
            code = _exec(argv[1], argv[2], argv[3], argv[4], argv[6:])
        except Exception as exc:  # noqa: BLE001 - the kit sees the exit status and this message
            print(f"mkb container exec failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return BRIDGE_FAILED
        if 128 < code <= 128 + 64:
            sys.stdout.flush()
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command's death, not a crash of ours
            if code - 128 not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be handled anyway
                try:
                    signal.signal(code - 128, signal.SIG_DFL)
                except (OSError, ValueError):
                    return code
            os.kill(os.getpid(), code - 128)
        return code
    if len(argv) >= 4 and argv[0] == "reap":
        return _reap(argv[1], int(argv[2]), argv[3], argv[4:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown (the docker SDK's, ~100 ms measured): the kit times a run from "go" to this
    # process's exit and checks the runner's clock against that, so the bridge must end when its command does
    os._exit(status)
