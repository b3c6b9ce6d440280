"""The one result of a job: :class:`Record`, with :class:`Status` and :class:`ErrorKind`.

Every job yields exactly one record, failures included.  Records are frozen, carry the schema version
and the config digest, and put units into field names (``native_ms``, ``max_abs_err``).
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: 2: stage times, timing rounds and conditions, invocation digests, flags, trial threads; 3: the target
#: (``target_arch``, ``build_mode``, ``timing_device``); 4: ``image_id`` (the container image commands ran in);
#: 5: the timing device's state (``device``); 6: where the native time comes from (``native_timing``,
#: ``baseline_key``); 7: ``build_flags`` (the timed libraries' and the converter's compile flags); 8: ``edge_sets``
#: (the task's edge input sets, :mod:`kit.suite.edges`), ``timing_stop`` (why an adaptive timing's rounds
#: stopped), ``phases`` (where the job's wall time went)
SCHEMA_VERSION = 8


class Status(enum.StrEnum):
    """Outcome of a job; stages are kept apart (design: "Rules of the house")."""

    OK = "ok"
    REJECTED_INPUT = "rejected_input"  # candidate files refused before any build (allowlist, parse, size)
    COMPILE_ERROR = "compile_error"  # build finished with errors (compiler or linker)
    COMPILE_TIMEOUT = "compile_timeout"  # build killed at build.candidate_timeout_s
    VERIFY_MISMATCH = "verify_mismatch"  # ran, but outputs differ from ONNX Runtime (or convert produced a wrong graph)
    RUNTIME_CRASH = "runtime_crash"  # converter or runner died (signal or abort) or reported an error
    RUNTIME_TIMEOUT = "runtime_timeout"  # converter or runner killed at its timeout
    TIMING_FAILED = "timing_failed"  # correct, but the timing runs failed or gave no samples
    WORKER_LOST = "worker_lost"  # the worker died on every retry (dispatch)
    HARNESS_ERROR = "harness_error"  # a fault of the kit or the machine, not of the candidate


#: statuses where the build finished (the numerator of CSR, paper §5.1)
COMPILED = frozenset({Status.OK, Status.VERIFY_MISMATCH, Status.RUNTIME_CRASH, Status.RUNTIME_TIMEOUT, Status.TIMING_FAILED})
#: statuses that count as functionally correct (the numerator of FCR), unless the record's error kind is one of
#: :data:`CANDIDATE_TIMING_KINDS` (:func:`counts_correct`)
CORRECT = frozenset({Status.OK, Status.TIMING_FAILED})


class ErrorKind(enum.StrEnum):
    """Finer reason inside a status."""

    NONE = "none"
    PARSE = "parse"  # no code blocks / no file names in the response
    ALLOWLIST = "allowlist"  # file name not allowed for this task, path traversal
    MISSING_FILE = "missing_file"  # a required file (e.g. the .cpp) is absent
    FILE_TOO_LARGE = "file_too_large"
    NOT_UTF8 = "not_utf8"
    MISSING_SYMBOL = "missing_symbol"  # a public symbol the rest of MNN uses was removed
    COMPILER = "compiler"
    LINKER = "linker"
    CONVERT = "convert"  # MNNConvert failed ("Converted Failed!", no output, crash)
    GRAPH = "graph"  # converted model's inputs/outputs differ from the task
    SHAPE = "shape"
    DTYPE = "dtype"
    NAN = "nan"  # NaN/Inf where the reference has none
    VALUE = "value"  # allclose failed
    SIGNAL = "signal"
    EXIT_CODE = "exit_code"
    TIMEOUT = "timeout"
    LIMIT = "limit"  # a resource limit stopped the process (memory, file size, CPU seconds, processes)
    FORBIDDEN = "forbidden"  # the candidate does what no kernel does (kit.stages.screen): processes, files, libc symbols
    NO_NATIVE = "no_native"  # native baseline unavailable for timing
    WORKER_LOST = "worker_lost"  # built and verified, but the timing worker (or its node) died on every try
    INTERNAL = "internal"
    SETUP = "setup"  # the worker's setup failed (native build, tree, tools): the job never ran (harness_error)
    INPUT_MODIFIED = "input_modified"  # a forward wrote into an input tensor (runner exit 4)
    THREADS_LEFT = "threads_left"  # a thread of the candidate was still running after a forward (runner exit 5)
    PROCESSES_LEFT = "processes_left"  # a process the candidate started existed after a forward (runner exit 7)
    CLOCK_MISMATCH = "clock_mismatch"  # the runner's clock disagrees with the kit's about a timing run's length
    TIMED_OUTPUT_MISMATCH = "timed_output_mismatch"  # the outputs of the timed runs differ from ONNX Runtime
    # a target op type the native model executes never ran in the candidate's (its converter or geometry routed
    # around its own kernel: the outputs were right, but not its work)
    NOT_EXECUTED = "not_executed"
    # the candidate's runs used more CPU outside their streamed forwards than native's, or its ops' saving is not
    # in its forwards: work moved out of the timed intervals (timing_failed, never a speedup: kit.stages.accounting)
    UNACCOUNTED_WORK = "unaccounted_work"
    # the adb device that times the jobs disappeared, went offline or unauthorized, or stopped answering
    # (timing_failed; a resumed run times the job again: kit.results.rules)
    DEVICE_LOST = "device_lost"
    # the device stayed above device.max_load_pct or device.max_temp_c (timing_failed, retried as above)
    DEVICE_BUSY = "device_busy"
    # baselines.native_timing = "table" and the baseline table has no entry that matches this node's hardware,
    # MNN version, build flags and runner settings, and the task's files (timing_failed, retried: kit.results.rules)
    NO_BASELINE = "no_baseline"
    # a checked forward's inputs, as the runner wrote them out, cannot have been drawn from the timed input sets
    # the kit generated (verify_mismatch: the candidate edited the runner's inputs in its memory)
    INPUTS_FORGED = "inputs_forged"
    # what a build node shipped cannot be used on its timing node: machine code of another ELF machine than the
    # node runs, another native build, a non-ELF file where machine code belongs, an unsafe path (harness_error:
    # the cluster's fault, never the candidate's; a resumed run times it again)
    ARTEFACT = "artefact"


#: error kinds that, under a status of :data:`CORRECT`, name a failure of the candidate's own process in its timing
#: runs: a record of one is not correct.  ``clock_mismatch``: the candidate's stamp stream or clock (a forged stamp
#: line, stderr flooded until stamps were lost, times edited in the runner's memory; the native side's is a
#: ``harness_error``).  The timing stage records these as ``runtime_crash`` now; kits before issue 26 recorded them
#: as ``timing_failed``, and did so before comparing the timed outputs.  A kind of the timing device's or the
#: machine's own (``device_lost``, ``device_busy``, ``no_baseline``, ``worker_lost``, a native run's failure) is
#: not one.  ``unaccounted_work``: CPU spent outside the candidate's timed intervals beyond native's
#: (:mod:`kit.stages.accounting`): its outputs were right, but it hid work from the clock
CANDIDATE_TIMING_KINDS = frozenset({ErrorKind.CLOCK_MISMATCH, ErrorKind.UNACCOUNTED_WORK})


def counts_correct(status: Status, kind: ErrorKind) -> bool:
    """Whether a record of ``status`` and error ``kind`` is functionally correct (FCR's numerator): the status in
    :data:`CORRECT` and the kind not in :data:`CANDIDATE_TIMING_KINDS`."""
    return status in CORRECT and kind not in CANDIDATE_TIMING_KINDS


class Diagnostic(BaseModel):
    """One compiler/linker message (GCC/Clang format ``file:line:col: severity: message``)."""

    model_config = ConfigDict(frozen=True)
    file: str
    line: int | None = None
    column: int | None = None
    severity: str  # error | warning | note | fatal error | linker
    message: str
    context: str = ""  # source/caret lines that followed the message


class Trial(BaseModel):
    """One seeded verification trial (``threads``: the runner's CPU threads in it; None in older records)."""

    model_config = ConfigDict(frozen=True)
    seed: int
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    reason: str = ""
    threads: int | None = None


class EdgeSet(BaseModel):
    """One edge input set of the task (:mod:`kit.suite.edges`) run by verification: ``name`` (``ties``,
    ``negative_indices``, ``special_values``, ``large_magnitude``, ``denormals``, ``size_one_axes``, ``empty_axes``), whether the
    candidate's outputs matched ONNX Runtime (``ok``; ``reason`` when not), and whether native MNN's did (``native_ok``; None: not run).  A set
    native fails is recorded, never held against the candidate (:func:`edges_pass`)."""

    model_config = ConfigDict(frozen=True)
    name: str
    ok: bool
    native_ok: bool | None = None
    reason: str = ""


def edges_pass(edge_sets: list[EdgeSet] | tuple[EdgeSet, ...]) -> bool:
    """Whether a candidate passed every edge set that native MNN does not fail (strict correctness; a record
    without edge sets passes)."""
    return all(e.ok or e.native_ok is False for e in edge_sets)


class Flag(BaseModel):
    """Something a reviewer should look at in a record, with why (``code``, e.g. ``implausible_speedup``)."""

    model_config = ConfigDict(frozen=True)
    code: str
    reason: str = ""


class DeviceState(BaseModel):
    """The timing device of a job timed on an Android phone over adb (:mod:`kit.devices`), read just before
    its timed runs.  Empty strings and None: not readable on that device.

    ``model``, ``soc`` (``ro.soc.model``, else ``ro.board.platform``), ``android_release``, ``android_sdk``,
    ``kernel`` (``uname -r``), ``abi`` (``ro.product.cpu.abi``); ``cores``: the cores the runners were pinned to
    (``taskset``), ``cores_max_mhz`` their ``cpuinfo_max_freq``; ``governor`` and ``freq_mhz`` (mean
    ``scaling_cur_freq``) of those cores; ``temp_c``: the hottest CPU thermal zone (``temp_zone``; every zone
    where none is named for the CPU), °C; ``battery_pct``, ``charging``, ``battery_temp_c`` from ``dumpsys
    battery``; ``load_pct``: CPU busy percent over all cores from two ``/proc/stat`` reads ``load_sample_s``
    apart, ``load_1m`` the 1-minute load average; ``cooldown_wait_s`` and ``load_wait_s``: seconds waited before
    the runs for the cool-down (``device.cooldown_s``, ``device.max_temp_c``) and for the load to fall below
    ``device.max_load_pct``; ``emulated``: the device says it is an emulator (``ro.kernel.qemu`` or
    ``ro.boot.qemu``): its timings are not scored."""

    model_config = ConfigDict(frozen=True)
    serial: str
    model: str = ""
    soc: str = ""
    android_release: str = ""
    android_sdk: int | None = None
    kernel: str = ""
    abi: str = ""
    cores: list[int] = Field(default_factory=list)
    cores_max_mhz: list[float] = Field(default_factory=list)
    governor: str = ""
    freq_mhz: float | None = None
    temp_c: float | None = None
    temp_zone: str = ""
    battery_pct: int | None = None
    charging: bool | None = None
    battery_temp_c: float | None = None
    load_pct: float | None = None
    load_sample_s: float | None = None
    load_1m: float | None = None
    cooldown_wait_s: float = 0.0
    load_wait_s: float = 0.0
    emulated: bool = False


#: flag codes
IMPLAUSIBLE_SPEEDUP = "implausible_speedup"

#: the phases of a job's wall time (:mod:`kit.job.phases`), each a field ``<name>_s`` of :class:`JobPhases`
PHASE_NAMES: tuple[str, ...] = ("setup", "screen", "build", "verify", "native", "ship", "time", "reverify",
                                "lock_wait", "cleanup", "record")


class JobPhases(BaseModel):
    """Where a job's wall seconds went (:mod:`kit.job.phases`), disjoint phases that sum to ``wall_s``; None: the
    job never was in that phase.  ``setup_s``: the scratch, the workspace's check and the candidate's registration;
    ``screen_s``: the static checks of its sources and built libraries (:mod:`kit.stages.screen`); ``build_s``,
    ``verify_s`` (conversion and trials), ``time_s``, ``reverify_s``: the stages, with their own Python around the
    commands; ``native_s``: the native model and the seal check of the native files; ``ship_s``: packing the
    artefacts for a timing node and unpacking them there (``dispatch.build_resource``); ``lock_wait_s``: waiting
    for the node's gate (or the adb device), and the seconds a command was stopped while another process timed;
    ``cleanup_s``: restoring and checking the workspace, removing the scratch; ``record_s``: assembling the
    record.  A job split over a build and a timing node sums both halves."""

    model_config = ConfigDict(frozen=True)
    setup_s: float | None = None
    screen_s: float | None = None
    build_s: float | None = None
    verify_s: float | None = None
    native_s: float | None = None
    ship_s: float | None = None
    time_s: float | None = None
    reverify_s: float | None = None
    lock_wait_s: float | None = None
    cleanup_s: float | None = None
    record_s: float | None = None


class Record(BaseModel):
    """The one result of a job.

    Times are milliseconds of the task's target MNN op types per inference (sum over those op types).
    ``native_ms`` and ``candidate_ms`` are geometric means over the rounds of each round's median;
    ``speedup = native_ms / candidate_ms`` (the geometric mean of the rounds' paired ratios) with a 95 % CI
    over rounds (:mod:`kit.stages.timing` states the method).  ``*_samples_ms`` are the raw per-iteration
    samples and ``*_samples_round`` the round of each.  Stage times are seconds: ``build_s`` (configure +
    ninja), ``convert_s`` (the candidate's converter), ``verify_s`` (the trials), ``timing_s`` (the timing
    stage), ``wall_s`` (the whole job).
    """

    model_config = ConfigDict(frozen=True, use_enum_values=False)

    schema_version: int = SCHEMA_VERSION
    job_id: str
    method: str
    task_id: str
    sample_id: str
    candidate_sha256: str
    config_digest: str
    category: str = ""
    op_type: str = ""
    mechanism: str = ""
    split: str = ""

    status: Status
    error_kind: ErrorKind = ErrorKind.NONE
    error_message: str = ""
    signal: int | None = None  # signal number when a process died by signal
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    build_log_tail: str = ""

    build_s: float | None = None
    convert_s: float | None = None
    verify_s: float | None = None
    timing_s: float | None = None
    trials: list[Trial] = Field(default_factory=list)
    #: the task's edge input sets, run after the trials (empty: the task declares none, or verification failed)
    edge_sets: list[EdgeSet] = Field(default_factory=list)
    max_abs_err: float | None = None
    max_rel_err: float | None = None

    native_ms: float | None = None
    candidate_ms: float | None = None
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    native_samples_ms: list[float] = Field(default_factory=list)
    candidate_samples_ms: list[float] = Field(default_factory=list)
    native_samples_round: list[int] = Field(default_factory=list)
    candidate_samples_round: list[int] = Field(default_factory=list)
    timing_rounds: int | None = None  # rounds run (adaptive: between timing.rounds_min and timing.rounds_max)
    #: why the rounds stopped: ``decided`` (the interval decided every fast_p threshold), ``width`` (narrower than
    #: timing.stop_width), ``max`` (timing.rounds_max rounds ran; the fixed protocol's only reason); "" untimed
    timing_stop: str = ""
    timing_threads: int | None = None
    timing_precision: str = ""
    timing_emulated: bool = False  # measured under qemu: never scored as a speedup
    timing_basis: str = ""  # "op": target op types; "model": whole forward (sides ran different op types)
    #: native op time below ``timing.min_native_ms``: too short to time here, the speedup is not scored
    timing_untimeable: bool = False
    timing_cores: list[int] = Field(default_factory=list)  # CPU cores both sides' runners were pinned to
    cpu_governor: str = ""  # cpufreq governor of those cores ("" where unreadable)
    cpu_freq_mhz: float | None = None  # their current frequency just before the timing phase
    host_load_1m: float | None = None  # the timing machine's 1-minute load average just before the timing phase
    #: the adb device that timed the job and its state (None: timed on this host or a Ray node)
    device: DeviceState | None = None
    #: sha256 of each side's runner invocation without its model and libraries (equal: symmetric runs)
    native_invocation_sha256: str = ""
    candidate_invocation_sha256: str = ""
    #: where ``native_ms`` comes from: ``interleaved`` (native runs in this job's timing phase) or ``table``
    #: (the baseline table ``baseline_key``, kit.baselines: only the candidate was timed); "" without a native time
    native_timing: str = ""
    #: the baseline table of the hardware, MNN version and build flags that timed the job (used or written)
    baseline_key: str = ""
    flags: list[Flag] = Field(default_factory=list)

    #: the architecture the job was built for (``x86_64``, ``aarch64``; :mod:`kit.host.target`), how (``native`` or
    #: ``cross``), and where it was timed (``host``, ``qemu``: emulated on the build host, ``ray:<label>``)
    target_arch: str = ""
    build_mode: str = ""
    timing_device: str = ""
    arch: str = ""  # the build host's architecture
    host: str = ""
    #: the commands that compiled and ran the candidate ran in the sandbox (bubblewrap); False: rlimits only
    sandboxed: bool = False
    #: the Docker image id (``sha256:...``) the build, verification and timing commands ran in
    #: (``container.mode = "docker"``); "": they ran on the host
    image_id: str = ""
    worker: str = ""  # the worker that built (and verified) the candidate
    timing_worker: str = ""  # the timing worker, when timing ran on another node (dispatch.build_resource)
    timing_host: str = ""
    mnn_version: str = ""
    #: how the workspace's libraries (timed) and converter (not timed) were compiled, in words
    build_flags: str = ""
    attempts: int = 1
    started_at: str = ""  # ISO-8601 UTC
    wall_s: float | None = None
    #: where ``wall_s`` went, by phase (None: no job ran, e.g. a candidate refused before any build; records of
    #: schema < 8)
    phases: JobPhases | None = None

    @property
    def compiled(self) -> bool:
        return self.status in COMPILED

    @property
    def correct(self) -> bool:
        return counts_correct(self.status, self.error_kind)

    def to_row(self) -> dict[str, Any]:
        """A flat-ish dict for Parquet (enums as strings, nested lists of structs kept)."""
        return self.model_dump(mode="json")


#: The one map from what the stages return to the record: stage (an attribute of
#: :class:`kit.results.outcomes.Outcome`) → record field → the attribute of that stage's outcome it is read from
#: (a tuple becomes a list).  A new stage fact is a field of its outcome, a field of :class:`Record` and a line
#: here; ``tests/test_records_map.py`` checks that every outcome field is mapped or named unrecorded.
STAGE_FIELDS: dict[str, dict[str, str]] = {
    "build": {"build_s": "build_s", "diagnostics": "diagnostics", "build_log_tail": "log_tail"},
    "verify": {"trials": "trials", "edge_sets": "edge_sets", "max_abs_err": "max_abs_err", "max_rel_err": "max_rel_err",
               "convert_s": "convert_s", "verify_s": "verify_s"},
    "timing": {
        "candidate_ms": "candidate_ms", "native_ms": "native_ms", "speedup": "speedup",
        "speedup_ci_low": "speedup_ci_low", "speedup_ci_high": "speedup_ci_high",
        "candidate_samples_ms": "candidate_samples_ms", "native_samples_ms": "native_samples_ms",
        "candidate_samples_round": "candidate_samples_round", "native_samples_round": "native_samples_round",
        "timing_rounds": "rounds", "timing_stop": "stop", "timing_threads": "threads", "timing_precision": "precision",
        "timing_basis": "basis", "timing_emulated": "emulated", "timing_untimeable": "untimeable",
        "timing_cores": "cores", "cpu_governor": "governor", "cpu_freq_mhz": "freq_mhz", "host_load_1m": "load_1m",
        "native_invocation_sha256": "native_invocation_sha256",
        "candidate_invocation_sha256": "candidate_invocation_sha256", "flags": "flags", "timing_s": "timing_s",
        "device": "device", "native_timing": "native_timing", "baseline_key": "baseline_key",
    },
}
#: outcome fields that are not record fields of their own: stage → field → why
STAGE_FIELDS_UNRECORDED: dict[str, dict[str, str]] = {
    "timing": {"no_native_reason": "becomes error_kind no_native and its message",
               "native_profile": "the native runs for the baseline table, which keeps them"},
}
