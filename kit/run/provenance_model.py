"""The models of a run's ``provenance.json`` (:mod:`kit.run.provenance` reads and writes the file): a
:class:`Session` per session, the :class:`Provenance` of the run, and their parts.  Every field is optional (a
file of an older kit lacks the newer ones); a key the models do not name is kept and written back unchanged."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

FILE = "provenance.json"
#: keys that must agree between the sessions of one run for its numbers to be comparable
SESSION_KEYS: tuple[str, ...] = (
    "config_digest", "mnn_version", "mnn_tree_digest", "engine", "compiler", "build_flags", "cpu_model", "arch",
    "threads", "precision", "python", "container",
)


#: facts kept per session beside :data:`SESSION_KEYS` (the node's :func:`kit.host.machine.fingerprint`, the kit's
#: version and commit, ONNX Runtime's version); a bundle compares them with the reviewer's
FACT_KEYS: tuple[str, ...] = ("host", "kit", "onnxruntime")

#: the keys of a session's entry under ``sessions`` (the top level has these and ``config``)
ENTRY_KEYS: tuple[str, ...] = (*SESSION_KEYS, "started_at", "build_cpu_model", "build_arch", "dispatch", "tasks",
                               "baselines", "generation", *FACT_KEYS)

#: top-level key of the selections of sessions that ran no job (and so added no session entry)
EXTRA_SELECTIONS = "task_selections"

#: how to get past a damaged file (said in every ProvenanceError)
_FIX = " (move the file away to go on: the next session writes a new one from its own provenance)"


class ProvenanceError(Exception):
    """``provenance.json`` exists but is damaged: not JSON, not an object, or a key of the wrong type (the
    message names the file)."""


class _Part(BaseModel):
    """What every part of the file shares: unknown keys kept (and written back), types checked strictly (a value
    of another type is a damaged file, never converted), a field's docstring as its description."""

    model_config = ConfigDict(extra="allow", strict=True, use_attribute_docstrings=True)

    def dump(self) -> dict[str, Any]:
        """The keys the file had (or the kit set), as plain JSON types: no default is added."""
        return self.model_dump(exclude_unset=True)


class TaskSelection(_Part):
    """What a session's ``mkb eval`` was asked to evaluate (the denominator it scored against)."""

    split: str | None = None
    """``tasks.split``: ``all``, ``train`` or ``test``"""
    ids: list[str] = []
    """``tasks.ids``: the task ids chosen within the split (empty: every task of the split)"""
    dir: str | None = None
    """``tasks.dir``, absolute (a selection from the config of an older kit: as written there)"""


class HostFacts(_Part):
    """A node as a reviewer compares it with another (:func:`kit.host.machine.fingerprint`)."""

    cpu_model: str | None = None
    """the CPU's model name"""
    arch: str | None = None
    """``platform.machine()``, e.g. ``x86_64``, ``aarch64``"""
    cpus: int | None = None
    """logical CPUs of the machine"""
    usable_cores: int | None = None
    """CPUs in the affinity mask of the process"""
    kernel: str | None = None
    """``platform.release()``"""
    governor: str | None = None
    """cpufreq governor of the usable cores ("" where unreadable)"""


class KitFacts(_Part):
    """The kit that wrote a session (:func:`kit.host.versions.kit_facts`)."""

    version: str | None = None
    """the package version (None: not installed as a package)"""
    commit: str | None = None
    """HEAD of the kit's git checkout, 40 hex (None: not a checkout)"""
    dirty: bool | None = None
    """whether tracked files differed from that commit (None: not known)"""


class ContainerFacts(_Part):
    """Where a session's commands ran (:meth:`kit.images.container.ImageCheck.provenance`)."""

    mode: str | None = None
    """``host`` (no container; the other fields absent) or ``docker``"""
    image: str | None = None
    """the image asked for (a tag)"""
    image_id: str | None = None
    """its id in the daemon (``sha256:...``)"""
    lock_image_id: str | None = None
    """the id the images' lock pins for that architecture ("" when none)"""
    matches_lock: bool | None = None
    """``image_id`` equals ``lock_image_id``"""
    arch: str | None = None
    """the image's architecture"""


