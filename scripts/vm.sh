#!/bin/bash
# SPDX-License-Identifier: MIT
# Run a command inside a fresh QEMU guest with N Spyre cards and spyre.ko
# loaded, print its output and return its exit status.
#
# Usage: scripts/vm.sh run [options] -- CMD [ARGS...]
#   --cards N        emulated cards, each behind its own pcie-root-port (1)
#   --mem SIZE       guest RAM (2G)
#   --smp N          guest vCPUs (2)
#   --card-opts OPTS extra -device spyre properties, e.g. mem-size=512M
#   --copy FILE      copy FILE (or a directory) into the guest's /work;
#                    repeatable
#   --root           run CMD as root (default: user "spyre", group accel)
#   --iommu          add -device intel-iommu and boot with intel_iommu=on
#   --qmp SOCKET     expose QEMU's QMP monitor on a unix socket
#   --timeout SEC    kill the guest after SEC seconds (300; x4 on the
#                    debug kernel, SPYRE_DEBUG_SLOWDOWN)
#   --torch          boot the trixie PyTorch image (python3, torch,
#                    torch_spyre) from a read-only virtio disk under a
#                    tmpfs overlay; CMD runs inside it
#   --no-module      do not load spyre.ko
#   --module-args A  module parameters for spyre.ko
#   --allow-warn     do not fail on WARN lines in the kernel log
#   --no-build       use the last build as is
#   --log FILE       keep the full serial log in FILE
#   --qemu-arg ARG   one more QEMU argument; repeatable
#   --qemu BIN       run this QEMU binary instead of the build's (another
#                    card model, e.g. a before/after comparison)
#   --trace DIR      trace the run into DIR (made if missing): the driver's
#                    tracepoints (events/spyre) in DIR/guest-trace.txt and
#                    the card's trace-events, with host timestamps, in
#                    DIR/card-trace.log; scripts/trace-timeline.py DIR
#                    turns them into a Perfetto timeline
#   --card-trace PAT card trace-events to enable, a QEMU -trace pattern;
#                    repeatable (with --trace: spyre_job_* and spyre_irq)
# Exit status: the command's; 124 on timeout; 125 if the guest died
# without finishing (panic, triple fault); 126 on an oops/BUG/WARN/KASAN/
# lockdep report in the guest's kernel log (and, on the debug kernel, a
# kmemleak report through spyre, drm_sched or dma-buf), or a module that
# did not load.
# The guest's stdout and stderr both arrive on stdout (one serial line).
. "$(dirname "$0")/lib.sh"

usage() { sed -n '3,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ "${1:-}" = run ] || usage
shift
CARDS=1 MEM=2G SMP=2 CARD_OPTS= COPIES=() ROOT=0 IOMMU=0 QMP= TIMEOUT=300
NOMOD=0 MODARGS= ALLOW_WARN=0 BUILD=1 LOG= TORCH=0 QEMU_ARGS=() TRACE=
CARD_TRACE=() QEMU_BIN=
while [ $# -gt 0 ]; do
	case $1 in
	--cards) CARDS=$2; shift ;;
	--mem) MEM=$2; shift ;;
	--smp) SMP=$2; shift ;;
	--card-opts) CARD_OPTS=,$2; shift ;;
	--copy) COPIES+=("$2"); shift ;;
	--root) ROOT=1 ;;
	--iommu) IOMMU=1 ;;
	--qmp) QMP=$2; shift ;;
	--timeout) TIMEOUT=$2; shift ;;
	--no-module) NOMOD=1 ;;
	--torch) TORCH=1 ;;
	--module-args) MODARGS=$2; shift ;;
	--allow-warn) ALLOW_WARN=1 ;;
	--no-build) BUILD=0 ;;
	--log) LOG=$2; shift ;;
	--qemu-arg) QEMU_ARGS+=("$2"); shift ;;
	--qemu) QEMU_BIN=$2; shift ;;
	--trace) TRACE=$2; shift ;;
	--card-trace) CARD_TRACE+=("$2"); shift ;;
	--) shift; break ;;
	*) usage ;;
	esac
	shift
