#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# Build QEMU (x86_64-softmmu, TCG) with the Spyre card model from
# qemu-device/ and the fixes to QEMU itself in qemu-device/patches/,
# cached outside the clone.
#
#   scripts/build-qemu.sh           build; last stdout line: qemu-system-x86_64
#   scripts/build-qemu.sh --qtest   build, then run the spyre qtest (TAP)
#   scripts/build-qemu.sh --fuzz    the fuzzing build instead (clang-14,
#                                   libFuzzer, ASan, UBSan): its own cached
#                                   build directory; last stdout line:
#                                   qemu-fuzz-x86_64 (scripts/fuzz-card.sh)
#   scripts/build-qemu.sh --tsan    ThreadSanitizer build (clang-14, its own
#                                   cached build directory), then the spyre
#                                   qtest on it: data races and lock-order
#                                   inversions fail it (make qtest-tsan)
#
# Layout (CACHE = $SPYRE_CACHE, see scripts/lib.sh):
#   CACHE/qemu-src/src                 pristine QEMU source (input, untouched)
#   CACHE/qemu-build/<key>/src         private copy, patched, hooked for
#                                      hw/misc/spyre
#   CACHE/qemu-build/<key>/build       meson/ninja build directory
#   CACHE/firmware/<key>/share/qemu    seabios + qemu-system-data blobs
#   SPYRE_BUILD/qemu/                  this clone's binaries (copied from the
#                                      build directory), src -> the copy
#
# <key> hashes the QEMU source version, its applied Debian patches, our
# patches (qemu-device/patches/*.patch, applied in name order) and this
# script's build recipe, so the expensive copy + configure + full build
# happens once per QEMU version and patch set.  qemu-device/, hw/ and
# uapi/ are synced into the copy by content (rsync --checksum) on every
# run, so editing the card model only recompiles what changed.  Clones
# share the build directory (under a lock) but each runs its own copy of
# the binaries, so one clone's card model never runs another clone's
# tests.  Progress goes to stderr; stdout carries only test output
# (--qtest) and, last, the binary's path.

. "$(dirname "$0")/lib.sh"

RECIPE_VERSION=1
CONFIGURE_ARGS=(--python=/usr/bin/python3 --target-list=x86_64-softmmu
		--without-default-features --enable-tcg --disable-docs
		--disable-install-blobs)

usage() {
	echo "usage: $0 [--qtest | --fuzz] [-j N]" >&2
	exit 2
}

run_qtest=0
fuzz=0
tsan=0
jobs=""
while [ $# -gt 0 ]; do
	case "$1" in
	--qtest) run_qtest=1 ;;
	--fuzz) fuzz=1 ;;
	--tsan) tsan=1; run_qtest=1 ;;
	-j) shift; [ $# -gt 0 ] || usage; jobs="$1" ;;
	-j*) jobs="${1#-j}" ;;
	-h|--help) usage ;;
	*) usage ;;
	esac
	shift
done

log() { echo "build-qemu: $*" >&2; }

[ "$fuzz" = 1 ] && [ "$run_qtest" = 1 ] && usage
if [ "$fuzz" = 1 ] || [ "$tsan" = 1 ]; then
	# libFuzzer's runtime is in libclang-rt-14-dev
	if ! command -v clang-14 >/dev/null ||
	   ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
		>/dev/null 2>&1; then
		log "installing clang-14 and libclang-rt-14-dev"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			clang-14 libclang-rt-14-dev >&2 ||
			die "cannot install clang-14 libclang-rt-14-dev"
	fi
fi
if [ "$fuzz" = 1 ]; then
	CONFIGURE_ARGS+=(--cc=clang-14 --cxx=clang++-14 --enable-fuzzing
			 --enable-asan --enable-ubsan)
elif [ "$tsan" = 1 ]; then
	CONFIGURE_ARGS+=(--cc=clang-14 --cxx=clang++-14 --enable-tsan)
fi

