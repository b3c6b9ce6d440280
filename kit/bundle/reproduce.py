"""``mkb reproduce BUNDLE``: evaluate a bundle's candidates again here and compare with its records.

Steps: extract the bundle into ``<run dir>/bundle`` and check it (:mod:`kit.bundle.validate`: a bundle that
fails is not run); check the tasks to run on (the bundle's own, or ``--tasks-dir``) against the bundle's
hashes; write ``<run dir>/reproduce.toml``, the bundle's config with this machine's paths (run and tasks
folders, the bundled candidates; ``mnn.source_dir`` and ``mnn.cache_dir`` left to this machine's defaults,
``MKB_...`` variables and the overrides); run ``mkb eval`` on it (:func:`kit.outline.evaluate.evaluate`, on the executor
the config names: running inside the pinned image is that setting's business); then compare
(:mod:`kit.bundle.compare`, with the between-run sd :mod:`kit.baselines.between` finds per task), print the verdict,
which between-run sd it used and from where, and write ``verdict.json``.  The same command again resumes the
reproduction (the run directory's records are kept).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kit.baselines.between import resolver
from kit.bundle import scores
from kit.bundle.archive import extract
from kit.bundle.compare import SAME, Between, BundleComparison, compare
from kit.bundle.configs import config_toml
from kit.bundle.manifest import CANDIDATES, TASKS, BundleError, Manifest, folder_hashes
from kit.bundle.pack import environment, session_hosts
from kit.bundle.validate import check_root
from kit.bundle.verdict import print_verdict, write_verdict
from kit.host.machine import HARDWARE_KEYS
from kit.results.shards import read_records
from kit.run import provenance
from kit.run.provenance import KitFacts, Provenance
from kit.run.rundir import changed_settings
from kit.score import metrics
from kit.settings.config import EvalConfig, load_config
from kit.suite.tasks import load_suite

CONFIG_FILE = "reproduce.toml"
BUNDLE_DIR = "bundle"
#: environment keys compared (manifest ``environment`` / the reproduction's provenance)
ENV_KEYS = ("mnn_version", "mnn_tree_digest", "engine", "compiler", "onnxruntime", "python", "image_digest")
HOST_KEYS = (*HARDWARE_KEYS, "usable_cores", "kernel", "governor")


def default_run_dir(bundle: Path) -> Path:
    """``runs/reproduce-<bundle file name without its suffixes>``."""
    return Path("runs") / f"reproduce-{bundle.name.split('.')[0] or 'bundle'}"


def reproduce(bundle: Path, run_dir: Path | None = None, overrides: Sequence[str] = (),
              tasks_dir: Path | None = None) -> BundleComparison:
    """Reproduce ``bundle`` into ``run_dir`` (default :func:`default_run_dir`), print the verdict and return it.

    Raises:
        BundleError: the bundle fails validation (every problem named), or the tasks differ from its hashes.
        kit.settings.config.ConfigError: an override is invalid, or the run directory holds another config's records.
        what ``mkb eval`` raises (a missing MNN tree, a worker's setup error).
    """
    run_dir = (run_dir or default_run_dir(bundle)).absolute()
    run_dir.mkdir(parents=True, exist_ok=True)
    checked = check_root(extract(bundle, run_dir / BUNDLE_DIR))
    if not checked.ok:
        raise BundleError(f"{bundle}: not a valid bundle, not reproduced:\n  " + "\n  ".join(checked.problems))
    m, root = checked.manifest, checked.root
    assert m is not None and checked.records is not None
    tasks_dir = (tasks_dir or root / TASKS).absolute()
    check_tasks(m, tasks_dir)
    cfg_path = run_dir / CONFIG_FILE
    cfg_path.write_text(config_toml(local_config(m, root, run_dir, tasks_dir)))
    cfg = load_config(cfg_path, overrides)
    from kit.outline.evaluate import evaluate  # the whole pipeline: only once the bundle passed

    evaluate(cfg)
    suite = metrics.tasks_frame(load_suite(root / TASKS, "all"))
    denominator = scores.denominator(root, checked.records, suite)
    reproduced = read_records(run_dir)
    env, same_hw = environment_rows(m, provenance.load(run_dir), reproduced, cfg)
    tau_of = resolver([run_dir, root], reproduced, cfg.baselines.dir or cfg.mnn.cache_dir / "baselines")
    cmp = compare(checked.records, reproduced, denominator, m.config["report"]["fast_p"],
                  scores.noise_of(root, checked.records), same_hw, Between(tau_of, cfg.timing.confidence))
    print_verdict(cmp, env)
    print(f"verdict file: {write_verdict(cmp, env, run_dir)}")
    return cmp


def local_config(m: Manifest, root: Path, run_dir: Path, tasks_dir: Path) -> dict[str, Any]:
    """The bundle's config with this machine's paths (module docstring)."""
    data = json.loads(json.dumps(m.config))
    data["run"]["dir"] = str(run_dir)
    data["tasks"]["dir"] = str(tasks_dir)
    paths = {s.method: root / s.path for s in m.sources}
    for src in data["candidates"]["sources"]:
        src["path"] = str(paths.get(src["method"], root / CANDIDATES / src["method"]))
    for key in ("source_dir", "cache_dir"):
        data["mnn"].pop(key, None)
    # the container's host-side paths and daemon are this machine's (the image itself is checked by its lock)
    for key in ("lock_file", "docker_host", "ro_paths"):
        data.get("container", {}).pop(key, None)
    return data


def check_tasks(m: Manifest, tasks_dir: Path) -> None:
    """Every task of the bundle is in ``tasks_dir`` with the same files.

    Raises:
        BundleError: names each missing task and each task whose files differ (and which)."""
    found = {t.id: t for t in load_suite(tasks_dir, "all")}
    problems = []
    for tid, entry in sorted(m.tasks.items()):
        t = found.get(tid)
        if t is None or t.path is None:
            problems.append(f"{tid}: not in {tasks_dir}")
            continue
        have = folder_hashes(t.path)
        changed = sorted(k for k in set(have) | set(entry.files) if have.get(k) != entry.files.get(k))
        if changed:
            problems.append(f"{tid}: {', '.join(changed)} differ from the bundle's")
    if problems:
        raise BundleError(f"tasks: {tasks_dir} does not hold the bundle's tasks: " + "; ".join(problems))


def _shown(values: list[Any]) -> str:
    distinct = list(dict.fromkeys("-" if v is None or v == "" else str(v) for v in values))
    return " | ".join(distinct) if distinct else "-"


def environment_rows(m: Manifest, prov: Provenance | None, reproduced: Any,
                     cfg: EvalConfig) -> tuple[list[dict[str, Any]], bool]:
    """The environment table's rows (``key``, ``bundle``, ``reproduced``, ``verdict``: ``same`` / ``differs``)
    and whether the hardware is the same: every :data:`kit.host.machine.HARDWARE_KEYS` value of every session
    of both runs equal (a key a session did not record is left out)."""
    rows = []

    def add(key: str, a: Any, b: Any, note: str = "") -> None:
        if a == b:
            verdict = SAME
        elif a in (None, "-") or b in (None, "-"):
            verdict = "not recorded"  # a run of an older kit: nothing to compare
        else:
            verdict = "differs" + (f" ({note})" if note else "")
        rows.append({"key": key, "bundle": a, "reproduced": b, "verdict": verdict})

    kit_b = prov.kit if prov is not None and prov.kit is not None else KitFacts()
    add("kit version", m.kit.get("version"), kit_b.version)
    add("kit commit", m.kit.get("commit"), kit_b.commit)
    changed = changed_settings(m.config, cfg)
    add("config digest", m.config_digest, cfg.digest(), ", ".join(changed))
    env_b = environment(prov or Provenance(), reproduced)
    for key in ENV_KEYS:
        add(key, m.environment.get(key), env_b.get(key))
    hosts_a, hosts_b = m.hosts, session_hosts(prov, reproduced) if prov is not None and prov.dump() else []
    same_hw = bool(hosts_b)
    for key in HOST_KEYS:
        va = [h.get(key) for h in hosts_a if h.get(key) is not None]
        vb = [h.get(key) for h in hosts_b if h.get(key) is not None]
        hardware = key in HARDWARE_KEYS
        if hardware and va and vb and len({json.dumps(v) for v in va + vb}) > 1:
            same_hw = False
        add(key, _shown(va), _shown(vb), "other hardware" if hardware else "")
    return rows, same_hw
