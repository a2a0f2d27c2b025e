# sluice — build, test and run targets. `make help` lists them.
GO        ?= go
BIN       ?= bin
PKGS      := ./...
GOFLAGS_TEST ?= -race -count=1 -timeout 20m
# The chart and dashboard checks: a Go module of their own (Kubernetes'
# types and the PromQL parser stay out of go.mod); make test runs them
# after the main module, with bin/helm when make helm built it.
DEPLOYTEST := internal/deploytest
# The end-to-end trace check: a Go module of its own too; make test-traces
# runs it against the bin/jaeger of make jaeger.
TRACETEST := internal/tracetest

.PHONY: help build test lint fmt vet demo demo-keep fuzz chaos chaos-cluster soak soak-quick partition cluster-faults explore clean

DEMO_HTTP ?= 127.0.0.1:9090

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# -buildvcs=auto stamps the VCS commit into the binaries (--version, the
# sluice_build_info metric) even where GOFLAGS says -buildvcs=false; a
# build outside a git clone (or in a git worktree, which go does not read)
# says "commit unknown".
build: ## build worker, enqueue, simulator and demo into ./bin
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -o $(BIN)/ ./cmd/...

# go test -json through internal/testprogress: go test's own lines (each
# package's ok / FAIL line, failed tests' output) plus a line as each
# package starts and ends, one a minute naming those still running, and the
# total time; the exit status is go test's.
test: ## run every test with the race detector (what CI runs; takes minutes, prints progress per package)
	@mkdir -p $(BIN)
	@$(GO) build -o $(BIN)/testprogress ./internal/testprogress
	$(BIN)/testprogress -total $$($(GO) list $(PKGS) | wc -l) -- $(GO) test -json $(GOFLAGS_TEST) $(PKGS)
	cd $(DEPLOYTEST) && $(GO) test $(GOFLAGS_TEST) ./...

lint: vet ## go vet, and fail when gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: ## go vet (the main module, the River peer's, bench/riverpeer, the deploy checks', internal/deploytest, and the trace check's, internal/tracetest)
	$(GO) vet $(PKGS)
	cd bench/riverpeer && $(GO) vet ./...
	cd $(DEPLOYTEST) && $(GO) vet ./...
	cd $(TRACETEST) && $(GO) vet ./...

fmt: ## gofmt every Go file in place
	gofmt -w $$(git ls-files '*.go')

demo: ## run every scenario end to end on the embedded default (prints the web console's address)
	$(GO) run ./cmd/demo

demo-keep: ## the demo, then keep the embedded default and its web console up until Ctrl-C (DEMO_HTTP=127.0.0.1:9090)
	$(GO) run ./cmd/demo -keep -http $(DEMO_HTTP)

