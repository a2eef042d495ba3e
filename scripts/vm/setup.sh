#!/usr/bin/env bash
# Prepares everything the VM test harness (test/vm) needs to boot Debian's stock kernel under
# qemu: the packages, an uncompressed vmlinux, a tiny initramfs and an out-of-tree netdevsim.ko.
# Everything is cached by kernel version outside the repository; a second run is a no-op.
#
#   NETCLASS_VM_CACHE   cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/netclass/vm)
#
# Layout: $cache/<kv>/{vmlinux,initramfs.cpio,netdevsim.ko} and $cache/current = <kv>.
set -euo pipefail

cache=${NETCLASS_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netclass/vm}
# Modules the initramfs loads before it can mount the host's / (their dependencies are added).
boot_modules=(virtio_pci 9pnet_virtio 9p overlay virtio_console)

die() { printf 'vm setup: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'vm setup: %s\n' "$*" >&2; }

# installed PKG[=VERSION] tells whether the package (at that version, if given) is installed.
installed() {
	local name=${1%%=*}
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$name" 2>/dev/null)" = installed ] || return 1
	case $1 in *=*) [ "$(dpkg-query -W -f='${Version}' "$name")" = "${1#*=}" ] ;; esac
}

# ensure_packages PKG... installs the packages that are missing (apt-get update first).
ensure_packages() {
	local missing=() p
	for p in "$@"; do installed "$p" || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "packages missing (${missing[*]}) and not root: install them or run as root"
	say "installing ${missing[*]}"
	apt-get update -qq >&2 || die "apt-get update failed: cannot install ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
		die "apt-get install ${missing[*]} failed"
	for p in "${missing[@]}"; do installed "$p" || die "package $p is still not installed"; done
}

# kernel_release prints the release (e.g. 6.1.0-56-amd64) that linux-image-amd64 depends on.
kernel_release() {
	local dep
	dep=$(dpkg-query -W -f='${Depends}' linux-image-amd64) || die "linux-image-amd64 is not installed"
	dep=${dep%% *}
	[ "${dep#linux-image-}" != "$dep" ] || die "cannot read the kernel release from linux-image-amd64 (depends: $dep)"
	printf '%s\n' "${dep#linux-image-}"
}

# extract_vmlinux KV OUT decompresses the xz stream inside /boot/vmlinuz-KV into an ELF file.
extract_vmlinux() {
	local kv=$1 out=$2 bz=/boot/vmlinuz-$1 off
	[ -s "$out" ] && return 0
	[ -r "$bz" ] || die "$bz is missing: reinstall linux-image-$kv"
	off=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "$bz" | head -n 1 | cut -d: -f1)
	[ -n "$off" ] || die "no xz stream in $bz: cannot extract vmlinux"
	say "extracting vmlinux from $bz"
	# xz stops after the first stream, so tail may die of SIGPIPE: the ELF check below judges.
	{ tail -c +"$((off + 1))" "$bz" || true; } | xz -dc --single-stream >"$out.tmp" ||
		die "decompressing the xz stream of $bz failed"
	[ "$(head -c 4 "$out.tmp" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] ||
		die "the xz stream of $bz is not an ELF vmlinux"
	mv "$out.tmp" "$out"
}

