"""JSON helpers the benchmark scripts' embedded Python shares (race.sh,
scaling.sh import it from this folder)."""
import json


def load(p):
    with open(p) as f:
        return json.load(f)


def dig(d, *keys):
    """d[k1][k2]..., or None where a level is missing or null."""
    for k in keys:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d
