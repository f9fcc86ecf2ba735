//! SPE sample-record packets: encoder, decoder and perf-style text.
//!
//! Layout follows Arm ARM D18.2 and matches what Linux perf
//! (`tools/perf/util/arm-spe-decoder`) decodes. Multi-byte payloads are
//! little-endian.

use core::fmt;

/// Longest packet: extended header (2 bytes) + 8-byte address payload.
pub const MAX_PACKET_LEN: usize = 10;

const HDR_PAD: u8 = 0x00;
const HDR_END: u8 = 0x01;
const HDR_TIMESTAMP: u8 = 0x71;
const HDR_EVENTS: u8 = 0x42;
const HDR_DATA_SOURCE: u8 = 0x43;
/// Mask selecting the fixed bits of the Events / Data-source headers (size in 5:4 is free).
const HDR_SIZED_MASK: u8 = 0xCF;
const HDR_CONTEXT: u8 = 0x64;
const HDR_OP_TYPE: u8 = 0x48;
const HDR_EXTENDED: u8 = 0x20;
const HDR_ADDRESS: u8 = 0xB0;
const HDR_COUNTER: u8 = 0x98;
const ADDR_BYTES_0_6: u64 = (1 << 56) - 1;

/// Payload size of a sized packet, header bits [5:4].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadLen {
    B1,
    B2,
    B4,
    B8,
}

impl PayloadLen {
    /// Payload size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            PayloadLen::B1 => 1,
            PayloadLen::B2 => 2,
            PayloadLen::B4 => 4,
            PayloadLen::B8 => 8,
        }
    }

    /// The two-bit size field (0..=3).
    pub const fn size_field(self) -> u8 {
        match self {
            PayloadLen::B1 => 0,
            PayloadLen::B2 => 1,
            PayloadLen::B4 => 2,
            PayloadLen::B8 => 3,
        }
    }

    /// Size encoded in bits [5:4] of a header byte.
    pub const fn from_header(hdr: u8) -> Self {
        match (hdr >> 4) & 3 {
            0 => PayloadLen::B1,
            1 => PayloadLen::B2,
            2 => PayloadLen::B4,
            _ => PayloadLen::B8,
        }
    }

    /// Mask of the payload bits that survive encoding at this size.
    pub const fn mask(self) -> u64 {
        match self {
            PayloadLen::B8 => u64::MAX,
            l => (1u64 << (8 * l.bytes())) - 1,
        }
    }
}

/// Address packet index (5 bits). Indices above 7 need the extended header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressIndex {
    Pc,
    BranchTarget,
    DataVirtual,
    DataPhysical,
    PrevBranchTarget,
    /// Any other index (5..=31). Values 0..=4 are normalised by [`AddressIndex::from_raw`];
    /// the encoder keeps only the low 5 bits.
    Other(u8),
}

impl AddressIndex {
    /// Canonical variant for a raw 5-bit index.
    pub const fn from_raw(idx: u8) -> Self {
        match idx & 0x1F {
            0 => AddressIndex::Pc,
            1 => AddressIndex::BranchTarget,
            2 => AddressIndex::DataVirtual,
            3 => AddressIndex::DataPhysical,
            4 => AddressIndex::PrevBranchTarget,
            n => AddressIndex::Other(n),
        }
    }

    /// Raw 5-bit index.
    pub const fn raw(self) -> u8 {
        match self {
            AddressIndex::Pc => 0,
            AddressIndex::BranchTarget => 1,
            AddressIndex::DataVirtual => 2,
            AddressIndex::DataPhysical => 3,
            AddressIndex::PrevBranchTarget => 4,
            AddressIndex::Other(n) => n & 0x1F,
        }
    }
}

/// Counter packet index (5 bits). Indices above 7 need the extended header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterIndex {
    /// 0x98
    TotalLatency,
    /// 0x99
    IssueLatency,
    /// 0x9A
    TranslationLatency,
    /// 0x9C (index 4)
    AltClockIssue,
    /// Any other index; normalised by [`CounterIndex::from_raw`], low 5 bits encoded.
    Other(u8),
}

