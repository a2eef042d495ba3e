#!/usr/bin/env bash
# Installs the upstream CNI plugins netclass is tested and benchmarked with
# (IPAM delegates, bridge/macvlan/bandwidth to chain with) and cnitool, built
# exactly as upstream ships them (`go install pkg@version`, with upstream's own
# go.mod) at the versions netclass's go.mod pins. Usage: upstream-cni.sh DIR
set -euo pipefail
dest=${1:?usage: upstream-cni.sh DIR}
cd "$(dirname "$0")/.."
plugins_version=$(go list -m -f '{{.Version}}' github.com/containernetworking/plugins)
cni_version=$(go list -m -f '{{.Version}}' github.com/containernetworking/cni)
stamp="$dest/.upstream-$plugins_version-$cni_version"
[ -f "$stamp" ] && exit 0
mkdir -p "$dest"
pkgs=()
for p in ipam/host-local ipam/static ipam/dhcp main/bridge main/macvlan main/loopback meta/bandwidth; do
	pkgs+=("github.com/containernetworking/plugins/plugins/$p@$plugins_version")
done
echo "building upstream CNI plugins $plugins_version and cnitool $cni_version into $dest" >&2
GOBIN=$(realpath "$dest") GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install -trimpath "${pkgs[@]}"
GOBIN=$(realpath "$dest") GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install -trimpath "github.com/containernetworking/cni/cnitool@$cni_version"
rm -f "$dest"/.upstream-*
touch "$stamp"
