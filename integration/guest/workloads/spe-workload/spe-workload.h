/*
 * spe-workload's shared declarations: the array and the strided loop of
 * spe-workload.c, which the modes of the other files run on, and each
 * mode's entry point, which main() calls.
 */
#ifndef SPE_WORKLOAD_H
#define SPE_WORKLOAD_H

#include <stdint.h>
#include <time.h>

#define ARRAY_BYTES (4u << 20)
#define STRIDE 64u
#define PAGE 4096u

/* Hidden: defined in this executable, so the other files address it
 * directly (adrp + add), as spe-workload.c does, not through the GOT. */
extern uint8_t spe_workload_array[ARRAY_BYTES]
    __attribute__((visibility("hidden")));

uint64_t spe_workload_strided(uint32_t pass);

/* Inline, as it was when all modes were one file: the timed loops keep
 * calling clock_gettime() directly. */
static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* asm-loops.c: the loops of a fixed instruction count. */
int loads(uint64_t passes);
int others(uint64_t iterations);
int faults(uint64_t iterations);
int alias(uint64_t iterations);
int classes(uint64_t iterations);
int sve(uint64_t iterations);
int mte(uint64_t iterations);

/* memory.c: where loads are served from (perf mem, perf c2c). */
int levels(uint64_t seconds);
int false_sharing(uint64_t seconds, int padded);

/* kernel.c: the guest kernel's side (the SPE driver's AUX buffer, IPIs). */
int no_room(void);
int ipis(uint64_t seconds, int cpus);

#endif /* SPE_WORKLOAD_H */
