# controlrl commands. `make demo` and `make test` are the README's two commands; both set up first.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FULL ?=
export MUJOCO_GL ?= egl

.PHONY: setup demo test test-slow lint bench figures clean

setup: $(STAMP)

# torch is installed first from its pin so nothing can pull a CUDA build; requirements.lock pins
# every transitive package to the set tested together (see shared specs machine.md).
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c requirements.lock --config-settings editable_mode=compat -e ".[dev,sb3]"
	touch $(STAMP)

# a short PPO run with default settings (about two minutes here) that ends with its curve
demo: setup
	rm -rf runs/demo
	$(BIN)/python algos/ppo.py --env-id Hopper-v5 --total-timesteps 200000 --seed 1 --run-dir runs/demo
	$(BIN)/python -m controlrl.plots runs/demo --out runs/demo/learning_curve.png

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: setup lint
	$(BIN)/python -m pytest -q

# the slow tier also exercises the Ray backend (an optional extra)
test-slow: setup
	$(BIN)/pip install -q -c requirements.lock "ray==2.60.0"
	$(BIN)/python -m pytest -q -m slow

bench: setup
	$(BIN)/python paper_figures/bench_ppo.py --out paper_figures/out/bench_ppo.csv --envs-list 1,8 --iterations 3 --repeats 3

figures: setup
	@echo "figure scripts are listed in paper_figures/README.md"

clean:
	rm -rf $(VENV) runs