impl CounterIndex {
    /// Canonical variant for a raw 5-bit index.
    pub const fn from_raw(idx: u8) -> Self {
        match idx & 0x1F {
            0 => CounterIndex::TotalLatency,
            1 => CounterIndex::IssueLatency,
            2 => CounterIndex::TranslationLatency,
            4 => CounterIndex::AltClockIssue,
            n => CounterIndex::Other(n),
        }
    }

    /// Raw 5-bit index.
    pub const fn raw(self) -> u8 {
        match self {
            CounterIndex::TotalLatency => 0,
            CounterIndex::IssueLatency => 1,
            CounterIndex::TranslationLatency => 2,
            CounterIndex::AltClockIssue => 4,
            CounterIndex::Other(n) => n & 0x1F,
        }
    }
}

/// Operation-type packet: the header class selects the variant, the byte is the payload.
/// See [`op`] for payload bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpType {
    /// Header 0x48.
    Other(u8),
    /// Header 0x49 (load, store, atomic).
    LoadStore(u8),
    /// Header 0x4A (branch or exception return).
    Branch(u8),
}

/// One SPE packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// 0x00
    Padding,
    /// 0x01
    End,
    /// 0x71, 8-byte generic-timer count.
    Timestamp(u64),
    /// 0b01SS0010; bits above `len` are dropped when encoding.
    Events {
        len: PayloadLen,
        bits: u64,
    },
    /// 0b01SS0011; bits above `len` are dropped when encoding.
    DataSource {
        len: PayloadLen,
        value: u64,
    },
    /// 0x64 (CONTEXTIDR_EL1) / 0x65 (CONTEXTIDR_EL2).
    Context {
        el2: bool,
        id: u32,
    },
    OpType(OpType),
    /// 0xB0|idx, or 0x20|idx[4:3], 0xB0|idx[2:0]; 8-byte payload.
    Address {
        index: AddressIndex,
        payload: u64,
    },
    /// 0x98|idx, or extended form; 2-byte payload.
    Counter {
        index: CounterIndex,
        value: u16,
    },
}

/// Payload of a PC / branch-target / previous-branch-target address packet:
/// `addr[55:0]`, NS bit 63, EL bits 62:61, NSE bit 60.
#[inline]
pub const fn address_payload(addr: u64, el: u8, ns: bool, nse: bool) -> u64 {
    (addr & ADDR_BYTES_0_6) | ((ns as u64) << 63) | (((el & 3) as u64) << 61) | ((nse as u64) << 60)
}

/// Payload of a data physical-address packet: `pa[55:0]`, NS bit 63, CH bit 62,
/// NSE bit 60, PAT bits 59:56.
#[inline]
pub const fn data_pa_payload(pa: u64, ns: bool, nse: bool, ch: bool, pat: u8) -> u64 {
    (pa & ADDR_BYTES_0_6)
        | ((ns as u64) << 63)
        | ((ch as u64) << 62)
        | ((nse as u64) << 60)
        | (((pat & 0xF) as u64) << 56)
}

/// Events packet payload bits.
pub mod events {
    pub const EXCEPTION_GEN: u64 = 1 << 0;
    pub const RETIRED: u64 = 1 << 1;
    pub const L1D_ACCESS: u64 = 1 << 2;
    pub const L1D_REFILL: u64 = 1 << 3;
    pub const TLB_ACCESS: u64 = 1 << 4;
    pub const TLB_WALK: u64 = 1 << 5;
    pub const NOT_TAKEN: u64 = 1 << 6;
    pub const MISPRED: u64 = 1 << 7;
    pub const LLC_ACCESS: u64 = 1 << 8;
    pub const LLC_MISS: u64 = 1 << 9;
    pub const REMOTE_ACCESS: u64 = 1 << 10;
    pub const MISALIGNED: u64 = 1 << 11;
    pub const TRANSACTIONAL: u64 = 1 << 16;
    pub const PARTIAL_PREDICATE: u64 = 1 << 17;
    pub const EMPTY_PREDICATE: u64 = 1 << 18;
    pub const L2D_ACCESS: u64 = 1 << 19;
    pub const L2D_MISS: u64 = 1 << 20;
    pub const CACHE_DATA_MODIFIED: u64 = 1 << 21;
    pub const RECENTLY_FETCHED: u64 = 1 << 22;
    pub const DATA_SNOOPED: u64 = 1 << 23;
    pub const STREAMING_SVE: u64 = 1 << 24;
    pub const SMCU: u64 = 1 << 25;
    /// IMPLEMENTATION DEFINED bits 15:12 and 63:48.
    pub const IMPDEF_MASK: u64 = 0xF000 | (0xFFFF << 48);
}

