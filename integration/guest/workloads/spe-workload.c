/*
 * spe-workload: the guest program the record proofs (spe-profile and
 * others) sample. A strided
 * read-modify-write loop over a global array whose virtual and physical
 * addresses it prints, and a branchy function, so that SPE records can be
 * checked against known PCs, data addresses and branch behaviour.
 *
 *   spe-workload [ITERATIONS [SECONDS [PAGEMAP]]]
 *   spe-workload loads PASSES
 *   spe-workload others ITERATIONS
 *   spe-workload faults ITERATIONS
 *   spe-workload alias ITERATIONS
 *   spe-workload no-room
 *   spe-workload classes ITERATIONS
 *   spe-workload levels SECONDS
 *   spe-workload false-sharing SECONDS [padded]
 *   spe-workload ipis SECONDS [CPUS]
 *   spe-workload branches FILE
 *
 * Runs until ITERATIONS passes (default 200) or SECONDS of wall time,
 * whichever comes first; 0 means no limit of that kind. Results go to
 * stdout as the harness's `SPE-RESULT key=value` lines. With PAGEMAP, it
 * then writes the array's per-page translation there, one `0xVA 0xPA`
 * line per page, read from /proc/self/pagemap at the end of the run.
 *
 * `loads` mode instead sweeps the array PASSES times with a loop of a
 * fixed instruction count (spe_workload_loads: LADDER_LOADS loads at
 * consecutive 8-byte addresses, then 3 loop instructions), so a sampled
 * load's data VA gives its operation's index in the sweep.
 *
 * `others` mode runs a loop of OTHERS_ADDS `add` instructions and 2 loop
 * instructions ITERATIONS times, so a sample's PC alone gives its
 * operation's index in the loop.
 *
 * `faults` mode runs the same adds behind a load from a page it has not
 * touched yet and a step to the next page, FAULTS_OPS operations a pass,
 * so that every pass starts its TB with a page fault (taken at EL1) and
 * then runs on; it reports the page faults it took.
 *
 * `alias` mode runs a loop of ALIAS_OPS instructions (a load, two adds,
 * `subs`, `b.ne`) ITERATIONS times: a period of 1025 operations is a
 * multiple of its length, so counting instructions exactly samples one
 * of them only.
 *
 * `no-room` mode profiles itself with arm_spe_0 (EL0, period 1024) into
 * a 4-page AUX buffer it consumes only the first 64 bytes of, runs the
 * strided loop until the buffer stops growing (the driver found no room
 * left), prints `SPE-NO-ROOM` and runs on for NO_ROOM_HOLD_S seconds
 * with the event still scheduled in, for the host to look at the SPU.
 *
 * `classes` mode runs a loop with one operation of each class SPE's type
 * and event filters tell apart: a general-purpose and a SIMD&FP load and
 * store, a general-purpose load across a cache line (ALIGNMENT), a
 * conditional branch never taken (NOT-TAKEN), a taken one, a scalar
 * floating-point `fadd` (other, FP), an Advanced SIMD `add` (other,
 * SIMD), a vector-structure `ld1` and `st1` (SIMD) and `subs` (other),
 * and a general-purpose load that walks the 4 MiB array a line a pass
 * (with its `add` and `and`: the loads that miss L1 and L2).
 * Seventeen operations a pass: the default interval (1024, or 1025
 * between samples) steps through every one of them.
 *
 * `sve` mode runs a loop of SVE operations, each told apart by its
 * governing predicate or its data address: `ld1w` with a full predicate
 * (array + 0x100), with a partial one (the first three words, + 0x200)
 * and with an empty one (no access), a gather `ld1w` (+ 0x300, word
 * indices 0, 1, ...), a predicated `fadd` (other, FP, full) and `add`
 * (partial), an unpredicated `add`, a `st1w` (+ 0x400, full), then
 * `subs` and `b.ne`: eleven operations a pass. It prints the vector
 * length in bits first.
 *
 * `mte` mode turns on synchronous MTE tag checks for itself, maps a page
 * with PROT_MTE, gives its first four granules a random tag (`irg`,
 * `stg`) and runs a loop of a tag-checked load (tagged pointer + 16) and
 * store (+ 32), `subs` and `b.ne`, printing the tagged addresses first.
 *
 * `levels` mode alternates, for SECONDS, two load loops of the same
 * shape: spe_workload_small over LEVELS_SMALL bytes (every load's line
 * back in a few hundred loads: L1D) and spe_workload_large over
 * LEVELS_LARGE (every line back only after the rest: beyond L2 and the
 * system cache), for perf mem to tell apart by where loads are served.
 *
 * `false-sharing` mode runs, for SECONDS, two threads on CPUs 0 and 1
 * that increment their own counter: spe_workload_share_a and
 * spe_workload_share_b, the counters in one cache line, or (with
 * `padded`) a line apart, for perf c2c to find or not find the shared
 * line. It prints the counters' addresses.
 *
 * `ipis` mode runs, for SECONDS, the strided loop on CPUs 1 to CPUS - 1
 * (CPUS default 2) while the main thread, on CPU 0, makes
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) calls: each interrupts
 * those CPUs with an IPI and returns once every one has taken it. An IPI
 * is an exit request to a vCPU that runs TBs; one the vCPU lost would hold
 * its call until something else stopped the vCPU (on a tickless CPU, up to
 * a second). It prints the calls, their median and longest time, and how
 * many took over IPI_SLOW_MS.
 *
 * `branches` mode runs nothing: it writes the direct branches in and after
 * spe_workload_strided and spe_workload_branchy to FILE, one
 * `0xPC 0xTARGET` line each, decoded from the binary's own code, so that a
 * record's branch target can be checked against its instruction's.
 *
 * Built static (aarch64-linux-gnu-gcc -static -O1) so the initramfs needs
 * no loader for it and the array sits at a link-time address.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define ARRAY_BYTES (4u << 20)
#define STRIDE 64u
#define PAGE 4096u

/* Page-aligned so its first page is all array; global so its address is
 * fixed at link time (the binary is not PIE). */
