#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The machine-readable report of `make bench` (scripts/run-bench.sh).

  bench-report.py OUTDIR --bench BENCH.json [--torch TORCH.txt]
                  [--block BLOCK.txt] [--bql BQL.json] [--load-before S]
                  [--load-after S]
  bench-report.py --median RUN/bench.json...

BENCH.json is what `spyre-bench --json` printed (docs/spyre-bench.schema.json);
TORCH.txt the "key value" lines of torch_spyre/examples/bench_torch.py;
BLOCK.txt the figure lines of `spyre-demo -b` ("block-PREC CLOCK MEDIAN MIN
MAX N": microseconds per transformer block of the graph launched 20 times,
card or wall clock), whose ratios to the native ceilings block-PREC in
BENCH.json (spyre-ceilings: the same block, natively) are computed here:
the card clock's with the goal <= 2x, the wall clock's for information.
BQL.json is what scripts/bql-profile.py --json wrote: how long vCPUs, the
card's workers and the device lock's users waited for their locks per
second of card load (at the offered rate it names, if any), figures
without a ratio (--median gives their
medians too).
Writes OUTDIR/bench.json, the three merged with those ratios and the
host load around the run, and OUTDIR/bench.png, every ratio that has a goal
as a bar against its goal line (green met, red not; log scale), with
gnuplot.  BENCH.json is checked against docs/spyre-bench.schema.json
first.  Prints the paths, and the transformer block's ratios.

--median reads the OUTDIR/bench.json of several runs (`make bench-median`
gives three) and prints, per ratio that has a goal or is marked "(info)",
each run's ratio, their median and whether the median meets the goal: the
figures a closing note reports, since one run's ratios move with the
host.  Exit status 1 on unreadable or invalid input.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys


def torch_figures(path):
    """bench_torch.py's "key value" lines -> dict, and its ratios as figures."""
    vals = {}
    with open(path, errors='replace') as f:
        for line in f:
            p = line.split()
            if len(p) == 2 and p[0].startswith('torch-'):
                try:
                    vals[p[0]] = float(p[1])
                except ValueError:
                    pass
    figs = []

    def ratio(name, num, den, op, goal, clock='wall', ceil=None):
        if num in vals and den in vals and vals[den] > 0:
            figs.append({'figure': name, 'unit': 'x', 'clock': clock,
                         'value': {'median': vals[num], 'n': 1},
                         'ceiling': {'name': ceil or den,
                                     'median': vals[den], 'n': 1},
                         'ratio': vals[num] / vals[den],
                         'goal': {'op': op, 'ratio': goal} if op else None,
                         'met': None if not op else
                         (vals[num] / vals[den] <= goal) if op == '<='
                         else (vals[num] / vals[den] >= goal)})
    ratio('torch decode: eager / compiled per token',
          'torch-decode-eager-ms', 'torch-decode-compiled-ms', '>=', 3)
    ratio('torch decode: compiled per token / same lists from C',
          'torch-decode-compiled-ms', 'torch-step-libspyre-ms', '<=', 1.5)
    ratio('torch step: compiled program without Dynamo / same lists from C',
          'torch-step-program-ms', 'torch-step-libspyre-ms', '<=', 1.5)
    ratio('torch decode, d_model 512: compiled per token / same lists '
          'from C', 'torch-wide-decode-compiled-ms',
          'torch-wide-step-libspyre-ms', None, None)
    ratio('torch eager 8x8 add: spyre / the same op on a CPU tensor',
          'torch-dispatch-spyre-us', 'torch-dispatch-cpu-us', '<=', 3)
    ratio('torch all_reduce 16 MiB: 2 cards (spyre) / CPU tensors (gloo)',
          'torch-dist-allreduce-spyre-gbs', 'torch-dist-allreduce-gloo-gbs',
          '>=', 1)
    return vals, figs


def block_figures(path, ceilings):
    """spyre-demo -b's lines -> figures against the block-PREC ceilings."""
    ceil = {c['key']: c for c in ceilings}
    figs = []
    with open(path, errors='replace') as f:
        for line in f:
            p = line.split()
            if len(p) != 6 or not p[0].startswith('block-'):
                continue
            try:
                med, lo, hi = (float(v) for v in p[2:5])
                n = int(p[5])
            except ValueError:
                continue
            c = ceil.get(p[0])
            ratio = med / c['median'] if c and c['median'] > 0 else None
            goal = {'op': '<=', 'ratio': 2} if p[1] == 'card' else None
            figs.append({
                'figure': 'transformer block %s as one command list, per block'
                          % p[0][len('block-'):],
                'unit': 'us', 'clock': p[1],
                'value': {'median': med, 'min': lo, 'max': hi, 'n': n},
                'ceiling': {'name': p[0], 'median': c['median'],
                            'min': c['min'], 'max': c['max'], 'n': c['n']}
                if c else None,
                'ratio': ratio, 'goal': goal,
                'met': ratio <= goal['ratio'] if goal and ratio is not None
                else None})
    return figs


