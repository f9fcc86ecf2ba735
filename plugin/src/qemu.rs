//! QEMU's side: the plugin's entry points and callbacks, over the C API
//! (`qemu-plugin-sys`'s API version 5, QEMU 10.1 and 10.2, and the few
//! functions version 7, QEMU 11.1, changed: [`crate::api`]).
//!
//! Per TB, one inline add takes its instructions off the vCPU's counter,
//! and one conditional callback fires when the selection is in the TB,
//! was missed, or the previous TB ended in a sampled branch, whose
//! outcome this TB's address gives (`count::WAITING`). A load or store
//! whose address registers, or a conditional select whose flags, an
//! earlier instruction of its TB may have written carries its own
//! conditional callback, which fires only when the instruction is the
//! selected one, with register reads allowed, and builds its record
//! (`capture.rs`) before it runs; the TB's callback takes every other
//! selection from the registers at the TB's start, which are then the
//! same (`count.rs` has the arithmetic). Every other instruction runs no
//! plugin code at all.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use qemu_plugin_sys::*;
use spe_protocol::a64::{self, Registers};

use crate::api;
use crate::capture::Vcpu;
use crate::count;
use crate::feed::{Feed, VcpuFeed};
use crate::select::{self, Counts, Cpu, Insn, Selector};
use crate::threads::VcpuThreads;

/// The API version QEMU reads after loading the plugin: an `int` (an
/// atomic has its layout), set by [`choose_version`] before QEMU reads it.
#[no_mangle]
pub static qemu_plugin_version: AtomicI32 = AtomicI32::new(QEMU_PLUGIN_VERSION as c_int);

/// Run by the dynamic loader while QEMU loads the plugin.
#[used]
#[link_section = ".init_array"]
static CHOOSE_VERSION: extern "C" fn() = choose_version;

extern "C" fn choose_version() {
    let v = api::version_for(|name| {
        // SAFETY: a C string; QEMU's exported functions are global.
        !unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }.is_null()
    });
    qemu_plugin_version.store(v, Ordering::Relaxed);
}

fn is_v7() -> bool {
    qemu_plugin_version.load(Ordering::Relaxed) >= api::V7
}

/// The functions whose arguments or result API version 7 changed, as it
/// declares them (the bindings have version 5's).
mod v7 {
    use super::{qemu_plugin_id_t, qemu_plugin_register, qemu_plugin_tb, GByteArray};
    use std::ffi::{c_uint, c_void};

    pub type VcpuCb = unsafe extern "C" fn(vcpu: c_uint, udata: *mut c_void);
    pub type TbTransCb = unsafe extern "C" fn(tb: *mut qemu_plugin_tb, udata: *mut c_void);
    pub type UdataCb = unsafe extern "C" fn(udata: *mut c_void);

    // The same symbols as the bindings' version 5 declarations: which
    // one is called depends on the version QEMU accepted.
    #[allow(clashing_extern_declarations)]
    extern "C" {
        #[link_name = "qemu_plugin_register_vcpu_init_cb"]
        pub fn register_vcpu_init_cb(id: qemu_plugin_id_t, cb: VcpuCb, udata: *mut c_void);
        #[link_name = "qemu_plugin_register_vcpu_resume_cb"]
        pub fn register_vcpu_resume_cb(id: qemu_plugin_id_t, cb: VcpuCb, udata: *mut c_void);
        #[link_name = "qemu_plugin_register_vcpu_tb_trans_cb"]
        pub fn register_vcpu_tb_trans_cb(id: qemu_plugin_id_t, cb: TbTransCb, udata: *mut c_void);
        #[link_name = "qemu_plugin_register_flush_cb"]
        pub fn register_flush_cb(id: qemu_plugin_id_t, cb: UdataCb, udata: *mut c_void);
        #[link_name = "qemu_plugin_read_register"]
        pub fn read_register(handle: *mut qemu_plugin_register, buf: *mut GByteArray) -> bool;
    }
}

extern "C" {
    fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut c_char;
    fn g_array_get_element_size(array: *mut GArray) -> c_uint;
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_byte_array_set_size(array: *mut GByteArray, length: c_uint) -> *mut GByteArray;
}

/// A translated TB's instructions: its callbacks' user data.
struct Tb {
    insns: Box<[Insn]>,
}

/// A vCPU's register handles and read buffer (its own thread only).
struct Regs {
    x: [*mut qemu_plugin_register; 31],
    sp: *mut qemu_plugin_register,
    cpsr: *mut qemu_plugin_register,
    contextidr_el1: Option<*mut qemu_plugin_register>,
    cntfrq: Option<*mut qemu_plugin_register>,
    buf: *mut GByteArray,
}

