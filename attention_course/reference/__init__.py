"""The course's solved exercises, one module per chapter, generated from solutions/
by `make release` (courseware.reference_modules). Chapter N's package holds those of the
chapters before N only."""
