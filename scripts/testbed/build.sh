#!/usr/bin/env bash
# Build every binary of the Kubernetes test bed from the Go module proxy, plus the tiny local
# image, into a cache directory outside the repository (see README.md). A second run with the
# cache present does nothing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=scripts/testbed/env.sh
source "$here/env.sh"

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
unset GOOS GOARCH

REQUIRED_DEBS=(iptables libseccomp-dev pkg-config busybox-static jq)
OPTIONAL_DEBS=(conntrack socat ethtool)

deb_installed() {
  [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

install_debs() {
  local missing=() optional=() p
  for p in "${REQUIRED_DEBS[@]}"; do deb_installed "$p" || missing+=("$p"); done
  for p in "${OPTIONAL_DEBS[@]}"; do deb_installed "$p" || optional+=("$p"); done
  if ((${#missing[@]} == 0)) && { ((${#optional[@]} == 0)) || [[ ${1:-} != cold ]]; }; then
    return 0
  fi
  need_root "installing Debian packages (${missing[*]} ${optional[*]})"
  log "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ((${#optional[@]})) && [[ ${1:-} == cold ]]; then
    log "installing optional Debian packages: ${optional[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null ||
      log "warning: optional packages not installed (${optional[*]}); the test bed works without them"
  fi
}

have_all() {
  local b
  for b in "$@"; do [[ -x $TESTBED_BIN/$b ]] || return 1; done
}

# scratch_module NAME REQUIRE... : a module outside the repository whose only purpose is to
# depend on the given module versions; prints its directory.
scratch_module() {
  local name=$1 dir="$TESTBED_SRC/$1"
  shift
  mkdir -p "$dir"
  rm -f "$dir/go.mod" "$dir/go.sum"
  (cd "$dir" && go mod init "netclass-testbed.invalid/$name" >/dev/null 2>&1 && go mod edit -go=1.26)
  local req
  for req in "$@"; do (cd "$dir" && go mod edit -require="$req"); done
  printf '%s' "$dir"
}

# write_tools DIR PKG... : blank imports that keep `go mod tidy` from dropping the packages.
write_tools() {
  local dir=$1 pkg
  shift
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for pkg in "$@"; do printf '\t_ "%s"\n' "$pkg"; done
    printf ')\n'
  } >"$dir/tools.go"
}

# go_build DIR OUTPUT_DIR CGO TAGS LDFLAGS PKG... : build main packages into a temporary
# directory, then move the binaries into OUTPUT_DIR (never half-written binaries in the cache).
go_build() {
  local dir=$1 out=$2 cgo=$3 tags=$4 ldflags=$5 tmp
  shift 5
  tmp=$(mktemp -d "$TESTBED_DIR/build.XXXXXX")
  (cd "$dir" && CGO_ENABLED=$cgo nice -n 10 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp/" "$@")
  mkdir -p "$out"
  mv "$tmp"/* "$out/"
  rmdir "$tmp"
}

build_kubernetes() {
  have_all "${K8S_BINARIES[@]}" && return 0
  log "kubernetes $K8S_VERSION: resolving modules"
  local dir gomod staging=() m
  dir=$(scratch_module kubernetes "k8s.io/kubernetes@$K8S_VERSION")
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)
  [[ -s $gomod ]] || die "could not download k8s.io/kubernetes@$K8S_VERSION"
  mapfile -t staging < <(go mod edit -json "$gomod" |
    jq -r '.Replace[] | select(.New.Path | startswith("./staging/")) | .Old.Path')
  ((${#staging[@]} > 0)) || die "no staging modules found in $gomod"
  for m in "${staging[@]}"; do
    (cd "$dir" && go mod edit -replace="$m=$m@$K8S_STAGING_VERSION")
  done
  log "kubernetes: ${#staging[@]} staging modules replaced by $K8S_STAGING_VERSION"
  local pkgs=()
  for m in "${K8S_BINARIES[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$m"); done
  write_tools "$dir" "${pkgs[@]}"
  (cd "$dir" && go mod tidy)
  local major minor v=${K8S_VERSION#v} ldflags="-s -w" p
  major=${v%%.*}
  minor=${v#*.}
  minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  log "kubernetes: building ${K8S_BINARIES[*]} (the slow part, 5 to 15 minutes on 2 cores)"
  go_build "$dir" "$TESTBED_BIN" 0 "" "$ldflags" "${pkgs[@]}"
}

build_etcd() {
  have_all etcd && return 0
  log "etcd $ETCD_VERSION"
  local dir
  dir=$(scratch_module etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION")
  write_tools "$dir" go.etcd.io/etcd/server/v3
  (cd "$dir" && go mod tidy)
  local tmp
  tmp=$(mktemp -d "$TESTBED_DIR/build.XXXXXX")
  (cd "$dir" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  mkdir -p "$TESTBED_BIN"
  mv "$tmp/etcd" "$TESTBED_BIN/etcd"
  rmdir "$tmp"
}

build_containerd() {
  have_all "${CONTAINERD_BINARIES[@]}" && return 0
  log "containerd $CONTAINERD_VERSION"
  local dir m=github.com/containerd/containerd/v2 pkgs=() b
  dir=$(scratch_module containerd "$m@$CONTAINERD_VERSION")
  for b in "${CONTAINERD_BINARIES[@]}"; do pkgs+=("$m/cmd/$b"); done
  write_tools "$dir" "${pkgs[@]}"
  (cd "$dir" && go mod tidy)
  go_build "$dir" "$TESTBED_BIN" 0 urfave_cli_no_docs \
    "-s -w -X $m/version.Version=$CONTAINERD_VERSION -X $m/version.Package=$m" "${pkgs[@]}"
}

build_runc() {
  have_all runc && return 0
  log "runc $RUNC_VERSION (cgo, seccomp)"
  local dir m=github.com/opencontainers/runc tmp
  dir=$(scratch_module runc "$m@$RUNC_VERSION")
  write_tools "$dir" "$m"
  (cd "$dir" && go mod tidy)
  tmp=$(mktemp -d "$TESTBED_DIR/build.XXXXXX")
  (cd "$dir" && CGO_ENABLED=1 nice -n 10 go build -trimpath -tags seccomp \
    -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" -o "$tmp/runc" "$m")
  mkdir -p "$TESTBED_BIN"
  mv "$tmp/runc" "$TESTBED_BIN/runc"
  rmdir "$tmp"
}

build_cni() {
  have_all "${CNI_BINARIES[@]}" && return 0
  log "CNI plugins $CNI_PLUGINS_VERSION: ${CNI_BINARIES[*]}"
  local dir m=github.com/containernetworking/plugins
  local pkgs=("$m/plugins/main/bridge" "$m/plugins/main/loopback" "$m/plugins/ipam/host-local" "$m/plugins/meta/portmap")
  dir=$(scratch_module cni "$m@$CNI_PLUGINS_VERSION")
  write_tools "$dir" "${pkgs[@]}"
  (cd "$dir" && go mod tidy)
  go_build "$dir" "$TESTBED_BIN" 0 "" \
    "-s -w -X $m/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "${pkgs[@]}"
}

# The local image: an OCI layout tar with one uncompressed layer holding Debian's static busybox
# (with its applet links), the static pause binary from test/testbed/pause as entrypoint, and
# test/testbed/netprobe (hand-built frames, as a default pod can send them).
build_image() {
  local busybox=/bin/busybox key tar="$TESTBED_IMAGE_DIR/testbed-image.tar"
  [[ -x $busybox ]] || die "$busybox is missing (Debian package busybox-static)"
  key=$( {
    printf '%s\n' "$TESTBED_IMAGE" "$(dpkg-query -W -f='${Version}' busybox-static)"
    cat "$repo/test/testbed/pause/main.go" "$repo"/test/testbed/netprobe/*.go "$repo"/test/rawframe/*.go "$here/build.sh"
  } | sha256sum | cut -d' ' -f1)
  if [[ -s $tar && $(cat "$TESTBED_IMAGE_DIR/testbed-image.key" 2>/dev/null) == "$key" ]]; then
    return 0
  fi
  log "image $TESTBED_IMAGE"
  local work rootfs
  work=$(mktemp -d "$TESTBED_DIR/image.XXXXXX")
  rootfs="$work/rootfs"
  mkdir -p "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/proc" "$rootfs/sys" "$rootfs/dev" "$rootfs/root"
  chmod 1777 "$rootfs/tmp"
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$rootfs/pause" ./test/testbed/pause)
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$rootfs/bin/netprobe" ./test/testbed/netprobe)
  cp "$busybox" "$rootfs/bin/busybox"
  local applet
  while read -r applet; do
    [[ $applet == busybox ]] || ln -sf busybox "$rootfs/bin/$applet"
  done < <("$busybox" --list)
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"

  local layout="$work/layout" blobs
  blobs="$layout/blobs/sha256"
  mkdir -p "$blobs"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$work/layer.tar" .
  local layer_digest layer_size
  layer_digest=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  layer_size=$(stat -c %s "$work/layer.tar")
  mv "$work/layer.tar" "$blobs/$layer_digest"

  jq -cn --arg diff "sha256:$layer_digest" '{
      architecture: "amd64", os: "linux",
      config: {Entrypoint: ["/pause"], Env: ["PATH=/bin"], WorkingDir: "/"},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created_by: "netclass test bed: busybox-static, pause and netprobe"}]
    }' >"$work/config.json"
  local config_digest config_size
  config_digest=$(sha256sum "$work/config.json" | cut -d' ' -f1)
  config_size=$(stat -c %s "$work/config.json")
  mv "$work/config.json" "$blobs/$config_digest"

  jq -cn --arg cd "sha256:$config_digest" --argjson cs "$config_size" \
    --arg ld "sha256:$layer_digest" --argjson ls "$layer_size" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $ld, size: $ls}]
    }' >"$work/manifest.json"
  local manifest_digest manifest_size
  manifest_digest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
  manifest_size=$(stat -c %s "$work/manifest.json")
  mv "$work/manifest.json" "$blobs/$manifest_digest"

  jq -cn --arg md "sha256:$manifest_digest" --argjson ms "$manifest_size" --arg name "$TESTBED_IMAGE" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
        platform: {architecture: "amd64", os: "linux"},
        annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": ($name | sub(".*:"; ""))}}]
    }' >"$layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

  mkdir -p "$TESTBED_IMAGE_DIR"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$layout" -cf "$tar.tmp" .
  mv "$tar.tmp" "$tar"
  printf '%s\n' "$key" >"$TESTBED_IMAGE_DIR/testbed-image.key"
  rm -rf "$work"
}

main() {
  command -v go >/dev/null || die "go is not on PATH"
  mkdir -p "$TESTBED_BIN"
  local all=("${K8S_BINARIES[@]}" etcd "${CONTAINERD_BINARIES[@]}" runc "${CNI_BINARIES[@]}")
  local start=$SECONDS
  if have_all "${all[@]}"; then
    install_debs warm
    build_image
    log "binaries cached in $TESTBED_BIN"
    return 0
  fi
  install_debs cold
  log "building into $TESTBED_DIR"
  build_cni
  build_runc
  build_containerd
  build_etcd
  build_kubernetes
  build_image
  have_all "${all[@]}" || die "some binaries are missing from $TESTBED_BIN"
  log "built in $((SECONDS - start)) s into $TESTBED_BIN"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
