//! `spe_protocol::a64::classify` is the twin of the patched QEMU's
//! `spe_classify()`: the TCG plugin classifies with the one, full
//! emulation with the other. This compiles the C function as each QEMU
//! release's series adds it (`qemu-patches/<version>/`, the patch that
//! adds `spe_classify(uint32_t insn)`, with the `SPE_OP_*` definitions of
//! the same patch) and runs both on the same encodings: every top byte
//! with pseudo-random low bits, plus random ones. Needs a C compiler
//! (`cc`), as the set-up's QEMU build does.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use spe_protocol::a64::classify;
use spe_protocol::op::OpClass;

const SIGNATURE: &str = "+static uint32_t spe_classify(uint32_t insn)";

/// The `#define SPE_OP_*` lines and the function, from the patch that
/// adds it, as C.
fn c_source(patch: &str) -> String {
    let mut out = String::from(
        "#include <stdint.h>\n#include <stdio.h>\n#include <stdbool.h>\n\
         #define MIN(a, b) ((a) < (b) ? (a) : (b))\n\
         static uint32_t extract32(uint32_t v, int s, int n)\n\
         { return (v >> s) & ((1u << n) - 1); }\n",
    );
    for line in patch.lines() {
        if let Some(d) = line.strip_prefix("+#define SPE_OP_") {
            out.push_str("#define SPE_OP_");
            out.push_str(d);
            out.push('\n');
        }
    }
    let start = patch.find(SIGNATURE).expect("the patch adds spe_classify");
    for line in patch[start..].lines() {
        out.push_str(line.strip_prefix('+').expect("an added line"));
        out.push('\n');
        if line == "+}" {
            break;
        }
    }
    out.push_str(
        "int main(void)\n{\n    unsigned int insn;\n\
         while (scanf(\"%x\", &insn) == 1) {\n\
         printf(\"%08x\\n\", spe_classify(insn));\n    }\n    return 0;\n}\n",
    );
    out
}

/// The Rust answer in `spe_classify()`'s packing (`SPE_OP_*`).
fn packed(insn: u32) -> u32 {
    let info = classify(insn);
    let (class, a, b, v, sub) = match info.class {
        OpClass::Other {
            cond_select,
            subclass,
        } => (0, cond_select, false, false, subclass),
        OpClass::LoadStore {
            store,
            subclass,
            vector,
        } => (1, store, false, vector, subclass),
        OpClass::Branch {
            conditional,
            indirect,
        } => (2, conditional, indirect, false, 0),
    };
    class
        | u32::from(a) << 2
        | u32::from(b) << 3
        | u32::from(v) << 4
        | u32::from(sub) << 8
        | u32::from(info.size) << 16
}

fn encodings() -> Vec<u32> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u32
    };
    let mut all = Vec::new();
    for top in 0..=255u32 {
        for _ in 0..256 {
            all.push(top << 24 | next() & 0x00ff_ffff);
        }
    }
    all.extend((0..100_000).map(|_| next()));
    all
}

fn series_with_classifier() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-patches");
    let mut found = Vec::new();
    for dir in std::fs::read_dir(&root).expect("qemu-patches/") {
        let dir = dir.unwrap().path();
        for p in std::fs::read_dir(&dir).unwrap() {
            let p = p.unwrap().path();
            if std::fs::read_to_string(&p).is_ok_and(|t| t.contains(SIGNATURE)) {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn rust_classifier_matches_the_series() {
    let patches = series_with_classifier();
    assert_eq!(
        patches.len(),
        1,
        "one classifier in the series: {patches:?}"
    );
    let encodings = encodings();
    let input: String = encodings.iter().map(|e| format!("{e:x}\n")).collect();
    let dir = std::env::temp_dir().join(format!("spe-classify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for patch in patches {
        let src = dir.join("classify.c");
        let bin = dir.join("classify");
        std::fs::write(&src, c_source(&std::fs::read_to_string(&patch).unwrap())).unwrap();
        let cc = Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("a C compiler (cc)");
        assert!(
            cc.success(),
            "{}: C classifier did not build",
            patch.display()
        );
        let mut child = Command::new(&bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Written from another thread: the child's replies would fill
        // its stdout pipe while we still write.
        let mut stdin = child.stdin.take().unwrap();
        let bytes = input.clone();
        let writer = std::thread::spawn(move || stdin.write_all(bytes.as_bytes()));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        let c: Vec<u32> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| u32::from_str_radix(l, 16).unwrap())
            .collect();
        assert_eq!(c.len(), encodings.len());
        let differ: Vec<String> = encodings
            .iter()
            .zip(&c)
            .filter(|(&e, &c)| packed(e) != c)
            .take(10)
            .map(|(e, c)| format!("{e:08x}: C {c:08x}, Rust {:08x}", packed(*e)))
            .collect();
        assert!(
            differ.is_empty(),
            "{}: the classifiers differ\n{}",
            patch.display(),
            differ.join("\n")
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