struct VcpuState {
    regs: Option<Regs>,
    feed: VcpuFeed,
    sel: Selector,
}

// SAFETY: the handles are QEMU's, valid for the vCPU's life and the same
// for every vCPU of one type; the buffer is only used under the state's
// mutex.
unsafe impl Send for VcpuState {}

/// A scoreboard entry: the interval counter.
struct Entry(qemu_plugin_u64);
// SAFETY: QEMU's scoreboard is per vCPU and its accessors take the index.
unsafe impl Send for Entry {}
unsafe impl Sync for Entry {}

struct Plugin {
    entry: Entry,
    /// Each vCPU's, locked by its own thread only (and at exit): nothing
    /// a selection touches is shared between vCPUs.
    vcpus: Box<[Mutex<VcpuState>]>,
    /// The channel, kept open while the plugin lives.
    _feed: Feed,
    /// The TBs translated since the last flush, boxed: their callbacks
    /// hold pointers to them while the list grows.
    #[allow(clippy::vec_box)]
    tbs: Mutex<Vec<Box<Tb>>>,
    /// When the vCPUs first ran: QEMU's virtual clock starts about then.
    started: OnceLock<Instant>,
    /// The thread each announced vCPU's init ran on.
    threads: Mutex<VcpuThreads>,
    /// Set when two vCPUs share a thread: nothing samples from then on.
    refused: AtomicBool,
    /// Loads, stores and selects translated, and those of them that
    /// needed their own callback, for the summary at exit.
    translated: AtomicU64,
    own: AtomicU64,
    /// `validate=on`: [`on_check`] on every load and store taken at its
    /// TB's start.
    validate: bool,
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
        // Version 6 made the descriptor longer (`is_readonly`): step by
        // the array's own element size; the handle and the name come
        // first in every version's.
        // SAFETY: a GArray of `len` descriptors, freed below.
        let (data, len, stride) = unsafe {
            (
                (*array).data as *const u8,
                (*array).len as usize,
                g_array_get_element_size(array) as usize,
            )
        };
        if stride < std::mem::size_of::<qemu_plugin_reg_descriptor>() {
            // SAFETY: the array we were given.
            unsafe { g_array_free(array, 1) };
            return None;
        }
        for i in 0..len {
            // SAFETY: element `i` of the array, which starts with a
            // version 5 descriptor's fields; QEMU's register names are
            // C strings it keeps.
            let (handle, name) = unsafe {
                let d = data.add(i * stride) as *const qemu_plugin_reg_descriptor;
                ((*d).handle, CStr::from_ptr((*d).name))
            };
            found.insert(name.to_string_lossy().into_owned(), handle);
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
            let read = if is_v7() {
                v7::read_register(h, self.buf)
            } else {
                qemu_plugin_read_register(h, self.buf) > 0
            };
            let len = ((*self.buf).len as usize).min(8);
            if !read || len == 0 {
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
    fn translate(&mut self, va: u64) -> Option<u64> {
        let mut pa = 0;
        // SAFETY: a plain out-parameter; in a vCPU callback.
        unsafe { qemu_plugin_translate_vaddr(va, &mut pa) }.then_some(pa)
    }
}

impl Cpu for Regs {
    fn cpsr(&mut self) -> u64 {
        self.read(self.cpsr)
    }
    fn cntfrq(&mut self) -> Option<u64> {
        self.cntfrq.map(|h| self.read(h))
    }
    fn contextidr_el1(&mut self) -> Option<u32> {
        self.contextidr_el1.map(|h| self.read(h) as u32)
    }
    fn physical_count(&self, freq: u64) -> u64 {
        physical_count(freq)
    }
}

/// Whether a callback for `vcpu` may act: QEMU has run its init hook,
/// and with it sized the scoreboard for it (single-threaded TCG runs a
/// vCPU's first TBs, made by another vCPU with their callbacks, before
/// that hook, and QEMU asserts on a scoreboard read for it), and the
/// plugin has not refused to sample (`spe_plugin::threads`).
fn sampling(vcpu: c_uint) -> bool {
    // SAFETY: no arguments; callable from any vCPU callback.
    let n = unsafe { qemu_plugin_num_vcpus() };
    i64::from(vcpu) < i64::from(n) && !plugin().refused.load(Ordering::Relaxed)
}

fn get(vcpu: c_uint) -> u64 {
    // SAFETY: the plugin's entry, a vCPU index QEMU gave.
    unsafe { qemu_plugin_u64_get(plugin().entry.0, vcpu) }
}

fn set(vcpu: c_uint, v: u64) {
    // SAFETY: as for `get`.
    unsafe { qemu_plugin_u64_set(plugin().entry.0, vcpu, v) }
}

/// The physical count now, from the host's monotonic clock since the
/// vCPUs started, at the guest's counter frequency.
fn physical_count(freq: u64) -> u64 {
    let p = plugin();
    let start = *p.started.get_or_init(Instant::now);
    (start.elapsed().as_nanos() * u128::from(freq) / 1_000_000_000) as u64
}

/// A load, store or conditional select that is the selected instruction.
unsafe extern "C" fn on_insn(vcpu: c_uint, udata: *mut c_void) {
    // SAFETY: `udata` is an `Insn` of a TB's boxed slice, kept until the
    // next flush, after which no TB refers to it.
    let insn = unsafe { &*(udata as *const Insn) };
    if !sampling(vcpu) {
        return;
    }
    if let Some(slot) = plugin().vcpus.get(vcpu as usize) {
        let mut guard = crate::lock(slot);
        let vs = &mut *guard;
        let entry = vs
            .sel
            .on_insn(get(vcpu), insn, &mut vs.feed, vs.regs.as_mut());
        set(vcpu, entry);
    }
}

/// The TB's start when its counter is at most BIAS: a selection in this
/// TB, the TB after a sampled branch, or a missed selection
/// ([`Selector::on_tb`]).
unsafe extern "C" fn on_tb(vcpu: c_uint, udata: *mut c_void) {
    if !sampling(vcpu) {
        return;
    }
    let p = plugin();
    // SAFETY: `udata` is a TB's boxed slice of instructions, kept until
    // the next flush.
    let tb = unsafe { &(*(udata as *const Tb)).insns };
    let n = tb.len();
    let entry = get(vcpu);
    if entry < count::resync_below(n) {
        // A vCPU's first TB comes here (its init set the counter so):
        // QEMU's virtual clock started about then. Single-threaded TCG
        // calls no resume callback, and the init hook runs before the
        // machine starts.
        p.started.get_or_init(Instant::now);
    }
    let Some(slot) = p.vcpus.get(vcpu as usize) else {
        // No state to select with: reload only, as if nothing sampled.
        if entry < count::resync_below(n) {
            set(vcpu, count::resynced(count::RECHECK, n));
        }
        return;
    };
    let mut guard = crate::lock(slot);
    let vs = &mut *guard;
    let entry = vs.sel.on_tb(entry, tb, &mut vs.feed, vs.regs.as_mut());
    set(vcpu, entry);
}

unsafe fn on_tb_trans(tb: *mut qemu_plugin_tb) {
    let p = plugin();
    if p.refused.load(Ordering::Relaxed) {
        return; // no inline operation either: see `crate::threads`
    }
    let entry = p.entry.0;
    // SAFETY: `tb` is the TB QEMU is translating; its instructions are
    // valid during this callback.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        if n == 0 {
            return;
        }
        let insns = Insn::tb((0..n).map(|i| {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let mut b = [0u8; 4];
            qemu_plugin_insn_data(insn, b.as_mut_ptr().cast(), 4);
            (qemu_plugin_insn_vaddr(insn), u32::from_le_bytes(b))
        }));
        let taken = insns
            .iter()
            .filter(|i| select::reads_registers(i.encoding))
            .count() as u64;
        let own = insns.iter().filter(|i| i.own).count() as u64;
        p.translated.fetch_add(taken, Ordering::Relaxed);
        p.own.fetch_add(own, Ordering::Relaxed);
        // Boxed so that the callbacks' pointer to it stays put when the
        // list grows.
        let tb_data = Box::new(Tb { insns });
        let udata = &*tb_data as *const Tb as *mut c_void;
        qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(
            tb,
            qemu_plugin_op::QEMU_PLUGIN_INLINE_ADD_U64,
            entry,
            count::tb_add(n),
        );
        qemu_plugin_register_vcpu_tb_exec_cond_cb(
            tb,
            Some(on_tb),
            qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
            qemu_plugin_cond::QEMU_PLUGIN_COND_LE,
            entry,
            count::BIAS,
            udata,
        );
        if p.validate {
            // The loads and stores with an address and no callback of
            // their own (a select has no address to check).
            for (i, insn) in tb_data.insns.iter().enumerate() {
                if !insn.own && a64::data_address(insn.encoding).is_some() {
                    qemu_plugin_register_vcpu_insn_exec_cb(
                        qemu_plugin_tb_get_insn(tb, i),
                        Some(on_check),
                        qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                        insn as *const Insn as *mut c_void,
                    );
                }
            }
        }
        for (i, insn) in tb_data
            .insns
            .iter()
            .enumerate()
            .filter(|(_, insn)| insn.own)
        {
            qemu_plugin_register_vcpu_insn_exec_cond_cb(
                qemu_plugin_tb_get_insn(tb, i),
                Some(on_insn),
                qemu_plugin_cb_flags::QEMU_PLUGIN_CB_R_REGS,
                qemu_plugin_cond::QEMU_PLUGIN_COND_EQ,
                entry,
                count::select_imm(i, n),
                insn as *const Insn as *mut c_void,
            );
        }
        crate::lock(&p.tbs).push(tb_data);
    }
}

