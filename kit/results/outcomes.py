"""What each stage of a job returns, and how a stage fails.

A job runs build → verify → time; each stage returns its own result (:class:`BuildOutcome`,
:class:`VerifyOutcome`, :class:`TimingOutcome`) or raises :class:`StageFailure` with the status it stands for
and, where the stage had measured something before it failed, that partial result (a failed build's
diagnostics, the trials run before a mismatch or a crash).  The pipeline collects them in an
:class:`Outcome`; :func:`kit.job.record.job_record` is the one function that turns an outcome (and a failure) into
the job's :class:`~kit.results.records.Record`.

Units are in the field names (seconds ``_s``, milliseconds ``_ms``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kit.results.records import DeviceState, Diagnostic, EdgeSet, ErrorKind, Flag, Status, Trial


@dataclass(frozen=True)
class BuildOutcome:
    """One build of a workspace with a candidate's files in it.

    ``build_s``: configure + ninja seconds (paused seconds excluded); ``diagnostics``: the compiler/linker
    messages worth showing (every error, warnings and notes of the candidate's own files only);
    ``log_tail``: the last lines of the build log, kept only when the build failed."""

    build_s: float
    diagnostics: tuple[Diagnostic, ...] = ()
    log_tail: str = ""


@dataclass(frozen=True)
class VerifyOutcome:
    """The seeded verification trials, in order (all passed unless the stage failed); ``convert_s``: seconds
    of the candidate's converter, ``verify_s``: seconds of the trials (without the seconds they were paused for
    another worker's timing phase); ``edge_sets``: the task's edge input sets, run after the trials passed."""

    trials: tuple[Trial, ...] = ()
    edge_sets: tuple[EdgeSet, ...] = ()
    convert_s: float | None = None
    verify_s: float | None = None

    @property
    def max_abs_err(self) -> float | None:
        """Worst absolute error over the trials' outputs (None without a compared output)."""
        errs = [t.max_abs_err for t in self.trials if t.max_abs_err is not None]
        return max(errs) if errs else None

    @property
    def max_rel_err(self) -> float | None:
        errs = [t.max_rel_err for t in self.trials if t.max_rel_err is not None]
        return max(errs) if errs else None


@dataclass(frozen=True)
class NativeProfile:
    """The native side of one interleaved timing, as a baseline table keeps it (:mod:`kit.baselines`): the
    median of each native run (ms), of the task's target op types (``op_round_ms``) and of the whole forward
    (``model_round_ms``), in round order, and ``op_types``: op type → ops the native model executed per
    forward."""

    op_round_ms: tuple[float, ...]
    model_round_ms: tuple[float, ...]
    op_types: dict[str, int]


@dataclass(frozen=True)
class TimingOutcome:
    """Native vs candidate timing (:mod:`kit.stages.timing` states the method).

    Times in ms of the task's target op types (or of the whole forward pass, ``basis = "model"``):
    ``*_ms`` are geometric means over the rounds of each round's median, ``*_samples_ms`` the raw
    per-iteration samples with their round in ``*_samples_round``; ``speedup = native_ms / candidate_ms``
    with its interval over the ``rounds`` paired rounds; the native fields are None/empty when native MNN
    cannot convert the task (``no_native_reason`` says why; None when there is a native side).
    Conditions: ``cores`` both sides were pinned to, their ``governor`` and ``freq_mhz``, the host's
    ``load_1m`` before the timed runs, the digest of each side's runner invocation (equal by construction:
    checked).  ``stop``: why the rounds stopped (``decided``, ``width``, ``max``, ``alone``: :mod:`kit.stages.sequential`).
    ``emulated``: measured under user-mode emulation (qemu); ``untimeable``: the native op time is
    below the configured minimum; ``flags``: e.g. an implausible speedup.  None of those is scored as a
    speedup.  ``timing_s``: seconds of the whole stage; ``device``: the adb device's state when one timed (its
    governor, frequency and load are then those of ``governor``, ``freq_mhz`` and ``load_1m`` too).
    ``native_timing``: where ``native_ms`` comes from, ``interleaved`` (this stage's native runs) or ``table``
    (the baseline table ``baseline_key``; "" without a native side); ``native_profile``: the native runs for
    the baseline table (not recorded: the table keeps it)."""

    candidate_samples_ms: tuple[float, ...]
    candidate_ms: float
    native_samples_ms: tuple[float, ...] = ()
    native_ms: float | None = None
    speedup: float | None = None
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    basis: str = "op"
    threads: int | None = None
    precision: str = ""
    emulated: bool = False
    no_native_reason: str | None = None
    candidate_samples_round: tuple[int, ...] = ()
    native_samples_round: tuple[int, ...] = ()
    rounds: int | None = None
    stop: str = ""
    cores: tuple[int, ...] = ()
    governor: str = ""
    freq_mhz: float | None = None
    load_1m: float | None = None
    native_invocation_sha256: str = ""
    candidate_invocation_sha256: str = ""
    untimeable: bool = False
    flags: tuple[Flag, ...] = ()
    timing_s: float | None = None
    device: DeviceState | None = None
    native_timing: str = ""
    baseline_key: str = ""
    native_profile: NativeProfile | None = None


@dataclass
class Outcome:
    """What a job has gathered so far: the result of each stage that ran (None: not reached)."""

    build: BuildOutcome | None = None
    verify: VerifyOutcome | None = None
    timing: TimingOutcome | None = None
    #: what a reviewer should look at, from any stage (static checks, ignored response parts)
    flags: list[Flag] = field(default_factory=list)
    #: seconds per phase of the job (:data:`kit.results.records.PHASE_NAMES`; filled by :mod:`kit.job.phases`)
    phases: dict[str, float] = field(default_factory=dict)

    def add(self, part: BuildOutcome | VerifyOutcome | TimingOutcome | None) -> None:
        """Keep ``part`` as the result of its stage (None: nothing to keep)."""
        if isinstance(part, BuildOutcome):
            self.build = part
        elif isinstance(part, VerifyOutcome):
            self.verify = part
        elif isinstance(part, TimingOutcome):
            self.timing = part


@dataclass(frozen=True)
class Where:
    """Where and when a job ran (the record's non-result fields): the build worker's ``arch``, ``host``,
    ``worker`` and ``mnn_version``, the ISO-8601 UTC ``started_at``, and the timing worker when timing ran
    on another node (``dispatch.build_resource``)."""

    arch: str = ""
    host: str = ""
    worker: str = ""
    mnn_version: str = ""
    #: how the native build's libraries and converter were compiled (:func:`kit.mnn.converter.build_flags`)
    build_flags: str = ""
    sandboxed: bool = False
    #: the id of the image the commands ran in (``container.mode = "docker"``; "": on the host)
    image_id: str = ""
    started_at: str = ""
    timing_worker: str = ""
    timing_host: str = ""


class StageFailure(Exception):
    """A stage failed: the job's record gets ``status`` and ``kind``, ``message`` (truncated in the record),
    the ``signal`` of a process that died by one, and ``partial``, the failing stage's own result so far
    (e.g. the trials run before a mismatch).  Raised by the stages; also built (not raised) for the records of
    jobs that produced none themselves (rejected, lost, harness errors)."""

    def __init__(self, status: Status, kind: ErrorKind, message: str, *, signal: int | None = None,
                 partial: BuildOutcome | VerifyOutcome | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.signal = signal
        self.partial = partial

