"""What every config section shares: the frozen, extra-forbidding model base, the error of a cross-field check,
and the pinned MNN constants the defaults come from.  The sections are in :mod:`kit.settings.sections`; loading
(TOML, environment, CLI) is :mod:`kit.settings.config`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError

#: MNN release the paper pins (MobileKernelBench §5) and its source tarball.
MNN_VERSION = "3.2.2"
MNN_TARBALL_URL = "https://github.com/alibaba/MNN/archive/refs/tags/3.2.2.tar.gz"
#: Content digest of the unpacked 3.2.2 tree (``kit.mnn.source.tree_digest``: sha256 over sorted
#: ``path\0sha256(file)`` lines, ``apps/`` excluded).  A downloaded tarball or a given ``source_dir`` is
#: checked against it; GitHub's tarball bytes are not byte-stable, the tree content is.
MNN_TREE_SHA256 = "89ff82664efb30d27bfa9d388bfd130a1a783a414014766e51e2519a074874e5"

DEFAULT_CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "mkb"



#: ``ctx`` key of a cross-field check's error: the fields it involves (dotted, relative to the model that raised
#: it, comma-separated), so :func:`load_config` names where each of them came from
FIELDS_CTX = "mkb_fields"


def fields_error(fields: Sequence[str], message: str) -> PydanticCustomError:
    """The error of a check over several fields (raised from a ``model_validator``)."""
    return PydanticCustomError("fields", message, {FIELDS_CTX: ",".join(fields)})



class StrictModel(BaseModel):
    """A model of a file the kit reads (a config section, ``task.toml``, a bundle's manifest, the images' lock):
    unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Section(StrictModel):
    """Base of every config section."""
