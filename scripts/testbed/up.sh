#!/usr/bin/env bash
# Bring up the Kubernetes test bed on this machine (see README.md): the control plane and node 1
# in this machine's namespaces, then nodes 2..TESTBED_NODES (default 2) in namespaces of their
# own (nodes.sh). Idempotent: when the control plane and node 1 are up and healthy, only the
# nodes are brought to the number asked for; a half-up test bed is torn down (down.sh) and
# started again.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"
# shellcheck source=scripts/testbed/pki.sh
source "$here/pki.sh"
# shellcheck source=scripts/testbed/configs.sh
source "$here/configs.sh"
# shellcheck source=scripts/testbed/nodes.sh
source "$here/nodes.sh"

need_root "up.sh"
PIDS="$STATE_DIR/pids"

# --- small helpers --------------------------------------------------------------------------

# wait_for COMPONENT DESCRIPTION COMMAND...: wait_until for one of node 1's components.
wait_for() {
  local name=$1 what=$2
  shift 2
  wait_until "$PIDS/$name.pid" "$LOG_DIR/$name.log" "$what" "$READY_TIMEOUT" "$@"
}

# start NAME BINARY ARGS...: start a daemon (env.sh), log to LOG_DIR/NAME.log and record
# "PID STARTTIME" in PIDS/NAME.pid.
start() {
  local name=$1
  shift
  log "starting $name"
  daemon "$LOG_DIR/$name.log" "$@"
  printf '%s %s\n' "$DAEMON_PID" "$(proc_start_time "$DAEMON_PID")" >"$PIDS/$name.pid"
}

alive() {
  local name=$1
  pid_alive "$PIDS/$name.pid" || die "$name died (log: $LOG_DIR/$name.log)"
}

# control_plane_up: the control plane and node 1 run and node 1 is Ready.
control_plane_up() {
  [[ -f $STATE_DIR/up ]] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do pid_alive "$PIDS/$c.pid" || return 1; done
  apiserver_ready && node_ready "$NODE_NAME"
}

# --- host preparation ------------------------------------------------------------------------

check_free() {
  local port
  for port in 2379 2380 "$APISERVER_PORT" 10248 10250 10257 10259; do
    if ss -Hltn "sport = :$port" | grep -q .; then
      die "TCP port $port is already in use: another Kubernetes or etcd runs here? ($(ss -Hltnp "sport = :$port"))"
    fi
  done
  if [[ -S $NRI_SOCKET ]] && ss -Hlx | grep -qF "$NRI_SOCKET"; then
    die "$NRI_SOCKET is served by another runtime: stop it first"
  fi
}