# module_closure KV MOD... prints module names in dependency order (dependencies first).
module_closure() {
	local kv=$1; shift
	local -A seen=()
	visit() {
		local m=${1//-/_} deps d
		[ -n "${seen[$m]:-}" ] && return 0
		seen[$m]=1
		deps=$(modinfo -k "$kv" -F depends "$m") || die "module $m not found for kernel $kv"
		for d in ${deps//,/ }; do visit "$d"; done
		printf '%s\n' "$m"
	}
	local m
	for m in "$@"; do visit "$m"; done
}

init_script() {
	cat <<'EOF'
#!/bin/busybox sh
# netclass VM stage 1: load the modules, mount the host's / read-only with a tmpfs overlay,
# then hand over to the agent named by netclass.agent= on the kernel command line.
/bin/busybox --install -s /bin
export PATH=/bin
fail() { echo "netclass-vm init: $*" >/dev/console; echo o >/proc/sysrq-trigger; sleep 60; }
mkdir -p /proc /sys /dev /lower /upper /newroot
mount -t proc proc /proc
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.list); do insmod "/modules/$m.ko" || fail "insmod $m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower ||
	fail "mounting the host root over 9p failed"
mount -t tmpfs -o mode=0755 upper /upper && mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot ||
	fail "mounting the overlay root failed"
agent=
for arg in $(cat /proc/cmdline); do
	case "$arg" in netclass.agent=*) agent=${arg#netclass.agent=} ;; esac
done
[ -x "/newroot$agent" ] || fail "agent '$agent' is not executable in the guest"
mount --move /dev /newroot/dev
umount /proc
exec switch_root /newroot "$agent" guest-init
EOF
}

# build_initramfs KV OUT writes an uncompressed newc cpio with busybox, the modules and /init.
build_initramfs() {
	local kv=$1 out=$2 stamp want dir m f
	want=$( { init_script; printf '%s\n' "${boot_modules[@]}"; } | sha256sum | cut -c1-16)
	stamp=$out.recipe
	[ -s "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
	say "building the initramfs for $kv"
	dir=$(mktemp -d)
	mkdir -p "$dir/bin" "$dir/modules"
	cp /bin/busybox "$dir/bin/busybox"
	module_closure "$kv" "${boot_modules[@]}" >"$dir/modules.list"
	while read -r m; do
		f=$(modinfo -k "$kv" -n "$m") || die "module $m not found for kernel $kv"
		case "$f" in
		*.ko) cp "$f" "$dir/modules/$m.ko" ;;
		*.ko.xz) xz -dc "$f" >"$dir/modules/$m.ko" ;;
		*.ko.zst) zstd -qdc "$f" >"$dir/modules/$m.ko" ;;
		*) die "module $m has an unknown file type: $f" ;;
		esac
	done <"$dir/modules.list"
	init_script >"$dir/init"
	chmod 0755 "$dir/init"
	(cd "$dir" && find . -print0 | cpio --null -o -H newc --quiet) >"$out.tmp" || die "cpio of the initramfs failed"
	rm -rf "$dir"
	mv "$out.tmp" "$out"
	printf '%s\n' "$want" >"$stamp"
}

# build_netdevsim KV OUT builds drivers/net/netdevsim out of tree for kernel KV.
build_netdevsim() {
	local kv=$1 out=$2 series tarball src
	[ -s "$out" ] && return 0
	series=$(echo "$kv" | cut -d. -f1,2)
	tarball=/usr/src/linux-source-$series.tar.xz
	[ -r "$tarball" ] || die "$tarball is missing: install linux-source-$series"
	src=$(dirname "$out")/src
	rm -rf "$src" && mkdir -p "$src"
	say "extracting drivers/net/netdevsim from $tarball"
	tar -xJf "$tarball" -C "$src" --strip-components=4 "linux-source-$series/drivers/net/netdevsim/" ||
		die "extracting drivers/net/netdevsim from $tarball failed"
	say "building netdevsim.ko for $kv"
	make -s -C "/lib/modules/$kv/build" M="$src" CONFIG_NETDEVSIM=m modules >&2 ||
		die "building netdevsim.ko against /lib/modules/$kv/build failed"
	strip --strip-debug -o "$out.tmp" "$src/netdevsim.ko" && mv "$out.tmp" "$out"
	rm -rf "$src"
}

main() {
	local kv image_version series dir
	ensure_packages qemu-system-x86 linux-image-amd64 busybox-static kmod xz-utils cpio make gcc
	kv=$(kernel_release)
	image_version=$(dpkg-query -W -f='${Version}' "linux-image-$kv")
	series=$(echo "$kv" | cut -d. -f1,2)
	ensure_packages "linux-headers-$kv" "linux-source-$series=$image_version"
	dir=$cache/$kv
	mkdir -p "$dir" || die "cannot create the cache directory $dir"
	extract_vmlinux "$kv" "$dir/vmlinux"
	build_initramfs "$kv" "$dir/initramfs.cpio"
	build_netdevsim "$kv" "$dir/netdevsim.ko"
	printf '%s\n' "$kv" >"$cache/current.tmp" && mv "$cache/current.tmp" "$cache/current"
	say "ready: kernel $kv in $dir"
}

main "$@"
