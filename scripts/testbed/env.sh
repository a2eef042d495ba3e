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

# The nodes' network (README.md, "The network"). The underlay, the "physical network" that
# joins the nodes, is the bridge UNDERLAY_BRIDGE on this machine: node 1 (this machine's own
# namespaces) carries its InternalIP on the bridge itself, node k >= 2 on a veth ul-n<k> in its
# own network namespace whose peer nctb-n<k> is a port of the bridge. Node k's address is
# UNDERLAY_NET.k/24; the API server binds node 1's. Each node's pods have their own bridge
# POD_BRIDGE and subnet POD_NET.k.0/24 inside the node's network namespace. Nothing routes any
# of it anywhere else: no default route, no NAT, and this machine forwards nothing from it.
UNDERLAY_BRIDGE=${NETCLASS_TESTBED_BRIDGE:-nctb0}
UNDERLAY_NET=${NETCLASS_TESTBED_UNDERLAY_NET:-10.250.0}   # node k: UNDERLAY_NET.k/24
UNDERLAY_PREFIX=24
POD_NET=${NETCLASS_TESTBED_POD_NET:-10.252}               # node k's pods: POD_NET.k.0/24
POD_CIDR="$POD_NET.0.0/16"                                # every node's pod subnet
POD_BRIDGE=nctb-pod
NODE_IP="$UNDERLAY_NET.1"
SERVICE_SUBNET=${NETCLASS_TESTBED_SERVICE_SUBNET:-10.251.0.0/24}
SERVICE_IP=${NETCLASS_TESTBED_SERVICE_IP:-10.251.0.1}   # first address of SERVICE_SUBNET
APISERVER_PORT=6443
APISERVER_URL="https://$NODE_IP:$APISERVER_PORT"
NODE_NAME=${NETCLASS_TESTBED_NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}

# Nodes 2..N (nodes.sh). Each has a directory of state and one of data on this machine, which
# its mount namespace binds over the default paths (NODE_BINDS), so that every program on the
# node finds its own kubelet dir, CNI dirs, NRI socket… where a real node has them.
NODES_DIR="$STATE_DIR/nodes"          # <node>.env (the contract), <node>/ (PIDs, configs)
NODES_DATA="$DATA_DIR/nodes"          # <node>/ (kubelet dir, containerd root, CNI dirs…)
NS_DIR="$STATE_DIR/ns"                # <node>.net, <node>.mnt: the persisted namespaces
CGROUP_PARENT=netclass-testbed        # node k's cgroup root: /netclass-testbed/<node>
MAX_NODE_INDEX=250
# NODE_BINDS: "path on the node:directory under the node's state (s/) or data (d/) dir".
NODE_BINDS=(
  "$KUBELET_DIR:d/kubelet"
  "$CNI_CONF_DIR:d/cni-conf"
  "$CNI_BIN_DIR:d/cni-bin"
  "/var/lib/cni:d/cni-state"
  "/var/lib/netclass:d/netclass"
  "/var/log/pods:d/log-pods"
  "/var/log/containers:d/log-containers"
  "$DATA_DIR/containerd:d/containerd"
  "$STATE_DIR/containerd:s/containerd"
  "/run/nri:s/nri"
  "/run/containerd:s/run-containerd"
  "/run/netns:s/run-netns"
)

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
# warn: a problem that does not stop the script; the script fails at its end (problems > 0).
problems=0
warn() { log "warning: $*"; problems=$((problems + 1)); }
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

# bed_nodes: the bed's nodes, node 1 first, one per line; dies when the bed is not up.
bed_nodes() {
  local list
  list=$(env_value "$STATE_DIR/env" NETCLASS_TESTBED_NODES)
  [[ -n $list ]] || die "the test bed is not up (no nodes in $STATE_DIR/env)"
  printf '%s\n' $list
}

