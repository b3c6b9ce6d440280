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
from typing import Any

from pydantic import ValidationError, model_validator
from pydantic_settings import BaseSettings, CliSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from kit.host.target import DEFAULT_ARCH, Target, make_target
from kit.settings.base import (
    DEFAULT_CACHE_DIR,
    FIELDS_CTX,
    MNN_TARBALL_URL,
    MNN_TREE_SHA256,
    MNN_VERSION,
    fields_error,
)
from kit.settings.baselines import BaselinesSection
from kit.settings.container import ContainerSection
from kit.settings.device import DeviceSection
from kit.settings.generate import GenerateSection, RefineSection
from kit.settings.sections import (
    RAY_PREDEFINED_RESOURCES,
    BuildSection,
    CandidateSource,
    CandidatesSection,
    DispatchSection,
    MnnSection,
    ReportSection,
    RunSection,
    SandboxSection,
    TargetSection,
    TasksSection,
    TimingSection,
    VerifySection,
)

#: re-exported: the sections and constants are read from ``kit.settings.config`` throughout the kit
__all__ = ["BaselinesSection", "BuildSection", "CandidateSource", "CandidatesSection", "ConfigError", "ContainerSection",
           "DEFAULT_CACHE_DIR", "DeviceSection", "DispatchSection", "EvalConfig", "GenerateSection", "RefineSection", "MNN_TARBALL_URL", "MNN_TREE_SHA256",
           "MNN_VERSION", "MnnSection",
           "RAY_PREDEFINED_RESOURCES", "ReportSection", "RunSection", "SandboxSection", "TargetSection",
           "TasksSection", "TimingSection", "VerifySection", "load_config"]


