# Kubernetes test bed (scripts/testbed/README.md): a one-node cluster on this machine.
#   make testbed-build   build Kubernetes, etcd, containerd, runc and CNI plugins into the cache
#   make testbed-up      start the cluster (root), wait for the node to be Ready
#   make testbed-down    stop it and put the host back
#   make testbed-test    run the smoke tests of test/testbed against the running cluster
# Tests that need the cluster carry the build tag "testbed" (go test -tags testbed ...), so a
# plain go test ./... never touches it; they fail, never skip, when it is not running. They find
# it through $(TESTBED_KUBECONFIG) (or $$NETCLASS_KUBECONFIG).

TESTBED_SCRIPTS := $(CURDIR)/scripts/testbed
TESTBED_KUBECONFIG ?= $(or $(NETCLASS_TESTBED_STATE),/run/netclass-testbed)/admin.kubeconfig

.PHONY: testbed-build testbed-up testbed-down testbed-test
testbed-build:
	bash $(TESTBED_SCRIPTS)/build.sh

testbed-up: testbed-build
	bash $(TESTBED_SCRIPTS)/up.sh

testbed-down:
	bash $(TESTBED_SCRIPTS)/down.sh

testbed-test:
	NETCLASS_KUBECONFIG=$(TESTBED_KUBECONFIG) $(GO) test -tags testbed -count=1 -timeout 10m ./test/testbed/...
