//! `--record DIR`: a host-side copy of every record the model writes into
//! a guest's profiling buffer, one file per vCPU, for
//! `vhost-device-spe report` (no tools needed in the guest).
//!
//! `DIR/vcpu<N>.rec` starts with [`MAGIC`], then one frame per record: the
//! host time it was stored (little-endian u64 nanoseconds since the VM
//! connected; records are stored each time the front end drains its
//! source, so this is when it left the backend, not when it was sampled;
//! the record's Timestamp packet has the guest's time), a little-endian
//! u16 length, and the record's bytes as written (with its padding). A
//! VM that connects truncates the files of the one before.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
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

/// Every record of every `vcpu<N>.rec` in `dir`, per vCPU in file order.
pub fn read_dir(dir: &Path) -> io::Result<Vec<Stored>> {
    let mut out = Vec::new();
    let mut vcpu = 0;
    loop {
        let p = path(dir, vcpu);
        let mut data = Vec::new();
        match File::open(&p) {
            Ok(mut f) => f.read_to_end(&mut data)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound && vcpu > 0 => return Ok(out),
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", p.display()))),
        };
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {why}", p.display()),
            )
        };
        let mut rest = data
            .strip_prefix(MAGIC)
            .ok_or_else(|| bad("not a record file"))?;
        while !rest.is_empty() {
            if rest.len() < 10 {
                return Err(bad("truncated frame"));
            }
            let ns = u64::from_le_bytes(rest[..8].try_into().unwrap());
            let len = u16::from_le_bytes([rest[8], rest[9]]) as usize;
            let bytes = rest
                .get(10..10 + len)
                .ok_or_else(|| bad("truncated record"))?;
            out.push(Stored {
                vcpu,
                ns,
                bytes: bytes.to_vec(),
            });
            rest = &rest[10 + len..];
        }
        vcpu += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spu::test_util::{linux_spu, load, mem};
    use crate::spu::{Features, SampleOutcome};

    #[test]
    fn records_round_trip_per_vcpu() {
        let dir = std::env::temp_dir().join(format!("spe-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = mem(8 << 20);
        let mut spus: Vec<Spu> = (0..2)
            .map(|_| linux_spu(&m, Features::default(), 16).0)
            .collect();
        let mut rec = Recorder::start(&dir, &mut spus).unwrap();
        let mut written = vec![Vec::new(), Vec::new()];
        for (i, va) in [0x1000u64, 0x2000, 0x3000].into_iter().enumerate() {
            let v = i % 2;
            let out = spus[v].sample(&load(0xffff_8000_1000_0000 + 4 * i as u64, va), &m);
            assert!(matches!(out, SampleOutcome::Written { .. }));
            written[v].push(spus[v].last_record().to_vec());
            rec.store(&mut spus);
        }
        drop(rec);
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
    fn taps_are_off_by_default() {
        let m = mem(8 << 20);
        let (mut spu, _) = linux_spu(&m, Features::default(), 16);
        spu.sample(&load(0, 0x1000), &m);
        assert!(spu.take_tapped().is_empty());
    }
}
