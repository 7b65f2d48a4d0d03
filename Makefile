# Every target installs what it needs first, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)

SUBMISSIONS ?=
OUT ?= out
DB ?=
SCHEDULER ?=
ARCHIVE ?=
# make bench-grade: students per assignment (the size knob) and the assignments (default: those that train no model)
STUDENTS ?= 6
ASSIGNMENTS ?=

.PHONY: install install-sandbox install-book-font system rehearsal book translations test test-fast release grade clean bench-grade bench-coordinator bench bench-similarity train-budget validate-slow visible-mutants figures-catalog

# The Python environment: pinned versions from requirements.txt, the course package editable.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

# The clone's own package speaks every language of locale/: its messages.po compiled into
# attention_course/locale/ (git-ignored) whenever the catalog changes. The chapters' wheels and
# the grader compile their own from the same .po files (autograder/catalogs.py).
PACKAGE_CATALOGS := $(patsubst locale/%/LC_MESSAGES/messages.po,attention_course/locale/%/LC_MESSAGES/messages.mo,\
	$(wildcard locale/*/LC_MESSAGES/messages.po))
$(PACKAGE_CATALOGS): attention_course/locale/%/LC_MESSAGES/messages.mo: locale/%/LC_MESSAGES/messages.po $(STAMP)
	$(BIN)/python -m courseware catalogs

install: $(STAMP) $(PACKAGE_CATALOGS)

# Debian packages: which command needs which, the one table of them (README, set-up). Each
# target installs those that dpkg does not list as installed and that are no command on PATH (a
# machine's own node and npm count), and nothing else (needs root or sudo).
#   make book    the CJK font of the Chinese edition's figures
#   make grade   bubblewrap, the grader's sandbox
#   make test    all of them, with PostgreSQL (the shared gradebook's test), Chromium (the pages in a
#                browser) and npm (axe-core, the accessibility rules the browser runs)
APT_BOOK  := fonts-wqy-microhei
APT_GRADE := bubblewrap
APT_TEST  := $(APT_BOOK) $(APT_GRADE) postgresql chromium npm
APT_INSTALL = SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends
# $(call apt_ensure,PACKAGES)
apt_ensure = @missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || \
	  command -v $$p >/dev/null || echo $$p; done); \
	[ -z "$$missing" ] || { echo "installing Debian packages:" $$missing; $(APT_INSTALL) $$missing >/dev/null; }

install-book-font:
	$(call apt_ensure,$(APT_BOOK))

install-sandbox:
	$(call apt_ensure,$(APT_GRADE))

system:
	$(call apt_ensure,$(APT_TEST))

# Where matplotlib and IPython keep their settings and caches: in the clone, not under HOME, so that
# nothing outside the repository (a font list written before a font was installed, a matplotlibrc,
# an IPython start-up file) changes what the book draws or the tests see.
export MPLCONFIGDIR := $(CURDIR)/_build/.matplotlib
export IPYTHONDIR := $(CURDIR)/_build/.ipython
# the .venv's Jupyter kernel and settings before any under HOME (jupyter_core's default in a venv)
export JUPYTER_PREFER_ENV_PATH := 1

# The pages' executions are cached by the code of the page alone (jupyter-cache), so a change of the
# code they import (the course package, the figure code) or of the pinned packages empties the cache,
# and Sphinx's environments of both editions (.doctrees, zh_CN/), which keep an unchanged page as it
# was read, outputs included: without them every page is read and executed again.
BOOK_CODE := $(shell find attention_course book/figures -name '*.py' 2>/dev/null) requirements.txt
_build/.jupyter_cache.code: $(BOOK_CODE)
	rm -rf _build/.jupyter_cache _build/.doctrees _build/zh_CN
	mkdir -p _build && touch $@

# The HTML book in _build/html, warnings as errors, with each chapter's package (a wheel)
# in _build/html/_static/wheels/ (book/_ext/learner_links.py); then the Chinese edition in
# _build/html/zh/, from the catalogs in locale/zh_CN/, executing nothing: the pages' outputs come
# from the English build's cache (courseware/book.py). A training run that two pages show is
# made once and kept in _build/.runs (book/figures/training.py: kept_run).
book: install install-book-font _build/.jupyter_cache.code
	rm -rf _build/html  # a stale page or numbering survives an incremental build
	COURSE_BOOK_RUNS=$(CURDIR)/_build/.runs $(BIN)/jupyter-book build . -W --keep-going
	$(BIN)/python -m courseware book-zh -W --keep-going

# After an English edit, every catalog under locale/zh_CN/ brought up to date with it: new English
# gets an empty entry, changed English a fuzzy one (its old translation kept), removed English an
# obsolete one. The book's: the templates from Sphinx's gettext builder (nothing executed), then
# sphinx-intl; the exercises': Babel, from solutions/ (its line per catalog says what is left); the
# messages' (messages.po, autograder.po) and the figures' (figures.po): Babel.
# tests/test_translations.py lists what is left to translate (docs/translating.md).
translations: $(STAMP) figures-catalog
	$(BIN)/python -m courseware pot _build/gettext
	$(BIN)/sphinx-intl update -p _build/gettext -l zh_CN -d locale -w 0
	$(BIN)/python -m courseware translations update
	$(BIN)/python -m courseware messages

# The words of the book's figures and printouts (what book/figures passes to figures.i18n._ and
# N_), extracted by Babel into _build/figures.pot and merged into the Chinese catalog
# locale/zh_CN/LC_MESSAGES/figures.po: a new message gets an empty entry, a changed one a fuzzy
# guess, a removed one goes. Translate those (docs/translating.md); the English book must then be
# executed again only if a figure's code changed, never for a translation.
FIGURES_POT := _build/figures.pot
PYBABEL_EXTRACT = $(BIN)/pybabel extract --no-default-keywords -k _ -k N_ --add-location=file -c TRANSLATORS: \
	--project="Attention, from kernels to Transformers (figures)" --copyright-holder="The Attention course team"
figures-catalog: $(STAMP)
	mkdir -p _build
	$(PYBABEL_EXTRACT) -o $(FIGURES_POT) book/figures
	$(BIN)/pybabel update -i $(FIGURES_POT) -d locale -l zh_CN -D figures --ignore-obsolete --ignore-pot-creation-date --width=100

# axe-core, the accessibility rules the browser tests run on every page (tests/a11y.py), from the
# npm registry at the version package-lock.json pins.
AXE := node_modules/axe-core/axe.min.js
$(AXE): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Every test: unit tests, notebooks, mutants, grading end to end, the book.
test: install system $(AXE)
	BOOK_REQUIRE_BROWSER=1 $(BIN)/pytest -n $(JOBS) --dist loadgroup --durations=25

# The quick tests only (no notebook runs, no book build).
test-fast: install
	$(BIN)/pytest -m "not slow"

# notebooks/ regenerated from solutions/ by nbgrader generate_assignment (each with a first
# cell that installs its chapter's package), notebooks/zh_CN/ the same from solutions/ translated by
# the exercises' catalogs (where a catalog is complete), and each chapter's package as a wheel in
# _build/wheels/ (what a learner downloads; `make book` publishes them in _static/wheels/).
release: install
	$(BIN)/python -m courseware release
	$(BIN)/python -m courseware wheels _build/wheels

# make grade SUBMISSIONS=<dir> OUT=<dir> [DB=<SQLAlchemy URL>] [SCHEDULER=tcp://HOST:PORT] [ARCHIVE=<dir>]
# (ARCHIVE: earlier years' submissions, which the similarity step compares this batch with)
grade: install install-sandbox
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=<dir> OUT=<dir> [DB=<url>] [SCHEDULER=tcp://HOST:PORT] [ARCHIVE=<dir>]" >&2; exit 2; }
	$(BIN)/python -m autograder grade "$(SUBMISSIONS)" --out "$(OUT)" $(if $(DB),--db "$(DB)") $(if $(SCHEDULER),--scheduler "$(SCHEDULER)") $(if $(ARCHIVE),--archive "$(ARCHIVE)")

clean:
	rm -rf _build $(OUT) .pytest_cache node_modules

# Grading speed on a generated batch (STUDENTS per assignment; ASSIGNMENTS="all" or names):
# ours with 1 and 2 workers against plain `nbgrader autograde`, where the time goes per stage;
# fails if any two runs disagree on a score. Last line: the speed-up and the ratio to nbgrader.
bench-grade: $(STAMP) install-sandbox
	$(BIN)/python -m benchmarks.grading --students $(STUDENTS) $(if $(ASSIGNMENTS),--assignments $(ASSIGNMENTS))

# The similarity step (autograder/similarity.py) on a class built from the course's correct variants
# with planted disguised copies, in three chapters: each copy's rank, the honest pairs over the
# threshold per 100 students; then its time for 100, 500 and 2,000 students of one assignment.
bench-similarity: $(STAMP)
	$(BIN)/python -m benchmarks.similarity

# The coordinator alone (no judging: real judge results recorded once, then replayed) on a
# batch of REPLAY submissions, with a SQLite gradebook and then on a PostgreSQL server
# started for the run: wall and CPU seconds per submission, per stage.
REPLAY ?= 10000
bench-coordinator: $(STAMP) system
	$(BIN)/python -m benchmarks.coordinator --submissions $(REPLAY) --postgres --sqlite-too

# The course's Transformer against torch.nn.Transformer configured the same, on the same
# batches: ms per training step, tokens/s, peak memory, seconds to 95 % held-out exact
# match; on the CPU (one thread) and on CUDA when present; then chapter 8's GPT generating with
# and without its key-value cache, beside a twin of PyTorch's layers (its last line: the step-time
# ratio). Then chapter 9: peak memory and time of tiled attention against the plain formula and
# PyTorch's flash and math kernels for T up to 8k (and on CUDA when present), and chapter 8's GPT
# with 4, 2 and 1 key-value heads: cache bytes per token and held-out exact match over 3 seeds.
# Then chapter 10: the induction model over 5 seeds (training time, the phase change's step, the two
# heads and their ablation) and its generation for 50 training lengths with and without chapter 9's window.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.transformer
	$(BIN)/python -m benchmarks.attention_at_scale
	$(BIN)/python -m benchmarks.what_attention_learns

# The chapters' graded trainings: the reference solution trained from its recipe
# (attention_course/recipes.py) on one CPU thread for seeds 0, 1, 2: CPU seconds and the
# held-out score against the bar. Last line: whether all fit the budget at least 3 points above
# their bars. ORDERS=all also draws the weights in the other orders a correct constructor may
# use (benchmarks/training_budget.py: ORDERS), for the spread table of docs/benchmarks.md.
ORDERS ?= solution
train-budget: $(STAMP)
	$(BIN)/python -m benchmarks.training_budget --orders $(ORDERS)

# nbgrader validate (its defaults: 30 s per cell) on every chapter's released notebook with the
# answers filled in, on one thread and half a CPU core (a cgroup; needs root): each chapter's
# verdict and slowest cell. Takes minutes; not part of make test.
validate-slow: $(STAMP)
	$(BIN)/python -m benchmarks.validate_slow

# Which wrong variants of tests/mutants/ pass every VISIBLE test (the released notebook's, in one
# kernel), per chapter: the plausible mistakes a learner is told nothing about. Minutes; not part of
# make test. CHAPTERS=ch03 for some chapters; TRAIN=1 runs the training cells for the survivors too.
visible-mutants: $(STAMP)
	$(BIN)/python tests/visible_mutants.py $(if $(CHAPTERS),--chapters $(CHAPTERS)) $(if $(TRAIN),--train)

# The cold-start rehearsal (not part of make test): the README's commands, make book then make test,
# and in a second copy make test then make book, each on a throwaway copy of this machine (an overlay
# of /) with the Debian packages of APT_TEST purged, HOME's caches gone and a fresh clone of COMMIT;
# prints each command's exit status and minutes (docs/maintainers.md). Root on Linux; no .venv needed.
COMMIT ?= HEAD
rehearsal:
	$(PYTHON) -m benchmarks.rehearsal --commit $(COMMIT) $(foreach o,$(ORDER),--order $(o))

# A GPU run of the course in one command (docs/benchmarks.md, "On a GPU"): the training chapters
# trained on the device against their bars, every chapter's tests (hidden ones too) against the
# solutions, the solutions and the blank notebooks graded in the sandbox, make bench's CUDA columns
# and chapter 9's gpu_table; within 8 minutes; its last lines say which steps passed.
# COURSE_DEVICE=cpu is the dry run (the same steps on the CPU). On the device machine, which has
# PyTorch but no Jupyter stack, bubblewrap or registry: `make gpu-bundle` here, carry .gpu-bundle,
# and run `python3 -m benchmarks.gpu_check` there (or make gpu-check GPU_PYTHON=python3).
COURSE_DEVICE ?= cuda
GPU_PYTHON ?= $(BIN)/python
.PHONY: gpu-bundle gpu-check
gpu-bundle: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_bundle .gpu-bundle
gpu-check: $(if $(filter $(BIN)/python,$(GPU_PYTHON)),$(STAMP) install-sandbox)
	COURSE_DEVICE=$(COURSE_DEVICE) $(GPU_PYTHON) -m benchmarks.gpu_check
