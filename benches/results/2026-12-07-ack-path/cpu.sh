#!/bin/bash
# fresh agent, librdkafka produce at RATE for SECS in background; per-thread CPU (agent, client, postgres) over seconds 3..9
RATE=${1:-20000}; SECS=${2:-12}; shift 2; EXTRA="$@"
D=/tmp/rdkd; rm -rf $D; mkdir -p $D/data $D/out
if [ -n "$KAFKA" ]; then
  KAFKA_VERSION=4.4.0 KAFKA_CONTROLLER_PORT=19194 /work/main/benches/kafka/start-kafka.sh 19192 $D/data >/dev/null 2>&1
  AP=$(cat $D/data/kafka.pid); trap 'kill $AP 2>/dev/null; while kill -0 $AP 2>/dev/null; do sleep 0.2; done; rm -rf $D/data' EXIT
else
${BIN:-/work/main/target/release/rutomq} serve --data-dir $D/data --listen 127.0.0.1:19192 --http 127.0.0.1:19193 $EXTRA > $D/agent.log 2>&1 &
AP=$!; trap 'kill $AP 2>/dev/null; wait $AP 2>/dev/null; rm -rf $D/data' EXIT
for i in $(seq 60); do curl -sf http://127.0.0.1:19193/health/ready >/dev/null && break; sleep 1; done
fi
/work/main/benches/rdkafka-perf.sh --out-dir $D/out --name diag --create produce 127.0.0.1:19192 diag-$RATE $RATE $SECS > $D/out/diag.json 2>$D/out/stderr.txt &
CP=$!
snap() { for p in $(pgrep -f 'rutomq serve|rdkafka_performance|postgres|kafka.Kafka'); do for t in /proc/$p/task/*; do echo "$(cat $t/comm 2>/dev/null | tr ' ' _) $p $(awk '{print $14+$15}' $t/stat 2>/dev/null)"; done; done; }
sleep 3; snap > $D/c0; curl -s http://127.0.0.1:19193/metrics > $D/m0 2>/dev/null; if [ -n "$STRACE" ]; then RP=$(pgrep -f rdkafka_performance | head -1); BT=$(for t in /proc/$RP/task/*; do grep -qx "rdk:broker1" $t/comm && basename $t; done | head -1); timeout 2 strace -tt -T -p $BT -o /tmp/ackx/strace.txt 2>/dev/null; fi; if [ -n "$STRACE_AGENT" ]; then timeout 2 strace -f -tt -T -p $AP -e trace=openat,pwrite64,fsync,linkat,ftruncate -o /tmp/ackx/strace-agent.txt 2>/dev/null; fi; if [ -n "$PERF" ]; then perf record -a -g -o /tmp/ackx/perf.data -- sleep 6 2>/dev/null >/dev/null; else sleep 6; fi; snap > $D/c1; curl -s http://127.0.0.1:19193/metrics > $D/m1 2>/dev/null
wait $CP
python3 - $D <<'PY'
import sys,collections
D=sys.argv[1]
def rd(f):
    r={}
    for l in open(f):
        p=l.split()
        if len(p)==3: r[(p[0],p[1])]=r.get((p[0],p[1]),0)+int(p[2])
    return r
a=rd(f"{D}/c0"); b=rd(f"{D}/c1")
agg=collections.Counter()
for k,v in b.items():
    d=v-a.get(k,0)
    if d>0: agg[k[0]]+=d
for k,v in agg.most_common(20): print(f"{k:28s} {v/6:.1f}%")
import re,os
def rdm(f):
    r={}
    if not os.path.exists(f): return r
    for l in open(f):
        m=re.match(r'(\S+?)(_sum|_count)\{([^}]*)\} (\S+)',l)
        if m: r[(m.group(1),m.group(3),m.group(2))]=float(m.group(4))
    return r
a=rdm(f"{D}/m0"); b=rdm(f"{D}/m1"); out=[]
for k in [('rutomq_request_seconds','api="Produce"'),('rutomq_window_stage_seconds','stage="upload"'),('rutomq_window_stage_seconds','stage="commit"'),('rutomq_window_stage_seconds','stage="seal_late"'),('rutomq_window_stage_seconds','stage="queued"'),('rutomq_window_stage_seconds','stage="gather"')]:
    s_=b.get(k+('_sum',),0)-a.get(k+('_sum',),0); c=b.get(k+('_count',),0)-a.get(k+('_count',),0)
    if c>0: out.append("%s n %d mean %.2f ms"%(k[1].split('"')[1],c,1000*s_/c))
print(" | ".join(out))
import json; d=json.load(open(f"{D}/out/diag.json")); print(d['latency_ms'])
PY
