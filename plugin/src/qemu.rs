//! QEMU's side: the plugin's entry points and callbacks, over the C API
//! (`qemu-plugin-sys`, API version 5: QEMU 10.1 and 10.2).
//!
//! Per TB, one inline add takes its instructions off the vCPU's counter
//! and one conditional callback catches a missed selection; per
//! instruction, one conditional callback (`count.rs`) fires only when the
//! instruction is the selected one, with register reads allowed, and
//! builds its record (`capture.rs`) before it runs.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use qemu_plugin_sys::*;
use spe_protocol::a64::Registers;
use spe_protocol::regs::El;

use crate::capture::{self, Context, Vcpu};
use crate::count;
use crate::feed::Feed;

#[no_mangle]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

extern "C" {
    fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut c_char;
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_byte_array_set_size(array: *mut GByteArray, length: c_uint) -> *mut GByteArray;
}

/// One instruction of a translated TB: a callback's user data.
struct Insn {
    pc: u64,
    encoding: u32,
}

/// A vCPU's register handles and read buffer (its own thread only).
struct Regs {
    x: [*mut qemu_plugin_register; 31],
    sp: *mut qemu_plugin_register,
    cpsr: *mut qemu_plugin_register,
    contextidr_el1: Option<*mut qemu_plugin_register>,
    cntfrq: Option<*mut qemu_plugin_register>,
    elr: [Option<*mut qemu_plugin_register>; 4],
    buf: *mut GByteArray,
}

struct VcpuState {
    regs: Option<Regs>,
    rng: u32,
    /// CNTFRQ_EL0, read at the vCPU's first sample.
    freq: Option<u64>,
}

// SAFETY: the handles are QEMU's, valid for the vCPU's life and the same
// for every vCPU of one type; the buffer is only used under the state's
// mutex.
unsafe impl Send for VcpuState {}

/// The scoreboard entry the counter lives in.
struct Entry(qemu_plugin_u64);
// SAFETY: QEMU's scoreboard is per vCPU and its accessors take the index.
unsafe impl Send for Entry {}
unsafe impl Sync for Entry {}

struct Plugin {
    entry: Entry,
    vcpus: Box<[Mutex<VcpuState>]>,
    feed: Mutex<Feed>,
    /// The instructions of the TBs translated since the last flush.
    insns: Mutex<Vec<Box<[Insn]>>>,
    /// When the vCPUs first ran: QEMU's virtual clock starts about then.
    started: OnceLock<Instant>,
    counts: Counts,
}

/// What the callbacks did, for the summary at exit.
#[derive(Default)]
struct Counts {
    /// Selections (the instruction callback fired).
    selected: AtomicU64,
    /// Selections while no EL sampled on the vCPU (a look at the state).
    idle: AtomicU64,
    /// Selections at an EL where profiling was off.
    other_el: AtomicU64,
    /// Counters reloaded after a missed selection.
    resyncs: AtomicU64,
    /// Operations handed to the backend.
    sampled: AtomicU64,
    /// Operations lost to a full ring.
    lost: AtomicU64,
}

static PLUGIN: OnceLock<Plugin> = OnceLock::new();

fn out(msg: &str) {
    if let Ok(s) = CString::new(format!("spe-plugin: {msg}\n")) {
        // SAFETY: a valid C string, copied by QEMU.
        unsafe { qemu_plugin_outs(s.as_ptr()) };
    }
}

fn plugin() -> &'static Plugin {
    PLUGIN
        .get()
        .expect("callbacks are registered after install")
}

