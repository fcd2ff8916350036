#!/bin/bash
# SPDX-License-Identifier: MIT
# Build the debug guest kernel: Debian's linux-source-6.12 (the same
# version as the guest kernel), x86_64_defconfig + kvm_guest.config +
# scripts/debug-kernel.config (KASAN, lockdep, DEBUG_ATOMIC_SLEEP,
# kmemleak, failslab/fail_page_alloc/fail-nth, DMA API debug), with a stub
# Kconfig symbol that selects the hidden DRM helpers spyre.ko needs and
# scripts/debug-kernel.patch (fixes of kernel bugs our tests found).
# Cached under $SPYRE_CACHE/debug-kernel/<key> (key: source version,
# config fragment and fixes, RECIPE_VERSION: raise it when the recipe below
# changes); a second run only prints where it is.
#
#   scripts/build-debug-kernel.sh [-j N]
#
# Writes $SPYRE_CACHE/debug-kernel/<key>/kernel.env (KREL, KDIR, KIMAGE,
# KMODS) for `SPYRE_KERNEL=debug` (scripts/lib.sh). make test and .ci/run
# never build it: `make debug-kernel` does (about 30 minutes on 2 cores).
# its own build runs on the Debian kernel's settings (KSRC, KPKG)
export SPYRE_KERNEL=debian
. "$(dirname "$0")/lib.sh"
kernel_env

jobs=$(nproc)
while [ $# -gt 0 ]; do
	case $1 in
	-j) jobs=$2; shift ;;
	*) die "usage: $0 [-j N]" ;;
	esac
	shift
done

RECIPE_VERSION=2
frag=$SPYRE_ROOT/scripts/debug-kernel.config
fixes=$SPYRE_ROOT/scripts/debug-kernel.patch
key=$(printf '%s\n' "$KPKG" "$RECIPE_VERSION" \
	"$(cat "$frag" "$fixes" | sha256sum | cut -c1-64)" | sha256sum | cut -c1-16)
top=$SPYRE_CACHE/debug-kernel/$key
if [ -f "$top/.done" ]; then
	ln -sfn "$key" "$SPYRE_CACHE/debug-kernel/current"
	msg "debug kernel: $top (cached)"
	echo "$top"
	exit 0
fi
mkdir -p "$top"
exec 9>"$top/.lock"
flock 9
[ -f "$top/.done" ] && { echo "$top"; exit 0; }

t0=$(date +%s)
# An interrupted build goes on where it stopped: the source tree is made
# once (marked .src-ready), the object folder is kept.
if [ ! -f "$top/.src-ready" ]; then
	msg "debug kernel: source tree (links to $KSRC)"
	rm -rf "$top/src" "$top/obj" "$top/root"
	cp -al "$KSRC" "$top/src"
	# The stub symbol: replace (not edit) the linked file.
	k=$top/src/drivers/accel/Kconfig
	cp --remove-destination "$KSRC/drivers/accel/Kconfig" "$k"
	cat >>"$k" <<'KCONFIG'

config SPYRE_OOT_DEPS
	tristate "Helpers of the out-of-tree Spyre driver"
	depends on DRM_ACCEL && DRM && PCI
	select DRM_SCHED
	select DRM_GEM_SHMEM_HELPER
	select DRM_BUDDY
	select DRM_EXEC
	select DRM_GPUVM
	select DRM_KMS_HELPER
	select WANT_DEV_COREDUMP
	help
	  Builds the hidden DRM helpers that spyre.ko (built out of tree)
	  links against.
KCONFIG
	# The fixes: each file they touch is copied first (the tree is hard
	# links to $KSRC, which must stay as Debian ships it).
	grep -E '^\+\+\+ b/' "$fixes" | cut -c7- | while IFS= read -r f; do
		cp --remove-destination "$KSRC/$f" "$top/src/$f"
	done
	patch -s -p1 -d "$top/src" <"$fixes"
	touch "$top/.src-ready"
fi

msg "debug kernel: configuring"
rm -rf "$top/root"
mkdir -p "$top/obj"
make -s -C "$top/src" O="$top/obj" x86_64_defconfig >&2
(cd "$top/src" && KCONFIG_CONFIG="$top/obj/.config" \
	scripts/kconfig/merge_config.sh -m -O "$top/obj" "$top/obj/.config" \
	kernel/configs/kvm_guest.config "$frag" >/dev/null)
make -s -C "$top/src" O="$top/obj" olddefconfig >&2
# Every option of the fragment must have stuck (a missing dependency
# silently drops one).
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=' "$frag" | while IFS= read -r l; do
	grep -qxF "$l" "$top/obj/.config" ||
		{ [ "${l#*=}" = n ] && ! grep -q "^${l%%=*}=" "$top/obj/.config"; } ||
		echo "$l"
done)
[ -z "$missing" ] || die "debug kernel: options not taken: $missing"

msg "debug kernel: building (make -j$jobs)"
make -s -C "$top/src" O="$top/obj" -j"$jobs" bzImage modules >&2
make -s -C "$top/src" O="$top/obj" INSTALL_MOD_PATH="$top/root" \
	INSTALL_MOD_STRIP=1 modules_install >&2
krel=$(make -s -C "$top/src" O="$top/obj" kernelrelease)
{
	printf 'KREL=%q\n' "$krel"
	printf 'KDIR=%q\n' "$top/obj"
	printf 'KIMAGE=%q\n' "$top/obj/arch/x86/boot/bzImage"
	printf 'KMODS=%q\n' "$top/root/lib/modules/$krel"
} >"$top/kernel.env"
touch "$top/.done"
ln -sfn "$key" "$SPYRE_CACHE/debug-kernel/current"
msg "debug kernel $krel built in $(( $(date +%s) - t0 )) s: $top"
echo "$top"
