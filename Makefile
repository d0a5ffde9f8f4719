# hero-gateway — `make run` starts the service, `make test` runs the suite.
# Both install what they need first (venv, packages, redis-server, Java).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: setup system-deps run test lint bench clean

setup: system-deps $(STAMP)

# System packages, only when missing: redis-server (the embedded default and
# the tests), Java (PySpark), python3-venv (Debian splits it out), Node and npm
# (the JS client and OpenRPC ecosystem tests), Chromium (the browser test,
# driven by Playwright; Playwright's own browser downloads are never used).
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v java >/dev/null || missing="$$missing default-jre-headless"; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(APT) update -qq && $(APT) install -y -qq $$missing; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

run: setup
	$(VENV)/bin/hero-gateway dev

test: setup
	$(PY) -m pytest

# The last two lines: the JS client runtime, type-checked where it is written
# (TypeScript from tests/node; ruff and mypy already cover the Python runtime in gateway/).
lint: setup
	$(VENV)/bin/ruff check gateway tests bench scripts
	$(VENV)/bin/mypy
	cd tests/node && { [ -f node_modules/.package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; }
	node tests/node/node_modules/typescript/bin/tsc -p gateway/codegen/runtime/tsconfig.json

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .mypy_cache .ruff_cache
