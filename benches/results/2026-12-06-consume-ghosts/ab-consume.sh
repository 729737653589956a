#!/bin/bash
# prepare: ab-consume.sh prep BIN ; run: ab-consume.sh run BIN TAG [agent flags]
set -e
D=/tmp/abc; B=/work/main/target/release/rutomq-bench
start() { BIN=$1; shift; $BIN serve --data-dir $D/data --listen 127.0.0.1:19092 --http 127.0.0.1:19093 "$@" >> $D/agent.log 2>&1 & AP=$!; for i in $(seq 90); do curl -sf http://127.0.0.1:19093/health/ready >/dev/null && return; sleep 1; done; echo "agent not ready"; exit 1; }
stop() { kill $AP; wait $AP || true; }
if [ "$1" = prep ]; then
  rm -rf $D; mkdir -p $D/data; start $2
  $B produce --bootstrap 127.0.0.1:19092 --partitions 8 --record-size 1024 --acks -1 --producers 32 --batch-records 256 --topic t --create --rate ${RATE:-1000000} --duration 12 --warmup 0 --out $D/produce.json > $D/produce.log 2>&1
  python3 -c "import json;d=json.load(open('$D/produce.json'));print(d.get('records_total',d.get('records')))" > $D/n
  echo "records $(cat $D/n)"; stop; exit 0
fi
BIN=$2; TAG=$3; shift 3
start $BIN "$@"
sleep 2
m() { curl -s http://127.0.0.1:19093/metrics | grep -E "^rutomq_(object_gets|object_get_bytes|object_span|read_prefetches|read_joins)" ; }
m > $D/m0-$TAG
$B consume --bootstrap 127.0.0.1:19092 --partitions 8 --record-size 1024 --topic t --from beginning --records $(cat $D/n) $CONSUME_ARGS --out $D/consume-$TAG.json > $D/consume-$TAG.log 2>&1
m > $D/m1-$TAG
stop
python3 - $D $TAG <<'PY'
import json,sys
D,T=sys.argv[1:]
c=json.load(open(f"{D}/consume-{T}.json"))
m0=dict(l.split() for l in open(f"{D}/m0-{T}")); m1=dict(l.split() for l in open(f"{D}/m1-{T}"))
d={k:float(m1[k])-float(m0.get(k,0)) for k in m1}
data=c.get('bytes_total') or c.get('bytes')
print(f"{T}: consume {c['mib_per_sec']:.1f} MiB/s; gets {d.get('rutomq_object_gets_total',0):.0f} span_gets {d.get('rutomq_object_span_gets_total',0):.0f} get GB {d['rutomq_object_get_bytes_total']/1e9:.2f} refused {d.get('rutomq_read_prefetches_refused_total',0):.0f}")
PY
