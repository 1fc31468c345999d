# idemstore — run `make` (or `make help`) to list the targets.

SHELL := /bin/bash
GO    ?= go

# testcontainers-go settings for machines where no image can be pulled and the
# reaper (ryuk) cannot run: tests terminate their own containers, and reach
# them through published ports on localhost.
export TESTCONTAINERS_RYUK_DISABLED ?= true
export TESTCONTAINERS_HOST_OVERRIDE ?= localhost
# The PostgreSQL image the integration tests start; `make pg-image` builds it
# from Debian packages. Set it to an official image (postgres:15) where Docker
# can pull.
export IDEMSTORE_TEST_PG_IMAGE ?= idemstore-postgres:15

FUZZTIME ?= 30s
BENCHTIME ?= 2s
# Flags of cmd/benchpath, e.g. BENCHPATH_FLAGS="-duration 1s -cases execute-hit,execute-miss";
# `go run ./cmd/benchpath -h` lists them.
BENCHPATH_FLAGS ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: demo
demo: ## Run the demo on the in-memory store (DEMO_FLAGS="-scenario clean" for others).
	$(GO) run ./cmd/demo $(DEMO_FLAGS)

# -timeout 20m: internal/pgha fails a real formation over a dozen times, 3 to 8
# minutes on a busy 2-core machine, too close to go test's default of 10.
.PHONY: test
test: pg-image-if-needed pgha-image-if-needed ## Run every test with the race detector (PostgreSQL via testcontainers, or TEST_DATABASE_URL).
	$(GO) test -race -count=1 -timeout 20m ./...

.PHONY: bench
bench: pg-image-if-needed ## Run the go benchmarks, then the user's path against raw pgx and one PostgreSQL against a Citus cluster (cmd/benchpath).
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	$(GO) run ./cmd/benchpath $(BENCHPATH_FLAGS)

.PHONY: bench-path
bench-path: pg-image-if-needed ## Only the user's path against raw pgx, fsync=on (BENCHPATH_FLAGS; IDEMSTORE_BENCH_1E7=1 adds 10^7 records).
	$(GO) run ./cmd/benchpath $(BENCHPATH_FLAGS)

.PHONY: chaos
chaos: pg-image-if-needed ## Full chaos suite on PostgreSQL: >=10,000 calls, 250 process kills, 6 database restarts.
	$(GO) test -count=1 -timeout 15m -run '^TestChaos$$' -v ./internal/chaos -args -chaos.profile=full

.PHONY: fuzz
fuzz: ## Fuzz the key recipe for FUZZTIME (default 30s).
	$(GO) test ./keyhash -run '^$$' -fuzz FuzzCanonicalize -fuzztime $(FUZZTIME)

.PHONY: lint
lint: ## gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

.PHONY: pg-image
pg-image: ## Build the local PostgreSQL 15 image from Debian packages (no registry needed).
	bash docker/postgres/build.sh

# The image is only needed when the tests start PostgreSQL themselves.
.PHONY: pg-image-if-needed
pg-image-if-needed:
	@if [ -z "$$TEST_DATABASE_URL" ] && [ "$$IDEMSTORE_TEST_PG_IMAGE" = "idemstore-postgres:15" ] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
		bash docker/postgres/build.sh; fi

.PHONY: pgha-image
pgha-image: ## Build the local pg_auto_failover image (monitor + 2 nodes, internal/pgha) from Debian packages.
	bash docker/pgautofailover/build.sh

# internal/pgha always starts its formation in Docker (TEST_DATABASE_URL
# cannot fail over), so its image is built wherever Docker runs.
.PHONY: pgha-image-if-needed
pgha-image-if-needed:
	@if [ "$${IDEMSTORE_TEST_PGHA_IMAGE:-idemstore-pgautofailover:15}" = "idemstore-pgautofailover:15" ] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
		bash docker/pgautofailover/build.sh; fi
