#!/usr/bin/env bash
set -euo pipefail
cd /work/main
source benches/lib.sh
W=/tmp/tailm2; rm -rf $W; mkdir -p $W; chmod o+x $W
start_fresh_agent ${BIN:-target/release/rutomq} $W ${FLAGS:-}
trap "kill $AGENT_PID; sleep 2; rm -rf $W/data" EXIT
M=http://127.0.0.1:$AGENT_HTTP_PORT/metrics
target/release/rutomq-bench e2e --bootstrap 127.0.0.1:$AGENT_PORT --partitions 8 --record-size 1024 --acks -1 \
  --producers ${PRODUCERS:-32} --batch-records 256 --consumers ${CONSUMERS:-2} --fetch-max-wait-ms 100 --create --topic tail-max --topic-config retention.bytes=1073741824 \
  --broker-pid $AGENT_PID --rate 0 --duration ${1:-10} --warmup 5 --label rutomq --out $W/tail.json > $W/bench.log 2>&1 &
b=$!
for i in 1 2 3 4 5 6 7 8; do sleep 2; curl -s $M > $W/m$i; done
wait $b
python3 - $W <<'PY'
import re,sys,json
W=sys.argv[1]
def scrape(p):
    out={}
    for line in open(p):
        if line.startswith('#'): continue
        m=re.match(r'(\S+?)(\{[^}]*\})? (\S+)$', line.strip())
        if m: out[m.group(1)+(m.group(2) or '')]=float(m.group(3))
    return out
ms=[scrape(f"{W}/m{i}") for i in range(1,9)]
def d(a,b,k): return b.get(k,0)-a.get(k,0)
for i in range(1,8):
    a,b=ms[i-1],ms[i]
    fs=d(a,b,'rutomq_request_seconds_sum{api="Fetch"}'); fc=d(a,b,'rutomq_request_seconds_count{api="Fetch"}')
    ps=d(a,b,'rutomq_request_seconds_sum{api="Produce"}'); pc=d(a,b,'rutomq_request_seconds_count{api="Produce"}')
    fb=d(a,b,'rutomq_fetch_bytes_total')
    print(f"t={2*i}-{2*i+2}s fetch n={fc:.0f} mean={1000*fs/max(fc,1):.1f}ms MiB/s={fb/2/1048576:.0f} | produce n={pc:.0f} mean={1000*ps/max(pc,1):.1f}ms")
d=json.load(open(f"{W}/tail.json")); print("consumed/produced", d['records']/d['produced_records'], "e2e p50", d['latency_ms']['p50'])
PY
grep -E "^\[" $W/bench.log | head -8