# Remember what the host looked like before anything of ours touched it.
snapshot_host() {
  local s
  : >"$STATE_DIR/sysctl.before"
  for s in "${KUBELET_SYSCTLS[@]}" net.ipv4.ip_forward net.ipv6.conf.all.forwarding; do
    printf '%s=%s\n' "$s" "$(sysctl -n "$s")" >>"$STATE_DIR/sysctl.before"
  done
  local ipt t
  for ipt in iptables ip6tables; do
    for t in filter nat mangle raw; do
      "$ipt" -t "$t" -S 2>/dev/null | awk -v t="$t" '$1 == "-N" { print t, $2 }'
    done >"$STATE_DIR/$ipt.chains.before"
  done
  # nftables tables: netclass-dra on node 1 (this machine's namespaces) makes its node tables here
  nft list tables 2>/dev/null >"$STATE_DIR/nft.tables.before" || true
  : >"$STATE_DIR/created"
  local p
  # node 1's directories, and the mount points of the other nodes' binds
  local binds=("${NODE_BINDS[@]%%:*}")
  for p in "$KUBELET_DIR" "$CNI_CONF_DIR" "$CNI_BIN_DIR" /var/log/pods /var/log/containers \
    "$(dirname "$NRI_SOCKET")" /var/lib/cni "$DATA_DIR" "${binds[@]}"; do
    [[ -e $p || $p == "$STATE_DIR"/* || $p == "$DATA_DIR"/* ]] && continue   # those two go whole
    # record the topmost directory that does not exist yet (/etc/cni for /etc/cni/net.d)
    while [[ ! -e $(dirname "$p") ]]; do p=$(dirname "$p"); done
    grep -qxF "$p" "$STATE_DIR/created" || printf '%s\n' "$p" >>"$STATE_DIR/created"
  done
}

# Node 1's network: the underlay bridge, which carries node 1's InternalIP (the API server and
# the kubelet bind to it) and joins the other nodes' underlay veths, and node 1's pod bridge.
# Nothing routes either anywhere else.
setup_network() {
  local b
  for b in "$UNDERLAY_BRIDGE" "$POD_BRIDGE"; do
    if ! ip link show "$b" >/dev/null 2>&1; then
      add_bridge "$b"
      printf '%s\n' "$b" >>"$STATE_DIR/bridges.created"
    fi
  done
  ip addr replace "$NODE_IP/$UNDERLAY_PREFIX" dev "$UNDERLAY_BRIDGE"
  sysctl -qw "net.ipv6.conf.$UNDERLAY_BRIDGE.disable_ipv6=1" 2>/dev/null || true   # no IPv6 on it
  ip link set "$UNDERLAY_BRIDGE" up
  pod_bridge 1
  forward_rules
}

# Nothing from the test bed's bridges is forwarded anywhere else, and nothing from elsewhere to
# them, whatever ip_forward says (with br_netfilter, frames bridged between the nodes pass here
# as in and out on the underlay bridge, and are let through).
forward_rules() {
  local ipt a b
  for ipt in iptables ip6tables; do
    if [[ $ipt == ip6tables ]] && ! ip6tables -S FORWARD >/dev/null 2>&1; then
      log "note: no ip6tables here; the bridges have IPv6 disabled anyway"
      continue
    fi
    "$ipt" -N NETCLASS-TESTBED 2>/dev/null || "$ipt" -F NETCLASS-TESTBED
    for a in "$UNDERLAY_BRIDGE" "$POD_BRIDGE"; do
      for b in "$UNDERLAY_BRIDGE" "$POD_BRIDGE"; do
        "$ipt" -A NETCLASS-TESTBED -i "$a" -o "$b" -j RETURN
      done
    done
    for a in "$UNDERLAY_BRIDGE" "$POD_BRIDGE"; do
      "$ipt" -A NETCLASS-TESTBED -i "$a" -m comment \
        --comment "netclass test bed: nothing leaves the test bed's bridges" -j DROP
      "$ipt" -A NETCLASS-TESTBED -o "$a" -m comment \
        --comment "netclass test bed: nothing enters the test bed's bridges" -j DROP
    done
    "$ipt" -C FORWARD -j NETCLASS-TESTBED 2>/dev/null || "$ipt" -I FORWARD -j NETCLASS-TESTBED
  done
}

install_cni() {
  mkdir -p "$CNI_BIN_DIR" "$CNI_CONF_DIR"
  local b
  for b in "${CNI_BINARIES[@]}"; do
    if [[ ! -e $CNI_BIN_DIR/$b ]]; then
      install -m 0755 "$TESTBED_BIN/$b" "$CNI_BIN_DIR/$b"
      printf '%s\n' "$CNI_BIN_DIR/$b" >>"$STATE_DIR/created"
    elif ! cmp -s "$TESTBED_BIN/$b" "$CNI_BIN_DIR/$b"; then
      log "note: $CNI_BIN_DIR/$b exists and differs from the $CNI_PLUGINS_VERSION build; leaving it"
    fi
  done
  local other
  other=$(find "$CNI_CONF_DIR" -maxdepth 1 \( -name '*.conf' -o -name '*.conflist' -o -name '*.json' \) \
    ! -path "$CNI_CONF_FILE" -print -quit)
  [[ -z $other ]] || log "warning: $other is also in $CNI_CONF_DIR; containerd takes the first file by name"
  cni_conflist "$CNI_CONF_FILE" 1
}


# --- components ------------------------------------------------------------------------------

start_etcd() {
  mkdir -p "$DATA_DIR/etcd"
  chmod 700 "$DATA_DIR/etcd"
  start etcd "$TESTBED_BIN/etcd" --name testbed --data-dir "$DATA_DIR/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster testbed=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn
  wait_for etcd etcd curl -sf --max-time 2 http://127.0.0.1:2379/health
}

start_containerd() {
  mkdir -p "$STATE_DIR/containerd" "$STATE_DIR/nri/plugins" "$STATE_DIR/nri/conf" "$DATA_DIR/containerd"
  # Pod network namespaces are mounted here (netns_mounts_under_state_dir below). Make it a
  # shared mount point from the start, as a systemd host's shared / would: the kubelet refuses
  # a HostToContainer mount of it (netclass-dra's DaemonSet) on a private mount, and containerd
  # makes it shared only once it creates a pod network namespace. down.sh unmounts it.
  local netns=$STATE_DIR/containerd/io.containerd.grpc.v1.cri/netns
  mkdir -p "$netns"
  mountpoint -q "$netns" || mount --bind "$netns" "$netns"
  mount --make-rshared "$netns"
  containerd_config "$STATE_DIR/containerd.toml" "$STATE_DIR/nri" /
  # containerd finds the shim on PATH
  PATH="$TESTBED_BIN:$PATH" start containerd "$TESTBED_BIN/containerd" --config "$STATE_DIR/containerd.toml"
  wait_for containerd "containerd" "$TESTBED_BIN/ctr" --address "$CONTAINERD_SOCKET" version
  wait_for containerd "the NRI socket $NRI_SOCKET" test -S "$NRI_SOCKET"
  log "importing $TESTBED_IMAGE"
  # (ctr warns that cgroup v1 is deprecated on every call here: not worth repeating)
  "$TESTBED_BIN/ctr" --address "$CONTAINERD_SOCKET" -n k8s.io images import --platform linux/amd64 \
    "$TESTBED_IMAGE_DIR/testbed-image.tar" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2) >/dev/null
}

start_apiserver() {
  start kube-apiserver "$TESTBED_BIN/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address="$NODE_IP" --advertise-address="$NODE_IP" --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-cluster-ip-range="$SERVICE_SUBNET" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP \
    --allow-privileged=true --profiling=false --v=1
  wait_for kube-apiserver "kube-apiserver /readyz" apiserver_ready
}

start_controllers() {
  start kube-controller-manager "$TESTBED_BIN/kube-controller-manager" \
    --kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --cluster-name=netclass-testbed \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --use-service-account-credentials=true \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --profiling=false --v=1
  start kube-scheduler "$TESTBED_BIN/kube-scheduler" \
    --kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1
  wait_for kube-controller-manager "kube-controller-manager /healthz" curl -skf --max-time 2 https://127.0.0.1:10257/healthz
  wait_for kube-scheduler "kube-scheduler /healthz" curl -skf --max-time 2 https://127.0.0.1:10259/healthz
}

start_kubelet() {
  mkdir -p "$KUBELET_DIR/plugins" "$KUBELET_DIR/plugins_registry"
  kubelet_config "$STATE_DIR/kubelet.yaml" "$NODE_NAME" "$NODE_IP" /
  start kubelet "$TESTBED_BIN/kubelet" --config="$STATE_DIR/kubelet.yaml" \
    --kubeconfig="$STATE_DIR/kubelet.kubeconfig" --root-dir="$KUBELET_DIR" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1
  wait_for kubelet "node $NODE_NAME to register" kubectl_admin get node "$NODE_NAME"
  wait_for kubelet "node $NODE_NAME to be Ready" node_ready "$NODE_NAME"
  mkdir -p "$NODES_DIR"
  write_node_env "$(node_env_file "$NODE_NAME")" 1 "$NODE_NAME" "" "" / "$LOG_DIR" ""
}

# wanted_nodes: the names of nodes 2..TESTBED_NODES.
wanted_nodes() {
  local n=${TESTBED_NODES:-2} k
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > MAX_NODE_INDEX)); then
    die "TESTBED_NODES=$n: want a number of nodes from 1 to $MAX_NODE_INDEX"
  fi
  for ((k = 2; k <= n; k++)); do printf '%s-n%s\n' "$NODE_NAME" "$k"; done
}

# converge_nodes: nodes 2..N are exactly the wanted ones, each healthy (a node that is not is
# removed and added again; one that is not wanted is removed).
converge_nodes() {
  local wanted node
  wanted=$(wanted_nodes)
  while read -r node; do
    [[ -n $node ]] || continue
    if ! grep -qxF "$node" <<<"$wanted"; then
      with_nodes_lock node_remove "$node"
    elif ! node_healthy "$node"; then
      log "node $node is not healthy: starting it again"
      with_nodes_lock node_remove "$node"
    fi
  done < <(extra_nodes)
  while read -r node; do
    [[ -n $node ]] || continue
    node_healthy "$node" || with_nodes_lock node_add "$node"
  done <<<"$wanted"
  with_nodes_lock write_env
}

# primary_policy: the bed's primary NetworkPolicy engine, off unless
# NETCLASS_TESTBED_PRIMARY_POLICY=kube-network-policies (knp.sh; README.md, "A primary policy engine").
primary_policy() {
  case ${NETCLASS_TESTBED_PRIMARY_POLICY:-none} in
  none | "") ;;
  kube-network-policies) "$here/knp.sh" start ;;
  *) die "NETCLASS_TESTBED_PRIMARY_POLICY=$NETCLASS_TESTBED_PRIMARY_POLICY: none or kube-network-policies" ;;
  esac
}

# multus: Multus in front of the primary network on every node, off unless
# NETCLASS_TESTBED_MULTUS=1 (multus.sh; README.md, "Multus").
multus() {
  case ${NETCLASS_TESTBED_MULTUS:-0} in
  0 | "") ;;
  1) "$here/multus.sh" start ;;
  *) die "NETCLASS_TESTBED_MULTUS=$NETCLASS_TESTBED_MULTUS: 0 or 1" ;;
  esac
}

main() {
  wanted_nodes >/dev/null
  local start_time=$SECONDS c
  if control_plane_up; then
    converge_nodes
    primary_policy
    multus
    log "up: nodes $(env_value "$STATE_DIR/env" NETCLASS_TESTBED_NODES) (KUBECONFIG=$KUBECONFIG_PATH)"
    return 0
  fi
  if [[ -d $STATE_DIR ]]; then
    log "a previous test bed was left half up: tearing it down first"
    "$here/down.sh"
  fi
  "$here/build.sh"
  start_time=$SECONDS
  check_free
  mkdir -p "$STATE_DIR" "$PIDS" "$LOG_DIR"
  snapshot_host
  for c in "${COMPONENTS[@]}"; do : >"$LOG_DIR/$c.log"; done

  make_pki
  node_certs "$NODE_NAME" "$NODE_IP"
  kubeconfig "$KUBECONFIG_PATH" admin
  kubeconfig "$STATE_DIR/controller-manager.kubeconfig" controller-manager
  kubeconfig "$STATE_DIR/scheduler.kubeconfig" scheduler
  kubeconfig "$STATE_DIR/kubelet.kubeconfig" "kubelet-client-$NODE_NAME"

  setup_network
  install_cni
  start_etcd
  start_containerd
  start_apiserver
  start_controllers
  start_kubelet
  for c in "${COMPONENTS[@]}"; do alive "$c"; done
  touch "$STATE_DIR/up"
  converge_nodes
  primary_policy
  multus
  for c in "${COMPONENTS[@]}"; do alive "$c"; done
  log "up in $((SECONDS - start_time)) s: nodes $(env_value "$STATE_DIR/env" NETCLASS_TESTBED_NODES) Ready; API server $APISERVER_URL; KUBECONFIG=$KUBECONFIG_PATH"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
