"""The book's figure code, one module per chapter page (`from figures.ch04 import ...`).

It draws on the course package and its solved exercises (`attention_course.reference`);
nothing here is installed for learners or seen by the grader. Importing it in a Jupyter kernel
makes every figure and printed message translatable (:mod:`figures.i18n`).
"""

from figures import i18n  # noqa: F401  (hooks into the kernel that executes a page)
