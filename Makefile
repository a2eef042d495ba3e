# netclass — build, test, demo and benchmark entry points.
# `make demo` and `make test` run as root and install what they need
# (scripts/deps.sh: Debian packages, upstream CNI plugins; Go tools pinned below).

SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
CACHE := $(CURDIR)/.cache
DESTDIR ?=
CNI_BIN_DIR ?= /opt/cni/bin
export GOFLAGS := -buildvcs=false
export PATH := $(PATH):/usr/local/go/bin

# The CNI plugins netclass ships: every cmd/netclass-* but the daemons and tools.
PLUGINS := $(filter-out netclass-dra netclass-controller netclass-demo,$(notdir $(wildcard cmd/netclass-*)))
# Upstream plugins (IPAM delegates, chains in tests and benchmarks), cnitool.
UPSTREAM_CNI := $(CACHE)/cni
export NETCLASS_UPSTREAM_CNI := $(UPSTREAM_CNI)
# Plugin directory the tests use: ours and upstream's side by side.
TEST_CNI := $(CACHE)/test-cni

STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(CACHE)/tools/staticcheck-$(STATICCHECK_VERSION)
# Helm, built from the Go module proxy like staticcheck: the chart's lint and golden
# check, and test/deploy's chart install (which finds it through NETCLASS_HELM).
HELM_VERSION := v3.22.0
HELM := $(CACHE)/tools/helm-$(HELM_VERSION)
export NETCLASS_HELM := $(HELM)
CHART := conf/helm/netclass
CHART_GOLDEN := conf/helm/testdata

# Packages whose tests run on this machine's kernel (every one; the VM suite
# adds the stock-kernel ones).
TEST_PKGS ?= ./...
TEST_TIMEOUT ?= 30m
# The VM suite: stock-kernel tests (build tag vmtest) and the whole privileged
# plugin suite once more, on a distribution kernel.
VM_PKGS := ./plugins/... ./shim/nodedevices/... ./conf/examples/... ./test/vm/...

.PHONY: all build install uninstall deps test test-host test-testbed test-scale test-helm helm-golden lint fuzz demo demo-cluster bench clean
all: build

# Static binaries, like upstream's: a CNI plugin is exec'd per call, and a
# dynamically linked one pays the loader every time.
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BIN)/ ./cmd/...

# On a running test bed, every node's CNI bin dir (scripts/testbed/testbed.mk).
install: build
	install -d $(DESTDIR)$(CNI_BIN_DIR)
	install -m 0755 $(addprefix $(BIN)/,$(PLUGINS)) $(DESTDIR)$(CNI_BIN_DIR)/
	$(call testbed_nodes_plugins,install,$(addprefix $(BIN)/,$(PLUGINS)))

uninstall:
	rm -f $(addprefix $(DESTDIR)$(CNI_BIN_DIR)/,$(PLUGINS))
	$(call testbed_nodes_plugins,uninstall,$(PLUGINS))

deps:
	scripts/deps.sh

# The directory tests execute plugins from: fresh builds of ours, upstream's.
$(TEST_CNI): build deps
	@rm -rf $(TEST_CNI) && mkdir -p $(TEST_CNI)
	@ln -s $(addprefix $(BIN)/,$(PLUGINS)) $(TEST_CNI)/
	@for f in $(UPSTREAM_CNI)/*; do ln -s $$f $(TEST_CNI)/; done

# Everything: unit and privileged netns tests with real traffic and the fuzz
# seed corpora (go test runs them) on this kernel; generated files; the VM
# suite on a stock distribution kernel; the Kubernetes test bed suite.
test: test-host verify-generated test-helm test-vm test-testbed

# test/vm's own host-side tests boot the VM, hence vm-deps.
test-host: $(TEST_CNI) vm-deps
	NETCLASS_CNI_PATH=$(TEST_CNI) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_PKGS)

# The VM suite runs the plugins from the same directory (the guest sees the
# host's filesystem).
test-vm: $(TEST_CNI)
export NETCLASS_CNI_PATH := $(TEST_CNI)

# Packages with tests against the real cluster carry the build tag testbed.
TESTBED_PKGS = $(shell grep -rl --include='*_test.go' -e '^//go:build testbed' . | xargs -r -n1 dirname | sort -u)
TESTBED_TIMEOUT ?= 40m

# Brings the test bed up (building it once, cached), installs the plugins
# next to its primary CNI, runs the suite, and always puts the host back.
test-testbed: build $(HELM)
	$(MAKE) testbed-up
	$(MAKE) install
	status=0; NETCLASS_KUBECONFIG=$(TESTBED_KUBECONFIG) $(GO) test -tags testbed -count=1 -p 1 \
		-timeout $(TESTBED_TIMEOUT) $(TESTBED_PKGS) || status=$$?; \
	$(MAKE) uninstall; $(MAKE) testbed-down; exit $$status

# The churn at scale (test/scale, issue 26): three nodes (the test adds a third to the bed), at
# least 1000 pods with claims created and deleted in waves for at least 10 minutes, then
# nothing may be left.
# Too long for `make test` (CI); NETCLASS_SCALE_{PODS,WAVE,NODES,DURATION} resize it.
SCALE_TIMEOUT ?= 60m
test-scale: build $(HELM)
	$(MAKE) testbed-up
	$(MAKE) install
	status=0; NETCLASS_KUBECONFIG=$(TESTBED_KUBECONFIG) $(GO) test -tags scale -count=1 -v -run TestChurn \
		-timeout $(SCALE_TIMEOUT) ./test/scale/ || status=$$?; \
	$(MAKE) uninstall; $(MAKE) testbed-down; exit $$status

# gofmt, go mod tidy, go vet, staticcheck (it skips api/generated: code-generator's output
# is not ours to edit).
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy (run go mod tidy):"; $(GO) mod tidy -diff; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags vmtest,testbed,scale ./...
	$(STATICCHECK) $$($(GO) list ./... | grep -v /api/generated/)
	$(STATICCHECK) -tags vmtest,testbed,scale $$($(GO) list -tags vmtest,testbed,scale ./... | grep -v /api/generated/)

$(STATICCHECK):
	@mkdir -p $(dir $@)
	GOBIN=$(CACHE)/tools/tmp $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(CACHE)/tools/tmp/staticcheck $@ && rmdir $(CACHE)/tools/tmp

$(HELM):
	@mkdir -p $(dir $@)
	GOBIN=$(CACHE)/tools/tmp-helm CGO_ENABLED=0 $(GO) install -trimpath -ldflags="-s -w" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(CACHE)/tools/tmp-helm/helm $@ && rmdir $(CACHE)/tools/tmp-helm

# The chart: helm lint, and helm template equal to the golden files, for the default values
# (which conf/helm/chart_test.go holds equal to conf/deploy) and for custom-values.yaml.
test-helm: $(HELM)
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) -f $(CHART_GOLDEN)/custom-values.yaml
	$(HELM) template netclass $(CHART) --namespace netclass-system | diff -u $(CHART_GOLDEN)/default.yaml -
	$(HELM) template netclass $(CHART) --namespace netclass-system -f $(CHART_GOLDEN)/custom-values.yaml | \
		diff -u $(CHART_GOLDEN)/custom.yaml -

# After changing the chart (or conf/crd): the CRDs and the golden files, rewritten.
helm-golden: $(HELM)
	cp conf/crd/*.yaml $(CHART)/crds/
	cp conf/crd/thirdparty/*.yaml $(CHART)/crds/thirdparty/
	$(HELM) template netclass $(CHART) --namespace netclass-system > $(CHART_GOLDEN)/default.yaml
	$(HELM) template netclass $(CHART) --namespace netclass-system -f $(CHART_GOLDEN)/custom-values.yaml > $(CHART_GOLDEN)/custom.yaml

# Fuzz every parser for FUZZTIME each (the seed corpora already run in `make test`).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf $(BIN) $(TEST_CNI)

# Fragments owned by the harnesses (VM runner, Kubernetes test bed, API generation).
-include scripts/*/*.mk

