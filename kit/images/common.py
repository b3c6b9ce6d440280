"""What every part of :mod:`kit.images` shares: where the images' files are, the architectures, the error."""

from __future__ import annotations

from pathlib import Path

#: the repository root: this file is kit/images/common.py
REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES_DIR = REPO_ROOT / "images"
LOCK_PATH = IMAGES_DIR / "lock.toml"
REQUIREMENTS_PATH = IMAGES_DIR / "requirements.lock"
#: the build context's layout (build_context): the kit's sources under kit-src/, the MNN tree under mnn/
DOCKERFILE = "kit-src/images/Dockerfile"
ARCHES = ("amd64", "arm64")
#: what apt installs in the image (pinned per arch by the lock's ``apt.<arch>`` table)
#: rsync and openssh-client: Ray's cluster launcher syncs files into a node's container with them (cluster/)
APT_PACKAGES = ("python3", "python3-venv", "g++", "cmake", "ninja-build", "ccache", "ca-certificates", "rsync",
                "openssh-client")


class ImageError(Exception):
    """A lock file is invalid, a build fails, or the daemon is unreachable; the message says which."""