/// Operation-type payload bits, as perf reads them (the subclass is compared
/// in place, i.e. `payload & LDST_SUBCLASS_MASK == LDST_SIMD_FP`, not shifted).
pub mod op {
    // Load/store/atomic (header 0x49).
    /// Bit 0: store (else load).
    pub const LDST_STORE: u8 = 1 << 0;
    /// Bits 7:1: subclass, compared unshifted.
    pub const LDST_SUBCLASS_MASK: u8 = 0xFE;
    pub const LDST_GP: u8 = 0x00;
    pub const LDST_SIMD_FP: u8 = 0x04;
    pub const LDST_UNSPEC: u8 = 0x10;
    pub const LDST_NV_SYSREG: u8 = 0x30;
    pub const LDST_MTE_TAG: u8 = 0x14;
    pub const LDST_MEMCPY: u8 = 0x20;
    /// Compared against the whole byte (bit 0 included).
    pub const LDST_MEMSET: u8 = 0x25;
    /// Atomic / exclusive / acquire-release form: `(v & LDST_EXT_MASK) == LDST_EXT`.
    pub const LDST_EXT_MASK: u8 = 0xE2;
    pub const LDST_EXT: u8 = 0x02;
    pub const LDST_AT: u8 = 1 << 2;
    pub const LDST_EXCL: u8 = 1 << 3;
    pub const LDST_AR: u8 = 1 << 4;
    /// SVE/SME register form: `(v & LDST_SVE_MASK) == LDST_SVE`.
    pub const LDST_SVE_MASK: u8 = 0x0A;
    pub const LDST_SVE: u8 = 0x08;
    pub const LDST_SVE_PRED: u8 = 1 << 2;
    pub const LDST_SVE_SG: u8 = 1 << 7;
    /// GCS form: `(v & LDST_GCS_MASK) == LDST_GCS`.
    pub const LDST_GCS_MASK: u8 = 0xFA;
    pub const LDST_GCS: u8 = 0x40;
    pub const LDST_GCS_COMM: u8 = 1 << 2;

    // Branch (header 0x4A).
    pub const BRANCH_COND: u8 = 1 << 0;
    pub const BRANCH_IND: u8 = 1 << 1;
    pub const BRANCH_GCS: u8 = 1 << 2;
    /// Call-return field, bits 4:3.
    pub const BRANCH_CR_MASK: u8 = 3 << 3;
    pub const BRANCH_CR_BL: u8 = 1 << 3;
    pub const BRANCH_CR_RET: u8 = 2 << 3;
    pub const BRANCH_CR_NON_BL_RET: u8 = 3 << 3;

    // Other (header 0x48).
    pub const OTHER_COND_SELECT: u8 = 1 << 0;
    pub const OTHER_FP: u8 = 1 << 1;
    pub const OTHER_ASE: u8 = 1 << 2;
    /// Plain "other" form: `(v & OTHER_OTHER_MASK) == 0`.
    pub const OTHER_OTHER_MASK: u8 = 0xF8;
    /// SVE / SME forms: `(v & OTHER_SVE_SME_MASK) == OTHER_SVE` or `OTHER_SME`.
    pub const OTHER_SVE_SME_MASK: u8 = 0x89;
    pub const OTHER_SVE: u8 = 0x08;
    pub const OTHER_SME: u8 = 0x88;
    pub const OTHER_SVE_PRED: u8 = 1 << 2;

    /// SVE effective vector length field (bits 6:4) for `evl_bits` = 32 << n.
    pub const fn sve_evl(evl_bits: u32) -> u8 {
        let n = (evl_bits / 32).trailing_zeros();
        ((n as u8) & 7) << 4
    }
}

