//! `--record DIR`: a host-side copy of every record the model writes into
//! a guest's profiling buffer, one file per vCPU, for
//! `vhost-device-spe report` (no tools needed in the guest). `decode`
//! reads the files too, and `export` turns them into raw SPE data for
//! other tools.
//!
//! `DIR/vcpu<N>.rec` starts with [`MAGIC`], then one frame per record: the
//! host time it was stored (little-endian u64 nanoseconds since the VM
//! connected; records are stored each time the front end drains its
//! source, so this is when it left the backend, not when it was sampled;
//! the record's Timestamp packet has the guest's time), a little-endian
//! u16 length, and the record's bytes as written (with its padding). A
//! VM that connects truncates the files of the one before.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use log::error;

use crate::spu::Spu;

/// The first bytes of every record file.
pub const MAGIC: &[u8; 8] = b"SPEREC1\n";

/// Writes the records the SPUs tap to `DIR/vcpu<N>.rec`.
#[derive(Debug)]
pub struct Recorder {
    files: Vec<BufWriter<File>>,
    start: Instant,
    failed: bool,
}

/// The record file of `vcpu` in `dir`.
pub fn path(dir: &Path, vcpu: usize) -> PathBuf {
    dir.join(format!("vcpu{vcpu}.rec"))
}

impl Recorder {
    /// Creates (truncates) one file per SPU and turns their taps on.
    pub fn start(dir: &Path, spus: &mut [Spu]) -> io::Result<Recorder> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::with_capacity(spus.len());
        for (v, spu) in spus.iter_mut().enumerate() {
            let mut f = BufWriter::new(File::create(path(dir, v))?);
            f.write_all(MAGIC)?;
            files.push(f);
            spu.set_tap(true);
        }
        Ok(Recorder {
            files,
            start: Instant::now(),
            failed: false,
        })
    }

    /// Stores what each SPU tapped since the last call. A write error is
    /// logged once and ends the recording, not the VM.
    pub fn store(&mut self, spus: &mut [Spu]) {
        let ns = self.start.elapsed().as_nanos() as u64;
        for (spu, f) in spus.iter_mut().zip(&mut self.files) {
            let tapped = spu.take_tapped();
            if self.failed || tapped.is_empty() {
                continue;
            }
            if let Err(e) = write_frames(f, ns, &tapped) {
                error!("--record: {e}; recording stopped");
                self.failed = true;
            }
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for f in &mut self.files {
            let _ = f.flush();
        }
    }
}

fn write_frames(f: &mut impl Write, ns: u64, tapped: &[u8]) -> io::Result<()> {
    let mut rest = tapped;
    while rest.len() >= 2 {
        let len = u16::from_le_bytes([rest[0], rest[1]]) as usize;
        let Some(record) = rest.get(2..2 + len) else {
            break;
        };
        f.write_all(&ns.to_le_bytes())?;
        f.write_all(&rest[..2])?;
        f.write_all(record)?;
        rest = &rest[2 + len..];
    }
    Ok(())
}

/// One stored record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub vcpu: usize,
    /// Nanoseconds since the VM connected, when it was stored.
    pub ns: u64,
    pub bytes: Vec<u8>,
}

/// One frame of a record file, borrowed from its contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Nanoseconds since the VM connected, when it was stored.
    pub ns: u64,
    /// The record as it was written into the guest's buffer.
    pub bytes: &'a [u8],
}

/// Why bytes are not a record file; offsets count from the file's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("not a record file (no SPEREC1 magic)")]
    NoMagic,
    #[error("truncated frame at byte {0}")]
    TruncatedFrame(usize),
    #[error("truncated record at byte {0}")]
    TruncatedRecord(usize),
}

