#!/usr/bin/env bash
# Bring up the one-node Kubernetes test bed on this machine (see README.md). Idempotent: when
# the test bed is already up and healthy this does nothing; a half-up test bed is torn down
# (down.sh) and started again.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

need_root "up.sh"
PKI="$STATE_DIR/pki"
PIDS="$STATE_DIR/pids"
KUBECTL="$TESTBED_BIN/kubectl"
READY_TIMEOUT=${NETCLASS_TESTBED_READY_TIMEOUT:-180}   # seconds, for each wait below

# --- small helpers --------------------------------------------------------------------------

# wait_for COMPONENT DESCRIPTION COMMAND...: retry COMMAND every 0.2 s until it succeeds; fail
# at once with the component's log when the component dies, or when the deadline passes.
wait_for() {
  local name=$1 what=$2 deadline=$((SECONDS + READY_TIMEOUT))
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$PIDS/$name.pid"; then
      tail -n 20 "$LOG_DIR/$name.log" >&2 || true
      die "$name exited while waiting for $what (log: $LOG_DIR/$name.log)"
    fi
    if ((SECONDS >= deadline)); then
      die "timed out after ${READY_TIMEOUT}s waiting for $what (log: $LOG_DIR/$name.log)"
    fi
    sleep 0.2
  done
}

# start NAME BINARY ARGS...: start a daemon in its own session, log to LOG_DIR/NAME.log and
# record "PID STARTTIME" in PIDS/NAME.pid.
start() {
  local name=$1 pid
  shift
  log "starting $name"
  setsid "$@" </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
  pid=$!
  printf '%s %s\n' "$pid" "$(proc_start_time "$pid")" >"$PIDS/$name.pid"
}

alive() {
  local name=$1
  pid_alive "$PIDS/$name.pid" || die "$name died (log: $LOG_DIR/$name.log)"
}

kubectl_admin() { "$KUBECTL" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

apiserver_ready() {
  curl -sf --max-time 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$APISERVER_URL/readyz" >/dev/null
}

node_ready() {
  [[ $(kubectl_admin get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}

is_up() {
  [[ -f $STATE_DIR/up ]] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do pid_alive "$PIDS/$c.pid" || return 1; done
  apiserver_ready && node_ready
}

# --- PKI (openssl) ---------------------------------------------------------------------------

# cert NAME CN ORG KIND [SAN]: an EC P-256 key and a certificate signed by the test bed CA.
# KIND is server, client or both; SAN an openssl subjectAltName list.
cert() {
  local name=$1 cn=$2 org=$3 kind=$4 san=${5:-} eku subj
  subj="/CN=$cn"
  case $kind in
    server) eku=serverAuth ;;
    client) eku=clientAuth ;;
    both) eku=serverAuth,clientAuth ;;
    *) die "cert $name: unknown kind $kind" ;;
  esac
  [[ -n $org ]] && subj="/O=$org$subj"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key" 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    printf 'basicConstraints=critical,CA:FALSE\n'
    printf 'keyUsage=critical,digitalSignature,keyEncipherment\n'
    printf 'extendedKeyUsage=%s\n' "$eku"
    [[ -z $san ]] || printf 'subjectAltName=%s\n' "$san"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=netclass-testbed-ca" -days 365 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt"
  cert apiserver kube-apiserver "" server \
    "IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters client
  cert admin netclass-testbed-admin system:masters client
  cert controller-manager system:kube-controller-manager "" client
  cert scheduler system:kube-scheduler "" client
  cert kubelet-client "system:node:$NODE_NAME" system:nodes client
  cert kubelet "system:node:$NODE_NAME" system:nodes server "IP:$NODE_IP,DNS:$NODE_NAME"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
}

# kubeconfig FILE CERTNAME: a kubeconfig with the CA and the client certificate embedded.
kubeconfig() {
  local file=$1 name=$2
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: netclass-testbed
  cluster:
    server: $APISERVER_URL
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: netclass-testbed
  context:
    cluster: netclass-testbed
    user: $name
current-context: netclass-testbed
EOF
  chmod 600 "$file"
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
  : >"$STATE_DIR/created"
  local p
  for p in "$KUBELET_DIR" "$CNI_CONF_DIR" "$CNI_BIN_DIR" /var/log/pods /var/log/containers \
    "$(dirname "$NRI_SOCKET")" /var/lib/cni "$DATA_DIR"; do
    [[ -e $p ]] && continue
    # record the topmost directory that does not exist yet (/etc/cni for /etc/cni/net.d)
    while [[ ! -e $(dirname "$p") ]]; do p=$(dirname "$p"); done
    grep -qxF "$p" "$STATE_DIR/created" || printf '%s\n' "$p" >>"$STATE_DIR/created"
  done
}