class BaselineTable(_Part):
    """The baseline table a session's timings wrote or read (:meth:`kit.baselines.book.Book.describe`)."""

    key: str | None = None
    """the table's key (:class:`kit.baselines.key.BaselineKey`: 16 hex)"""
    fingerprint_id: str | None = None
    """sha256 (16 hex) of ``fingerprint``"""
    fingerprint: dict[str, Any] | None = None
    """the hardware that timed (a node's fingerprint, or an adb device's)"""
    hardware: str | None = None
    """``fingerprint`` in words"""
    mnn_version: str | None = None
    """the MNN version of the native side"""
    flags_digest: str | None = None
    """sha256 (16 hex) of the native build's key and the runner settings"""
    native_key: str | None = None
    """the native build's key (:func:`kit.mnn.native.native_key`)"""
    threads: int | None = None
    """runner threads"""
    precision: str | None = None
    """MNN's BackendConfig precision"""
    warmup: int | None = None
    """untimed passes per run"""
    iterations: int | None = None
    """timed passes per run"""
    native_timing: str | None = None
    """``interleaved`` (native timed beside each candidate) or ``table`` (taken from the table)"""
    record: bool | None = None
    """whether interleaved native times were added to the table"""
    dir: str | None = None
    """the folder of the tables on the node that timed"""


class TimingNode(_Part):
    """A timing worker of a session whose builds and timings ran on different nodes."""

    name: str | None = None
    """the worker's name (``n<node>.t<index>``)"""
    host: str | None = None
    """its node's host name"""
    arch: str | None = None
    """its node's ``platform.machine()``"""
    cpu_model: str | None = None
    """its node's CPU model"""


class Dispatch(_Part):
    """How a Ray session dispatched its jobs (``[dispatch]`` and what the driver found)."""

    mode: str | None = None
    """``dispatch.mode``: ``processes`` or ``ray``"""
    address: str | None = None
    """``dispatch.address`` (None: an embedded local Ray)"""
    timing_resource: str | None = None
    """``dispatch.timing_resource``"""
    build_resource: str | None = None
    """``dispatch.build_resource`` (None: builds and timings on the same nodes)"""
    workers: int | None = None
    """build workers started"""
    first_worker: dict[str, Any] | None = None
    """the first ready build worker as it described itself (name, host, ip, pid, kit digest, native key)"""
    timing_workers: list[TimingNode] = []
    """the timing workers in the order they became ready (empty: timing on the build workers)"""


class GenerationFacts(_Part):
    """How the evaluated answers of a model were made (``mkb generate``, the config's ``[generate]``): read from
    the answers file when the session started."""

    model: str | None = None
    endpoint_host: str | None = None
    """the endpoint's host and port (never its path's query or a credential)"""
    method: str | None = None
    samples: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    answers: int | None = None
    """lines of the answers file"""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompts_sha256: str | None = None
    """sha256 (hex) over the sorted distinct prompt digests of the answers: the prompts' version"""
    finish_reasons: dict[str, int] | None = None