uint8_t spe_workload_array[ARRAY_BYTES] __attribute__((aligned(PAGE)));

/* Read-modify-write of one byte per cache line: one load and one store
 * per STRIDE bytes, at addresses a record's data VA can be matched to. */
__attribute__((noinline)) uint64_t spe_workload_strided(uint32_t pass)
{
    uint64_t sum = 0;
    for (uint32_t off = 0; off < ARRAY_BYTES; off += STRIDE) {
        uint8_t v = spe_workload_array[off];
        sum += v;
        spe_workload_array[off] = (uint8_t)(v + pass + 1);
    }
    return sum;
}

#define LEVELS_SMALL (16u << 10)
#define LEVELS_LARGE (64u << 20)
#define LEVELS_SLICE_NS 20000000u

static uint64_t levels_small[LEVELS_SMALL / 8];
static uint64_t levels_large[LEVELS_LARGE / 8];

/* Loads every 8 bytes of a 16 KiB array, again and again. */
__attribute__((noinline)) uint64_t spe_workload_small(uint32_t loads)
{
    uint64_t sum = 0;
    uint32_t n = LEVELS_SMALL / 8;

    for (uint32_t i = 0; i < loads; i++)
        sum += levels_small[i % n];
    return sum;
}

/* One load per 64-byte line of a 64 MiB array, on from where it was. */
__attribute__((noinline)) uint64_t spe_workload_large(uint32_t loads,
                                                      uint32_t *at)
{
    uint64_t sum = 0;
    uint32_t n = LEVELS_LARGE / 8, i = *at;

    for (uint32_t k = 0; k < loads; k++) {
        sum += levels_large[i];
        i = (i + 8) % n;
    }
    *at = i;
    return sum;
}

/* Data-dependent conditional branches, taken about half the time, plus an
 * indirect one through a switch the compiler may turn into a table. */
__attribute__((noinline)) uint64_t spe_workload_branchy(uint64_t seed)
{
    uint64_t x = seed | 1, acc = 0;
    for (int i = 0; i < 65536; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (x & 1)
            acc += x >> 3;
        else
            acc ^= x;
        if ((x >> 8) % 3 == 0)
            acc = acc * 3 + 1;
        switch ((x >> 16) & 7) {
        case 0: acc += 11; break;
        case 1: acc -= 7; break;
        case 2: acc ^= 0x55; break;
        case 3: acc = (acc << 1) | (acc >> 63); break;
        case 5: acc += x & 0xff; break;
        default: break;
        }
    }
    return acc;
}

/* The loads mode's loop, in assembly so its instruction count is fixed:
 * each iteration is LADDER_LOADS `ldr` from @p + 8 * k (k = 0, 1, ...),
 * then `add`, `subs` and `b.ne`; @p advances by LADDER_STEP bytes. So the
 * load of byte offset d from the start of the sweep is operation
 * d / LADDER_STEP * LADDER_OPS + d % LADDER_STEP / 8 of it. */
#define LADDER_LOADS 256
#define LADDER_OPS (LADDER_LOADS + 3)
#define LADDER_STEP (LADDER_LOADS * 8)
#define STR_(x) #x
#define STR(x) STR_(x)

