#!/usr/bin/env bash
# Run a command on a node of the test bed: in its network and mount namespaces (node 1: on this
# machine as it is), in the current directory. README.md, "Nodes".
#   node-exec.sh NODE -- COMMAND [ARG...]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

if (($# < 3)) || [[ $2 != -- ]]; then
  die "usage: node-exec.sh NODE -- COMMAND [ARG...]"
fi
node=$1
shift 2
file="$NODES_DIR/$node.env"
[[ -f $file ]] || die "no node $node in the test bed (no $file; nodes: $(env_value "$STATE_DIR/env" NETCLASS_TESTBED_NODES))"
netns=$(env_value "$file" NETNS)
mntns=$(env_value "$file" MNTNS)
if [[ -z $netns ]]; then
  exec "$@"
fi
# --wd=. is opened before nsenter enters the namespaces: the command starts in this directory.
exec nsenter --net="$netns" --mount="$mntns" --wd=. -- "$@"
