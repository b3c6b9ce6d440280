"""The kit's pinned Docker images (``images/``): lock file, build, run, and the emulation check.

    python -m kit.images lock                       write images/requirements.lock from this venv
    python -m kit.images base --arch amd64          record the local base image (images/make-base.sh) in the lock
    python -m kit.images build --arch amd64 [--mnn-dir DIR] [--skip-mnn-build]
    python -m kit.images apt --arch amd64           record the apt versions installed in the built image
    python -m kit.images check --arch amd64         `mkb --help` (network none) and every pin installed
    python -m kit.images context ctx.tar [--mnn-dir DIR]   the build context, for a plain docker build

``nox -s images -- ...`` runs the same commands.  The daemon comes from ``DOCKER_HOST`` (or the default
socket).  Building uses the classic builder through the docker SDK, so ``TARGETARCH`` is passed explicitly;
an arm64 image on an x86 host needs qemu binfmt handlers (see images/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kit.host.machine import normalize_arch
from kit.images.common import ARCHES, DOCKERFILE, LOCK_PATH, ImageError
from kit.images.docker import KitImageOptions, build_context, build_kit_image, image_info, run
from kit.images.lock import BaseSection, LocalBase, Lock, MnnPin, PythonPin, load_lock, write_lock
from kit.images.probe import check_probe, probe_image
from kit.images.requirements import freeze_requirements, read_requirements, write_requirements


def _cmd_lock(args: argparse.Namespace) -> int:
    pins = freeze_requirements()
    if Path(args.lock).exists():
        lock = load_lock(args.lock, check_requirements=False)
    else:
        from kit.settings.config import MNN_TARBALL_URL, MNN_TREE_SHA256, MNN_VERSION

        lock = Lock(
            base=BaseSection(),
            mnn=MnnPin(version=MNN_VERSION, tarball_url=MNN_TARBALL_URL, tree_sha256=MNN_TREE_SHA256),
            python=PythonPin(requirements_sha256="0" * 64),
        )
    req = Path(args.lock).parent / lock.python.requirements
    sha = write_requirements(pins, req)
    write_lock(
        lock.model_copy(update={"python": lock.python.model_copy(update={"requirements_sha256": sha})}),
        args.lock,
    )
    print(f"{req}: {len(pins)} pins (sha256 {sha})")
    return 0


def _cmd_base(args: argparse.Namespace) -> int:
    lock = load_lock(args.lock)
    info = image_info(args.image)
    if normalize_arch(info["architecture"]) != args.arch:
        raise ImageError(f"{args.image} is {info['architecture']}, not {args.arch}")
    deb = run(args.image, ["/etc/debian_version"], entrypoint=["cat"], timeout_s=60).output.strip()
    local = dict(lock.base.local)
    local[args.arch] = LocalBase(
        image=args.image, id=info["id"], debian_version=deb, made_by=f"images/make-base.sh {args.arch}"
    )
    write_lock(lock.model_copy(update={"base": lock.base.model_copy(update={"local": local})}), args.lock)
    print(f"base {args.arch}: {args.image} {info['id']} (Debian {deb})")
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    options = KitImageOptions(tag=args.tag, mnn_dir=args.mnn_dir, skip_mnn_build=args.skip_mnn_build, base=args.base,
                              jobs=args.jobs, ca_cert=args.ca_cert)
    res = build_kit_image(args.arch, options, args.lock, echo=not args.quiet)
    print(f"built {res.tag} {res.image_id}")
    return 0


def _cmd_context(args: argparse.Namespace) -> int:
    build_context(args.out, args.mnn_dir)
    print(
        f"{args.out}: docker build -f {DOCKERFILE} --build-arg BASE_IMAGE=... --build-arg TARGETARCH=... - < {args.out}"
    )
    return 0


def _cmd_apt(args: argparse.Namespace) -> int:
    lock = load_lock(args.lock)
    tag = args.image or lock.image[args.arch].tag
    versions = probe_image(tag).apt
    apt = dict(lock.apt)
    apt[args.arch] = versions
    write_lock(lock.model_copy(update={"apt": apt}), args.lock)
    print(json.dumps(versions, indent=1))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    lock = load_lock(args.lock)
    tag = args.image or lock.image[args.arch].tag
    probe = probe_image(tag)
    pins = read_requirements(Path(args.lock).parent / lock.python.requirements)
    problems = check_probe(probe, pins, lock.apt.get(args.arch))
    for p in problems:
        print("PROBLEM:", p)
    verdict = "ok" if not problems else f"{len(problems)} problems"
    print(
        f"{tag}: {verdict}; {len(pins)} Python pins, {len(lock.apt.get(args.arch, {}))} apt pins checked; emulated: {probe.emulated}"
    )
    return 1 if problems else 0


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m kit.images`` parser: ``--lock`` and one subcommand per :data:`COMMANDS` entry."""
    ap = argparse.ArgumentParser(
        prog="python -m kit.images", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--lock", type=Path, default=LOCK_PATH)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lock", help="write images/requirements.lock from this venv")
    p = sub.add_parser("base", help="record a local base image in the lock")
    p.add_argument("--arch", choices=ARCHES, required=True)
    p.add_argument("--image", default=None, help="default: mkb-base:bookworm-<arch>")
    _add_build_parser(sub)
    p = sub.add_parser("context", help="write the build context tar (for a plain docker build)")
    p.add_argument("out", type=Path)
    p.add_argument("--mnn-dir", type=Path, default=None)
    for name in ("apt", "check"):
        p = sub.add_parser(
            name, help="record apt versions of the built image" if name == "apt" else "check a built image"
        )
        p.add_argument("--arch", choices=ARCHES, default="amd64")
        p.add_argument("--image", default=None, help="default: the lock's image.<arch>.tag")
    return ap


def _add_build_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build the kit image")
    p.add_argument("--arch", choices=ARCHES, default="amd64")
    p.add_argument("--tag", default=None)
    p.add_argument(
        "--mnn-dir", type=Path, default=None, help="MNN tree to copy in (default: download the tarball)"
    )
    p.add_argument(
        "--skip-mnn-build", action="store_true", help="leave out the native MNN build (SKIP_MNN_BUILD=1)"
    )
    p.add_argument("--base", default=None, help="base image (default: from the lock)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--quiet", action="store_true")
    p.add_argument(
        "--ca-cert", type=Path, default=None, help="extra CA certificates (PEM) trusted during the build"
    )


#: subcommand -> its function (``args`` -> exit code)
COMMANDS = {
    "lock": _cmd_lock,
    "base": _cmd_base,
    "build": _cmd_build,
    "context": _cmd_context,
    "apt": _cmd_apt,
    "check": _cmd_check,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; exit code 0 (done), 1 (``check`` found problems), 2 (an :class:`ImageError`,
    printed to stderr)."""
    args = build_parser().parse_args(argv)
    if args.cmd == "base" and args.image is None:
        args.image = f"mkb-base:bookworm-{args.arch}"
    try:
        return COMMANDS[args.cmd](args)
    except ImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
