# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
# Versions, paths and small helpers shared by the test bed scripts (sourced, not run).
# Everything here can be overridden from the environment.

# --- versions (all from the Go module proxy) -------------------------------------------------
K8S_VERSION=${K8S_VERSION:-v1.37.1}                  # k8s.io/kubernetes
K8S_STAGING_VERSION=${K8S_STAGING_VERSION:-v0.37.1}  # every k8s.io/* staging module
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}                 # go.etcd.io/etcd/server/v3
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}     # github.com/containerd/containerd/v2
RUNC_VERSION=${RUNC_VERSION:-v1.5.2}                 # github.com/opencontainers/runc
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:-v1.9.1}   # github.com/containernetworking/plugins

# One cache directory per combination of versions.
TESTBED_VERSION="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_containerd-${CONTAINERD_VERSION}_runc-${RUNC_VERSION}_cni-${CNI_PLUGINS_VERSION}"
TESTBED_CACHE=${NETCLASS_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netclass/testbed}
TESTBED_DIR="$TESTBED_CACHE/$TESTBED_VERSION"
TESTBED_BIN="$TESTBED_DIR/bin"
TESTBED_SRC="$TESTBED_DIR/src"
TESTBED_IMAGE_DIR="$TESTBED_DIR/image"

K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
CONTAINERD_BINARIES=(containerd containerd-shim-runc-v2 ctr)
CNI_BINARIES=(bridge loopback host-local portmap)

# --- the running cluster ----------------------------------------------------------------------
STATE_DIR=${NETCLASS_TESTBED_STATE:-/run/netclass-testbed}   # PIDs, PKI, kubeconfigs, snapshots
DATA_DIR=${NETCLASS_TESTBED_DATA:-/var/lib/netclass-testbed} # etcd data, containerd root
LOG_DIR=${NETCLASS_TESTBED_LOGS:-/var/log/netclass-testbed}  # one log per component
KUBECONFIG_PATH="$STATE_DIR/admin.kubeconfig"
KUBELET_DIR=/var/lib/kubelet             # the default, so netclass-dra's defaults match
CNI_CONF_DIR=/etc/cni/net.d
CNI_BIN_DIR=/opt/cni/bin
CNI_CONF_FILE="$CNI_CONF_DIR/10-netclass-testbed.conflist"
CNI_NETWORK_NAME=netclass-testbed
NRI_SOCKET=/var/run/nri/nri.sock
CONTAINERD_SOCKET="$STATE_DIR/containerd/containerd.sock"

# The node's own network: a bridge made by up.sh that carries the node's InternalIP (which the
# API server and the kubelet bind to) and is the primary CNI bridge for the pods. Nothing routes
# it anywhere: pods get no default route and the host forwards nothing from it.
BRIDGE=${NETCLASS_TESTBED_BRIDGE:-nctb0}
POD_SUBNET=${NETCLASS_TESTBED_POD_SUBNET:-10.250.0.0/24}
NODE_IP=${NETCLASS_TESTBED_NODE_IP:-10.250.0.1}
SERVICE_SUBNET=${NETCLASS_TESTBED_SERVICE_SUBNET:-10.251.0.0/24}
SERVICE_IP=${NETCLASS_TESTBED_SERVICE_IP:-10.251.0.1}   # first address of SERVICE_SUBNET
APISERVER_PORT=6443
APISERVER_URL="https://$NODE_IP:$APISERVER_PORT"
NODE_NAME=${NETCLASS_TESTBED_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}

# The hand-made image (busybox-static + a static pause), pinned as the sandbox image.
TESTBED_IMAGE=${NETCLASS_TESTBED_IMAGE:-localhost/netclass-testbed/busybox:1}

# Sysctls that the kubelet sets at start (container manager "kernel tunables"); up.sh records
# their values first and down.sh puts them back.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

# Processes in start order; down.sh stops them in reverse.
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet)

# --- helpers ------------------------------------------------------------------------------------
log() { printf '%s testbed: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'testbed: error: %s\n' "$*" >&2; exit 1; }

need_root() {
  [[ $(id -u) -eq 0 ]] || die "$1 must run as root"
}

# pid_alive PIDFILE: true when the file names a live process (not a zombie) whose start time
# matches the one recorded next to it, so a recycled PID is never taken for ours.
pid_alive() {
  local pidfile=$1 pid start state now
  [[ -s $pidfile ]] || return 1
  read -r pid start <"$pidfile" || return 1
  [[ -n $pid && -d /proc/$pid ]] || return 1
  read -r state now < <(proc_stat "$pid") || return 1
  [[ $state != [ZX] && $now == "$start" ]]
}

# proc_start_time PID: the process start time in clock ticks since boot.
proc_start_time() {
  local state start
  read -r state start < <(proc_stat "$1") || return 0
  printf '%s' "$start"
}

# proc_stat PID: "STATE STARTTIME" from /proc/PID/stat (fields 3 and 22).
proc_stat() {
  local stat
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1
  stat=${stat##*) }          # drop "pid (comm) " — comm may hold spaces
  # shellcheck disable=SC2086
  set -- $stat
  printf '%s %s\n' "$1" "${20}"
}
