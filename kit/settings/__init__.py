"""Config sections (:mod:`kit.settings.sections`) and what they share (:mod:`kit.settings.base`)."""
