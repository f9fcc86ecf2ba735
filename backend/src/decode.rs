//! `vhost-device-spe decode`: dump an SPE buffer in `perf report -D` style.
//!
//! The input is raw SPE data (a guest's buffer, a `.spe` file of
//! `vhost-device-spe export`) or what `--record` kept: a record file,
//! known by its magic, or the directory of them.

use std::io::{self, Read, Write};
use std::path::Path;

use spe_protocol::packet::{decode, DecodeError, Packet};

use crate::record;

/// Bytes shown per line before the description, as perf does.
const RAW_COLUMN_BYTES: usize = 16;

/// Why `decode` failed.
#[derive(Debug, thiserror::Error)]
pub enum DecodeFailure {
    /// The input could not be read or the output not written.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// The stream is malformed; `packets` were printed before the bad one.
    #[error("malformed SPE stream at offset {}: {}", error.offset, error.kind)]
    Malformed {
        #[source]
        error: DecodeError,
        packets: usize,
    },
    /// A record file whose framing is damaged.
    #[error("{name}: {error}")]
    Recording {
        name: String,
        #[source]
        error: record::Malformed,
    },
}

/// Decodes `input` to `out`: a file (raw SPE data, or a record file), a
/// `--record` directory (each vCPU's file in turn), or stdin for `-`.
/// Returns the packet count.
pub fn run(input: &str, out: &mut impl Write) -> Result<usize, DecodeFailure> {
    if input != "-" && Path::new(input).is_dir() {
        return run_dir(Path::new(input), out);
    }
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
    if record::is_record_file(&bytes) {
        let name = if input == "-" { "stdin" } else { input };
        dump_record_file(name, &bytes, out)
    } else {
        dump(&bytes, out)
    }
}

/// Decodes the record files of a `--record` directory, vCPU by vCPU.
fn run_dir(dir: &Path, out: &mut impl Write) -> Result<usize, DecodeFailure> {
    let mut packets = 0;
    for p in record::files(dir) {
        let bytes = std::fs::read(&p).map_err(|source| DecodeFailure::Io {
            what: format!("cannot read {}", p.display()),
            source,
        })?;
        packets += dump_record_file(&p.display().to_string(), &bytes, out)?;
    }
    Ok(packets)
}

/// Decodes the records of a record file (`name` is for messages) as the
/// guest's buffer held them: the frames' bytes in order, without the
/// framing, so offsets are those of the file `export` writes. A line
/// starting `#` names the file first.
pub fn dump_record_file(
    name: &str,
    data: &[u8],
    out: &mut impl Write,
) -> Result<usize, DecodeFailure> {
    let frames = record::frames(data).map_err(|error| DecodeFailure::Recording {
        name: name.to_string(),
        error,
    })?;
    let raw: Vec<u8> = frames.iter().flat_map(|f| f.bytes).copied().collect();
    writeln!(
        out,
        "# {name}: {} record(s), {} bytes of SPE data",
        frames.len(),
        raw.len()
    )
    .map_err(|source| DecodeFailure::Io {
        what: "cannot write output".into(),
        source,
    })?;
    dump(&raw, out)
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

    fn decoded(run: impl FnOnce(&mut Vec<u8>) -> Result<usize, DecodeFailure>) -> String {
        let mut out = Vec::new();
        run(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_record_file_decodes_as_its_export() {
        let dir = std::env::temp_dir().join(format!("spe-decode-rec-{}", std::process::id()));
        let written = record::make_recording(&dir);
        record::export(&dir, &dir).unwrap();
        let mut want_all = String::new();
        for (v, records) in written.iter().enumerate() {
            let rec = record::path(&dir, v).display().to_string();
            let raw = record::raw_path(&dir, v).display().to_string();
            let bytes = records.concat();
            let want = format!(
                "# {rec}: {} record(s), {} bytes of SPE data\n{}",
                records.len(),
                bytes.len(),
                decoded(|o| run(&raw, o))
            );
            // Every record's packets, each ending with its timestamp.
            assert_eq!(
                want.lines().filter(|l| l.contains(" TS ")).count(),
                records.len()
            );
            assert_eq!(decoded(|o| run(&rec, o)), want, "vcpu{v}");
            want_all.push_str(&want);
        }
        // The directory: each vCPU in turn.
        let text = decoded(|o| run(&dir.display().to_string(), o));
        assert_eq!(text, want_all);
        // A damaged frame is named, not decoded.
        let rec = record::path(&dir, 1);
        let mut data = std::fs::read(&rec).unwrap();
        data.pop();
        let e = dump_record_file("vcpu1.rec", &data, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(
                e,
                DecodeFailure::Recording {
                    error: record::Malformed::TruncatedRecord(8),
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "vcpu1.rec: truncated record at byte 8");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
