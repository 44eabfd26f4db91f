# agentd — the single entry point. Every target works on a fresh clone: it ensures
# Node.js 24 (project-local when the machine's is older) and the dependencies itself.
SHELL := /bin/bash
.DEFAULT_GOAL := help
ROOT := $(abspath .)
NODE := $(shell "$(ROOT)/scripts/ensure-node.sh")
ifeq ($(NODE),)
$(error Node.js >= 24 is required and could not be installed; see the message above)
endif
export PATH := $(dir $(NODE)):$(ROOT)/node_modules/.bin:$(PATH)
# npm itself runs on the Node above; this keeps its "engines" checks honest.
export npm_config_update_notifier := false

.PHONY: help setup generate build lint test bench demo images image clean check-generated sdk

help:
	@echo "make setup      install dependencies (Node 24 into .tools/ when needed)"
	@echo "make generate   generate protobuf code into internal/gen (buf + protoc-gen-es)"
	@echo "make build      generate + typecheck (bin/agentd and bin/agentctl run from source)"
	@echo "make lint       biome (fails on warnings), tsc strict, buf lint"
	@echo "make test       the whole test suite (starts private redis-server instances)"
	@echo "make bench      benchmarks under bench/ (not part of the tests)"
	@echo "make demo       the main job, on the embedded event log"
	@echo "make images     build the sandbox images (sandbox-images/; IMAGES=base|test|python|go|rust|java|node|all)"
	@echo "make image      build the agentd image itself (agentd:VERSION; no registry)"
	@echo "make sdk        the TypeScript client package (clients/typescript, npm pack)"

setup: node_modules/.setup-done

node_modules/.setup-done: package.json package-lock.json
	@# npm ci refuses this lock file (npm 11 omits the other platforms' optional biome
	@# binaries from it); npm install honours the same lock file.
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

generate: setup
	buf generate

# CI: generated code must be what the protos say (no diff, no stray files).
check-generated: generate
	@if [ -n "$$(git status --porcelain -- internal/gen)" ]; then \
	  git status --porcelain -- internal/gen; \
	  echo "internal/gen is stale: run 'make generate' and commit the result"; exit 1; fi

build: generate
	tsc -p tsconfig.json
	tsc -p internal/console/tsconfig.json
	node scripts/build-console.ts

lint: setup
	biome check --error-on-warnings .
	tsc -p tsconfig.json
	tsc -p internal/console/tsconfig.json
	buf lint

test: build images image
	@"$(ROOT)/scripts/ensure-redis.sh"
	@"$(ROOT)/scripts/ensure-packages.sh"
	@"$(ROOT)/scripts/ensure-prometheus.sh"
	@"$(ROOT)/scripts/ensure-compose.sh"
	@"$(ROOT)/scripts/ensure-kubectl.sh"
	@"$(ROOT)/scripts/ensure-chromium.sh" >/dev/null
	@"$(ROOT)/scripts/kubernetes/cluster.sh" up >/dev/null
	@node scripts/run-tests.ts; rc=$$?; "$(ROOT)/scripts/kubernetes/cluster.sh" down; exit $$rc

bench: build images image
	@"$(ROOT)/scripts/ensure-redis.sh"
	node bench/eventlog.ts
	node bench/sandbox.ts
	node bench/kernel.ts
	node bench/reviewer.ts
	node bench/e2e.ts --runs 5
	node bench/e2e.ts --runs 3 --delays
	node bench/runs.ts --runs 200
	node bench/upload.ts
	node bench/upload-throughput.ts
	node bench/kubernetes.ts
	node bench/workspace-diff.ts
	node bench/create-run.ts
	node bench/redis-failover.ts
	node bench/mutation-snapshot.ts
	node bench/hostile-input.ts
	node bench/tool-started.ts
	node bench/secret-containment.ts
	node bench/runner-trees.ts
	node bench/observability.ts
	node bench/image.ts
	node bench/egress.ts
	node bench/console.ts
	node bench/rate-limit.ts
	node bench/repos.ts --rounds 3
	node bench/retention-soak.ts

# The example run (scripts/demo.sh): Docker checked (and started as root) and the sandbox
# images built by `images`; the replay model unless OPENAI_API_KEY is set.
demo: build images
	@"$(ROOT)/scripts/demo.sh"

# The client SDK as an npm package: clients/typescript/agentd-client-<version>.tgz.
sdk: build
	cd clients/typescript && npm pack --loglevel=error

# Sandbox images, from Debian packages and busybox (no registry); see sandbox-images/README.md.
images:
	@"$(ROOT)/scripts/ensure-docker.sh"
	@"$(ROOT)/scripts/build-images.sh" $(IMAGES)

# The image of agentd itself (agentd:VERSION, agentd:HASH), no registry needed.
image: build
	@"$(ROOT)/scripts/ensure-docker.sh"
	@"$(ROOT)/scripts/ensure-packages.sh"
	@"$(ROOT)/scripts/build-agentd-image.sh"
	@"$(ROOT)/scripts/build-redis-image.sh"

clean:
	rm -rf node_modules .tools .data dist
