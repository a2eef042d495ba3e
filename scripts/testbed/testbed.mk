# Kubernetes test bed (scripts/testbed/README.md): a cluster of TESTBED_NODES nodes on this
# machine, node 1 in its own namespaces, the others in network and mount namespaces of theirs.
#   make testbed-build   build Kubernetes, etcd, containerd, runc and CNI plugins into the cache
#   make testbed-up      start the cluster (root), wait for every node to be Ready
#   make testbed-down    stop it and put the host back
#   make testbed-test    run the smoke tests of test/testbed against the running cluster
#   make testbed-deploy  install netclass on it as an operator does (image, conf/crd, conf/deploy)
#   make testbed-node-add [NODE=name], make testbed-node-remove NODE=name
# Tests that need the cluster carry the build tag "testbed" (go test -tags testbed ...), so a
# plain go test ./... never touches it; they fail, never skip, when it is not running. They find
# it through $(TESTBED_KUBECONFIG) (or $$NETCLASS_KUBECONFIG) and $(TESTBED_STATE)/env.

TESTBED_SCRIPTS := $(CURDIR)/scripts/testbed
TESTBED_STATE ?= $(or $(NETCLASS_TESTBED_STATE),/run/netclass-testbed)
TESTBED_KUBECONFIG ?= $(TESTBED_STATE)/admin.kubeconfig
TESTBED_NODES ?= 2
# The primary NetworkPolicy engine on the pods' eth0: none (default) or kube-network-policies.
TESTBED_PRIMARY_POLICY ?= $(or $(NETCLASS_TESTBED_PRIMARY_POLICY),none)
# Multus (thick plugin) in front of the primary network on every node: 0 (default) or 1.
TESTBED_MULTUS ?= $(or $(NETCLASS_TESTBED_MULTUS),0)

.PHONY: testbed-build testbed-up testbed-down testbed-test testbed-deploy testbed-undeploy \
	testbed-node-add testbed-node-remove
testbed-build:
	bash $(TESTBED_SCRIPTS)/build.sh

testbed-up: testbed-build
	TESTBED_NODES=$(TESTBED_NODES) NETCLASS_TESTBED_PRIMARY_POLICY=$(TESTBED_PRIMARY_POLICY) NETCLASS_TESTBED_MULTUS=$(TESTBED_MULTUS) bash $(TESTBED_SCRIPTS)/up.sh

testbed-down:
	bash $(TESTBED_SCRIPTS)/down.sh

testbed-test:
	NETCLASS_KUBECONFIG=$(TESTBED_KUBECONFIG) $(GO) test -tags testbed -count=1 -timeout 10m ./test/testbed/...

testbed-deploy: image
	bash $(TESTBED_SCRIPTS)/deploy.sh apply $(IMAGE_TAR)

testbed-undeploy:
	bash $(TESTBED_SCRIPTS)/deploy.sh delete $(IMAGE)

testbed-node-add:
	bash $(TESTBED_SCRIPTS)/node.sh add $(NODE)

testbed-node-remove:
	@test -n "$(NODE)" || { echo "usage: make testbed-node-remove NODE=<name>"; exit 1; }
	bash $(TESTBED_SCRIPTS)/node.sh remove $(NODE)

# `make install` and `make uninstall` (and so test-testbed and bench) put the plugins into, and
# take them out of, the CNI bin dir of every further node of a running test bed too (node 1's
# is this machine's $(CNI_BIN_DIR)). Nothing happens when no test bed runs or DESTDIR is set.
testbed_nodes_plugins = @if [ -z "$(DESTDIR)" ] && [ -s "$(TESTBED_STATE)/env" ]; then \
	bash $(TESTBED_SCRIPTS)/plugins.sh $(1) $(2); fi
