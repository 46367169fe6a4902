# sandbox-lens: `make demo` and `make test` each set up .venv on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# The CPU wheel of torch 2.13.0 lies on these machines' disk; an unpinned torch would pull a
# multi-GB CUDA build. Override elsewhere, e.g. TORCH_INSTALL="torch --index-url <cpu index>".
TORCH_INSTALL ?= torch==2.13.0

.PHONY: demo test test-slow bench clean-venv

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q $(TORCH_INSTALL)
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/interp demo --out reports/demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(STAMP)
	$(PY) benchmarks/float32_limits.py
	$(PY) benchmarks/krohn_rhodes_depth.py
	$(PY) benchmarks/training.py

clean-venv:
	rm -rf $(VENV)