class Session(_Part):
    """What one session of a run ran with, on the node that built (and, unless ``dispatch`` names timing
    workers, timed) its jobs.  The :data:`SESSION_KEYS` must agree between sessions for their numbers to be
    comparable; ``config`` is kept at the file's top level only."""

    config_digest: str | None = None
    """sha256 (hex) of the settings that change a result (:meth:`kit.settings.config.EvalConfig.digest`)"""
    mnn_version: str | None = None
    """``mnn.version``"""
    mnn_tree_digest: str | None = None
    """digest of the pristine MNN tree the native side was built from ("unknown": no build worker)"""
    engine: str | None = None
    """``mnn.engine``"""
    compiler: str | None = None
    """the compiler of the native build, in words ("unknown": no build worker)"""
    build_flags: str | None = None
    """the native libraries' (and converter's) build flags, in words ("unknown": no build worker)"""
    cpu_model: str | None = None
    """the model of the CPU that timed (a timing worker's, once one joined)"""
    arch: str | None = None
    """``platform.machine()`` of the node that timed"""
    threads: int | None = None
    """``timing.threads``: threads of one timed run"""
    precision: str | None = None
    """``timing.precision``"""
    python: str | None = None
    """Python's version, e.g. ``3.12.3``"""
    started_at: str | None = None
    """when the session started, ISO-8601 UTC to the second"""
    tasks: TaskSelection | None = None
    """the task selection (absent: a session of an older kit; see :meth:`Provenance.selections`)"""
    config: dict[str, Any] | None = None
    """the whole config as JSON (:meth:`kit.settings.config.EvalConfig.model_dump`)"""
    host: HostFacts | None = None
    """the build node's fingerprint"""
    kit: KitFacts | None = None
    """the kit's version and commit"""
    onnxruntime: str | None = None
    """ONNX Runtime's version, the reference (None: not installed)"""
    container: ContainerFacts | None = None
    """where the commands ran"""
    baselines: BaselineTable | None = None
    """the baseline table of the node (None: no build worker)"""
    dispatch: Dispatch | None = None
    """the dispatch of a Ray session (absent: a serial session)"""
    generation: GenerationFacts | None = None
    """the model whose answers the session evaluated (absent: no ``[generate]`` section)"""
    build_cpu_model: str | None = None
    """the build node's CPU model, when timing workers timed (``cpu_model`` is then theirs)"""
    build_arch: str | None = None
    """the build node's ``platform.machine()``, when timing workers timed"""

    def fact(self, key: str) -> Any:
        """The value of field ``key`` as plain JSON types (None when the session did not record it)."""
        return self.model_dump(include={key}, exclude_unset=True).get(key)

    def entry(self) -> Session:
        """This session as its entry under ``sessions``: the :data:`ENTRY_KEYS` it has (copies)."""
        return Session.model_validate({k: v for k, v in self.dump().items() if k in ENTRY_KEYS})


class Provenance(Session):
    """A run's ``provenance.json``: the first session's values (and ``config``) at the top level, every
    session under ``sessions``, what changed between them under ``differs``."""

    sessions: list[Session] | None = None
    """every session that ran jobs, in order (absent: a file from before sessions were kept, whose top level
    is its one session)"""
    differs: dict[str, list[Any]] = {}
    """each :data:`SESSION_KEYS` key whose value is not the same in every session that recorded it -> the
    value of each session (None: not recorded); absent when nothing differs"""
    task_selections: list[TaskSelection] | None = None
    """the selections of sessions that ran no job (:func:`note_selection`)"""

    def all_sessions(self) -> list[Session]:
        """Every session: ``sessions``, or the top level for a file from before sessions were kept."""
        return list(self.sessions or [self])

    def selections(self) -> list[TaskSelection] | None:
        """The task selection of each session, then of the sessions that ran no job (``split`` and ``ids``
        always; ``dir`` when recorded): what ``mkb eval`` scored against.  None when not every session
        recorded one (a file from an older kit); a first session from before sessions kept it takes the
        top-level config's ``tasks``."""
        out = []
        entries: list[TaskSelection | None] = [s.tasks for s in self.all_sessions()]
        for i, sel in enumerate([*entries, *(self.task_selections or [])]):
            if sel is None and i == 0:
                sel = self._config_selection()
            if sel is None or sel.split is None:
                return None
            out.append(TaskSelection(split=sel.split, ids=list(sel.ids), dir=sel.dir))
        return out

    def recorded_task_dirs(self) -> list[str]:
        """The tasks folders the selections recorded (:meth:`selections`), in order, repeats kept."""
        return [s.dir for s in self.selections() or [] if s.dir is not None]

    def config_tasks_dir(self) -> str | None:
        """The top-level config's ``tasks.dir`` as written there (None: no config or no such string)."""
        tasks = (self.config or {}).get("tasks")
        found = tasks.get("dir") if isinstance(tasks, dict) else None
        return found if isinstance(found, str) else None

    def _config_selection(self) -> TaskSelection | None:
        tasks = (self.config or {}).get("tasks")
        if not isinstance(tasks, dict):
            return None
        try:
            return TaskSelection.model_validate(tasks)
        except ValidationError:
            return None
