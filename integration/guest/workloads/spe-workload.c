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
 * The other modes live in spe-workload/, one file per concern (the
 * modes' own descriptions are there): asm-loops.c (loads, others,
 * faults, alias, classes, sve, mte: loops of a fixed instruction count),
 * memory.c (levels, false-sharing: where loads are served from) and
 * kernel.c (no-room, ipis: the guest kernel's side of profiling).
 *
 * `branches` mode runs nothing: it writes the direct branches in and after
 * spe_workload_strided and spe_workload_branchy to FILE, one
 * `0xPC 0xTARGET` line each, decoded from the binary's own code, so that a
 * record's branch target can be checked against its instruction's.
 *
 * Built static (aarch64-linux-gnu-gcc -static -O1, linked with the .c
 * files of spe-workload/) so the initramfs needs no loader for it and the
 * array sits at a link-time address.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spe-workload/spe-workload.h"

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