impl Regs {
    /// The handles of the current vCPU (its init callback).
    fn of_current_vcpu() -> Option<Regs> {
        // SAFETY: called in a vCPU init callback, as the API asks.
        let array = unsafe { qemu_plugin_get_registers() };
        if array.is_null() {
            return None;
        }
        let mut found = std::collections::HashMap::new();
        // SAFETY: a GArray of `len` descriptors, freed below.
        let descs = unsafe {
            std::slice::from_raw_parts(
                (*array).data as *const qemu_plugin_reg_descriptor,
                (*array).len as usize,
            )
        };
        for d in descs {
            // SAFETY: QEMU's register names are C strings it keeps.
            let name = unsafe { CStr::from_ptr(d.name) }
                .to_string_lossy()
                .into_owned();
            found.insert(name, d.handle);
        }
        // SAFETY: frees the array we were given (not the names).
        unsafe { g_array_free(array, 1) };
        let get = |n: &str| found.get(n).copied();
        let mut x = [std::ptr::null_mut(); 31];
        for (i, h) in x.iter_mut().enumerate() {
            *h = get(&format!("x{i}"))?;
        }
        Some(Regs {
            x,
            sp: get("sp")?,
            cpsr: get("cpsr")?,
            contextidr_el1: get("CONTEXTIDR_EL1"),
            cntfrq: get("CNTFRQ_EL0"),
            elr: [None, get("ELR_EL1"), get("ELR_EL2"), get("ELR_EL3")],
            // SAFETY: a new, empty array this state owns.
            buf: unsafe { g_byte_array_new() },
        })
    }

    /// Reads a register of the running vCPU (little-endian, up to 8 bytes).
    fn read(&mut self, h: *mut qemu_plugin_register) -> u64 {
        // SAFETY: our buffer; QEMU appends the register's bytes to it, in
        // a callback registered with QEMU_PLUGIN_CB_R_REGS.
        unsafe {
            g_byte_array_set_size(self.buf, 0);
            let n = qemu_plugin_read_register(h, self.buf);
            let len = ((*self.buf).len as usize).min(8);
            if n <= 0 || len == 0 {
                return 0;
            }
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(std::slice::from_raw_parts((*self.buf).data, len));
            u64::from_le_bytes(b)
        }
    }
}

impl Registers for Regs {
    fn x(&mut self, n: u8) -> u64 {
        match self.x.get(usize::from(n)) {
            Some(&h) => self.read(h),
            None => 0, // XZR
        }
    }
    fn sp(&mut self) -> u64 {
        self.read(self.sp)
    }
}

impl Vcpu for Regs {
    fn nzcv(&mut self) -> u8 {
        (self.read(self.cpsr) >> 28) as u8 & 0xf
    }
    fn elr(&mut self, el: El) -> Option<u64> {
        let h = self.elr[el as usize]?;
        Some(self.read(h))
    }
    fn translate(&mut self, va: u64) -> Option<u64> {
        let mut pa = 0;
        // SAFETY: a plain out-parameter; in a vCPU callback.
        unsafe { qemu_plugin_translate_vaddr(va, &mut pa) }.then_some(pa)
    }
}

fn get(vcpu: c_uint) -> u64 {
    // SAFETY: the plugin's entry, a vCPU index QEMU gave.
    unsafe { qemu_plugin_u64_get(plugin().entry.0, vcpu) }
}

fn set(vcpu: c_uint, v: u64) {
    // SAFETY: as for `get`.
    unsafe { qemu_plugin_u64_set(plugin().entry.0, vcpu, v) }
}

impl VcpuState {
    /// xorshift32: the latencies' and RND's random values.
    fn random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }
}

/// The physical count now, from the host's monotonic clock since the
/// vCPUs started, at the guest's counter frequency.
fn physical_count(freq: u64) -> u64 {
    let p = plugin();
    let start = *p.started.get_or_init(Instant::now);
    (start.elapsed().as_nanos() * u128::from(freq) / 1_000_000_000) as u64
}

