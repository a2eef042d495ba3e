#!/usr/bin/env bash
# Multus thick plugin in front of the primary network on the test bed (README.md, "Multus"),
# v4.3.0 built unmodified from the Go module proxy: one multus-daemon per node, as root in the
# node's namespaces, and multus-shim in the node's CNI bin dir. The daemon writes
# 00-multus.conf into the node's CNI conf dir (containerd takes it at once, the first file by
# name), naming the primary by its network NAME (clusterNetwork netclass-testbed + confDir: a
# conflist path loses the plugin keys on DEL in v4.3.0). Its API client is in-cluster only:
# incluster.sh gives it a ServiceAccount token in a mount namespace of its own.
#   multus.sh build     build into the cache (nothing when cached)
#   multus.sh start     the NAD CRD (when absent), the ServiceAccount, then a daemon on every
#                       node of the running bed that has none (waits for each 00-multus.conf)
#   multus.sh stop      SIGTERM each daemon (it deletes 00-multus.conf and its socket), then
#                       remove the shim, Multus's cache, the ServiceAccount and the CRD if start
#                       installed it. Delete the pods made through Multus first: afterwards their
#                       DEL would run the primary only.
#   multus.sh status    "NODE running PID" or "NODE stopped", one line per node; false unless
#                       every node runs it
# up.sh runs `start` when NETCLASS_TESTBED_MULTUS=1 (make TESTBED_MULTUS=1 testbed-up);
# down.sh always runs `stop`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

MULTUS_MODULE=gopkg.in/k8snetworkplumbingwg/multus-cni.v4
MULTUS_VERSION=${MULTUS_VERSION:-v4.3.0}
MULTUS_CACHE="$TESTBED_CACHE/multus-$MULTUS_VERSION"   # multus-daemon, multus-shim, nad-crd.yaml
MULTUS_STATE="$STATE_DIR/multus"   # <node>.pid, <node>/ (config, socket), sa/, crd-installed
MULTUS_HOLD="$DATA_DIR/multus"     # <node>/: incluster.sh's hold of /run (empty seen from here)
MULTUS_CONF=00-multus.conf
MULTUS_CACHE_DIR=/var/lib/cni/multus   # on each node (its /var/lib/cni is its own)
MULTUS_SA=netclass-testbed-multus      # ServiceAccount and ClusterRoleBinding, kube-system
NAD_CRD=network-attachment-definitions.k8s.cni.cncf.io
MULTUS_START_TIMEOUT=${NETCLASS_TESTBED_MULTUS_TIMEOUT:-60}

