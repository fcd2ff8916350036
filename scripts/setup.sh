#!/bin/bash
# SPDX-License-Identifier: MIT
# One-time (idempotent) machine set-up for a fresh Debian 12 host:
#  - apt sources: bookworm-backports (guest kernel, meson, seabios, qemu
#    firmware) and a trixie deb-src line (QEMU 10.0 source);
#  - build dependencies through apt;
#  - the guest kernel image, modules, headers and source, resolved as one
#    exact version and unpacked into the cache (no root install);
#  - the QEMU source package, unpacked with Debian's patches;
#  - the PyTorch guest image and libtorch-dev headers from trixie
#    (scripts/torch-image.sh, a private apt configuration).
# Re-running only does what is missing.
. "$(dirname "$0")/lib.sh"

APT_LIST=/etc/apt/sources.list.d/spyre.sources
DEPS=(build-essential dpkg-dev git libdrm-dev busybox-static kmod cpio
      xz-utils zstd bc dwarves libelf-dev libssl-dev sparse rsync
      ninja-build pkg-config libglib2.0-dev libpixman-1-dev libfdt-dev
      zlib1g-dev flex bison python3-venv libopenblas-dev patch
      mmdebstrap squashfs-tools libjson-c-dev python3-jsonschema
      gnuplot-nox dkms abigail-tools)
BPO_DEPS=(meson python3-pycotap)

setup_apt() {
	local want
	want=$(cat <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
)
	if [ "$(cat "$APT_LIST" 2>/dev/null)" != "$want" ]; then
		msg "adding bookworm-backports and trixie deb-src to apt"
		printf '%s\n' "$want" | as_root tee "$APT_LIST" >/dev/null
		as_root apt-get update -q
	elif ! apt-cache show "linux-source-6.12" >/dev/null 2>&1; then
		as_root apt-get update -q
	fi
}

install_deps() {
	local missing=() p
	for p in "${DEPS[@]}"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		msg "installing ${missing[*]}"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends "${missing[@]}"
	fi
	missing=()
	for p in "${BPO_DEPS[@]}"; do
		# meson must be the backport (>= 1.5 for QEMU 10)
		if [ "$p" = meson ]; then
			dpkg --compare-versions \
				"$(dpkg-query -W -f='${Version}' meson 2>/dev/null || echo 0)" \
				ge 1.5 || missing+=(meson)
		else
			dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
		fi
	done
	if [ ${#missing[@]} -gt 0 ]; then
		msg "installing ${missing[*]} from bookworm-backports"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends -t bookworm-backports "${missing[@]}"
	fi
}

# Pick the kernel version: the pinned one if the archive still has it,
# else the newest version with image, headers, kbuild and source alike.
resolve_kernel() {
	local v abi cand
	cand=${SPYRE_KPKG:-}
	if [ -z "$cand" ]; then
		for v in $SPYRE_KPKG_DEFAULT \
			 $(apt-cache madison linux-source-6.12 | awk '{print $3}'); do
			abi=${v%%-*}+deb12
			if apt-cache madison "linux-image-$abi-amd64" | grep -F " $v " >/dev/null &&
			   apt-cache madison "linux-headers-$abi-amd64" | grep -F " $v " >/dev/null &&
			   apt-cache madison linux-source-6.12 | grep -F " $v " >/dev/null; then
				cand=$v
				break
			fi
		done
	fi
	[ -n "$cand" ] || die "no consistent linux 6.12 image/headers/source set"
	KPKG=$cand
	KABI=${cand%%-*}+deb12
	KREL=$KABI-amd64
	printf 'KPKG=%q\nKABI=%q\nKREL=%q\n' "$KPKG" "$KABI" "$KREL" \
		>"$SPYRE_CACHE/kernel.env"
}

fetch_debs() {
	local d=$SPYRE_CACHE/debs pkgs=() p
	mkdir -p "$d"
	for p in "linux-image-$KABI-amd64=$KPKG" "linux-headers-$KABI-amd64=$KPKG" \
		 "linux-headers-$KABI-common=$KPKG" "linux-kbuild-$KABI=$KPKG" \
		 "linux-source-6.12=$KPKG" "seabios=$SPYRE_SEABIOS_PKG"; do
		ls "$d/${p%%=*}_"*.deb >/dev/null 2>&1 || pkgs+=("$p")
	done
	if ! ls "$d"/qemu-system-data_*10.0*.deb >/dev/null 2>&1; then
		pkgs+=("qemu-system-data/bookworm-backports")
	fi
	if [ ${#pkgs[@]} -gt 0 ]; then
		msg "downloading ${pkgs[*]}"
		(cd "$d" && apt-get download -q "${pkgs[@]}" 2>&1 |
			grep -v 'unsandboxed' >&2) || die "apt-get download failed"
	fi
}

unpack_kernel() {
	local root=$SPYRE_CACHE/kernel/$KPKG/root deb
	if [ ! -f "$root/.done" ]; then
		msg "unpacking guest kernel $KPKG"
		rm -rf "$root" && mkdir -p "$root"
		for deb in "$SPYRE_CACHE/debs/linux-image-$KABI-amd64_"*.deb \
			   "$SPYRE_CACHE/debs/linux-headers-$KABI-"*.deb \
			   "$SPYRE_CACHE/debs/linux-kbuild-${KABI}_"*.deb; do
			[ -f "$deb" ] && dpkg -x "$deb" "$root"
		done
		depmod -b "$root" "$KREL"
		# the headers' one-line Makefile names /usr/src: point it here
		echo "include $root/usr/src/linux-headers-$KABI-common/Makefile" \
			>"$root/usr/src/linux-headers-$KREL/Makefile"
		touch "$root/.done"
	fi
	local src=$SPYRE_CACHE/ksrc/$KPKG
	if [ ! -f "$src/.done" ]; then
		msg "unpacking linux-source $KPKG (kselftest harness, checkpatch)"
		rm -rf "$src" && mkdir -p "$src/deb"
		dpkg -x "$SPYRE_CACHE/debs/linux-source-6.12_${KPKG}_all.deb" \
			"$src/deb"
		tar -C "$src" -xf "$src"/deb/usr/src/linux-source-6.12.tar.xz
		rm -rf "$src/deb"
		touch "$src/.done"
	fi
}

fetch_qemu() {
	local q=$SPYRE_CACHE/qemu-src dsc
	mkdir -p "$q"
	if ! ls "$q"/qemu_10.0*.dsc >/dev/null 2>&1; then
		msg "downloading QEMU 10.0 source (trixie)"
		(cd "$q" && apt-get source -q --download-only qemu/trixie 2>&1 |
			grep -v unsandboxed >&2) || die "apt-get source qemu failed"
	fi
	dsc=$(ls "$q"/qemu_10.0*.dsc | sort -V | tail -1)
	if [ ! -f "$q/src/.done" ] || [ "$(cat "$q/src/.done")" != "$dsc" ]; then
		msg "unpacking $(basename "$dsc")"
		rm -rf "$q/src"
		dpkg-source -q -x "$dsc" "$q/src" >/dev/null
		echo "$dsc" >"$q/src/.done"
	fi
}

mkdir -p "$SPYRE_CACHE"
setup_apt
install_deps
resolve_kernel
fetch_debs
unpack_kernel
fetch_qemu
"$SPYRE_ROOT/scripts/torch-image.sh" >/dev/null
msg "setup done: guest kernel $KREL, cache $SPYRE_CACHE"
