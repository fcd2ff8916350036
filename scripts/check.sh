#!/bin/bash
# SPDX-License-Identifier: MIT
# Style and static checks: checkpatch --strict and sparse (C=2) on the
# driver and the shared headers, its sysfs ABI documented (docs/ABI/),
# its module parameters and debugfs files too (docs/spyre-driver.rst),
# libspyre's man pages current (docs/man, scripts/gen-man.sh), the DKMS
# package building spyre.ko (dkms build against the guest kernel's
# headers, no root), QEMU's checkpatch on the card model.
. "$(dirname "$0")/lib.sh"
kernel_env
rc=0
CP=("$KSRC/scripts/checkpatch.pl" --strict --no-tree --quiet --show-types)
msg "checkpatch --strict: driver/"
"${CP[@]}" -f "$SPYRE_ROOT"/driver/spyre_*.[ch] || rc=1
# The shared headers are also compiled by QEMU and userspace, which have
# no BIT()/BIT_ULL(): that one check does not apply to them.
msg "checkpatch --strict: hw/, uapi/ (BIT_MACRO not applicable)"
"${CP[@]}" --ignore BIT_MACRO -f "$SPYRE_ROOT"/hw/*.h \
	"$SPYRE_ROOT"/uapi/drm/*.h || rc=1
msg "kernel-doc: driver/, hw/, uapi/, libspyre's public headers"
if "$KSRC/scripts/kernel-doc" -none "$SPYRE_ROOT"/driver/spyre_*.[ch] \
	"$SPYRE_ROOT"/hw/*.h "$SPYRE_ROOT"/uapi/drm/*.h \
	"$SPYRE_ROOT"/libspyre/include/spyre/*.h 2>&1 | grep .; then
	rc=1
fi
msg "sysfs ABI: docs/ABI/ (get_abi.pl) documents every attribute of driver/"
if perl "$KSRC/scripts/get_abi.pl" validate --dir "$SPYRE_ROOT/docs/ABI" 2>&1 |
	grep .; then
	rc=1
fi
for a in $(sed -n 's/^static DEVICE_ATTR_RO(\([a-z_0-9]*\));$/\1/p; s/^SPYRE_ATTR_U64(\([a-z_0-9]*\),.*/\1/p' \
	"$SPYRE_ROOT"/driver/spyre_*.c); do
	grep -q "^What:.*/$a\$" "$SPYRE_ROOT"/docs/ABI/* ||
		{ echo "sysfs attribute $a is not in docs/ABI/"; rc=1; }
done
msg "docs/spyre-driver.rst documents every module parameter and debugfs file"
for a in $(sed -n 's/^module_param_\(named\|cb\)(\([a-z_0-9]*\),.*/\2/p; s/.*drm_debugfs_add_file(&sdev->drm, "\([a-z_]*\)".*/\1/p; s/.*debugfs_create_file("\([a-z_]*\)".*/\1/p' \
	"$SPYRE_ROOT"/driver/spyre_*.c); do
	grep -q "^\`\`$a\`\` (" "$SPYRE_ROOT/docs/spyre-driver.rst" ||
		{ echo "$a is not in docs/spyre-driver.rst"; rc=1; }
done
msg "man pages: docs/man/man3* as scripts/gen-man.sh makes them from libspyre's headers"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$SPYRE_ROOT/scripts/gen-man.sh" "$tmp/man"
for d in man3 man3type; do
	diff -r "$SPYRE_ROOT/docs/man/$d" "$tmp/man/$d" >&2 ||
		{ echo "docs/man/$d is stale: run scripts/gen-man.sh"; rc=1; }
done
ver=$(head -1 "$tmp/man/man3/spyre_version.3" | grep -o 'libspyre [0-9.]*')
for f in "$SPYRE_ROOT"/docs/man/man1/*.1; do
	grep -q "^\.TH .*\"$ver\"" "$f" ||
		{ echo "$f: .TH does not name $ver"; rc=1; }
done
msg "dkms build: the DKMS package (dkms.conf, make install-dkms) for $KREL"
drv=$(sed -n 's/^#define SPYRE_DRIVER_\(MAJOR\|MINOR\)\t*\([0-9]*\)$/\2/p' \
	"$SPYRE_ROOT/driver/spyre_drv.h" | paste -sd.)
dver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$SPYRE_ROOT/dkms.conf")
[ "$drv" = "$dver" ] ||
	{ echo "dkms.conf: PACKAGE_VERSION $dver, driver $drv"; rc=1; }
make -s -C "$SPYRE_ROOT" install-dkms DESTDIR="$tmp/dkms-root"
mkdir -p "$tmp/dkms-tree"
if dkms build -m spyre -v "$dver" --sourcetree "$tmp/dkms-root/usr/src" \
	--dkmstree "$tmp/dkms-tree" -k "$KREL" --kernelsourcedir "$KDIR" \
	>"$tmp/dkms.log" 2>&1 &&
   modinfo -F author "$tmp/dkms-tree/spyre/$dver/$KREL/x86_64/module/spyre.ko" |
	grep -q .; then
	:
else
	cat "$tmp/dkms.log" "$tmp/dkms-tree/spyre/$dver/build/make.log" 2>/dev/null
	echo "dkms build failed (or spyre.ko has no author)"; rc=1
fi
msg "sparse (C=2) and W=1: driver/"
# in a copy of its own (its objects carry W=1 flags); paths shown as the
# clone's
sync_module_src "$SPYRE_BUILD/module-check"
out=$(make -s -C "$KDIR" M="$SPYRE_BUILD/module-check" C=2 W=1 modules 2>&1 |
	grep -v '^  ' | sed "s|$SPYRE_BUILD/module-check/|$SPYRE_ROOT/|g" ||
	true)
if [ -n "$out" ]; then echo "$out"; rc=1; fi
msg "QEMU checkpatch: qemu-device/ (as synced into the QEMU tree) and its patches to QEMU"
"$SPYRE_ROOT/scripts/build-qemu.sh" >/dev/null 2>&1 || rc=1
QTREE=$SPYRE_BUILD/qemu/src
# Warnings count too: checkpatch.pl itself fails only on errors.
(cd "$QTREE" && for f in hw/misc/spyre/*.[ch] tests/qtest/spyre-test.c \
		tests/qtest/fuzz/spyre_fuzz.c; do
	out=$(scripts/checkpatch.pl --no-tree -q -f "$f") || { echo "$out"; exit 1; }
	if echo "$out" | grep -q '^WARNING'; then echo "$out"; exit 1; fi
done
for p in "$SPYRE_ROOT"/qemu-device/patches/*.patch; do
	[ -f "$p" ] || continue
	out=$(scripts/checkpatch.pl -q "$p") || { echo "$out"; exit 1; }
	if echo "$out" | grep -q '^WARNING'; then echo "$out"; exit 1; fi
done) || rc=1
[ $rc = 0 ] && msg "checks clean"
exit $rc