/// `validate=on`: a load or store without a callback of its own, before
/// it runs. If it is the one selected at its TB's start, its address
/// from the registers now must be the one its record has: what
/// `a64::writes` promised.
unsafe extern "C" fn on_check(vcpu: c_uint, udata: *mut c_void) {
    if !sampling(vcpu) {
        return;
    }
    let Some(slot) = plugin().vcpus.get(vcpu as usize) else {
        return;
    };
    let mut guard = crate::lock(slot);
    let vs = &mut *guard;
    // SAFETY: as in `on_insn`.
    let insn = unsafe { &*(udata as *const Insn) };
    if let Some(d) = vs.sel.check(insn, get(vcpu), vs.regs.as_mut()) {
        out(&format!(
            "validate: {:#x} ({:#010x}) taken at its TB's start with VA {:#x}, {:#x} at the \
             instruction ({:#x})",
            insn.pc, insn.encoding, d.va, d.now, d.at
        ));
    }
}

fn on_flush() {
    // The TB cache is gone: nothing refers to these any more.
    crate::lock(&plugin().tbs).clear();
}

fn on_vcpu_init(vcpu: c_uint) {
    let p = plugin();
    let Some(slot) = p.vcpus.get(vcpu as usize) else {
        out(&format!(
            "vCPU {vcpu} is beyond the {} announced",
            p.vcpus.len()
        ));
        return;
    };
    if crate::lock(&p.threads).init_on(std::thread::current().id())
        && !p.refused.swap(true, Ordering::Relaxed)
    {
        let msg = "several vCPUs run on one thread (-accel tcg,thread=single): QEMU 10.2's \
                   plugin code then counts every vCPU's operations as the translating \
                   vCPU's and can corrupt translated code; not sampling. Run QEMU's default \
                   multi-threaded TCG, or -smp 1";
        eprintln!("spe-plugin: {msg}");
        out(msg);
    }
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

fn on_vcpu_resume(vcpu: c_uint) {
    let p = plugin();
    p.started.get_or_init(Instant::now);
    // It idled: time went on without counting.
    if let Some(slot) = p.vcpus.get(vcpu as usize) {
        crate::lock(slot).sel.idled();
    }
}

unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _udata: *mut c_void) {
    let mut c = Counts::default();
    for slot in plugin().vcpus.iter() {
        c += crate::lock(slot).sel.counts();
    }
    out(&format!(
        "{} selections: {} sampled, {} lost to a full ring, {} at an EL not profiled, \
         {} while nothing was profiled, {} branches an exception followed; \
         {} counter reloads after a missed selection; \
         {} of {} loads, stores and selects translated with their own callback{}",
        c.selected,
        c.sampled,
        c.lost,
        c.other_el,
        c.idle,
        c.branch_lost,
        c.resyncs,
        plugin().own.load(Ordering::Relaxed),
        plugin().translated.load(Ordering::Relaxed),
        if plugin().validate {
            format!(
                "; validate: {} addresses taken at a TB's start checked at their instruction, \
                 {} differed",
                c.checked, c.differed
            )
        } else {
            String::new()
        }
    ));
}