unsafe extern "C" fn on_select(vcpu: c_uint, udata: *mut c_void) {
    let p = plugin();
    // SAFETY: `udata` is an `Insn` of a TB's boxed slice, kept until the
    // next flush, after which no TB refers to it.
    let insn = unsafe { &*(udata as *const Insn) };
    let entry = get(vcpu);
    let state = crate::lock(&p.feed).state(vcpu);
    let Some(slot) = p.vcpus.get(vcpu as usize) else {
        return;
    };
    p.counts.selected.fetch_add(1, Ordering::Relaxed);
    let mut vs = crate::lock(slot);
    if state.enabled_els == 0 {
        p.counts.idle.fetch_add(1, Ordering::Relaxed);
        set(vcpu, entry.wrapping_add(count::RECHECK));
        return;
    }
    let period = count::period(&state, || vs.random());
    set(vcpu, entry.wrapping_add(period));
    let random = vs.random();
    let freq = vs.freq;
    let Some(regs) = vs.regs.as_mut() else {
        return;
    };
    let el = El::from_u8((regs.read(regs.cpsr) >> 2) as u8 & 3).unwrap_or(El::El0);
    // Every EL counts; a selection where profiling is off is dropped.
    if !state.enabled_at(el as u8) {
        p.counts.other_el.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // CNTFRQ_EL0 as the guest's firmware set it (QEMU's default if
    // unreadable), once per vCPU.
    let freq = freq.unwrap_or_else(|| {
        regs.cntfrq
            .map(|h| regs.read(h))
            .filter(|&f| f != 0)
            .unwrap_or(1_000_000_000)
    });
    let contextidr_el1 = regs.contextidr_el1.map_or(0, |h| regs.read(h) as u32);
    let cx = Context {
        pc: insn.pc,
        el,
        contextidr_el1,
        physical_count: physical_count(freq),
        random,
    };
    let op = capture::capture(insn.encoding, &cx, regs);
    vs.freq = Some(freq);
    drop(vs);
    if crate::lock(&p.feed).push(vcpu, &op, period) {
        p.counts.sampled.fetch_add(1, Ordering::Relaxed);
    } else {
        p.counts.lost.fetch_add(1, Ordering::Relaxed);
    }
}

unsafe extern "C" fn on_resync(vcpu: c_uint, udata: *mut c_void) {
    let p = plugin();
    let n = udata as usize;
    p.counts.resyncs.fetch_add(1, Ordering::Relaxed);
    let state = crate::lock(&p.feed).state(vcpu);
    let period = if state.enabled_els == 0 {
        count::RECHECK
    } else {
        match p.vcpus.get(vcpu as usize) {
            Some(slot) => {
                let mut vs = crate::lock(slot);
                count::period(&state, || vs.random())
            }
            None => count::RECHECK,
        }
    };
    set(vcpu, count::resynced(period, n));
}

unsafe extern "C" fn on_tb_trans(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    let p = plugin();
    let entry = p.entry.0;
    // SAFETY: `tb` is the TB QEMU is translating; its instructions are
    // valid during this callback.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        if n == 0 {
            return;
        }
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb,
            qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            entry,
            count::tb_add(n),
        );
        qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb,
            Some(on_resync),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
            qemu_plugin_cond::QEMU_PLUGIN_COND_LT,
            entry,
            count::resync_below(n),
            n as *mut c_void,
        );
        let insns: Box<[Insn]> = (0..n)
            .map(|i| {
                let insn = qemu_plugin_tb_get_insn(tb, i);
                let mut b = [0u8; 4];
                qemu_plugin_insn_data(insn, b.as_mut_ptr().cast(), 4);
                Insn {
                    pc: qemu_plugin_insn_vaddr(insn),
                    encoding: u32::from_le_bytes(b),
                }
            })
            .collect();
        for (i, insn) in insns.iter().enumerate() {
            qemu_plugin_register_vcpu_insn_exec_cond_cb(
                qemu_plugin_tb_get_insn(tb, i),
                Some(on_select),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                qemu_plugin_cond::QEMU_PLUGIN_COND_EQ,
                entry,
                count::select_imm(i, n),
                insn as *const Insn as *mut c_void,
            );
        }
        crate::lock(&p.insns).push(insns);
    }
}

unsafe extern "C" fn on_flush(_id: qemu_plugin_id_t) {
    // The TB cache is gone: nothing refers to these any more.
    crate::lock(&plugin().insns).clear();
}

unsafe extern "C" fn on_vcpu_init(_id: qemu_plugin_id_t, vcpu: c_uint) {
    let p = plugin();
    let Some(slot) = p.vcpus.get(vcpu as usize) else {
        out(&format!(
            "vCPU {vcpu} is beyond the {} announced",
            p.vcpus.len()
        ));
        return;
    };
    // The scoreboard starts at 0, below every immediate: the first TB's
    // resync would never fire (the entry wraps to the top). BIAS is a
    // counter that ran out, which the first TB reloads.
    set(vcpu, count::BIAS);
    let regs = Regs::of_current_vcpu();
    if regs.is_none() {
        out(&format!(
            "vCPU {vcpu}: no AArch64 registers to read; it will not sample"
        ));
    }
    crate::lock(slot).regs = regs;
}

