"""A scripted OpenAI-compatible chat server of our own: real HTTP on 127.0.0.1, spoken to by the real ``openai``
client unchanged; the endpoint of the generation client's benchmark (:mod:`kit.bench.clientcost`) and of the
tests of ``mkb generate``.

``script(prompt, attempt)`` says what to do with a request (``attempt``: 1 for the first request carrying that
prompt text, 2 for the next, ...): an :class:`Act`.  Every request is kept (``requests``: the prompt, the
``Authorization`` header, the JSON body) so a test can count what was asked and check what was sent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _QuietServer(ThreadingHTTPServer):
    """A client that gave up (a timeout, a cut connection) is part of the script, not an error to print."""

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001 - socketserver's signature
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@dataclass(frozen=True)
class Act:
    """``kind``: ``answer`` (``text``, ``finish``: the finish reason), ``refuse`` (a refusal message),
    ``status`` (HTTP ``status`` with an error body, ``retry_after`` seconds if set), ``hang`` (sleep ``seconds``
    before answering ``text``), ``malformed`` (a 200 whose body is not JSON), ``cut`` (headers of a long body,
    half of it, then the connection closed)."""

    kind: str
    text: str = ""
    finish: str = "stop"
    status: int = 200
    retry_after: float | None = None
    seconds: float = 0.0


def answer(text: str, finish: str = "stop") -> Act:
    return Act("answer", text=text, finish=finish)


@dataclass
class Seen:
    prompt: str
    authorization: str
    body: dict


class StubServer:
    """The server, started on a free loopback port; ``base_url`` for the client; a context manager."""

    def __init__(self, script: Callable[[str, int], Act]):
        self.script = script
        self.requests: list[Seen] = []
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *_args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                prompt = body.get("messages", [{}])[-1].get("content", "")
                with stub._lock:
                    n = stub._attempts[prompt] = stub._attempts.get(prompt, 0) + 1
                    stub.requests.append(Seen(prompt, self.headers.get("Authorization", ""), body))
                stub._act(self, stub.script(prompt, n), body)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)

    def _act(self, h: BaseHTTPRequestHandler, act: Act, body: dict) -> None:
        if act.kind == "hang":
            time.sleep(act.seconds)
        if act.kind == "status":
            headers = {"Retry-After": str(act.retry_after)} if act.retry_after is not None else {}
            err = {"error": {"message": f"scripted {act.status}", "type": "scripted", "code": act.status}}
            self._send(h, act.status, json.dumps(err).encode(), headers)
        elif act.kind == "malformed":
            self._send(h, 200, b"{this is not json")
        elif act.kind == "cut":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "100000")
            h.end_headers()
            h.wfile.write(b'{"id": "x", "choices": [')
            h.wfile.flush()
            h.close_connection = True
            h.connection.close()
        else:
            self._send(h, 200, json.dumps(_completion(act, body)).encode())


def _completion(act: Act, body: dict) -> dict:
    refusal = act.text if act.kind == "refuse" else None
    content = None if act.kind == "refuse" else act.text
    prompt = body.get("messages", [{}])[-1].get("content", "")
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
        "choices": [{"index": 0, "finish_reason": act.finish,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(act.text) // 4,
                  "total_tokens": len(prompt) // 4 + len(act.text) // 4},
    }


def main() -> None:
    """``python -m kit.bench.chatserver TEXT``: serve ``TEXT`` as every answer on a free loopback port, print
    the port, serve until stdin closes (the benchmark's endpoint, in a process of its own)."""
    import sys

    text = sys.argv[1] if len(sys.argv) > 1 else "ok"
    with StubServer(lambda _prompt, _n: answer(text)) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
