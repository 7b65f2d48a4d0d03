"""What learners get: released notebooks (English, and Chinese from locale/), reference modules, chapter wheels, the install cell, the message catalogs, the Chinese book.
Run by `python -m courseware release` (make release), `make book` (book/_ext/learner_links.py, `courseware book-zh`), `make translations` and `make install`.
May import: courseware, layout, autograder.course and autograder.books (nbgrader), autograder.chapter_view, autograder.catalogs, attention_course.i18n, third-party packages; nothing else.
"""
