"""The config a bundle carries, as the kit reads it back: exactly (``mkb validate``: no environment variable may
change a digest) or as a TOML file a reviewer's ``mkb eval`` loads with its own paths and overrides
(``mkb reproduce``)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from kit.bundle.manifest import BundleError
from kit.settings.config import EvalConfig
from kit.settings.tomlvalue import toml_value


class _Exact(EvalConfig):
    """An :class:`EvalConfig` from the given values only (no ``MKB_`` variables, no command line)."""

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   **_other: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def exact_config(data: dict[str, Any]) -> EvalConfig:
    """``data`` (``EvalConfig.model_dump(mode="json")``) as a config, nothing else read.

    Raises:
        BundleError: ``data`` is not a valid config of this kit (names the fields)."""
    try:
        return _Exact(**data)
    except ValidationError as exc:
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BundleError(f"manifest.json: config is not a valid config of this kit ({where})") from None


def _scalar(v: Any) -> str:
    if isinstance(v, list):
        if any(isinstance(x, dict) for x in v):
            raise TypeError("no TOML value for a list of tables")
        v = [x for x in v if x is not None]
    return toml_value(v)


def _table(name: str, body: dict[str, Any], header: str) -> list[str]:
    """``[name]`` (or ``[[name]]``: ``header``) with ``body``'s scalars, then its sub-tables and arrays of tables;
    None values left out (the key's default)."""
    lines = [header.format(name)]
    nested: list[tuple[str, Any]] = []
    for key, value in body.items():
        if value is None:
            continue
        if isinstance(value, dict) or (isinstance(value, list) and value and all(isinstance(x, dict) for x in value)):
            nested.append((key, value))
        else:
            lines.append(f"{key} = {_scalar(value)}")
    for key, value in nested:
        if isinstance(value, dict):
            lines += ["", *_table(f"{name}.{key}", value, "[{}]")]
        else:
            for item in value:
                lines += ["", *_table(f"{name}.{key}", item, "[[{}]]")]
    return lines


def config_toml(data: dict[str, Any]) -> str:
    """TOML text of a config dict (``{section: {key: value}}``, as ``EvalConfig.model_dump(mode="json")``);
    ``mkb eval --config`` reads it back to the same values (None: the default, which is None; an optional section
    that is None, ``[generate]`` or ``[refine]`` not given, is left out)."""
    lines: list[str] = []
    for section, body in data.items():
        if body is None:
            continue
        if not isinstance(body, dict):
            raise TypeError(f"config section {section!r} is not a table")
        lines += [*_table(section, body, "[{}]"), ""]
    return "\n".join(lines)