def bql_figures(path):
    """bql-profile.py's JSON -> value figures (milliseconds per second)."""
    with open(path) as f:
        b = json.load(f)
    figs = []
    # a fixed offered load (bql-profile.py --rate) or as fast as it goes
    load = ('card load, %g jobs/s per queue' % b['rate'] if b.get('rate')
            else 'card load')
    for key, what in (('vcpu', 'vCPUs wait for the BQL'),
                      ('card', "the card's workers wait for the BQL"),
                      ('device_lock_mmio',
                       "the card's MMIO handlers wait for the device lock"),
                      ('device_lock',
                       "the card's workers wait for the device lock")):
        figs.append({'figure': '%s, per second of %s' % (what, load),
                     'unit': 'ms/s', 'clock': 'wall',
                     'value': {'median': b['%s_wait_ms_per_s' % key], 'n': 1},
                     'acquisitions': b['%s_acquisitions' % key],
                     'ceiling': None, 'ratio': None, 'goal': None,
                     'met': None})
    return figs


def chart(figs, path):
    gp = shutil.which('gnuplot')
    if not gp:
        sys.exit('bench-report: gnuplot not found (apt install gnuplot-nox)')
    rows, tics = [], []
    for y, f in enumerate(reversed(figs)):
        r, g = f['ratio'], f['goal']['ratio']
        color = 0x2ca02c if f['met'] else 0xd62728
        rows.append('%g %g %d %d' % (r, g, y, color))
        label = '%s (%s %g, %s)' % (f['figure'], f['goal']['op'], g,
                                    f.get('clock') or '-')
        tics.append('"%s" %d' % (label.replace('"', "'"), y))
    lo = min(min(f['ratio'] for f in figs), min(f['goal']['ratio'] for f in figs))
    hi = max(max(f['ratio'] for f in figs), max(f['goal']['ratio'] for f in figs))
    lo = 10 ** math.floor(math.log10(max(lo, 1e-3)) - 0.2)
    hi = 10 ** math.ceil(math.log10(hi) + 0.2)
    script = '\n'.join([
        'set terminal pngcairo size 1500,%d font "sans,9"' % (140 + 22 * len(rows)),
        'set output "%s"' % path,
        'set title "make bench: each ratio (bar) against its goal (black '
        'line); green: goal met, red: not met"',
        'set logscale x', 'set xrange [%g:%g]' % (lo, hi),
        'set xlabel "ratio (median / median of its floor or ceiling, same run)"',
        'set yrange [-0.7:%f]' % (len(rows) - 0.3),
        'set ytics (%s)' % ', '.join(tics),
        'set lmargin 60', 'set grid xtics', 'set key off',
        'set style fill solid 0.8 noborder',
        '$d << EOD', *rows, 'EOD',
        'plot $d using (sqrt(%g*$1)):3:(%g):1:($3-0.35):($3+0.35):4 '
        'with boxxyerror lc rgb variable, '
        '$d using 2:($3-0.45):(0):(0.9) with vectors nohead lw 3 lc rgb "black"'
        % (lo, lo),
        ''])
    subprocess.run([gp], input=script, text=True, check=True)


def all_figures(report):
    """Every figure of one merged report (OUTDIR/bench.json), in order."""
    return (report['spyre_bench'].get('figures', []) +
            report.get('torch_figures', []) + report.get('block_figures', []) +
            report.get('bql_figures', []))


