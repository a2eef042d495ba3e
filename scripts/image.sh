#!/usr/bin/env bash
# Builds the netclass container image as an OCI layout archive, without a
# container engine: one layer with the static binaries of `make build` at /
# (netclass-dra, netclass-controller and the CNI plugins under /cni/) and
# Debian's static busybox, which the DaemonSet's init container uses to
# install the plugins into the node's /opt/cni/bin.
# Usage: image.sh OUT.tar [NAME]   (NAME defaults to localhost/netclass/netclass:latest)
# Import it with: ctr -n k8s.io images import --platform linux/amd64 OUT.tar
set -euo pipefail
out=${1:?usage: image.sh OUT.tar [NAME]}
name=${2:-localhost/netclass/netclass:latest}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$repo/bin} # the binaries of `make build`

need=()
command -v jq >/dev/null || need+=(jq)
[ -x /bin/busybox ] || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$rootfs/bin" "$rootfs/cni" "$rootfs/tmp" "$rootfs/etc"
chmod 1777 "$rootfs/tmp"
for d in netclass-dra netclass-controller; do
	install -m 0755 "$bin/$d" "$rootfs/$d"
done
for p in "$repo"/cmd/netclass-*; do
	p=$(basename "$p")
	case $p in netclass-dra | netclass-controller | netclass-demo) continue ;; esac
	install -m 0755 "$bin/$p" "$rootfs/cni/"
done
cp /bin/busybox "$rootfs/bin/busybox"
for a in sh cp mv rm mkdir ls cat; do ln -s busybox "$rootfs/bin/$a"; done
printf 'root:x:0:0:root:/:/bin/sh\n' >"$rootfs/etc/passwd"

blobs=$work/layout/blobs/sha256
mkdir -p "$blobs"
blob() { # file -> prints "digest size" and moves the file into the blob store
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$blobs/$d"
	echo "$d $s"
}
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$work/layer.tar" .
read -r ld ls < <(blob "$work/layer.tar")
jq -cn --arg diff "sha256:$ld" '{architecture: "amd64", os: "linux",
	config: {Env: ["PATH=/bin:/"], WorkingDir: "/"},
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created_by: "netclass scripts/image.sh"}]}' >"$work/config.json"
read -r cd cs < <(blob "$work/config.json")
jq -cn --arg cd "sha256:$cd" --argjson cs "$cs" --arg ld "sha256:$ld" --argjson ls "$ls" '{schemaVersion: 2,
	mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]}' >"$work/manifest.json"
read -r md ms < <(blob "$work/manifest.json")
jq -cn --arg md "sha256:$md" --argjson ms "$ms" --arg name "$name" '{schemaVersion: 2,
	mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
		platform: {architecture: "amd64", os: "linux"},
		annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": ($name | sub(".*:"; ""))}}]}' \
	>"$work/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
mkdir -p "$(dirname "$out")"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/layout" -cf "$out.tmp" .
mv "$out.tmp" "$out"
echo "image $name -> $out" >&2
