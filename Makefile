# sluice — build, test and run targets. `make help` lists them.
GO        ?= go
BIN       ?= bin
PKGS      := ./...
GOFLAGS_TEST ?= -race -count=1 -timeout 20m

.PHONY: help build test lint fmt vet demo fuzz clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build worker, enqueue, simulator and demo into ./bin
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/...

test: ## run every test with the race detector (what CI runs)
	$(GO) test $(GOFLAGS_TEST) $(PKGS)

lint: vet ## go vet, and fail when gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet $(PKGS)

fmt: ## gofmt every Go file in place
	gofmt -w $$(git ls-files '*.go')

demo: ## run every scenario end to end on the embedded default
	$(GO) run ./cmd/demo

FUZZTIME ?= 20s
fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@set -e; for spec in $$($(GO) test -list 'Fuzz.*' ./... 2>/dev/null | awk '/^Fuzz/ {f[n++]=$$1} /^ok/ {for (i = 0; i < n; i++) print $$2":"f[i]; n = 0}'); do \
	  pkg=$${spec%%:*}; fn=$${spec##*:}; echo "== $$pkg $$fn"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; done

clean: ## remove build output and the demo's data
	rm -rf $(BIN) data
