#!/usr/bin/env python3
"""Generates Rust codecs for Kafka messages from Apache Kafka's own JSON
message specs (common/message/*.json inside the kafka-clients jar), for the
messages kafka-protocol 0.18 lacks. Each generated type implements
kafka-protocol's Encodable, Decodable, Message and HeaderVersion traits (and
a request its Request-like constants), so it plugs into the API registry as
the library's own types do.

Usage: gen.py SPECS_DIR KAFKA_VERSION OUT_DIR MESSAGE...
  (run.sh extracts the specs from the jar and names the messages)

Covered: every primitive type of the specs (bool, int8, int16, uint16,
int32, uint32, int64, float64, uuid, string, bytes, records), arrays,
structs (inline and common), nullable fields, per-version presence,
flexible versions (compact encodings, tagged fields: known ones by tag,
unknown ones kept). A field with an entity type kafka-protocol has a
newtype for (topic name, group id, transactional id, broker id, producer
id) gets that newtype, so a generated message is a drop-in replacement for
kafka-protocol's own type of it; other strings are StrBytes.
"""

import json
import os
import re
import sys

PRIM = {
    "bool": ("bool", "types::Boolean", "false"),
    "int8": ("i8", "types::Int8", "0"),
    "int16": ("i16", "types::Int16", "0"),
    "uint16": ("u16", "types::UInt16", "0"),
    "int32": ("i32", "types::Int32", "0"),
    "uint32": ("u32", "types::UInt32", "0"),
    "int64": ("i64", "types::Int64", "0"),
    "float64": ("f64", "types::Float64", "0.0"),
    "uuid": ("Uuid", "types::Uuid", "Uuid::nil()"),
}


# entityType -> (newtype, the spec type it wraps), as kafka-protocol 0.18 has them.
ENTITY = {
    "topicName": ("TopicName", "string"),
    "groupId": ("GroupId", "string"),
    "transactionalId": ("TransactionalId", "string"),
    "brokerId": ("BrokerId", "int32"),
    "producerId": ("ProducerId", "int64"),
}


def entity(f, base):
    """The kafka-protocol newtype of field `f` whose element type is
    `base`, or None."""
    e = ENTITY.get(f.get("entityType"))
    return e[0] if e and e[1] == base else None


def load(path):
    text = open(path).read()
    text = re.sub(r"^\s*//.*$", "", text, flags=re.M)
    return json.loads(text)


class Versions:
    """A spec's version range ("0+", "1-3", "2", "none")."""

    def __init__(self, s, hi=32767):
        s = (s or "none").strip()
        if s == "none":
            self.lo, self.hi = 1, 0
        elif s.endswith("+"):
            self.lo, self.hi = int(s[:-1]), hi
        elif "-" in s:
            a, b = s.split("-")
            self.lo, self.hi = int(a), int(b)
        else:
            self.lo = self.hi = int(s)

    def empty(self):
        return self.lo > self.hi

    def cond(self, var="version"):
        """A Rust condition: `var` is in the range (None: always)."""
        if self.empty():
            return "false"
        if self.lo <= 0 and self.hi >= 32767:
            return None
        if self.hi >= 32767:
            return f"{var} >= {self.lo}"
        if self.lo == self.hi:
            return f"{var} == {self.lo}"
        return f"({self.lo}..={self.hi}).contains(&{var})"