# The node's network: a bridge that nothing routes anywhere. It carries the node's InternalIP,
# the API server binds to it, and the primary CNI attaches pods to it.
setup_bridge() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    printf '%s\n' "$BRIDGE" >"$STATE_DIR/bridge.created"
  fi
  local prefix=${POD_SUBNET#*/}
  ip addr replace "$NODE_IP/$prefix" dev "$BRIDGE"
  sysctl -qw "net.ipv6.conf.$BRIDGE.disable_ipv6=1" 2>/dev/null || true   # no IPv6 on it
  ip link set "$BRIDGE" up
  # Nothing from the pod bridge is forwarded anywhere else, whatever ip_forward says.
  local ipt
  for ipt in iptables ip6tables; do
    if [[ $ipt == ip6tables ]] && ! ip6tables -S FORWARD >/dev/null 2>&1; then
      log "note: no ip6tables here; the bridge has IPv6 disabled anyway"
      continue
    fi
    "$ipt" -N NETCLASS-TESTBED 2>/dev/null || "$ipt" -F NETCLASS-TESTBED
    "$ipt" -A NETCLASS-TESTBED -i "$BRIDGE" ! -o "$BRIDGE" -m comment \
      --comment "netclass test bed: pods never reach beyond their bridge" -j DROP
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
  cat >"$CNI_CONF_FILE" <<EOF
{
  "cniVersion": "1.1.0",
  "name": "$CNI_NETWORK_NAME",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_SUBNET", "gateway": "$NODE_IP" }]]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
EOF
}

cgroup_v2() { [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; }
systemd_host() { [[ -d /run/systemd/system ]]; }

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
  local systemd_cgroup=false
  systemd_host && cgroup_v2 && systemd_cgroup=true
  mkdir -p "$STATE_DIR/containerd" "$STATE_DIR/nri-plugins" "$STATE_DIR/nri-conf" "$DATA_DIR/containerd"
  # Pod network namespaces are mounted here (netns_mounts_under_state_dir below). Make it a
  # shared mount point from the start, as a systemd host's shared / would: the kubelet refuses
  # a HostToContainer mount of it (netclass-dra's DaemonSet) on a private mount, and containerd
  # makes it shared only once it creates a pod network namespace. down.sh unmounts it.
  local netns=$STATE_DIR/containerd/io.containerd.grpc.v1.cri/netns
  mkdir -p "$netns"
  mountpoint -q "$netns" || mount --bind "$netns" "$netns"
  mount --make-rshared "$netns"
  cat >"$STATE_DIR/containerd.toml" <<EOF
version = 3
root = "$DATA_DIR/containerd"
state = "$STATE_DIR/containerd"

[grpc]
  address = "$CONTAINERD_SOCKET"

[plugins.'io.containerd.cri.v1.runtime']
  # root here lacks CAP_SYS_RESOURCE: without this runc cannot lower oom_score_adj
  restrict_oom_score_adj = true
  # pod network namespaces under the state dir, so down.sh finds exactly ours
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '$TESTBED_BIN/runc'
        SystemdCgroup = $systemd_cgroup
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['$CNI_BIN_DIR']
    conf_dir = '$CNI_CONF_DIR'
    max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$TESTBED_IMAGE'

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'

[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = '$NRI_SOCKET'
  plugin_path = '$STATE_DIR/nri-plugins'
  plugin_config_path = '$STATE_DIR/nri-conf'
EOF
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
  local cgroup_lines="cgroupDriver: cgroupfs"
  systemd_host && cgroup_v2 && cgroup_lines="cgroupDriver: systemd"
  # kubelet 1.37 refuses cgroup v1 unless told otherwise
  cgroup_v2 || cgroup_lines+=$'\nfailCgroupV1: false'
  cat >"$STATE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
$cgroup_lines
address: $NODE_IP
port: 10250
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: ""
failSwapOn: false
rotateCertificates: false
serverTLSBootstrap: false
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
EOF
  start kubelet "$TESTBED_BIN/kubelet" --config="$STATE_DIR/kubelet.yaml" \
    --kubeconfig="$STATE_DIR/kubelet.kubeconfig" --root-dir="$KUBELET_DIR" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1
  wait_for kubelet "node $NODE_NAME to register" kubectl_admin get node "$NODE_NAME"
  wait_for kubelet "node $NODE_NAME to be Ready" node_ready
}

write_env() {
  cat >"$STATE_DIR/env" <<EOF
# Written by scripts/testbed/up.sh; source it to talk to the test bed.
export KUBECONFIG=$KUBECONFIG_PATH
export NETCLASS_KUBECONFIG=$KUBECONFIG_PATH
NETCLASS_TESTBED_BIN=$TESTBED_BIN
NETCLASS_TESTBED_NODE_NAME=$NODE_NAME
NETCLASS_TESTBED_NODE_IP=$NODE_IP
NETCLASS_TESTBED_KUBELET_DIR=$KUBELET_DIR
NETCLASS_TESTBED_CONTAINERD_SOCKET=$CONTAINERD_SOCKET
NETCLASS_TESTBED_NRI_SOCKET=$NRI_SOCKET
NETCLASS_TESTBED_IMAGE=$TESTBED_IMAGE
EOF
}

main() {
  if is_up; then
    log "already up: node $NODE_NAME is Ready (KUBECONFIG=$KUBECONFIG_PATH)"
    return 0
  fi
  if [[ -d $STATE_DIR ]]; then
    log "a previous test bed was left half up: tearing it down first"
    "$here/down.sh"
  fi
  "$here/build.sh"
  local start_time=$SECONDS
  check_free
  mkdir -p "$STATE_DIR" "$PIDS" "$LOG_DIR"
  snapshot_host
  local c
  for c in "${COMPONENTS[@]}"; do : >"$LOG_DIR/$c.log"; done

  make_pki
  kubeconfig "$KUBECONFIG_PATH" admin
  kubeconfig "$STATE_DIR/controller-manager.kubeconfig" controller-manager
  kubeconfig "$STATE_DIR/scheduler.kubeconfig" scheduler
  kubeconfig "$STATE_DIR/kubelet.kubeconfig" kubelet-client

  setup_bridge
  install_cni
  start_etcd
  start_containerd
  start_apiserver
  start_controllers
  start_kubelet
  for c in "${COMPONENTS[@]}"; do alive "$c"; done
  write_env
  touch "$STATE_DIR/up"
  log "up in $((SECONDS - start_time)) s: node $NODE_NAME Ready at $NODE_IP; KUBECONFIG=$KUBECONFIG_PATH"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