def medians(paths):
    """Print each ratio of several runs, their median and the goal's state."""
    runs = []
    for p in paths:
        try:
            with open(p) as f:
                runs.append(all_figures(json.load(f)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print('bench-report: %s: %s' % (p, e), file=sys.stderr)
            return 1
    rows, values = {}, {}
    for figs in runs:
        for f in figs:
            if f.get('unit') == 'ms/s':
                values.setdefault('%s (%s)' % (f['figure'], f['unit']),
                                  []).append(f['value']['median'])
            if f.get('ratio') is None:
                continue
            c = f.get('ceiling') or {}
            key = '%s [%s clock / %s]' % (f['figure'], f['clock'],
                                           c.get('name', '-'))
            rows.setdefault(key, (f.get('goal'), []))[1].append(f['ratio'])
    print('median of %d run(s): %s' % (len(runs), ' '.join(paths)))
    met = total = 0
    for key, (goal, rs) in rows.items():
        rs_sorted = sorted(rs)
        n = len(rs_sorted)
        med = (rs_sorted[n // 2] if n % 2 else
               (rs_sorted[n // 2 - 1] + rs_sorted[n // 2]) / 2)
        verdict = '(info)'
        if goal:
            ok = (med <= goal['ratio'] if goal['op'] == '<='
                  else med >= goal['ratio'])
            verdict = '%s %gx%s' % (goal['op'], goal['ratio'],
                                    '' if ok else ' !')
            total += 1
            met += ok
        print('%-78s %-20s %6.2fx  %s' % (
            key, ' '.join('%.2f' % r for r in rs), med, verdict))
    for key, vs in values.items():
        vs_sorted = sorted(vs)
        n = len(vs_sorted)
        med = (vs_sorted[n // 2] if n % 2 else
               (vs_sorted[n // 2 - 1] + vs_sorted[n // 2]) / 2)
        print('%-78s %-20s %7.2f  (value)' % (
            key, ' '.join('%.2f' % v for v in vs), med))
    print('%d medians with a goal, %d met' % (total, met))
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--median':
        return medians(sys.argv[2:]) if len(sys.argv) > 2 else 1
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('outdir')
    ap.add_argument('--bench', required=True)
    ap.add_argument('--torch')
    ap.add_argument('--block')
    ap.add_argument('--bql')
    ap.add_argument('--load-before', default='')
    ap.add_argument('--load-after', default='')
    o = ap.parse_args()
    try:
        with open(o.bench) as f:
            bench = json.load(f)
    except (OSError, ValueError) as e:
        print('bench-report: %s: %s' % (o.bench, e), file=sys.stderr)
        return 1
    schema = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                          'docs', 'spyre-bench.schema.json')
    try:
        import jsonschema
        with open(schema) as f:
            jsonschema.Draft202012Validator(json.load(f)).validate(bench)
    except ImportError:
        print('bench-report: python3-jsonschema missing: %s not checked '
              'against the schema' % o.bench, file=sys.stderr)
    except jsonschema.ValidationError as e:
        print('bench-report: %s does not follow %s: %s' %
              (o.bench, schema, e.message), file=sys.stderr)
        return 1
    tvals, tfigs = ({}, [])
    if o.torch and os.path.exists(o.torch):
        tvals, tfigs = torch_figures(o.torch)
    bfigs = []
    if o.block and os.path.exists(o.block):
        bfigs = block_figures(o.block, bench.get('ceilings', []))
    qfigs = []
    if o.bql and os.path.exists(o.bql):
        qfigs = bql_figures(o.bql)
    report = {'schema_version': 1, 'spyre_bench': bench, 'torch': tvals,
              'torch_figures': tfigs, 'block_figures': bfigs,
              'bql_figures': qfigs,
              'host_load': {'before': o.load_before, 'after': o.load_after}}
    os.makedirs(o.outdir, exist_ok=True)
    jpath = os.path.join(o.outdir, 'bench.json')
    with open(jpath, 'w') as f:
        json.dump(report, f, indent=1)
    for f in bfigs:
        c = f['ceiling']
        print('bench: %s: %.1f us (%s clock) / %s native = %s%s' % (
            f['figure'], f['value']['median'], f['clock'],
            '%.1f us' % c['median'] if c else 'no ceiling',
            '%.2fx' % f['ratio'] if f['ratio'] is not None else '-',
            ' (goal <= %gx%s)' % (f['goal']['ratio'],
                                  '' if f['met'] else ', not met')
            if f['goal'] else ''))
    for f in qfigs:
        print('bench: %s: %.2f %s (%d acquisitions)' % (
            f['figure'], f['value']['median'], f['unit'], f['acquisitions']))
    figs = [f for f in bench.get('figures', []) + tfigs + bfigs
            if f.get('goal') and f.get('ratio') is not None and f['ratio'] > 0]
    if figs:
        ppath = os.path.join(o.outdir, 'bench.png')
        chart(figs, ppath)
        print('bench: %s, %s (%d ratios with a goal, %d met)' %
              (jpath, ppath, len(figs), sum(1 for f in figs if f['met'])))
    else:
        print('bench: %s (no ratio with a goal: no chart)' % jpath)
    return 0


if __name__ == '__main__':
    sys.exit(main())
