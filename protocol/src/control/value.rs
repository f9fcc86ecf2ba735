//! Values as the wire carries them: hex registers, vCPU selections.

use super::*;

/// A register or an address: a `"0x…"` string on the wire, since a u64
/// does not fit a double; a number is read too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64_or_hex::deserialize(d).map(Hex)
    }
}

/// Which vCPUs a command applies to: a number or `"all"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VcpuSel {
    #[default]
    All,
    One(u32),
}

impl Serialize for VcpuSel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            VcpuSel::All => s.serialize_str("all"),
            VcpuSel::One(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for VcpuSel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) if s == "all" => Ok(VcpuSel::All),
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(VcpuSel::One)
                .ok_or_else(|| serde::de::Error::custom("vcpu: not a vCPU number")),
            _ => Err(serde::de::Error::custom(
                "vcpu: expected a number or \"all\"",
            )),
        }
    }
}

impl std::str::FromStr for VcpuSel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(VcpuSel::All);
        }
        s.parse()
            .map(VcpuSel::One)
            .map_err(|_| format!("{s:?} is not a vCPU number or \"all\""))
    }
}

/// A u64 given as a JSON number or as a string (`"0x…"` or decimal), since
/// virtual addresses do not fit a double and people write them in hex.
pub mod u64_or_hex {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| serde::de::Error::custom("expected an unsigned integer")),
            Value::String(s) => super::parse_u64(&s).map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "expected an unsigned integer or a \"0x…\" string",
            )),
        }
    }
}

/// `0x…` hex or decimal.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16),
        None => t.replace('_', "").parse(),
    };
    r.map_err(|_| format!("{s:?} is not a decimal or 0x-hex number"))
}
