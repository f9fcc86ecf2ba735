//! Which threads run the vCPUs. Single-threaded TCG (`-accel
//! tcg,thread=single`) runs every vCPU on one thread, and there QEMU
//! 10.2's plugin code generation (`gen_cpu_index` in
//! accel/tcg/plugin-gen.c) compiles a block's scoreboard index and its
//! callbacks' vCPU as the constant index of the vCPU that translated it.
//! The other vCPUs, which run the same block, then count into its entry;
//! and for a vCPU other than 0 the multiply QEMU emits into that
//! constant changes the block's other uses of it (QEMU then aborts in
//! `arm_mmu_idx_el` with an exception level of the scoreboard's entry
//! size). With one vCPU the
//! constant is right.

use std::thread::ThreadId;

/// The thread each vCPU's init ran on (QEMU runs it on the vCPU's own).
#[derive(Debug, Default)]
pub struct VcpuThreads(Vec<ThreadId>);

impl VcpuThreads {
    /// Records that a vCPU's init ran on `thread`; true if another
    /// vCPU's did too.
    pub fn init_on(&mut self, thread: ThreadId) -> bool {
        let shared = self.0.contains(&thread);
        self.0.push(thread);
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn a_thread_per_vcpu_is_not_shared() {
        let mut t = VcpuThreads::default();
        let ids: Vec<_> = (0..4)
            .map(|_| thread::spawn(|| thread::current().id()).join().unwrap())
            .collect();
        assert!(ids.into_iter().all(|id| !t.init_on(id)));
    }

    #[test]
    fn a_second_vcpu_on_the_same_thread_is_seen() {
        let mut t = VcpuThreads::default();
        let other = thread::spawn(|| thread::current().id()).join().unwrap();
        assert!(!t.init_on(thread::current().id()));
        assert!(!t.init_on(other));
        assert!(t.init_on(thread::current().id()));
    }
}
