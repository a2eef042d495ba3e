#!/usr/bin/env bash
# Runs inside the fresh mount namespace of node NODE (nodes.sh: `unshare --mount` entered from
# the node's network namespace) and makes it the node's: this machine's namespace files and
# node 1's mounts are dropped from the copy, /sys shows the node's network devices, and the
# node's own directories are bound over the default paths (NODE_BINDS).
# Usage: node-mounts.sh NODE
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

node=${1:?usage: node-mounts.sh NODE}
state="$NODES_DIR/$node"
data="$NODES_DATA/$node"

# lazy_umount MOUNT...: detach each, deepest first (lazily: nothing of this copy is in use).
lazy_umount() {
  local m
  for m in "$@"; do umount -l "$m" 2>/dev/null || true; done
}

# The copy holds every mount of this machine's namespace: network namespace files (other
# tests', node 1's pods') would be kept alive by it, and node 1's kubelet and containerd
# mounts would hide under ours. Drop them.
drop_copies() {
  local targets=() b
  for b in "${NODE_BINDS[@]}"; do targets+=("${b%%:*}"); done
  # the file system type follows the "-" that ends mountinfo's optional fields
  mapfile -t nsfs < <(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "nsfs") print $5; break } }' \
    /proc/self/mountinfo | sort -ru)
  lazy_umount "${nsfs[@]}"
  mapfile -t under < <(mounts_under "${targets[@]}" "$NS_DIR")
  lazy_umount "${under[@]}"
}

# A sysfs mounted from the node's network namespace, so /sys/class/net lists the node's
# devices (the kubelet, netclass-dra and the DaemonSet's /sys volume read it); the cgroup
# hierarchies are moved over from the old /sys.
node_sysfs() {
  local hold="$state/.cgroup-hold"
  mkdir -p "$hold"
  mount --rbind /sys/fs/cgroup "$hold"
  mount -t sysfs sysfs /sys
  mount --move "$hold" /sys/fs/cgroup
  rmdir "$hold"
}

bind_node_dirs() {
  local b target src
  for b in "${NODE_BINDS[@]}"; do
    target=${b%%:*} src=${b#*:}
    case $src in
      s/*) src="$state/${src#s/}" ;;
      d/*) src="$data/${src#d/}" ;;
      *) die "NODE_BINDS entry $b: source must start with s/ or d/" ;;
    esac
    mkdir -p "$src" "$target"
    mount --bind "$src" "$target"
  done
  # As up.sh does for node 1: a shared mount point from the start, so that the DaemonSet's
  # HostToContainer netns volume is accepted and sees the pod namespaces containerd mounts.
  local netns="$STATE_DIR/containerd/io.containerd.grpc.v1.cri/netns"
  mkdir -p "$netns"
  mount --bind "$netns" "$netns"
  mount --make-rshared "$netns"
}

drop_copies
node_sysfs
bind_node_dirs
