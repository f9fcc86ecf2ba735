//! Golden bytes, round trips and malformed streams for the SPE packet codec.

use proptest::prelude::*;
use spe_protocol::packet::{
    address_payload, data_pa_payload, decode, events, op, AddressIndex, CounterIndex, DecodeError,
    DecodeErrorKind, OpType, Packet, PayloadLen, MAX_PACKET_LEN,
};

/// Known-good bytes from real hardware (record-format.md), the packet they
/// hold and perf's text for it.
fn golden() -> Vec<(&'static [u8], Packet, &'static str)> {
    vec![
        (
            &[0x49, 0x00],
            Packet::OpType(OpType::LoadStore(0)),
            // perf >= 5.11 appends the subclass; the reference notes show the older "LD".
            "LD GP-REG",
        ),
        (
            &[0xb2, 0xc0, 0x3b, 0x29, 0x0f, 0x00, 0x00, 0xff, 0xff],
            Packet::Address {
                index: AddressIndex::DataVirtual,
                payload: 0xffff_0000_0f29_3bc0,
            },
            "VA 0xffff00000f293bc0",
        ),
        (
            &[0x9a, 0x00, 0x00],
            Packet::Counter {
                index: CounterIndex::TranslationLatency,
                value: 0,
            },
            "LAT 0 XLAT",
        ),
        (
            &[0x42, 0x16],
            Packet::Events {
                len: PayloadLen::B1,
                bits: events::RETIRED | events::L1D_ACCESS | events::TLB_ACCESS,
            },
            "EV RETIRED L1D-ACCESS TLB-ACCESS",
        ),
        (
            &[0x71, 0x36, 0x6c, 0x21, 0x2c, 0x09, 0x00, 0x00, 0x00],
            Packet::Timestamp(39_395_093_558),
            "TS 39395093558",
        ),
        (
            &[0xb0, 0xf4, 0xd3, 0x29, 0x10, 0x00, 0x80, 0xff, 0xa0],
            Packet::Address {
                index: AddressIndex::Pc,
                payload: address_payload(0xffff_8000_1029_d3f4, 1, true, false),
            },
            "PC 0xff80001029d3f4 el1 ns=1",
        ),
        (
            &[0x52, 0x16, 0x00],
            Packet::Events {
                len: PayloadLen::B2,
                bits: 0x16,
            },
            "EV RETIRED L1D-ACCESS TLB-ACCESS",
        ),
    ]
}

#[test]
fn golden_decode() {
    for (bytes, want, text) in golden() {
        let got: Vec<_> = decode(bytes).collect();
        assert_eq!(got, vec![Ok((0, want))], "bytes {bytes:02x?}");
        assert_eq!(want.to_string(), text, "bytes {bytes:02x?}");
        assert_eq!(Packet::decode(bytes), Ok((want, bytes.len())));
    }
}

#[test]
fn golden_encode() {
    for (bytes, pkt, _) in golden() {
        let mut out = vec![0xEE];
        pkt.encode(&mut out);
        assert_eq!(&out[1..], bytes, "{pkt:?}");
        assert_eq!(out[0], 0xEE, "encode must append, not overwrite");
        assert_eq!(pkt.encoded_len(), bytes.len());
    }
}

