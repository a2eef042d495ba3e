# Kubernetes test bed (scripts/testbed/README.md): a one-node cluster on this machine.
#   make testbed-build   build Kubernetes, etcd, containerd, runc and CNI plugins into the cache
#   make testbed-up      start the cluster (root), wait for the node to be Ready
#   make testbed-down    stop it and put the host back
#   make testbed-test    run the smoke tests of test/testbed against the running cluster
# Tests find the cluster through $(TESTBED_KUBECONFIG) (or $$NETCLASS_KUBECONFIG).

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
	NETCLASS_KUBECONFIG=$(TESTBED_KUBECONFIG) $(GO) test -count=1 -timeout 10m ./test/testbed/...
