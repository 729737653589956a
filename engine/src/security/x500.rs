//! The principal of a TLS client: its certificate's subject as Kafka
//! names it (`X500Principal.getName()`, RFC 2253: the last RDN first,
//! `CN=alice,OU=eng,O=example`), then mapped by Kafka's
//! `ssl.principal.mapping.rules` (`RULE:pattern/replacement/[LU]`,
//! `DEFAULT`).
//!
//! The certificate has already been verified by rustls when this reads
//! it, but the reader still treats it as untrusted bytes: every length is
//! checked, nothing here panics on any input (fuzzed in `cargo test`).

use regex::Regex;

/// What this reads of a certificate.
#[derive(Debug, PartialEq, Eq)]
pub struct CertSummary {
    /// The subject in RFC 2253 form.
    pub subject: String,
    /// The end of its validity, seconds since the epoch.
    pub not_after: Option<i64>,
}

/// One DER element: tag, contents, and what follows it.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The subject and validity end of a DER certificate.
pub fn summarize(cert: &[u8]) -> Option<CertSummary> {
    let (0x30, cert, _) = tlv(cert)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(cert)? else {
        return None;
    };
    let mut rest = tbs;
    let (mut tag, _, mut next) = tlv(rest)?;
    if tag == 0xa0 {
        // [0] version
        rest = next;
        (tag, _, next) = tlv(rest)?;
    }
    if tag != 0x02 {
        return None; // serialNumber
    }
    rest = next;
    let (0x30, _, rest) = tlv(rest)? else {
        return None; // signature algorithm
    };
    let (0x30, _, rest) = tlv(rest)? else {
        return None; // issuer
    };
    let (0x30, validity, rest) = tlv(rest)? else {
        return None;
    };
    let (0x30, subject, _) = tlv(rest)? else {
        return None;
    };
    let not_after = tlv(validity)
        .and_then(|(_, _, r)| tlv(r))
        .and_then(|(tag, t, _)| der_time(tag, t));
    Some(CertSummary {
        subject: rfc2253(subject)?,
        not_after,
    })
}

/// UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ) as
/// seconds since the epoch.
fn der_time(tag: u8, t: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(t).ok()?.strip_suffix('Z')?;
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, s) = match (tag, s.len()) {
        (0x17, 12) => {
            let yy: i64 = s[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &s[2..])
        }
        (0x18, 14) => (s[..4].parse().ok()?, &s[4..]),
        _ => return None,
    };
    let field = |i: usize| -> Option<i64> { s[i..i + 2].parse().ok() };
    let (month, day, h, m, sec) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The keywords RFC 2253 output uses (Java's set); any other attribute is
/// written as its dotted OID with the value's DER in hex.
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn dotted_oid(b: &[u8]) -> Option<String> {
    let (&first, mut rest) = b.split_first()?;
    let mut out = format!(
        "{}.{}",
        (first / 40).min(2),
        first - (first / 40).min(2) * 40
    );
    while !rest.is_empty() {
        let mut v: u64 = 0;
        loop {
            let (&byte, r) = rest.split_first()?;
            rest = r;
            v = v.checked_mul(128)? | (byte & 0x7f) as u64;
            if byte & 0x80 == 0 {
                break;
            }
        }
        out.push('.');
        out.push_str(&v.to_string());
    }
    Some(out)
}

/// A directory string's text, for the string types certificates use.
fn string_value(tag: u8, v: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String, NumericString,
        // VisibleString
        0x0c | 0x13 | 0x16 | 0x12 | 0x1a => String::from_utf8(v.to_vec()).ok(),
        // TeletexString, read as Latin-1
        0x14 => Some(v.iter().map(|&b| b as char).collect()),
        // BMPString: UTF-16BE
        0x1e if v.len().is_multiple_of(2) => {
            let units: Vec<u16> = v
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        // UniversalString: UCS-4BE
        0x1c if v.len().is_multiple_of(4) => v
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    }
}

/// RFC 2253 §2.4 escaping of an attribute value.
fn escape(v: &str, out: &mut String) {
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
}

/// A Name (SEQUENCE OF RelativeDistinguishedName) in RFC 2253 form.
fn rfc2253(mut name: &[u8]) -> Option<String> {
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (0x31, mut set, rest) = tlv(name)? else {
            return None;
        };
        name = rest;
        let mut avas = Vec::new();
        while !set.is_empty() {
            let (0x30, ava, rest) = tlv(set)? else {
                return None;
            };
            set = rest;
            let (0x06, oid, value) = tlv(ava)? else {
                return None;
            };
            let (vtag, v, _) = tlv(value)?;
            let oid = dotted_oid(oid)?;
            let mut s = String::new();
            match (keyword(&oid), string_value(vtag, v)) {
                (Some(k), Some(text)) => {
                    s.push_str(k);
                    s.push('=');
                    escape(&text, &mut s);
                }
                (k, _) => {
                    s.push_str(k.unwrap_or(&oid));
                    s.push_str("=#");
                    let der_len = value.len() - tlv(value)?.2.len();
                    for b in &value[..der_len] {
                        s.push_str(&format!("{b:02x}"));
                    }
                }
            }
            avas.push(s);
        }
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// One of `ssl.principal.mapping.rules`.
#[derive(Debug)]
enum Rule {
    Default,
    Map {
        pattern: Regex,
        replacement: String,
        case: Option<Case>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Lower,
    Upper,
}

/// Kafka's `ssl.principal.mapping.rules`, parsed.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

/// Reads up to the next unescaped `/`; returns the text and what follows
/// the `/`. `\/` stands for `/`; other escapes are kept for the regex.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, n)) => {
                    out.push('\\');
                    out.push(n);
                }
                None => return None,
            },
            '/' => return Some((out, &s[i + 1..])),
            _ => out.push(c),
        }
    }
    None
}

