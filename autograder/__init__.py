"""Grading: submissions in; grades, feedback pages and a summary out (`python -m autograder grade`).
Each notebook is judged in a sandbox that mounts its chapter's package view (autograder.chapter_view).
May import: autograder, third-party packages, attention_course.shortcuts (the sandboxed runner arms the kernel's trip-wires); never courseware, benchmarks, the rest of attention_course (mounted, not imported).
"""
