"""Evaluation configuration: one TOML file, ``MKB_...`` environment overrides and CLI overrides.

Precedence (highest first): CLI overrides (``--timing.iterations 200``), environment
(``MKB_TIMING__ITERATIONS=200``, ``__`` separates nesting levels), the TOML file given by ``--config``,
then the defaults below.  Every section forbids unknown keys, so a misspelled ``[timing] warmupp`` fails
with a :class:`ConfigError` naming the key and the file instead of being silently ignored.

Relative paths inside a TOML file are resolved against the directory of that file; relative paths from
the environment or the CLI are resolved against the current directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, CliSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from kit.target import DEFAULT_ARCH, Target, make_target

#: MNN release the paper pins (MobileKernelBench §5) and its source tarball.
MNN_VERSION = "3.2.2"
MNN_TARBALL_URL = "https://github.com/alibaba/MNN/archive/refs/tags/3.2.2.tar.gz"
#: Content digest of the unpacked 3.2.2 tree (``kit.mnn.source.tree_digest``: sha256 over sorted
#: ``path\0sha256(file)`` lines, ``apps/`` excluded).  A downloaded tarball or a given ``source_dir`` is
#: checked against it; GitHub's tarball bytes are not byte-stable, the tree content is.
MNN_TREE_SHA256 = "89ff82664efb30d27bfa9d388bfd130a1a783a414014766e51e2519a074874e5"

DEFAULT_CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "mkb"


class ConfigError(Exception):
    """A configuration file, environment variable or CLI override is invalid.

    The message names the offending key and where it came from; the CLI exits with code 2.
    """


#: ``ctx`` key of a cross-field check's error: the fields it involves (dotted, relative to the model that raised
#: it, comma-separated), so :func:`load_config` names where each of them came from
_FIELDS_CTX = "mkb_fields"


def _fields_error(fields: Sequence[str], message: str) -> PydanticCustomError:
    """The error of a check over several fields (raised from a ``model_validator``)."""
    return PydanticCustomError("fields", message, {_FIELDS_CTX: ",".join(fields)})


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunSection(_Section):
    """Where a run writes its records, logs and reports."""

    dir: Path = Path("runs/default")


class TasksSection(_Section):
    """Which tasks of the suite to evaluate."""

    dir: Path = Path("tasks")
    split: Literal["train", "test", "all"] = "test"
    #: evaluate only these task ids (empty: every task of the split)
    ids: list[str] = Field(default_factory=list)


class CandidateSource(_Section):
    """One method's candidates: a directory ``<task_id>/<sample_id>/<files>`` or a JSONL file.

    JSONL lines hold ``task_id``, ``sample_id`` and either ``response`` (raw LLM text) or ``files``
    (``{"CPUArgMax.cpp": "..."}``).
    """

    method: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    path: Path


class CandidatesSection(_Section):
    sources: list[CandidateSource] = Field(default_factory=list)
    #: also evaluate the ``native`` method (the tree's own files; the A/A calibration)
    native: bool = False
    #: largest accepted candidate file, bytes
    max_file_bytes: int = Field(default=256 * 1024, gt=0)


class MnnSection(_Section):
    """The MNN tree candidates are compiled into."""

    #: an existing MNN checkout; never modified (a private copy is made in the cache)
    source_dir: Path | None = None
    version: str = MNN_VERSION
    tarball_url: str = MNN_TARBALL_URL
    #: sha256 of the tarball bytes, when known; the unpacked tree is always checked against tree_sha256
    tarball_sha256: str | None = None
    tree_sha256: str = MNN_TREE_SHA256
    #: refuse a source_dir whose content digest differs from tree_sha256 (set false for patched trees)
    check_tree: bool = True
    cache_dir: Path = DEFAULT_CACHE_DIR
    #: ``mnn`` for a real MNN tree, ``fixture`` for the kit's small test engine
    engine: Literal["mnn", "fixture"] = "mnn"
    #: extra CMake arguments for configuring every workspace (and the native build)
    cmake_args: list[str] = Field(default_factory=list)


class BuildSection(_Section):
    jobs: int = Field(default=max(1, os.cpu_count() or 1), ge=1)
    #: seconds for a build of the native baseline (the whole tree: about 13 minutes on 2 cores from cold)
    timeout_s: float = Field(default=1200.0, gt=0)
    #: seconds for a candidate's build (its files and what depends on them: seconds, measured 1.5-4.3 s for a
    #: swapped kernel; a compile-time bomb would otherwise hold a worker for the native build's 20 minutes)
    candidate_timeout_s: float = Field(default=300.0, gt=0)
    ccache: bool = True


class VerifySection(_Section):
    #: seeded input sets per task (>= 5 for scoring runs), run with ``timing.threads`` threads
    trials: int = Field(default=5, ge=1)
    seed: int = 0
    #: further thread counts to verify at, so that a kernel whose multi-threaded split is wrong fails; each runs
    #: the first ``extra_trials`` seeds (a count equal to ``timing.threads`` is skipped)
    extra_threads: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [4])
    extra_trials: int = Field(default=2, ge=1)
    convert_timeout_s: float = Field(default=120.0, gt=0)
    run_timeout_s: float = Field(default=60.0, gt=0)
    #: address-space limit (RLIMIT_AS) of the converter and runner processes that execute candidate code, MiB
    memory_limit_mb: int = Field(default=8192, ge=256)


class TimingSection(_Section):
    enabled: bool = True
    threads: int = Field(default=1, ge=1)
    #: MNN BackendConfig precision; ``high`` is fp32 on CPU
    precision: Literal["high", "normal", "low"] = "high"
    #: untimed forward passes at the start of every run (one run = one runner process)
    warmup: int = Field(default=10, ge=0)
    #: timed iterations per round and side
    iterations: int = Field(default=30, ge=1)
    #: interleaved rounds (N C, C N, N C, ...); the speedup's interval is over rounds, so at least 2; 10 x 30
    #: keeps the 300 timed iterations per side of the former 3 x 100
    rounds: int = Field(default=10, ge=2)
    #: confidence level of the speedup's interval (Student t over the rounds' paired log ratios)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    #: CPU cores both sides' runners are pinned to (``threads`` of them); empty: the last ``threads`` cores this
    #: process may run on
    cores: list[int] = Field(default_factory=list)
    #: a native op time (ms) below this is too short to time here: the record is flagged untimeable, its
    #: speedup never scored.  The floor of the per-op callbacks measured on MNN 3.2.2 here (a 1-element Add,
    #: BinaryOp): 0.29 us since the runner reads its clock by the system call (0.06 us through libc), i.e. about
    #: 6 % of 5 us; the shortest native op time of the test split was 34 us
    min_native_ms: float = Field(default=0.005, ge=0)
    #: a speedup above this factor is flagged implausible in the record and the report, never silently scored
    implausible_speedup: float = Field(default=10.0, gt=1.0)
    timeout_s: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _cores_match_threads(self) -> TimingSection:
        if self.cores and (len(self.cores) != self.threads or len(set(self.cores)) != len(self.cores)
                           or min(self.cores) < 0):
            raise _fields_error(("cores", "threads"),
                                f"timing.cores {self.cores} must name timing.threads = {self.threads} distinct "
                                f"non-negative core numbers (or be empty: chosen automatically)")
        return self


class SandboxSection(_Section):
    """How commands that run or compile candidate code are confined (:mod:`kit.sandbox`)."""

    #: ``bwrap``: bubblewrap required; ``auto``: bubblewrap where it works, else rlimits only (logged, and every
    #: record says ``sandboxed = false``); ``none``: rlimits only
    mode: Literal["auto", "bwrap", "none"] = "auto"
    #: address space of a compiler process (MiB; a template bomb is stopped here)
    build_memory_mb: int = Field(default=4096, ge=256)
    #: largest file a confined command may write (MiB)
    file_mb: int = Field(default=1024, ge=1)
    open_files: int = Field(default=1024, ge=16)
    #: processes a confined command may add to those the kit's user runs (a fork bomb stops here)
    processes: int = Field(default=256, ge=8)
    #: CPU seconds of one runner or converter process
    run_cpu_s: int = Field(default=600, ge=1)
    #: size of a sandboxed command's private /tmp (MiB)
    tmp_mb: int = Field(default=256, ge=1)


#: resource names Ray defines itself (never a node label)
RAY_PREDEFINED_RESOURCES = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


class DispatchSection(_Section):
    #: ``ray``: Ray actors (an embedded local Ray unless ``address`` is set); ``processes``: the same on this
    #: host only; ``serial``: one worker in this process, no Ray
    mode: Literal["serial", "processes", "ray"] = "ray"
    workers: int = Field(default=1, ge=1)
    #: Ray cluster address (``auto``, ``host:6379``, or ``ray://host:10001`` through Ray Client, which needs the
    #: ``client`` extra); None starts an embedded local Ray
    address: str | None = None
    #: custom Ray resource that marks timing nodes (e.g. ``aarch64``); None: any node
    timing_resource: str | None = None
    #: custom Ray resource that marks build nodes.  None: every worker builds, verifies and times on its own
    #: node (a timing_resource node).  Set: ``workers`` build workers on these nodes build and verify, and
    #: one timing worker per ``timing_resource`` node times what they ship through Ray's object store
    build_resource: str | None = None
    max_retries: int = Field(default=2, ge=0)

    @field_validator("timing_resource", "build_resource")
    @classmethod
    def _custom_resource(cls, v: str | None) -> str | None:
        if v is not None and (not v or v in RAY_PREDEFINED_RESOURCES or v.startswith(("node:", "accelerator_type:"))):
            raise ValueError(f"{v!r} is not a custom resource name: Ray predefines CPU, GPU, memory, "
                             "object_store_memory, node:* and accelerator_type:*; start the nodes with e.g. "
                             "--resources='{\"aarch64\": 1}' and name that")
        return v

    @field_validator("address")
    @classmethod
    def _address_form(cls, v: str | None) -> str | None:
        if v is None or v == "auto":
            return v
        host, sep, port = v.removeprefix("ray://").rpartition(":")
        if not sep or not host or "/" in host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{v!r}: give 'auto', 'ray://HOST:PORT' (Ray Client, usually port 10001; needs "
                             "the kit's `client` extra) or 'HOST:PORT' (the head's GCS port)")
        return v

    @model_validator(mode="after")
    def _split_needs_timing_nodes(self) -> DispatchSection:
        if self.build_resource is not None and self.timing_resource is None:
            raise _fields_error(("build_resource", "timing_resource"),
                                "dispatch.build_resource is set but dispatch.timing_resource is not: "
                                "name the resource that marks the timing nodes")
        if self.build_resource is not None and self.mode != "ray":
            raise _fields_error(("build_resource", "mode"),
                                "dispatch.build_resource needs dispatch.mode = \"ray\" (serial and processes runs "
                                "have one node without custom resources)")
        return self


class TargetSection(_Section):
    """What jobs are built for (:mod:`kit.target`): ``x86_64`` (this host: native builds, timed here) or
    ``aarch64`` (cross-built on an x86_64 host, linked statically, verified under qemu; emulated timings are
    recorded, never scored)."""

    arch: Literal["x86_64", "aarch64"] = "x86_64"
    #: compile ARMv8.2 half-precision arithmetic in (MNN's ``MNN_ARM82``; aarch64 only).  Off by default: the
    #: runs are fp32 (``timing.precision = "high"``), and the fp16 kernels add about 40 % of the cross build's
    #: steps
    fp16: bool = False

    @model_validator(mode="after")
    def _fp16_needs_arm(self) -> TargetSection:
        if self.fp16 and self.arch != "aarch64":
            raise _fields_error(("fp16", "arch"), f"target.fp16 = true needs target.arch = \"aarch64\" (ARMv8.2 "
                                f"half-precision arithmetic), not {self.arch!r}")
        return self


class ReportSection(_Section):
    #: thresholds p of fast_p (paper §5.1)
    fast_p: list[float] = Field(default_factory=lambda: [0.0, 0.5, 1.0, 1.5, 2.0])
    #: at the end of ``mkb eval``: merge the shards into results.parquet and write ``<run.dir>/report/``
    enabled: bool = True


class EvalConfig(BaseSettings):
    """The whole configuration of one evaluation run (see module docstring for sources)."""

    model_config = SettingsConfigDict(
        env_prefix="MKB_", env_nested_delimiter="__", extra="forbid", frozen=True, nested_model_default_partial_update=True
    )

    run: RunSection = RunSection()
    tasks: TasksSection = TasksSection()
    candidates: CandidatesSection = CandidatesSection()
    mnn: MnnSection = MnnSection()
    build: BuildSection = BuildSection()
    verify: VerifySection = VerifySection()
    timing: TimingSection = TimingSection()
    sandbox: SandboxSection = SandboxSection()
    dispatch: DispatchSection = DispatchSection()
    report: ReportSection = ReportSection()
    target: TargetSection = TargetSection()

    @model_validator(mode="after")
    def _check(self) -> EvalConfig:
        methods = [s.method for s in self.candidates.sources]
        dupes = sorted({m for m in methods if methods.count(m) > 1})
        if dupes:
            raise _fields_error(("candidates.sources",),
                                f"candidates.sources: method names must be unique, repeated: {dupes}")
        if "native" in methods:
            raise _fields_error(("candidates.sources",),
                                "candidates.sources: 'native' is reserved; set candidates.native = true instead")
        if self.target.arch != "x86_64" and self.dispatch.build_resource is not None:
            raise _fields_error(("target.arch", "dispatch.build_resource"),
                                f"target.arch = {self.target.arch!r} with dispatch.build_resource: timing nodes of "
                                "another architecture are not supported yet (cross-built jobs are verified and "
                                "timed, emulated, on the build node)")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        cli = _CLI_ARGS.get("args")
        sources: list[PydanticBaseSettingsSource] = []
        if cli:
            sources.append(
                CliSettingsSource(settings_cls, cli_parse_args=list(cli), cli_exit_on_error=False, cli_prog_name="mkb")
            )
        # init_settings carries the TOML file's content: lowest priority after the environment.
        sources += [env_settings, init_settings]
        return tuple(sources)

    def target_info(self) -> Target:
        """The :class:`kit.target.Target` of this config on this node (its build mode and timing device follow
        from this node's architecture and ``dispatch.timing_resource``)."""
        return make_target(self.target.arch, self.target.fp16, self.dispatch.timing_resource)

    def digest_payload(self) -> dict[str, Any]:
        """The settings :meth:`digest` covers, as ``{section: {key: value}}`` (JSON types).  ``target`` (the
        architecture, fp16, build mode and timing device) is there unless it is the default x86_64 host built
        natively and timed here, so the digests of configs older than the section stay what they were."""
        payload = {
            "mnn": self.mnn.model_dump(mode="json", include={"version", "tree_sha256", "engine", "cmake_args"}),
            "build": {"timeout_s": self.build.timeout_s, "candidate_timeout_s": self.build.candidate_timeout_s},
            "sandbox": self.sandbox.model_dump(mode="json"),
            "verify": self.verify.model_dump(mode="json"),
            "timing": self.timing.model_dump(mode="json"),
        }
        t = self.target_info()
        if t.arch != DEFAULT_ARCH or t.cross:
            payload["target"] = {"arch": t.arch, "fp16": t.fp16, "build_mode": t.build_mode,
                                 "timing_device": "qemu" if t.emulated else "host"}
        return payload

    def digest(self) -> str:
        """sha256 (hex, 16 chars) of everything that changes a job's result.

        Covers the MNN version/tarball/engine/CMake arguments, build timeout, verification and timing
        settings, and a target other than the x86_64 host (:meth:`digest_payload`).  Paths, worker counts and report settings are excluded, so a run can be resumed
        with another number of workers or from another directory.
        """
        blob = json.dumps(self.digest_payload(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


# CliSettingsSource needs the override list while pydantic builds the settings object; a module-level
# slot set only inside load_config() keeps EvalConfig() itself free of argv parsing.
_CLI_ARGS: dict[str, Sequence[str]] = {}

_PATH_FIELDS = {("run", "dir"), ("tasks", "dir"), ("mnn", "source_dir"), ("mnn", "cache_dir")}


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"config path is not a file: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    base = path.resolve().parent
    for section, key in _PATH_FIELDS:
        sec = data.get(section)
        if isinstance(sec, dict) and isinstance(sec.get(key), str):
            sec[key] = str(_resolve(base, sec[key]))
    cands = data.get("candidates")
    if isinstance(cands, dict) and isinstance(cands.get("sources"), list):
        for src in cands["sources"]:
            if isinstance(src, dict) and isinstance(src.get("path"), str):
                src["path"] = str(_resolve(base, src["path"]))
    return data


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return Path(os.path.normpath(p if p.is_absolute() else (base / p)))


def _origin(loc: tuple[Any, ...], path: Path | None, cli: Sequence[str], data: dict[str, Any]) -> str:
    """Where the value at ``loc`` came from, in the order the sources take precedence: command line,
    environment, file (``data``: its content), else the default.

    An override of an enclosing key counts too (``--dispatch '{...}'``, ``MKB_DISPATCH='{...}'``).
    """
    given = {a.lstrip("-").split("=")[0] for a in cli if a.startswith("-")}
    env = {name.upper(): name for name in os.environ}
    for n in range(len(loc), 0, -1):
        if ".".join(str(p) for p in loc[:n]) in given:
            return "from the command line"
    for n in range(len(loc), 0, -1):
        env_name = env.get("MKB_" + "__".join(str(p).upper() for p in loc[:n]))
        if env_name is not None:
            return f"from environment variable {env_name}"
    if path is not None and _in_file(data, loc):
        return f"in {path}"
    return "(not set: the default)"


def _in_file(data: Any, loc: tuple[Any, ...]) -> bool:
    """Whether the TOML content ``data`` holds the key (or list item) at ``loc``."""
    for part in loc:
        if isinstance(data, dict):
            if part not in data:
                return False
            data = data[part]
        elif isinstance(data, list):
            if not isinstance(part, int) or not 0 <= part < len(data):
                return False
            data = data[part]
        else:  # a value the file gives: the rest of ``loc`` names the types pydantic tried on it
            return True
    return True


def load_config(path: Path | str | None = None, overrides: Sequence[str] = ()) -> EvalConfig:
    """Load an :class:`EvalConfig` from ``path`` (TOML), the ``MKB_`` environment and ``overrides``.

    ``overrides`` are CLI tokens such as ``["--timing.iterations", "200"]``.

    Raises:
        ConfigError: missing/unreadable file, invalid TOML, an unknown key at any nesting level, a value of
            the wrong type, or an unknown CLI override.  The message names the key and its origin.
    """
    p = Path(path) if path is not None else None
    data = _read_toml(p) if p is not None else {}
    sections = set(EvalConfig.model_fields)
    for name in sorted(os.environ):
        if name.startswith("MKB_") and "__" in name:
            head = name[4:].split("__", 1)[0].lower()
            if head not in sections:
                raise ConfigError(
                    f"invalid configuration:\n  unknown key '{head}' from environment variable {name} "
                    f"(sections: {', '.join(sorted(sections))})"
                )
    _CLI_ARGS["args"] = list(overrides)
    try:
        return EvalConfig(**data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            dotted = ".".join(str(x) for x in loc) or "(top level)"
            fields = (err.get("ctx") or {}).get(_FIELDS_CTX)
            if fields is not None:  # a check over several fields: where each of them came from
                involved = [(*loc, *f.split(".")) for f in fields.split(",")]
                names = " and ".join(f"'{'.'.join(map(str, f))}' {_origin(f, p, overrides, data)}" for f in involved)
                lines.append(f"invalid {'combination of' if len(involved) > 1 else 'value for'} {names}: {err['msg']}")
                continue
            where = _origin(loc, p, overrides, data)
            if err["type"] == "extra_forbidden":
                lines.append(f"unknown key '{dotted}' {where}")
            else:
                lines.append(f"invalid value for '{dotted}' {where}: {err['msg']} (got {err.get('input')!r})")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None
    except SettingsError as exc:
        raise ConfigError(f"invalid configuration override: {exc}") from None
    finally:
        _CLI_ARGS.pop("args", None)
