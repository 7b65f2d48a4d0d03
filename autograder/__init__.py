"""The course's grading pipeline, a thin layer over nbgrader.

``python -m autograder release`` regenerates ``notebooks/`` from ``solutions/``;
``python -m autograder grade SUBMISSIONS --out OUT`` grades a folder of submissions.
"""
