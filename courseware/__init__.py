"""What learners get: notebooks released from solutions/ (and translated by locale/), reference modules, chapter wheels, the install cell, the message catalogs.
Run by `python -m courseware release` (make release), `make translations` and at the end of `make book` (book/_ext/learner_links.py).
May import: courseware, autograder.course, autograder.chapter_view, autograder.catalogs, attention_course.i18n, third-party packages; nothing else.
"""