__attribute__((noinline)) void spe_workload_loads(const uint8_t *p, uint64_t n)
{
    if (!n)
        return;
    __asm__ volatile("1:\n"
                     ".set spe_off, 0\n"
                     ".rept " STR(LADDER_LOADS) "\n"
                     "ldr x9, [%[p], #spe_off]\n"
                     ".set spe_off, spe_off + 8\n"
                     ".endr\n"
                     "add %[p], %[p], #" STR(LADDER_STEP) "\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne 1b\n"
                     : [p] "+r"(p), [n] "+r"(n)
                     :
                     : "x9", "cc", "memory");
}

/* The others mode's loop: OTHERS_ADDS operations that are neither loads,
 * stores nor branches, then `subs` and `b.ne`, OTHERS_OPS in all; the
 * loop starts at the global label spe_workload_others_loop. */
#define OTHERS_ADDS 4096
#define OTHERS_OPS (OTHERS_ADDS + 2)
extern const char spe_workload_others_loop[];

__attribute__((noinline)) void spe_workload_others(uint64_t n)
{
    if (!n)
        return;
    __asm__ volatile(".global spe_workload_others_loop\n"
                     "spe_workload_others_loop:\n"
                     ".rept " STR(OTHERS_ADDS) "\n"
                     "add x9, x9, #1\n"
                     ".endr\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne spe_workload_others_loop\n"
                     : [n] "+r"(n)
                     :
                     : "x9", "cc");
}

/* The alias mode's loop: ALIAS_OPS instructions from the global label
 * spe_workload_alias_loop, the load first. */
#define ALIAS_OPS 5
extern const char spe_workload_alias_loop[];

__attribute__((noinline)) void spe_workload_alias(const uint64_t *p,
                                                  uint64_t n)
{
    if (!n)
        return;
    __asm__ volatile(".global spe_workload_alias_loop\n"
                     "spe_workload_alias_loop:\n"
                     "ldr x10, [%[p]]\n"
                     "add x9, x9, x10\n"
                     "add x11, x11, #1\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne spe_workload_alias_loop\n"
                     : [n] "+r"(n)
                     : [p] "r"(p)
                     : "x9", "x10", "x11", "cc", "memory");
}

/* The classes mode's loop, on a zeroed line of the array (so `cbnz` is
 * never taken), with a `tbz` on bit 2 of n ^ n >> 3, whose outcome varies
 * from one sampled pass to the next (a branch a predictor misses). The
 * SIMD&FP accesses are told apart by their data address (the line is at
 * 64 in a 256-byte block): scalar ldr/str q0 at 0x50/0x70, vector
 * ld1/st1 at 0xc0/0xe0. One more GP load walks the whole 4 MiB array a
 * line a pass, so that some loads miss L1 and L2 (L1D-REFILL,
 * LLC-ACCESS, a data source other than L1D) and the others hit. */
__attribute__((noinline)) void spe_workload_classes(uint8_t *p, uint64_t n)
{
    uint8_t *vld = p + 128, *vst = p + 160;
    uint64_t off = 0;

    if (!n)
        return;
    __asm__ volatile("1:\n"
                     "ldr x9, [%[p]]\n"
                     "ldur x11, [%[p], #60]\n"
                     "ldr x12, [%[far], %[off]]\n"
                     "add %[off], %[off], #64\n"
                     "and %[off], %[off], #0x3fffc0\n"
                     "ldr q0, [%[p], #16]\n"
                     "str x9, [%[p], #32]\n"
                     "str q0, [%[p], #48]\n"
                     "ld1 {v5.4s}, [%[vld]]\n"
                     "st1 {v5.4s}, [%[vst]]\n"
                     "cbnz x9, 2f\n"
                     "2:\n"
                     "eor x10, %[n], %[n], lsr #3\n"
                     "tbz x10, #2, 3f\n"
                     "3:\n"
                     "fadd d1, d1, d2\n"
                     "add v3.4s, v3.4s, v4.4s\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne 1b\n"
                     : [p] "+r"(p), [n] "+r"(n), [off] "+r"(off)
                     : [vld] "r"(vld), [vst] "r"(vst),
                       [far] "r"(spe_workload_array)
                     : "x9", "x10", "x11", "x12", "v0", "v1", "v2", "v3", "v4",
                       "v5", "cc", "memory");
}

