//! `vhost-device-spe decode`: dump an SPE buffer in `perf report -D` style.

use std::fmt;
use std::io::{self, Read, Write};

use spe_protocol::packet::{decode, DecodeError, Packet};

/// Bytes shown per line before the description, as perf does.
const RAW_COLUMN_BYTES: usize = 16;

/// Why `decode` failed.
#[derive(Debug)]
pub enum DecodeFailure {
    /// The input could not be read or the output not written.
    Io { what: String, source: io::Error },
    /// The stream is malformed; `packets` were printed before the bad one.
    Malformed { error: DecodeError, packets: usize },
}

impl fmt::Display for DecodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeFailure::Io { what, source } => write!(f, "{what}: {source}"),
            DecodeFailure::Malformed { error, .. } => write!(
                f,
                "malformed SPE stream at offset {}: {}",
                error.offset, error.kind
            ),
        }
    }
}

impl std::error::Error for DecodeFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DecodeFailure::Io { source, .. } => Some(source),
            DecodeFailure::Malformed { error, .. } => Some(error),
        }
    }
}

/// Decodes the file `input` (or stdin for `-`) to `out`; returns the packet count.
pub fn run(input: &str, out: &mut impl Write) -> Result<usize, DecodeFailure> {
    let mut bytes = Vec::new();
    let read = if input == "-" {
        io::stdin().lock().read_to_end(&mut bytes).map(drop)
    } else {
        std::fs::read(input).map(|b| bytes = b)
    };
    read.map_err(|source| DecodeFailure::Io {
        what: format!("cannot read {input}"),
        source,
    })?;
    dump(&bytes, out)
}

/// Writes one line per packet (runs of padding share a line, as in perf):
/// `.  OFFSET:  RAW BYTES…  DESCRIPTION`. Returns the number of packets.
pub fn dump(bytes: &[u8], out: &mut impl Write) -> Result<usize, DecodeFailure> {
    let io_err = |source| DecodeFailure::Io {
        what: "cannot write output".into(),
        source,
    };
    let mut packets = 0;
    // Pending run of padding bytes: (start offset, count).
    let mut pad: Option<(usize, usize)> = None;
    for item in decode(bytes) {
        let (offset, pkt) = match item {
            Ok(x) => x,
            Err(error) => {
                if let Some((start, n)) = pad.take() {
                    write_line(out, start, &bytes[start..start + n], &Packet::Padding)
                        .map_err(io_err)?;
                }
                out.flush().map_err(io_err)?;
                return Err(DecodeFailure::Malformed { error, packets });
            }
        };
        packets += 1;
        if pkt == Packet::Padding {
            match &mut pad {
                Some((_, n)) if *n < RAW_COLUMN_BYTES => *n += 1,
                _ => {
                    if let Some((start, n)) = pad.replace((offset, 1)) {
                        write_line(out, start, &bytes[start..start + n], &Packet::Padding)
                            .map_err(io_err)?;
                    }
                }
            }
            continue;
        }
        if let Some((start, n)) = pad.take() {
            write_line(out, start, &bytes[start..start + n], &Packet::Padding).map_err(io_err)?;
        }
        let len = Packet::decode(&bytes[offset..])
            .map(|(_, len)| len)
            .unwrap_or(pkt.encoded_len());
        write_line(out, offset, &bytes[offset..offset + len], &pkt).map_err(io_err)?;
    }
    if let Some((start, n)) = pad.take() {
        write_line(out, start, &bytes[start..start + n], &Packet::Padding).map_err(io_err)?;
    }
    out.flush().map_err(io_err)?;
    Ok(packets)
}

fn write_line(out: &mut impl Write, offset: usize, raw: &[u8], pkt: &Packet) -> io::Result<()> {
    write!(out, ".  {offset:08x}: ")?;
    for b in raw {
        write!(out, " {b:02x}")?;
    }
    for _ in raw.len()..RAW_COLUMN_BYTES {
        out.write_all(b"   ")?;
    }
    writeln!(out, " {pkt}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_matches_perf_layout() {
        let bytes = [0x00, 0x00, 0x49, 0x00, 0x9a, 0x00, 0x00, 0x01];
        let mut out = Vec::new();
        assert_eq!(dump(&bytes, &mut out).unwrap(), 5);
        let text = String::from_utf8(out).unwrap();
        let want = format!(
            ".  00000000:  00 00{} PAD\n.  00000002:  49 00{} LD GP-REG\n\
             .  00000004:  9a 00 00{} LAT 0 XLAT\n.  00000007:  01{} END\n",
            "   ".repeat(14),
            "   ".repeat(14),
            "   ".repeat(13),
            "   ".repeat(15),
        );
        assert_eq!(text, want);
    }

    #[test]
    fn padding_runs_split_at_sixteen_bytes() {
        let bytes = [0u8; 20];
        let mut out = Vec::new();
        assert_eq!(dump(&bytes, &mut out).unwrap(), 20);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(".  00000000:  00"));
        assert!(lines[1].starts_with(".  00000010:  00 00 00 00 "));
    }

    #[test]
    fn malformed_stream_prints_prefix_then_fails() {
        let bytes = [0x01, 0x00, 0x71, 0x00];
        let mut out = Vec::new();
        let err = dump(&bytes, &mut out).unwrap_err();
        match &err {
            DecodeFailure::Malformed { error, packets } => {
                assert_eq!(error.offset, 2);
                assert_eq!(*packets, 2);
            }
            other => panic!("{other:?}"),
        }
        assert!(err
            .to_string()
            .starts_with("malformed SPE stream at offset 2: truncated packet"));
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2);
    }
}
