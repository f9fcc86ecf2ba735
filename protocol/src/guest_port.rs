//! The guest control port: a virtio-serial port of this name, whose
//! QEMU chardev connects to the backend's `--guest-control-socket`.

use std::path::Path;

/// The port's name, under which the guest finds it
/// (`/sys/class/virtio-ports/*/name`, udev's `/dev/virtio-ports/NAME`).
pub const NAME: &str = "org.vhost-device-spe.control";

/// QEMU's options for the port on the backend's socket at `path`: a
/// virtio-serial bus of its own and the named port, whose chardev
/// reconnects when the backend comes back.
pub fn qemu_args(path: &Path) -> Vec<String> {
    vec![
        "-chardev".into(),
        format!(
            "socket,id=spe-guest-control,path={},reconnect-ms=1000",
            path.display()
        ),
        "-device".into(),
        "virtio-serial-pci,id=spe-serial".into(),
        "-device".into(),
        format!("virtserialport,bus=spe-serial.0,chardev=spe-guest-control,name={NAME}"),
    ]
}
