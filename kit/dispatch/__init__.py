"""Spread an evaluation over local cores or a Ray cluster (``dispatch.mode = "processes" | "ray"``): the only
Ray code of the kit.

* :mod:`~kit.dispatch.cluster`: connecting, node labels, worker counts, the same-kit check;
* :mod:`~kit.dispatch.actors`: the build and timing workers (Ray actors owning a workspace or a shipped
  native baseline for their life);
* :mod:`~kit.dispatch.driver`: the ``ray.wait`` loop: hand out jobs with task affinity, collect records,
  retry jobs whose worker died, ship built artefacts to timing nodes;
* :mod:`~kit.dispatch.slots`: the driver's worker slots, the Ray options of their actors, whether the run can go
  on with the workers left, what a failed setup raises;
* :mod:`~kit.dispatch.executor`: :class:`RayExecutor`, what :mod:`kit.outline.evaluate` runs pending jobs with.
* :mod:`~kit.dispatch.serving`: the build workers of ``mkb serve`` on the config's Ray cluster, one check at a
  time each, for the service's threads (:mod:`kit.serve.engine`).
* :mod:`~kit.dispatch.launcher`: Ray cluster launcher YAMLs checked offline against Ray's schema and the
  workers a kit config asks for (``python -m kit.dispatch.launcher``; docs/cloud.md).

Timing exclusivity is not scheduled here: :class:`kit.host.nodelock.NodeLock` (a file lock in the node's cache
directory) lets one timing phase run per node with nothing building beside it, whichever actor holds it.
Remote nodes need the same ``kit`` installed (checked: :func:`~kit.dispatch.cluster.kit_digest`), the task
suite at ``tasks.dir`` and the MNN source at ``mnn.source_dir`` at the same paths; ``mnn.cache_dir`` is per
node.  Candidate files travel inside the jobs (a task is ~1 KB pickled, so each job carries its task).
``docs/cluster.md`` describes running on a cluster.
"""

from kit.dispatch.cluster import DispatchError, connect, kit_digest, timer_nodes, timing_nodes, worker_count
from kit.dispatch.executor import RayExecutor

__all__ = ["DispatchError", "RayExecutor", "connect", "kit_digest", "timer_nodes", "timing_nodes", "worker_count"]
