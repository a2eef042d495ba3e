# shellcheck shell=bash
# Configuration files of a node's containerd, kubelet and primary CNI network (sourced by up.sh
# for node 1 and by nodes.sh for the others). Needs env.sh and pki.sh.

cgroup_v2() { [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; }
systemd_host() { [[ -d /run/systemd/system ]]; }

# systemd_cgroups CGROUP_ROOT: whether a node's kubelet and runc use the systemd cgroup driver:
# on a systemd host with cgroup v2, for node 1 only (the others have their own cgroupfs root).
systemd_cgroups() { [[ $1 == / ]] && systemd_host && cgroup_v2; }

# containerd_config FILE NRI_DIR CGROUP_ROOT: containerd's configuration. Every node runs it
# with the same root, state and socket paths: nodes 2..N bind their own directories over them
# (NODE_BINDS), so conf/deploy's netns volume names one directory that exists on every node.
# NRI_DIR holds the node's (empty) NRI plugin and plugin configuration directories.
containerd_config() {
  local file=$1 nri=$2 systemd_cgroup=false
  systemd_cgroups "$3" && systemd_cgroup=true
  cat >"$file" <<TOML
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
  plugin_path = '$nri/plugins'
  plugin_config_path = '$nri/conf'
TOML
}

# kubelet_config FILE NODE IP CGROUP_ROOT: the kubelet's configuration. CGROUP_ROOT is "/" on
# node 1 (kubepods at the top, as on any node) and the node's own root elsewhere, so that two
# kubelets never manage the same kubepods cgroups.
kubelet_config() {
  local file=$1 node=$2 ip=$3 root=$4 cgroup_lines="cgroupDriver: cgroupfs"
  systemd_cgroups "$root" && cgroup_lines="cgroupDriver: systemd"
  # kubelet 1.37 refuses cgroup v1 unless told otherwise
  cgroup_v2 || cgroup_lines+=$'\nfailCgroupV1: false'
  [[ $root == / ]] || cgroup_lines+=$'\n'"cgroupRoot: $root"
  cat >"$file" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
$cgroup_lines
address: $ip
port: 10250
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
tlsCertFile: $PKI/kubelet-$node.crt
tlsPrivateKeyFile: $PKI/kubelet-$node.key
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
YAML
}

# cni_conflist FILE INDEX: the primary network of node INDEX: its pod bridge, its pod subnet,
# no masquerade and no default route; routes to the underlay (the API server, the nodes) and
# to the other nodes' pods through the node.
cni_conflist() {
  local file=$1 idx=$2 gw
  gw=$(pod_gateway "$idx")
  cat >"$file" <<JSON
{
  "cniVersion": "1.1.0",
  "name": "$CNI_NETWORK_NAME",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$POD_BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$(pod_subnet "$idx")", "gateway": "$gw" }]],
        "routes": [
          { "dst": "$UNDERLAY_NET.0/$UNDERLAY_PREFIX", "gw": "$gw" },
          { "dst": "$POD_CIDR", "gw": "$gw" }
        ]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
JSON
}

# pod_bridge INDEX: the node's pod bridge with the node's address on the pod subnet (the pods'
# gateway to the underlay), in the current network namespace.
pod_bridge() {
  local idx=$1
  ip link show "$POD_BRIDGE" >/dev/null 2>&1 || add_bridge "$POD_BRIDGE"
  ip addr replace "$(pod_gateway "$idx")/24" dev "$POD_BRIDGE"
  sysctl -qw "net.ipv6.conf.$POD_BRIDGE.disable_ipv6=1" 2>/dev/null || true   # no IPv6 on it
  ip link set "$POD_BRIDGE" up
}

# write_node_env FILE INDEX NAME NETNS MNTNS CGROUP_ROOT LOGS HOST_PATHS: the node's part of
# the contract (README.md, "Nodes"). Paths are as the node sees them.
write_node_env() {
  local file=$1 idx=$2 name=$3 ip
  ip=$(node_ip "$idx")
  {
    printf '# Written by scripts/testbed (README.md, "Nodes"): node %s of the test bed.\n' "$idx"
    write_kv NODE_NAME "$name"
    write_kv NODE_INDEX "$idx"
    write_kv NODE_IP "$ip"
    write_kv UNDERLAY_IF "$(underlay_if "$idx")"
    write_kv UNDERLAY_ADDR "$ip/$UNDERLAY_PREFIX"
    write_kv NETNS "$4"
    write_kv MNTNS "$5"
    write_kv KUBELET_DIR "$KUBELET_DIR"
    write_kv NRI_SOCKET "$NRI_SOCKET"
    write_kv CONTAINERD_SOCKET "$CONTAINERD_SOCKET"
    write_kv CNI_BIN_DIR "$CNI_BIN_DIR"
    write_kv CNI_CONF_DIR "$CNI_CONF_DIR"
    write_kv POD_SUBNET "$(pod_subnet "$idx")"
    write_kv POD_BRIDGE "$POD_BRIDGE"
    write_kv POD_GATEWAY "$(pod_gateway "$idx")"
    write_kv CGROUP_ROOT "$6"
    write_kv LOG_DIR "$7"
    write_kv HOST_PATHS "$8"
  } >"$file.tmp"
  mv "$file.tmp" "$file"
}
