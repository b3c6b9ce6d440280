"""The generation client's own overhead (``--client-cost``): chat requests per second against a loopback
OpenAI-compatible server (:mod:`kit.bench.chatserver`, in a process of its own), through the kit's layer
(:meth:`kit.generate.client.Endpoint.ask`: attempts counted, the end classified, the key masked) and through raw
``openai`` calls with the same client settings, at concurrency 1, 8 and 32.  The two modes alternate within each
round (A B, then B A), each ratio is taken within a round, and the median over rounds is printed (target:
the kit's time per request <= 1.05 of raw).  Beside the wall-clock ratio, the ratio of the client process's own
CPU time per burst (``time.process_time``: what the kit's layer adds is work in that process), which other load
on the host moves much less than wall-clock time."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time

import openai

from kit.generate.client import Endpoint, Sampling

_MESSAGES = [{"role": "user", "content": "Implement the ONNX operator `ArgMax` for MNN's CPU backend."}]


async def _burst(requests: int, concurrency: int, call) -> tuple[float, float]:  # noqa: ANN001 - async callable
    """(wall s, this process's CPU s) of ``requests`` calls, ``concurrency`` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await call()

    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    return time.perf_counter() - t0, time.process_time() - c0


async def _raw(base_url: str, requests: int, concurrency: int) -> tuple[float, float]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", timeout=60.0, max_retries=4)
    try:
        await client.chat.completions.create(model="bench", messages=_MESSAGES)  # connection warm-up
        return await _burst(requests, concurrency,
                            lambda: client.chat.completions.create(model="bench", messages=_MESSAGES))
    finally:
        await client.close()


async def _kit(base_url: str, requests: int, concurrency: int) -> tuple[float, float]:
    endpoint = Endpoint("bench", base_url, "bench", timeout_s=60.0, retries=4)
    try:
        await endpoint.ask(_MESSAGES, Sampling())
        return await _burst(requests, concurrency, lambda: endpoint.ask(_MESSAGES, Sampling()))
    finally:
        await endpoint.close()


def client_cost(requests: int = 200, rounds: int = 3, concurrencies: tuple[int, ...] = (1, 8, 32)) -> int:
    """Print requests/s of both modes and the kit/raw time ratio per concurrency; 0 always (a benchmark)."""
    server = subprocess.Popen([sys.executable, "-m", "kit.bench.chatserver", "x" * 2000], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        print(f"client cost: {requests} requests per burst, {rounds} rounds, server {base_url}")
        print(f"{'concurrency':>11} {'raw req/s':>10} {'kit req/s':>10} {'kit/raw time':>13} (range) "
              f"{'kit/raw CPU':>12} (range)")
        for c in concurrencies:
            raw_s, kit_s, ratios, cpu_ratios = [], [], [], []
            for r in range(rounds):
                order = (("raw", _raw), ("kit", _kit)) if r % 2 == 0 else (("kit", _kit), ("raw", _raw))
                got = {name: asyncio.run(fn(base_url, requests, c)) for name, fn in order}
                raw_s.append(got["raw"][0])
                kit_s.append(got["kit"][0])
                ratios.append(got["kit"][0] / got["raw"][0])
                cpu_ratios.append(got["kit"][1] / got["raw"][1])
            print(f"{c:>11} {requests / statistics.median(raw_s):>10.1f} {requests / statistics.median(kit_s):>10.1f} "
                  f"{statistics.median(ratios):>13.3f} ({min(ratios):.3f}-{max(ratios):.3f}) "
                  f"{statistics.median(cpu_ratios):>12.3f} ({min(cpu_ratios):.3f}-{max(cpu_ratios):.3f})")
    finally:
        server.stdin.close() if server.stdin else None
        server.wait(timeout=10)
    return 0
