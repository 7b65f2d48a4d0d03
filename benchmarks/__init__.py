"""Developer tools that measure: `make bench` (transformer.py, generation.py), `make bench-grade` (grading.py).
Outside the package learners install; the figures and how to reproduce them are in docs/benchmarks.md.
May import: layout, attention_course, autograder, third-party packages; nothing imports benchmarks.
"""