/// Whether `data` starts as a record file does.
pub fn is_record_file(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

/// The frames of a record file's contents, in file order.
pub fn frames(data: &[u8]) -> Result<Vec<Frame<'_>>, Malformed> {
    let mut rest = data.strip_prefix(MAGIC).ok_or(Malformed::NoMagic)?;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let at = data.len() - rest.len();
        let (Some(ns), Some(len)) = (rest.get(..8), rest.get(8..10)) else {
            return Err(Malformed::TruncatedFrame(at));
        };
        let mut ns_le = [0; 8];
        ns_le.copy_from_slice(ns);
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let bytes = rest
            .get(10..10 + len)
            .ok_or(Malformed::TruncatedRecord(at))?;
        out.push(Frame {
            ns: u64::from_le_bytes(ns_le),
            bytes,
        });
        rest = &rest[10 + len..];
    }
    Ok(out)
}

/// The record files of `dir`, by vCPU: `vcpu0.rec` (whether it exists
/// or not, so that reading it says what is missing), then `vcpu1.rec`,
/// ... up to the first that does not exist.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![path(dir, 0)];
    out.extend((1..).map(|vcpu| path(dir, vcpu)).take_while(|p| p.exists()));
    out
}

/// Reads each of [`files`] and hands its vCPU and frames to `each`.
fn for_each_file(
    dir: &Path,
    mut each: impl FnMut(usize, &[Frame<'_>]) -> io::Result<()>,
) -> io::Result<()> {
    for (vcpu, p) in files(dir).iter().enumerate() {
        let named = |e: String| format!("{}: {e}", p.display());
        let data = std::fs::read(p).map_err(|e| io::Error::new(e.kind(), named(e.to_string())))?;
        let frames = frames(&data)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, named(e.to_string())))?;
        each(vcpu, &frames)?;
    }
    Ok(())
}

/// Every record of every `vcpu<N>.rec` in `dir`, per vCPU in file order.
pub fn read_dir(dir: &Path) -> io::Result<Vec<Stored>> {
    let mut out = Vec::new();
    for_each_file(dir, |vcpu, frames| {
        out.extend(frames.iter().map(|f| Stored {
            vcpu,
            ns: f.ns,
            bytes: f.bytes.to_vec(),
        }));
        Ok(())
    })?;
    Ok(out)
}

/// The raw SPE file [`export`] writes for `vcpu` in `dir`.
pub fn raw_path(dir: &Path, vcpu: usize) -> PathBuf {
    dir.join(format!("vcpu{vcpu}.spe"))
}

/// What [`export`] wrote for one vCPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    pub vcpu: usize,
    pub path: PathBuf,
    pub records: usize,
    pub bytes: u64,
}

/// Writes each `vcpu<N>.rec` of `dir` as `out/vcpu<N>.spe` (`out` is
/// created if missing): the records' bytes alone, in order, as the
/// guest's buffer held them, which is what tools that read raw SPE
/// buffers take (Arm's spe-parser, `vhost-device-spe decode`).
pub fn export(dir: &Path, out: &Path) -> io::Result<Vec<Exported>> {
    std::fs::create_dir_all(out)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", out.display())))?;
    let mut done = Vec::new();
    for_each_file(dir, |vcpu, frames| {
        let p = raw_path(out, vcpu);
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", p.display()));
        let mut f = BufWriter::new(File::create(&p).map_err(named)?);
        for fr in frames {
            f.write_all(fr.bytes).map_err(named)?;
        }
        f.flush().map_err(named)?;
        done.push(Exported {
            vcpu,
            path: p.clone(),
            records: frames.len(),
            bytes: frames.iter().map(|fr| fr.bytes.len() as u64).sum(),
        });
        Ok(())
    })?;
    Ok(done)
}

