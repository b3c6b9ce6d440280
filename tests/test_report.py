"""kit.report: a full report of synthetic runs written through the real shard writer."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import polars as pl
import pytest

from kit import report
from kit.results.records import Diagnostic, ErrorKind, Record, Status
from kit.results.shards import ShardWriter
from kit.score import metrics
from kit.suite.tasks import CATEGORIES

S = Status
TASKS = pl.DataFrame(
    {
        "task_id": [f"{c}_{i}" for c in CATEGORIES for i in range(3)],
        "category": [c for c in CATEGORIES for _ in range(3)],
        "split": ["test"] * (3 * len(CATEGORIES)),
    }
)
ERRORS = [
    "‘{}’ was not declared in this scope",
    "no matching function for call to ‘{}(int)’",
    "expected ‘;’ before ‘}}’ token",
]


def synth_run(run_dir, seed: int, methods: dict[str, float], native: bool = False) -> list[Record]:
    """Records of ``methods`` (name → skill in [0, 1]) on every task but the last, 3 samples each."""
    rng = np.random.default_rng(seed)
    recs = []
    for method, skill in methods.items():
        for t in TASKS.head(TASKS.height - 1).iter_rows(named=True):
            for s in range(3):
                u = rng.random()
                kw = {}
                if u > skill:
                    status, kind = S.COMPILE_ERROR, ErrorKind.COMPILER
                    name = f"v{rng.integers(100)}"
                    msg = ERRORS[rng.integers(len(ERRORS))].format(name)
                    kw["diagnostics"] = [
                        Diagnostic(
                            file="CPUX.cpp",
                            line=int(rng.integers(1, 200)),
                            column=3,
                            severity="error",
                            message=msg,
                        ),
                        Diagnostic(file="CPUX.cpp", line=5, severity="note", message="declared here"),
                    ]
                elif u > skill * 0.8:
                    status, kind = S.VERIFY_MISMATCH, ErrorKind.VALUE
                elif u > skill * 0.75:
                    status, kind = S.RUNTIME_CRASH, ErrorKind.SIGNAL
                else:
                    status, kind = S.OK, ErrorKind.NONE
                    sp = float(np.exp(rng.normal(0, 0.5)))
                    kw.update(speedup=sp, speedup_ci_low=sp * 0.95, speedup_ci_high=sp * 1.05)
                if t["task_id"] == "others_0" and status == S.OK:  # native baseline cannot run
                    kind = ErrorKind.NO_NATIVE
                    kw.update(speedup=None, speedup_ci_low=None, speedup_ci_high=None)
                recs.append(
                    Record(
                        job_id=f"{method}/{t['task_id']}/{s}",
                        method=method,
                        task_id=t["task_id"],
                        sample_id=str(s),
                        candidate_sha256="0" * 64,
                        config_digest="cfg",
                        category=t["category"],
                        split="test",
                        status=status,
                        error_kind=kind,
                        started_at=f"2026-11-29T20:{s:02d}:00Z",
                        **kw,
                    )
                )
    if native:
        for t in TASKS.iter_rows(named=True):
            sp = float(np.exp(rng.normal(0, 0.03)))
            recs.append(
                Record(
                    job_id=f"native/{t['task_id']}",
                    method="native",
                    task_id=t["task_id"],
                    sample_id="native",
                    candidate_sha256="1" * 64,
                    config_digest="cfg",
                    status=S.OK,
                    speedup=sp,
                    speedup_ci_low=sp * 0.97,
                    speedup_ci_high=sp * 1.03,
                )
            )
    with ShardWriter(run_dir, "w0", flush_every=10) as w:
        for r in recs:
            w.append(r)
    return recs


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("runs")
    a, b = base / "run_a", base / "run_b"
    synth_run(a, 1, {"llm_x": 0.7, "llm_y": 0.5}, native=True)
    synth_run(b, 2, {"llm_x": 0.8})
    (a / "provenance.json").write_text(
        json.dumps(
            {
                "config_digest": "abc123",
                "mnn_version": "3.2.2",
                "compiler": "gcc 12.2",
                "cpu_model": "Test CPU",
                "threads": 1,
            }
        )
    )
    (b / "calibration.json").write_text(
        json.dumps(
            {"summary": {"aa_speedup_p05": 0.9, "aa_speedup_p95": 1.1, "aa_speedup_median": 1.0}, "tasks": []}
        )
    )
    return a, b


def test_single_run_report(two_runs, tmp_path):
    a, _ = two_runs
    paths = report.build_report([a], tmp_path / "rep", TASKS, n_boot=200, seed=3)
    for p in (paths.html, paths.markdown, paths.json, paths.csv, *paths.plots.values()):
        assert p.is_file() and p.stat().st_size > 0, p
    html_text = paths.html.read_text()
    # the headline table, with CSR/FCR/fast_p columns, and four embedded PNG plots
    assert "<table" in html_text and "CSR %" in html_text and "fast_1.5 %" in html_text
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html_text)
    assert len(imgs) == 4
    for b64 in imgs:
        assert base64.b64decode(b64)[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'src="http' not in html_text and "plots/" not in html_text  # self-contained

    # JSON numbers equal metrics.summary on the same records
    data = json.loads(paths.json.read_text())
    recs = report.load_records(a)
    expected = metrics.summary(recs, TASKS, ps=(0.0, 0.5, 1.0, 1.5, 2.0), boot=metrics.Bootstrap(200, 3))
    got = {r["method"]: r for r in data["summary"]}
    assert set(got) == {"llm_x", "llm_y", "native"}
    for row in expected.iter_rows(named=True):
        g = got[row["method"]]
        for col in (
            "csr",
            "fcr",
            "fast_0",
            "fast_1.0",
            "fast_2.0",
            "csr_ci_low",
            "fast_1.0_ci_high",
            "geomean_speedup",
        ):
            assert g[col] == pytest.approx(row[col]), (row["method"], col)
        assert g["n_tasks"] == TASKS.height == 36  # the task without records is in the denominator
        assert g["no_native_tasks"] == row["no_native_tasks"]
    assert got["llm_x"]["no_native_tasks"] == ["others_0"]
    # the headline table shows the same CSR, as a percentage with its CI
    x = got["llm_x"]
    assert f"{100 * x['csr']:.1f} [{100 * x['csr_ci_low']:.1f}, {100 * x['csr_ci_high']:.1f}]" in html_text

    # provenance from the file, missing keys unknown; calibration from the native method
    assert data["runs"][0]["provenance"]["compiler"] == "gcc 12.2"
    assert data["runs"][0]["provenance"]["engine"] == "unknown"
    assert "Test CPU" in html_text
    assert data["runs"][0]["calibration"]["source"] == "native method in this run"
    # compile errors are grouped after normalization: at most the 3 message shapes
    msgs = {e["message"] for e in data["compile_errors"]}
    assert msgs <= {
        "‘…’ was not declared in this scope",
        "no matching function for call to ‘…’",
        "expected ‘…’ before ‘…’ token",
    }
    n_compile = recs.filter(pl.col("status") == "compile_error").height
    assert sum(e["count"] for e in data["compile_errors"]) == n_compile

    csv = pl.read_csv(paths.csv)
    overall = csv.filter((pl.col("category") == "all") & (pl.col("method") == "llm_x")).row(0, named=True)
    assert overall["csr"] == pytest.approx(x["csr"])
    assert csv.filter(pl.col("method") == "llm_x").height == 1 + len(CATEGORIES)
    md = paths.markdown.read_text()
    assert "| system |" in md and "![funnel](plots/funnel.png)" in md


def test_two_runs_side_by_side(two_runs, tmp_path):
    a, b = two_runs
    paths = report.build_report([a, b], tmp_path / "cmp", TASKS, n_boot=100)
    data = json.loads(paths.json.read_text())
    systems = {r["system"] for r in data["summary"]}
    assert systems == {"run_a/llm_x", "run_a/llm_y", "run_a/native", "run_b/llm_x"}
    # each run's rows equal that run's own metrics
    b_only = metrics.summary(report.load_records(b), TASKS, boot=metrics.Bootstrap(n=100))
    bx = next(r for r in data["summary"] if r["system"] == "run_b/llm_x")
    assert bx["fcr"] == pytest.approx(b_only["fcr"][0])
    assert [r["label"] for r in data["runs"]] == ["run_a", "run_b"]
    assert data["runs"][1]["calibration"]["low"] == 0.9  # from calibration.json
    assert data["runs"][1]["provenance"]["mnn_version"] == "unknown"
    html_text = paths.html.read_text()
    assert "run_b/llm_x" in html_text and "run_a/llm_y" in html_text


def test_split_auto_and_errors(two_runs, tmp_path):
    a, _ = two_runs
    # a suite with an extra train split: the run has only test tasks, so train is left out
    tasks = pl.concat([TASKS, pl.DataFrame({"task_id": ["tr_0"], "category": ["unary"], "split": ["train"]})])
    data = json.loads(report.build_report([a], tmp_path / "r", tasks, n_boot=10).json.read_text())
    assert data["splits"] == ["test"] and data["summary"][0]["n_tasks"] == 36
    with pytest.raises(report.ReportError, match="none of the"):
        report.build_report([a], tmp_path / "r3", TASKS.with_columns(task_id=pl.col("task_id") + "_other"))
    with pytest.raises(report.ReportError, match="no records"):
        report.build_report([tmp_path / "empty"], tmp_path / "r2", TASKS)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "provenance.json").write_text("[1, 2]")
    with pytest.raises(report.ReportError, match="provenance.json"):
        report.load_provenance(tmp_path / "bad")


def _selected_run(run_dir, seed: int, *selections: tuple[str, list[str]]):
    """A synthetic run whose sessions evaluated the given (tasks.split, tasks.ids) selections."""
    synth_run(run_dir, seed, {"llm_x": 0.7})
    sessions = [{"started_at": f"2026-11-30T0{i}:00:00Z", "tasks": {"split": sp, "ids": ids}}
                for i, (sp, ids) in enumerate(selections)]
    (run_dir / "provenance.json").write_text(json.dumps({**sessions[0], "sessions": sessions}))


def test_each_run_is_scored_over_the_tasks_its_eval_selected(tmp_path):
    """mkb report scores a run over the tasks.split / tasks.ids of its sessions (their union), as mkb eval did,
    not over every task of the split; two runs side by side keep their own denominators."""
    ids = ["unary_0", "unary_1", "activation_2", "others_1"]
    a, b = tmp_path / "a", tmp_path / "b"
    _selected_run(a, 5, ("test", ids[:2]), ("all", ids[2:]))  # a resumed run: two sessions, two selections
    _selected_run(b, 6, ("test", ["binary_0"]))
    data = json.loads(report.build_report([a], tmp_path / "ra", TASKS, n_boot=50).json.read_text())
    row = data["summary"][0]
    expected = metrics.summary(report.load_records(a), TASKS.filter(pl.col("task_id").is_in(ids)), boot=metrics.Bootstrap(n=50))
    assert row["n_tasks"] == 4 and row["fcr"] == pytest.approx(expected["fcr"][0])
    assert row["csr"] == pytest.approx(expected["csr"][0])
    md = (tmp_path / "ra" / "report.md").read_text()
    assert "test: 4 tasks selected by tasks.ids" in md

    both = json.loads(report.build_report([a, b], tmp_path / "rab", TASKS, n_boot=50).json.read_text())
    n = {r["system"]: r["n_tasks"] for r in both["summary"]}
    assert n == {"a/llm_x": 4, "b/llm_x": 1}
    assert "a: test: 4 tasks selected by tasks.ids; b: test: 1 tasks selected by tasks.ids" in (
        tmp_path / "rab" / "report.md").read_text()

    # an id the task table lacks: the wrong tasks folder, said so
    _selected_run(tmp_path / "c", 7, ("test", ["gone_0"]))
    with pytest.raises(report.ReportError, match="gone_0"):
        report.build_report([tmp_path / "c"], tmp_path / "rc", TASKS)


def test_normalize_message():
    assert report.normalize_message("a/CPUX.cpp:12:5: error: ‘foo’ was not declared in this scope") == (
        "‘…’ was not declared in this scope"
    )
    assert (
        report.normalize_message("array index 42 is past the end of 'buf'\n  12 | x")
        == "array index N is past the end of ‘…’"
    )


def _scoring_rules_run(run_dir):
    """A run over 6 selected tasks: llm_x with a task left with only harness errors, an implausible and an
    untimeable speedup, a timing_failed record carrying 3.0x, speedups inside and beyond their task's noise
    band; ghost, whose only record is of a task outside the selection; a calibration with per-task noise."""
    from kit.results.records import Flag

    def r(method, task, sample, status, speedup=None, **kw):
        ci = {} if speedup is None else dict(speedup_ci_low=speedup * 0.97, speedup_ci_high=speedup * 1.03)
        return Record(job_id=f"{method}/{task}/{sample}", method=method, task_id=task, sample_id=str(sample),
                      candidate_sha256="0" * 64, config_digest="cfg", split="test", status=status,
                      speedup=speedup, **ci, **kw)

    implausible = Flag(code="implausible_speedup", reason="40x over native: candidate skips work?")
    recs = [
        r("llm_x", "unary_0", 0, S.HARNESS_ERROR, error_kind=ErrorKind.INTERNAL),
        r("llm_x", "unary_1", 0, S.OK, 40.0, flags=[implausible]),
        r("llm_x", "unary_2", 0, S.OK, 2.0, timing_untimeable=True),
        r("llm_x", "binary_0", 0, S.TIMING_FAILED, 3.0),
        r("llm_x", "binary_1", 0, S.OK, 1.1),  # inside binary_1's band of exp(0.2) = 1.22x
        r("llm_x", "binary_2", 0, S.OK, 1.5),  # beyond it
        r("ghost", "others_0", 0, S.OK, 1.7),
    ]
    with ShardWriter(run_dir, "w0") as w:
        for rec in recs:
            w.append(rec)
    ids = ["unary_0", "unary_1", "unary_2", "binary_0", "binary_1", "binary_2"]
    session = {"started_at": "2026-11-30T00:00:00Z", "tasks": {"split": "test", "ids": ids}}
    (run_dir / "provenance.json").write_text(json.dumps({**session, "sessions": [session]}))
    cal_tasks = [{"task_id": t, "noise_log": 0.2} for t in ids[3:]] + [
        {"task_id": "unary_2", "noise_log": None, "untimeable": True}, {"task_id": "unary_1"}]
    (run_dir / "calibration.json").write_text(json.dumps(
        {"summary": {"aa_speedup_p05": 0.9, "aa_speedup_p95": 1.1, "aa_speedup_median": 1.0, "timed": 40,
                     "confidence": 0.95, "coverage": 0.975, "ci_width_median": 0.021, "noise_log_median": 0.0105,
                     "native_fast_1.0": 0.5, "native_fast_sig_1.0": 0.025}, "tasks": cal_tasks}))
    return ids, {t: 0.2 for t in ids[3:]}


def test_report_applies_the_scoring_rules_and_lists_what_is_not_scored(tmp_path):
    ids, noise = _scoring_rules_run(tmp_path / "run")
    paths = report.build_report([tmp_path / "run"], tmp_path / "rep", TASKS, n_boot=50)
    data = json.loads(paths.json.read_text())
    got = {r["method"]: r for r in data["summary"]}
    assert set(got) == {"llm_x", "ghost"}  # ghost's only record is outside the selection: zeros, not gone
    assert (got["ghost"]["n_tasks"], got["ghost"]["n_missing"], got["ghost"]["fcr"]) == (6, 6, 0.0)
    x = got["llm_x"]
    expected = metrics.summary(report.load_records(tmp_path / "run"), TASKS.filter(pl.col("task_id").is_in(ids)),
                               boot=metrics.Bootstrap(n=50), noise=noise).filter(pl.col("method") == "llm_x").row(0, named=True)
    for col in ("fcr", "fast_0", "fast_1.0", "fast_sig_1.0", "geomean_speedup", "n_untimeable", "n_implausible",
                "n_harness_errors", "n_missing", "harness_error_tasks", "untimeable_tasks"):
        assert x[col] == pytest.approx(expected[col]) if isinstance(x[col], float) else x[col] == expected[col], col
    assert (x["n_harness_errors"], x["harness_error_tasks"], x["n_missing"]) == (1, ["unary_0"], 1)
    assert (x["n_implausible"], x["n_untimeable"], x["untimeable_tasks"]) == (1, 1, ["unary_2"])
    # correct: unary_1, unary_2, binary_0 (timing_failed), binary_1, binary_2; usable speedups: binary_1, binary_2
    assert x["fcr"] == pytest.approx(5 / 6) and x["fast_0"] == pytest.approx(2 / 6)
    # fast_sig_1.0: binary_2 only (binary_1's 1.1 is inside its noise band)
    assert x["fast_1.0"] == pytest.approx(2 / 6) and x["fast_sig_1.0"] == pytest.approx(1 / 6)
    assert x["geomean_speedup"] == pytest.approx((1.1 * 1.5) ** 0.5)
    assert data["runs"][0]["calibration"]["untimeable_tasks"] == ["unary_2"]
    assert data["flagged"] == [{"system": "llm_x", "task_id": "unary_1", "sample_id": "0", "status": "ok",
                                "speedup": 40.0, "flags": "implausible_speedup",
                                "reasons": "40x over native: candidate skips work?"}]

    md = paths.markdown.read_text()
    assert "Unlike KernelBench, whose fast_0 is its correctness rate (FCR here)" in md
    # the calibration's coverage of its A/A intervals, beside their width (mkb calibrate's summary)
    assert "the 95 % interval contains 1.0 for 39/40 timed tasks (97.5 %); median width 0.021" in md
    sections = dict(re.findall(r"## ([^\n]+)\n\n(.*?)(?=\n## |\Z)", md, flags=re.S))
    assert "| llm_x | unary_0 |" in sections["Tasks left with only harness errors"]
    assert "| llm_x | unary_2 |" in sections["Untimeable tasks"] and "| run calibration | unary_2 |" in sections["Untimeable tasks"]
    assert "40x over native: candidate skips work?" in sections["Flagged candidates"]
    speedups = sections["Per-task speedups"]
    assert "| binary_1 | 1.1 ~ |" in speedups and "| binary_2 | 1.5 |" in speedups
    assert "unary_1" not in speedups and "binary_0" not in speedups  # implausible, timing_failed: no speedup
    assert "run (3 tasks)" in speedups  # where the noise bands come from
    head = sections["Headline"]
    assert "| harness errors |" in head and "| untimeable |" in head and "| implausible |" in head
    csv = pl.read_csv(paths.csv)
    assert csv.filter((pl.col("method") == "llm_x") & (pl.col("category") == "all"))["harness_error_tasks"][0] == "unary_0"


def test_calibration_task_entries_are_checked(tmp_path):
    run = tmp_path / "run"
    _scoring_rules_run(run)
    recs = report.load_records(run)
    cal = json.loads((run / "calibration.json").read_text())
    assert report.load_calibration(run, recs)["noise"] == {"binary_0": 0.2, "binary_1": 0.2, "binary_2": 0.2}
    cal["tasks"][0]["noise_log"] = "wide"
    (run / "calibration.json").write_text(json.dumps(cal))
    with pytest.raises(report.ReportError, match="calibration.json: task 'binary_0': noise_log 'wide'"):
        report.load_calibration(run, recs)
    cal["tasks"] = {"binary_0": 0.2}
    (run / "calibration.json").write_text(json.dumps(cal))
    with pytest.raises(report.ReportError, match="'tasks' must be a list"):
        report.load_calibration(run, recs)



def test_a_calibration_of_between_run_figures_alone_gives_no_band_and_no_error(tmp_path):
    """``mkb calibrate --between-runs`` into a run of ``mkb eval`` (docs/bundles.md's recipe) writes a
    calibration.json without an A/A summary: no band, the run's report and bundle go on; a summary that is no
    mapping is still an error."""
    run = tmp_path / "run"
    _scoring_rules_run(run)
    recs = report.load_records(run)
    between = {"pooled": {"log_sd": 0.046, "runs": 6}, "tasks": {}}
    (run / "calibration.json").write_text(json.dumps({"summary": {}, "tasks": [], "between_run": between}))
    assert report.load_calibration(run, recs) is None
    (run / "calibration.json").write_text(json.dumps({"summary": [], "tasks": []}))
    with pytest.raises(report.ReportError, match="calibration.json: expected"):
        report.load_calibration(run, recs)

def test_the_category_table_keeps_one_row_per_category_when_the_runs_denominators_differ():
    """A run of one task beside a whole split: one row per category, its task count ``varies`` where the two
    differ and each cell says of how many; a category only one run has keeps its count, the other run's cell
    empty."""
    from kit.report.tables import category_table

    by_cat = pl.DataFrame({"system": ["one", "all", "all"], "category": ["reduction", "reduction", "unary"],
                           "n_tasks": [1, 28, 9], "csr": [1.0, 0.036, 0.0], "fcr": [1.0, 0.036, 0.0],
                           "fast_1.0": [0.0, 0.036, 0.0]})
    got = category_table(by_cat, ["unary", "reduction"])
    assert got.columns == ["category", "tasks", "one", "all"] or got.columns == ["category", "tasks", "all", "one"]
    rows = {r["category"]: r for r in got.to_dicts()}
    assert got["category"].to_list() == ["unary", "reduction"]
    assert rows["reduction"]["tasks"] == "varies" and rows["reduction"]["one"] == "100.0 / 100.0 / 0.0 (of 1)"
    assert rows["reduction"]["all"] == "3.6 / 3.6 / 3.6 (of 28)"
    assert rows["unary"]["tasks"] == "9" and rows["unary"]["one"] is None and rows["unary"]["all"] == "0.0 / 0.0 / 0.0"