impl PrincipalMapper {
    /// Parses `DEFAULT` and `RULE:pattern/replacement/[LU]` items separated
    /// by commas (a rule's pattern may itself hold commas).
    pub fn parse(rules: &str) -> Result<PrincipalMapper, String> {
        let mut out = Vec::new();
        let mut rest = rules.trim_start();
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("DEFAULT") {
                out.push(Rule::Default);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("RULE:") {
                let bad = || format!("rule {rest:?} is not RULE:pattern/replacement/[LU]");
                let (pattern, r) = until_slash(r).ok_or_else(bad)?;
                let (replacement, r) = until_slash(r).ok_or_else(bad)?;
                let (case, r) = match r.chars().next() {
                    Some('L') => (Some(Case::Lower), &r[1..]),
                    Some('U') => (Some(Case::Upper), &r[1..]),
                    _ => (None, r),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("rule pattern {pattern:?}: {e}"))?;
                out.push(Rule::Map {
                    pattern,
                    replacement,
                    case,
                });
                rest = r;
            } else {
                return Err(format!("{rest:?} is neither DEFAULT nor RULE:..."));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("expected ',' before {rest:?}")),
            }
        }
        if out.is_empty() {
            out.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules: out })
    }

    /// The principal name of subject `dn`: the first rule that matches the
    /// whole of it (`DEFAULT` keeps it as it is), `None` when none does
    /// (Kafka refuses the connection then).
    pub fn map(&self, dn: &str) -> Option<String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Some(dn.to_owned()),
                Rule::Map {
                    pattern,
                    replacement,
                    case,
                } => {
                    let Some(caps) = pattern.captures(dn) else {
                        continue;
                    };
                    let s = expand(replacement, &caps);
                    return Some(match case {
                        Some(Case::Lower) => s.to_lowercase(),
                        Some(Case::Upper) => s.to_uppercase(),
                        None => s,
                    });
                }
            }
        }
        None
    }
}

