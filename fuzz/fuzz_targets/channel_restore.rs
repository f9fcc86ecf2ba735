#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vhost_device_spe::fuzzing::channel_restore(data));
