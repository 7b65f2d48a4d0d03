"""What learners get: notebooks released from solutions/ (and translated by locale/), reference modules, chapter wheels, the install cell.
Run by `python -m courseware release` (make release) and at the end of `make book` (book/_ext/learner_links.py).
May import: courseware, autograder.course and autograder.chapter_view, third-party packages; nothing else.
"""