unsafe extern "C" fn on_vcpu_resume(_id: qemu_plugin_id_t, _vcpu: c_uint) {
    plugin().started.get_or_init(Instant::now);
}

unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _udata: *mut c_void) {
    let c = &plugin().counts;
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    out(&format!(
        "{} selections: {} sampled, {} lost to a full ring, {} at an EL not profiled, \
         {} while nothing was profiled; {} counter reloads after a missed selection",
        n(&c.selected),
        n(&c.sampled),
        n(&c.lost),
        n(&c.other_el),
        n(&c.idle),
        n(&c.resyncs)
    ));
}

/// `socket=PATH`: the backend's `--plugin-socket`.
fn parse_args(argc: c_int, argv: *const *const c_char) -> Result<PathBuf, String> {
    let mut socket = None;
    for i in 0..argc.max(0) as usize {
        // SAFETY: QEMU passes `argc` C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        match arg.split_once('=') {
            Some(("socket", path)) if !path.is_empty() => socket = Some(PathBuf::from(path)),
            _ => return Err(format!("unknown argument {arg:?} (it takes socket=PATH)")),
        }
    }
    socket.ok_or_else(|| "socket=PATH (the backend's --plugin-socket) is missing".into())
}

/// # Safety
/// Called by QEMU once, with its info and the `-plugin` arguments.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    match install(id, info, argc, argv) {
        Ok(()) => 0,
        Err(e) => {
            // On stderr too: QEMU logs plugin output only with -d plugin,
            // and says no more than that the install failed.
            eprintln!("spe-plugin: {e}");
            out(&e);
            -1
        }
    }
}

unsafe fn install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *const *const c_char,
) -> Result<(), String> {
    // SAFETY: QEMU's info for this install.
    let info = unsafe { &*info };
    let target = unsafe { CStr::from_ptr(info.target_name) }.to_string_lossy();
    if !info.system_emulation || target != "aarch64" {
        return Err(format!(
            "samples qemu-system-aarch64 guests only, not {target}{}",
            if info.system_emulation {
                ""
            } else {
                " user mode"
            }
        ));
    }
    let socket = parse_args(argc, argv)?;
    // SAFETY: the system member is the one set for system emulation.
    let vcpus = unsafe { info.__bindgen_anon_1.system.max_vcpus }.max(1) as u32;
    let feed = Feed::connect(&socket, vcpus)
        .map_err(|e| format!("cannot feed the backend at {}: {e}", socket.display()))?;
    // SAFETY: a new scoreboard of one u64 per vCPU, for the plugin's life.
    let score = unsafe { qemu_plugin_scoreboard_new(8) };
    let plugin = Plugin {
        entry: Entry(qemu_plugin_u64 { score, offset: 0 }),
        vcpus: (0..vcpus)
            .map(|v| {
                Mutex::new(VcpuState {
                    regs: None,
                    rng: 0x9e37_79b9 ^ v.wrapping_mul(0x85eb_ca6b) | 1,
                    freq: None,
                })
            })
            .collect(),
        feed: Mutex::new(feed),
        insns: Mutex::new(Vec::new()),
        started: OnceLock::new(),
        counts: Counts::default(),
    };
    if PLUGIN.set(plugin).is_err() {
        return Err("installed twice".into());
    }
    // SAFETY: registering our callbacks with our id.
    unsafe {
        qemu_plugin_register_vcpu_init_cb(id, Some(on_vcpu_init));
        qemu_plugin_register_vcpu_resume_cb(id, Some(on_vcpu_resume));
        qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_tb_trans));
        qemu_plugin_register_flush_cb(id, Some(on_flush));
        qemu_plugin_register_atexit_cb(id, Some(on_exit), std::ptr::null_mut());
    }
    out(&format!("feeding {} for {vcpus} vCPU(s)", socket.display()));
    Ok(())
}