/* The sve mode's loop (see the top of the file). */
__attribute__((noinline)) void spe_workload_sve(uint8_t *p, uint64_t n)
{
    if (!n)
        return;
    __asm__ volatile(".arch_extension sve\n"
                     "ptrue p1.s\n"
                     "mov x9, #3\n"
                     "whilelo p2.s, xzr, x9\n"
                     "pfalse p3.b\n"
                     "index z6.s, #0, #1\n"
                     "add x10, %[p], #0x100\n"
                     "add x11, %[p], #0x200\n"
                     "add x12, %[p], #0x300\n"
                     "add x13, %[p], #0x400\n"
                     "1:\n"
                     "ld1w {z0.s}, p1/z, [x10]\n"
                     "ld1w {z1.s}, p2/z, [x11]\n"
                     "ld1w {z7.s}, p3/z, [x11]\n"
                     "ld1w {z5.s}, p1/z, [x12, z6.s, uxtw #2]\n"
                     "fadd z2.s, p1/m, z2.s, z0.s\n"
                     "add z3.s, p2/m, z3.s, z1.s\n"
                     "add z4.s, z4.s, z5.s\n"
                     "st1w {z3.s}, p1, [x13]\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne 1b\n"
                     : [n] "+r"(n)
                     : [p] "r"(p)
                     : "x9", "x10", "x11", "x12", "x13", "p1", "p2", "p3",
                       "z0", "z1", "z2", "z3", "z4", "z5", "z6", "z7", "cc",
                       "memory");
}

/* The mte mode's loop (see the top of the file). */
__attribute__((noinline)) void spe_workload_mte(uint8_t *t, uint64_t n)
{
    if (!n)
        return;
    __asm__ volatile("1:\n"
                     "ldr x9, [%[t], #16]\n"
                     "str x9, [%[t], #32]\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne 1b\n"
                     : [n] "+r"(n)
                     : [t] "r"(t)
                     : "x9", "cc", "memory");
}

/* The faults mode's loop: a load from the page at @p, which faults the
 * first time, @p to the next page, then the others mode's adds and loop
 * instructions; it starts at the global label spe_workload_faults_loop. */
#define FAULTS_OPS (OTHERS_ADDS + 4)
extern const char spe_workload_faults_loop[];

__attribute__((noinline)) void spe_workload_faults(uint64_t n, const char *p)
{
    if (!n)
        return;
    __asm__ volatile(".global spe_workload_faults_loop\n"
                     "spe_workload_faults_loop:\n"
                     "ldr x10, [%[p]]\n"
                     "add %[p], %[p], #4096\n"
                     ".rept " STR(OTHERS_ADDS) "\n"
                     "add x9, x9, #1\n"
                     ".endr\n"
                     "subs %[n], %[n], #1\n"
                     "b.ne spe_workload_faults_loop\n"
                     : [n] "+r"(n), [p] "+r"(p)
                     :
                     : "x9", "x10", "cc", "memory");
}

/* The physical address of the page holding @va, from /proc/self/pagemap
 * (bit 63 present, bits 0-54 the PFN; the PFN reads as 0 without
 * CAP_SYS_ADMIN, which the initramfs's root has). 0 if unknown. */
