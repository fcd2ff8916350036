#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Turn a traced run (scripts/vm.sh run --trace DIR) into a timeline.

Reads DIR/guest-trace.txt (the driver's tracepoints, events/spyre, as
tracefs prints them) and, when present, DIR/card-trace.log (the card's
trace-events from QEMU's log backend).  Writes:

  DIR/timeline.json  Chrome trace-event JSON (open it in ui.perfetto.dev
                     or chrome://tracing): one process per card, one
                     thread per hardware queue holding the card's job
                     spans, a "driver" thread with submits, timeouts,
                     faults and resets, and a counter of the bytes of BOs
                     created during the trace, per placement.
  DIR/timeline.png   the job spans per queue (gnuplot), unless --no-png.

Time base: the guest's trace clock, so that several cards share one axis.
The job spans are the card's own clock (ns since its last reset: the
card's events carry it as card_ns, the driver's spyre_job_done the card's
start and end of the job's last descriptor), mapped onto the guest's with
the median offset, per card, between the two clocks in spyre_job_run
(which samples the card clock).  Timestamps in the JSON are microseconds;
a span's duration is the card's own.

--check asserts what must hold for any run (exit status 1 otherwise, with
the reason): at least one job span; per queue, spans that never overlap
(the card runs one descriptor at a time per queue); and, with the card's
log, a successful card descriptor for
every job the driver saw end with err=0.  Lost events (ring-buffer
overruns) make --check fail rather than guess.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

FTRACE = re.compile(r'^\s*(?P<task>.+?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?'
                    r'\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):\s+'
                    r'(?P<event>spyre_\w+):\s+(?P<args>.*)$')
CARD = re.compile(r'^(?:\d+@\d+\.\d+:)?(?P<event>spyre_\w+)\s+(?P<args>.*)$')
KV = re.compile(r'(\w+)=(\S+)')


def num(v):
    return int(v, 0)


def card_args(text):
    """'bdf 0x0100 queue 0 seqno 5' -> {'bdf': 256, 'queue': 0, ...}."""
    tok = text.split()
    out = {}
    for i in range(0, len(tok) - 1, 2):
        try:
            out[tok[i]] = num(tok[i + 1])
        except ValueError:
            out[tok[i]] = tok[i + 1]
    return out


def bdf_name(bdf):
    return '0000:%02x:%02x.%x' % (bdf >> 8, (bdf >> 3) & 0x1f, bdf & 7)


def read_guest(path):
    events, overruns = [], 0
    with open(path, errors='replace') as f:
        for line in f:
            m = re.match(r'^# overrun: (\d+)', line)
            if m:
                overruns += int(m.group(1))
                continue
            m = FTRACE.match(line)
            if not m:
                continue
            a = dict(KV.findall(m.group('args')))
            for k in list(a):
                if k != 'dev':
                    try:
                        a[k] = num(a[k])
                    except ValueError:
                        pass
            if m.group('event') == 'spyre_fault':
                a['write'] = ' write ' in m.group('args')
            events.append({'event': m.group('event'), 'pid': int(m.group('pid')),
                           'task': m.group('task').strip(),
                           'ts_ns': round(float(m.group('ts')) * 1e9), 'a': a})
    return events, overruns


def read_card(path):
    spans, irqs, open_ = {}, 0, {}
    if not os.path.exists(path):
        return None, 0
    with open(path, errors='replace') as f:
        for line in f:
            m = CARD.match(line.strip())
            if not m:
                continue
            ev, a = m.group('event'), card_args(m.group('args'))
            if ev == 'spyre_irq':
                irqs += 1
            elif ev == 'spyre_job_start':
                open_[(a['bdf'], a['queue'])] = a
            elif ev == 'spyre_job_end':
                key = (a['bdf'], a['queue'])
                st = open_.pop(key, None)
                if st is None or st['seqno'] != a['seqno']:
                    continue
                spans.setdefault((bdf_name(a['bdf']), a['queue']), []).append(
                    {'seqno': a['seqno'], 'ctx': st['ctx'],
                     'start': st['card_ns'], 'end': a['card_ns'],
                     'status': a['status']})
    # an empty log (the card's events were not enabled) is no log
    return (spans or None), irqs


def build(guest, card_spans):
    """Job spans per (dev, queue) on the card clock, and the JSON events."""
    offsets = {}
    for e in guest:
        if e['event'] == 'spyre_job_run' and e['a'].get('card_ns'):
            offsets.setdefault(e['a']['dev'], []).append(
                e['a']['card_ns'] - e['ts_ns'])
    offset = {d: statistics.median(v) for d, v in offsets.items()}

    submitter = {}
    for e in guest:
        if e['event'] == 'spyre_submit':
            a = e['a']
            submitter[(a['dev'], a['hwq'], a['seqno'])] = (e['pid'], e['task'])

    if card_spans is not None:
        spans = card_spans
    else:
        spans = {}
        for e in guest:
            a = e['a']
            if e['event'] == 'spyre_job_done' and a.get('card_end_ns'):
                spans.setdefault((a['dev'], a['hwq']), []).append(
                    {'seqno': a['seqno'], 'ctx': a['ctx'],
                     'start': a['card_start_ns'], 'end': a['card_end_ns'],
                     'status': a['err']})
    devs = sorted({d for d, _ in spans} | set(offset) |
                  {e['a']['dev'] for e in guest if 'dev' in e['a']})
    pid = {d: i + 1 for i, d in enumerate(devs)}
    out = []
    for d in devs:
        out.append({'ph': 'M', 'name': 'process_name', 'pid': pid[d],
                    'args': {'name': 'card %s' % d}})
        out.append({'ph': 'M', 'name': 'thread_name', 'pid': pid[d], 'tid': 0,
                    'args': {'name': 'driver'}})
    for (d, q), lst in sorted(spans.items()):
        out.append({'ph': 'M', 'name': 'thread_name', 'pid': pid[d],
                    'tid': q + 1, 'args': {'name': 'queue %d' % q}})
        for s in lst:
            who = submitter.get((d, q, s['seqno']))
            args = {'seqno': s['seqno'], 'ctx': s['ctx'], 'status': s['status']}
            if who:
                args['process'] = '%s (%d)' % (who[1], who[0])
            out.append({'ph': 'X', 'name': 'job %d' % s['seqno'],
                        'cat': 'job', 'pid': pid[d], 'tid': q + 1,
                        'ts': (s['start'] - offset.get(d, 0)) / 1e3,
                        'dur': max(s['end'] - s['start'], 0) / 1e3,
                        'args': args})
    mem = {}
    for e in guest:
        a = e['a']
        d = a.get('dev')
        if d is None:
            continue
        ts = e['ts_ns'] / 1e3
        ev = e['event']
        if ev in ('spyre_submit', 'spyre_job_timeout', 'spyre_fault',
                  'spyre_reset'):
            name = ev[len('spyre_'):]
            args = {k: v for k, v in a.items() if k != 'dev'}
            args['process'] = '%s (%d)' % (e['task'], e['pid'])
            out.append({'ph': 'i', 's': 't' if name == 'submit' else 'p',
                        'name': name, 'cat': 'driver', 'pid': pid[d],
                        'tid': 0, 'ts': ts, 'args': args})
        elif ev in ('spyre_bo_create', 'spyre_bo_destroy'):
            key = (d, a['placement'])
            mem[key] = mem.get(key, 0) + (a['size'] if ev == 'spyre_bo_create'
                                          else -a['size'])
            out.append({'ph': 'C', 'name': 'BO bytes created in trace',
                        'pid': pid[d], 'ts': ts,
                        'args': {'placement %d' % key[1]: mem[key]}})
    return spans, offset, out


def check(guest, spans, card_spans, overruns):
    if overruns:
        return 'the trace lost %d events (ring-buffer overrun)' % overruns
    if not any(spans.values()):
        return 'no job spans'
    for (d, q), lst in spans.items():
        # in the order they ended; a start before the previous start is
        # the card's clock starting again (a reset), not an overlap
        prev = None
        for s in lst:
            if s['end'] < s['start']:
                return '%s queue %d: job %d ends before it starts' % (
                    d, q, s['seqno'])
            if prev and prev['start'] <= s['start'] < prev['end']:
                return '%s queue %d: job %d (%d..%d) overlaps job %d ' \
                       '(%d..%d)' % (d, q, s['seqno'], s['start'], s['end'],
                                     prev['seqno'], prev['start'], prev['end'])
            prev = s
    if card_spans is not None:
        ok = {(d, q, s['seqno']) for (d, q), lst in card_spans.items()
              for s in lst if s['status'] == 0}
        for e in guest:
            a = e['a']
            if e['event'] == 'spyre_job_done' and a['err'] == 0 and \
                    (a['dev'], a['hwq'], a['seqno']) not in ok:
                return '%s queue %d: the driver saw job %d succeed but the ' \
                       'card has no successful descriptor %d' % (
                           a['dev'], a['hwq'], a['seqno'], a['seqno'])
    return None


def png(spans, offset, path):
    gp = shutil.which('gnuplot')
    if not gp:
        sys.exit('trace-timeline: gnuplot not found (apt install gnuplot-nox)')
    lanes = sorted(spans)
    t0 = min((s['start'] - offset.get(d, 0) for (d, q), lst in spans.items()
              for s in lst), default=0)
    rows = []
    for y, lane in enumerate(lanes):
        off = offset.get(lane[0], 0)
        for s in spans[lane]:
            a, b = (s['start'] - off - t0) / 1e6, (s['end'] - off - t0) / 1e6
            rows.append('%.6f %.6f %d %d' % ((a + b) / 2, max((b - a) / 2, 1e-4),
                                             y, 1 if s['status'] else 0))
    ytics = ', '.join('"%s q%d" %d' % (d, q, y) for y, (d, q) in enumerate(lanes))
    script = '\n'.join([
        'set terminal pngcairo size 1400,%d font "sans,10"' % (160 + 40 * len(lanes)),
        'set output "%s"' % path,
        'set title "Spyre jobs per hardware queue (durations: card clock; '
        'axis: guest clock)"',
        'set xlabel "ms since the first job"',
        'set yrange [-0.7:%f]' % (len(lanes) - 0.3),
        'set ytics (%s)' % ytics,
        'set grid xtics',
        'set style fill solid 0.8 noborder',
        'set key off',
        '$jobs << EOD', *rows, 'EOD',
        'plot $jobs using 1:3:2:(0.35):($4 != 0 ? 0xd62728 : 0x1f77b4) '
        'with boxxyerror lc rgb variable',
        ''])
    subprocess.run([gp], input=script, text=True, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('dir', help='the folder vm.sh --trace wrote')
    ap.add_argument('--check', action='store_true',
                    help='fail unless the trace is consistent (see above)')
    ap.add_argument('--no-png', action='store_true', help='JSON only')
    o = ap.parse_args()
    gpath = os.path.join(o.dir, 'guest-trace.txt')
    if not os.path.exists(gpath):
        sys.exit('trace-timeline: %s: not found (run vm.sh with --trace)' % gpath)
    guest, overruns = read_guest(gpath)
    card_spans, irqs = read_card(os.path.join(o.dir, 'card-trace.log'))
    spans, offset, events = build(guest, card_spans)
    with open(os.path.join(o.dir, 'timeline.json'), 'w') as f:
        json.dump({'traceEvents': events, 'displayTimeUnit': 'ns'}, f)
    if not o.no_png and any(spans.values()):
        png(spans, offset, os.path.join(o.dir, 'timeline.png'))
    for (d, q), lst in sorted(spans.items()):
        busy = sum(s['end'] - s['start'] for s in lst)
        span = max(s['end'] for s in lst) - min(s['start'] for s in lst)
        print('card %s queue %d: %d jobs, busy %.3f ms of %.3f ms' %
              (d, q, len(lst), busy / 1e6, span / 1e6))
    print('%d driver events, %d card interrupts traced; wrote %s' %
          (len(guest), irqs, os.path.join(o.dir, 'timeline.json')))
    if o.check:
        why = check(guest, spans, card_spans, overruns)
        if why:
            print('trace-timeline: FAIL: ' + why)
            return 1
        print('trace-timeline: consistent')
    return 0


if __name__ == '__main__':
    sys.exit(main())