#[test]
fn golden_record_stream_offsets() {
    let mut stream = Vec::new();
    let mut offsets = Vec::new();
    for (bytes, _, _) in golden() {
        offsets.push(stream.len());
        stream.extend_from_slice(bytes);
    }
    let got: Vec<(usize, Packet)> = decode(&stream).map(Result::unwrap).collect();
    let want: Vec<(usize, Packet)> = offsets
        .into_iter()
        .zip(golden().into_iter().map(|g| g.1))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn address_payload_layout() {
    // The PC golden packet's top byte 0xa0: NS=1, EL=1, NSE=0.
    assert_eq!(
        address_payload(0xffff_8000_1029_d3f4, 1, true, false),
        0xa0ff_8000_1029_d3f4
    );
    assert_eq!(
        address_payload(0x1234, 2, false, true),
        0x5000_0000_0000_1234
    );
    assert_eq!(
        address_payload(u64::MAX, 3, false, false),
        0x60ff_ffff_ffff_ffff
    );
    assert_eq!(
        data_pa_payload(0x8_0000_1000, true, false, true, 0xA),
        0xCA00_0008_0000_1000
    );
    assert_eq!(
        data_pa_payload(u64::MAX, false, true, false, 0xFF),
        0x1fff_ffff_ffff_ffff
    );
}

#[test]
fn headers_of_each_packet_kind() {
    let cases: Vec<(Packet, Vec<u8>)> = vec![
        (Packet::Padding, vec![0x00]),
        (Packet::End, vec![0x01]),
        (
            Packet::Context {
                el2: false,
                id: 0x1234_5678,
            },
            vec![0x64, 0x78, 0x56, 0x34, 0x12],
        ),
        (Packet::Context { el2: true, id: 7 }, vec![0x65, 7, 0, 0, 0]),
        (
            Packet::OpType(OpType::Other(op::OTHER_COND_SELECT)),
            vec![0x48, 0x01],
        ),
        (
            Packet::OpType(OpType::LoadStore(op::LDST_STORE)),
            vec![0x49, 0x01],
        ),
        (
            Packet::OpType(OpType::Branch(op::BRANCH_COND | op::BRANCH_IND)),
            vec![0x4a, 0x03],
        ),
        (
            Packet::Events {
                len: PayloadLen::B4,
                bits: 1 << 25,
            },
            vec![0x62, 0, 0, 0, 2],
        ),
        (
            Packet::Events {
                len: PayloadLen::B8,
                bits: 1 << 63,
            },
            vec![0x72, 0, 0, 0, 0, 0, 0, 0, 0x80],
        ),
        (
            Packet::DataSource {
                len: PayloadLen::B1,
                value: 0x0b,
            },
            vec![0x43, 0x0b],
        ),
        (
            Packet::DataSource {
                len: PayloadLen::B2,
                value: 0x0102,
            },
            vec![0x53, 0x02, 0x01],
        ),
        (
            Packet::Counter {
                index: CounterIndex::TotalLatency,
                value: 0x0fff,
            },
            vec![0x98, 0xff, 0x0f],
        ),
        (
            Packet::Counter {
                index: CounterIndex::IssueLatency,
                value: 5,
            },
            vec![0x99, 5, 0],
        ),
        (
            Packet::Counter {
                index: CounterIndex::AltClockIssue,
                value: 2,
            },
            vec![0x9c, 2, 0],
        ),
        // Index 9 = 0b01_001: extended header 0x21, then 0x98|1.
        (
            Packet::Counter {
                index: CounterIndex::Other(9),
                value: 0xabcd,
            },
            vec![0x21, 0x99, 0xcd, 0xab],
        ),
        (
            Packet::Address {
                index: AddressIndex::PrevBranchTarget,
                payload: 0x0102_0304_0506_0708,
            },
            vec![0xb4, 8, 7, 6, 5, 4, 3, 2, 1],
        ),
        (
            Packet::Address {
                index: AddressIndex::Other(31),
                payload: 1,
            },
            vec![0x23, 0xb7, 1, 0, 0, 0, 0, 0, 0, 0],
        ),
    ];
    for (pkt, bytes) in cases {
        let mut out = Vec::new();
        pkt.encode(&mut out);
        assert_eq!(out, bytes, "{pkt:?}");
        assert_eq!(pkt.encoded_len(), bytes.len(), "{pkt:?}");
        assert_eq!(
            Packet::decode(&bytes),
            Ok((pkt, bytes.len())),
            "{bytes:02x?}"
        );
    }
}

#[test]
fn extended_header_with_small_index_decodes_to_named_index() {
    // Hardware may use the long form for any index; decode canonicalises it.
    let bytes = [0x20, 0xb1, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        Packet::decode(&bytes),
        Ok((
            Packet::Address {
                index: AddressIndex::BranchTarget,
                payload: 0
            },
            10
        ))
    );
}

#[test]
fn display_notation() {
    let cases: Vec<(Packet, &str)> = vec![
        (Packet::Padding, "PAD"),
        (Packet::End, "END"),
        (Packet::Counter { index: CounterIndex::TotalLatency, value: 5 }, "LAT 5 TOT"),
        (Packet::Counter { index: CounterIndex::IssueLatency, value: 2 }, "LAT 2 ISSUE"),
        (Packet::Counter { index: CounterIndex::AltClockIssue, value: 3 }, "LAT 3 "),
        (Packet::Context { el2: false, id: 0x2a }, "CONTEXT 0x2a el1"),
        (Packet::Context { el2: true, id: 0xffff }, "CONTEXT 0xffff el2"),
        (Packet::DataSource { len: PayloadLen::B2, value: 0x0b }, "DATA-SOURCE 11"),
        (
            Packet::Address {
                index: AddressIndex::BranchTarget,
                payload: address_payload(0xffff_8000_1000_0000, 1, true, false),
            },
            "TGT 0xff800010000000 el1 ns=1",
        ),
        (
            Packet::Address {
                index: AddressIndex::PrevBranchTarget,
                payload: address_payload(0x40_0000, 0, false, false),
            },
            "PBT 0x400000 el0 ns=0",
        ),
        (
            Packet::Address {
                index: AddressIndex::DataPhysical,
                payload: data_pa_payload(0x8_1234_5000, true, false, true, 0xb),
            },
            "PA 0x812345000 ns=1 ch=1 pat=b",
        ),
        (Packet::Address { index: AddressIndex::Other(9), payload: 0x10 }, "ADDR 0x10 (9)"),
        (
            Packet::Events {
                len: PayloadLen::B8,
                bits: events::EXCEPTION_GEN
                    | events::MISPRED
                    | events::LLC_MISS
                    | events::MISALIGNED
                    | events::TLB_WALK
                    | events::L2D_MISS
                    | events::SMCU
                    | (1 << 12)
                    | (1 << 13)
                    | (1 << 48),
            },
            "EV EXCEPTION-GEN TLB-REFILL MISPRED LLC-REFILL ALIGNMENT L2D-MISS SMCU IMPDEF:12,13,48",
        ),
        (Packet::Events { len: PayloadLen::B1, bits: 0 }, "EV"),
        (Packet::OpType(OpType::LoadStore(op::LDST_STORE | op::LDST_SIMD_FP)), "ST SIMD-FP"),
        (
            Packet::OpType(OpType::LoadStore(op::LDST_EXT | op::LDST_AT | op::LDST_EXCL | op::LDST_AR)),
            "LD AT EXCL AR",
        ),
        (Packet::OpType(OpType::LoadStore(op::LDST_UNSPEC)), "LD UNSPEC-REG"),
        (Packet::OpType(OpType::LoadStore(op::LDST_MTE_TAG | 1)), "ST MTE-TAG"),
        (Packet::OpType(OpType::LoadStore(op::LDST_MEMCPY)), "LD MEMCPY"),
        (Packet::OpType(OpType::LoadStore(op::LDST_MEMSET)), "ST MEMSET"),
        (
            Packet::OpType(OpType::LoadStore(
                op::LDST_SVE | op::sve_evl(256) | op::LDST_SVE_PRED | op::LDST_SVE_SG,
            )),
            "LD SVE-SME-REG EVLEN 256 PRED SG",
        ),
        (Packet::OpType(OpType::LoadStore(op::LDST_GCS | op::LDST_GCS_COMM | 1)), "ST GCS COMM"),
        (Packet::OpType(OpType::Branch(0)), "B"),
        (Packet::OpType(OpType::Branch(op::BRANCH_COND | op::BRANCH_IND)), "B COND IND"),
        (Packet::OpType(OpType::Branch(op::BRANCH_CR_BL)), "B CR-BL"),
        (Packet::OpType(OpType::Branch(op::BRANCH_IND | op::BRANCH_GCS | op::BRANCH_CR_RET)), "B IND GCS CR-RET"),
        (Packet::OpType(OpType::Other(0)), "OTHER INSN-OTHER"),
        (Packet::OpType(OpType::Other(op::OTHER_COND_SELECT)), "OTHER COND-SELECT"),
        (Packet::OpType(OpType::Other(op::OTHER_ASE | op::OTHER_FP)), "OTHER ASE FP INSN-OTHER"),
        (Packet::OpType(OpType::Other(op::OTHER_SVE | op::sve_evl(128) | op::OTHER_FP)), "SVE-OTHER EVLEN 128 FP"),
        (Packet::OpType(OpType::Other(op::OTHER_SME | 0x10 | 0x04)), "SME-OTHER ETS 1024"),
        (Packet::OpType(OpType::Other(0x81)), "OP-TYPE 0x81 (0)"),
    ];
    for (pkt, text) in cases {
        assert_eq!(pkt.to_string(), text, "{pkt:?}");
    }
}

#[test]
fn truncated_payload_reports_packet_offset() {
    // Good End at 0, timestamp at 1 cut after 3 payload bytes.
    let bytes = [0x01, 0x71, 1, 2, 3];
    let got: Vec<_> = decode(&bytes).collect();
    assert_eq!(
        got,
        vec![
            Ok((0, Packet::End)),
            Err(DecodeError {
                offset: 1,
                kind: DecodeErrorKind::Truncated {
                    header: 0x71,
                    needed: 9,
                    available: 4
                },
            }),
        ]
    );
    // Every proper prefix of a multi-byte packet is truncated at offset 0.
    for (bytes, _, _) in golden() {
        for cut in 1..bytes.len() {
            let first = decode(&bytes[..cut]).next().unwrap();
            assert!(
                matches!(
                    first,
                    Err(DecodeError {
                        offset: 0,
                        kind: DecodeErrorKind::Truncated { .. }
                    })
                ),
                "{bytes:02x?} cut at {cut}: {first:?}"
            );
        }
    }
}

#[test]
fn truncated_extended_header() {
    let bytes = [0x00, 0x00, 0x22];
    let err = decode(&bytes).find_map(Result::err).unwrap();
    assert_eq!(err.offset, 2);
    assert_eq!(
        err.kind,
        DecodeErrorKind::Truncated {
            header: 0x22,
            needed: 2,
            available: 1
        }
    );
    let bytes = [0x22, 0x98, 0x01];
    let err = decode(&bytes).next().unwrap().unwrap_err();
    assert_eq!(
        err,
        DecodeError {
            offset: 0,
            kind: DecodeErrorKind::Truncated {
                header: 0x22,
                needed: 4,
                available: 3
            }
        }
    );
}

#[test]
fn unknown_headers_report_offset_and_stop() {
    for hdr in [0x02u8, 0x4b, 0x66, 0x67, 0x80, 0xff, 0x44, 0x90, 0xa8, 0xc0] {
        let bytes = [0x49, 0x00, 0x01, hdr, 0x00, 0x00, 0x00, 0x00, 0x00];
        let got: Vec<_> = decode(&bytes).collect();
        assert_eq!(got.len(), 3, "decoder must stop after the error: {got:?}");
        assert_eq!(
            got[2],
            Err(DecodeError {
                offset: 3,
                kind: DecodeErrorKind::UnknownHeader(hdr)
            }),
            "header {hdr:#x}"
        );
    }
    let err = decode(&[0x21, 0x42, 0x00]).next().unwrap().unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::UnknownExtendedHeader(0x21, 0x42));
    assert_eq!(
        err.to_string(),
        "at offset 0: unknown extended header 0x21 0x42"
    );
}

