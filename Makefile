# reconciler — see README.md.
GO      ?= go
BIN     := bin/reconciler

.PHONY: build dist run test test-deps test-objectstack bench chaos lint clean

# staticcheck is pinned: a new release must not turn CI red on its own.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Every package runs under the race detector in `make test` (the daemon
# binaries the process tests start are built with -race too).
RACE_PKGS ?= ./...

# The version, commit and dirty flag come from the build information.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/reconciler

# Release binaries in dist/ (static, -trimpath, linux/amd64 and arm64,
# SHA256SUMS), then a second build from scratch that must be byte-identical.
dist:
	GO=$(GO) scripts/dist.sh

# Runs the daemon on the embedded SQLite store with a small demo.
run: build
	scripts/demo.sh

# The tools the tests run: installed with apt-get when missing and make runs
# as root, else the run fails at once naming the packages.
test-deps:
	scripts/test-deps.sh test

# Lint first (a finding fails the run), then the tests with -race. Uses
# RECONCILER_TEST_DATABASE_URL when set, else a private throwaway PostgreSQL.
test: test-deps lint
	scripts/with-postgres.sh $(GO) test -race -count=1 -timeout 15m $(RACE_PKGS)

# Boots real ObjectStack 17.4.0 nodes (needs Node.js 20+, npm, redis-server,
# installed like test-deps; the pinned npm install is cached by
# scripts/objectstack/install.sh).
test-objectstack:
	scripts/test-deps.sh objectstack
	scripts/with-postgres.sh $(GO) test -tags objectstack -count=1 -p 1 -timeout 30m -v ./e2e/objectstack/...

bench: build
	scripts/with-postgres.sh scripts/bench.sh

chaos: build
	scripts/with-postgres.sh $(GO) test -count=1 -timeout 60m -run 'TestChaos' ./chaos/... -chaos.long

# gofmt, go vet, go.mod tidiness and staticcheck over both modules (the
# root one and bench/), the objectstack-tagged end-to-end suite included.
lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags objectstack ./...
	cd bench && $(GO) vet ./...
	$(GO) mod tidy -diff
	cd bench && $(GO) mod tidy -diff
	$(GO) run $(STATICCHECK) -tags objectstack ./...
	cd bench && $(GO) run $(STATICCHECK) ./...

clean:
	rm -rf bin demo dist