impl Packet {
    /// Appends the encoded packet to `out`.
    #[inline]
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut buf = [0u8; MAX_PACKET_LEN];
        let n = self.encode_to_array(&mut buf);
        out.extend_from_slice(&buf[..n]);
    }

    /// Encodes into a fixed buffer and returns the length; for callers writing
    /// straight into guest memory.
    #[inline]
    pub fn encode_to_array(&self, buf: &mut [u8; MAX_PACKET_LEN]) -> usize {
        // Writes the header(s) then a full 8-byte LE word; the returned length
        // cuts it to the real payload size, which keeps this branch-light.
        let (hdr_len, payload, payload_len) = match *self {
            Packet::Padding => {
                buf[0] = HDR_PAD;
                return 1;
            }
            Packet::End => {
                buf[0] = HDR_END;
                return 1;
            }
            Packet::Timestamp(ts) => {
                buf[0] = HDR_TIMESTAMP;
                (1, ts, 8)
            }
            Packet::Events { len, bits } => {
                buf[0] = HDR_EVENTS | (len.size_field() << 4);
                (1, bits, len.bytes())
            }
            Packet::DataSource { len, value } => {
                buf[0] = HDR_DATA_SOURCE | (len.size_field() << 4);
                (1, value, len.bytes())
            }
            Packet::Context { el2, id } => {
                buf[0] = HDR_CONTEXT | el2 as u8;
                (1, id as u64, 4)
            }
            Packet::OpType(op) => {
                let (class, v) = match op {
                    OpType::Other(v) => (0, v),
                    OpType::LoadStore(v) => (1, v),
                    OpType::Branch(v) => (2, v),
                };
                buf[0] = HDR_OP_TYPE | class;
                (1, v as u64, 1)
            }
            Packet::Address { index, payload } => {
                (Self::put_indexed(buf, HDR_ADDRESS, index.raw()), payload, 8)
            }
            Packet::Counter { index, value } => (
                Self::put_indexed(buf, HDR_COUNTER, index.raw()),
                value as u64,
                2,
            ),
        };
        buf[hdr_len..hdr_len + 8].copy_from_slice(&payload.to_le_bytes());
        hdr_len + payload_len
    }

    /// Writes a short or extended address/counter header; returns its length.
    #[inline]
    fn put_indexed(buf: &mut [u8; MAX_PACKET_LEN], base: u8, idx: u8) -> usize {
        if idx < 8 {
            buf[0] = base | idx;
            1
        } else {
            buf[0] = HDR_EXTENDED | ((idx >> 3) & 3);
            buf[1] = base | (idx & 7);
            2
        }
    }

    /// Number of bytes [`Packet::encode`] appends.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        match *self {
            Packet::Padding | Packet::End => 1,
            Packet::Timestamp(_) => 9,
            Packet::Events { len, .. } | Packet::DataSource { len, .. } => 1 + len.bytes(),
            Packet::Context { .. } => 5,
            Packet::OpType(_) => 2,
            Packet::Address { index, .. } => 8 + if index.raw() < 8 { 1 } else { 2 },
            Packet::Counter { index, .. } => 2 + if index.raw() < 8 { 1 } else { 2 },
        }
    }
}

/// Why a byte stream failed to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The packet starting with `header` needs `needed` bytes but only `available` remain.
    Truncated {
        header: u8,
        needed: usize,
        available: usize,
    },
    /// The header byte matches no packet type.
    UnknownHeader(u8),
    /// An extended header (0x20..=0x23) followed by a byte that is not an address/counter header.
    UnknownExtendedHeader(u8, u8),
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeErrorKind::Truncated {
                header,
                needed,
                available,
            } => write!(
                f,
                "truncated packet: header 0x{header:02x} needs {needed} bytes, {available} left"
            ),
            DecodeErrorKind::UnknownHeader(h) => write!(f, "unknown header byte 0x{h:02x}"),
            DecodeErrorKind::UnknownExtendedHeader(h0, h1) => {
                write!(f, "unknown extended header 0x{h0:02x} 0x{h1:02x}")
            }
        }
    }
}

/// A decode failure at byte `offset` (the start of the bad packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub kind: DecodeErrorKind,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.kind)
    }
}

impl std::error::Error for DecodeError {}

