# controlrl commands. `make demo` and `make test` are the README's two commands; both set up first.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FULL ?=
export MUJOCO_GL ?= egl

.PHONY: setup demo test test-slow lint bench d3rlpy-venv bench-iql bench-iql-eval bench-retrace figures \
	mutation clean

setup: $(STAMP)

# torch is installed first from its pin so nothing can pull a CUDA build; requirements.lock pins
# every transitive package to the set tested together (`pip check` clean). A venv without torch
# lets stable-baselines3 pull a CUDA torch (about 5.5 GB); mujoco 4 breaks dm_control 1.0.50.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c requirements.lock --config-settings editable_mode=compat -e ".[dev,sb3,brax,dmc,envpool,offline]"
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
	$(BIN)/python -m pytest -q -n 2

# the slow tier also exercises the Ray backend (an optional extra)
test-slow: setup
	$(BIN)/pip install -q -c requirements.lock "ray==2.60.0"
	$(BIN)/python -m pytest -q -m slow

bench: setup
	$(BIN)/python paper_figures/bench_ppo.py --out paper_figures/out/bench_ppo.csv --envs-list 1,8 --iterations 3 --repeats 3 \
	  --algos ppo,spo,bpo
	$(BIN)/python paper_figures/bench_backends.py --out paper_figures/out/bench_backends.csv

# IQL updates/s, ours vs d3rlpy 2.8.1 (paper_figures/bench_iql.py). d3rlpy pins gymnasium 1.0.0,
# so it gets its own venv outside git (D3RLPY_VENV, about 1.4 GB), built once from the pinned
# paper_figures/peers/d3rlpy-requirements.txt: torch alone first (the CPU wheel), then the rest.
D3RLPY_VENV ?= $(HOME)/.cache/controlrl/venvs/d3rlpy
D3RLPY_REQ := paper_figures/peers/d3rlpy-requirements.txt
d3rlpy-venv: setup
	if [ ! $(D3RLPY_VENV)/.installed -nt $(D3RLPY_REQ) ]; then \
	  test -x $(D3RLPY_VENV)/bin/python || $(PY) -m venv $(D3RLPY_VENV) || exit 1; \
	  $(D3RLPY_VENV)/bin/pip install -q -c $(D3RLPY_REQ) torch==2.13.0 || exit 1; \
	  $(D3RLPY_VENV)/bin/pip install -q -r $(D3RLPY_REQ) || exit 1; \
	  touch $(D3RLPY_VENV)/.installed; fi

bench-iql: d3rlpy-venv
	OMP_NUM_THREADS=1 $(BIN)/python paper_figures/bench_iql.py --out paper_figures/out/bench_iql.csv \
	  --d3rlpy-python $(D3RLPY_VENV)/bin/python --updates 5000 --warmup 1000 --repeats 3

# Scores, ours vs d3rlpy's IQL on hopper-medium-v5-s0 (its dataset from `make figures FULL=1`):
# both at 20,000 updates x 3 seeds; d3rlpy alone at 100,000 x 5 (ours at that budget is
# the declared experiment paper_figures/iql-100k), two runs at a time (about 55 minutes a run here),
# --resume keeping the finished runs of a killed call.
bench-iql-eval: d3rlpy-venv
	$(BIN)/python paper_figures/bench_iql.py --dataset hopper-medium-v5-s0 --eval --seeds 1,2,3 \
	  --updates 20000 --warmup 1000 --d3rlpy-python $(D3RLPY_VENV)/bin/python \
	  --out paper_figures/out/bench_iql_eval.csv
	$(BIN)/python paper_figures/bench_iql.py --dataset hopper-medium-v5-s0 --eval \
	  --contenders d3rlpy --seeds 1,2,3,4,5 --updates 100000 --warmup 1000 --workers 2 --resume \
	  --d3rlpy-python $(D3RLPY_VENV)/bin/python --out paper_figures/out/bench_iql_eval_100k.csv

