"""Artifact bundles: one archive of a run that a reviewer checks (``mkb validate``) and re-runs
(``mkb reproduce``).  Modules, each importing only those before it: :mod:`~kit.bundle.manifest` (the layout
and ``manifest.json``), :mod:`~kit.bundle.archive` (tar.gz / zip, safe extraction), :mod:`~kit.bundle.configs`
(the bundled config read back), :mod:`~kit.bundle.scores` (``metrics.json``), :mod:`~kit.bundle.pack`
(``mkb bundle``), :mod:`~kit.bundle.validate` (``mkb validate``), :mod:`~kit.bundle.compare` (a reproduction
against the bundle, per candidate, task and metric), :mod:`~kit.bundle.verdict` (its tables) and
:mod:`~kit.bundle.reproduce` (``mkb reproduce``).
"""
