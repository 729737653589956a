//! The part of OpenTelemetry's metrics protobuf (OTLP `MetricsData`, from
//! opentelemetry-proto's `metrics/v1/metrics.proto`) that PushTelemetry
//! carries and rutomq exports: per metric, its name and its numeric data
//! points (gauges, sums, histograms' count and sum) with their
//! attributes. A small reader of the protobuf wire format, bounded in
//! what it keeps; anything else in the message is skipped.

/// One number a client reported.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The metric's name, with `.count` or `.sum` for a histogram's.
    pub name: String,
    /// The data point's attributes (and the resource's), as strings.
    pub attributes: Vec<(String, String)>,
    pub value: f64,
}

/// Why a payload is not OTLP metrics.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// The wire types of protobuf.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// Fields are read until the slice ends; nesting is bounded by the message
/// shapes below (no recursion on input).
struct Reader<'a> {
    buf: &'a [u8],
}

enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }

    fn varint(&mut self) -> Result<u64, Malformed> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or(Malformed("truncated varint"))?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Malformed("varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        if self.buf.len() < n {
            return Err(Malformed("truncated field"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field's number and value, `None` at the end.
    fn field(&mut self) -> Result<Option<(u32, Value<'a>)>, Malformed> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| Malformed("field number too large"))?;
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.varint()?),
            FIXED64 => {
                let b = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            LEN => {
                let n =
                    usize::try_from(self.varint()?).map_err(|_| Malformed("length too large"))?;
                Value::Bytes(self.take(n)?)
            }
            FIXED32 => {
                self.take(4)?;
                Value::Fixed32
            }
            _ => return Err(Malformed("unknown wire type")),
        };
        Ok(Some((number, value)))
    }

    /// Every length-delimited field `number`, and the rest skipped.
    fn each(
        buf: &'a [u8],
        number: u32,
        mut f: impl FnMut(&'a [u8]) -> Result<(), Malformed>,
    ) -> Result<(), Malformed> {
        let mut r = Reader::new(buf);
        while let Some((n, v)) = r.field()? {
            if let (true, Value::Bytes(b)) = (n == number, v) {
                f(b)?;
            }
        }
        Ok(())
    }
}

/// The most attributes kept per data point, the resource's included (the
/// rest are dropped).
pub const ATTRIBUTES_MAX: usize = 16;
/// The longest metric name, attribute key or attribute value kept (a
/// longer attribute is dropped, a metric with a longer name skipped).
pub const TEXT_BYTES_MAX: usize = 256;

/// What one decoded payload may hold at most.
struct Budget {
    points: usize,
    bytes: usize,
}

impl Budget {
    /// Takes room for `p`, or says there is none.
    fn take(&mut self, p: &Point) -> bool {
        let size = p.name.len()
            + p.attributes
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        if self.points == 0 || self.bytes < size {
            return false;
        }
        self.points -= 1;
        self.bytes -= size;
        true
    }
}

/// Reads a `MetricsData` message: every numeric data point, up to
/// `points_max` points of `bytes_max` bytes of names and attributes in all
/// (the rest are dropped: `Ok` with what was kept).
pub fn decode(buf: &[u8], points_max: usize, bytes_max: usize) -> Result<Vec<Point>, Malformed> {
    let mut out = Vec::new();
    let mut budget = Budget {
        points: points_max,
        bytes: bytes_max,
    };
    // MetricsData.resource_metrics = 1
    Reader::each(buf, 1, |rm| {
        // ResourceMetrics.resource = 1 (Resource.attributes = 1),
        // scope_metrics = 2 (ScopeMetrics.metrics = 2).
        let mut resource = Vec::new();
        Reader::each(rm, 1, |res| {
            Reader::each(res, 1, |kv| attribute(kv, &mut resource))
        })?;
        Reader::each(rm, 2, |sm| {
            Reader::each(sm, 2, |m| metric(m, &resource, &mut out, &mut budget))
        })
    })?;
    Ok(out)
}

/// A Metric: name = 1; gauge = 5, sum = 7 (NumberDataPoint lists at 1),
/// histogram = 9 (HistogramDataPoint list at 1); other kinds skipped. Two
/// passes over its fields (the name first), nothing collected between.
fn metric(
    buf: &[u8],
    resource: &[(String, String)],
    out: &mut Vec<Point>,
    budget: &mut Budget,
) -> Result<(), Malformed> {
    let mut name = None;
    let mut r = Reader::new(buf);
    while let Some((n, v)) = r.field()? {
        if let (1, Value::Bytes(b)) = (n, v) {
            name = Some(b);
        }
    }
    let Some(name) = name else {
        return Err(Malformed("a metric without a name"));
    };
    if name.len() > TEXT_BYTES_MAX {
        return Ok(());
    }
    let name = String::from_utf8_lossy(name).into_owned();
    let mut keep = |p: Point| {
        if budget.take(&p) {
            out.push(p);
        }
    };
    let mut r = Reader::new(buf);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            // NumberDataPoint: as_double = 4 (fixed64), as_int = 6
            // (sfixed64), attributes = 7.
            (5 | 7, Value::Bytes(b)) => Reader::each(b, 1, |p| {
                let mut attributes = resource.to_vec();
                let mut value = None;
                let mut r = Reader::new(p);
                while let Some((n, v)) = r.field()? {
                    match (n, v) {
                        (4, Value::Fixed64(bits)) => value = Some(f64::from_bits(bits)),
                        (6, Value::Fixed64(bits)) => value = Some(bits as i64 as f64),
                        (7, Value::Bytes(kv)) => attribute(kv, &mut attributes)?,
                        _ => {}
                    }
                }
                if let Some(value) = value {
                    keep(Point {
                        name: name.clone(),
                        attributes,
                        value,
                    });
                }
                Ok(())
            })?,
            // HistogramDataPoint: count = 4 (fixed64), sum = 5 (double),
            // attributes = 9.
            (9, Value::Bytes(b)) => Reader::each(b, 1, |p| {
                let mut attributes = resource.to_vec();
                let (mut count, mut sum) = (None, None);
                let mut r = Reader::new(p);
                while let Some((n, v)) = r.field()? {
                    match (n, v) {
                        (4, Value::Fixed64(c)) => count = Some(c as f64),
                        (5, Value::Fixed64(bits)) => sum = Some(f64::from_bits(bits)),
                        (9, Value::Bytes(kv)) => attribute(kv, &mut attributes)?,
                        _ => {}
                    }
                }
                for (suffix, v) in [("count", count), ("sum", sum)] {
                    if let Some(value) = v {
                        keep(Point {
                            name: format!("{name}.{suffix}"),
                            attributes: attributes.clone(),
                            value,
                        });
                    }
                }
                Ok(())
            })?,
            _ => {}
        }
    }
    Ok(())
}