FUZZTIME ?= 20s
fuzz: ## run every fuzz target for FUZZTIME each (default 20s)
	@set -e; for spec in $$($(GO) test -list 'Fuzz.*' ./... 2>/dev/null | awk '/^Fuzz/ {f[n++]=$$1} /^ok/ {for (i = 0; i < n; i++) print $$2":"f[i]; n = 0}'); do \
	  pkg=$${spec%%:*}; fn=$${spec##*:}; echo "== $$pkg $$fn"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; done

CHAOS_JOBS  ?= 2000
CHAOS_FLAGS ?=
CHAOS_SKEW  ?=
CHAOS_SKEW_MEDIA_TASKS ?= 8
chaos: ## long reliability run: CHAOS_JOBS jobs (2000), kills, NATS restart, S3 outage (5-20 min); CHAOS_SKEW=90s: clocks at -90s, 0, +90s and a fleet media quota
	@mkdir -p $(BIN)
ifeq ($(CHAOS_SKEW),)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker ./cmd/chaos
	$(BIN)/chaos -jobs $(CHAOS_JOBS) -worker $(BIN)/worker $(CHAOS_FLAGS)
else
	@mkdir -p $(BIN)/faults
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/chaos
	CGO_ENABLED=0 $(GO) build -trimpath -tags faults -o $(BIN)/faults/ ./cmd/worker
	$(BIN)/chaos -jobs $(CHAOS_JOBS) -worker $(BIN)/faults/worker -skew $(CHAOS_SKEW) -fleet-media-tasks $(CHAOS_SKEW_MEDIA_TASKS) $(CHAOS_FLAGS)
endif

CHAOS_CLUSTER_JOBS  ?= 720
CHAOS_CLUSTER_MEDIA_TASKS ?= 8
CHAOS_CLUSTER_FLAGS ?=
chaos-cluster: images ## the chaos run on containers: TLS three-node NATS cluster, kill -9/pause/restart/partition of nodes, worker kills, a fleet media quota of 8 (about 5 min)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/chaos
	$(BIN)/chaos -containers -jobs $(CHAOS_CLUSTER_JOBS) -rate 4 -fleet-media-tasks $(CHAOS_CLUSTER_MEDIA_TASKS) $(CHAOS_CLUSTER_FLAGS)

# The soak: the chaos run at a low rate for SOAK_DURATION, every worker
# process's memory, goroutines, open files and NATS subscriptions sampled
# every SOAK_SAMPLE; it fails on growth past the highest of each process's
# first stretch of life (a fifth of the run, at most 10 min) x 1.5 plus a
# small slack, and prints the series.
SOAK_DURATION    ?= 1h
SOAK_SAMPLE      ?= 1m
SOAK_MEDIA_TASKS ?= 8
SOAK_RSS_SLACK   ?= 16
SOAK_FLAGS       ?=
soak: ## an hour (SOAK_DURATION) of mixed jobs under low-rate faults; fails when a worker's RSS, goroutines, open files or NATS subscriptions grow (SOAK_SAMPLE=1m)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker ./cmd/chaos
	$(BIN)/chaos -soak $(SOAK_DURATION) -sample $(SOAK_SAMPLE) -fleet-media-tasks $(SOAK_MEDIA_TASKS) -worker $(BIN)/worker -rss-slack $(SOAK_RSS_SLACK) $(SOAK_FLAGS)

# A minute's baseline ends before a worker's heap reaches its working
# size (the hour's soak: 48 MiB at first, 86 MiB steady), so the quick
# soak allows 64 MiB of RSS slack; goroutines, files and subscriptions
# keep their bounds.
soak-quick: ## CI's soak: 5 minutes, a 1-minute baseline, samples every 15 s, 64 MiB RSS slack (about 7 min)
	@$(MAKE) --no-print-directory soak SOAK_DURATION=5m SOAK_SAMPLE=15s SOAK_RSS_SLACK=64

partition: ## the partition suite's long variant: 20 s isolations, the default 10 s move bound; prints the figures (about 3 min)
	@out=$$(mktemp); status=0; \
	SLUICE_PARTITION_LONG=1 $(GO) test -race -count=1 -timeout 15m -run 'TestPartition' -v ./internal/worker/ >$$out 2>&1 || status=$$?; \
	if [ $$status -ne 0 ]; then cat $$out; else grep -E 'figure|^(---|ok)' $$out; fi; rm -f $$out; exit $$status

explore: ## the decision-point explorer's long run: EXPLORE_SCHEDULES seeded schedules (3000) from EXPLORE_SEED (1), EXPLORE_PARALLEL at once (32); prints the figures and each failure's replay command (minutes)
	@out=$$(mktemp); status=0; \
	EXPLORE_SCHEDULES=$${EXPLORE_SCHEDULES:-3000} EXPLORE_PARALLEL=$${EXPLORE_PARALLEL:-32} $(GO) test -count=1 -timeout 120m -run 'TestExplore$$' -v ./internal/explore/ >$$out 2>&1 || status=$$?; \
	grep -E 'seed [0-9]+:|decisions:|replay:|explored|^(ok|FAIL)' $$out; rm -f $$out; exit $$status

cluster-faults: ## the in-process cluster fault suite's long variant: 600 jobs, three rounds of leader kills, restarts and step-downs, worker kills; prints the figures (3-6 min)
	@out=$$(mktemp); status=0; \
	SLUICE_CLUSTER_LONG=1 $(GO) test -race -count=1 -timeout 20m -run 'TestClusterFaults|TestClusterRedeliversHeldJobs' -v ./internal/chaos/ >$$out 2>&1 || status=$$?; \
	if [ $$status -ne 0 ]; then cat $$out; else grep -E 'figure|^(---|ok)' $$out; fi; rm -f $$out; exit $$status

clean: ## remove ./bin and ./data (the dev worker's default SLUICE_DATA_DIR); make demo removes its own files
	rm -rf $(BIN) data

# Local images and the compose stack (images/, docker-compose.yml, config/).
# COMPOSE is `docker compose` where that exists, else docker-compose.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)

.PHONY: images compose-up compose-demo compose-down compose-smoke

images: ## build the sluice-* images (tag SLUICE_IMAGE_TAG, default dev) FROM scratch from Go modules (pulls nothing)
	GO=$(GO) images/build.sh

compose-up: images ## start NATS, versitygw, the simulator and WORKERS workers (default 1)
	COMPOSE="$(COMPOSE)" images/compose.sh up

compose-demo: ## run the demo against the compose stack (after make compose-up)
	COMPOSE="$(COMPOSE)" GO=$(GO) images/compose.sh demo

compose-down: ## stop the compose stack (DOWN_FLAGS=-v also removes its volumes)
	COMPOSE="$(COMPOSE)" images/compose.sh down

compose-smoke: images ## CI smoke test: a throw-away stack, 20 mixed jobs, all must succeed
	COMPOSE="$(COMPOSE)" images/compose.sh smoke

# The secured cluster stack (docker-compose.cluster.yml): three NATS servers
# with JetStream at R3, TLS and least-privilege users; its CA, certificates
# and passwords are made under dist/cluster on the first cluster-up.
.PHONY: cluster-up cluster-demo cluster-down cluster-smoke

cluster-up: images ## start the TLS three-server NATS cluster, versitygw, the simulator and WORKERS workers (default 1)
	SLUICE_STACK=cluster COMPOSE="$(COMPOSE)" GO=$(GO) images/compose.sh up

cluster-demo: ## submit 20 mixed jobs to the cluster stack as the producer user over TLS, wait, list them
	SLUICE_STACK=cluster COMPOSE="$(COMPOSE)" GO=$(GO) images/compose.sh demo

cluster-down: ## stop the cluster stack (DOWN_FLAGS=-v also removes its volumes; dist/cluster stays)
	SLUICE_STACK=cluster COMPOSE="$(COMPOSE)" GO=$(GO) images/compose.sh down

cluster-smoke: images ## a throw-away cluster stack, 20 mixed jobs over TLS as producer, all must succeed
	SLUICE_STACK=cluster COMPOSE="$(COMPOSE)" GO=$(GO) images/compose.sh smoke

# Benchmarks (BENCHMARKS.md): Go benchmarks, then the load harness (cmd/bench)
# measuring P1-P5 side by side with their floors, and Q1, the fleet quota
# across three worker processes (about 4 minutes more), F1, its cost per
# job with 16 workers against 3 (about 4 minutes more), Q2, the fleet's
# back-pressure under an account's concurrency limit (about 5 minutes
# more), W1 and W2, the webhooks' latency and a receiver's 10-minute
# outage (about 20 minutes more), then the River +
# Postgres peer when Postgres is installed (make bench-peer, about 7
# minutes more). bench-quick is CI's smoke check of the same code paths
# with smaller counts (Q2 as a 30 s smoke, W1 as 300 jobs, B1 as a backlog of
# 20,000 with fair scheduling; without Q1, T1, U1 and W2 unless -only names them, without the peer):
# it prints the figures and fails only when one cannot be measured, never
# on a number. BENCH_FLAGS go to the harness (e.g. -only P1,P5 -dir
# /tmp/bench -profile /tmp/prof, or -only Q1 for the fleet quota alone).
BENCH_FLAGS ?=
# make bench-backlog: B1, a backlog of BACKLOG jobs (a million) in plain FIFO
# order and with fair scheduling, drain windows with the whole backlog and
# with about 10,000 waiting (about 15 minutes; not part of make bench).
BACKLOG       ?= 1000000
BACKLOG_MODES ?= fifo,fair

.PHONY: bench bench-quick bench-peer bench-backlog riverpeer versitygw

bench: versitygw ## benchmarks: Go benchmarks + load harness P1-P5, the HTTP API H1, the fleet quota Q1, back-pressure Q2, tenants T1, quota utilization U1, the fleet quota with 16 workers F1, webhooks W1, W2 and compute status C1 (about 80 min), then bench-peer if Postgres is installed (BENCHMARKS.md)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker ./cmd/bench
	$(GO) test -run '^$$' -bench . -benchmem ./internal/runner ./internal/state
	$(GO) test -run '^$$' -bench 'Copy$$' -benchtime 5x ./internal/artifacts
	$(GO) test -run '^$$' -bench 'PutMemory' -benchtime 1x ./internal/artifacts
	$(GO) test -run '^$$' -bench 'VideoJobs$$' -benchtime 1000x ./internal/worker
	$(GO) test -run '^$$' -bench 'VideoJobsLimits' -benchtime 400x ./internal/worker
	$(GO) test -count=1 -run 'TestNATSOperationsPerJob' -v ./internal/worker | grep -v '^=== '
	$(GO) test -run '^$$' -bench 'HeldTasks' -benchtime 10000x ./internal/worker
	$(GO) test -run '^$$' -bench 'ComputeLoginsPerDay' -benchtime 30x ./internal/apiclient
	$(BIN)/bench run -worker $(BIN)/worker $(BENCH_FLAGS)
	@if $(PG_FOUND); then $(MAKE) --no-print-directory bench-peer; else echo "$(PG_MISSING): skipping the River + Postgres peer (make bench-peer)"; fi

bench-quick: versitygw ## smoke variant of make bench for CI (about 4 min): prints the figures, never fails on them
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker ./cmd/bench
	$(GO) test -run '^$$' -bench . -benchtime 1x ./internal/runner ./internal/state
	$(GO) test -run '^$$' -bench 'VideoJobs$$|HeldTasks' -benchtime 100x ./internal/worker
	$(GO) test -run '^$$' -bench 'ComputeLoginsPerDay' -benchtime 3x ./internal/apiclient
	$(BIN)/bench run -quick -worker $(BIN)/worker $(BENCH_FLAGS)

bench-backlog: ## B1: a backlog of BACKLOG jobs (1000000) drained in FIFO order and with fair scheduling (about 15 min; BACKLOG_MODES=fifo or fair for one)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker ./cmd/bench
	$(BIN)/bench run -only B1 -backlog $(BACKLOG) -backlog-modes $(BACKLOG_MODES) -worker $(BIN)/worker $(BENCH_FLAGS)

# The River + Postgres peer (BENCHMARKS.md, "sluice and River"): bench/riverpeer
# is a Go module of its own (River and pgx stay out of go.mod), built into
# ./bin; Postgres is Debian's (apt-get install postgresql), started by the
# harness on a loopback port in a temporary directory. PEER_FLAGS go to
# `bench peer` (e.g. -pairs 3 -dir /tmp/peer). bench-peer prints the whole
# comparison table; make bench runs it when Postgres is installed.
PG_BIN     ?= /usr/lib/postgresql
PEER_FLAGS ?=
PG_FOUND   := { [ -x $(PG_BIN)/bin/postgres ] || ls $(PG_BIN)/*/bin/postgres; } >/dev/null 2>&1
PG_MISSING := no Postgres server binaries in $(PG_BIN)/<version>/bin (apt-get install postgresql)

riverpeer: ## build the River + Postgres peer (bench/riverpeer, its own Go module) into ./bin
	@mkdir -p $(BIN)
	cd bench/riverpeer && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $(BIN))/riverpeer .

bench-peer: versitygw riverpeer ## sluice against River + Postgres: alternating passes, medians, CPU per job (about 7 min; needs postgresql)
	@if ! $(PG_FOUND); then echo "bench-peer: $(PG_MISSING)"; exit 1; fi
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/worker ./cmd/bench
	$(BIN)/bench peer -worker $(BIN)/worker -postgres $(PG_BIN) -label "$$(git describe --always --dirty 2>/dev/null || echo 'commit unknown')" $(PEER_FLAGS)

# P4's store: versitygw at the version pinned as a Go tool in go.mod, built
# like images/build.sh does (CGO_ENABLED=0, -trimpath, so a prior
# `make images` leaves only a link to do) and only when its key changed: the
# Go version plus every module version it is built from. About 2 1/2 min on a
# cold build cache.
VGW_MOD := github.com/versity/versitygw
versitygw: ## build the pinned versitygw into ./bin (P4's store) unless it is up to date
	@mkdir -p $(BIN)
	@key=$$({ $(GO) version; $(GO) list -deps -f '{{with .Module}}{{.Path}}@{{.Version}}{{end}}' $(VGW_MOD)/cmd/versitygw | sort -u; } | sha256sum | cut -d' ' -f1) && \
	if [ -x $(BIN)/versitygw ] && [ "$$(cat $(BIN)/versitygw.key 2>/dev/null)" = "$$key" ]; then \
	  echo "$(BIN)/versitygw is up to date"; \
	else \
	  v=$$($(GO) list -m -f '{{.Version}}' $(VGW_MOD)) && echo "building $(BIN)/versitygw $$v (a minute or two on a cold cache)" && \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.Version=$$v -X main.Build=$$v -X main.BuildTime=module" \
	    -o $(BIN)/versitygw $(VGW_MOD)/cmd/versitygw && echo "$$key" > $(BIN)/versitygw.key; \
	fi

# Helm for the chart's checks (internal/deploytest, deploy/helm): the real
# Helm, built from its Go module at HELM_VERSION the way Helm's own Makefile
# does (its version, and the Kubernetes version that lint and template
# assume: that of the k8s.io/client-go Helm is built with), into ./bin unless
# that version is there already. A few minutes on a cold build cache.
HELM_VERSION ?= v3.22.0
HELM_MOD     := helm.sh/helm/v3
.PHONY: helm
helm: ## build the pinned Helm into ./bin (what the chart tests render with)
	@mkdir -p $(BIN)
	@if [ -x $(BIN)/helm ] && [ "$$($(BIN)/helm version --template '{{.Version}}' 2>/dev/null)" = "$(HELM_VERSION)" ]; then \
	  echo "$(BIN)/helm $(HELM_VERSION) is up to date"; \
	else \
	  gomod=$$($(GO) mod download -json $(HELM_MOD)@$(HELM_VERSION) | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p') && \
	  minor=$$(sed -n 's#^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$$gomod") && \
	  [ -n "$$minor" ] && echo "building $(BIN)/helm $(HELM_VERSION) for Kubernetes 1.$$minor (a few minutes on a cold cache)" && \
	  GOBIN=$(abspath $(BIN)) CGO_ENABLED=0 $(GO) install -trimpath -ldflags "-s -w \
	    -X $(HELM_MOD)/internal/version.version=$(HELM_VERSION) \
	    -X $(HELM_MOD)/pkg/lint/rules.k8sVersionMajor=1 -X $(HELM_MOD)/pkg/lint/rules.k8sVersionMinor=$$minor \
	    -X $(HELM_MOD)/pkg/chartutil.k8sVersionMajor=1 -X $(HELM_MOD)/pkg/chartutil.k8sVersionMinor=$$minor" \
	    $(HELM_MOD)/cmd/helm@$(HELM_VERSION); \
	fi

# Jaeger v2 for the trace check (internal/tracetest): its all-in-one
# (cmd/jaeger; the module keeps its v1.x tags), at the version pinned as a
# tool in internal/tracetest/jaeger/go.mod, built into ./bin unless its key
# changed: the Go version plus every module version it is built from. That
# module holds nothing else, so Jaeger builds with its own dependencies'
# versions: with sluice's (newer otelhttp, Prometheus client) it does not
# compile, and its graph stays out of go.mod. Built from the module it
# serves no UI, only a placeholder page: its web assets are built with npm,
# outside the module. About 20 minutes or more on a cold build cache on 2 cores.
JAEGER_MOD  := github.com/jaegertracing/jaeger
JAEGER_TOOL := $(TRACETEST)/jaeger
.PHONY: jaeger test-traces
jaeger: ## build the pinned Jaeger v2 into ./bin (the trace backend of make test-traces; long on a cold cache)
	@mkdir -p $(BIN)
	@bin=$(abspath $(BIN)) && cd $(JAEGER_TOOL) && \
	key=$$({ $(GO) version; $(GO) list -deps -f '{{with .Module}}{{.Path}}@{{.Version}}{{end}}' $(JAEGER_MOD)/cmd/jaeger | sort -u; } | sha256sum | cut -d' ' -f1) && \
	if [ -x $$bin/jaeger ] && [ "$$(cat $$bin/jaeger.key 2>/dev/null)" = "$$key" ]; then \
	  echo "$(BIN)/jaeger is up to date"; \
	else \
	  v=$$($(GO) list -m -f '{{.Version}}' $(JAEGER_MOD)) && echo "building $(BIN)/jaeger $$v (20 minutes or more on a cold cache)" && \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X $(JAEGER_MOD)/internal/version.latestVersion=$$v" \
	    -o $$bin/jaeger $(JAEGER_MOD)/cmd/jaeger && echo "$$key" > $$bin/jaeger.key; \
	fi

test-traces: ## a job's trace end to end in Jaeger (internal/tracetest): skips without bin/jaeger, fails without it in CI
	cd $(TRACETEST) && $(GO) test $(GOFLAGS_TEST) ./...