done
[ $# -gt 0 ] || usage
# the debug kernel (KASAN, lockdep, kmemleak) runs everything 2-4x slower
# under TCG: every timeout stretches with it (scripts/lib.sh)
TIMEOUT=$((TIMEOUT * SPYRE_SLOWDOWN))
[[ $CARDS =~ ^[0-9]+$ ]] && [ "$CARDS" -ge 0 ] && [ "$CARDS" -le 8 ] ||
	die "--cards must be 0..8"

if [ $BUILD = 1 ]; then
	# the PyTorch backend (a long C++ build) only for a --torch guest
	"$SPYRE_ROOT/scripts/build.sh" qemu module user \
		$([ $TORCH = 1 ] && echo torch) initramfs >&2
fi
[ -f "$SPYRE_BUILD/paths.env" ] ||
	die "nothing built yet: run make build (or drop --no-build)"
# shellcheck disable=SC1091
. "$SPYRE_BUILD/paths.env"
[ -x "${QEMU:-}" ] && [ -f "${INITRAMFS:-}" ] ||
	die "nothing built yet: run make build (or drop --no-build)"
if [ -n "$QEMU_BIN" ]; then
	[ -x "$QEMU_BIN" ] || die "--qemu: $QEMU_BIN is not executable"
	QEMU=$QEMU_BIN
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/spyre-vm.XXXXXX")
trap 'kill "${QPID:-}" "${TPID:-}" 2>/dev/null || true; rm -rf "$RUN"' EXIT
[ -n "$LOG" ] || LOG=$RUN/serial.log
: >"$LOG"

# Per-run overlay: copied files, the command, its settings.
mkdir -p "$RUN/root/work" "$RUN/root/etc"
for f in "${COPIES[@]}"; do
	[ -e "$f" ] || die "--copy $f: no such file"
	cp -a "$f" "$RUN/root/work/"
done
{
	printf 'cd /work\n'
	printf '%q ' "$@"
	printf '\n'
} >"$RUN/root/etc/spyre-cmd.sh"
{
	echo "SPYRE_CARDS=$CARDS"
	echo "SPYRE_RUN_ROOT=$ROOT"
	echo "SPYRE_NO_MODULE=$NOMOD"
	echo "SPYRE_TORCH=$TORCH"
	printf 'SPYRE_MODULE_ARGS=%q\n' "$MODARGS"
	echo "SPYRE_TRACE=$([ -n "$TRACE" ] && echo 1 || echo 0)"
} >"$RUN/root/etc/spyre-run.conf"
(cd "$RUN/root" && find . | cpio -o -H newc --quiet) >"$RUN/run.cpio"
cat "$INITRAMFS" "$RUN/run.cpio" >"$RUN/initramfs.cpio"

args=(-M q35 -accel tcg -cpu qemu64,phys-bits=42 -smp "$SMP" -m "$MEM"
      -nodefaults -no-reboot -display none -vga none -nic none
      -kernel "$KIMAGE" -initrd "$RUN/initramfs.cpio"
      -serial "file:$LOG")
# no_timer_check: on a loaded host a TCG guest can miss the timer ticks
# the kernel's early IO-APIC check waits for and panic ("IO-APIC + timer
# doesn't work!", seen at load 20-24)
append="console=ttyS0 loglevel=4 panic=-1 oops=panic rdinit=/init no_timer_check"
if [ $IOMMU = 1 ]; then
	args+=(-device intel-iommu,intremap=off)
	append="$append intel_iommu=on iommu=nopt"
fi
for ((i = 0; i < CARDS; i++)); do
	args+=(-device "pcie-root-port,id=rp$i,chassis=$((i + 1)),slot=$((i + 1)),pref64-reserve=1G"
	       -device "spyre,bus=rp$i,id=spyre$i$CARD_OPTS")
done
if [ $TORCH = 1 ]; then
	[ -f "${TORCH_IMAGE:-}" ] ||
		die "no PyTorch build yet: run make build (or drop --no-build)"
	args+=(-drive "file=$TORCH_IMAGE,if=none,id=torchimg,format=raw,readonly=on"
	       -device virtio-blk-pci,drive=torchimg)
fi
[ -n "$QMP" ] && args+=(-qmp "unix:$QMP,server=on,wait=off")
if [ -n "$TRACE" ]; then
	mkdir -p "$TRACE" || die "--trace $TRACE: cannot make it"
	TRACE=$(cd "$TRACE" && pwd)
	[ ${#CARD_TRACE[@]} -gt 0 ] || CARD_TRACE=('spyre_job_*' spyre_irq)
	: >"$TRACE/card-trace.log"
	args+=(-msg timestamp=on)
fi
for p in "${CARD_TRACE[@]}"; do
	args+=(-trace "enable=$p")
done
# (QEMU takes the log file only after the events it applies to)
[ -n "$TRACE" ] && args+=(-trace "file=$TRACE/card-trace.log")
args+=("${QEMU_ARGS[@]}")
args+=(-append "$append")

START=$(date +%s.%N)
"$QEMU" "${args[@]}" >"$RUN/qemu.out" 2>&1 &
QPID=$!
# Stream the command's output (between the markers) while it runs.
(tail -n +1 -F --pid=$QPID "$LOG" 2>/dev/null |
	sed -u -n '/^SPYRE-START/,/^SPYRE-EXIT/{/^SPYRE-/d;p}') &
TPID=$!

timed_out=0
deadline=$(( $(date +%s) + TIMEOUT ))
while kill -0 $QPID 2>/dev/null; do
	if [ "$(date +%s)" -ge $deadline ]; then
		timed_out=1
		kill $QPID 2>/dev/null
		break
	fi
	sleep 0.2
done
wait $QPID 2>/dev/null || true
wait $TPID 2>/dev/null || true
END=$(date +%s.%N)
tr -d '\r' <"$LOG" >"$RUN/log"
if [ -n "$TRACE" ]; then
	sed -n '/^SPYRE-TRACE-BEGIN/,/^SPYRE-TRACE-END/{/^SPYRE-TRACE-/d;p}' \
		"$RUN/log" >"$TRACE/guest-trace.txt"
	# what the kernel log check below reads: the trace is not kernel log
	sed -i '/^SPYRE-TRACE-BEGIN/,/^SPYRE-TRACE-END/d' "$RUN/log"
fi

show_log() {
	echo "---- guest serial log ($1) ----" >&2
	cat "$RUN/log" >&2
	[ -s "$RUN/qemu.out" ] && { echo "---- qemu ----" >&2; cat "$RUN/qemu.out" >&2; }
	echo "---- end of log ----" >&2
}

boot=$(sed -n 's/^SPYRE-START //p' "$RUN/log" | head -1)
printf 'vm: %s card(s), guest up at %ss, run %.1fs\n' "$CARDS" "${boot:-?}" \
	"$(echo "$END - $START" | bc)" >&2

if [ $timed_out = 1 ]; then
	show_log "timeout after ${TIMEOUT}s"
	echo "vm: FAIL: guest timed out after ${TIMEOUT}s" >&2
	exit 124
fi
if grep -q '^SPYRE-MODULE-FAIL' "$RUN/log"; then
	show_log "module load failed"
	echo "vm: FAIL: spyre.ko did not load" >&2
	exit 126
fi
rc=$(sed -n 's/^SPYRE-EXIT \([0-9]*\)$/\1/p' "$RUN/log" | tail -1)
if [ -z "$rc" ] || ! grep -q '^SPYRE-DMESG-END' "$RUN/log"; then
	show_log "guest died"
	echo "vm: FAIL: guest stopped before the command finished (crash?)" >&2
	exit 125
fi
pat='(BUG:|Oops|general protection fault|Kernel panic|KASAN|UBSAN|unreferenced object|possible circular locking|possible recursive locking|INFO: task .* blocked|rcu: INFO: .*stall|detected stalls? on CPU|WARNING:|Call Trace:|RIP:)'
[ $ALLOW_WARN = 1 ] && pat='(BUG:|Oops|general protection fault|Kernel panic|KASAN|UBSAN|unreferenced object|possible circular locking|possible recursive locking|rcu: INFO: .*stall|detected stalls? on CPU)'
sed -n '/^SPYRE-DMESG-BEGIN/,/^SPYRE-DMESG-END/p' "$RUN/log" >"$RUN/dmesg"
if grep -Eq "$pat" "$RUN/dmesg" || grep -Eq "$pat" "$RUN/log"; then
	show_log "kernel reported a problem"
	echo "vm: FAIL: kernel log has:" >&2
	grep -E "$pat" "$RUN/dmesg" "$RUN/log" | head -5 >&2
	exit 126
fi
exit "$rc"