/// Records three samples on two vCPUs through [`Recorder`] into `dir`,
/// storing after each; returns each vCPU's records as written.
#[cfg(test)]
pub(crate) fn make_recording(dir: &Path) -> Vec<Vec<Vec<u8>>> {
    use crate::spu::test_util::{linux_spu, load, mem};
    use crate::spu::{Features, SampleOutcome};

    let _ = std::fs::remove_dir_all(dir);
    let m = mem(8 << 20);
    let mut spus: Vec<Spu> = (0..2)
        .map(|_| linux_spu(&m, Features::default(), 16).0)
        .collect();
    let mut rec = Recorder::start(dir, &mut spus).unwrap();
    let mut written = vec![Vec::new(), Vec::new()];
    for (i, va) in [0x1000u64, 0x2000, 0x3000].into_iter().enumerate() {
        let v = i % 2;
        let out = spus[v].sample(&load(0xffff_8000_1000_0000 + 4 * i as u64, va), &m);
        assert!(matches!(out, SampleOutcome::Written { .. }));
        written[v].push(spus[v].last_record().to_vec());
        rec.store(&mut spus);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spu::test_util::{linux_spu, load, mem};
    use crate::spu::Features;

    fn temp_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("spe-record-{}-{name}", std::process::id()))
    }

    #[test]
    fn records_round_trip_per_vcpu() {
        let dir = temp_dir("round-trip");
        let written = make_recording(&dir);
        let stored = read_dir(&dir).unwrap();
        let got: Vec<(usize, Vec<u8>)> = stored.into_iter().map(|s| (s.vcpu, s.bytes)).collect();
        let want: Vec<(usize, Vec<u8>)> = written
            .into_iter()
            .enumerate()
            .flat_map(|(v, rs)| rs.into_iter().map(move |r| (v, r)))
            .collect();
        assert_eq!(got, want);
        // A damaged file is an error, not a short list.
        let p = path(&dir, 0);
        let mut data = std::fs::read(&p).unwrap();
        data.pop();
        std::fs::write(&p, data).unwrap();
        assert!(read_dir(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn export_writes_each_vcpus_records_alone() {
        let dir = temp_dir("export");
        let written = make_recording(&dir);
        let out = dir.join("raw");
        let done = export(&dir, &out).unwrap();
        assert_eq!(done.len(), 2);
        for (v, records) in written.iter().enumerate() {
            let want = records.concat();
            assert!(!want.is_empty());
            assert_eq!(std::fs::read(raw_path(&out, v)).unwrap(), want, "vcpu{v}");
            assert_eq!(
                done[v],
                Exported {
                    vcpu: v,
                    path: raw_path(&out, v),
                    records: records.len(),
                    bytes: want.len() as u64,
                }
            );
            // Raw SPE data, which the packet decoder reads to the end.
            assert!(spe_protocol::packet::decode(&want).all(|p| p.is_ok()));
        }
        // Beside the record files by default.
        export(&dir, &dir).unwrap();
        assert_eq!(
            std::fs::read(raw_path(&dir, 1)).unwrap(),
            written[1].concat()
        );
        // No recording, nothing written.
        let empty = temp_dir("export-empty");
        assert!(export(&empty, &out).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
        let _ = std::fs::remove_dir_all(&empty);
    }

    #[test]
    fn frames_name_what_is_wrong_and_where() {
        let mut data = MAGIC.to_vec();
        assert_eq!(frames(&data), Ok(vec![]));
        data.extend(5u64.to_le_bytes());
        data.extend(2u16.to_le_bytes());
        data.extend([0x01, 0x01]);
        assert_eq!(
            frames(&data),
            Ok(vec![Frame {
                ns: 5,
                bytes: &[0x01, 0x01]
            }])
        );
        assert_eq!(
            frames(&data[..data.len() - 1]),
            Err(Malformed::TruncatedRecord(8))
        );
        assert_eq!(frames(&data[..12]), Err(Malformed::TruncatedFrame(8)));
        assert_eq!(frames(&data[1..]), Err(Malformed::NoMagic));
        assert!(is_record_file(&data) && !is_record_file(&data[1..]));
    }

    #[test]
    fn taps_are_off_by_default() {
        let m = mem(8 << 20);
        let (mut spu, _) = linux_spu(&m, Features::default(), 16);
        spu.sample(&load(0, 0x1000), &m);
        assert!(spu.take_tapped().is_empty());
    }
}