# Retrace actor-critic updates/s, algos/retrace.py vs SB3's SAC (paper_figures/bench_retrace.py):
# HalfCheetah-v5, 256-256 nets, 256 transitions per update, 1 update per env step, 3 repeats.
bench-retrace: setup
	OMP_NUM_THREADS=1 $(BIN)/python paper_figures/bench_retrace.py \
	  --out paper_figures/out/bench_retrace.csv --updates 3000 --warmup 500 --repeats 3

# test strength: mutmut mutates the formula modules in a copy (mutants/), runs the fast tests
# named in pyproject.toml's [tool.mutmut] on each mutant, then prints killed/total per module
# (README "Test strength"). Not part of `make test`: about 10 minutes on 2 cores.
MUTATION_JOBS ?= 1
mutation: setup
	rm -rf mutants
	OMP_NUM_THREADS=1 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) > mutmut-run.log 2>&1 || { tail -c 2000 mutmut-run.log; exit 1; }
	$(BIN)/python tests/mutation_report.py

# every figure of paper_figures/README.md: at toy size into runs/figures_toy (minutes), or with
# FULL=1 at the budgets stated there into paper_figures/out (hours on 2 cores)
TOY_OUT := runs/figures_toy
# the declared experiments (paper_figures/<id>/experiment.toml): each one command, run through the
# sweep runner into runs/lab/<id> (toy size: runs/lab/<id>-toy), resumable
DECLARED := $(notdir $(patsubst %/,%,$(dir $(wildcard paper_figures/*/experiment.toml))))
figures: setup
	for id in $(DECLARED); do $(BIN)/python -m paper_figures run $$id $(if $(FULL),,--toy) || exit 1; done
ifdef FULL
	$(BIN)/python paper_figures/retrace_vs_traces.py
	$(BIN)/python paper_figures/mujoco_results.py --algo ppo --train
	$(BIN)/python paper_figures/mujoco_results.py --algo trpo --train
	$(BIN)/python paper_figures/mujoco_results.py --algo ppo --suite dmc --train --workers 2
	$(BIN)/python paper_figures/bench_brax.py --out paper_figures/out/bench_brax.csv --timeout 600
	$(BIN)/python paper_figures/brax_pipeline_check.py
	$(BIN)/python paper_figures/brax_ppo_race.py
	$(BIN)/python paper_figures/ppo_vs_sb3.py --train --workers 2 \
	  --sides controlrl,SB3,"controlrl vf_coef=1"
	$(BIN)/python paper_figures/bandit_suite.py
else
	$(BIN)/python paper_figures/retrace_vs_traces.py --toy --out $(TOY_OUT)
	for algo in ppo trpo; do $(BIN)/python paper_figures/mujoco_results.py --algo $$algo --train \
	  --envs Hopper-v5 --seeds 2 --total-timesteps 4096 --sweeps-root $(TOY_OUT)/sweeps \
	  --out $(TOY_OUT) -- --num-steps 512 --num-envs 2 --eval-episodes 1 || exit 1; done
	$(BIN)/python paper_figures/mujoco_results.py --algo ppo --suite dmc --train --seeds 1 \
	  --total-timesteps 512 --sweeps-root $(TOY_OUT)/sweeps --out $(TOY_OUT) -- --num-steps 256 \
	  --num-envs 2 --eval-episodes 1 --num-minibatches 4 --update-epochs 1
	$(BIN)/python paper_figures/bench_brax.py --out $(TOY_OUT)/bench_brax.csv --envs halfcheetah \
	  --pipelines spring --num-envs 2 --host-envs 2 --chunk 0.1 --chunks 1
	$(BIN)/python paper_figures/brax_pipeline_check.py --out $(TOY_OUT)/brax_pipeline_check.csv \
	  --pipelines positional --num-envs 2
	$(BIN)/python paper_figures/brax_ppo_race.py --toy --out $(TOY_OUT)
	$(BIN)/python paper_figures/ppo_vs_sb3.py --train --seeds 2 --total-timesteps 4096 \
	  --sweeps-root $(TOY_OUT)/sweeps/ppo_vs_sb3 --out $(TOY_OUT) -- --eval-episodes 1
	$(BIN)/python paper_figures/bandit_suite.py --toy --out $(TOY_OUT)
endif

clean:
	rm -rf $(VENV) runs
