"""Grading: submissions in; grades, feedback pages and a summary out (`python -m autograder grade`).
Each notebook is judged in a sandbox that mounts its chapter's package view (autograder.chapter_view).
May import: autograder and third-party packages; never courseware, benchmarks, attention_course (mounted, not imported).
"""
