#!/usr/bin/env bash
# make demo-cluster: the Kubernetes side of netclass, from nothing to verified and back.
# Brings up a two-node test bed on this machine (building Kubernetes, containerd and the
# rest once, cached: 7 minutes from empty caches on 2 cores), installs netclass from its Helm
# chart, runs TestDemoCluster (test/deploy/demo_test.go: the NetworkClass flow, a VXLAN
# Network across the nodes, NetworkQoS and NetworkPolicy on running pods, each check
# printed), and always takes the bed down, also on Ctrl-C (the demo stops after its current
# step and removes what it made first).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$SECONDS
step() { printf '==> [%4ss] %s\n' "$((SECONDS - started))" "$*"; }

down() {
  local status=$?
  step "taking the test bed down"
  make -s testbed-down >/dev/null 2>&1 || { echo "make testbed-down failed: run it again" >&2; status=1; }
  step "done (exit $status)"
  exit "$status"
}
trap down EXIT
trap 'exit 130' INT TERM

step "building the test bed if it is not cached, and starting two nodes (make testbed-up)"
make -s testbed-up TESTBED_NODES=2 >/dev/null || exit 1
step "building the demo (go test -c ./test/deploy/)"
go test -c -tags testbed -o bin/deploy.test ./test/deploy/ || exit 1
step "running the demo: image, Helm chart, pods, claims, NetworkQoS, NetworkPolicy"
(cd test/deploy && NETCLASS_KUBECONFIG=${TESTBED_KUBECONFIG:-/run/netclass-testbed/admin.kubeconfig} \
  ../../bin/deploy.test -test.run '^TestDemoCluster$' -test.count 1 -test.timeout 30m)
