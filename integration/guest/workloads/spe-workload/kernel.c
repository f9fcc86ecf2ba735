/*
 * spe-workload's modes for the guest kernel's side of profiling: the SPE
 * driver's AUX buffer and IPIs between vCPUs; see spe-workload.c for the
 * usage.
 *
 * `no-room` mode profiles itself with arm_spe_0 (EL0, period 1024) into
 * a 4-page AUX buffer it consumes only the first 64 bytes of, runs the
 * strided loop until the buffer stops growing (the driver found no room
 * left), prints `SPE-NO-ROOM` and runs on for NO_ROOM_HOLD_S seconds
 * with the event still scheduled in, for the host to look at the SPU.
 *
 * `ipis` mode runs, for SECONDS, the strided loop on CPUs 1 to CPUS - 1
 * (CPUS default 2) while the main thread, on CPU 0, makes
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) calls: each interrupts
 * those CPUs with an IPI and returns once every one has taken it. An IPI
 * is an exit request to a vCPU that runs TBs; one the vCPU lost would hold
 * its call until something else stopped the vCPU (on a tickless CPU, up to
 * a second). It prints the calls, their median and longest time, and how
 * many took over IPI_SLOW_MS.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "spe-workload.h"

/* `no-room` mode (see the top of the file). */
#define NO_ROOM_AUX_PAGES 4
#define NO_ROOM_TAIL 64
#define NO_ROOM_HOLD_S 4

static uint64_t aux_head(struct perf_event_mmap_page *pc)
{
    return __atomic_load_n(&pc->aux_head, __ATOMIC_ACQUIRE);
}

int no_room(void)
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

#define IPI_SLOW_MS 100
/* Calls by microseconds for the median, exact below 65 ms; longer ones
 * share the last bucket (the longest is kept apart). */
#define IPI_BUCKETS 65536

static volatile int ipi_stop;
static uint32_t ipi_hist[IPI_BUCKETS];

__attribute__((noinline)) void *spe_workload_ipi_target(void *arg)
{
    uint32_t pass = 0;

    (void)arg;
    while (!ipi_stop)
        spe_workload_strided(pass++);
    return NULL;
}

/* The call at rank @calls / 2 in the histogram. */
static uint32_t ipi_median_us(uint32_t calls)
{
    uint32_t seen = 0, us;

    for (us = 0; us < IPI_BUCKETS - 1; us++) {
        seen += ipi_hist[us];
        if (seen > calls / 2)
            break;
    }
    return us;
}

int ipis(uint64_t seconds, int cpus)
{
    pthread_t t[64];
    cpu_set_t set;
    uint64_t start, end;
    uint32_t calls = 0, slow = 0, longest = 0;
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
    for (uint64_t t0 = start; t0 < end;) {
        uint64_t t1;
        uint32_t us;

        if (syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)) {
            perror("membarrier");
            return 1;
        }
        t1 = now_ns();
        us = (uint32_t)((t1 - t0) / 1000);
        ipi_hist[us < IPI_BUCKETS ? us : IPI_BUCKETS - 1]++;
        longest = us > longest ? us : longest;
        slow += t1 - t0 > IPI_SLOW_MS * 1000000ull;
        calls++;
        t0 = t1;
    }
    ipi_stop = 1;
    while (n--)
        pthread_join(t[n], NULL);
    printf("SPE-RESULT ipi_calls=%u ipi_targets=%d ipi_median_us=%u "
           "ipi_longest_us=%u ipi_slow=%u ipi_slow_ms=%u\n",
           calls, cpus - 1, calls ? ipi_median_us(calls) : 0, longest, slow,
           IPI_SLOW_MS);
    return 0;
}
