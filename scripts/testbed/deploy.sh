#!/usr/bin/env bash
# Install netclass on the running test bed the way an operator does (README.md, "Deploying
# netclass"): the image imported into every node's containerd, `kubectl apply` of conf/crd/ and
# of conf/deploy/, changed only where this test bed differs from a production cluster (see
# adapt below), then wait until netclass-dra is Ready on every node and the controller runs.
#   deploy.sh apply IMAGE_TAR           (make testbed-deploy builds the image first)
#   deploy.sh delete [IMAGE]            remove it again (not the namespace, not the CRDs)
# For an install by other means (the Helm chart):
#   deploy.sh import IMAGE_TAR          the image into every node's containerd
#   deploy.sh wait                      until netclass-dra is Ready on every node, the controller runs
#   deploy.sh release [IMAGE]           after the workloads were deleted: wait until their pods are
#                                       gone, remove the slices they left and the image
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

KUBECTL=("$TESTBED_BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH")
NAMESPACE=netclass-system
FIELD_MANAGER=netclass-testbed-deploy
ROLLOUT_TIMEOUT=${NETCLASS_TESTBED_DEPLOY_TIMEOUT:-180}   # seconds

nodes() { env_value "$STATE_DIR/env" NETCLASS_TESTBED_NODES; }

# ctr_on NODE ARGS...: ctr against the node's containerd, in the node's namespaces.
ctr_on() {
  local node=$1
  shift
  "$here/node-exec.sh" "$node" -- "$TESTBED_BIN/ctr" --address "$CONTAINERD_SOCKET" -n k8s.io "$@" \
    2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2)
}

# adapt: conf/deploy's objects (a stream of JSON) with the test bed's only differences:
#   - it runs no kube-proxy, so the workloads reach the API server at its address on the
#     underlay, reachable from every node (the controller on the host network for that);
#   - its containerd mounts pod network namespaces under its state directory (on every node:
#     nodes 2..N bind their own there), which netclass-dra's netns volume must show;
#   - on a node's host network two controller replicas would bind the same probe and metrics
#     ports: one replica runs (the Lease makes the second a stand-by only anyway).
adapt() {
  local netns="$STATE_DIR/containerd/io.containerd.grpc.v1.cri/netns"
  jq -c --arg host "$NODE_IP" --arg port "$APISERVER_PORT" --arg netns "$netns" '
    def apiserver: (.env // []) + [{name: "KUBERNETES_SERVICE_HOST", value: $host},
                                   {name: "KUBERNETES_SERVICE_PORT", value: $port}];
    if .kind == "DaemonSet" or .kind == "Deployment" then
      .spec.template.spec.containers |= map(.env = apiserver)
    else . end
    | if .kind == "Deployment" then
        .spec.replicas = 1 |
        .spec.template.spec.hostNetwork = true | .spec.template.spec.dnsPolicy = "ClusterFirstWithHostNet"
      else . end
    | if .kind == "DaemonSet" then
        if ([.spec.template.spec.volumes[] | select(.name == "netns" and .hostPath != null)] | length) != 1
        then error("DaemonSet \(.metadata.name): no hostPath volume named netns") else . end
        | .spec.template.spec.volumes |= map(if .name == "netns" then .hostPath.path = $netns else . end)
        | .spec.template.spec.containers |= map(.volumeMounts |= map(if .name == "netns" then .mountPath = $netns else . end))
      else . end'
}

