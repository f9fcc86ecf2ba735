/*
 * spe-workload's modes for where loads are served from: the cache levels
 * (perf mem) and a line two CPUs share (perf c2c); see spe-workload.c for
 * the usage.
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
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "spe-workload.h"

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

int levels(uint64_t seconds)
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

int false_sharing(uint64_t seconds, int padded)
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
