#!/bin/bash
# one fresh agent, max produce 10 s (5 s warmup) + consume; prints label produce consume
label="$1"; shift
D=/tmp/maxp; rm -rf $D; mkdir -p $D/data
env "$@" ${BIN:-/work/main/target/release/rutomq} serve --data-dir $D/data --listen 127.0.0.1:19292 --http 127.0.0.1:19293 > $D/agent.log 2>&1 &
AP=$!
for i in $(seq 60); do curl -sf http://127.0.0.1:19293/health/ready >/dev/null && break; sleep 1; done
B=/work/main/target/release/rutomq-bench
$B produce --bootstrap 127.0.0.1:19292 --create --topic w --partitions 8 --producers 32 --batch-records 256 --warmup 2 --duration 13 --out $D/w.json > $D/w.log 2>&1
awk '{print $10}' /proc/$AP/stat > $D/f0
$B produce --bootstrap 127.0.0.1:19292 --create --topic ab --partitions 8 --producers 32 --batch-records 256 --warmup 5 --duration 10 --out $D/p.json > $D/p.log 2>&1
awk '{print $10}' /proc/$AP/stat > $D/f1; echo "minflt during produce: $(( $(cat $D/f1) - $(cat $D/f0) ))"
T=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["records_total"])' $D/p.json)
$B consume --bootstrap 127.0.0.1:19292 --topic ab --partitions 8 --from beginning --records $T --out $D/c.json > $D/c.log 2>&1
kill $AP; wait $AP
python3 - "$label" $D/p.json $D/c.json $D/w.json <<'PY'
import json,sys
def mib(p):
    d=json.load(open(p)); 
    for k in ('mib_per_sec','throughput_mib_s','mib_s'):
        if k in d: return d[k]
    return {k:v for k,v in d.items() if 'mib' in k.lower()}
print(sys.argv[1], "first", round(mib(sys.argv[4])), "second", round(mib(sys.argv[2])), "consume", round(mib(sys.argv[3])))
PY
rm -rf $D
