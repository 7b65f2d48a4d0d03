"""What learners get: notebooks released from solutions/ (and translated by locale/), reference modules, chapter wheels,
the install cell, the Chinese book. Run by `python -m courseware release` (make release), by `make book`
(book/_ext/learner_links.py, `courseware book-zh`) and by `make translations`.
May import: courseware, autograder.course and autograder.chapter_view, third-party packages; nothing else.
"""
