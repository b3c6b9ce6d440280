"""``mkb serve`` on a real MNN 3.2.2 tree (runs only with MKB_MNN__SOURCE_DIR set): samples of the ArgMax task of
the sample set, submitted over loopback HTTP, end in their statuses of ``candidates/expected.toml``; the prompt of
the task quotes the tree's headers.  Correctness only (``options.timing = false``): the timed statuses of the
whole set are ``tests/test_mnn_real.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest
from sample_expected import expected_statuses
from serving import TOKEN, Running, files_of

from kit.serve.server import service
from kit.settings.config import load_config

pytestmark = [pytest.mark.mnn, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
TASK = "argmax_axis1_keep_4d"
SAMPLES = ("correct", "compile_error", "reject_name")


def test_argmax_samples_through_the_service_end_in_their_expected_statuses(tmp_path):
    cfg_path = tmp_path / "cfg.toml"
    cfg_path.write_text(f"""
[run]
dir = "{tmp_path / 'run'}"
[tasks]
dir = "{ROOT / 'tasks'}"
split = "all"
[dispatch]
mode = "serial"
[report]
enabled = false
""")
    running = Running(service(load_config(cfg_path), TOKEN, port=0, workers=1, queue_limit=8))
    try:
        with running.client() as c:
            prompt = c.get(f"/v1/tasks/{TASK}").json()["prompt"]
            ids = {s: c.post("/v1/checks", json={"task_id": TASK, "method": "sample", "sample_id": s,
                                                 "files": files_of(ROOT / "candidates" / "sample" / TASK / s),
                                                 "options": {"timing": False}}).json()["id"] for s in SAMPLES}
            views = {s: c.get(f"/v1/checks/{i}", params={"wait": 600}).json() for s, i in ids.items()}
    finally:
        running.stop()
    expected = expected_statuses()
    assert {s: v["status"] for s, v in views.items()} == {s: expected[f"{TASK}/{s}"] for s in SAMPLES}
    assert views["correct"]["reward"] == 1.0 and views["correct"]["ended_in"] == "verify"
    assert views["compile_error"]["ended_in"] == "build" and views["compile_error"]["verdict"]["diagnostics"]
    assert "CPUBackend" in prompt  # a header of the tree, quoted
