//! Little-endian field access for the fixed layouts of this crate. Callers
//! check lengths first; these index slices directly.

pub(crate) fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

pub(crate) fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

pub(crate) fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(w)
}

pub(crate) fn put(out: &mut [u8], o: usize, v: &[u8]) {
    out[o..o + v.len()].copy_from_slice(v);
}