static uint64_t phys_addr(int fd, const void *va)
{
    uint64_t entry;
    uintptr_t v = (uintptr_t)va;
    if (fd < 0 ||
        pread(fd, &entry, sizeof(entry), (off_t)(v / PAGE * 8)) != sizeof(entry))
        return 0;
    if (!(entry >> 63 & 1))
        return 0;
    return (entry & ((1ull << 55) - 1)) * PAGE + v % PAGE;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * With SPE_WORKLOAD_MARK=PATH (the console), a line there before and after
 * the timed loop: the host reads the CPU time each of QEMU's threads and
 * the backend took in between (bench-overhead). SPE_WORKLOAD_MARK_PAUSE=S
 * sleeps S seconds after each line, so that a host slower to act than the
 * runner's poll (callgrind_control, about 2 s) acts while the guest idles.
 */
static void mark(const char *line)
{
    const char *path = getenv("SPE_WORKLOAD_MARK");
    const char *pause = getenv("SPE_WORKLOAD_MARK_PAUSE");
    int fd = path ? open(path, O_WRONLY | O_NOCTTY) : -1;

    if (fd < 0)
        return;
    dprintf(fd, "%s\n", line);
    close(fd);
    if (pause)
        sleep((unsigned int)atoi(pause));
}

/* One `0xVA 0xPA` line per page of the array into @path (PA 0 if the
 * page has none); returns 0 on success. One read of the pagemap for the
 * whole array: the kernel walks the page tables once, not per page. */
static int write_pagemap(const char *path)
{
    static uint64_t entries[ARRAY_BYTES / PAGE];
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t got = pread(fd, entries, sizeof(entries),
                        (off_t)((uintptr_t)spe_workload_array / PAGE * 8));
    close(fd);
    FILE *f = fopen(path, "w");
    if (got != (ssize_t)sizeof(entries) || !f) {
        if (f)
            fclose(f);
        return -1;
    }
    for (uint32_t i = 0; i < ARRAY_BYTES / PAGE; i++)
        fprintf(f, "%p 0x%llx\n", (void *)(spe_workload_array + i * PAGE),
                entries[i] >> 63 & 1
                    ? (unsigned long long)(entries[i] & ((1ull << 55) - 1)) * PAGE
                    : 0ull);
    return fclose(f);
}

/* Instructions decoded from each function's start in `branches` mode:
 * more than either function has (the code after them decodes as well). */
#define BRANCH_SCAN 1024

static int64_t sign_extend(uint32_t v, int bits)
{
    return (int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits);
}

/* `branches` mode: the direct branches' targets (B, B.cond, BC.cond,
 * CBZ/CBNZ, TBZ/TBNZ), as the Arm ARM encodes their offsets. */
static int branches(const char *path)
{
    const uint32_t *fns[] = {
        (const uint32_t *)(uintptr_t)spe_workload_strided,
        (const uint32_t *)(uintptr_t)spe_workload_branchy,
    };
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (unsigned i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        for (unsigned k = 0; k < BRANCH_SCAN; k++) {
            uint32_t insn = fns[i][k];
            int64_t off;
            if ((insn & 0xfc000000) == 0x14000000)      /* B */
                off = sign_extend(insn & 0x3ffffff, 26);
            else if ((insn & 0xff000000) == 0x54000000 || /* B.cond */
                     (insn & 0x7e000000) == 0x34000000)   /* CBZ */
                off = sign_extend(insn >> 5 & 0x7ffff, 19);
            else if ((insn & 0x7e000000) == 0x36000000)   /* TBZ */
                off = sign_extend(insn >> 5 & 0x3fff, 14);
            else
                continue;
            uintptr_t pc = (uintptr_t)&fns[i][k];
            fprintf(f, "%p %p\n", (void *)pc, (void *)(pc + off * 4));
        }
    }
    return fclose(f);
}

/* `loads` mode: PASSES sweeps of the array by spe_workload_loads. */
static int loads(uint64_t passes)
{
    printf("SPE-RESULT workload_array_va=%p workload_array_bytes=%u "
           "workload_ladder_loads=%u workload_ladder_ops=%u "
           "workload_loads_pc=%p\n",
           (void *)spe_workload_array, ARRAY_BYTES, LADDER_LOADS, LADDER_OPS,
           (void *)(uintptr_t)spe_workload_loads);
    fflush(stdout);
    uint64_t start = now_ns();
    for (uint64_t i = 0; i < passes; i++)
        spe_workload_loads(spe_workload_array, ARRAY_BYTES / LADDER_STEP);
    printf("SPE-RESULT workload_passes=%llu workload_ns=%llu\n",
           (unsigned long long)passes, (unsigned long long)(now_ns() - start));
    return 0;
}

/* `classes` mode: ITERATIONS runs of spe_workload_classes's loop. */
static int classes(uint64_t iterations)
{
    uint8_t *line = spe_workload_array + STRIDE;

    /* The line, so that a judge tells the vector accesses by address. */
    printf("SPE-RESULT workload_classes_pc=%p workload_classes_line=%p\n",
           (void *)(uintptr_t)spe_workload_classes, (void *)line);
    fflush(stdout);
    spe_workload_classes(line, iterations);
    printf("SPE-RESULT workload_iterations=%llu\n",
           (unsigned long long)iterations);
    return 0;
}

/* `sve` mode: ITERATIONS runs of spe_workload_sve's loop. */
static int sve(uint64_t iterations)
{
    uint64_t vl;

    __asm__(".arch_extension sve\nrdvl %0, #8" : "=r"(vl));
    printf("SPE-RESULT workload_sve_pc=%p workload_sve_vl=%llu "
           "workload_sve_array=%p\n",
           (void *)(uintptr_t)spe_workload_sve, (unsigned long long)vl,
           (void *)spe_workload_array);
    fflush(stdout);
    spe_workload_sve(spe_workload_array, iterations);
    printf("SPE-RESULT workload_iterations=%llu\n",
           (unsigned long long)iterations);
    return 0;
}

#ifndef PROT_MTE
#define PROT_MTE 0x20
#endif
#ifndef PR_MTE_TCF_SYNC
#define PR_MTE_TCF_SYNC (1UL << 1)
#define PR_MTE_TAG_SHIFT 3
#endif

/* `mte` mode: ITERATIONS runs of spe_workload_mte's loop on a tagged
 * page; fails if the kernel or the CPU has no MTE. */
static int mte(uint64_t iterations)
{
    /* Tags 1-15 for irg: a tagged pointer differs from the untagged one. */
    if (prctl(PR_SET_TAGGED_ADDR_CTRL, PR_TAGGED_ADDR_ENABLE | PR_MTE_TCF_SYNC |
                  (0xfffeUL << PR_MTE_TAG_SHIFT), 0, 0, 0)) {
        perror("PR_SET_TAGGED_ADDR_CTRL");
        return 1;
    }
    uint8_t *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_MTE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap PROT_MTE");
        return 1;
    }
    uint8_t *t;
    __asm__ volatile(".arch armv8.5-a+memtag\nirg %0, %1" : "=r"(t) : "r"(p));
    for (unsigned i = 0; i < 64; i += 16)
        __asm__ volatile(".arch armv8.5-a+memtag\nstg %0, [%0]" : : "r"(t + i)
                         : "memory");
    printf("SPE-RESULT workload_mte_pc=%p workload_mte_ld=%p "
           "workload_mte_st=%p\n",
           (void *)(uintptr_t)spe_workload_mte, (void *)(t + 16),
           (void *)(t + 32));
    fflush(stdout);
    spe_workload_mte(t, iterations);
    printf("SPE-RESULT workload_iterations=%llu\n",
           (unsigned long long)iterations);
    return 0;
}