/// A KeyValue (key = 1, value = 2: AnyValue with string = 1, bool = 2,
/// int = 3, double = 4); kept while under [`ATTRIBUTES_MAX`].
fn attribute(buf: &[u8], out: &mut Vec<(String, String)>) -> Result<(), Malformed> {
    let (mut key, mut value) = (None, None);
    let mut r = Reader::new(buf);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (1, Value::Bytes(k)) if k.len() <= TEXT_BYTES_MAX => {
                key = Some(String::from_utf8_lossy(k).into_owned())
            }
            (2, Value::Bytes(any)) => {
                let mut a = Reader::new(any);
                while let Some((n, v)) = a.field()? {
                    value = match (n, v) {
                        (1, Value::Bytes(s)) if s.len() <= TEXT_BYTES_MAX => {
                            Some(String::from_utf8_lossy(s).into_owned())
                        }
                        (2, Value::Varint(b)) => Some((b != 0).to_string()),
                        (3, Value::Varint(i)) => Some((i as i64).to_string()),
                        (4, Value::Fixed64(bits)) => Some(f64::from_bits(bits).to_string()),
                        _ => value,
                    };
                }
            }
            _ => {}
        }
    }
    if let (Some(k), Some(v)) = (key, value) {
        let fits = k.len() <= TEXT_BYTES_MAX && v.len() <= TEXT_BYTES_MAX;
        if fits && out.len() < ATTRIBUTES_MAX {
            out.push((k, v));
        }
    }
    Ok(())
}

