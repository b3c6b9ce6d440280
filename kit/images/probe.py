"""One ``--network none`` run of a built kit image that reports what is installed in it, and the check of
that report against the pins."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from kit.images.common import APT_PACKAGES, ImageError
from kit.images.docker import run
from kit.images.requirements import canonical_name


@dataclass(frozen=True)
class ImageProbe:
    """What one ``--network none`` run of a kit image reports about itself.

    ``help_exit``/``help_output``: ``mkb --help``; ``packages``: Python distributions (canonical name ->
    version); ``apt``: installed versions of :data:`APT_PACKAGES`; ``env``: the ``MKB_`` environment;
    ``emulated``: :func:`kit.host.machine.is_emulated` inside the container.
    """

    help_exit: int
    help_output: str
    packages: dict[str, str]
    apt: dict[str, str]
    env: dict[str, str]
    emulated: bool


_PROBE_PY = (
    "import json, os, importlib.metadata as m; from kit.host.machine import is_emulated; "
    "print(json.dumps({'packages': {d.metadata['Name']: d.version for d in m.distributions()}, "
    "'env': {k: v for k, v in os.environ.items() if k.startswith('MKB_')}, 'emulated': is_emulated()}))"
)


def probe_image(image: str, timeout_s: float = 600.0) -> ImageProbe:
    """Run ``image`` once without network and collect :class:`ImageProbe` (one container: with the vfs
    storage driver every container start copies the whole image).

    Raises:
        ImageError: the container fails outside ``mkb --help`` or its report cannot be parsed.
    """
    script = (
        'echo @@help; mkb --help 2>&1; echo "@@help_exit $?"; '
        f'echo @@python; python -c "{_PROBE_PY}" || exit 3; '
        "echo @@apt; dpkg-query -W -f '${Package} ${Version}\\n' " + " ".join(APT_PACKAGES) + " || exit 4"
    )
    res = run(image, ["-c", script], entrypoint=["sh"], network="none", timeout_s=timeout_s)
    if res.exit_code != 0:
        raise ImageError(f"{image}: probe failed with exit code {res.exit_code}: {res.output[-2000:]}")
    try:
        help_part, rest = res.output.split("@@help\n", 1)[1].split("@@help_exit ", 1)
        help_exit, rest = rest.split("\n", 1)
        py_part, apt_part = rest.split("@@python\n", 1)[1].split("@@apt\n", 1)
        data = json.loads(py_part.strip().splitlines()[-1])
        apt = dict(line.split(" ", 1) for line in apt_part.strip().splitlines())
    except (IndexError, ValueError) as exc:
        raise ImageError(f"{image}: cannot parse the probe output ({exc}): {res.output[-2000:]}") from None
    return ImageProbe(
        help_exit=int(help_exit),
        help_output=help_part,
        packages={canonical_name(k): v for k, v in data["packages"].items()},
        apt=apt,
        env=data["env"],
        emulated=bool(data["emulated"]),
    )


def check_probe(
    probe: ImageProbe, pins: Mapping[str, str], apt_pins: Mapping[str, str] | None = None
) -> list[str]:
    """Problems of a probed image: ``mkb --help`` must exit 0, every pin must be installed at its version.

    Returns a list of messages (empty: the image is good).
    """
    problems = []
    if probe.help_exit != 0 or "usage: mkb" not in probe.help_output:
        problems.append(f"mkb --help exited {probe.help_exit}: {probe.help_output[-500:]}")
    for name, version in pins.items():
        if probe.packages.get(name) != version:
            problems.append(
                f"python {name}: pinned {version}, installed {probe.packages.get(name, 'nothing')}"
            )
    for name, version in (apt_pins or {}).items():
        if probe.apt.get(name) != version:
            problems.append(f"apt {name}: pinned {version}, installed {probe.apt.get(name, 'nothing')}")
    return problems