/* `others` mode: ITERATIONS runs of spe_workload_others's loop. */
static int others(uint64_t iterations)
{
    printf("SPE-RESULT workload_others_pc=%p workload_others_ops=%u\n",
           (const void *)spe_workload_others_loop, OTHERS_OPS);
    fflush(stdout);
    uint64_t start = now_ns();
    spe_workload_others(iterations);
    printf("SPE-RESULT workload_iterations=%llu workload_ns=%llu\n",
           (unsigned long long)iterations,
           (unsigned long long)(now_ns() - start));
    return 0;
}

/* `alias` mode: ITERATIONS runs of spe_workload_alias's loop. */
static int alias(uint64_t iterations)
{
    printf("SPE-RESULT workload_alias_pc=%p workload_alias_ops=%u\n",
           (const void *)spe_workload_alias_loop, ALIAS_OPS);
    fflush(stdout);
    spe_workload_alias((const uint64_t *)spe_workload_array, iterations);
    printf("SPE-RESULT workload_iterations=%llu\n",
           (unsigned long long)iterations);
    return 0;
}

/* `faults` mode: ITERATIONS runs of spe_workload_faults's loop, each on a
 * page of a fresh mapping (no huge pages, so that each page faults). */
static int faults(uint64_t iterations)
{
    size_t len = iterations * PAGE;
    char *p = mmap(NULL, len ? len : PAGE, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct rusage before, after;

    if (p == MAP_FAILED || madvise(p, len ? len : PAGE, MADV_NOHUGEPAGE)) {
        perror("faults");
        return 1;
    }
    printf("SPE-RESULT workload_others_pc=%p workload_others_ops=%u\n",
           (const void *)spe_workload_faults_loop, FAULTS_OPS);
    fflush(stdout);
    getrusage(RUSAGE_SELF, &before);
    uint64_t start = now_ns();
    spe_workload_faults(iterations, p);
    uint64_t ns = now_ns() - start;
    getrusage(RUSAGE_SELF, &after);
    printf("SPE-RESULT workload_iterations=%llu workload_ns=%llu "
           "workload_faults=%ld\n",
           (unsigned long long)iterations, (unsigned long long)ns,
           after.ru_minflt - before.ru_minflt);
    return 0;
}

/* `no-room` mode (see the top of the file). */
#define NO_ROOM_AUX_PAGES 4
#define NO_ROOM_TAIL 64
#define NO_ROOM_HOLD_S 4

static uint64_t aux_head(struct perf_event_mmap_page *pc)
{
    return __atomic_load_n(&pc->aux_head, __ATOMIC_ACQUIRE);
}

static int no_room(void)
{
    struct perf_event_attr attr;
    struct perf_event_mmap_page *pc;
    FILE *f = fopen("/sys/bus/event_source/devices/arm_spe_0/type", "r");
    uint64_t head, seen, since, done = 0, deadline;
    int type, fd;

    if (!f || fscanf(f, "%d", &type) != 1) {
        perror("arm_spe_0/type");
        return 1;
    }
    fclose(f);
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = type;
    attr.sample_period = 1024;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.disabled = 1;
    fd = syscall(__NR_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) {
        perror("perf_event_open");
        return 1;
    }
    pc = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pc == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pc->aux_offset = 2 * PAGE;
    pc->aux_size = NO_ROOM_AUX_PAGES * PAGE;
    if (mmap(NULL, pc->aux_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
             pc->aux_offset) == MAP_FAILED) {
        perror("mmap aux");
        return 1;
    }
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
    /* Consume one record's worth, never more: the tail stays there. */
    deadline = now_ns() + 10000000000ull;
    while (aux_head(pc) < NO_ROOM_TAIL && now_ns() < deadline)
        spe_workload_strided((uint32_t)done++);
    __atomic_store_n(&pc->aux_tail, NO_ROOM_TAIL, __ATOMIC_RELEASE);
    /* Run until the head has not moved for a second. */
    seen = aux_head(pc);
    since = now_ns();
    while (now_ns() - since < 1000000000ull && now_ns() < deadline) {
        spe_workload_strided((uint32_t)done++);
        head = aux_head(pc);
        if (head != seen) {
            seen = head;
            since = now_ns();
        }
    }
    printf("SPE-NO-ROOM aux_head=%llu\n", (unsigned long long)seen);
    fflush(stdout);
    since = now_ns();
    while (now_ns() - since < NO_ROOM_HOLD_S * 1000000000ull)
        spe_workload_strided((uint32_t)done++);
    printf("SPE-RESULT no_room_aux_head=%llu no_room_aux_size=%u "
           "no_room_tail=%u\n", (unsigned long long)aux_head(pc),
           NO_ROOM_AUX_PAGES * PAGE, NO_ROOM_TAIL);
    close(fd);
    return 0;
}

static int levels(uint64_t seconds)
{
    uint64_t start = now_ns(), sum = 0, small = 0, large = 0;
    uint32_t at = 0;

    memset(levels_small, 1, sizeof(levels_small));
    memset(levels_large, 1, sizeof(levels_large));
    printf("SPE-RESULT levels_small_bytes=%u levels_large_bytes=%u\n",
           LEVELS_SMALL, LEVELS_LARGE);
    fflush(stdout);
    while (now_ns() - start < seconds * 1000000000u) {
        uint64_t t = now_ns();

        while (now_ns() - t < LEVELS_SLICE_NS) {
            sum += spe_workload_small(1 << 16);
            small++;
        }
        t = now_ns();
        while (now_ns() - t < LEVELS_SLICE_NS) {
            sum += spe_workload_large(1 << 16, &at);
            large++;
        }
    }
    printf("SPE-RESULT levels_small_calls=%llu levels_large_calls=%llu "
           "levels_checksum=0x%llx\n", (unsigned long long)small,
           (unsigned long long)large, (unsigned long long)sum);
    return 0;
}

/* Two counters: words 0 and 1 (one line), or 0 and 8 (padded). */
static volatile uint64_t share[16] __attribute__((aligned(64)));
static volatile uint64_t *share_b;
static volatile int share_stop;

__attribute__((noinline)) void *spe_workload_share_a(void *arg)
{
    (void)arg;
    while (!share_stop)
        share[0]++;
    return NULL;
}

__attribute__((noinline)) void *spe_workload_share_b(void *arg)
{
    (void)arg;
    while (!share_stop)
        (*share_b)++;
    return NULL;
}

static int false_sharing(uint64_t seconds, int padded)
{
    void *(*fn[2])(void *) = { spe_workload_share_a, spe_workload_share_b };
    pthread_t t[2];

    share_b = &share[padded ? 8 : 1];
    printf("SPE-RESULT share_a=%p share_b=%p share_padded=%d\n",
           (void *)&share[0], (void *)share_b, padded);
    fflush(stdout);
    for (int i = 0; i < 2; i++) {
        pthread_attr_t attr;
        cpu_set_t cpus;

        CPU_ZERO(&cpus);
        CPU_SET(i, &cpus);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
        if (pthread_create(&t[i], &attr, fn[i], NULL)) {
            perror("pthread_create");
            return 1;
        }
        pthread_attr_destroy(&attr);
    }
    sleep((unsigned int)seconds);
    share_stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("SPE-RESULT share_count_a=%llu share_count_b=%llu\n",
           (unsigned long long)share[0], (unsigned long long)*share_b);
    return 0;
}

#define IPI_SLOW_MS 100
#define IPI_MAX_CALLS (1u << 20)

static volatile int ipi_stop;
static uint32_t ipi_us[IPI_MAX_CALLS];

__attribute__((noinline)) void *spe_workload_ipi_target(void *arg)
{
    uint32_t pass = 0;

    (void)arg;
    while (!ipi_stop)
        spe_workload_strided(pass++);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

static int ipis(uint64_t seconds, int cpus)
{
    pthread_t t[64];
    cpu_set_t set;
    uint64_t start, end;
    uint32_t calls = 0, slow = 0;
    int n = 0;

    if (cpus < 2 || cpus > 64) {
        fprintf(stderr, "ipis: CPUS must be 2 to 64\n");
        return 1;
    }
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof(set), &set) ||
        syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0, 0)) {
        perror("ipis");
        return 1;
    }
    for (n = 0; n < cpus - 1; n++) {
        pthread_attr_t attr;

        CPU_ZERO(&set);
        CPU_SET(n + 1, &set);
        pthread_attr_init(&attr);
        pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
        if (pthread_create(&t[n], &attr, spe_workload_ipi_target, NULL)) {
            perror("pthread_create");
            return 1;
        }
        pthread_attr_destroy(&attr);
    }
    /* Let the targets reach their loop (and their CPUs stop ticking). */
    sleep(1);
    start = now_ns();
    end = start + seconds * 1000000000u;
    for (uint64_t t0 = start; t0 < end && calls < IPI_MAX_CALLS;) {
        uint64_t t1;

        if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)) {
            perror("membarrier");
            return 1;
        }
        t1 = now_ns();
        ipi_us[calls] = (uint32_t)((t1 - t0) / 1000);
        slow += t1 - t0 > IPI_SLOW_MS * 1000000ull;
        calls++;
        t0 = t1;
    }
    ipi_stop = 1;
    while (n--)
        pthread_join(t[n], NULL);
    qsort(ipi_us, calls, sizeof(ipi_us[0]), cmp_u32);
    printf("SPE-RESULT ipi_calls=%u ipi_targets=%d ipi_median_us=%u "
           "ipi_longest_us=%u ipi_slow=%u ipi_slow_ms=%u\n",
           calls, cpus - 1, calls ? ipi_us[calls / 2] : 0,
           calls ? ipi_us[calls - 1] : 0, slow, IPI_SLOW_MS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "branches")) {
        if (branches(argv[2])) {
            perror(argv[2]);
            return 1;
        }
        return 0;
    }
    /* Touch every page first so each has a physical address (and no
     * sampled load of the loops faults on it). */
    for (uint32_t off = 0; off < ARRAY_BYTES; off += PAGE)
        spe_workload_array[off] = 1;
    if (argc > 1 && !strcmp(argv[1], "loads"))
        return loads(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "others"))
        return others(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "classes"))
        return classes(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "mte"))
        return mte(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "sve"))
        return sve(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "faults"))
        return faults(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "no-room"))
        return no_room();
    if (argc > 1 && !strcmp(argv[1], "alias"))
        return alias(argc > 2 ? strtoull(argv[2], NULL, 0) : 1);
    if (argc > 1 && !strcmp(argv[1], "levels"))
        return levels(argc > 2 ? strtoull(argv[2], NULL, 0) : 4);
    if (argc > 1 && !strcmp(argv[1], "ipis"))
        return ipis(argc > 2 ? strtoull(argv[2], NULL, 0) : 4,
                    argc > 3 ? atoi(argv[3]) : 2);
    if (argc > 1 && !strcmp(argv[1], "false-sharing"))
        return false_sharing(argc > 2 ? strtoull(argv[2], NULL, 0) : 3,
                             argc > 3 && !strcmp(argv[3], "padded"));

    uint64_t iterations = argc > 1 ? strtoull(argv[1], NULL, 0) : 200;
    uint64_t seconds = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
    const char *pagemap = argc > 3 ? argv[3] : NULL;
    int fd = open("/proc/self/pagemap", O_RDONLY);
    printf("SPE-RESULT workload_array_va=%p workload_array_bytes=%u "
           "workload_stride=%u\n",
           (void *)spe_workload_array, ARRAY_BYTES, STRIDE);
    printf("SPE-RESULT workload_array_pa0=0x%llx workload_array_pa1=0x%llx\n",
           (unsigned long long)phys_addr(fd, spe_workload_array),
           (unsigned long long)phys_addr(fd, spe_workload_array + PAGE));
    printf("SPE-RESULT workload_strided_pc=%p workload_branchy_pc=%p\n",
           (void *)(uintptr_t)spe_workload_strided,
           (void *)(uintptr_t)spe_workload_branchy);
    if (fd >= 0)
        close(fd);
    fflush(stdout);

    mark("SPE-BENCH-START");
    uint64_t start = now_ns(), sum = 0, done = 0;
    while (iterations == 0 || done < iterations) {
        sum += spe_workload_strided((uint32_t)done);
        sum ^= spe_workload_branchy(sum + done);
        done++;
        if (seconds && now_ns() - start >= seconds * 1000000000u)
            break;
        if (!iterations && !seconds)
            break; /* no limit at all: one pass, not forever */
    }
    uint64_t ns = now_ns() - start;
    mark("SPE-BENCH-END");
    printf("SPE-RESULT workload_iterations=%llu workload_ns=%llu "
           "workload_checksum=0x%llx\n",
           (unsigned long long)done, (unsigned long long)ns,
           (unsigned long long)sum);
    if (pagemap && write_pagemap(pagemap)) {
        perror(pagemap);
        return 1;
    }
    return 0;
}
