#!/usr/bin/env bash
# A real primary NetworkPolicy engine on the test bed: kube-network-policies (README.md,
# "A primary policy engine"), built from the Go module proxy with knp-v0.8.0.patch, one process
# per node, as root in the node's namespaces (its network namespace for the nft table, its mount
# namespace for its NRI socket), enforcing every networking.k8s.io/v1 NetworkPolicy on the pods'
# primary interface (eth0, their IPs in status.podIPs).
#   knp.sh build            build into the cache (nothing when cached)
#   knp.sh start            start it on every node of the running bed that has none (waits until
#                           each node's table is in place)
#   knp.sh stop             SIGINT each (it deletes its table, then exits after a 5 s grace);
#                           a table left by one that died is deleted
#   knp.sh status           "NODE running PID" or "NODE stopped", one line per node; false
#                           unless every node runs it
# up.sh runs `start` when NETCLASS_TESTBED_PRIMARY_POLICY=kube-network-policies (make
# TESTBED_PRIMARY_POLICY=kube-network-policies testbed-up); down.sh always runs `stop`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

KNP_MODULE=sigs.k8s.io/kube-network-policies
KNP_VERSION=${KNP_VERSION:-v0.8.0}
KNP_PATCH="$here/knp-$KNP_VERSION.patch"
KNP_STATE="$STATE_DIR/kube-network-policies"   # <node>.pid
KNP_TABLE="inet kube-network-policies"
KNP_METRICS=127.0.0.1:9089                      # in each node's own network namespace
KNP_START_TIMEOUT=${NETCLASS_TESTBED_KNP_TIMEOUT:-60}

# knp_bin: the binary's cache path; the patch's checksum is part of it, so an edited patch
# builds anew and never runs a stale binary.
knp_bin() {
  local sum
  sum=$(sha256sum "$KNP_PATCH" | cut -c1-12)
  printf '%s/kube-network-policies-%s-%s/kube-network-policies' "$TESTBED_CACHE" "$KNP_VERSION" "$sum"
}

# build: copy the module's source out of the read-only module cache, patch the copy, build it
# inside it (the module's own go.mod and go.sum: no scratch module needed), move the binary in
# only once complete. 97 s here the first time, 4 s when only the binary is missing; 0 when cached.
build() {
  local bin dir src tmp
  bin=$(knp_bin)
  [[ -x $bin ]] && return 0
  dir=$(dirname "$bin")
  log "kube-network-policies $KNP_VERSION: building with $(basename "$KNP_PATCH")"
  src=$(go mod download -json "$KNP_MODULE@$KNP_VERSION" | jq -r .Dir)
  [[ -d $src ]] || die "could not download $KNP_MODULE@$KNP_VERSION"
  mkdir -p "$dir"
  rm -rf "$dir/src"
  cp -r "$src" "$dir/src"
  chmod -R u+w "$dir/src"
  (cd "$dir/src" && patch -p1 --no-backup-if-mismatch <"$KNP_PATCH") >&2
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  (cd "$dir/src" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/" ./cmd)
  mv "$tmp/cmd" "$bin"
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
    printf '%s/kube-network-policies.log' "$LOG_DIR"
  else
    printf '%s/%s/kube-network-policies.log' "$LOG_DIR" "$1"
  fi
}

has_table() { on_node "$1" nft list table $KNP_TABLE >/dev/null 2>&1; }

start_node() {
  local node=$1 pidfile="$KNP_STATE/$1.pid" logfile bin
  pid_alive "$pidfile" && return 0
  [[ -f $NODES_DIR/$node.env ]] || die "no node $node (no $NODES_DIR/$node.env)"
  if has_table "$node"; then   # left by one killed without SIGINT: it would drop queued packets
    log "$node: deleting a stale table $KNP_TABLE"
    on_node "$node" nft delete table $KNP_TABLE
  fi
  bin=$(knp_bin)
  logfile=$(node_log "$node")
  mkdir -p "$KNP_STATE" "$(dirname "$logfile")"
  log "$node: starting kube-network-policies"
  local cmd=("$bin" --kubeconfig "$KUBECONFIG_PATH" --hostname-override="$node"
    --metrics-bind-address="$KNP_METRICS" --v=2)
  local netns mntns
  netns=$(env_value "$NODES_DIR/$node.env" NETNS)
  mntns=$(env_value "$NODES_DIR/$node.env" MNTNS)
  if [[ -n $netns ]]; then cmd=(nsenter --net="$netns" --mount="$mntns" -- "${cmd[@]}"); fi
  daemon "$logfile" "${cmd[@]}"
  printf '%s %s\n' "$DAEMON_PID" "$(proc_start_time "$DAEMON_PID")" >"$pidfile"
  wait_until "$pidfile" "$logfile" "$node's table $KNP_TABLE" "$KNP_START_TIMEOUT" has_table "$node"
}

start() {
  need_root "knp.sh start"
  build
  local node t0=$SECONDS
  for node in $(nodes); do start_node "$node"; done
  log "kube-network-policies running on every node ($((SECONDS - t0)) s)"
}

# interrupt PIDFILE: SIGINT, the only signal v0.8.0 cleans up on (SIGTERM or SIGKILL leave its
# table, whose rules then queue the pods' packets to a queue nobody reads: dropped).
interrupt() {
  local pid
  pid_alive "$1" || return 0
  read -r pid _ <"$1"
  log "$(basename "$1" .pid): stopping kube-network-policies (pid $pid, SIGINT)"
  kill -INT "$pid" 2>/dev/null || true
}

# reap PIDFILE: wait for it (SIGKILL after 20 s); the table deleted by hand if still there.
reap() {
  local pidfile=$1 node pid deadline=$((SECONDS + 20))
  node=$(basename "$pidfile" .pid)
  while pid_alive "$pidfile" && ((SECONDS < deadline)); do sleep 0.1; done
  if pid_alive "$pidfile"; then
    read -r pid _ <"$pidfile"
    warn "$node: kube-network-policies did not stop in 20 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ -f $NODES_DIR/$node.env ]] && has_table "$node"; then
    log "$node: deleting the table $KNP_TABLE it left"
    on_node "$node" nft delete table $KNP_TABLE || warn "$node: could not delete $KNP_TABLE"
  fi
  rm -f "$pidfile"
}

# stop: every node's at once (each takes its fixed 5 s grace: ~6 s in all).
stop() {
  local f t0=$SECONDS
  for f in "$KNP_STATE"/*.pid; do
    if [[ -f $f ]]; then interrupt "$f"; fi
  done
  for f in "$KNP_STATE"/*.pid; do
    if [[ -f $f ]]; then reap "$f"; fi
  done
  if [[ -d $KNP_STATE ]]; then
    rmdir "$KNP_STATE" 2>/dev/null || true
    log "kube-network-policies stopped ($((SECONDS - t0)) s)"
  fi
  if ((problems)); then die "kube-network-policies: $problems problem(s) above"; fi
}

status() { node_daemons_status "$KNP_STATE"; }

case ${1:-} in
build) build ;;
start) start ;;
stop) stop ;;
status) status ;;
*) die "usage: knp.sh build | start | stop | status" ;;
esac
