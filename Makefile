# hero-gateway — `make run` starts the service, `make test` runs the suite.
# Both install what they need first: `make run` only what running needs
# (venv with the `run` extra, redis-server, Java); `make test` adds the test
# toolchain (the `test` extra, Node, npm, Chromium).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: setup test-setup system-deps test-system-deps run test lint bench bench-targets clean

setup: system-deps $(STAMP)

test-setup: setup test-system-deps $(TEST_STAMP)

# System packages running needs, only when missing: redis-server (the
# embedded default of `dev`), bubblewrap and libseccomp (the sandbox every
# python job runs in, and its seccomp filter), Java (PySpark), python3-venv
# (Debian splits it out).
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	$(PYTHON) -c 'import ctypes.util as u, sys; sys.exit(not u.find_library("seccomp"))' \
	  || missing="$$missing libseccomp2"; \
	command -v java >/dev/null || missing="$$missing default-jre-headless"; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(APT) update -qq && $(APT) install -y -qq $$missing; \
	fi

# What only the tests need: Node and npm (the JS client and OpenRPC ecosystem
# tests), Chromium (the browser test, driven by Playwright; Playwright's own
# browser downloads are never used), valgrind (bench/lua_cost.py's count of
# instructions under callgrind, which a test runs).
test-system-deps:
	@missing=""; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v valgrind >/dev/null || missing="$$missing valgrind"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(APT) update -qq && $(APT) install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[run]'
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(PY) -m pip install -q -e '.[test]'
	touch $(TEST_STAMP)

run: setup
	$(VENV)/bin/hero-gateway dev

# Lint first, so CI (.ci/run = make test) enforces it.
test: test-setup lint
	$(PY) -m pytest

# ruff (rules and layout) over every Python tree; mypy strict over the same trees
# (pyproject.toml [tool.mypy] files). The last two lines: the JS client runtime,
# type-checked where it is written (TypeScript from tests/node, installed once);
# the Python runtime is in gateway/, its generated copy in clients/python.
LINT_PATHS := gateway tests bench scripts clients/python
lint: test-setup
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy
	cd tests/node && { [ -f node_modules/.package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; }
	node tests/node/node_modules/typescript/bin/tsc -p gateway/codegen/runtime/tsconfig.json

# Every benchmark, the Python peers included (~20 min) -> bench/RESULTS.md.
bench: test-setup
	$(PY) bench/run.py

# Only what issue 18's targets compare (ours, BullMQ, the LPUSH/BLPOP ceiling,
# the archiver, the Functions' instructions per job, AOF on; a few minutes)
# -> bench/out/RESULTS.md.
bench-targets: test-setup
	$(PY) bench/run.py --targets

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache
