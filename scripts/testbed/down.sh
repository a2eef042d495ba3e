#!/usr/bin/env bash
# Tear down the test bed that up.sh started and put the host back as up.sh found it (see
# README.md): every node (nodes 2..N through nodes.sh), then node 1 and the control plane.
# Stops only the processes the scripts recorded, by PID, and those inside the nodes' own
# namespaces and cgroups. Idempotent: when nothing is up it checks for leftovers, removes them
# and succeeds.
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

need_root "down.sh"
PIDS="$STATE_DIR/pids"
CTR=("$TESTBED_BIN/ctr" --address "$CONTAINERD_SOCKET" -n k8s.io)

running() { pid_alive "$PIDS/$1.pid"; }

# stop NAME: SIGTERM one of node 1's recorded processes, SIGKILL it after 20 s.
stop() {
  stop_pid "$PIDS/$1.pid" "$1" || warn "$1 survived SIGKILL"
}

# netns_left: the pod network namespaces the nodes' containerds still hold (node 1's in its
# state dir; the others' state dirs are bound there inside their mount namespaces, and the
# mount point files are visible from here).
netns_left() {
  local d
  for d in "$STATE_DIR/containerd" "$NODES_DIR"/*/containerd; do
    find "$d/io.containerd.grpc.v1.cri/netns" -mindepth 1 -maxdepth 1 2>/dev/null | grep -q . && return 0
  done
  return 1
}

# Delete every pod through the API while the kubelets still run, so each sandbox goes through
# the ordinary path: NRI StopPodSandbox, CNI DEL, DRA NodeUnprepareResources.
drain() {
  running kube-apiserver || return 0
  [[ -s $KUBECONFIG_PATH ]] || return 0
  # nothing may recreate the pods meanwhile
  stop kube-controller-manager
  stop kube-scheduler
  log "deleting all pods (grace period 1 s)"
  kubectl_admin delete pods --all --all-namespaces --grace-period=1 --wait=false >/dev/null 2>&1 ||
    log "note: could not delete the pods through the API; removing the sandboxes by force"
  local deadline=$((SECONDS + DRAIN_TIMEOUT))
  until [[ -z $(kubectl_admin get pods -A -o name 2>/dev/null) ]] && ! netns_left; do
    if ((SECONDS >= deadline)); then
      log "note: pods or sandboxes still there after ${DRAIN_TIMEOUT}s; removing them by force"
      return 0
    fi
    sleep 0.5
  done
}

# Kill and delete what containerd still runs (its shims outlive it otherwise).
remove_tasks() {
  running containerd || return 0
  local id
  while read -r id; do
    [[ -n $id ]] || continue
    "${CTR[@]}" tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
  done < <("${CTR[@]}" tasks ls -q 2>/dev/null)
  while read -r id; do
    [[ -n $id ]] || continue
    "${CTR[@]}" tasks delete -f "$id" >/dev/null 2>&1 || true
    "${CTR[@]}" containers delete "$id" >/dev/null 2>&1 || true
  done < <("${CTR[@]}" containers ls -q 2>/dev/null)
}

# Shims started by our containerd name its socket on their command line; end those, by PID.
kill_leftover_shims() {
  local p cmd
  for p in /proc/[0-9]*; do
    { cmd=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    [[ $cmd == *containerd-shim-runc-v2* && $cmd == *"$CONTAINERD_SOCKET"* ]] || continue
    log "killing leftover shim ${p#/proc/}"
    kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
}

unmount_all() {
  local dirs=("$KUBELET_DIR" "$STATE_DIR" "$DATA_DIR") m pass
  for pass in 1 2 3 4 5; do
    mapfile -t left < <(mounts_under "${dirs[@]}")
    ((${#left[@]})) || return 0
    for m in "${left[@]}"; do
      umount "$m" 2>/dev/null || { ((pass < 3)) || umount -l "$m" 2>/dev/null; } || true
    done
  done
  mapfile -t left < <(mounts_under "${dirs[@]}")
  ((${#left[@]} == 0)) || warn "still mounted: ${left[*]}"
}

# rm_tree DIR: remove a directory tree, but never through a mount point.
rm_tree() {
  local d=$1
  [[ -e $d ]] || return 0
  if mounts_under "$d" | grep -q .; then
    warn "not removing $d: something is still mounted under it"
    return 0
  fi
  rm -rf --one-file-system "$d"
}

remove_cgroups() {
  local root
  for root in /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods.slice \
    /sys/fs/cgroup/"$CGROUP_PARENT" /sys/fs/cgroup/*/"$CGROUP_PARENT"; do
    [[ -d $root ]] || continue
    find "$root" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ ! -d $root ]] || warn "cgroup $root could not be removed (processes left in it?)"
  done
}

# Chains that the kubelet (KUBE-*), portmap (CNI-HOSTPORT-*, CNI-DN-*) and up.sh
# (NETCLASS-TESTBED) added since up.sh's snapshot, with the rules that jump to them.
remove_chains() {
  local ipt t before script chain
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    before="$STATE_DIR/$ipt.chains.before"
    for t in filter nat mangle raw; do
      mapfile -t doomed < <("$ipt-save" -t "$t" 2>/dev/null | awk -F'[: ]' '/^:/ { print $2 }' |
        grep -E '^(KUBE-|CNI-HOSTPORT-|CNI-DN-|NETCLASS-TESTBED$)' |
        while read -r chain; do
          [[ $chain == NETCLASS-TESTBED ]] || ! grep -qxF "$t $chain" "$before" 2>/dev/null || continue
          printf '%s\n' "$chain"
        done)
      ((${#doomed[@]})) || continue
      script=$(
        printf '*%s\n' "$t"
        "$ipt-save" -t "$t" 2>/dev/null | awk -v list="${doomed[*]}" '
          BEGIN { n = split(list, a, " "); for (i = 1; i <= n; i++) doomed[a[i]] = 1 }
          /^-A / {
            for (i = 3; i < NF; i++) if (($i == "-j" || $i == "-g") && ($(i+1) in doomed) && !($2 in doomed)) {
              sub(/^-A /, "-D "); print; break
            }
          }'
        for chain in "${doomed[@]}"; do printf -- '-F %s\n' "$chain"; done
        for chain in "${doomed[@]}"; do printf -- '-X %s\n' "$chain"; done
        printf 'COMMIT\n'
      )
      printf '%s\n' "$script" | "$ipt-restore" --noflush ||
        warn "$ipt: could not remove chains ${doomed[*]} from table $t"
    done
  done
}

# The nftables tables netclass-dra made on node 1 (this machine's own namespaces) since up.sh's
# snapshot: its node tables (netclass_guard, netclass_pol, netclass_qos, ...) outlive it by
# design (README, Known limits), so an uninstall from this host removes them here.
remove_tables() {
  command -v nft >/dev/null || return 0
  local before="$STATE_DIR/nft.tables.before" family name
  while read -r _ family name; do
    [[ $name == netclass* ]] || continue
    ! grep -qxF "table $family $name" "$before" 2>/dev/null || continue
    log "removing nftables table $family $name"
    nft delete table "$family" "$name" || warn "could not remove nftables table $family $name"
  done < <(nft list tables 2>/dev/null)
}

restore_sysctls() {
  local file="$STATE_DIR/sysctl.before" key value now
  [[ -s $file ]] || return 0
  while IFS='=' read -r key value; do
    now=$(sysctl -n "$key" 2>/dev/null) || continue
    [[ $now == "$value" ]] && continue
    case $key in
      net.ipv4.ip_forward | net.ipv6.conf.all.forwarding)
        # the test bed never sets these: someone else did, so leave them
        log "note: $key is $now, was $value before up.sh; the test bed does not set it, leaving it"
        ;;
      *)
        log "restoring $key=$value (was $now)"
        sysctl -qw "$key=$value" || warn "could not restore $key=$value"
        ;;
    esac
  done <"$file"
}

remove_network() {
  local b
  for b in "$UNDERLAY_BRIDGE" "$POD_BRIDGE"; do
    ip link show "$b" >/dev/null 2>&1 || continue
    # ours when up.sh recorded it, or when no state is left and it has the default name
    if grep -qxF "$b" "$STATE_DIR/bridges.created" 2>/dev/null ||
      { [[ ! -d $STATE_DIR ]] && [[ $b == nctb0 || $b == nctb-pod ]]; }; then
      log "removing bridge $b"
      ip link del "$b" || warn "could not remove bridge $b"
    fi
  done
  if ip link show "$UNDERLAY_BRIDGE" >/dev/null 2>&1; then
    ip addr del "$NODE_IP/$UNDERLAY_PREFIX" dev "$UNDERLAY_BRIDGE" 2>/dev/null || true
  fi
  # host ends of the nodes' underlay veths whose node left no state
  local link
  while read -r link; do
    log "removing leftover link $link"
    ip link del "$link" 2>/dev/null || true
  done < <(ip -o link show | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | grep -E '^nctb-n[0-9]+$')
  rm -f "$CNI_CONF_FILE"
  rm -rf "/var/lib/cni/networks/$CNI_NETWORK_NAME"
  rm -f /var/lib/cni/results/"$CNI_NETWORK_NAME"-*
}

# Nodes whose namespace files are gone (a crash, a lost state dir) leave processes that name
# their state directory on their command line, and pods in their cgroups: end those, by PID.
kill_leftover_node_procs() {
  local p cmd dir
  while read -r dir; do
    [[ -d $dir ]] || continue
    while read -r p; do
      log "killing leftover process $p of cgroup $dir"
      kill -KILL "$p" 2>/dev/null || true
    done < <(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null)
  done < <(cgroup_dirs "$CGROUP_PARENT")
  for p in /proc/[0-9]*; do
    { cmd=$(tr '\0' ' ' <"$p/cmdline"); } 2>/dev/null || continue
    [[ $cmd == *"$TESTBED_BIN/"* && $cmd == *"$NODES_DIR/"* ]] || continue
    log "killing leftover node process ${p#/proc/}: $cmd"
    kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
}

# stop_nodes: nodes 2..N, their API objects left alone (etcd's data goes anyway).
stop_nodes() {
  local node
  while read -r node; do
    [[ -n $node ]] && node_remove "$node" local
  done < <(extra_nodes)
  kill_leftover_node_procs
}

# Files and directories up.sh created (recorded before it touched them).
remove_created() {
  local file="$STATE_DIR/created" p
  [[ -s $file ]] || return 0
  # deepest paths first, so directories are empty by the time they come
  sort -r "$file" | while read -r p; do
    [[ -n $p && -e $p ]] || continue
    case $p in
      "$KUBELET_DIR" | "$DATA_DIR" | /var/log/pods | /var/log/containers | /var/lib/netclass) rm_tree "$p" ;;
      *)
        if [[ -d $p ]]; then
          find "$p" -depth -type d -empty -delete 2>/dev/null || true
          [[ ! -e $p ]] || log "note: leaving $p: it holds files the test bed did not put there"
        else
          rm -f "$p"
        fi
        ;;
    esac
  done
}

main() {
  local had_state=true
  if [[ ! -d $STATE_DIR ]]; then
    had_state=false
    log "not up (no $STATE_DIR); checking for leftovers"
  fi
  # before the pods go: SIGINT, so that it deletes its table (knp.sh)
  "$here/knp.sh" stop || warn "kube-network-policies did not stop cleanly"
  # before the pods go too: their DEL must still reach Multus (multus.sh)
  "$here/multus.sh" stop || warn "multus did not stop cleanly"
  drain
  stop_nodes
  stop kubelet
  stop kube-scheduler
  stop kube-controller-manager
  remove_tasks
  stop containerd
  kill_leftover_shims
  stop kube-apiserver
  stop etcd
  local c pid
  for c in "${COMPONENTS[@]}"; do
    if [[ -s $PIDS/$c.pid ]] && running "$c"; then
      read -r pid _ <"$PIDS/$c.pid"
      warn "$c (pid $pid) is still running"
    fi
  done

  unmount_all
  remove_cgroups
  if $had_state; then
    remove_chains
    remove_tables
    restore_sysctls
    # containerd removes it when it stops cleanly; a killed one leaves it
    rm -f "$NRI_SOCKET"
  fi
  remove_network
  remove_created
  rm_tree "$KUBELET_DIR"
  rm_tree "$DATA_DIR"
  rm_tree "$STATE_DIR"
  if ((problems)); then
    die "down with $problems problem(s) above; logs in $LOG_DIR"
  fi
  log "down; logs kept in $LOG_DIR"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
