"""Grading: submissions in; grades, feedback pages and a summary out (`python -m autograder grade`).
Each notebook is judged in a sandbox that mounts its chapter's package view (autograder.chapter_view).
May import: autograder, layout, third-party packages, attention_course.shortcuts (the sandboxed runner arms the kernel's trip-wires) and attention_course.i18n (messages in the submission's language); never courseware, benchmarks, the rest of attention_course (mounted, not imported).
"""

import sys

# jsonschema (under nbformat and nbgrader) imports rfc3987_syntax when it is installed, which
# compiles a Lark grammar at import: a CPU-second in each grader process (the coordinator and
# its helpers), for the "iri" string formats that no notebook schema uses. Without it, jsonschema
# leaves those two formats unchecked, as it does wherever the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)
