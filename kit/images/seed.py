"""Seeding a worker's kit cache from its image: the kit image ships the native MNN build and a warm ccache
under its ``MKB_MNN__CACHE_DIR`` (``/opt/mkb-cache``, images/Dockerfile); a container run whose
``mnn.cache_dir`` is that same path and still empty gets the image's copy, so the worker finds the image's
baseline (same tree digest, compiler, CMake arguments and runner sources, hence the same native key,
:func:`kit.mnn.native.native_key`) instead of building MNN again (13+ min on 2 cores).

Paths inside MNN's build trees are absolute (CMake caches them), so the cache is copied only to the path it was
built at; anywhere else the worker builds its own baseline in the container, as without seeding.
"""

from __future__ import annotations

import fcntl
import logging
import tarfile
import tempfile
import time
from pathlib import Path

from kit.images.common import ImageError

log = logging.getLogger("kit")

#: the environment variable of the image that names where its cache is (images/Dockerfile)
CACHE_ENV = "MKB_MNN__CACHE_DIR"


def image_cache_dir(client, image_id: str) -> Path | None:
    """The cache path the image was built with (its ``MKB_MNN__CACHE_DIR``), None when it names none."""
    env = client.images.get(image_id).attrs.get("Config", {}).get("Env") or []
    for item in env:
        key, _, value = item.partition("=")
        if key == CACHE_ENV and value:
            return Path(value)
    return None


def seed_cache(client, image_id: str, cache_dir: Path) -> float | None:
    """Copy the image's cache into ``cache_dir`` when ``cache_dir`` is the image's own cache path and holds no
    native baseline yet; returns the seconds it took, None when nothing was copied (another path, a cache in
    use already, or an image without a cache: ``SKIP_MNN_BUILD=1``).

    Raises:
        ImageError: the daemon refused the copy, or the archive holds a member outside the cache."""
    want = image_cache_dir(client, image_id)
    cache_dir = Path(cache_dir)
    if want is None or want != cache_dir or (cache_dir / "native").is_dir():
        return None
    # one worker copies, the others wait and find the baseline there; the lock beside the cache, whose parent
    # (~/.cache on a fresh HOME) may not exist yet
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(cache_dir.with_name(cache_dir.name + ".seed.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (cache_dir / "native").is_dir():
            return None
        return _copy(client, image_id, want, cache_dir)


def _copy(client, image_id: str, want: Path, cache_dir: Path) -> float | None:
    t0 = time.monotonic()
    ct = client.api.create_container(image_id, command=["true"], entrypoint=[], network_disabled=True)
    try:
        try:
            chunks, stat = client.api.get_archive(ct["Id"], str(want))
        except Exception as exc:  # noqa: BLE001 - docker.errors.NotFound and API errors alike
            if "No such container:path" in str(exc) or "Could not find the file" in str(exc):
                return None  # the image has no cache there
            raise ImageError(f"copying {want} out of image {image_id}: {exc}") from None
        if not stat.get("name"):
            return None
        # spooled to disk first: the build trees hold hard links, which a tar stream cannot extract (the link's
        # target is read again, a seek back)
        with tempfile.TemporaryFile(dir=cache_dir.parent) as spool:
            for chunk in chunks:
                spool.write(chunk)
            spool.seek(0)
            # the archive's top folder is the cache folder's own name; "tar" keeps modes and refuses members that
            # leave the destination or are absolute
            with tarfile.open(fileobj=spool, mode="r:") as tf:
                try:
                    tf.extractall(cache_dir.parent, filter="tar")
                except tarfile.FilterError as exc:
                    raise ImageError(f"image {image_id}: its cache archive holds {exc}") from None
    finally:
        client.api.remove_container(ct["Id"], force=True)
    took = time.monotonic() - t0
    log.info("kit cache %s seeded from image %s in %.1f s", cache_dir, image_id[:19], took)
    return took
