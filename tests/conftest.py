import os
import sys
from pathlib import Path

# Every process of the suite (the workers, the kernels, the book's build, the grader's) computes on
# one thread: pytest-xdist runs a worker per core, and a PyTorch or OpenBLAS pool of a thread per
# core in each of them, idle threads spinning while the other worker holds the core, cost the
# solution of chapter 9 56 CPU-seconds instead of 10 beside a busy core. Set before anything
# imports NumPy or PyTorch; an explicit value in the environment wins.
from autograder.limits import THREAD_VARIABLES  # imports neither NumPy nor PyTorch

for _variable in THREAD_VARIABLES:
    os.environ.setdefault(_variable, "1")

# the helpers of the test suite (notebook_tools) are imported by name
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: Tests that take tens of seconds each, outside the xdist groups: they run first, so that the
#: end of `make test` is made of short tests and neither worker waits long for the other
#: (docs/maintainers.md: how the suite is scheduled). A node id starts with one of these.
LONG_FIRST = (
    "tests/test_solutions.py::test_solution_notebook_passes_all_tests",
    "tests/test_mutants.py::test_correct_variants_pass_every_test",
    "tests/test_benchmark.py::test_quick",
    "tests/test_exchange.py",
    "tests/test_release.py",
    "tests/test_validate_in_lab.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {prefix: n for n, prefix in enumerate(LONG_FIRST)}

    def place(item):
        n = next((rank[p] for p in LONG_FIRST if item.nodeid.startswith(p)), len(LONG_FIRST))
        return n

    items.sort(key=place)  # stable: the order within each rank is the collection's