# The main job on the embedded scenario, no cluster: prints what it verified.
demo: $(TEST_CNI)
	$(BIN)/netclass-demo --cni-path $(TEST_CNI)

# The Kubernetes side, one command: a two-node test bed (built once, cached), netclass from
# its Helm chart, claims, NetworkQoS and NetworkPolicy on running pods, each check printed;
# the bed is always taken down, also on Ctrl-C (scripts/demo-cluster.sh).
demo-cluster: deps $(HELM)
	bash scripts/demo-cluster.sh

# Benchmarks: plugin ADD+DEL against the upstream chain and the node agent
# (no cluster needed; the hostile-tenant one with fewer edits, each is
# long), latency under load in the VM (bench-vm), then the Kubernetes side
# on the test bed (500 PodNetworks published, 50 pods started at once),
# which is brought up and always torn down. A benchmark that misses its
# target fails; the later parts run after a failed one too, and make exits
# non-zero if any failed. No line runs a benchmark next to $(MAKE): `make -n
# bench` runs none.
BENCH_N ?= 100
BENCH_STATUS = $(BIN)/bench-status
bench: $(TEST_CNI)
	mkdir -p $(BIN); $(GO) test -run '^$$' -bench . -skip HostileTenant -benchtime $(BENCH_N)x ./test/bench/; echo "host $$?" > $(BENCH_STATUS)
	$(GO) test -run '^$$' -bench HostileTenant -benchtime 10x ./test/bench/; echo "hostile $$?" >> $(BENCH_STATUS)
	$(MAKE) bench-vm; echo "vm $$?" >> $(BENCH_STATUS)
	$(MAKE) testbed-up
	$(MAKE) install
	NETCLASS_KUBECONFIG=$(TESTBED_KUBECONFIG) $(GO) test -tags testbed -run '^$$' -bench DRA \
		-benchtime 1x -timeout 30m ./test/bench/; echo "testbed $$?" >> $(BENCH_STATUS)
	$(MAKE) uninstall
	$(MAKE) testbed-down
	@cat $(BENCH_STATUS); ! grep -qv ' 0$$' $(BENCH_STATUS)

# Latency under load (test/bench, tag vmtest): a pod's egress shaped to 20 Mbit/s with tbf
# alone, fq_codel under it (the default) and cake, saturated by a TCP flow while another
# pings through the shaper. In the VM: this machine's kernel has neither fq_codel nor cake.
# Two vCPUs, so that the bulk flow's sender and receiver do not share one emulated CPU.
.PHONY: bench-vm
bench-vm: vm-deps $(BIN)/vmexec $(TEST_CNI)
	NETCLASS_VM_CPUS=2 $(GO) test -tags vmtest -exec $(BIN)/vmexec -run '^$$' -bench LatencyUnderLoad \
		-benchtime 1x -timeout $(VM_TEST_TIMEOUT) ./test/bench/

# The container image of conf/deploy (an OCI archive; no container engine
# needed): import it with `ctr -n k8s.io images import --platform linux/amd64 $(IMAGE_TAR)`.
IMAGE ?= localhost/netclass/netclass:latest
IMAGE_TAR ?= $(BIN)/netclass-image.tar
.PHONY: image
image: build
	scripts/image.sh $(IMAGE_TAR) $(IMAGE)
