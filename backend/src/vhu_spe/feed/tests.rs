//! The feed over a real socket and a real memfd ring, with the plugin's
//! side played by the channel client and the ring producer, as the
//! plugin uses them.

use super::*;
use crate::spu::test_util::{linux_spu, load, mem, BUF_VA};
use crate::spu::Features;
use spe_channel::client::{ChannelClient, FrontRing};

fn socket(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("spe-feed-{}-{name}.sock", std::process::id()))
}

/// Connects as the plugin does; returns the client (kept open), the
/// ring and the HELLO or SET_RING status.
fn plugin(path: &Path, vcpus: u32) -> (ChannelClient, Option<FrontRing>, u32) {
    let mut c = ChannelClient::connect(path).unwrap();
    let hello = c.hello(vcpus).unwrap();
    if hello.status != Status::OK {
        return (c, None, hello.status);
    }
    let layout = Layout {
        vcpus,
        slots: hello.ring_slots,
    };
    assert_eq!(hello.ring_size, layout.size() as u64);
    assert_ne!(hello.features & feature::SAMPLING_STATE, 0);
    let ring = FrontRing::create(layout).unwrap();
    let s = c.attach_ring(&ring).unwrap();
    (c, Some(ring), s.status)
}

fn attached(feed: &Feed) -> bool {
    for _ in 0..500 {
        if lock(&feed.attached).is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

#[test]
fn samples_reach_the_spus_and_the_state_reaches_the_plugin() {
    let path = socket("ok");
    let feed = Feed::listen(&path, 2).unwrap();
    let (_client, ring, status) = plugin(&path, 2);
    assert_eq!(status, Status::OK);
    let mut producer = ring.unwrap().producer;
    assert!(attached(&feed));

    let m = mem(8 << 20);
    let (spu0, _tables) = linux_spu(&m, Features::default(), 4);
    let mut spus = vec![spu0, Spu::new(Features::default())];
    // What the driver programmed reaches the plugin: vCPU 0 samples at
    // EL0 and EL1 every 256 operations, vCPU 1 not at all.
    feed.publish(&spus);
    let (_, s0) = producer.sampling_state(0);
    assert_eq!((s0.interval, s0.enabled_els), (256, 0b11));
    assert_eq!(producer.sampling_state(1).1.enabled_els, 0);
    assert!(feed.sampling.load(Ordering::Relaxed));

    // Three samples on vCPU 0 become three records in its buffer.
    let ops: Vec<SampledOp> = (0..3).map(|i| load(0x1000 + 4 * i, BUF_VA - 64)).collect();
    assert_eq!(producer.push(0, &ops), 3);
    producer.count(0, 3 * 257);
    let d = feed.drain(&mut spus, Some(&m));
    assert_eq!(
        d,
        Drained {
            applied: 3,
            dropped: 0
        }
    );
    let stats = spus[0].stats();
    assert_eq!((stats.records, stats.counted), (3, 3 * 257));
    assert_eq!(spus[0].regs().pmbptr, BUF_VA + stats.bytes);

    // Without guest memory (no driver yet) they are dropped, not kept.
    producer.push(0, &ops[..1]);
    assert_eq!(
        feed.drain(&mut spus, None::<&crate::spu::test_util::Mem>),
        Drained {
            applied: 0,
            dropped: 1
        }
    );
    drop(_client);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_plugin_with_another_vcpu_count_is_refused_and_the_next_accepted() {
    let path = socket("vcpus");
    let feed = Feed::listen(&path, 2).unwrap();
    let (_c, ring, status) = plugin(&path, 4);
    assert_eq!(status, Status::BAD_VCPU);
    assert!(ring.is_none());
    let (_c2, ring, status) = plugin(&path, 2);
    assert_eq!(status, Status::OK);
    assert!(ring.is_some());
    assert!(attached(&feed));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_ring_goes_when_the_plugin_hangs_up() {
    let path = socket("hangup");
    let feed = Feed::listen(&path, 1).unwrap();
    let (client, _ring, status) = plugin(&path, 1);
    assert_eq!(status, Status::OK);
    assert!(attached(&feed));
    drop(client);
    let mut gone = false;
    for _ in 0..500 {
        if lock(&feed.attached).is_none() {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(gone, "the feed still holds the ring of a plugin that left");
    let mut spus = vec![Spu::new(Features::default())];
    let m = mem(1 << 20);
    assert_eq!(feed.drain(&mut spus, Some(&m)), Drained::default());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn garbage_instead_of_hello_drops_the_connection() {
    let path = socket("garbage");
    let feed = Feed::listen(&path, 1).unwrap();
    let mut c = ChannelClient::connect(&path).unwrap();
    c.send_raw(&[0xff; 64], &[]).unwrap();
    // The feed closes the connection and takes the next plugin.
    let mut b = [0u8; 1];
    use std::io::Read;
    let _ = c.stream().set_read_timeout(Some(Duration::from_secs(5)));
    assert_eq!(c.stream().read(&mut b).unwrap_or(0), 0);
    let (_c2, _p, status) = plugin(&path, 1);
    assert_eq!(status, Status::OK);
    assert!(attached(&feed));
    let _ = std::fs::remove_file(&path);
}
