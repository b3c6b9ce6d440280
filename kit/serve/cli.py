"""``mkb serve --config cfg.toml [--host H] [--port P] [--workers N] [--queue N]``: the verdict service
(docs/serve.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kit.serve import DEFAULT_HOST, DEFAULT_PORT


def add_parser(sub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    p = sub.add_parser("serve", help="an HTTP service of verdicts for agents and RL trainers (docs/serve.md)")
    p.add_argument("--config", type=Path, required=True, help="TOML config file (see configs/)")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}: this "
                                                        "machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    p.add_argument("--workers", type=int, default=None, help="checks run at once, each in a workspace of its own "
                   "(default 1; on the config's Ray cluster, dispatch.workers actors)")
    p.add_argument("--queue", type=int, default=64, help="checks that may wait; more are refused (429)")


def run(args: argparse.Namespace, cfg) -> int:  # noqa: ANN001 - an EvalConfig (kit.settings.config)
    """Check the numbers, then serve (:func:`kit.serve.server.serve`).  Returns the exit code."""
    from kit.settings.config import ConfigError

    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers: at least 1, got {args.workers}")
    if args.queue < 1:
        raise ConfigError(f"--queue: at least 1, got {args.queue}")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port: 0 to 65535, got {args.port}")
    try:
        from kit.serve.server import serve
    except ModuleNotFoundError as exc:  # FastAPI and uvicorn come with the serve extra
        raise ConfigError(f"mkb serve needs the serve extra (pip install -e '.[serve]'): {exc}") from None
    return serve(cfg, args.host, args.port, args.workers, args.queue)
