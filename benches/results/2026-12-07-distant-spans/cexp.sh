#!/bin/bash
# cexp.sh BIN TAG [agent flags]: fresh agent, max produce 15 s, consume 6.9M from beginning twice (drop caches between)
set -e
D=/tmp/cexp; B=${BENCH:-/work/main/target/release/rutomq-bench}
BIN=$1; TAG=$2; shift 2
rm -rf $D; mkdir -p $D/data
$BIN serve --data-dir $D/data --listen 127.0.0.1:19092 --http 127.0.0.1:19093 "$@" >> $D/agent.log 2>&1 & AP=$!
for i in $(seq 90); do curl -sf http://127.0.0.1:19093/health/ready >/dev/null && break; sleep 1; done
common="--bootstrap 127.0.0.1:19092 --partitions 8 --record-size 1024 --acks -1 --producers 32 --batch-records 256 --broker-pid $AP"
$B produce $common --topic t --create --rate 0 --duration 10 --warmup 5 --out $D/produce.json > $D/produce.log 2>&1
N=${RECORDS:-6979584}
m() { curl -s http://127.0.0.1:19093/metrics | grep -E "^rutomq_(object_gets|object_get_bytes|object_span|read_prefetches|read_joins|read_cache_hits|object_cache_hits|read_cache_whole_use_percent)" ; }
sleep 3
for run in warm cold; do
  [ $run = cold ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
  m > $D/m0-$run
  if [ -n "$PERF" ]; then perf stat -e page-faults,task-clock -p $AP -o $D/pstat-$run.txt & PS=$!; perf record -F ${PF:-999} ${PG:--g} -p $AP -o $D/perf-$run.data >/dev/null 2>&1 & PR=$!; sleep 0.5; fi
  $B consume $common --topic t --from beginning --records $N $CONSUME_ARGS --out $D/consume-$run.json > $D/consume-$run.log 2>&1
  m > $D/m1-$run
  if [ -n "$PERF" ]; then kill -INT $PS $PR; wait $PS $PR || true; fi
  python3 - $D $run $TAG <<'PY'
import json,sys
D,T,TAG=sys.argv[1:]
c=json.load(open(f"{D}/consume-{T}.json"))
m0=dict(l.split() for l in open(f"{D}/m0-{T}")); m1=dict(l.split() for l in open(f"{D}/m1-{T}"))
d={k:float(m1[k])-float(m0.get(k,0)) for k in m1}
print(f"{TAG} {T}: consume {c['mib_per_sec']:.1f} MiB/s; gets {d.get('rutomq_object_gets_total',0):.0f} span_gets {d.get('rutomq_object_span_gets_total',0):.0f} get GB {d['rutomq_object_get_bytes_total']/1e9:.2f} refused {d.get('rutomq_read_prefetches_refused_total',0):.0f} " + " ".join(f"{k[7:]}={v:.0f}" for k,v in d.items() if 'hits' in k or 'joins' in k or 'prefetches_total' in k) + ' whole_use_end=' + m1.get('rutomq_read_cache_whole_use_percent','-'))
PY
  sleep 3
done
python3 -c "import json;d=json.load(open('$D/produce.json'));print('produce', d['mib_per_sec'])"
kill $AP; wait $AP || true
rm -rf $D/data  # ~20 GB of objects: a later race needs the room