// The callbacks in each version's shape: version 5's get the plugin's
// id first, version 7's the (unused) user data last.
unsafe extern "C" fn vcpu_init_v5(_id: qemu_plugin_id_t, vcpu: c_uint) {
    on_vcpu_init(vcpu);
}
unsafe extern "C" fn vcpu_init_v7(vcpu: c_uint, _udata: *mut c_void) {
    on_vcpu_init(vcpu);
}
unsafe extern "C" fn vcpu_resume_v5(_id: qemu_plugin_id_t, vcpu: c_uint) {
    on_vcpu_resume(vcpu);
}
unsafe extern "C" fn vcpu_resume_v7(vcpu: c_uint, _udata: *mut c_void) {
    on_vcpu_resume(vcpu);
}
unsafe extern "C" fn tb_trans_v5(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    // SAFETY: the TB QEMU is translating.
    unsafe { on_tb_trans(tb) };
}
unsafe extern "C" fn tb_trans_v7(tb: *mut qemu_plugin_tb, _udata: *mut c_void) {
    // SAFETY: the TB QEMU is translating.
    unsafe { on_tb_trans(tb) };
}
unsafe extern "C" fn flush_v5(_id: qemu_plugin_id_t) {
    on_flush();
}
unsafe extern "C" fn flush_v7(_udata: *mut c_void) {
    on_flush();
}