# node_daemons_status DIR: "NODE running PID" or "NODE stopped" for each node's daemon, whose
# pidfile is DIR/NODE.pid; false unless every one runs.
node_daemons_status() {
  local dir=$1 node pid all=0
  for node in $(bed_nodes); do
    if pid_alive "$dir/$node.pid"; then
      read -r pid _ <"$dir/$node.pid"
      printf '%s running %s\n' "$node" "$pid"
    else
      printf '%s stopped\n' "$node"
      all=1
    fi
  done
  return $all
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

# --- nodes ----------------------------------------------------------------------------------------

# Addresses and names of node number IDX (1 is this machine's own namespaces).
node_ip() { printf '%s.%s' "$UNDERLAY_NET" "$1"; }
pod_subnet() { printf '%s.%s.0/24' "$POD_NET" "$1"; }
pod_gateway() { printf '%s.%s.1' "$POD_NET" "$1"; }
host_veth() { printf 'nctb-n%s' "$1"; }
underlay_if() {
  if (($1 == 1)); then printf '%s' "$UNDERLAY_BRIDGE"; else printf 'ul-n%s' "$1"; fi
}

# add_bridge NAME: a bridge with an address of its own (random, locally administered): a
# bridge otherwise takes the lowest address of its ports, which changes as veths come and go,
# and the neighbours' ARP entries for the addresses on it go stale (their next packets lost).
add_bridge() {
  local mac
  mac=$(od -An -N5 -tx1 /dev/urandom | tr -s ' ' ':')
  ip link add "$1" address "02${mac% }" type bridge
}

# env_value FILE KEY: the value of KEY in a KEY=value (or KEY="value") file, "" when absent.
env_value() {
  local line
  line=$(grep -m1 -E "^(export )?$2=" "$1" 2>/dev/null) || return 0
  line=${line#export }
  line=${line#*=}
  line=${line#\"}
  printf '%s' "${line%\"}"
}

# write_kv KEY VALUE: one line of an env file, quoted so that both bash and the Go reader
# (test/testbed/bed) read it back; refuses characters neither would keep.
write_kv() {
  [[ $2 != *[\"\$\`\\]* && $2 != *$'\n'* ]] || die "value of $1 holds a quote, \$, \` or backslash: $2"
  printf '%s="%s"\n' "$1" "$2"
}

# daemon LOG COMMAND...: start COMMAND in its own session, stdin from /dev/null, output appended
# to LOG, and none of our other file descriptors: a lock held by whoever started the script
# (the test bed's flock) must not live on in a daemon. Sets DAEMON_PID (setsid execs: the PID
# is COMMAND's).
daemon() {
  local logfile=$1
  shift
  (
    close_fds
    exec setsid "$@"
  ) </dev/null >>"$logfile" 2>&1 &
  # shellcheck disable=SC2034 # read by the callers
  DAEMON_PID=$!
}

# close_fds: close every file descriptor above 2 of the current (sub)shell but bash's own 255.
close_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd=${fd##*/}
    if ((fd > 2 && fd != 255)); then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

# stop_pid PIDFILE LABEL: SIGTERM the recorded process, SIGKILL it after 20 s; false when it
# survives SIGKILL.
stop_pid() {
  local pidfile=$1 label=$2 pid deadline
  pid_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  read -r pid _ <"$pidfile"
  log "stopping $label (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 20))
  while pid_alive "$pidfile"; do
    if ((SECONDS >= deadline)); then
      log "$label did not stop in 20 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      deadline=$((SECONDS + 10))
      while pid_alive "$pidfile" && ((SECONDS < deadline)); do sleep 0.1; done
      pid_alive "$pidfile" && return 1
      break
    fi
    sleep 0.1
  done
  rm -f "$pidfile"
}

# ns_pids NSFILE KIND: the processes in the namespace (KIND net or mnt) persisted at NSFILE.
ns_pids() {
  local file=$1 kind=$2 ino p
  mountpoint -q "$file" 2>/dev/null || return 0   # not persisted (any more): no such namespace
  ino=$(stat -L -c %i "$file" 2>/dev/null) || return 0
  for p in /proc/[0-9]*; do
    [[ $(readlink "$p/ns/$kind" 2>/dev/null) == "$kind:[$ino]" ]] && printf '%s\n' "${p#/proc/}"
  done
  return 0
}

# cgroup_dirs REL: the directory REL (e.g. netclass-testbed/node) in every cgroup hierarchy.
cgroup_dirs() {
  local h
  if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
    printf '%s\n' "/sys/fs/cgroup/$1"
    return 0
  fi
  for h in /sys/fs/cgroup/*/; do
    [[ -f ${h}cgroup.procs ]] && printf '%s\n' "${h}$1"
  done
  return 0
}

# mounts_under DIR...: mount points at or below the directories, deepest first (in the mount
# namespace of the caller).
mounts_under() {
  local d m
  awk '{ print $5 }' /proc/self/mountinfo | while read -r m; do
    m=$(printf '%b' "${m//\\/\\0}")    # mountinfo escapes spaces and the like as \040
    for d in "$@"; do
      if [[ $m == "$d" || $m == "$d"/* ]]; then printf '%s\n' "$m"; fi
    done
  done | sort -ru
}

# wait_until PIDFILE LOG WHAT TIMEOUT COMMAND...: retry COMMAND every 0.2 s until it succeeds;
# fail at once with the end of LOG when the process of PIDFILE dies, or when TIMEOUT (s) passes.
wait_until() {
  local pidfile=$1 logfile=$2 what=$3 timeout=$4 deadline=$((SECONDS + $4))
  shift 4
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$pidfile"; then
      tail -n 20 "$logfile" >&2 || true
      die "$(basename "$pidfile" .pid) exited while waiting for $what (log: $logfile)"
    fi
    if ((SECONDS >= deadline)); then
      die "timed out after ${timeout}s waiting for $what (log: $logfile)"
    fi
    sleep 0.2
  done
}
