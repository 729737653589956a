# The agent's histograms between two /metrics scrapes (DIR/m0, DIR/m1, written by diag.sh):
#   hist.py [DIR]            bucket counts of Produce on the wire and of three window stages
#   hist.py DIR quantiles    p50/p90/p99/p99.9 bucket bounds of every series
import re, sys

D = sys.argv[1] if len(sys.argv) > 1 else "/tmp/rdkd"
MODE = sys.argv[2] if len(sys.argv) > 2 else "buckets"
LE = re.compile(r'le="([^"]+)"')


def parse(f):
    out = {}
    for l in open(f):
        m = re.match(r'(\S+?)\{(.*)\} (\S+)', l)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


a, b = parse(D + "/m0"), parse(D + "/m1")
# series label (stage or api; the unlabelled produce latency histogram is PRODUCE_REQ) -> [(le, count)]
series = {}
for (n, lab), v in b.items():
    if n.endswith('_bucket'):
        m = re.search(r'(?:stage|api)="([^"]+)"', lab)
        le = LE.search(lab).group(1)
        series.setdefault(m.group(1) if m else "PRODUCE_REQ", []).append(
            (float('inf') if le == '+Inf' else float(le), v - a.get((n, lab), 0)))
for bk in series.values():
    bk.sort()

if MODE == "quantiles":
    for st, bk in series.items():
        tot = bk[-1][1]
        q = lambda p: next(le for le, c in bk if c >= p * tot)
        print(st, 'n', int(tot), 'p50<=', q(.5), 'p90<=', q(.9), 'p99<=', q(.99), 'p99.9<=', q(.999))
else:
    for name, label in [("Produce", 'api="Produce"'), ("seal_late", 'stage="seal_late"'),
                        ("upload", 'stage="upload"'), ("commit", 'stage="commit"')]:
        prev, parts = 0, []
        for le, c in series.get(name, []):
            if c - prev:
                parts.append(f"{'+Inf' if le == float('inf') else f'{le:g}'}:{int(c - prev)}")
            prev = c
        print(label, ' '.join(parts))
