#!/usr/bin/env bash
# Add a node to the running test bed, or remove one (README.md, "Nodes").
#   node.sh add [NAME]    start a node (default name: <node 1>-n<index>) and wait until Ready;
#                         prints its name
#   node.sh remove NAME   drain it, stop its kubelet and containerd, delete its Node object,
#                         remove its namespaces, links, cgroups and directories
#   node.sh list          the nodes, one "INDEX NAME" a line
# Idempotent: adding a node that is up does nothing, removing one that is gone succeeds.
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

usage() { die "usage: node.sh add [NAME] | remove NAME | list"; }

add() {
  local name=${1:-}
  if [[ -z $name ]]; then
    name="$NODE_NAME-n$(free_index)"
  fi
  node_add "$name"
  printf '%s\n' "$name"
}

main() {
  need_root "node.sh"
  [[ -f $STATE_DIR/up ]] || die "the test bed is not up: run \`make testbed-up\` first"
  case ${1:-} in
    add)
      (($# <= 2)) || usage
      with_nodes_lock add "${2:-}"
      ;;
    remove)
      (($# == 2)) || usage
      [[ $2 != "$NODE_NAME" ]] || die "node 1 ($2) goes only with the test bed: make testbed-down"
      if [[ ! -f $(node_env_file "$2") && ! -d $NODES_DIR/$2 ]]; then
        log "node $2 is not there"
        return 0
      fi
      with_nodes_lock node_remove "$2"
      ;;
    list) nodes_by_index ;;
    *) usage ;;
  esac
}

main "$@"