class ConfigError(Exception):
    """A configuration file, environment variable or CLI override is invalid.

    The message names the offending key and where it came from; the CLI exits with code 2.
    """




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
    container: ContainerSection = ContainerSection()
    device: DeviceSection = DeviceSection()
    baselines: BaselinesSection = BaselinesSection()
    #: a model's answers to generate before evaluating them (``mkb generate``; ``mkb eval`` too when set)
    generate: GenerateSection | None = None
    #: iterative refinement of the model's answers with the kit's feedback (``mkb refine``; needs ``[generate]``)
    refine: RefineSection | None = None

    @model_validator(mode="after")
    def _check(self) -> EvalConfig:
        methods = [s.method for s in self.candidates.sources]
        dupes = sorted({m for m in methods if methods.count(m) > 1})
        if dupes:
            raise fields_error(("candidates.sources",),
                                f"candidates.sources: method names must be unique, repeated: {dupes}")
        if "native" in methods:
            raise fields_error(("candidates.sources",),
                                "candidates.sources: 'native' is reserved; set candidates.native = true instead")
        self._check_device()
        self._check_precision()
        if self.refine is not None and self.generate is None:
            raise fields_error(("refine", "generate"), "[refine] refines the answers of a model: add a [generate] "
                               "section (model, base_url, api_key_env, samples = chains per task)")
        return self

    def _check_device(self) -> None:
        """An adb device times static aarch64 builds (no Android NDK: a phone runs no binary linked against
        this host's glibc) of jobs that this node builds, on the device's own cores."""
        if self.device.kind == "none":
            return
        if self.target.arch != "aarch64":
            raise fields_error(("device.kind", "target.arch"), "device.kind = \"adb\" needs target.arch = "
                               "\"aarch64\" (a phone runs the static aarch64 runner; an x86_64 build does not run there)")
        if self.dispatch.timing_resource is not None:
            raise fields_error(("device.kind", "dispatch.timing_resource"), "device.kind = \"adb\" times on the "
                               "device attached to the node that builds: unset dispatch.timing_resource")
        if self.timing.cores:
            raise fields_error(("device.kind", "timing.cores"), "timing.cores names this host's cores; with an "
                               "adb device give the device's cores as device.cores")
        cores = self.device.cores
        if cores and (len(cores) != self.timing.threads or len(set(cores)) != len(cores)):
            raise fields_error(("device.cores", "timing.threads"), f"device.cores {self.device.cores} must name "
                               f"timing.threads = {self.timing.threads} distinct cores (or be empty: the big cores)")

    def _check_precision(self) -> None:
        """``timing.precision = "low"`` on an aarch64 target is refused: the kit cannot show which kernel ran.

        MNN 3.2.2's CPU runtime hands a session of precision Low to its ARMv8.2 half-precision backend
        (``CPURuntime::onCreate`` creates an ``Arm82Backend`` when MNN_ARM82 is built in and the CPU reports the
        FPHP and ASIMDHP features, as every ARMv8.2 phone core does); that backend's tensors are fp16 and it
        creates an op through the CPU creators on fp16 buffers, or returns none and the op falls back.  A candidate
        written for the fp32 CPU backend may then never run, or run on data it does not expect, and native's fp16
        kernel would be timed on both sides.  No dispatch watermark tells the kit which creator executed, so the
        combination is refused.  ``normal`` is accepted: 3.2.2's CPU runtime picks the fp16 backend for Low only.
        """
        if self.target.arch == "aarch64" and self.timing.precision == "low":
            raise fields_error(("timing.precision", "target.arch"), (
                "timing.precision = \"low\" on target.arch = \"aarch64\" is refused: with precision low MNN's CPU "
                "runtime on an ARMv8.2 core (FP16 arithmetic: asimdhp) dispatches to the half-precision backend's "
                "creators (Arm82Backend, built in with target.fp16 = true and in a phone's MNN), so a candidate "
                "registered for the fp32 CPU backend may never run and native's fp16 kernel would be timed on both "
                "sides; the kit has no dispatch watermark to prove which kernel ran. Use timing.precision = \"high\" "
                "(fp32; \"normal\" selects the same fp32 CPU backend on MNN 3.2.2)"))

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
        """The :class:`kit.host.target.Target` of this config on this node (its build mode and timing device follow
        from this node's architecture and ``dispatch.timing_resource``)."""
        return make_target(self.target.arch, self.target.fp16, self.dispatch.timing_resource,
                           device=self.device.serial if self.device.kind == "adb" else None,
                           ndk=self.target.ndk_info())

    def digest_payload(self) -> dict[str, Any]:
        """The settings :meth:`digest` covers, as ``{section: {key: value}}`` (JSON types).  ``target`` (the
        architecture, fp16, build mode and timing device) is there unless it is the default x86_64 host built
        natively and timed here, so the digests of configs older than the section stay what they were; so is
        ``device`` (the adb device and how it is held) when one times.  The build mode is this node's view (the
        driver's): with Ray build nodes of another architecture the records say what each build node did."""
        payload = {
            "mnn": self.mnn.model_dump(mode="json", include={"version", "tree_sha256", "engine", "cmake_args"}),
            "build": {"timeout_s": self.build.timeout_s, "candidate_timeout_s": self.build.candidate_timeout_s},
            "sandbox": self.sandbox.model_dump(mode="json"),
            "verify": self.verify.model_dump(mode="json"),
            "timing": self.timing.digest_payload(self.report.fast_p),
        }
        t = self.target_info()
        if t.arch != DEFAULT_ARCH or t.cross:
            payload["target"] = {"arch": t.arch, "fp16": t.fp16, "build_mode": t.build_mode,
                                 "timing_device": t.timing_device}
            if t.cross and t.ndk is not None:  # the NDK's revision, API level and ABI (not its path)
                payload["target"]["ndk"] = t.ndk.describe()
        if self.container.mode != "host":
            # another toolchain (the image's): only then, so the digests of host runs stay what they were
            payload["container"] = {"mode": self.container.mode}
        if (baselines := self.baselines.digest_payload()) is not None:
            payload["baselines"] = baselines
        device = self.device.digest_payload()
        if device is not None:  # (an adb device needs target.arch = "aarch64": the target is in the payload)
            payload["device"] = device
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

_PATH_FIELDS = {("run", "dir"), ("tasks", "dir"), ("mnn", "source_dir"), ("mnn", "cache_dir"),
                ("container", "lock_file"), ("baselines", "dir"),
                ("target", "ndk"), ("generate", "out")}


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
            fields = (err.get("ctx") or {}).get(FIELDS_CTX)
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