#[inline]
fn read_le(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

impl Packet {
    /// Decodes the packet at the start of `bytes`; returns it and its length.
    /// An extended header carrying an index below 8 decodes to the same packet as
    /// the short form, so re-encoding it yields the (one byte shorter) short form.
    pub fn decode(bytes: &[u8]) -> Result<(Packet, usize), DecodeErrorKind> {
        let Some(&hdr) = bytes.first() else {
            return Err(DecodeErrorKind::Truncated {
                header: 0,
                needed: 1,
                available: 0,
            });
        };
        // Returns the payload after `hdr_len` header bytes, or a truncation error.
        let payload = |hdr_len: usize, len: usize| -> Result<u64, DecodeErrorKind> {
            let total = hdr_len + len;
            match bytes.get(hdr_len..total) {
                Some(p) => Ok(read_le(p)),
                None => Err(DecodeErrorKind::Truncated {
                    header: hdr,
                    needed: total,
                    available: bytes.len(),
                }),
            }
        };
        let pkt = match hdr {
            HDR_PAD => return Ok((Packet::Padding, 1)),
            HDR_END => return Ok((Packet::End, 1)),
            HDR_TIMESTAMP => return Ok((Packet::Timestamp(payload(1, 8)?), 9)),
            _ if hdr & HDR_SIZED_MASK == HDR_EVENTS || hdr & HDR_SIZED_MASK == HDR_DATA_SOURCE => {
                let len = PayloadLen::from_header(hdr);
                let v = payload(1, len.bytes())?;
                let p = if hdr & HDR_SIZED_MASK == HDR_EVENTS {
                    Packet::Events { len, bits: v }
                } else {
                    Packet::DataSource { len, value: v }
                };
                return Ok((p, 1 + len.bytes()));
            }
            0x64 | 0x65 => Packet::Context {
                el2: hdr & 1 != 0,
                id: payload(1, 4)? as u32,
            },
            0x48 => Packet::OpType(OpType::Other(payload(1, 1)? as u8)),
            0x49 => Packet::OpType(OpType::LoadStore(payload(1, 1)? as u8)),
            0x4A => Packet::OpType(OpType::Branch(payload(1, 1)? as u8)),
            _ => {
                // Address and counter share the short/extended header scheme.
                let (hdr_len, h, hi) = if hdr & 0xFC == HDR_EXTENDED {
                    match bytes.get(1) {
                        Some(&h1) => (2, h1, (hdr & 3) << 3),
                        None => {
                            return Err(DecodeErrorKind::Truncated {
                                header: hdr,
                                needed: 2,
                                available: 1,
                            })
                        }
                    }
                } else {
                    (1, hdr, 0)
                };
                let idx = hi | (h & 7);
                match h & 0xF8 {
                    HDR_ADDRESS => {
                        let p = payload(hdr_len, 8)?;
                        return Ok((
                            Packet::Address {
                                index: AddressIndex::from_raw(idx),
                                payload: p,
                            },
                            hdr_len + 8,
                        ));
                    }
                    HDR_COUNTER => {
                        let v = payload(hdr_len, 2)? as u16;
                        return Ok((
                            Packet::Counter {
                                index: CounterIndex::from_raw(idx),
                                value: v,
                            },
                            hdr_len + 2,
                        ));
                    }
                    _ if hdr_len == 2 => {
                        return Err(DecodeErrorKind::UnknownExtendedHeader(hdr, h))
                    }
                    _ => return Err(DecodeErrorKind::UnknownHeader(hdr)),
                }
            }
        };
        let len = pkt.encoded_len();
        Ok((pkt, len))
    }
}

/// Iterator over the packets of a byte stream; stops after the first error.
#[derive(Clone, Debug)]
pub struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> Decoder<'a> {
    /// Byte offset of the next packet.
    pub fn offset(&self) -> usize {
        self.pos
    }
}

/// Decodes `bytes` packet by packet, yielding `(offset, packet)`.
pub fn decode(bytes: &[u8]) -> Decoder<'_> {
    Decoder {
        bytes,
        pos: 0,
        failed: false,
    }
}

impl Iterator for Decoder<'_> {
    type Item = Result<(usize, Packet), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.bytes.len() {
            return None;
        }
        let offset = self.pos;
        match Packet::decode(&self.bytes[offset..]) {
            Ok((pkt, len)) => {
                self.pos += len;
                Some(Ok((offset, pkt)))
            }
            Err(kind) => {
                // Resynchronising inside SPE data is guesswork; stop at the first bad packet.
                self.failed = true;
                Some(Err(DecodeError { offset, kind }))
            }
        }
    }
}

impl core::iter::FusedIterator for Decoder<'_> {}

/// Names perf prints for architected event bits, in perf's order.
const EVENT_NAMES: [(u64, &str); 22] = [
    (events::EXCEPTION_GEN, "EXCEPTION-GEN"),
    (events::RETIRED, "RETIRED"),
    (events::L1D_ACCESS, "L1D-ACCESS"),
    (events::L1D_REFILL, "L1D-REFILL"),
    (events::TLB_ACCESS, "TLB-ACCESS"),
    (events::TLB_WALK, "TLB-REFILL"),
    (events::NOT_TAKEN, "NOT-TAKEN"),
    (events::MISPRED, "MISPRED"),
    (events::LLC_ACCESS, "LLC-ACCESS"),
    (events::LLC_MISS, "LLC-REFILL"),
    (events::REMOTE_ACCESS, "REMOTE-ACCESS"),
    (events::MISALIGNED, "ALIGNMENT"),
    (events::TRANSACTIONAL, "TXN"),
    (events::PARTIAL_PREDICATE, "SVE-PARTIAL-PRED"),
    (events::EMPTY_PREDICATE, "SVE-EMPTY-PRED"),
    (events::L2D_ACCESS, "L2D-ACCESS"),
    (events::L2D_MISS, "L2D-MISS"),
    (events::CACHE_DATA_MODIFIED, "HITM"),
    (events::RECENTLY_FETCHED, "LFB"),
    (events::DATA_SNOOPED, "SNOOPED"),
    (events::STREAMING_SVE, "STREAMING-SVE"),
    (events::SMCU, "SMCU"),
];

fn fmt_events(f: &mut fmt::Formatter<'_>, mut bits: u64) -> fmt::Result {
    f.write_str("EV")?;
    for (bit, name) in EVENT_NAMES {
        if bits & bit != 0 {
            write!(f, " {name}")?;
        }
        bits &= !bit;
    }
    // perf prints the leftovers (IMPDEF or not yet architected) as a bit list.
    if bits != 0 {
        f.write_str(" IMPDEF:")?;
        let mut first = true;
        while bits != 0 {
            let i = bits.trailing_zeros();
            if !first {
                f.write_str(",")?;
            }
            write!(f, "{i}")?;
            first = false;
            bits &= bits - 1;
        }
    }
    Ok(())
}

