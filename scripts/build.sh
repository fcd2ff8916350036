#!/bin/bash
# SPDX-License-Identifier: MIT
# Build everything the guest runs, cached under $SPYRE_CACHE:
#   qemu       the QEMU binary with the spyre card and its firmware
#              (SeaBIOS 1.16.3, QEMU 10 option ROMs): scripts/build-qemu.sh
#   module     spyre.ko against the guest kernel headers
#   user       libspyre, tools, selftests and examples/ (installed into a
#              staging dir; the examples are built with pkg-config against
#              the staged libspyre, as a user's program is)
#   torch      the PyTorch backend (torch_spyre/) against the trixie image
#              and SDK of scripts/torch-image.sh, staged for the image's
#              overlay (libspyre, the torch_spyre package and dist-info)
#   initramfs  busybox + kmod + modules + our binaries (+ the torch stage
#              when the torch step ran in the same call: only a guest
#              booted with vm.sh --torch needs it)
# Usage: build.sh [STEP...]   (default: all of them; make demo and
#        vm.sh without --torch leave torch out, the long C++ build)
# Prints nothing on stdout but the paths file: $SPYRE_BUILD/paths.env
. "$(dirname "$0")/lib.sh"
kernel_env

B=$SPYRE_BUILD
mkdir -p "$B"

# Modules the guest needs besides spyre.ko; dependencies are added.
GUEST_MODULES=(drm drm_kms_helper drm_shmem_helper gpu-sched drm_buddy
	       drm_exec drm_gpuvm vgem virtio_blk squashfs overlay aer_inject)

step_qemu() {
	msg "qemu: building (cached)"
	QEMU=$("$SPYRE_ROOT/scripts/build-qemu.sh" | tail -1)
	[ -x "$QEMU" ] || die "build-qemu.sh gave no binary"
}

step_module() {
	local src=$B/module
	msg "module: building spyre.ko for $KREL"
	sync_module_src "$src"
	make -s -C "$KDIR" M="$src" modules >&2
	MODULE=$src/driver/spyre.ko
	[ -f "$MODULE" ] || die "no spyre.ko in $src/driver"
}

step_user() {
	local o=$B/user stage=$B/stage
	msg "user: building libspyre, tools and selftests"
	rm -rf "$stage"
	make -s -C "$SPYRE_ROOT/libspyre" O="$o/libspyre" KSRC="$KSRC" >&2
	make -s -C "$SPYRE_ROOT/libspyre" O="$o/libspyre" KSRC="$KSRC" \
		DESTDIR="$stage" PREFIX=/usr install >&2
	make -s -C "$SPYRE_ROOT/selftests" O="$o/selftests" KSRC="$KSRC" \
		LIBSPYRE_O="$o/libspyre" >&2
	make -s -C "$SPYRE_ROOT/selftests" O="$o/selftests" KSRC="$KSRC" \
		LIBSPYRE_O="$o/libspyre" DESTDIR="$stage" PREFIX=/usr install >&2
	PKG_CONFIG_SYSROOT_DIR=$stage \
	PKG_CONFIG_LIBDIR=$stage/usr/lib/pkgconfig:$(pkg-config --variable pc_path pkg-config) \
		make -s -C "$SPYRE_ROOT/examples" O="$o/examples" \
		DESTDIR="$stage" PREFIX=/usr install >&2
	STAGE=$stage
}