/// # Safety
/// `id` is the plugin's, in its install.
unsafe fn register(id: qemu_plugin_id_t) {
    let none = std::ptr::null_mut();
    // SAFETY: our callbacks, each in the shape of the version QEMU
    // accepted; the exit callback's is the same in both.
    unsafe {
        if is_v7() {
            v7::register_vcpu_init_cb(id, vcpu_init_v7, none);
            v7::register_vcpu_resume_cb(id, vcpu_resume_v7, none);
            v7::register_vcpu_tb_trans_cb(id, tb_trans_v7, none);
            v7::register_flush_cb(id, flush_v7, none);
        } else {
            qemu_plugin_register_vcpu_init_cb(id, Some(vcpu_init_v5));
            qemu_plugin_register_vcpu_resume_cb(id, Some(vcpu_resume_v5));
            qemu_plugin_register_vcpu_tb_trans_cb(id, Some(tb_trans_v5));
            qemu_plugin_register_flush_cb(id, Some(flush_v5));
        }
        qemu_plugin_register_atexit_cb(id, Some(on_exit), none);
    }
}

/// `socket=PATH`: the backend's `--plugin-socket`; `validate=on`: check
/// every address taken at a TB's start at its instruction too.
fn parse_args(argc: c_int, argv: *const *const c_char) -> Result<(PathBuf, bool), String> {
    let (mut socket, mut validate) = (None, false);
    for i in 0..argc.max(0) as usize {
        // SAFETY: QEMU passes `argc` C strings.
        let arg = unsafe { CStr::from_ptr(*argv.add(i)) }.to_string_lossy();
        match arg.split_once('=') {
            Some(("socket", path)) if !path.is_empty() => socket = Some(PathBuf::from(path)),
            Some(("validate", v @ ("on" | "off"))) => validate = v == "on",
            _ => {
                return Err(format!(
                    "unknown argument {arg:?} (it takes socket=PATH and validate=on|off)"
                ))
            }
        }
    }
    let socket =
        socket.ok_or("socket=PATH (the backend's --plugin-socket) is missing".to_string())?;
    Ok((socket, validate))
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
    let (socket, validate) = parse_args(argc, argv)?;
    // SAFETY: the system member is the one set for system emulation.
    let vcpus = unsafe { info.__bindgen_anon_1.system.max_vcpus }.max(1) as u32;
    let (feed, vcpu_feeds) = Feed::connect(&socket, vcpus)
        .map_err(|e| format!("cannot feed the backend at {}: {e}", socket.display()))?;
    // SAFETY: a new scoreboard of a u64 per vCPU, for the plugin's life.
    let score = unsafe { qemu_plugin_scoreboard_new(8) };
    let plugin = Plugin {
        entry: Entry(qemu_plugin_u64 { score, offset: 0 }),
        vcpus: vcpu_feeds
            .into_iter()
            .zip(0u32..)
            .map(|(feed, v)| {
                Mutex::new(VcpuState {
                    regs: None,
                    feed,
                    sel: Selector::new(v, validate),
                })
            })
            .collect(),
        _feed: feed,
        tbs: Mutex::new(Vec::new()),
        started: OnceLock::new(),
        threads: Mutex::new(VcpuThreads::default()),
        refused: AtomicBool::new(false),
        translated: AtomicU64::new(0),
        own: AtomicU64::new(0),
        validate,
    };
    if PLUGIN.set(plugin).is_err() {
        return Err("installed twice".into());
    }
    // SAFETY: registering our callbacks with our id, in the shape of the
    // version QEMU accepted.
    unsafe { register(id) };
    out(&format!("feeding {} for {vcpus} vCPU(s)", socket.display()));
    Ok(())
}
