"""The paper's own 190 task files, pinned (``official.toml``: upstream repository, commit, folder and the
sha256 of each file; never their content).

:func:`official_sources` checks a local checkout of that folder against the pins (a missing, extra or
changed file is an error naming it) and lists the files as sources with their upstream address;
:func:`download` fetches the pinned commit's archive from GitHub (where the network allows), extracts only
the pinned folder into a cache folder and checks it the same way.  :func:`select` picks some of the pinned
files (by name, or a stratified handful per category); then only those are checked and imported.
"""

from __future__ import annotations

import difflib
import hashlib
import io
import shutil
import tarfile
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kit.suite.importer.assemble import Source, category_of

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


def select(pins: Pins, only: list[str] | None = None, per_category: int | None = None) -> list[str]:
    """The pinned files (paths under ``pins.folder``, sorted) named by ``only`` (``Binary/Mul.py``; the ``.py``
    may be left off) plus ``per_category`` files of each category: spread evenly over the category's files in
    name order (file ``floor((i + 1/2) * n / k)`` of ``n`` for i < k; all of them when ``k >= n``), so one per
    category is the middle file.  Both None: every pinned file.

    Raises:
        ValueError: a name that is not a pinned file (named, with the closest pinned names), or ``per_category < 1``.
    """
    if only is None and per_category is None:
        return sorted(pins.files)
    chosen: set[str] = set()
    unknown = []
    for name in only or ():
        rel = name if name.endswith(".py") else name + ".py"
        if rel in pins.files:
            chosen.add(rel)
        else:
            near = difflib.get_close_matches(rel, list(pins.files), n=3)
            unknown.append(f"{name!r}" + (f" (did you mean {', '.join(near)}?)" if near else ""))
    if unknown:
        raise ValueError(f"not a file of the pinned set {pins.repo}@{pins.commit[:8]}:{pins.folder}: "
                         + "; ".join(unknown))
    if per_category is not None:
        if per_category < 1:
            raise ValueError(f"--per-category {per_category}: give 1 or more")
        by_cat: dict[str, list[str]] = {}
        for rel in sorted(pins.files):
            by_cat.setdefault(rel.split("/")[0], []).append(rel)
        for files in by_cat.values():
            n, k = len(files), min(per_category, len(files))
            chosen.update(files[int((i + 0.5) * n / k)] for i in range(k))
    return sorted(chosen)


def verify(checkout: Path, pins: Pins | None = None, only: list[str] | None = None) -> list[str]:
    """Problems of ``checkout`` (the folder holding ``<Category>/<Op>.py``) against the pins; empty when equal.
    ``only``: check just these pinned files (missing or changed); other files of the folder are not looked at."""
    pins = pins or load_pins()
    if only is not None:
        found = {rel: checkout / rel for rel in only if (checkout / rel).is_file()}
        problems = [f"{rel}: not in the pinned set" if rel not in pins.files else
                    f"{rel}: missing (pinned sha256 {pins.files[rel][:12]}...)" for rel in sorted(only)
                    if rel not in found or rel not in pins.files]
    else:
        found = {f.relative_to(checkout).as_posix(): f for f in checkout.glob("*/*.py")}
        problems = [f"{rel}: missing (pinned sha256 {h[:12]}...)" for rel, h in sorted(pins.files.items())
                    if rel not in found]
        problems += [f"{rel}: not in the pinned set" for rel in sorted(set(found) - set(pins.files))]
    for rel in sorted(set(found) & set(pins.files)):
        digest = hashlib.sha256(found[rel].read_bytes()).hexdigest()
        if digest != pins.files[rel]:
            problems.append(f"{rel}: sha256 {digest[:12]}... differs from the pinned {pins.files[rel][:12]}...")
    return problems


def official_sources(checkout: Path, pins: Pins | None = None, only: list[str] | None = None) -> list[Source]:
    """The pinned files of ``checkout`` as sources (category = folder name, upstream address set); ``only``:
    just these pinned files (:func:`select`), each still checked against its pinned sha256.

    Raises:
        PinError: the checkout differs from the pins (every difference listed).
    """
    pins = pins or load_pins()
    problems = verify(checkout, pins, only)
    if problems:
        raise PinError(f"{checkout}: differs from {pins.repo}@{pins.commit}:{pins.folder} "
                       f"({len(problems)} file(s)): " + "; ".join(problems[:20]))
    return [Source(checkout / rel, rel, category_of(rel.split("/")[0]), pins.upstream(rel))
            for rel in (sorted(pins.files) if only is None else sorted(only))]


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
