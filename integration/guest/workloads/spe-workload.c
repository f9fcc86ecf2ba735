/*
 * spe-workload: the guest program issue 6's proofs sample. A strided
 * read-modify-write loop over a global array whose virtual and physical
 * addresses it prints, and a branchy function, so that SPE records can be
 * checked against known PCs, data addresses and branch behaviour.
 *
 *   spe-workload [ITERATIONS [SECONDS]]
 *
 * Runs until ITERATIONS passes (default 200) or SECONDS of wall time,
 * whichever comes first; 0 means no limit of that kind. Results go to
 * stdout as the harness's `SPE-RESULT key=value` lines.
 *
 * Built static (aarch64-linux-gnu-gcc -static -O1) so the initramfs needs
 * no loader for it and the array sits at a link-time address.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
    uint64_t iterations = argc > 1 ? strtoull(argv[1], NULL, 0) : 200;
    uint64_t seconds = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;

    /* Touch every page first so each has a physical address. */
    for (uint32_t off = 0; off < ARRAY_BYTES; off += PAGE)
        spe_workload_array[off] = 1;
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
    printf("SPE-RESULT workload_iterations=%llu workload_ns=%llu "
           "workload_checksum=0x%llx\n",
           (unsigned long long)done, (unsigned long long)ns,
           (unsigned long long)sum);
    return 0;
}
