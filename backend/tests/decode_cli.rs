//! Runs the built `vhost-device-spe decode` on golden and malformed files.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_vhost-device-spe");

/// One record of the known-good hardware bytes from record-format.md, then padding.
const GOLDEN: &[u8] = &[
    0xb0, 0xf4, 0xd3, 0x29, 0x10, 0x00, 0x80, 0xff, 0xa0, // PC
    0x49, 0x00, // LD
    0xb2, 0xc0, 0x3b, 0x29, 0x0f, 0x00, 0x00, 0xff, 0xff, // VA
    0x9a, 0x00, 0x00, // LAT 0 XLAT
    0x42, 0x16, // EV
    0x52, 0x16, 0x00, // EV, 2-byte form
    0x71, 0x36, 0x6c, 0x21, 0x2c, 0x09, 0x00, 0x00, 0x00, // TS
    0x00, 0x00, 0x00, // padding
];

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("spe-decode-{}-{name}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

fn descriptions(stdout: &[u8]) -> Vec<(String, String)> {
    // ".  OFFSET:  RAW…  DESC": the description starts after the 16-byte raw column.
    String::from_utf8(stdout.to_vec())
        .unwrap()
        .lines()
        .map(|l| {
            assert!(l.starts_with(".  "), "{l:?}");
            (l[3..11].to_string(), l[13 + 16 * 3 + 1..].to_string())
        })
        .collect()
}

const GOLDEN_TEXT: &[(&str, &str)] = &[
    ("00000000", "PC 0xff80001029d3f4 el1 ns=1"),
    ("00000009", "LD GP-REG"),
    ("0000000b", "VA 0xffff00000f293bc0"),
    ("00000014", "LAT 0 XLAT"),
    ("00000017", "EV RETIRED L1D-ACCESS TLB-ACCESS"),
    ("00000019", "EV RETIRED L1D-ACCESS TLB-ACCESS"),
    ("0000001c", "TS 39395093558"),
    ("00000025", "PAD"),
];

fn expected() -> Vec<(String, String)> {
    GOLDEN_TEXT
        .iter()
        .map(|(o, d)| (o.to_string(), d.to_string()))
        .collect()
}

#[test]
fn decodes_golden_file() {
    let path = temp_file("golden.bin", GOLDEN);
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(descriptions(&out.stdout), expected());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(".  00000000:  b0 f4 d3 29 10 00 80 ff a0    "),
        "{text}"
    );
}

/// `decode -` of `data`.
fn decode_stdin(data: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(["decode", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(data).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn decodes_stdin() {
    let out = decode_stdin(GOLDEN);
    assert!(out.status.success());
    assert_eq!(descriptions(&out.stdout), expected());
}

#[test]
fn malformed_file_fails_with_offset() {
    // Good End, then a timestamp cut short at offset 3.
    let path = temp_file("bad.bin", &[0x01, 0x49, 0x00, 0x71, 0x01, 0x02]);
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("error: malformed SPE stream at offset 3: truncated packet"),
        "{stderr}"
    );
    // Packets before the bad one are still printed.
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
}

#[test]
fn unknown_header_fails_with_offset() {
    let path = temp_file("unknown.bin", &[0x49, 0x00, 0xff]);
    let out = Command::new(BIN).arg("decode").arg(&path).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("malformed SPE stream at offset 2: unknown header byte 0xff"),
        "{stderr}"
    );
}

#[test]
fn missing_file_fails() {
    let out = Command::new(BIN)
        .args(["decode", "/nonexistent/spe.bin"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .starts_with("error: cannot read"));
}

/// A --record directory written by hand in the recorder's framing (magic,
/// then per record: u64 host time, u16 length, the bytes): GOLDEN twice
/// on vCPU 0, once on vCPU 1.
fn recording(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spe-decode-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (vcpu, n) in [(0, 2), (1, 1)] {
        let mut f = vhost_device_spe::record::MAGIC.to_vec();
        for i in 0..n {
            f.extend((1000u64 * i).to_le_bytes());
            f.extend((GOLDEN.len() as u16).to_le_bytes());
            f.extend(GOLDEN);
        }
        std::fs::write(dir.join(format!("vcpu{vcpu}.rec")), f).unwrap();
    }
    dir
}

#[test]
fn export_writes_raw_spe_per_vcpu() {
    let dir = recording("export");
    let out_dir = dir.join("raw");
    let out = Command::new(BIN)
        .arg("export")
        .arg(&dir)
        .arg("-o")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = GOLDEN.len();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "{}: 2 record(s), {} bytes\n{}: 1 record(s), {n} bytes\n",
            out_dir.join("vcpu0.spe").display(),
            2 * n,
            out_dir.join("vcpu1.spe").display()
        )
    );
    assert_eq!(
        std::fs::read(out_dir.join("vcpu0.spe")).unwrap(),
        GOLDEN.repeat(2)
    );
    assert_eq!(std::fs::read(out_dir.join("vcpu1.spe")).unwrap(), GOLDEN);
    // The raw file decodes as GOLDEN does.
    let raw = Command::new(BIN)
        .arg("decode")
        .arg(out_dir.join("vcpu1.spe"))
        .output()
        .unwrap();
    assert_eq!(descriptions(&raw.stdout), expected());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn decode_reads_a_recording_per_vcpu() {
    let dir = recording("rec");
    let rec = dir.join("vcpu1.rec");
    let out = Command::new(BIN).arg("decode").arg(&rec).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let (header, packets) = text.split_once('\n').unwrap();
    assert_eq!(
        header,
        format!(
            "# {}: 1 record(s), {} bytes of SPE data",
            rec.display(),
            GOLDEN.len()
        )
    );
    assert_eq!(descriptions(packets.as_bytes()), expected());
    // The directory: vCPU 0's two records (the second at offset 0x28),
    // then vCPU 1's.
    let out = Command::new(BIN).arg("decode").arg(&dir).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(headers.len(), 2, "{text}");
    assert!(headers[0].contains("vcpu0.rec: 2 record(s)"), "{text}");
    assert!(headers[1].contains("vcpu1.rec: 1 record(s)"), "{text}");
    assert!(text.contains(".  00000028:  b0 f4 d3 29"), "{text}");
    assert_eq!(text.lines().count(), 2 + 3 * GOLDEN_TEXT.len());
    // From stdin too.
    let data = std::fs::read(&rec).unwrap();
    let out = decode_stdin(&data);
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout)
        .unwrap()
        .starts_with("# stdin: 1 record(s)"));
    // A damaged frame fails, naming the file.
    std::fs::write(&rec, &data[..data.len() - 1]).unwrap();
    let out = Command::new(BIN).arg("decode").arg(&rec).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        format!("error: {}: truncated record at byte 8\n", rec.display())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
