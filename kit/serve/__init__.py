"""``mkb serve``: verdicts on candidates over HTTP, for agents and RL trainers (docs/serve.md).

- :mod:`~kit.serve.models`: request and response bodies;
- :mod:`~kit.serve.reward`, :mod:`~kit.serve.verdict`: a record's verdict, the stage it ended in, its reward;
- :mod:`~kit.serve.lane`: a run directory the service writes (shards, provenance, the journal of accepted checks);
- :mod:`~kit.serve.checks`: the checks known, the cache, the bounded queue, times to verdict;
- :mod:`~kit.serve.engine`: worker threads running checks through the kit's pipeline (here, or on the config's
  Ray cluster: :mod:`kit.dispatch.serving`);
- :mod:`~kit.serve.tasks`, :mod:`~kit.serve.routes`, :mod:`~kit.serve.app`: what a model may see of a task; the
  routes; the app and its guard (token, body size);
- :mod:`~kit.serve.server`, :mod:`~kit.serve.cli`: the token, the socket, uvicorn; the command.

Only :mod:`~kit.serve.cli` is imported by ``mkb`` itself: FastAPI and uvicorn (the ``serve`` extra) are imported
when the service starts.
"""

#: where the service listens unless told: this machine only
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
