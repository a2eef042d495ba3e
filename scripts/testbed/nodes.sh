# shellcheck shell=bash
# Nodes 2..N of the test bed (sourced by up.sh, down.sh and node.sh; README.md, "Nodes"): each a
# kubelet and a containerd in a network namespace and a mount namespace of their own, joined to
# the others by the underlay bridge. Needs env.sh, pki.sh and configs.sh.

KUBECTL="$TESTBED_BIN/kubectl"
TESTBED_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
READY_TIMEOUT=${NETCLASS_TESTBED_READY_TIMEOUT:-180}   # seconds, for each wait
DRAIN_TIMEOUT=${NETCLASS_TESTBED_DRAIN_TIMEOUT:-60}

kubectl_admin() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=10s "$@"; }

apiserver_ready() {
  curl -sf --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$APISERVER_URL/readyz" >/dev/null 2>&1
}

node_ready() {
  [[ $(kubectl_admin get node "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

node_env_file() { printf '%s/%s.env' "$NODES_DIR" "$1"; }

# nodes_by_index: "INDEX NAME" of every node with an env file (node 1 included), by index.
nodes_by_index() {
  local f
  for f in "$NODES_DIR"/*.env; do
    [[ -f $f ]] || continue
    printf '%s %s\n' "$(env_value "$f" NODE_INDEX)" "$(env_value "$f" NODE_NAME)"
  done | sort -n
}

# extra_nodes: the names of nodes 2..N, by index; also those whose add failed before their env
# file was written (only their directory is left).
extra_nodes() {
  local d
  {
    nodes_by_index | awk '$1 > 1 { print $2 }'
    for d in "$NODES_DIR"/*/; do
      [[ -d $d && ! -f ${d%/}.env ]] && basename "$d"
    done
  } | awk '!seen[$0]++'
}

free_index() {
  local used i
  used=$(nodes_by_index | awk '{ print $1 }')
  for ((i = 2; i <= MAX_NODE_INDEX; i++)); do
    grep -qx "$i" <<<"$used" || { printf '%s' "$i"; return 0; }
  done
  die "no free node index up to $MAX_NODE_INDEX"
}

# write_env: $STATE_DIR/env, with the list of nodes as it is now.
write_env() {
  local nodes
  nodes=$(nodes_by_index | awk '{ print $2 }' | paste -sd' ')
  cat >"$STATE_DIR/env.tmp" <<EOF
# Written by scripts/testbed; source it to talk to the test bed (README.md).
export KUBECONFIG=$KUBECONFIG_PATH
export NETCLASS_KUBECONFIG=$KUBECONFIG_PATH
NETCLASS_TESTBED_BIN=$TESTBED_BIN
NETCLASS_TESTBED_STATE=$STATE_DIR
NETCLASS_TESTBED_NODES="$nodes"
NETCLASS_TESTBED_NODE_NAME=$NODE_NAME
NETCLASS_TESTBED_NODE_IP=$NODE_IP
NETCLASS_TESTBED_APISERVER=$APISERVER_URL
NETCLASS_TESTBED_KUBELET_DIR=$KUBELET_DIR
NETCLASS_TESTBED_CONTAINERD_SOCKET=$CONTAINERD_SOCKET
NETCLASS_TESTBED_NRI_SOCKET=$NRI_SOCKET
NETCLASS_TESTBED_IMAGE=$TESTBED_IMAGE
EOF
  mv "$STATE_DIR/env.tmp" "$STATE_DIR/env"
}

# with_nodes_lock COMMAND...: run COMMAND holding the lock of the node list (node indexes and
# the env files), so that nodes added at the same time get different indexes.
with_nodes_lock() {
  mkdir -p "$NODES_DIR"
  (
    flock 9
    "$@"
    ((${problems:-0} == 0)) || die "$* ended with $problems problem(s) above"
  ) 9>"$NODES_DIR/.lock"
}

# in_node NODE COMMAND...: run COMMAND in the node's network and mount namespaces.
in_node() {
  local node=$1
  shift
  nsenter --net="$NS_DIR/$node.net" --mount="$NS_DIR/$node.mnt" -- "$@"
}

# start_in_node NODE NAME COMMAND...: start a daemon (env.sh) in the node's namespaces, log to
# LOG_DIR/NODE/NAME.log, record "PID STARTTIME" (nsenter execs the command, so the PID is the
# daemon's).
start_in_node() {
  local node=$1 name=$2
  shift 2
  log "$node: starting $name"
  : >"$LOG_DIR/$node/$name.log"
  daemon "$LOG_DIR/$node/$name.log" nsenter --net="$NS_DIR/$node.net" --mount="$NS_DIR/$node.mnt" -- "$@"
  printf '%s %s\n' "$DAEMON_PID" "$(proc_start_time "$DAEMON_PID")" >"$NODES_DIR/$node/pids/$name.pid"
}

node_healthy() {
  local node=$1 c
  [[ -f $(node_env_file "$node") && -f $NODES_DIR/$node/up ]] || return 1
  for c in containerd kubelet; do pid_alive "$NODES_DIR/$node/pids/$c.pid" || return 1; done
  node_ready "$node"
}

# --- add -------------------------------------------------------------------------------------

valid_node_name() {
  [[ $1 =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]]
}

# node_netns NODE INDEX: the node's network namespace, its underlay veth (ul-n<k> inside, a port
# of the underlay bridge outside) and its pod bridge. Forwarding is on inside: the node routes
# between its pods and the underlay, like any node.
node_netns() {
  local node=$1 idx=$2 net="$NS_DIR/$1.net" ul hv
  ul=$(underlay_if "$idx") hv=$(host_veth "$idx")
  : >"$net"
  unshare --net="$net" true
  ip link del "$hv" 2>/dev/null || true   # a leftover of a node of the same index
  ip link add "$hv" type veth peer name "$ul" netns "$net"
  sysctl -qw "net.ipv6.conf.$hv.disable_ipv6=1" 2>/dev/null || true
  ip link set "$hv" master "$UNDERLAY_BRIDGE" up
  nsenter --net="$net" bash -c "$(declare -f pod_bridge pod_gateway add_bridge); $(declare -p POD_BRIDGE POD_NET)
    set -e
    ip link set lo up
    sysctl -qw net.ipv6.conf.$ul.disable_ipv6=1 2>/dev/null || true
    ip addr add $(node_ip "$idx")/$UNDERLAY_PREFIX dev $ul
    ip link set $ul up
    sysctl -qw net.ipv4.ip_forward=1
    pod_bridge $idx"
}

# node_mntns NODE: the node's mount namespace, made from the node's network namespace (for its
# sysfs) by node-mounts.sh.
node_mntns() {
  local node=$1
  : >"$NS_DIR/$node.mnt"
  nsenter --net="$NS_DIR/$node.net" unshare --mount="$NS_DIR/$node.mnt" --propagation private -- \
    bash "$TESTBED_SCRIPTS/node-mounts.sh" "$node"
}

# node_cgroup NODE: the node's cgroup root in every hierarchy (the kubelet wants it to exist).
node_cgroup() {
  local node=$1 dir parent
  while read -r dir; do
    parent=$(dirname "$dir")
    mkdir -p "$dir"
    # cgroup v1 cpusets start empty: give the new levels the machine's CPUs and memory nodes
    if [[ -f $parent/cpuset.cpus ]]; then
      local level
      for level in "$parent" "$dir"; do
        [[ -n $(<"$level/cpuset.cpus") ]] || cat "$(dirname "$level")/cpuset.cpus" >"$level/cpuset.cpus"
        [[ -n $(<"$level/cpuset.mems") ]] || cat "$(dirname "$level")/cpuset.mems" >"$level/cpuset.mems"
      done
    fi
    # cgroup v2 (only): the kubelet needs the controllers delegated down to its root
    if cgroup_v2; then
      local c
      for c in $(<"/sys/fs/cgroup/cgroup.subtree_control"); do
        printf '+%s' "$c" >"$parent/cgroup.subtree_control" 2>/dev/null || true
        printf '+%s' "$c" >"$dir/cgroup.subtree_control" 2>/dev/null || true
      done
    fi
  done < <(cgroup_dirs "$CGROUP_PARENT/$node")
}

# host_paths NODE: "node path=path on this machine" of each of the node's binds.
host_paths() {
  local node=$1 b src out=()
  for b in "${NODE_BINDS[@]}"; do
    src=${b#*:}
    case $src in
      s/*) src="$NODES_DIR/$node/${src#s/}" ;;
      d/*) src="$NODES_DATA/$node/${src#d/}" ;;
    esac
    out+=("${b%%:*}=$src")
  done
  printf '%s' "${out[*]}"
}

# node_files NODE INDEX: certificates, kubeconfig, configurations, CNI plugins and conflist.
node_files() {
  local node=$1 idx=$2 s="$NODES_DIR/$1" d="$NODES_DATA/$1" b
  node_certs "$node" "$(node_ip "$idx")"
  kubeconfig "$s/kubelet.kubeconfig" "kubelet-client-$node"
  containerd_config "$s/containerd.toml" "$s/nri" "/$CGROUP_PARENT/$node"
  mkdir -p "$s/nri/plugins" "$s/nri/conf" "$d/cni-bin" "$d/cni-conf"
  kubelet_config "$s/kubelet.yaml" "$node" "$(node_ip "$idx")" "/$CGROUP_PARENT/$node"
  for b in "${CNI_BINARIES[@]}"; do install -m 0755 "$TESTBED_BIN/$b" "$d/cni-bin/$b"; done
  cni_conflist "$d/cni-conf/$(basename "$CNI_CONF_FILE")" "$idx"
}

# node_routes: every node routes each other node's pod subnet to that node's underlay address
# (node 1 in this machine's namespace, which forwards nothing: its own pods reach only node 1).
node_routes() {
  local nodes idx name other oidx
  nodes=$(nodes_by_index)
  while read -r idx name; do
    while read -r oidx other; do
      [[ $oidx == "$idx" ]] && continue
      if ((idx == 1)); then
        ip route replace "$(pod_subnet "$oidx")" via "$(node_ip "$oidx")" dev "$UNDERLAY_BRIDGE"
      else
        nsenter --net="$NS_DIR/$name.net" ip route replace "$(pod_subnet "$oidx")" via "$(node_ip "$oidx")"
      fi
    done <<<"$nodes"
  done <<<"$nodes"
}

# node_add NODE: bring the node up and wait until it is Ready (the node list lock is held).
node_add() {
  local node=$1 idx s d
  valid_node_name "$node" || die "node name $node: want a DNS label (lowercase letters, digits, '-')"
  [[ $node != "$NODE_NAME" ]] || die "$node is node 1"
  if [[ -f $(node_env_file "$node") || -d $NODES_DIR/$node ]]; then
    if node_healthy "$node"; then
      log "node $node is already up"
      return 0
    fi
    log "node $node was left half up: removing it first"
    node_remove "$node"
  fi
  idx=$(free_index) s="$NODES_DIR/$node" d="$NODES_DATA/$node"
  log "adding node $node (index $idx, $(node_ip "$idx"))"
  mkdir -p "$s/pids" "$d" "$LOG_DIR/$node" "$NS_DIR"
  mountpoint -q "$NS_DIR" || { mount --bind "$NS_DIR" "$NS_DIR" && mount --make-private "$NS_DIR"; }
  write_node_env "$(node_env_file "$node")" "$idx" "$node" "$NS_DIR/$node.net" "$NS_DIR/$node.mnt" \
    "/$CGROUP_PARENT/$node" "$LOG_DIR/$node" "$(host_paths "$node")"
  node_files "$node" "$idx"
  node_netns "$node" "$idx"
  node_mntns "$node"
  node_cgroup "$node"
  node_start "$node"
  node_routes
  touch "$s/up"
  write_env
}

# node_start NODE: containerd (with the test image) and the kubelet, until the node is Ready.
node_start() {
  local node=$1 s="$NODES_DIR/$1" ctr
  ctr=("$TESTBED_BIN/ctr" --address "$CONTAINERD_SOCKET")
  # containerd finds the shim on PATH
  PATH="$TESTBED_BIN:$PATH" start_in_node "$node" containerd "$TESTBED_BIN/containerd" --config "$s/containerd.toml"
  wait_until "$s/pids/containerd.pid" "$LOG_DIR/$node/containerd.log" "$node's containerd" "$READY_TIMEOUT" \
    in_node "$node" "${ctr[@]}" version
  wait_until "$s/pids/containerd.pid" "$LOG_DIR/$node/containerd.log" "$node's NRI socket" "$READY_TIMEOUT" \
    test -S "$s/nri/$(basename "$NRI_SOCKET")"
  # (ctr warns that cgroup v1 is deprecated on every call here: not worth repeating)
  in_node "$node" "${ctr[@]}" -n k8s.io images import --platform linux/amd64 "$TESTBED_IMAGE_DIR/testbed-image.tar" \
    2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2) >/dev/null
  start_in_node "$node" kubelet "$TESTBED_BIN/kubelet" --config="$s/kubelet.yaml" \
    --kubeconfig="$s/kubelet.kubeconfig" --root-dir="$KUBELET_DIR" \
    --hostname-override="$node" --node-ip="$(env_value "$(node_env_file "$node")" NODE_IP)" --v=1
  wait_until "$s/pids/kubelet.pid" "$LOG_DIR/$node/kubelet.log" "node $node to be Ready" "$READY_TIMEOUT" \
    node_ready "$node"
}

# --- remove ----------------------------------------------------------------------------------

# node_pids NODE: the node's processes: those in its network or mount namespace (kubelet,
# containerd, its shims, daemons a test runs there) and those in its cgroups (pod containers).
node_pids() {
  local node=$1 dir
  {
    ns_pids "$NS_DIR/$node.net" net
    ns_pids "$NS_DIR/$node.mnt" mnt
    while read -r dir; do
      [[ -d $dir ]] && find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null
    done < <(cgroup_dirs "$CGROUP_PARENT/$node")
  } | sort -un
}

# node_drain NODE: what `kubectl drain --ignore-daemonsets` does: no new pods, and every pod
# that is not a DaemonSet's deleted while the kubelet runs, so that each sandbox goes the
# ordinary way (NRI StopPodSandbox, CNI DEL, DRA unprepare). DaemonSet pods go with the node.
node_drain() {
  local node=$1
  pid_alive "$NODES_DIR/$node/pids/kubelet.pid" && apiserver_ready || return 0
  log "draining node $node"
  kubectl_admin drain "$node" --ignore-daemonsets --delete-emptydir-data --force --disable-eviction \
    --grace-period=1 --timeout="${DRAIN_TIMEOUT}s" >/dev/null 2>&1 ||
    log "note: $node's pods did not all go in ${DRAIN_TIMEOUT}s; removing them by force"
}

# node_stop NODE: the kubelet, then what containerd runs, then containerd, then whatever is
# left in the node's namespaces and cgroups (SIGKILL, by PID), until none is left.
node_stop() {
  local node=$1 pids="$NODES_DIR/$1/pids" ctr id deadline left
  stop_pid "$pids/kubelet.pid" "$node's kubelet" || warn "$node's kubelet survived SIGKILL"
  if pid_alive "$pids/containerd.pid"; then
    ctr=(in_node "$node" "$TESTBED_BIN/ctr" --address "$CONTAINERD_SOCKET" -n k8s.io)
    while read -r id; do
      [[ -n $id ]] && "${ctr[@]}" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1
    done < <("${ctr[@]}" tasks ls -q 2>/dev/null)
    while read -r id; do
      [[ -n $id ]] || continue
      "${ctr[@]}" tasks delete -f "$id" >/dev/null 2>&1 || true
      "${ctr[@]}" containers delete "$id" >/dev/null 2>&1 || true
    done < <("${ctr[@]}" containers ls -q 2>/dev/null)
  fi
  stop_pid "$pids/containerd.pid" "$node's containerd" || warn "$node's containerd survived SIGKILL"
  deadline=$((SECONDS + 20))
  while left=$(node_pids "$node" | paste -sd' ') && [[ -n $left ]]; do
    if ((SECONDS >= deadline)); then
      warn "processes of node $node survived SIGKILL: $left"
      return 0
    fi
    # shellcheck disable=SC2086 # a list of PIDs
    kill -KILL $left 2>/dev/null || true
    sleep 0.2
  done
}

# node_cgroups_gone NODE: remove the node's cgroups, deepest first, as their processes leave.
node_cgroups_gone() {
  local node=$1 deadline=$((SECONDS + 10)) dir left
  while :; do
    left=()
    while read -r dir; do
      [[ -d $dir ]] || continue
      find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [[ -d $dir ]] && left+=("$dir")
    done < <(cgroup_dirs "$CGROUP_PARENT/$node")
    ((${#left[@]})) || break
    if ((SECONDS >= deadline)); then
      warn "cgroups ${left[*]} could not be removed (processes left in them?)"
      break
    fi
    sleep 0.2
  done
  while read -r dir; do rmdir "$dir" 2>/dev/null || true; done < <(cgroup_dirs "$CGROUP_PARENT")
}

# node_forget NODE INDEX: the node's network, namespaces, cgroups and directories.
node_forget() {
  local node=$1 idx=$2 other dir
  if [[ -n $idx ]]; then
    ip link del "$(host_veth "$idx")" 2>/dev/null || true
    ip route del "$(pod_subnet "$idx")" 2>/dev/null || true
    while read -r other; do
      [[ $other == "$node" || ! -e $NS_DIR/$other.net ]] ||
        nsenter --net="$NS_DIR/$other.net" ip route del "$(pod_subnet "$idx")" 2>/dev/null || true
    done < <(extra_nodes)
  fi
  for dir in "$NS_DIR/$node.mnt" "$NS_DIR/$node.net"; do
    umount "$dir" 2>/dev/null || umount -l "$dir" 2>/dev/null || true
    rm -f "$dir"
  done
  node_cgroups_gone "$node"
  for dir in "$NODES_DIR/$node" "$NODES_DATA/$node"; do
    if mounts_under "$dir" | grep -q .; then
      warn "not removing $dir: something is still mounted under it"
    else
      rm -rf --one-file-system "$dir"
    fi
  done
  rm -f "$(node_env_file "$node")"
}

# node_remove NODE [local]: drain the node, stop it, delete its Node object and remove all of
# it (the node list lock is held). "local" skips the API server (down.sh: etcd goes anyway).
node_remove() {
  local node=$1 mode=${2:-} idx=""
  [[ -f $(node_env_file "$node") ]] && idx=$(env_value "$(node_env_file "$node")" NODE_INDEX)
  log "removing node $node"
  [[ $mode == local ]] || node_drain "$node"
  node_stop "$node"
  if [[ $mode != local ]] && apiserver_ready; then
    kubectl_admin delete node "$node" --ignore-not-found --wait=true >/dev/null ||
      warn "could not delete the Node object $node"
    # its DaemonSet pods (pod GC would take a while)
    kubectl_admin delete pods -A --field-selector "spec.nodeName=$node" --force --grace-period=0 \
      >/dev/null 2>&1 || true
  fi
  node_forget "$node" "$idx"
  [[ ! -f $STATE_DIR/env ]] || write_env
}