/// Writing OTLP, for tests: the same subset.
#[cfg(test)]
pub mod write {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    pub fn bytes(number: u32, b: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(number) << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    pub fn fixed64(number: u32, v: u64, out: &mut Vec<u8>) {
        varint(u64::from(number) << 3 | 1, out);
        out.extend_from_slice(&v.to_le_bytes());
    }

    pub fn attr(key: &str, value: &str) -> Vec<u8> {
        let mut any = Vec::new();
        bytes(1, value.as_bytes(), &mut any);
        let mut kv = Vec::new();
        bytes(1, key.as_bytes(), &mut kv);
        bytes(2, &any, &mut kv);
        kv
    }

    /// MetricsData with one gauge `name` = `value` and attribute `attr`.
    pub fn gauge(name: &str, value: f64, attr_kv: (&str, &str)) -> Vec<u8> {
        let mut point = Vec::new();
        fixed64(4, value.to_bits(), &mut point);
        bytes(7, &attr(attr_kv.0, attr_kv.1), &mut point);
        let mut gauge = Vec::new();
        bytes(1, &point, &mut gauge);
        let mut metric = Vec::new();
        bytes(1, name.as_bytes(), &mut metric);
        bytes(5, &gauge, &mut metric);
        let mut scope = Vec::new();
        bytes(2, &metric, &mut scope);
        let mut resource = Vec::new();
        bytes(1, &attr("client_rack", "r1"), &mut resource);
        let mut rm = Vec::new();
        bytes(1, &resource, &mut rm);
        bytes(2, &scope, &mut rm);
        let mut data = Vec::new();
        bytes(1, &rm, &mut data);
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gauge_is_read_with_its_attributes() {
        let data = write::gauge(
            "org.apache.kafka.producer.request.latency.avg",
            12.5,
            ("node_id", "1"),
        );
        let points = decode(&data, 100, 1 << 20).unwrap();
        assert_eq!(
            points,
            vec![Point {
                name: "org.apache.kafka.producer.request.latency.avg".into(),
                attributes: vec![
                    ("client_rack".into(), "r1".into()),
                    ("node_id".into(), "1".into())
                ],
                value: 12.5,
            }]
        );
        assert!(
            decode(&data, 0, 1 << 20).unwrap().is_empty(),
            "bounded by points"
        );
        assert!(
            decode(&data, 100, 10).unwrap().is_empty(),
            "bounded by bytes"
        );
        let long = write::gauge(&"m".repeat(TEXT_BYTES_MAX + 1), 1.0, ("k", "v"));
        assert!(
            decode(&long, 100, 1 << 20).unwrap().is_empty(),
            "a name too long is skipped"
        );
    }

    #[test]
    fn hostile_payloads_are_refused_not_panicked_on() {
        let data = write::gauge("m", 1.0, ("k", "v"));
        for cut in 0..data.len() {
            let _ = decode(&data[..cut], 100, 1 << 20);
        }
        for bad in [
            &[0xff; 12][..],
            &[0x0b],
            &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f],
        ] {
            assert!(decode(bad, 100, 1 << 20).is_err());
        }
        let mut x = 0x9e37_79b9_u32;
        for _ in 0..2000 {
            let junk: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = decode(&junk, 100, 1 << 20);
        }
    }
}
