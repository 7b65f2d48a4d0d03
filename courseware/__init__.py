"""What learners get: released notebooks (English, and Chinese from locale/), reference modules, chapter wheels, the install cell, the Chinese book.
Run by `python -m courseware release` (make release), `make book` (book/_ext/learner_links.py, `courseware book-zh`) and `make translations`.
May import: courseware, autograder.course and autograder.chapter_view, third-party packages; nothing else.
"""
