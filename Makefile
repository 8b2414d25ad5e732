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
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

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

$(STAMP): pyproject.toml jupyter_gpuaas/labextension/package.json
	$(PIP) install --quiet -e ".[test,dev]"
	@touch $@

install: $(STAMP) chromium ## install the package (editable), its test tools and the built labextension

chromium: ## install Debian's Chromium for the browser tests (needs root, as on CI)
	@if [ ! -x $(CHROMIUM) ]; then \
	  echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	    || { echo "could not install chromium: run 'apt-get install chromium' as root" >&2; exit 1; }; \
	fi

lint: $(STAMP) ## ruff, mypy, import boundaries, eslint and tsc
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	npm run --silent lint

unit: $(STAMP) ## unit tests only (no cluster, no browser)
	$(VENV)/bin/pytest tests/unit -q

test: install lint ## install everything the tests need, then lint and run every test
	npm test
	$(VENV)/bin/pytest -ra

cluster-build: ## build the cluster binaries from Go modules (cached under ~/.cache/jupyter-gpuaas)
	bash devcluster/build.sh

cluster-up: $(STAMP) cluster-build ## start etcd, Kubernetes, kwok and Kueue on 127.0.0.1
	$(PY) -m devcluster up

cluster-down: ## stop the cluster started by cluster-up and remove its state
	$(PY) -m devcluster down

demo: install ## run the demo and print where to open it
	$(PY) -m demo

bench: $(STAMP) ## run the benchmarks and print their figures
	$(PY) -m benchmarks

.PHONY: help install chromium lint unit test cluster-build cluster-up cluster-down demo bench
