import re,sys
def parse(f):
    out={}
    for l in open(f):
        m=re.match(r'(\S+?)\{(.*)\} (\S+)',l)
        if m: out[(m.group(1),m.group(2))]=float(m.group(3))
    return out
D=sys.argv[1] if len(sys.argv)>1 else "/tmp/rdkd"
a,b=parse(D+"/m0"),parse(D+"/m1")
LE=re.compile(r'le="([^"]+)"')
for want in ['api="Produce"','stage="seal_late"','stage="upload"','stage="commit"']:
    rows=[(LE.search(lab).group(1),v-a.get((n,lab),0)) for (n,lab),v in b.items() if n.endswith('_bucket') and want in lab]
    rows.sort(key=lambda r: float(r[0]) if r[0]!='+Inf' else 1e9)
    prev=0; parts=[]
    for le,c in rows:
        if c-prev: parts.append(f"{le}:{int(c-prev)}")
        prev=c
    print(want, ' '.join(parts))