repo="$SPYRE_ROOT"
cache="$SPYRE_CACHE"
qemu_src="${SPYRE_QEMU_SRC:-$cache/qemu-src/src}"
debs="${SPYRE_DEBS:-$cache/debs}"

[ -f "$qemu_src/VERSION" ] || die "no QEMU source at $qemu_src"
for d in qemu-device hw uapi; do
	[ -d "$repo/$d" ] || die "missing $repo/$d"
done

patches=()
for p in "$repo"/qemu-device/patches/*.patch; do
	[ -f "$p" ] && patches+=("$p")
done

# ---- key -------------------------------------------------------------------
src_id() {
	cat "$qemu_src/VERSION"
	head -n 1 "$qemu_src/debian/changelog" 2>/dev/null || true
	cat "$qemu_src/.pc/applied-patches" 2>/dev/null || true
	echo "recipe $RECIPE_VERSION ${CONFIGURE_ARGS[*]}"
	[ "$fuzz" = 0 ] || echo fuzz
	[ "$tsan" = 0 ] || echo tsan
	[ ${#patches[@]} = 0 ] || sha256sum "${patches[@]}" | cut -c1-64
}
key="$(src_id | sha256sum | cut -c1-16)"
top="$cache/qemu-build/$key"
src="$top/src"
build="$top/build"
mkdir -p "$top"

exec 9>"$top/.lock"
flock 9

# ---- private source copy -------------------------------------------------
hook_tree() {
	local t="$1"

	grep -q "subdir('spyre')" "$t/hw/misc/meson.build" ||
		echo "subdir('spyre')" >>"$t/hw/misc/meson.build"
	grep -q "source spyre/Kconfig" "$t/hw/misc/Kconfig" ||
		printf '\nsource spyre/Kconfig\n' >>"$t/hw/misc/Kconfig"
	grep -q "'hw/misc/spyre'," "$t/meson.build" ||
		sed -i "s|^    'hw/misc',\$|&\n    'hw/misc/spyre',|" \
			"$t/meson.build"
	grep -q "'hw/misc/spyre'," "$t/meson.build" ||
		die "could not add hw/misc/spyre to trace_events_subdirs"
	if ! grep -q "spyre-test" "$t/tests/qtest/meson.build"; then
		sed -i "s|^qtest_executables = {}\$|\
if config_all_devices.has_key('CONFIG_SPYRE')\n\
  qtests_x86_64 += ['spyre-test']\n\
  qtests += {'spyre-test': [spyre_dep]}\n\
endif\n\n&|" "$t/tests/qtest/meson.build"
		grep -q "spyre-test" "$t/tests/qtest/meson.build" ||
			die "could not hook spyre-test into tests/qtest"
	fi
	# The card's own fuzz target (compiled only with --enable-fuzzing).
	if ! grep -q "spyre_fuzz" "$t/tests/qtest/fuzz/meson.build"; then
		sed -i "s|^specific_fuzz_ss.add(files('generic_fuzz.c'))\$|&\n\
if config_all_devices.has_key('CONFIG_SPYRE')\n\
  specific_fuzz_ss.add(files('spyre_fuzz.c'), spyre_dep)\n\
endif|" "$t/tests/qtest/fuzz/meson.build"
		grep -q "spyre_fuzz" "$t/tests/qtest/fuzz/meson.build" ||
			die "could not hook spyre_fuzz into tests/qtest/fuzz"
	fi
}

if [ ! -f "$top/.src-ready" ]; then
	log "copying QEMU $(cat "$qemu_src/VERSION") source to $src"
	rm -rf "$src" "$build"
	rsync -a --exclude=/.pc --exclude=/.git "$qemu_src/" "$src/"
	for p in "${patches[@]}"; do
		log "applying $(basename "$p")"
		patch -d "$src" -p1 -s --no-backup-if-mismatch <"$p" ||
			die "$(basename "$p") does not apply to QEMU $(cat "$qemu_src/VERSION")"
	done
	touch "$top/.src-ready"
fi
# Every time: a tree copied by an older version of this script gains the
# hooks added since (each is made once).
hook_tree "$src"

# ---- sync the card model (content-compared, fresh mtimes) ----------------
# No -t: a file whose content changed gets the current time, so ninja
# rebuilds it even if the repo's copy is older than the last build.
sync_dir() {
	rsync -r -c --delete --no-times "$@"
}
spyre_dir="$src/hw/misc/spyre"
mkdir -p "$spyre_dir/spyre-include"
sync_dir --exclude=/tests/ --exclude=/patches/ --exclude=/spyre-include/ \
	"$repo/qemu-device/" "$spyre_dir/"
sync_dir "$repo/hw/" "$spyre_dir/spyre-include/hw/"
# drm/spyre_accel.h (the PCI IDs) includes "drm.h" as kernel uapi headers
# do: the card model reads libdrm's copy, as userspace does, through links
# next to it (kept out of the sync, so --delete leaves them alone).
sync_dir --exclude=/drm/drm.h --exclude=/drm/drm_mode.h \
	"$repo/uapi/" "$spyre_dir/spyre-include/uapi/"
for h in drm.h drm_mode.h; do
	[ -f "/usr/include/libdrm/$h" ] || die "no /usr/include/libdrm/$h (libdrm-dev)"
	[ "$(readlink "$spyre_dir/spyre-include/uapi/drm/$h")" = "/usr/include/libdrm/$h" ] ||
		ln -sfn "/usr/include/libdrm/$h" "$spyre_dir/spyre-include/uapi/drm/$h"
done
# the command encoders libspyre installs, for the qtest and the fuzzer
sync_dir --include=/spyre/ --include=/spyre/spyre_encode.h --exclude='*' \
	"$repo/libspyre/include/" "$spyre_dir/spyre-include/lib/"
if [ -f "$repo/qemu-device/tests/spyre-test.c" ]; then
	rsync -c --no-times "$repo/qemu-device/tests/spyre-test.c" \
		"$src/tests/qtest/spyre-test.c"
else
	die "missing qemu-device/tests/spyre-test.c"
fi
rsync -c --no-times "$repo/qemu-device/tests/spyre-fuzz.c" \
	"$src/tests/qtest/fuzz/spyre_fuzz.c" ||
	die "missing qemu-device/tests/spyre-fuzz.c"

# ---- firmware -------------------------------------------------------------
newest() {
	local f last=""

	for f in "$@"; do
		[ -f "$f" ] && last="$f"
	done
	echo "$last"
}
seabios_deb="$(newest "$debs"/seabios_*.deb)"
data_deb="$(newest "$debs"/qemu-system-data_*.deb)"
[ -n "$seabios_deb" ] || die "no seabios .deb in $debs"
[ -n "$data_deb" ] || die "no qemu-system-data .deb in $debs"
fw_key="$(printf '%s\n' "$(basename "$seabios_deb")" \
		 "$(basename "$data_deb")" | sha256sum | cut -c1-16)"
fw_top="$cache/firmware/$fw_key"
fw="$fw_top/share/qemu"
if [ ! -f "$fw_top/.ready" ]; then
	log "unpacking firmware into $fw_top"
	rm -rf "$fw_top"
	mkdir -p "$fw_top/root"
	dpkg -x "$seabios_deb" "$fw_top/root"
	dpkg -x "$data_deb" "$fw_top/root"
	mkdir -p "$fw"
	for f in "$fw_top/root/usr/share/qemu/"* \
		 "$fw_top/root/usr/share/seabios/"*; do
		ln -sfn "$f" "$fw/$(basename "$f")"
	done
	touch "$fw_top/.ready"
fi
ln -sfn "$fw_top" "$cache/firmware/current"

# ---- configure + build ------------------------------------------------------
mkdir -p "$build"
if [ ! -f "$build/build.ninja" ]; then
	log "configuring in $build"
	(cd "$build" && "$src/configure" "${CONFIGURE_ARGS[@]}") >&2 ||
		die "configure failed (see $build/meson-logs)"
fi

ninja_args=(-C "$build")
[ -n "$jobs" ] && ninja_args+=(-j "$jobs")
start=$(date +%s)
log "building (ninja ${ninja_args[*]})"
if [ "$fuzz" = 1 ]; then
	ninja "${ninja_args[@]}" qemu-fuzz-x86_64 >&2 || die "ninja failed"
	log "build finished in $(( $(date +%s) - start ))s"
	out="$SPYRE_BUILD/qemu-fuzz"
	mkdir -p "$out"
	cp "$build/qemu-fuzz-x86_64" "$out/.qemu-fuzz-x86_64.tmp"
	mv -f "$out/.qemu-fuzz-x86_64.tmp" "$out/qemu-fuzz-x86_64"
	ln -sfn "$fw" "$out/firmware"
	echo "$out/qemu-fuzz-x86_64"
	exit 0
fi
ninja "${ninja_args[@]}" qemu-system-x86_64 tests/qtest/spyre-test >&2 ||
	die "ninja failed"
log "build finished in $(( $(date +%s) - start ))s"

[ -x "$build/qemu-system-x86_64" ] || die "no qemu-system-x86_64 after build"

# A binary run from the build tree looks for blobs in qemu-bundle.
bundle="$build/qemu-bundle/usr/local/share/qemu"
mkdir -p "$bundle"
for f in "$fw"/*; do
	[ -e "$bundle/$(basename "$f")" ] || ln -s "$f" "$bundle/$(basename "$f")"
done
log "firmware: $fw (also linked into $bundle)"

# This clone's copies, replaced atomically (a running guest keeps its
# binary); qemu-bundle makes the copy find the firmware as the build
# tree's binary does.
out="$SPYRE_BUILD/qemu"
[ "$tsan" = 1 ] && out="$SPYRE_BUILD/qemu-tsan"
mkdir -p "$out"
for f in qemu-system-x86_64 tests/qtest/spyre-test; do
	cp "$build/$f" "$out/.$(basename "$f").tmp"
	mv -f "$out/.$(basename "$f").tmp" "$out/$(basename "$f")"
done
ln -sfn "$build/qemu-bundle" "$out/qemu-bundle"
ln -sfn "$src" "$out/src"
qemu="$out/qemu-system-x86_64"

# ---- qtest ------------------------------------------------------------------
rc=0
if [ "$tsan" = 1 ]; then
	# Every QEMU the qtest starts reports to $out/tsan.log.<pid>;
	# scripts/tsan-report.py sorts the reports, and one on the card
	# model's own state fails the run.
	rm -f "$out"/tsan.log.*
	export TSAN_OPTIONS="exitcode=0 halt_on_error=0 die_after_fork=0 second_deadlock_stack=1 log_path=$out/tsan.log suppressions=$src/tests/tsan/suppressions.tsan"
fi
if [ "$run_qtest" = 1 ]; then
	log "running spyre qtest"
	# (ThreadSanitizer slows QEMU down 5-15x: the qtest's waits too.)
	QTEST_QEMU_BINARY="$qemu" SPYRE_FIRMWARE_DIR="$fw" \
		SPYRE_QTEST_SLOW=$(( tsan ? 10 : 1 )) \
		timeout $(( tsan ? 1800 : 120 )) "$out/spyre-test" --tap -k ||
		rc=$?
	if [ "$tsan" = 1 ]; then
		ls "$out"/tsan.log.* >/dev/null 2>&1 &&
			{ "$repo/scripts/tsan-report.py" "$out"/tsan.log.* >&2 ||
			  rc=1; }
	fi
	if [ "$rc" != 0 ]; then
		log "spyre qtest FAILED (exit $rc)"
	else
		log "spyre qtest passed"
	fi
fi

echo "$qemu"
exit "$rc"