/// Java's replacement syntax: `$n` is group n (as many digits as name a
/// group), `${name}` a named group, `\c` the character c.
fn expand(replacement: &str, caps: &regex::Captures<'_>) -> String {
    let mut out = String::new();
    let b = replacement.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = replacement[i..].chars().next().unwrap_or('\0');
        if c == '\\' && i + 1 < b.len() {
            let n = replacement[i + 1..].chars().next().unwrap_or('\0');
            out.push(n);
            i += 1 + n.len_utf8();
        } else if c == '$' && b.get(i + 1) == Some(&b'{') {
            match replacement[i + 2..].find('}') {
                Some(end) => {
                    let name = &replacement[i + 2..i + 2 + end];
                    out.push_str(caps.name(name).map_or("", |m| m.as_str()));
                    i += 3 + end;
                }
                None => {
                    out.push('$');
                    i += 1;
                }
            }
        } else if c == '$' && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let mut n = (b[i + 1] - b'0') as usize;
            let mut j = i + 2;
            while j < b.len() && b[j].is_ascii_digit() {
                let m = n * 10 + (b[j] - b'0') as usize;
                if m >= caps.len() {
                    break;
                }
                n = m;
                j += 1;
            }
            out.push_str(caps.get(n).map_or("", |m| m.as_str()));
            i = j;
        } else {
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Name of (OID bytes, string tag, value) RDNs, one AVA each.
    fn name(rdns: &[(&[u8], u8, &str)]) -> Vec<u8> {
        fn wrap(tag: u8, body: &[u8]) -> Vec<u8> {
            let mut v = vec![tag];
            if body.len() < 128 {
                v.push(body.len() as u8);
            } else {
                v.push(0x82);
                v.extend_from_slice(&(body.len() as u16).to_be_bytes());
            }
            v.extend_from_slice(body);
            v
        }
        let mut seq = Vec::new();
        for (oid, tag, value) in rdns {
            let mut ava = wrap(0x06, oid);
            ava.extend(wrap(*tag, value.as_bytes()));
            seq.extend(wrap(0x31, &wrap(0x30, &ava)));
        }
        wrap(0x30, &seq)
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const OU: &[u8] = &[0x55, 0x04, 0x0b];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const EMAIL: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

    #[test]
    fn names_read_as_rfc2253_last_rdn_first() {
        let n = name(&[(O, 0x0c, "rutomq"), (OU, 0x13, "eng"), (CN, 0x0c, "alice")]);
        let (_, body, _) = tlv(&n).unwrap();
        assert_eq!(rfc2253(body).unwrap(), "CN=alice,OU=eng,O=rutomq");
        let n = name(&[(CN, 0x0c, "a,b+c \"d\""), (EMAIL, 0x16, "a@b")]);
        let (_, body, _) = tlv(&n).unwrap();
        assert_eq!(
            rfc2253(body).unwrap(),
            "1.2.840.113549.1.9.1=#1603614062,CN=a\\,b\\+c \\\"d\\\""
        );
        let n = name(&[(CN, 0x0c, " #lead trail ")]);
        let (_, body, _) = tlv(&n).unwrap();
        assert_eq!(rfc2253(body).unwrap(), "CN=\\ #lead trail\\ ");
    }

    #[test]
    fn der_times_read() {
        assert_eq!(der_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(der_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(der_time(0x18, b"20261203120000Z"), Some(1_796_299_200));
        assert_eq!(der_time(0x18, b"2026120312000Z"), None);
        assert_eq!(der_time(0x17, b"261303120000Z"), None);
    }

    #[test]
    fn mapping_rules_follow_kafka() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.map("CN=kafka1,OU=ServiceUsers,O=Org,C=US").as_deref(),
            Some("kafka1")
        );
        assert_eq!(
            m.map("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US")
                .as_deref(),
            Some("duke@javasoft")
        );
        assert_eq!(
            m.map("OU=JavaSoft,O=Sun Microsystems,C=US,cn=duke")
                .as_deref(),
            Some("DUKE")
        );
        assert_eq!(m.map("OU=nobody").as_deref(), Some("OU=nobody"));
        let strict = PrincipalMapper::parse("RULE:^CN=([^,]*)$/user-$1\\/x/").unwrap();
        assert_eq!(strict.map("CN=bob").as_deref(), Some("user-bob/x"));
        assert_eq!(strict.map("CN=bob,O=x"), None);
        assert_eq!(
            PrincipalMapper::parse("").unwrap().map("CN=a").as_deref(),
            Some("CN=a")
        );
        for bad in [
            "RULE:abc",
            "RULE:a/b",
            "SOMETHING",
            "DEFAULT x",
            "RULE:(/x/",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mangled_certificates_never_panic() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let n = name(&[(O, 0x0c, "rutomq"), (CN, 0x1e, "\0a\0b")]);
        let mut cert = vec![0x02, 0x01, 0x01, 0x30, 0x00, 0x30, 0x00, 0x30, 0x00];
        cert.extend(&n);
        let wrap = |body: &[u8]| {
            let mut v = vec![0x30, 0x82];
            v.extend_from_slice(&(body.len() as u16).to_be_bytes());
            v.extend_from_slice(body);
            v
        };
        let good = wrap(&wrap(&cert));
        assert_eq!(summarize(&good).unwrap().subject, "CN=ab,O=rutomq");
        for _ in 0..20_000 {
            let mut c = good.clone();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() as usize) % c.len();
                c[i] = next() as u8;
            }
            if next() % 3 == 0 {
                c.truncate((next() as usize) % c.len());
            }
            let _ = summarize(&c);
        }
    }
}
