#!/bin/bash
# SPDX-License-Identifier: MIT
# `make install` and `make uninstall` as a packager runs them (TAP):
#   tests/test-install.sh OUTDIR
# installs into OUTDIR/root (DESTDIR, PREFIX=/usr), checks the files a
# user needs are there and that no installed program or library carries a
# RUNPATH/RPATH, builds examples/ with `pkg-config --cflags --libs spyre`
# from that tree alone (PKG_CONFIG_SYSROOT_DIR, PKG_CONFIG_LIBDIR) into
# OUTDIR/examples, which the guest step of make test runs on a card
# (tests/guest-examples.sh), and checks that uninstall leaves no file or
# link behind.
. "$(dirname "$0")/../scripts/lib.sh"
out=${1:?usage: test-install.sh OUTDIR}
root=$out/root
rm -rf "$out" && mkdir -p "$out"
n=0 failed=0
t() {	# t NAME CMD...: one TAP line for CMD's exit status
	local name=$1
	shift
	n=$((n + 1))
	if "$@" >"$out/step.log" 2>&1; then
		echo "ok $n $name"
	else
		sed 's/^/# /' "$out/step.log"
		echo "not ok $n $name"
		failed=$((failed + 1))
	fi
}

# every file and link under $root, relative
installed() { (cd "$root" && find . -not -type d | sed 's|^\./||' | sort); }

expect_files() {
	local f missing=0
	for f in usr/lib/libspyre.so.0 usr/lib/libspyre.so usr/lib/libspyre.a \
		usr/lib/pkgconfig/spyre.pc usr/include/spyre/spyre.h \
		usr/include/spyre/spyre_ref.h usr/include/spyre/spyre_encode.h \
		usr/include/spyre/drm/spyre_accel.h \
		usr/include/spyre/drm/spyre_cmd.h usr/bin/spyre-smi \
		usr/bin/spyre-demo usr/bin/spyre-bench \
		usr/lib/udev/rules.d/70-spyre.rules \
		etc/security/limits.d/90-spyre.conf \
		usr/share/man/man1/spyre-smi.1 usr/share/man/man1/spyre-bench.1 \
		usr/share/man/man3/spyre_device_open.3 \
		usr/share/man/man3type/spyre_gemm.3type; do
		[ -e "$root/$f" ] || { echo "missing: $f"; missing=1; }
	done
	# one page per exported function, no more
	local pages exported
	pages=$(ls "$root/usr/share/man/man3" | sed 's/\.3$//' | sort)
	exported=$(nm -D --defined-only "$root/usr/lib/libspyre.so.0" |
		awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' | sort)
	[ "$pages" = "$exported" ] ||
		{ diff <(echo "$pages") <(echo "$exported"); missing=1; }
	return $missing
}

no_runpath() {
	local f bad=0
	for f in "$root"/usr/bin/* "$root"/usr/lib/libspyre.so.0 "$@"; do
		if readelf -d "$f" | grep -E '\((RUNPATH|RPATH)\)'; then
			echo "$f has a RUNPATH"
			bad=1
		fi
	done
	return $bad
}

# the installed tree and the system's .pc files (libdrm, which spyre.pc
# requires privately); the sysroot is prepended to spyre.pc's /usr paths
pc() {
	PKG_CONFIG_SYSROOT_DIR=$root \
	PKG_CONFIG_LIBDIR=$root/usr/lib/pkgconfig:$(pkg-config --variable pc_path pkg-config) \
		"$@"
}

build_examples() {
	local flags
	flags=$(pc pkg-config --cflags --libs spyre) || return 1
	echo "pkg-config: $flags"
	case $flags in *"-I$root/usr/include"*"-L$root/usr/lib -lspyre"*) ;;
	*) echo "flags do not point into $root"; return 1 ;; esac
	pc make -s -C "$SPYRE_ROOT/examples" O="$out/examples" &&
	readelf -d "$out/examples/hello" | grep -q 'NEEDED.*\[libspyre\.so\.0\]'
}

echo "TAP version 13"
echo "1..6"
t "make install DESTDIR PREFIX=/usr" \
	make -s -C "$SPYRE_ROOT" install DESTDIR="$root" PREFIX=/usr
t "installed files: library, headers, spyre.pc, tools, udev rule, limits, man pages" \
	expect_files
t "no RUNPATH in the installed tools and library" no_runpath
t "examples build with pkg-config spyre against the installed tree" \
	build_examples
t "no RUNPATH in the examples" no_runpath "$out"/examples/hello \
	"$out"/examples/stream
installed >"$out/before.txt"
t "make uninstall leaves no file or link" bash -c '
	make -s -C "$1" uninstall DESTDIR="$2" PREFIX=/usr || exit 1
	left=$(cd "$2" && find . -not -type d)
	[ -z "$left" ] || { echo "left after uninstall:"; echo "$left"; exit 1; }
	[ -s "$3" ]' _ "$SPYRE_ROOT" "$root" "$out/before.txt"
rm -f "$out/step.log"
echo "# Totals: pass:$((n - failed)) fail:$failed xfail:0 xpass:0 skip:0 error:0"
[ $failed = 0 ]
