# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP_RUN  := $(VENV)/.installed-run
STAMP_DEV  := $(VENV)/.installed-dev

.PHONY: run test lint types unit node-deps promtool chromium gate test-matrix bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml setup.py factrail/core/_speedups.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(STAMP_DEV): pyproject.toml setup.py factrail/core/_speedups.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/factrail serve

test: $(STAMP_DEV) lint types unit gate test-matrix

lint: $(STAMP_DEV)
	$(BIN)/ruff check factrail app tests bench
	$(BIN)/ruff format --check factrail app tests bench
	$(BIN)/lint-imports

types: $(STAMP_DEV)
	$(BIN)/mypy factrail app

# Two pytest workers: the suite waits on real processes (clients, servers) as much as it computes,
# so two take about 3.5 minutes where one takes 8 on this project's 2-core machine.
TEST_WORKERS ?= 2

unit: $(STAMP_DEV) node-deps promtool chromium
	$(BIN)/pytest -q -n $(TEST_WORKERS)

# Claude Code and the Codex CLI, pinned in plugin/package-lock.json, for the real-client bills
# (tests/integration/test_claude_code_bill.py and test_codex_bill.py; each skipped without its
# client). Installed into plugin/node_modules, never globally.
node-deps:
	@if command -v npm >/dev/null 2>&1; then \
		cd plugin && npm ci --no-audit --no-fund; \
	else \
		echo "node-deps: npm not found, skipping Claude Code (its end-to-end bill test will skip)"; \
	fi

# promtool, from Debian's `prometheus` package, for the alert rules' tests (tests/test_alerts.py:
# `promtool check` and `promtool test rules`; they skip without it, unless
# FACTRAIL_REQUIRE_PROMTOOL=1). Installed with apt-get when absent and apt-get can run (as root,
# or through passwordless sudo); only promtool is wanted, so the Prometheus service the package
# sets up is stopped and disabled.
APT_PROMETHEUS := env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq --no-install-recommends prometheus

promtool:
	@if command -v promtool >/dev/null 2>&1; then \
		:; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "promtool: not found and no apt-get, skipping (the alert rules' tests will skip)"; \
	else \
		if [ "$$(id -u)" = 0 ]; then as_root=""; \
		elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"; \
		else as_root=none; fi; \
		if [ "$$as_root" = none ]; then \
			echo "promtool: not found and apt-get needs root, skipping (the alert rules' tests will skip)"; \
		elif $$as_root apt-get update -qq && $$as_root $(APT_PROMETHEUS); then \
			if command -v systemctl >/dev/null 2>&1; then \
				$$as_root systemctl disable --now prometheus >/dev/null 2>&1 || true; \
			fi; \
		else \
			echo "promtool: apt-get could not install prometheus, skipping (the alert rules' tests will skip)"; \
		fi; \
	fi

# Headless Chromium, from Debian's `chromium` package, for the pages' browser tests
# (tests/browser/: each page opened, clicked and typed into over the DevTools protocol, so no
# driver is needed; they skip without it, unless FACTRAIL_REQUIRE_CHROMIUM=1). Installed with
# apt-get when absent and apt-get can run (as root, or through passwordless sudo).
APT_CHROMIUM := env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y -qq --no-install-recommends chromium

chromium:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "chromium: not found and no apt-get, skipping (the pages' browser tests will skip)"; \
	else \
		if [ "$$(id -u)" = 0 ]; then as_root=""; \
		elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"; \
		else as_root=none; fi; \
		if [ "$$as_root" = none ]; then \
			echo "chromium: not found and apt-get needs root, skipping (the pages' browser tests will skip)"; \
		elif ! { $$as_root apt-get update -qq && $$as_root $(APT_CHROMIUM); }; then \
			echo "chromium: apt-get could not install chromium, skipping (the pages' browser tests will skip)"; \
		fi; \
	fi

# Facts at cuts against every rival, and the simulated bill (facts kept at use, billed over sending
# everything, cache share) under Anthropic's prices, on both synthetic corpora (about a minute)
# and, where it is, on the real development corpus (about another; the tests find it the same way).
GATE_SIM := --sim --sim-strategy rails --sim-strategy erase
FACTRAIL_CORPUS_DIR ?= ../shared/corpus/dev

gate: $(STAMP_DEV)
	$(BIN)/factrail eval --synthetic 40 --seed 0 $(GATE_SIM) --gate eval/baseline.json
	$(BIN)/factrail eval --synthetic-v2 10 --seed 0 $(GATE_SIM) --gate eval/baseline-v2.json
	@if ls "$(FACTRAIL_CORPUS_DIR)"/*.json >/dev/null 2>&1; then \
		$(BIN)/factrail eval --corpus "$(FACTRAIL_CORPUS_DIR)" $(GATE_SIM) --gate eval/baseline-dev.json; \
	else \
		echo "gate: no corpus at $(FACTRAIL_CORPUS_DIR), its gate skipped (eval/baseline-dev.json)"; \
	fi

# The C kernels built (warnings as errors) and checked against their Python on each of Python
# 3.11, 3.12 and 3.13 found, in venvs under .venv-matrix/; an absent interpreter is skipped.
test-matrix: $(STAMP_DEV)
	$(BIN)/python tests/core/kernel_matrix.py

bench: $(STAMP_DEV)
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/proxy.py

clean:
	rm -rf $(VENV) .venv-matrix .mypy_cache .pytest_cache .ruff_cache