def snake(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    out = s.lower()
    return {"type": "r#type", "match": "r#match"}.get(out, out)


def rust_default(field, rtype, nullable):
    d = field.get("default")
    if nullable and (d is None or d == "null"):
        return "None"
    base = field["type"]
    newtype = entity(field, base)
    if newtype:
        inner = rust_default({k: v for k, v in field.items() if k != "entityType"}, rtype, nullable)
        if inner in ("None", "Default::default()"):
            return inner
        if inner.startswith("Some("):
            return f"Some({newtype}({inner[5:-1]}))"
        return f"{newtype}({inner})"
    if base in PRIM and d is not None and d != "null":
        if base == "bool":
            v = str(d).lower()
        else:
            v = str(d)
        return f"Some({v})" if nullable else v
    if base in PRIM:
        return "None" if nullable else PRIM[base][2]
    if base == "string" and d not in (None, "", "null"):
        v = f'StrBytes::from_static_str("{d}")'
        return f"Some({v})" if nullable else v
    return "None" if nullable else "Default::default()"


class Gen:
    def __init__(self, spec, version):
        self.spec = spec
        self.kafka = version
        self.valid = Versions(spec["validVersions"])
        self.flexible = Versions(spec.get("flexibleVersions", "none"))
        self.structs = []  # (name, fields, versions)
        self.common = {c["name"]: c for c in spec.get("commonStructs", [])}
        self.done = set()

    # ---- types -----------------------------------------------------------

    def field_info(self, f):
        """(rust type, element info) for a field."""
        t = f["type"]
        nullable = not Versions(f.get("nullableVersions", "none")).empty()
        if t.startswith("[]"):
            inner = t[2:]
            if entity(f, inner):
                elem = entity(f, inner)
            elif inner in PRIM:
                elem = PRIM[inner][0]
            elif inner == "string":
                elem = "StrBytes"
            else:
                elem = inner
                self.want_struct(inner, f)
            rt = f"Vec<{elem}>"
        elif entity(f, t):
            rt = entity(f, t)
        elif t in PRIM:
            rt = PRIM[t][0]
        elif t == "string":
            rt = "StrBytes"
        elif t in ("bytes", "records"):
            rt = "Bytes"
        else:
            rt = t
            self.want_struct(t, f)
        return (f"Option<{rt}>" if nullable else rt), nullable

    def want_struct(self, name, f):
        if name in self.done:
            return
        self.done.add(name)
        fields = f.get("fields") or self.common.get(name, {}).get("fields")
        if fields is None:
            raise SystemExit(f"no fields for struct {name}")
        self.structs.append((name, fields))

    def codec(self, f, flex):
        """The kafka-protocol encoder expression for a field at a flexible
        or non-flexible version."""
        t = f["type"]
        nullable = not Versions(f.get("nullableVersions", "none")).empty()

        def scalar(tt, in_array=False):
            if tt in PRIM:
                return PRIM[tt][1]
            if tt == "string":
                return "types::CompactString" if flex else "types::String"
            if tt in ("bytes", "records"):
                return "types::CompactBytes" if flex else "types::Bytes"
            if nullable and not in_array:
                return "types::OptionStruct { version }"
            return "types::Struct { version }"

        if t.startswith("[]"):
            inner = scalar(t[2:], True)
            return f"types::CompactArray({inner})" if flex else f"types::Array({inner})"
        return scalar(t)

    # ---- output ----------------------------------------------------------

    def emit_struct(self, name, fields, top):
        out = []
        doc = self.spec["name"] if top else f"{name}, part of {self.spec['name']}"
        out.append(f"/// {doc} (Apache Kafka {self.kafka}, versions {self.spec['validVersions']}).")
        out.append("#[non_exhaustive]")
        out.append("#[derive(Debug, Clone, PartialEq)]")
        out.append(f"pub struct {name} {{")
        infos = []
        for f in fields:
            rt, nullable = self.field_info(f)
            infos.append((f, rt, nullable))
            about = f.get("about", "").replace("\n", " ")
            out.append(f"    /// {about} (versions {f['versions']})")
            out.append(f"    pub {snake(f['name'])}: {rt},")
        out.append("    /// Tagged fields this code does not know, kept as they came.")
        out.append("    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,")
        out.append("}")
        out.append("")
        # builders
        out.append(f"impl {name} {{")
        for f, rt, _ in infos:
            n = snake(f["name"])
            setter = n.removeprefix("r#")
            out.append(f"    pub fn with_{setter}(mut self, value: {rt}) -> Self {{")
            out.append(f"        self.{n} = value;")
            out.append("        self")
            out.append("    }")
        out.append("}")
        out.append("")
        # default
        out.append(f"impl Default for {name} {{")
        out.append("    fn default() -> Self {")
        out.append(f"        {name} {{")
        for f, rt, nullable in infos:
            out.append(f"            {snake(f['name'])}: {rust_default(f, rt, nullable)},")
        out.append("            unknown_tagged_fields: BTreeMap::new(),")
        out.append("        }")
        out.append("    }")
        out.append("}")
        out.append("")
        out += self.emit_encode(name, infos)
        out += self.emit_decode(name, infos)
        return out

    def present(self, f):
        return Versions(f["versions"])

    def tagged(self, f):
        return "tag" in f

    def emit_encode(self, name, infos):
        flex = self.flexible.cond() or "true"
        out = [f"impl Encodable for {name} {{"]
        for kind in ("encode", "compute_size"):
            if kind == "encode":
                out.append("    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {")
            else:
                out.append("    fn compute_size(&self, version: i16) -> Result<usize> {")
                out.append("        let mut total = 0usize;")
            out.append(f"        let v = Ver {{ version, flexible: {flex} }};")
            for f, rt, nullable in infos:
                if self.tagged(f):
                    continue
                n = snake(f["name"])
                cond = self.present(f).cond()
                stmt = f"self.{n}.put(buf, v)?;" if kind == "encode" else f"total += self.{n}.size(v);"
                if cond:
                    out.append(f"        if {cond} {{")
                    out.append("            " + stmt)
                    out.append("        }")
                else:
                    out.append("        " + stmt)
            tagged = [(f, rt, nullable) for f, rt, nullable in infos if self.tagged(f)]
            out.append("        if v.flexible {")
            out.append("            let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();")
            for f, rt, nullable in tagged:
                n = snake(f["name"])
                cond = Versions(f.get("taggedVersions", f["versions"])).cond() or "true"
                dflt = rust_default(f, rt, nullable)
                out.append(f"            if {cond} && self.{n} != {dflt} {{")
                out.append("                let mut t = Vec::new();")
                out.append(f"                self.{n}.put(&mut t, v)?;")
                out.append(f"                tags.push(({f['tag']}, t));")
                out.append("            }")
            out.append("            for (tag, t) in &self.unknown_tagged_fields {")
            out.append("                tags.push((*tag as u32, t.to_vec()));")
            out.append("            }")
            out.append("            tags.sort_by_key(|t| t.0);")
            if kind == "encode":
                out.append("            put_uvarint(buf, tags.len() as u32);")
                out.append("            for (tag, t) in tags {")
                out.append("                put_uvarint(buf, tag);")
                out.append("                put_uvarint(buf, t.len() as u32);")
                out.append("                buf.put_slice(&t);")
                out.append("            }")
            else:
                out.append("            total += uvarint_size(tags.len() as u32);")
                out.append("            for (tag, t) in tags {")
                out.append("                total += uvarint_size(tag) + uvarint_size(t.len() as u32) + t.len();")
                out.append("            }")
            out.append("        }")
            out.append("        Ok(())" if kind == "encode" else "        Ok(total)")
            out.append("    }")
        out.append("}")
        out.append("")
        return out

    def emit_decode(self, name, infos):
        flex = self.flexible.cond() or "true"
        out = [f"impl Decodable for {name} {{"]
        out.append("    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {")
        out.append(f"        let v = Ver {{ version, flexible: {flex} }};")
        out.append(f"        let mut this = {name}::default();")
        for f, rt, nullable in infos:
            if self.tagged(f):
                continue
            n = snake(f["name"])
            cond = self.present(f).cond()
            stmt = f"this.{n} = Wire::get(buf, v)?;"
            if cond:
                out.append(f"        if {cond} {{")
                out.append("            " + stmt)
                out.append("        }")
            else:
                out.append("        " + stmt)
        out.append("        if v.flexible {")
        out.append("            let count = get_uvarint(buf)?;")
        out.append("            for _ in 0..count {")
        out.append("                let tag = get_uvarint(buf)?;")
        out.append("                let size = get_uvarint(buf)? as usize;")
        out.append("                if buf.remaining() < size {")
        out.append("                    anyhow::bail!(\"a tagged field of {size} bytes beyond the end\");")
        out.append("                }")
        out.append("                let mut value = buf.try_get_bytes(size)?;")
        out.append("                match tag {")
        for f, rt, nullable in infos:
            if not self.tagged(f):
                continue
            n = snake(f["name"])
            out.append(f"                    {f['tag']} => this.{n} = Wire::get(&mut value, v)?,")
        out.append("                    _ => {")
        out.append("                        this.unknown_tagged_fields.insert(tag as i32, value);")
        out.append("                    }")
        out.append("                }")
        out.append("            }")
        out.append("        }")
        out.append("        Ok(this)")
        out.append("    }")
        out.append("}")
        out.append("")
        out.append(f"crate::wire_struct!({name});")
        out.append("")
        return out

    def run(self):
        spec = self.spec
        name = spec["name"]
        body = self.emit_struct(name, spec["fields"], True)
        i = 0
        while i < len(self.structs):
            sname, fields = self.structs[i]
            body += self.emit_struct(sname, fields, False)
            i += 1
        head = [
            f"//! {name}: generated by scripts/gen-kafka-messages from Apache Kafka",
            f"//! {self.kafka}'s common/message/{name}.json (kafka-clients jar). Do not edit.",
            "",
            "#![allow(clippy::all, unused_mut, unused_variables, unused_imports)]",
            "",
            "use std::collections::BTreeMap;",
            "",
            "use anyhow::Result;",
            "use bytes::{Buf, BufMut, Bytes};",
            "use kafka_protocol::messages::{BrokerId, GroupId, ProducerId, TopicName, TransactionalId};",
            "use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};",
            "use kafka_protocol::protocol::{",
            "    Decodable, Encodable, HeaderVersion, Message, Request, StrBytes, VersionRange,",
            "};",
            "use uuid::Uuid;",
            "",
            "use crate::api::wire::{get_uvarint, put_uvarint, uvarint_size, Ver, Wire};",
            "",
        ]
        flex_lo = self.flexible.lo if not self.flexible.empty() else 32767
        tail = [
            f"impl Message for {name} {{",
            f"    const VERSIONS: VersionRange = VersionRange {{ min: {self.valid.lo}, max: {self.valid.hi} }};",
            "    const DEPRECATED_VERSIONS: Option<VersionRange> = None;",
            "}",
            "",
            f"impl HeaderVersion for {name} {{",
            "    fn header_version(version: i16) -> i16 {",
        ]
        if spec["type"] == "request":
            tail += [f"        if version >= {flex_lo} {{ 2 }} else {{ 1 }}"]
        else:
            tail += [f"        if version >= {flex_lo} {{ 1 }} else {{ 0 }}"]
        tail += ["    }", "}", ""]
        if spec["type"] == "request":
            response = name[: -len("Request")] + "Response"
            tail += [
                f"impl Request for {name} {{",
                f"    const KEY: i16 = {spec['apiKey']};",
                f"    type Response = super::{response};",
                "}",
                "",
            ]
        return "\n".join(head + body + tail)


def main():
    specs, version, out_dir, *names = sys.argv[1:]
    os.makedirs(out_dir, exist_ok=True)
    mods = []
    for n in names:
        spec = load(os.path.join(specs, f"{n}.json"))
        text = Gen(spec, version).run()
        mod = snake(n)
        with open(os.path.join(out_dir, f"{mod}.rs"), "w") as f:
            f.write(text)
        mods.append((mod, n))
    # Every request's stable versions (a latest version marked unstable is
    # left out, as Kafka's brokers leave it out of ApiVersions).
    table = []
    for fname in sorted(os.listdir(specs)):
        if not fname.endswith("Request.json"):
            continue
        spec = load(os.path.join(specs, fname))
        if spec.get("type") != "request" or Versions(spec["validVersions"]).empty():
            continue
        v = Versions(spec["validVersions"])
        hi = v.hi - 1 if spec.get("latestVersionUnstable") else v.hi
        table.append((spec["apiKey"], v.lo, hi, spec["name"][: -len("Request")]))
    table.sort()
    with open(os.path.join(out_dir, "kafka_versions.rs"), "w") as f:
        f.write(f"//! Apache Kafka {version}'s API keys and the versions its brokers list\n")
        f.write("//! (stable ones), from its JSON specs. Generated by scripts/gen-kafka-messages;\n")
        f.write("//! do not edit.\n\n")
        f.write(f"/// The Kafka release the table is from.\npub const KAFKA: &str = \"{version}\";\n\n")
        f.write("/// (key, min, max, name).\npub const VERSIONS: &[(i16, i16, i16, &str)] = &[\n")
        for key, lo, hi, n in table:
            f.write(f"    ({key}, {lo}, {hi}, \"{n}\"),\n")
        f.write("];\n")
    with open(os.path.join(out_dir, "mod.rs"), "w") as f:
        f.write("//! Kafka messages (or versions of them) kafka-protocol 0.18 lacks, generated by\n")
        f.write(f"//! scripts/gen-kafka-messages from Apache Kafka {version}'s JSON specs.\n")
        f.write("//! Do not edit; run scripts/gen-kafka-messages/run.sh.\n\n")
        f.write("pub mod kafka_versions;\n")
        for mod, n in mods:
            f.write(f"pub mod {mod};\n")
        f.write("\n")
        for mod, n in mods:
            f.write(f"pub use {mod}::{n};\n")
        f.write("\n#[cfg(test)]\nmod tests;\n")


if __name__ == "__main__":
    main()
