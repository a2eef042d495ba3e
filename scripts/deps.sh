#!/usr/bin/env bash
# Installs what netclass's build, tests and demo need on a fresh Debian
# machine: the Debian packages (only when missing) and the upstream CNI
# plugins. Run as root; `make demo` and `make test` call it.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "netclass: this needs root (network namespaces, links, qdiscs, nftables): run it with sudo" >&2
	exit 1
fi

# command -> Debian package
declare -A need=(
	[time]=time [dnsmasq]=dnsmasq-base
	[ip]=iproute2 [tc]=iproute2 [bridge]=iproute2
	[nft]=nftables [iptables]=iptables
	[modprobe]=kmod [jq]=jq
	[iperf3]=iperf3 # the QoS tests' real senders (a meter must never error a socket)
)
missing=()
for cmd in "${!need[@]}"; do
	type -P "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
	echo "netclass: installing ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1; then
	echo "netclass: Go is not installed (expected at /usr/local/go/bin or on PATH)" >&2
	exit 1
fi

# Kernel modules the host data plane uses; built in on some kernels.
for m in veth bridge vxlan ifb sch_tbf sch_ingress cls_u32 act_mirred nf_tables nft_limit; do
	modprobe -q "$m" 2>/dev/null || true
done
exec scripts/upstream-cni.sh "${NETCLASS_UPSTREAM_CNI:-.cache/cni}"
