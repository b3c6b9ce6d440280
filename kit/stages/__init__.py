"""Evaluation stages: build, verify, time.  Each returns its own result type (:mod:`kit.results.outcomes`) or raises
:class:`kit.results.outcomes.StageFailure` with the status the failure stands for; only ``kit.job.pipeline`` turns it
(and every other exception) into a record's status.  A stage receives the options it needs, never the
whole configuration."""
