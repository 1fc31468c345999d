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
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

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

# The chaos targets pass CHAOS_FLAGS after -args: -chaos.logdir=DIR keeps the
# workers' logs, -chaos.acks=N and the like override the profile (see
# docs/failure-model.md).
CHAOS_FLAGS ?=

.PHONY: chaos
chaos: pg-image-if-needed ## Full chaos suite on PostgreSQL: >=10,000 calls, 250 process kills, 6 restarts, 20 server crashes.
	$(GO) test -count=1 -timeout 30m -run '^TestChaos$$' -v ./internal/chaos -args -chaos.profile=full $(CHAOS_FLAGS)

.PHONY: chaos-failover
chaos-failover: pgha-image-if-needed ## Chaos on a pg_auto_failover formation: 12 failovers (crash, switchover) while workers race.
	$(GO) test -count=1 -timeout 60m -run '^TestChaosFailover$$' -v ./internal/chaos -args -chaos.profile=full $(CHAOS_FLAGS)

# The two long tests run one after the other (two go test runs: -parallel 1
# would not keep a test with subtests from overlapping the other), and both
# run even when the first fails; the target fails if either did.
.PHONY: chaos-long
chaos-long: pg-image-if-needed pgha-image-if-needed ## Long run, not in CI: >=100,000 calls, 1,000 kills, 30 crashes, 20 failovers (about an hour).
	@status=0; \
	$(GO) test -count=1 -timeout 4h -run '^TestChaos$$' -v ./internal/chaos -args -chaos.profile=long $(CHAOS_FLAGS) || status=1; \
	$(GO) test -count=1 -timeout 2h -run '^TestChaosFailover$$' -v ./internal/chaos -args -chaos.profile=long $(CHAOS_FLAGS) || status=1; \
	exit $$status

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