# manifests: conf/deploy's objects as JSON, adapted (kubectl only reads them, the server
# resolves their kinds).
manifests() {
  local files=() f
  for f in "$repo"/conf/deploy/*.yaml; do files+=(-f "$f"); done   # not its examples/
  "${KUBECTL[@]}" create --dry-run=client -o json "${files[@]}" | adapt
}

# dra_ready_everywhere: netclass-dra's pod is Ready on every node of the test bed.
dra_ready_everywhere() {
  local ready node
  ready=$("${KUBECTL[@]}" -n "$NAMESPACE" get pods -l app.kubernetes.io/name=netclass-dra -o \
    jsonpath='{range .items[*]}{.spec.nodeName}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  for node in $(nodes); do
    grep -qxF "$node=True" <<<"$ready" || { printf '%s' "$ready"; return 1; }
  done
}

controller_available() {
  [[ $("${KUBECTL[@]}" -n "$NAMESPACE" get deployment netclass-controller \
    -o jsonpath='{.status.availableReplicas}' 2>/dev/null) -ge 1 ]]
}

wait_rollout() {
  local deadline=$((SECONDS + ROLLOUT_TIMEOUT)) seen=""
  until seen=$(dra_ready_everywhere) && controller_available; do
    if ((SECONDS >= deadline)); then
      "${KUBECTL[@]}" -n "$NAMESPACE" get pods -o wide >&2 || true
      die "netclass not Ready on every node ($(nodes)) after ${ROLLOUT_TIMEOUT}s; netclass-dra pods: ${seen//$'\n'/ }"
    fi
    sleep 1
  done
}

import_image() {
  local tar=${1:?usage: deploy.sh import IMAGE_TAR} node
  [[ -s $tar ]] || die "no image archive $tar (make image)"
  for node in $(nodes); do
    log "importing $tar into node $node"
    ctr_on "$node" images import --platform linux/amd64 "$tar" >/dev/null
  done
}

apply() {
  import_image "$@"
  log "applying conf/crd/"
  local crds=() f
  for f in "$repo"/conf/crd/*.yaml "$repo"/conf/crd/thirdparty/*.yaml; do crds+=(-f "$f"); done   # not its testdata/
  "${KUBECTL[@]}" apply --server-side --force-conflicts --field-manager="$FIELD_MANAGER" "${crds[@]}" >/dev/null
  "${KUBECTL[@]}" wait --for=condition=Established --timeout=60s "${crds[@]}" >/dev/null
  log "applying conf/deploy/ (API server $NODE_IP:$APISERVER_PORT, controller on the host network, netns under $STATE_DIR)"
  manifests | "${KUBECTL[@]}" apply --server-side --force-conflicts --field-manager="$FIELD_MANAGER" -f - >/dev/null
  wait_rollout
  log "netclass runs: netclass-dra Ready on $(nodes), netclass-controller available"
}

delete() {
  log "deleting conf/deploy/'s objects (the namespace stays: other tests keep Leases there)"
  manifests | jq -c 'select(.kind != "Namespace")' |
    "${KUBECTL[@]}" delete --ignore-not-found --wait=true -f - >/dev/null
  release "$@"
}

release() {
  local image=${1:-localhost/netclass/netclass:latest} node deadline=$((SECONDS + ROLLOUT_TIMEOUT))
  until [[ -z $("${KUBECTL[@]}" -n "$NAMESPACE" get pods -l app.kubernetes.io/part-of=netclass -o name) ]]; do
    ((SECONDS < deadline)) || die "netclass's pods did not go in ${ROLLOUT_TIMEOUT}s"
    sleep 0.5
  done
  # the slices netclass-dra published (its pods are gone, nothing withdraws them)
  "${KUBECTL[@]}" delete resourceslices --field-selector spec.driver=netclass.dev --ignore-not-found >/dev/null
  for node in $(nodes); do
    ctr_on "$node" images rm "$image" >/dev/null 2>&1 || true
  done
}

main() {
  need_root "deploy.sh"
  [[ -f $STATE_DIR/up && -s $STATE_DIR/env ]] || die "the test bed is not up: run \`make testbed-up\` first"
  case ${1:-} in
    apply) apply "${@:2}" ;;
    delete) delete "${@:2}" ;;
    import) import_image "${@:2}" ;;
    wait) wait_rollout ;;
    release) release "${@:2}" ;;
    *) die "usage: deploy.sh apply IMAGE_TAR | delete [IMAGE] | import IMAGE_TAR | wait | release [IMAGE]" ;;
  esac
}

main "$@"
