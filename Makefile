# reconciler — see README.md.
GO      ?= go
BIN     := bin/reconciler
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: build run test test-objectstack bench chaos lint clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/reconciler

# Runs the daemon on the embedded SQLite store with a small demo.
run: build
	scripts/demo.sh

# Uses RECONCILER_TEST_DATABASE_URL when set, else a private throwaway PostgreSQL.
test:
	$(GO) vet ./...
	scripts/with-postgres.sh $(GO) test -count=1 -timeout 15m ./...

# Boots real ObjectStack 17.4.0 nodes (needs Node.js 20+, npm, redis-server;
# the pinned npm install is cached by scripts/objectstack/install.sh).
test-objectstack:
	scripts/with-postgres.sh $(GO) test -tags objectstack -count=1 -p 1 -timeout 15m -v ./e2e/objectstack/...

bench: build
	scripts/with-postgres.sh scripts/bench.sh

chaos: build
	scripts/with-postgres.sh $(GO) test -count=1 -timeout 60m -run 'TestChaos' ./chaos/... -chaos.long

lint:
	gofmt -l . | (! grep .)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest ./...

clean:
	rm -rf bin demo
