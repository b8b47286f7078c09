# pecourse: one command to open the course, one to test it. Both set everything up first.
#
#   make lab          create .venv if needed, install a learner's environment (the course,
#                     JupyterLab, widgets, torch), open JupyterLab on the start-here notebook
#   make instructor   the same with nbgrader (the instructor extra), its menus shown
#   make test         install the test, instructor, book and hub extras too, lint, run every test
#   make book         install the book extra too, build the course as an offline website
#
# Set-up is idempotent: scripts/install reinstalls only when pyproject.toml or itself changed,
# or when a command needs an extra the environment lacks (it keeps the ones installed).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.pecourse-installed
# The extras of pyproject.toml a command installs; `make lab EXTRAS=...` chooses others.
EXTRAS ?= dev,instructor,book,hub
lab: EXTRAS =
instructor: EXTRAS = instructor
book: EXTRAS = book
book-check: EXTRAS = book,dev

.PHONY: setup lab instructor test lint format outputs exercises checkpoints results book book-check clean FORCE

setup: $(STAMP)

# scripts/install decides (quickly) whether there is anything to do: the stamp holds the
# extras installed. It takes torch from PyTorch's CPU-only index on Linux machines without an
# NVIDIA driver when that index answers (TORCH_INDEX chooses: see README.md), and installs
# with uv (same versions, a third of the time), falling back to pip.
$(STAMP): pyproject.toml scripts/install FORCE
	@scripts/install $(VENV) "$(EXTRAS)" $(PYTHON)

FORCE:

# JupyterLab refuses to run as root unless told; containers and CI machines often are root.
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root,)

# The venv's bin comes first on PATH, so `pecourse` runs as the notebooks say in JupyterLab's
# terminals and in `!pecourse` cells (kernels inherit the server's environment). Terminals
# start a plain shell: a login shell (JupyterLab's choice when make runs without a terminal)
# reads /etc/profile, which resets PATH.
LAB_ENV = PATH="$(abspath $(BIN)):$$PATH" VIRTUAL_ENV="$(abspath $(VENV))"
LAB_RUN = $(BIN)/jupyter lab $(LAB_FLAGS) --ServerApp.root_dir="$(CURDIR)" \
	--ServerApp.terminado_settings="shell_command=$${SHELL:-/bin/sh}" \
	notebooks/00_start_here.ipynb

# A learner's JupyterLab shows none of nbgrader's menus, even in an environment that has it
# (after make test): scripts/jupyter-learner turns its server and JupyterLab extensions off.
lab: setup
	$(LAB_ENV) JUPYTER_CONFIG_PATH="$(CURDIR)/scripts/jupyter-learner$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
		$(LAB_RUN)

# An instructor's JupyterLab: nbgrader's formgrader, course list and assignment tools.
instructor: setup
	$(LAB_ENV) $(LAB_RUN)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pecourse cards lint

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# One pytest-xdist worker per core (conftest.py: one thread each, the long files first).
TEST_WORKERS ?= auto

# pytest keeps each test module's assertion-rewritten bytecode in __pycache__, except when
# PYTHONDONTWRITEBYTECODE is set (it is on the machines this course is built on): then both
# workers rewrite the 200-odd test modules on every run, about 8 s before the first test.
test: lint
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n $(TEST_WORKERS) --durations=15

# Re-execute every lesson notebook in place, so committed outputs are fresh. Learner data
# goes to a temporary directory, as it does under the tests.
outputs: setup
	PECOURSE_DATA_DIR=$$(mktemp -d) $(BIN)/python -m pecourse.notebook_tools execute notebooks/*.ipynb
	$(BIN)/python -m pecourse.course --update-readme

# Regenerate the student notebooks from solutions/ (the single source of every exercise).
exercises: setup
	$(BIN)/pecourse exercises build

# Retrain every shipped checkpoint, then rewrite every recording from them.
checkpoints: setup
	$(BIN)/python -m pecourse.lab.train --all
	$(MAKE) results

# Rewrite every recording in pecourse/lab/results from the shipped checkpoints under the protocol
# of pecourse.lab.evaluate: the studies and the base-crossing run of chapter 16. Every study
# trains the (recipe, seed) pairs it needs once, into build/results-log/weights/, which the studies
# share. The recordings' cpu_seconds sum to about 2.3 CPU-hours (the largest: needle_seeds 23 min,
# retrieval_seeds and embedding_setup 14 each); training a study found already done is not in
# them (rope_long's seeds 1 and 2 alone took about 35 minutes). Everything runs on one thread:
# plan on about 3.5 hours.
# Each study draws a bar over its models and logs each finished one with its CPU time, then its
# own total and the total of all; an interrupted run resumes from build/results-log/.
# A test compares each recording's checkpoint hashes with the shipped files.
results: setup
	$(BIN)/python -m pecourse.lab.studies run $(STUDIES) --log-dir build/results-log
	$(BIN)/python -m pecourse.lab.base_crossing

STUDIES := cope_counting text_extrapolation imposed_windows windowed_passkey grid_width_transfer \
	cope_selective_copy nope_anchor counting_length_generalisation extrapolation_seeds \
	retrieval_seeds augmentation_seeds extension_seeds needle_seeds sliding_seeds context_use \
	extension_controls embedding_setup loss_by_position position_shift rope_base scaling_mistakes \
	table_extension table_finetune alibi_windows t5_far_keys

# The course as a static website in build/book/ (open build/book/index.html; it works from
# file:// with no network). Renders the committed notebooks as they are, never re-executes
# them; only the explorers are drawn again, for a grid of their controls' values, by running
# each chapter in a kernel up to them (about 6 CPU-minutes the first time, then cached in
# build/book-frames/ until a chapter changes). The first build fetches MathJax
# and the widget manager with npm (pinned in book/assets.json, cached in build/book-assets/).
book: setup
	$(BIN)/python -m pecourse.book build

# The whole book in headless Chromium with the network blocked: every page, a slider, a
# flashcard, search. Screenshots go to build/book-screens/. (make test checks two chapters.)
# It builds the book itself, so that set-up installs the browser's driver (dev) with the book.
book-check: setup
	$(BIN)/python -m pecourse.book build
	$(BIN)/python -m pecourse.book check

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
