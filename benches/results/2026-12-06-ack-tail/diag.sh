#!/bin/bash
# fresh agent, librdkafka produce at RATE for SECS; agent produce-latency + window-stage histograms, steal time
RATE=${1:-20000}; SECS=${2:-20}; shift 2; EXTRA="$@"
D=/tmp/rdkd; rm -rf $D; mkdir -p $D/data $D/out
${BIN:-/work/main/target/release/rutomq} serve --data-dir $D/data --listen 127.0.0.1:19192 --http 127.0.0.1:19193 $EXTRA > $D/agent.log 2>&1 &
AP=$!; trap 'kill $AP 2>/dev/null; wait $AP 2>/dev/null; rm -rf $D/data' EXIT
for i in $(seq 60); do curl -sf http://127.0.0.1:19193/health/ready >/dev/null && break; sleep 1; done
if [ -n "$WARM" ]; then
  /work/main/target/release/rutomq-bench produce --bootstrap 127.0.0.1:19192 --create --topic warm --partitions 8 --producers 32 --batch-records 256 --warmup 2 --duration 8 --out $D/warm.json > $D/warm.log 2>&1
  T=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' $D/warm.json)
  /work/main/target/release/rutomq-bench consume --bootstrap 127.0.0.1:19192 --topic warm --partitions 8 --from beginning --records $T --out $D/warmc.json > $D/warmc.log 2>&1
  sleep ${WARM}
fi
curl -s http://127.0.0.1:19193/metrics | grep -E "^rutomq_(window_stage_seconds|produce_latency_seconds|request_seconds)" > $D/m0
head -1 /proc/stat > $D/s0; awk '{print $10}' /proc/$AP/stat > $D/f0
/work/main/benches/rdkafka-perf.sh --out-dir $D/out --name diag --create produce 127.0.0.1:19192 diag-$RATE $RATE $SECS > $D/out/diag.json 2>$D/out/stderr.txt
head -1 /proc/stat > $D/s1; echo "minflt during run: $(( $(awk '{print $10}' /proc/$AP/stat) - $(cat $D/f0) ))"
curl -s http://127.0.0.1:19193/metrics | grep -E "^rutomq_(window_stage_seconds|produce_latency_seconds|request_seconds)" > $D/m1
python3 - $D <<'PY'
import json,sys
D=sys.argv[1]
d=json.load(open(f"{D}/out/diag.json"))
print({k:d[k] for k in d if 'latency' in k or k in('achieved_msgs_per_sec',)})
s0=[int(x) for x in open(f"{D}/s0").read().split()[1:]]; s1=[int(x) for x in open(f"{D}/s1").read().split()[1:]]
dd=[b-a for a,b in zip(s0,s1)]; tot=sum(dd)
print('cpu% user,nice,sys,idle,iowait,irq,softirq,steal', [round(100*x/tot,1) for x in dd[:8]])
PY
python3 "$(dirname "$0")/hist.py" $D quantiles
for f in $D/out/*.latency-us.gz; do python3 -c "
import gzip,sys
v=[int(x) for x in gzip.open('$f','rt').read().split() if x.isdigit()]
n=len(v); c=n//$((SECS+1))
print('p99 per second ms', [round(sorted(v[i:i+c])[int(.99*c)]/1000,1) for i in range(0,n-c+1,c)])
"; done