#[test]
fn every_header_byte_is_classified() {
    // No header byte may panic, and every accepted one must re-encode to itself.
    for hdr in 0..=255u8 {
        let mut bytes = [0u8; 12];
        bytes[0] = hdr;
        bytes[1] = 0xb3;
        match Packet::decode(&bytes) {
            Ok((pkt, len)) => {
                let mut out = Vec::new();
                pkt.encode(&mut out);
                if hdr == 0x20 {
                    // Extended form of a short index: re-encodes to the short form.
                    assert_eq!(out, &bytes[1..len], "header {hdr:#x}");
                } else {
                    assert_eq!(out, &bytes[..len], "header {hdr:#x}");
                }
            }
            Err(DecodeErrorKind::UnknownHeader(h)) => assert_eq!(h, hdr),
            Err(e) => panic!("header {hdr:#x}: {e}"),
        }
    }
}

#[test]
fn empty_stream_has_no_packets() {
    assert_eq!(decode(&[]).count(), 0);
}

fn payload_len() -> impl Strategy<Value = PayloadLen> {
    prop_oneof![
        Just(PayloadLen::B1),
        Just(PayloadLen::B2),
        Just(PayloadLen::B4),
        Just(PayloadLen::B8)
    ]
}

fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        Just(Packet::Padding),
        Just(Packet::End),
        any::<u64>().prop_map(Packet::Timestamp),
        (payload_len(), any::<u64>()).prop_map(|(len, v)| Packet::Events {
            len,
            bits: v & len.mask()
        }),
        (payload_len(), any::<u64>()).prop_map(|(len, v)| Packet::DataSource {
            len,
            value: v & len.mask()
        }),
        (any::<bool>(), any::<u32>()).prop_map(|(el2, id)| Packet::Context { el2, id }),
        any::<u8>().prop_map(|v| Packet::OpType(OpType::Other(v))),
        any::<u8>().prop_map(|v| Packet::OpType(OpType::LoadStore(v))),
        any::<u8>().prop_map(|v| Packet::OpType(OpType::Branch(v))),
        (0u8..32, any::<u64>()).prop_map(|(i, payload)| Packet::Address {
            index: AddressIndex::from_raw(i),
            payload
        }),
        (0u8..32, any::<u16>()).prop_map(|(i, value)| Packet::Counter {
            index: CounterIndex::from_raw(i),
            value
        }),
    ]
}

proptest! {
    #[test]
    fn roundtrip_stream(pkts in prop::collection::vec(packet(), 0..64)) {
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        for p in &pkts {
            want.push((bytes.len(), *p));
            p.encode(&mut bytes);
            prop_assert_eq!(bytes.len() - want.last().unwrap().0, p.encoded_len());
            prop_assert!(p.encoded_len() <= MAX_PACKET_LEN);
        }
        let got: Result<Vec<_>, _> = decode(&bytes).collect();
        prop_assert_eq!(got.unwrap(), want);
    }

    #[test]
    fn display_never_panics_and_is_nonempty(p in packet()) {
        prop_assert!(!p.to_string().is_empty());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut end = 0;
        for item in decode(&bytes) {
            match item {
                Ok((off, p)) => {
                    prop_assert_eq!(off, end);
                    let (q, len) = Packet::decode(&bytes[off..]).unwrap();
                    prop_assert_eq!(p, q);
                    end = off + len;
                }
                Err(e) => { prop_assert_eq!(e.offset, end); }
            }
        }
    }
}