kubectl_admin() { "$TESTBED_BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=10s "$@"; }

# build: the three pieces from the module's source (its own go.mod and go.sum; the module zip
# has no vendor directory): 60 s here with a warm Go build cache, 0 when cached.
build() {
  [[ -x $MULTUS_CACHE/multus-daemon && -x $MULTUS_CACHE/multus-shim && -s $MULTUS_CACHE/nad-crd.yaml ]] && return 0
  local src tmp
  log "multus $MULTUS_VERSION: building"
  src=$(go mod download -json "$MULTUS_MODULE@$MULTUS_VERSION" | jq -r .Dir)
  [[ -d $src ]] || die "could not download $MULTUS_MODULE@$MULTUS_VERSION"
  mkdir -p "$MULTUS_CACHE"
  tmp=$(mktemp -d "$MULTUS_CACHE/build.XXXXXX")
  (cd "$src" && CGO_ENABLED=0 nice -n 10 go build -mod=mod -trimpath -ldflags "-s -w" -o "$tmp/" \
    ./cmd/multus-daemon ./cmd/multus-shim)
  # the CRD is the first document of the thick DaemonSet's manifest
  awk '/^---/{d++; next} d==1' "$src/deployments/multus-daemonset-thick.yml" >"$tmp/nad-crd.yaml"
  grep -q "name: $NAD_CRD" "$tmp/nad-crd.yaml" || die "no $NAD_CRD in $src/deployments/multus-daemonset-thick.yml"
  mv "$tmp/multus-daemon" "$tmp/multus-shim" "$tmp/nad-crd.yaml" "$MULTUS_CACHE/"
  rmdir "$tmp"
}

nodes() { bed_nodes; }

# on_node NODE COMMAND...: run COMMAND in the node's namespaces (node 1: as is).
on_node() {
  local file="$NODES_DIR/$1.env" netns mntns
  shift
  netns=$(env_value "$file" NETNS)
  mntns=$(env_value "$file" MNTNS)
  if [[ -z $netns ]]; then "$@"; else nsenter --net="$netns" --mount="$mntns" -- "$@"; fi
}

node_log() {
  if [[ -z $(env_value "$NODES_DIR/$1.env" NETNS) ]]; then
    printf '%s/multus.log' "$LOG_DIR"
  else
    printf '%s/%s/multus.log' "$LOG_DIR" "$1"
  fi
}

# cluster_objects: the CRD (remembered when installed here, so stop deletes only that), and a
# ServiceAccount bound to cluster-admin (a bed only) whose token the daemons use.
cluster_objects() {
  mkdir -p "$MULTUS_STATE/sa"
  crd_settled
  if ! kubectl_admin get crd "$NAD_CRD" >/dev/null 2>&1; then
    log "installing the CRD $NAD_CRD"
    kubectl_admin apply -f "$MULTUS_CACHE/nad-crd.yaml" >/dev/null
    : >"$MULTUS_STATE/crd-installed"
  fi
  kubectl_admin wait --for=condition=Established --timeout=30s "crd/$NAD_CRD" >/dev/null
  kubectl_admin -n kube-system get serviceaccount "$MULTUS_SA" >/dev/null 2>&1 ||
    kubectl_admin -n kube-system create serviceaccount "$MULTUS_SA" >/dev/null
  kubectl_admin get clusterrolebinding "$MULTUS_SA" >/dev/null 2>&1 ||
    kubectl_admin create clusterrolebinding "$MULTUS_SA" --clusterrole=cluster-admin \
      --serviceaccount="kube-system:$MULTUS_SA" >/dev/null
  if [[ ! -s $MULTUS_STATE/sa/token ]]; then
    kubectl_admin -n kube-system create token "$MULTUS_SA" --duration=720h >"$MULTUS_STATE/sa/token.tmp"
    mv "$MULTUS_STATE/sa/token.tmp" "$MULTUS_STATE/sa/token"
  fi
  cp "$STATE_DIR/pki/ca.crt" "$MULTUS_STATE/sa/ca.crt"
}

# crd_settled: waits (60 s at most) while the CRD is being deleted (by whoever installed it: a
# NAD cannot be created then, and it is gone a moment later).
crd_settled() {
  local deadline=$((SECONDS + 60)) deleting
  while deleting=$(kubectl_admin get crd "$NAD_CRD" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null) &&
    [[ -n $deleting ]]; do
    ((SECONDS < deadline)) || die "the CRD $NAD_CRD has been terminating for 60 s"
    sleep 0.2
  done
}

# daemon_config NODE: the daemon's configuration, paths as the node sees them.
daemon_config() {
  local sock="$MULTUS_STATE/$1/run"
  cat <<JSON
{
  "cniVersion": "1.0.0",
  "logLevel": "verbose",
  "logToStderr": true,
  "multusConfigFile": "auto",
  "multusAutoconfigDir": "$CNI_CONF_DIR",
  "cniConfigDir": "$CNI_CONF_DIR",
  "confDir": "$CNI_CONF_DIR",
  "clusterNetwork": "$CNI_NETWORK_NAME",
  "binDir": "$CNI_BIN_DIR",
  "cniDir": "$MULTUS_CACHE_DIR",
  "socketDir": "$sock",
  "daemonSocketDir": "$sock"
}
JSON
}

has_conf() { on_node "$1" grep -qs multus-shim "$CNI_CONF_DIR/$MULTUS_CONF"; }

start_node() {
  local node=$1 pidfile="$MULTUS_STATE/$1.pid" logfile
  pid_alive "$pidfile" && return 0
  [[ -f $NODES_DIR/$node.env ]] || die "no node $node (no $NODES_DIR/$node.env)"
  mkdir -p "$MULTUS_STATE/$node/run"
  daemon_config "$node" >"$MULTUS_STATE/$node/daemon-config.json"
  on_node "$node" install -m 0755 "$MULTUS_CACHE/multus-shim" "$CNI_BIN_DIR/multus-shim"
  logfile=$(node_log "$node")
  mkdir -p "$(dirname "$logfile")"
  log "$node: starting multus-daemon"
  local cmd=(env MULTUS_NODE_NAME="$node" bash "$here/incluster.sh" "$MULTUS_HOLD/$node" "$MULTUS_STATE/sa"
    "$NODE_IP" "$APISERVER_PORT" "$MULTUS_CACHE/multus-daemon" -config "$MULTUS_STATE/$node/daemon-config.json")
  local netns mntns
  netns=$(env_value "$NODES_DIR/$node.env" NETNS)
  mntns=$(env_value "$NODES_DIR/$node.env" MNTNS)
  if [[ -n $netns ]]; then cmd=(nsenter --net="$netns" --mount="$mntns" -- "${cmd[@]}"); fi
  daemon "$logfile" "${cmd[@]}"
  printf '%s %s\n' "$DAEMON_PID" "$(proc_start_time "$DAEMON_PID")" >"$pidfile"
  wait_until "$pidfile" "$logfile" "$node's $CNI_CONF_DIR/$MULTUS_CONF" "$MULTUS_START_TIMEOUT" has_conf "$node"
}

start() {
  need_root "multus.sh start"
  build
  local node t0=$SECONDS
  cluster_objects
  for node in $(nodes); do start_node "$node"; done
  log "multus running on every node ($((SECONDS - t0)) s)"
}

# reap NODE: wait for its daemon (SIGKILL after 20 s), then whatever it or start left on the node.
reap() {
  local node=$1 pidfile="$MULTUS_STATE/$1.pid" pid deadline=$((SECONDS + 20))
  while pid_alive "$pidfile" && ((SECONDS < deadline)); do sleep 0.1; done
  if pid_alive "$pidfile"; then
    read -r pid _ <"$pidfile"
    warn "$node: multus-daemon did not stop in 20 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  if [[ -f $NODES_DIR/$node.env ]]; then
    if has_conf "$node"; then
      log "$node: removing the $MULTUS_CONF it left"
      on_node "$node" rm -f "$CNI_CONF_DIR/$MULTUS_CONF"
    fi
    on_node "$node" rm -rf "$CNI_BIN_DIR/multus-shim" "$MULTUS_CACHE_DIR"
  fi
  rm -rf "${MULTUS_STATE:?}/$node"
  rm -rf "${MULTUS_HOLD:?}/$node"
}

# nodes_started: the nodes start ran on (a pid file or a directory of state).
nodes_started() {
  local f
  for f in "$MULTUS_STATE"/*.pid "$MULTUS_STATE"/*/; do
    [[ -e $f ]] || continue
    f=${f%/}
    f=$(basename "$f" .pid)
    [[ $f == sa ]] || printf '%s\n' "$f"
  done | sort -u
}

stop() {
  [[ -d $MULTUS_STATE ]] || return 0
  local node pid t0=$SECONDS
  for node in $(nodes_started); do
    if pid_alive "$MULTUS_STATE/$node.pid"; then
      read -r pid _ <"$MULTUS_STATE/$node.pid"
      log "$node: stopping multus-daemon (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for node in $(nodes_started); do reap "$node"; done
  if [[ -f $STATE_DIR/env ]] && kubectl_admin get --raw /readyz >/dev/null 2>&1; then
    kubectl_admin delete clusterrolebinding "$MULTUS_SA" --ignore-not-found >/dev/null || warn "could not delete clusterrolebinding $MULTUS_SA"
    kubectl_admin -n kube-system delete serviceaccount "$MULTUS_SA" --ignore-not-found >/dev/null || warn "could not delete serviceaccount $MULTUS_SA"
    if [[ -f $MULTUS_STATE/crd-installed ]]; then
      log "deleting the CRD $NAD_CRD (installed by multus.sh start)"
      kubectl_admin delete crd "$NAD_CRD" --ignore-not-found --wait=true --timeout=60s >/dev/null || warn "could not delete crd $NAD_CRD"
      crd_settled
    fi
  fi
  rm -rf "$MULTUS_STATE" "$MULTUS_HOLD"
  log "multus stopped ($((SECONDS - t0)) s)"
  if ((problems)); then die "multus: $problems problem(s) above"; fi
}

status() { node_daemons_status "$MULTUS_STATE"; }

case ${1:-} in
build) build ;;
start) start ;;
stop) stop ;;
status) status ;;
*) die "usage: multus.sh build | start | stop | status" ;;
esac
