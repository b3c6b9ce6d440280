"""The paper's own 190 task files, pinned (``official.toml``: upstream repository, commit, folder and the
sha256 of each file; never their content).

:func:`official_sources` checks a local checkout of that folder against the pins (a missing, extra or
changed file is an error naming it) and lists the files as sources with their upstream address;
:func:`download` fetches the pinned commit's archive from GitHub (where the network allows), extracts only
the pinned folder into a cache folder and checks it the same way.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kit.importer.build import Source, category_of

PINS_TOML = Path(__file__).with_name("official.toml")


class PinError(Exception):
    """A checkout or download does not match the pinned files (the message names each file)."""


@dataclass(frozen=True)
class Pins:
    repo: str
    commit: str
    folder: str
    id_prefix: str
    #: path under ``folder`` -> sha256
    files: dict[str, str]

    def upstream(self, rel: str) -> str:
        return f"{self.repo}@{self.commit}:{self.folder}/{rel}"


def load_pins(path: Path = PINS_TOML) -> Pins:
    d = tomllib.loads(path.read_text(encoding="utf-8"))
    return Pins(d["repo"], d["commit"], d["folder"], d["id_prefix"], dict(d["files"]))


def verify(checkout: Path, pins: Pins | None = None) -> list[str]:
    """Problems of ``checkout`` (the folder holding ``<Category>/<Op>.py``) against the pins; empty when equal."""
    pins = pins or load_pins()
    found = {f.relative_to(checkout).as_posix(): f for f in checkout.glob("*/*.py")}
    problems = [f"{rel}: missing (pinned sha256 {h[:12]}...)" for rel, h in sorted(pins.files.items())
                if rel not in found]
    problems += [f"{rel}: not in the pinned set" for rel in sorted(set(found) - set(pins.files))]
    for rel in sorted(set(found) & set(pins.files)):
        digest = hashlib.sha256(found[rel].read_bytes()).hexdigest()
        if digest != pins.files[rel]:
            problems.append(f"{rel}: sha256 {digest[:12]}... differs from the pinned {pins.files[rel][:12]}...")
    return problems


def official_sources(checkout: Path, pins: Pins | None = None) -> list[Source]:
    """The pinned files of ``checkout`` as sources (category = folder name, upstream address set).

    Raises:
        PinError: the checkout differs from the pins (every difference listed).
    """
    pins = pins or load_pins()
    problems = verify(checkout, pins)
    if problems:
        raise PinError(f"{checkout}: differs from {pins.repo}@{pins.commit}:{pins.folder} "
                       f"({len(problems)} file(s)): " + "; ".join(problems[:20]))
    return [Source(checkout / rel, rel, category_of(rel.split("/")[0]), pins.upstream(rel))
            for rel in sorted(pins.files)]


def download(cache: Path, pins: Pins | None = None, timeout_s: float = 120.0) -> Path:
    """The pinned folder under ``cache`` (downloaded from GitHub's archive of the commit unless already there
    and matching); returns the folder.  Raises PinError on a mismatch, OSError when the network fails."""
    pins = pins or load_pins()
    dest = cache / f"{pins.repo.replace('/', '+')}@{pins.commit}" / pins.folder
    if dest.is_dir() and not verify(dest, pins):
        return dest
    url = f"https://codeload.github.com/{pins.repo}/tar.gz/{pins.commit}"
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - a fixed https address
        data = resp.read()
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            parts = m.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith(pins.folder + "/") and m.isfile():
                rel = parts[1][len(pins.folder) + 1:]
                if rel in pins.files:
                    out = tmp / rel
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(tar.extractfile(m).read())
    problems = verify(tmp, pins)
    if problems:
        raise PinError(f"{url}: the archive differs from the pins: " + "; ".join(problems[:20]))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest
