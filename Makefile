# jupyter-gpuaas — the two set-up commands are `make demo` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
STAMP   := $(VENV)/.installed
CHROMIUM ?= /usr/bin/chromium

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

# The labextension is built here (not by pip's isolated build) so that its sources are type-checked once.
jupyter_gpuaas/labextension/package.json: node_modules/.package-lock.json $(VENV)/bin/python $(wildcard labextension/src/*.ts labextension/src/*.tsx labextension/style/* labextension/schema/*)
	$(PIP) install --quiet "jupyterlab>=4.6,<5"
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npm run build:prod

# The console page's TypeScript (and the DOM helper it shares with the labextension), built into
# the service's static folder as ES modules.
CONSOLE_JS := culler/gpuaas_service/console/static/js/culler/gpuaas_service/console/src/main.js
$(CONSOLE_JS): node_modules/.package-lock.json culler/gpuaas_service/console/tsconfig.json labextension/src/dom.ts $(wildcard culler/gpuaas_service/console/src/*.ts)
	npm run build:console

$(STAMP): pyproject.toml jupyter_gpuaas/labextension/package.json
	$(PIP) install --quiet -e ".[test,dev]"
	@touch $@

# The second line of JupyterHub: the versions of z2jh's hub image (JupyterHub 5.5.0, KubeSpawner
# 7.1.0 and the rest of the image's frozen requirements as constraints). Without the dev extra:
# it wants jupyterhub-idle-culler 2, the image has 1.4.
VENV55  ?= .venv-hub55
STAMP55 := $(VENV55)/.installed
HUB55_CONSTRAINTS := spawner/hub-image/z2jh-hub-constraints.txt
# What runs on it: the tests of the code that calls JupyterHub's or KubeSpawner's API (the
# spawner class, a KubeSpawner; the service's HubAuth/HubOAuth handlers, app and hub REST client)
# and the hub tests that start a hub with the service, not the browser ones. The pure modules'
# unit tests (validation, messages, the reclaim rules, deploy files) run on one line only.
HUB55_TESTS := tests/unit/spawner/test_hubcompat.py tests/unit/spawner/test_failures.py \
	tests/unit/spawner/test_form.py tests/unit/spawner/test_pod.py \
	tests/unit/spawner/test_progress.py tests/unit/spawner/test_spawner_state.py \
	tests/unit/spawner/test_token_secret.py \
	tests/unit/service/web tests/unit/service/test_app.py tests/unit/service/test_api_schema.py \
	tests/unit/service/clients/test_hub.py \
	tests/real_hub/test_spawn.py tests/real_hub/test_spawn_queue.py tests/real_hub/test_spawn_caps.py \
	tests/real_hub/test_spawn_failures.py \
	tests/real_hub/test_culler.py \
	tests/real_hub/test_culler_dry_run.py
# (no $(MAKE) in test's recipe: `make -n test` would run that line)
HUB55_PYTEST = $(VENV55)/bin/pytest -ra $(LANES) --durations=20 -p no:cacheprovider $(HUB55_TESTS)

$(STAMP55): pyproject.toml $(HUB55_CONSTRAINTS) jupyter_gpuaas/labextension/package.json
	$(PYTHON) -m venv $(VENV55)
	$(VENV55)/bin/python -m pip install --quiet --upgrade pip
	$(VENV55)/bin/python -m pip install --quiet -c $(HUB55_CONSTRAINTS) -e ".[test]"
	@touch $@

# The unit tests also run on the lowest and the highest CPython that the package supports and its
# dependencies install on: 3.10 (requires-python; asyncio.TimeoutError is not the builtin
# TimeoutError there, and the kernel side runs in users' own kernels) and 3.13. Each has a venv of
# its own with the test extra (lint runs once, on the main line). uv (in the test extra) fills
# them, from its cache in ~/.cache/uv, shared with tests/packaging: on the loaded 2-core machine
# pip took 2 to 6 minutes a venv, uv 30 to 50 s. The interpreters: pyenv's, else on PATH.
PYTHON_LOWEST  ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.10.*/bin/python) python3.10)
PYTHON_HIGHEST ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13.*/bin/python) python3.13)
VENV310 ?= .venv-py310
VENV313 ?= .venv-py313
STAMP310 := $(VENV310)/.installed
STAMP313 := $(VENV313)/.installed
UV := UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1 $(VENV)/bin/uv
UNIT_PY310 = $(VENV310)/bin/pytest -ra -n 2 --durations=10 tests/unit
UNIT_PY313 = $(VENV313)/bin/pytest -ra -n 2 --durations=10 tests/unit

# $(1): the venv, $(2): its interpreter
define python_line
	$(UV) venv --quiet --allow-existing --python $(2) $(1)
	$(UV) pip install --quiet --python $(1)/bin/python -e ".[test]"
	@touch $(1)/.installed
endef

$(STAMP310): pyproject.toml jupyter_gpuaas/labextension/package.json $(STAMP)
	$(call python_line,$(VENV310),$(PYTHON_LOWEST))

$(STAMP313): pyproject.toml jupyter_gpuaas/labextension/package.json $(STAMP)
	$(call python_line,$(VENV313),$(PYTHON_HIGHEST))

install: $(STAMP) $(CONSOLE_JS) chromium prometheus ## install the package (editable), its test tools and the built labextension

chromium: ## install Debian's Chromium for the browser tests (needs root, as on CI)
	@if [ ! -x $(CHROMIUM) ]; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || { echo "could not install chromium: run 'apt-get install chromium' as root" >&2; exit 1; }; \
	fi

prometheus: ## install Debian's Prometheus and promtool for the tests and the demo (needs root, as on CI)
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  echo "installing Debian's prometheus for the tests and the demo"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
	    || { echo "could not install prometheus: run 'apt-get install prometheus' as root" >&2; exit 1; }; \
	  systemctl disable --now prometheus >/dev/null 2>&1 || true; \
	fi

lint: $(STAMP) $(CONSOLE_JS) ## ruff, mypy, import boundaries, the OpenAPI documents and their generated types, options page, eslint, tsc
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m tests.support.openapi
	$(PY) docs/options.py --check
	npm run --silent lint

api-types: $(STAMP) node_modules/.package-lock.json ## copy the shared schemas into the service's OpenAPI document; rewrite the TypeScript types and security.md's route tables from the documents
	$(PY) -m tests.support.openapi --write

options: $(STAMP) ## rewrite docs/options.md from the options' traitlets
	$(PY) docs/options.py

# The unit tests on both cores (pytest-xdist): each test has its own tmp_path and OS-chosen ports.
# The cluster, hub and browser tests run in two lanes: two xdist workers, each with a dev cluster
# of its own (tests/support/lanes.py), a module's tests together on one. They mostly wait on
# hubs, servers and Kueue, so two lanes on two cores take about half the time of one. Each run
# prints its 20 slowest tests.
UNIT_PYTEST = $(VENV)/bin/pytest -ra -n 2 --durations=20 tests/unit
LANES := -n 2 --dist loadfile -p tests.support.lanes
MAIN_PYTEST = $(VENV)/bin/pytest -ra $(LANES) --durations=20 --ignore=tests/unit

unit: $(STAMP) ## unit tests only (no cluster, no browser)
	$(UNIT_PYTEST)

# Lane 0's dev cluster serves both test sessions (the session fixture reuses a running one);
# stopped at the end, whatever the outcome, if this target started it. Lane 1's is started and
# stopped by each session's second worker. It is the tests' own cluster: a
# running `make demo` (its cluster in .demo/cluster) is neither used nor touched.
# tests/packaging builds the sdist and the wheel and checks the wheel in a fresh venv.
# A cold cluster build (about ten minutes of both cores) runs in the background, at low priority,
# while the installs, lint and unit tests mostly wait on the network and disks; the cluster
# suites wait for it (build.sh's lock), then its step times are printed.
CLUSTER_BUILD_LOG := build/cluster-build.log
cluster-build-start:
	@mkdir -p build
	@echo "make test: building the cluster binaries in the background (log: $(CLUSTER_BUILD_LOG))"
	nice -n 10 bash devcluster/build.sh >$(CLUSTER_BUILD_LOG) 2>&1 &

test: cluster-build-start install lint $(STAMP55) $(STAMP310) $(STAMP313) ## install everything the tests need, then lint and run every test (the wheel's too), on JupyterHub 6 and 5.5, the unit tests on CPython 3.10 and 3.13 too
	npm test
	@echo "make test: on the tests' own dev cluster, $$($(PY) -m devcluster where); a running make demo is not touched"
	status=0; started=0; \
	$(UNIT_PYTEST) || status=$$?; \
	$(UNIT_PY310) || status=$$?; \
	$(UNIT_PY313) || status=$$?; \
	echo "make test: waiting for the cluster build"; \
	bash devcluster/build.sh >/dev/null 2>>$(CLUSTER_BUILD_LOG); built=$$?; \
	grep '^devcluster build' $(CLUSTER_BUILD_LOG) || true; \
	[ $$built = 0 ] || exit 1; \
	$(PY) -m devcluster status >/dev/null 2>&1 || { $(PY) -m devcluster up >/dev/null && started=1; }; \
	$(MAIN_PYTEST) || status=$$?; \
	$(HUB55_PYTEST) || status=$$?; \
	if [ $$started = 1 ]; then $(PY) -m devcluster down || status=$$?; fi; \
	exit $$status

unit-py310: $(STAMP310) ## the unit tests on CPython 3.10, the lowest supported
	$(UNIT_PY310)

unit-py313: $(STAMP313) ## the unit tests on CPython 3.13, the highest supported
	$(UNIT_PY313)

test-hub55: $(STAMP55) ## the spawner's, the service's and the hub tests on z2jh's hub versions (JupyterHub 5.5)
	$(HUB55_PYTEST)

# The browser tests write their screenshots to build/screenshots/; this run writes the docs' own.
SCREENSHOT_TESTS := tests/e2e/test_gpu_panel.py tests/real_hub/test_console.py \
	tests/real_hub/test_console_handoff.py tests/real_hub/test_queue_browser.py \
	tests/integration/test_notebook_jobs_browser.py
screenshots: install cluster-build ## refresh the docs' screenshots from the browser tests that take them
	GPUAAS_DOCS_SCREENSHOTS=1 $(VENV)/bin/pytest -q $(SCREENSHOT_TESTS)

cluster-build: ## build the cluster binaries from Go modules (cached under ~/.cache/jupyter-gpuaas)
	bash devcluster/build.sh

cluster-up: $(STAMP) cluster-build ## start the tests' cluster (etcd, Kubernetes, kwok, Kueue) on 127.0.0.1
	$(PY) -m devcluster up

cluster-down: ## stop the cluster started by cluster-up and remove its state
	$(PY) -m devcluster down

# Its own cluster and hub state in .demo/; one demo per clone (a second one is refused).
demo: install ## run the demo and print where to open it (Ctrl-C stops it)
	$(PY) -m demo $(DEMO_ARGS)

bench: $(STAMP) ## run the benchmarks and print their figures
	$(PY) -m benchmarks

.PHONY: help install chromium prometheus lint api-types options unit unit-py310 unit-py313 cluster-build-start test test-hub55 screenshots cluster-build cluster-up cluster-down demo bench
