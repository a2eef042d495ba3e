#!/usr/bin/env bash
# Install CNI plugin binaries into the CNI bin dir of every node of the running test bed but
# node 1 (whose dir is this machine's: `make install` puts them there), or remove them. Used by
# `make install` / `make uninstall`.
#   plugins.sh install FILE...    plugins.sh uninstall NAME...
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

(($# >= 2)) || die "usage: plugins.sh install FILE... | uninstall NAME..."
action=$1
shift
for node in $(env_value "$STATE_DIR/env" NETCLASS_TESTBED_NODES); do
  file="$NODES_DIR/$node.env"
  [[ -n $(env_value "$file" NETNS) ]] || continue   # node 1: this machine's CNI bin dir
  dir=$(env_value "$file" CNI_BIN_DIR)
  case $action in
    install)
      log "installing ${*##*/} into $dir on node $node"
      "$here/node-exec.sh" "$node" -- install -m 0755 "$@" "$dir/"
      ;;
    uninstall)
      paths=()
      for name in "$@"; do paths+=("$dir/${name##*/}"); done
      "$here/node-exec.sh" "$node" -- rm -f -- "${paths[@]}"
      ;;
    *) die "plugins.sh: unknown action $action" ;;
  esac
done
