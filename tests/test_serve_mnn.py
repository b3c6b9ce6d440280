"""``mkb serve`` on a real MNN 3.2.2 tree (runs only with MKB_MNN__SOURCE_DIR set): the whole sample set
(``candidates/sample``), submitted at once over loopback HTTP to a service of the default config
(``configs/default.toml``: its protocol, its one worker), ends in the statuses of ``candidates/expected.toml``,
compared as CI's check of the main command compares the records (``tests/sample_expected.py``).

Cheap on purpose: CI runs it after the main command, so the native build and ccache are warm; and no expected
status needs timing (``ok`` is decided by verification; the crashes, mismatches and compile errors end before
timing), so every sample is checked correctness only (``options.timing = false``), but for the ArgMax ``correct``
one, checked with the default protocol's timing too: a timed check of the tree also ends ``ok``.  One sample
cannot travel: ``reject_symlink`` is a folder whose file is a symbolic link, and a request carries files as text
(no route reads a path); its rejection is the folder source's, checked by the main command."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_expected import EXPECTED_FILE, status_differences
from serving import TOKEN, Running, files_of

from kit.serve.server import service
from kit.settings.config import load_config

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "candidates" / "sample"
TIMED = "argmax_axis1_keep_4d/correct"


def _sample_set() -> tuple[dict[str, dict[str, str]], list[str]]:
    """({"task/sample": files} of every sample a request can carry, ["task/sample"] of those it cannot: a
    folder holding a symbolic link)."""
    carried, links = {}, []
    for folder in sorted(SAMPLES.glob("*/*")):
        key = f"{folder.parent.name}/{folder.name}"
        if any(p.is_symlink() for p in folder.iterdir()):
            links.append(key)
        else:
            carried[key] = files_of(folder)
    return carried, links


def test_the_sample_set_through_the_service_ends_in_expected_toml(tmp_path):
    cfg = load_config(ROOT / "configs" / "default.toml", ["--run.dir", str(tmp_path / "run"),
                                                          "--report.enabled", "false"])
    carried, links = _sample_set()
    assert links == ["argmax_axis1_keep_4d/reject_symlink"]
    running = Running(service(cfg, TOKEN, port=0, queue_limit=len(carried) + 2))
    try:
        with running.client() as c:
            prompt = c.get("/v1/tasks/argmax_axis1_keep_4d").json()["prompt"]
            ids = {}
            for key, files in carried.items():
                task, sample = key.split("/")
                options = {"timing": key == TIMED}
                r = c.post("/v1/checks", json={"task_id": task, "method": "sample", "sample_id": sample,
                                               "files": files, "options": options})
                assert r.status_code == 202, (key, r.text)
                ids[key] = r.json()["id"]
            views = {k: c.get(f"/v1/checks/{i}", params={"wait": 600}).json() for k, i in ids.items()}
    finally:
        running.stop()
    assert all(v["state"] == "done" for v in views.values()), [k for k, v in views.items() if v["state"] != "done"]
    rows = [{"task_id": v["task_id"], "sample_id": v["sample_id"], "status": v["status"],
             "error_message": v["verdict"]["error_message"]} for v in views.values()]
    missing = [f"{k}: expected rejected_input, no record" for k in links]
    assert status_differences(rows, cfg.target_info().arch, EXPECTED_FILE) == missing
    timed = views[TIMED]
    assert timed["timing"] and timed["ended_in"] == "time" and timed["verdict"]["speedup"] is not None, timed
    quick = [v for k, v in views.items() if k != TIMED]
    assert not any(v["timing"] for v in quick) and {v["ended_in"] for v in quick} <= {"screen", "build", "verify"}
    assert "CPUBackend" in prompt  # a header of the tree, quoted
