//! The Kafka protocol's field encodings, for the message types generated
//! by `scripts/gen-kafka-messages` ([`super::generated`]): each Rust type
//! of a field knows how it is written at a version, flexible (compact
//! lengths, KIP-482) or not. Decoding never panics and never allocates
//! more than the bytes at hand can fill.

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::{BrokerId, GroupId, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// The version a message is encoded at, and whether it is flexible.
#[derive(Clone, Copy, Debug)]
pub struct Ver {
    pub version: i16,
    pub flexible: bool,
}

/// A field type's encoding.
pub trait Wire: Sized {
    fn put<B: ByteBufMut>(&self, b: &mut B, v: Ver) -> Result<()>;
    fn size(&self, v: Ver) -> usize;
    fn get<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Self>;
}

/// A field type that may be null, and how its null is written.
pub trait Nullable: Sized {
    fn put_opt<B: ByteBufMut>(x: Option<&Self>, b: &mut B, v: Ver) -> Result<()>;
    fn size_opt(x: Option<&Self>, v: Ver) -> usize;
    fn get_opt<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Option<Self>>;
}

impl<T: Nullable> Wire for Option<T> {
    fn put<B: ByteBufMut>(&self, b: &mut B, v: Ver) -> Result<()> {
        T::put_opt(self.as_ref(), b, v)
    }
    fn size(&self, v: Ver) -> usize {
        T::size_opt(self.as_ref(), v)
    }
    fn get<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Self> {
        T::get_opt(b, v)
    }
}

macro_rules! fixed {
    ($($t:ty: $put:ident, $get:ident, $n:expr;)*) => {$(
        impl Wire for $t {
            fn put<B: ByteBufMut>(&self, b: &mut B, _: Ver) -> Result<()> {
                b.$put(*self);
                Ok(())
            }
            fn size(&self, _: Ver) -> usize {
                $n
            }
            fn get<B: ByteBuf>(b: &mut B, _: Ver) -> Result<Self> {
                if b.remaining() < $n {
                    bail!("truncated {}", stringify!($t));
                }
                Ok(b.$get())
            }
        }
    )*};
}

fixed! {
    i8: put_i8, get_i8, 1;
    i16: put_i16, get_i16, 2;
    u16: put_u16, get_u16, 2;
    i32: put_i32, get_i32, 4;
    u32: put_u32, get_u32, 4;
    i64: put_i64, get_i64, 8;
    f64: put_f64, get_f64, 8;
}

impl Wire for bool {
    fn put<B: ByteBufMut>(&self, b: &mut B, _: Ver) -> Result<()> {
        b.put_u8(*self as u8);
        Ok(())
    }
    fn size(&self, _: Ver) -> usize {
        1
    }
    fn get<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Self> {
        Ok(i8::get(b, v)? != 0)
    }
}

impl Wire for Uuid {
    fn put<B: ByteBufMut>(&self, b: &mut B, _: Ver) -> Result<()> {
        b.put_slice(self.as_bytes());
        Ok(())
    }
    fn size(&self, _: Ver) -> usize {
        16
    }
    fn get<B: ByteBuf>(b: &mut B, _: Ver) -> Result<Self> {
        let bytes = b.try_get_bytes(16)?;
        Ok(Uuid::from_slice(&bytes)?)
    }
}

/// An unsigned varint (KIP-482).
pub fn put_uvarint<B: ByteBufMut>(b: &mut B, mut x: u32) {
    while x >= 0x80 {
        b.put_u8((x as u8) | 0x80);
        x >>= 7;
    }
    b.put_u8(x as u8);
}

pub fn uvarint_size(x: u32) -> usize {
    match x {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

pub fn get_uvarint<B: ByteBuf>(b: &mut B) -> Result<u32> {
    let mut x = 0u32;
    for i in 0..5 {
        if !b.has_remaining() {
            bail!("truncated varint");
        }
        let byte = b.get_u8() as u32;
        x |= (byte & 0x7f) << (i * 7);
        if byte < 0x80 {
            return Ok(x);
        }
    }
    bail!("varint longer than 5 bytes")
}

/// A length prefix: compact (n + 1, 0 for null) or fixed (i16 for
/// strings, i32 otherwise; -1 for null).
fn put_len<B: ByteBufMut>(b: &mut B, v: Ver, len: Option<usize>, short: bool) -> Result<()> {
    match (v.flexible, len) {
        (true, None) => put_uvarint(b, 0),
        (true, Some(n)) => put_uvarint(b, u32::try_from(n + 1)?),
        (false, None) if short => b.put_i16(-1),
        (false, None) => b.put_i32(-1),
        (false, Some(n)) if short => b.put_i16(i16::try_from(n)?),
        (false, Some(n)) => b.put_i32(i32::try_from(n)?),
    }
    Ok(())
}

fn len_size(v: Ver, len: Option<usize>, short: bool) -> usize {
    match (v.flexible, len) {
        (true, None) => 1,
        (true, Some(n)) => uvarint_size(n as u32 + 1),
        (false, _) if short => 2,
        (false, _) => 4,
    }
}

fn get_len<B: ByteBuf>(b: &mut B, v: Ver, short: bool) -> Result<Option<usize>> {
    let n: i64 = if v.flexible {
        get_uvarint(b)? as i64 - 1
    } else if short {
        i16::get(b, v)? as i64
    } else {
        i32::get(b, v)? as i64
    };
    Ok(if n < 0 { None } else { Some(n as usize) })
}

fn get_bytes<B: ByteBuf>(b: &mut B, n: usize) -> Result<Bytes> {
    if b.remaining() < n {
        bail!("a length of {n} beyond the {} bytes left", b.remaining());
    }
    Ok(b.try_get_bytes(n)?)
}

fn not_null<T>(x: Option<T>, what: &str) -> Result<T> {
    match x {
        Some(x) => Ok(x),
        None => bail!("a null {what} where none may be"),
    }
}

impl Nullable for StrBytes {
    fn put_opt<B: ByteBufMut>(x: Option<&Self>, b: &mut B, v: Ver) -> Result<()> {
        put_len(b, v, x.map(|s| s.len()), true)?;
        if let Some(s) = x {
            b.put_slice(s.as_bytes());
        }
        Ok(())
    }
    fn size_opt(x: Option<&Self>, v: Ver) -> usize {
        let n = x.map(|s| s.len());
        len_size(v, n, true) + n.unwrap_or(0)
    }
    fn get_opt<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Option<Self>> {
        match get_len(b, v, true)? {
            None => Ok(None),
            Some(n) => Ok(Some(StrBytes::from_utf8(get_bytes(b, n)?)?)),
        }
    }
}

impl Nullable for Bytes {
    fn put_opt<B: ByteBufMut>(x: Option<&Self>, b: &mut B, v: Ver) -> Result<()> {
        put_len(b, v, x.map(|s| s.len()), false)?;
        if let Some(s) = x {
            b.put_slice(s);
        }
        Ok(())
    }
    fn size_opt(x: Option<&Self>, v: Ver) -> usize {
        let n = x.map(|s| s.len());
        len_size(v, n, false) + n.unwrap_or(0)
    }
    fn get_opt<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Option<Self>> {
        match get_len(b, v, false)? {
            None => Ok(None),
            Some(n) => Ok(Some(get_bytes(b, n)?)),
        }
    }
}

impl<T: Wire> Nullable for Vec<T> {
    fn put_opt<B: ByteBufMut>(x: Option<&Self>, b: &mut B, v: Ver) -> Result<()> {
        put_len(b, v, x.map(Vec::len), false)?;
        for e in x.into_iter().flatten() {
            e.put(b, v)?;
        }
        Ok(())
    }
    fn size_opt(x: Option<&Self>, v: Ver) -> usize {
        let n = x.map(Vec::len);
        len_size(v, n, false) + x.into_iter().flatten().map(|e| e.size(v)).sum::<usize>()
    }
    fn get_opt<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Option<Self>> {
        let Some(n) = get_len(b, v, false)? else {
            return Ok(None);
        };
        // Every element takes at least a byte: no more room than that.
        if n > b.remaining() {
            bail!("an array of {n} elements in {} bytes", b.remaining());
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(T::get(b, v)?);
        }
        Ok(Some(out))
    }
}

macro_rules! non_null {
    ($($t:ty: $what:literal),*) => {$(
        impl Wire for $t {
            fn put<B: ByteBufMut>(&self, b: &mut B, v: Ver) -> Result<()> {
                // Written as the nullable form's non-null value.
                <$t as Nullable>::put_opt(Some(self), b, v)
            }
            fn size(&self, v: Ver) -> usize {
                <$t as Nullable>::size_opt(Some(self), v)
            }
            fn get<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Self> {
                not_null(<$t as Nullable>::get_opt(b, v)?, $what)
            }
        }
    )*};
}

non_null!(StrBytes: "string", Bytes: "bytes");

/// kafka-protocol's newtypes of entity-typed fields (topic names, group
/// ids, ...), written as the type they wrap.
macro_rules! newtype {
    ($($t:ident($inner:ty)),*) => {$(
        impl Wire for $t {
            fn put<B: ByteBufMut>(&self, b: &mut B, v: Ver) -> Result<()> {
                self.0.put(b, v)
            }
            fn size(&self, v: Ver) -> usize {
                self.0.size(v)
            }
            fn get<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Self> {
                <$inner as Wire>::get(b, v).map($t)
            }
        }
    )*};
}

newtype!(
    TopicName(StrBytes),
    GroupId(StrBytes),
    TransactionalId(StrBytes),
    BrokerId(i32),
    ProducerId(i64)
);

/// The string newtypes may be null too.
macro_rules! nullable_newtype {
    ($($t:ident),*) => {$(
        impl Nullable for $t {
            fn put_opt<B: ByteBufMut>(x: Option<&Self>, b: &mut B, v: Ver) -> Result<()> {
                StrBytes::put_opt(x.map(|x| &x.0), b, v)
            }
            fn size_opt(x: Option<&Self>, v: Ver) -> usize {
                StrBytes::size_opt(x.map(|x| &x.0), v)
            }
            fn get_opt<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Option<Self>> {
                Ok(StrBytes::get_opt(b, v)?.map($t))
            }
        }
    )*};
}

nullable_newtype!(TopicName, GroupId, TransactionalId);

impl<T: Wire> Wire for Vec<T> {
    fn put<B: ByteBufMut>(&self, b: &mut B, v: Ver) -> Result<()> {
        put_len(b, v, Some(self.len()), false)?;
        for e in self {
            e.put(b, v)?;
        }
        Ok(())
    }
    fn size(&self, v: Ver) -> usize {
        len_size(v, Some(self.len()), false) + self.iter().map(|e| e.size(v)).sum::<usize>()
    }
    fn get<B: ByteBuf>(b: &mut B, v: Ver) -> Result<Self> {
        not_null(<Vec<T> as Nullable>::get_opt(b, v)?, "array")
    }
}

/// A generated struct inside a message: written whole at the message's
/// version; where it may be null, a -1 byte stands for null and a 1
/// precedes it.
#[macro_export]
macro_rules! wire_struct {
    ($t:ty) => {
        impl $crate::api::wire::Wire for $t {
            fn put<B: kafka_protocol::protocol::buf::ByteBufMut>(
                &self,
                b: &mut B,
                v: $crate::api::wire::Ver,
            ) -> anyhow::Result<()> {
                kafka_protocol::protocol::Encodable::encode(self, b, v.version)
            }
            fn size(&self, v: $crate::api::wire::Ver) -> usize {
                kafka_protocol::protocol::Encodable::compute_size(self, v.version).unwrap_or(0)
            }
            fn get<B: kafka_protocol::protocol::buf::ByteBuf>(
                b: &mut B,
                v: $crate::api::wire::Ver,
            ) -> anyhow::Result<Self> {
                kafka_protocol::protocol::Decodable::decode(b, v.version)
            }
        }

        impl $crate::api::wire::Nullable for $t {
            fn put_opt<B: kafka_protocol::protocol::buf::ByteBufMut>(
                x: Option<&Self>,
                b: &mut B,
                v: $crate::api::wire::Ver,
            ) -> anyhow::Result<()> {
                match x {
                    None => bytes::BufMut::put_i8(b, -1),
                    Some(x) => {
                        bytes::BufMut::put_i8(b, 1);
                        $crate::api::wire::Wire::put(x, b, v)?;
                    }
                }
                Ok(())
            }
            fn size_opt(x: Option<&Self>, v: $crate::api::wire::Ver) -> usize {
                1 + x.map_or(0, |x| $crate::api::wire::Wire::size(x, v))
            }
            fn get_opt<B: kafka_protocol::protocol::buf::ByteBuf>(
                b: &mut B,
                v: $crate::api::wire::Ver,
            ) -> anyhow::Result<Option<Self>> {
                if <i8 as $crate::api::wire::Wire>::get(b, v)? < 0 {
                    return Ok(None);
                }
                Ok(Some($crate::api::wire::Wire::get(b, v)?))
            }
        }
    };
}