# The PyTorch backend, staged under $B/torch-stage: what the guest copies
# into the trixie image's overlay (vm.sh --torch).  The image itself is made
# by setup (scripts/torch-image.sh); it is only read here.
step_torch() {
	local o=$B/user/torch_spyre stage=$B/torch-stage
	[ -n "${STAGE:-}" ] || step_user
	msg "torch: building the spyre PyTorch backend"
	eval "$("$SPYRE_ROOT/scripts/torch-image.sh")"
	rm -rf "$stage" && mkdir -p "$stage/usr/lib"
	make -s -C "$SPYRE_ROOT/torch_spyre" O="$o" SDK="$TORCH_SDK" \
		TREE="$TORCH_TREE" LIBSPYRE_O="$B/user/libspyre" -j2 >&2
	make -s -C "$SPYRE_ROOT/torch_spyre" O="$o" SDK="$TORCH_SDK" \
		TREE="$TORCH_TREE" LIBSPYRE_O="$B/user/libspyre" \
		DESTDIR="$stage" install >&2
	strip --strip-debug "$stage"/usr/lib/python3/dist-packages/torch_spyre/*.so
	cp -a "$STAGE"/usr/lib/libspyre.so* "$stage/usr/lib/"
	TORCH_STAGE=$stage
}

# Copy the shared libraries that the ELF files under $1 need into $2.
copy_libs() {
	local root=$1 dst=$2 f lib
	find "$root" -type f -perm -u+x -print0 |
	while IFS= read -r -d '' f; do
		[ "$(head -c4 "$f" | tail -c3)" = ELF ] || continue
		{ LD_LIBRARY_PATH=$root/usr/lib ldd "$f" 2>/dev/null || true; } |
			awk '/=> \//{print $3} /^\t\/lib64/{print $1}'
	done | sort -u | while read -r lib; do
		case $lib in "$root"/*) continue ;; esac
		install -D -m 0755 "$(readlink -f "$lib")" "$dst$lib"
	done
}

# Module closure: the modules $@ and everything they depend on, as paths
# relative to the guest kernel's module folder, by kmod's own resolver
# (modprobe --show-depends over the unpacked tree; built-in ones need no
# file).  The tree is the one around KMODS (the debug kernel has its own).
module_closure() {
	local out
	out=$(modprobe -d "${KMODS%/lib/modules/*}" -S "$KREL" \
		--show-depends -a "$@") ||
		die "modprobe --show-depends $* failed for $KREL"
	awk -v pre="$KMODS/" '$1 == "insmod" && index($2, pre) == 1 {
		print substr($2, length(pre) + 1) }' <<<"$out" | sort -u
}

step_base() {
	local key dir rt
	key=$(printf '%s\n' "$KPKG" "$KREL" "${GUEST_MODULES[*]}" \
		"$(dpkg-query -W -f='${Version}' busybox-static kmod libc6)" \
		"$(sha256sum "$SPYRE_ROOT/scripts/build.sh" | cut -c1-16)" |
		sha256sum | cut -c1-16)
	BASE=$B/base-$key.cpio
	[ -f "$BASE" ] && return
	msg "initramfs: base image (busybox, kmod, modules)"
	dir=$B/base-root
	rm -rf "$dir" && mkdir -p "$dir"/{bin,sbin,etc,proc,sys,dev,tmp,work,root,run,mnt}
	cp /bin/busybox "$dir/bin/busybox"
	for a in $(/bin/busybox --list); do
		[ -e "$dir/bin/$a" ] || ln -s busybox "$dir/bin/$a"
	done
	rm -f "$dir/bin/modprobe" "$dir/bin/insmod" "$dir/bin/rmmod" \
	      "$dir/bin/lsmod" "$dir/bin/depmod" "$dir/bin/modinfo"
	cp /bin/kmod "$dir/bin/kmod"
	for a in modprobe insmod rmmod lsmod depmod modinfo; do
		ln -s kmod "$dir/bin/$a"
		ln -s ../bin/kmod "$dir/sbin/$a"
	done
	mkdir -p "$dir/usr/bin" "$dir/usr/lib"
	copy_libs "$dir" "$dir"
	rt=$dir/lib/modules/$KREL
	mkdir -p "$rt"
	module_closure "${GUEST_MODULES[@]}" | while read -r p; do
		install -D -m 0644 "$KMODS/$p" "$rt/$p"
	done
	cp "$KMODS"/modules.{order,builtin,builtin.modinfo} "$rt/"
	(cd "$dir" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) >"$BASE.tmp"
	mv "$BASE.tmp" "$BASE"
}

step_initramfs() {
	local dir=$B/overlay-root rt
	step_base
	msg "initramfs: overlay (spyre.ko, libspyre, tests)"
	rm -rf "$dir" && mkdir -p "$dir/etc" "$dir/lib/modules/$KREL/updates"
	cp -a "$STAGE"/. "$dir/"
	copy_libs "$dir" "$dir"
	install -m 0644 "$MODULE" "$dir/lib/modules/$KREL/updates/spyre.ko"
	# depmod over base + overlay, ship the result in the overlay
	rt=$B/depmod-root
	rm -rf "$rt" && mkdir -p "$rt"
	(cd "$rt" && cpio -i -d --quiet <"$BASE" "lib/modules/*")
	cp -a "$dir/lib/modules/$KREL/updates" "$rt/lib/modules/$KREL/"
	depmod -b "$rt" "$KREL"
	cp "$rt/lib/modules/$KREL"/modules.* "$dir/lib/modules/$KREL/"
	if [ -n "${TORCH_STAGE:-}" ]; then
		mkdir -p "$dir/torch-overlay"
		cp -a "$TORCH_STAGE"/. "$dir/torch-overlay/"
	fi
	install -m 0755 "$SPYRE_ROOT/scripts/guest-init.sh" "$dir/init"
	mkdir -p "$dir/bin"
	cc -static -O2 -Wall -Werror -o "$dir/bin/spyre-runas" \
		"$SPYRE_ROOT/scripts/spyre-runas.c" || die "spyre-runas"
	printf 'root:x:0:0:root:/root:/bin/sh\nspyre:x:1000:1000:spyre:/work:/bin/sh\n' \
		>"$dir/etc/passwd"
	printf 'root:x:0:\naccel:x:1000:spyre\n' >"$dir/etc/group"
	{
		# devtmpfs's modes for the nodes everyone uses: mdev's scan
		# (mdev -d starts with one) gives the others its default, root
		# 0660, which is what devtmpfs's 0600 means in practice
		printf '%s 0:0 0666\n' null zero full random urandom tty ptmx \
			fuse net/tun
		echo 'kmsg 0:0 0644'
		udev_to_mdev "$SPYRE_ROOT/udev/70-spyre.rules" "$dir/etc/group"
	} >"$dir/etc/mdev.conf"
	(cd "$dir" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) \
		>"$B/overlay.cpio"
	cat "$BASE" "$B/overlay.cpio" >"$B/initramfs.cpio"
	INITRAMFS=$B/initramfs.cpio
}

# The guest's busybox mdev.conf from our udev rules (file $1), with the
# guest's group file $2: each rule
#   SUBSYSTEM=="s", KERNEL=="glob", GROUP="g", MODE="m"
# becomes "SUBSYSTEM=s;(.*/)?<glob as a regex> 0:<gid of g> m" (mdev
# matches the node path, DEVNAME, against a regex: it has no
# globs, and the static busybox cannot look group names up).
udev_to_mdev() {
	local out sub glob group mode gid
	out=$(sed -n 's/^SUBSYSTEM=="\([^"]*\)", *KERNEL=="\([^"]*\)", *GROUP="\([^"]*\)", *MODE="\([0-7]*\)".*/\1 \2 \3 \4/p' "$1")
	[ -n "$out" ] || die "no rule in $1"
	while read -r sub glob group mode; do
		gid=$(awk -F: -v g="$group" '$1 == g { print $3 }' "$2")
		[ -n "$gid" ] || die "$1: no group $group in the guest"
		printf 'SUBSYSTEM=%s;(.*/)?%s 0:%s %s\n' "$sub" "${glob//\*/.*}" \
			"$gid" "$mode"
	done <<<"$out"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(qemu module user torch initramfs)
for s in "${steps[@]}"; do
	case $s in
	qemu | module | user | torch) "step_$s" ;;
	initramfs)
		[ -n "${MODULE:-}" ] || step_module
		[ -n "${STAGE:-}" ] || step_user
		step_initramfs ;;
	*) die "unknown step $s" ;;
	esac
done

# Record what was built, for vm.sh.
{
	[ -n "${QEMU:-}" ] && printf 'QEMU=%q\n' "$QEMU"
	# a --torch guest needs the image and this initramfs's torch stage:
	# an initramfs built without the stage clears TORCH_IMAGE
	[ -n "${INITRAMFS:-}" ] && printf 'INITRAMFS=%q\nTORCH_IMAGE=%q\n' \
		"$INITRAMFS" "${TORCH_STAGE:+$TORCH_IMAGE}"
	printf 'KIMAGE=%q\n' "$KIMAGE"
} >"$B/paths.env.new"
touch "$B/paths.env"
# merge: keep earlier entries not rebuilt this time
sort -t= -k1,1 -u "$B/paths.env.new" "$B/paths.env" >"$B/paths.env.tmp"
mv "$B/paths.env.tmp" "$B/paths.env"
rm -f "$B/paths.env.new"