fn fmt_op(f: &mut fmt::Formatter<'_>, op_type: OpType) -> fmt::Result {
    use self::op::*;
    let sve_evl = |v: u8| 32u32 << ((v >> 4) & 7);
    match op_type {
        OpType::Other(v) => {
            if v & OTHER_SVE_SME_MASK == OTHER_SVE {
                write!(f, "SVE-OTHER EVLEN {}", sve_evl(v))?;
                if v & OTHER_FP != 0 {
                    f.write_str(" FP")?;
                }
                if v & OTHER_SVE_PRED != 0 {
                    f.write_str(" PRED")?;
                }
            } else if v & OTHER_SVE_SME_MASK == OTHER_SME {
                let ets = 128u32 << ((((v >> 4) & 7) << 1) | ((v >> 2) & 1));
                write!(f, "SME-OTHER ETS {ets}")?;
                if v & OTHER_FP != 0 {
                    f.write_str(" FP")?;
                }
            } else if v & OTHER_OTHER_MASK == 0 {
                f.write_str("OTHER")?;
                if v & OTHER_ASE != 0 {
                    f.write_str(" ASE")?;
                }
                if v & OTHER_FP != 0 {
                    f.write_str(" FP")?;
                }
                f.write_str(if v & OTHER_COND_SELECT != 0 {
                    " COND-SELECT"
                } else {
                    " INSN-OTHER"
                })?;
            } else {
                // perf prints nothing here; use its raw fallback notation instead.
                write!(f, "OP-TYPE 0x{v:x} (0)")?;
            }
        }
        OpType::LoadStore(v) => {
            f.write_str(if v & LDST_STORE != 0 { "ST" } else { "LD" })?;
            let sub = v & LDST_SUBCLASS_MASK;
            if v & LDST_EXT_MASK == LDST_EXT {
                for (bit, name) in [(LDST_AT, " AT"), (LDST_EXCL, " EXCL"), (LDST_AR, " AR")] {
                    if v & bit != 0 {
                        f.write_str(name)?;
                    }
                }
            } else if sub == LDST_SIMD_FP {
                f.write_str(" SIMD-FP")?;
            } else if sub == LDST_GP {
                f.write_str(" GP-REG")?;
            } else if sub == LDST_UNSPEC {
                f.write_str(" UNSPEC-REG")?;
            } else if sub == LDST_NV_SYSREG {
                f.write_str(" NV-SYSREG")?;
            } else if sub == LDST_MTE_TAG {
                f.write_str(" MTE-TAG")?;
            } else if sub == LDST_MEMCPY {
                f.write_str(" MEMCPY")?;
            } else if v == LDST_MEMSET {
                f.write_str(" MEMSET")?;
            } else if v & LDST_SVE_MASK == LDST_SVE {
                write!(f, " SVE-SME-REG EVLEN {}", sve_evl(v))?;
                if v & LDST_SVE_PRED != 0 {
                    f.write_str(" PRED")?;
                }
                if v & LDST_SVE_SG != 0 {
                    f.write_str(" SG")?;
                }
            } else if v & LDST_GCS_MASK == LDST_GCS {
                f.write_str(" GCS")?;
                if v & LDST_GCS_COMM != 0 {
                    f.write_str(" COMM")?;
                }
            }
        }
        OpType::Branch(v) => {
            f.write_str("B")?;
            for (bit, name) in [
                (BRANCH_COND, " COND"),
                (BRANCH_IND, " IND"),
                (BRANCH_GCS, " GCS"),
            ] {
                if v & bit != 0 {
                    f.write_str(name)?;
                }
            }
            match v & BRANCH_CR_MASK {
                BRANCH_CR_BL => f.write_str(" CR-BL")?,
                BRANCH_CR_RET => f.write_str(" CR-RET")?,
                BRANCH_CR_NON_BL_RET => f.write_str(" CR-NON-BL-RET")?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// `perf report -D` notation (Linux `arm_spe_pkt_desc()`), without IMPDEF
/// decoding that needs the CPU's MIDR.
impl fmt::Display for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Packet::Padding => f.write_str("PAD"),
            Packet::End => f.write_str("END"),
            Packet::Timestamp(ts) => write!(f, "TS {ts}"),
            Packet::Events { bits, .. } => fmt_events(f, bits),
            // perf prints the data source as a signed decimal ("%lld").
            Packet::DataSource { value, .. } => write!(f, "DATA-SOURCE {}", value as i64),
            Packet::Context { el2, id } => write!(f, "CONTEXT 0x{id:x} el{}", 1 + el2 as u8),
            Packet::OpType(op) => fmt_op(f, op),
            Packet::Address { index, payload } => {
                let addr = payload & ADDR_BYTES_0_6;
                let ns = payload >> 63;
                match index {
                    AddressIndex::Pc
                    | AddressIndex::BranchTarget
                    | AddressIndex::PrevBranchTarget => {
                        let name = match index {
                            AddressIndex::Pc => "PC",
                            AddressIndex::BranchTarget => "TGT",
                            _ => "PBT",
                        };
                        let el = (payload >> 61) & 3;
                        write!(f, "{name} 0x{addr:x} el{el} ns={ns}")
                    }
                    AddressIndex::DataVirtual => write!(f, "VA 0x{payload:x}"),
                    AddressIndex::DataPhysical => {
                        let ch = (payload >> 62) & 1;
                        let pat = (payload >> 56) & 0xF;
                        write!(f, "PA 0x{addr:x} ns={ns} ch={ch} pat={pat:x}")
                    }
                    AddressIndex::Other(i) => write!(f, "ADDR 0x{payload:x} ({i})"),
                }
            }
            Packet::Counter { index, value } => {
                // perf prints "LAT <n> " and then nothing for indices it does not name.
                write!(f, "LAT {value} ")?;
                match index {
                    CounterIndex::TotalLatency => f.write_str("TOT"),
                    CounterIndex::IssueLatency => f.write_str("ISSUE"),
                    CounterIndex::TranslationLatency => f.write_str("XLAT"),
                    CounterIndex::AltClockIssue | CounterIndex::Other(_) => Ok(()),
                }
            }
        }
    }
}
