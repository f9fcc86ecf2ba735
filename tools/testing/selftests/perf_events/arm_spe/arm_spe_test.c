// SPDX-License-Identifier: GPL-2.0
/*
 * Tests of the Arm SPE driver (arm_spe_pmu) through perf_event_open and
 * the AUX buffer: the PMU's caps against PMSIDR_EL1, records of a
 * workload, each filter of the running kernel, discard, AUX snapshot
 * mode, and the driver's reaction to every fault kind of vhost-device-spe's
 * catalogue, armed through the guest control port. Without the port (real
 * hardware, or a VM without one) the fault cases are skipped.
 *
 * SPE_TEST_WRONG_FAULT=1 arms, for each fault case, a fault whose reaction
 * differs from the case's: a negative control, under which every fault
 * case must fail.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef SPE_KSELFTEST
#include "../../kselftest.h"
#else
#include "ktap.h"
#endif
#include "spe_control.h"
#include "spe_decode.h"

#define PMU_DIR "/sys/bus/event_source/devices/arm_spe_0"
#define DATA_PAGES 64
#define AUX_PAGES 256
#define PERIOD 4096

/* perf_event_attr up to config3 (PERF_ATTR_SIZE_VER8), whatever the
 * installed uapi header has.
 */
union attr {
	struct perf_event_attr a;
	__u64 raw[17];
};

#define ATTR_SIZE_VER8 136

static struct spe_ctl ctl;
static int have_ctl;
static long page;
static char reply[SPE_CTL_LINE];

/*
 * The workload, in a section of its own so that its PCs are known
 * (userspace has no noinline, __used or __section macros).
 */
#define WORK __attribute__((__noinline__, __used__, section("spe_work")))
extern const char __start_spe_work[], __stop_spe_work[];
static volatile __u64 work_buf[4096];

WORK static __u64 work(unsigned long iters)
{
	__u64 sum = 0;
	unsigned long i;

	for (i = 0; i < iters; i++) {
		unsigned int j = (i * 67) & 4095;

		sum += work_buf[j];
		work_buf[(j + 512) & 4095] = sum;
		if (sum & 1)
			sum ^= i;
	}
	return sum;
}

static int read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return 0;
}

static long read_long(const char *path)
{
	char buf[64];

	if (read_file(path, buf, sizeof(buf)))
		return -1;
	return strtol(buf, NULL, 0);
}

/* Sets format attribute @name ("config1:0-63") to @val; -ENOENT if the
 * running kernel has no such attribute.
 */
static int set_format(union attr *at, const char *name, __u64 val)
{
	char path[256], fmt[64];
	unsigned int word = 0, lo, hi;
	__u64 mask;
	__u64 *cfg;

	snprintf(path, sizeof(path), PMU_DIR "/format/%s", name);
	if (read_file(path, fmt, sizeof(fmt)))
		return -ENOENT;
	if (sscanf(fmt, "config%u:%u-%u", &word, &lo, &hi) == 3 ||
	    sscanf(fmt, "config:%u-%u", &lo, &hi) == 2) {
	} else if (sscanf(fmt, "config%u:%u", &word, &lo) == 2 ||
		   sscanf(fmt, "config:%u", &lo) == 1) {
		hi = lo;
	} else {
		return -EINVAL;
	}
	if (!strncmp(fmt, "config:", 7))
		word = 0;
	switch (word) {
	case 0:
		cfg = (__u64 *)&at->a.config;
		break;
	case 1:
		cfg = (__u64 *)&at->a.config1;
		break;
	case 2:
		cfg = (__u64 *)&at->a.config2;
		break;
	case 3:
		cfg = &at->raw[16];
		at->a.size = ATTR_SIZE_VER8;
		break;
	default:
		return -EINVAL;
	}
	mask = hi - lo == 63 ? ~0ULL : ((1ULL << (hi - lo + 1)) - 1) << lo;
	*cfg = (*cfg & ~mask) | ((val << lo) & mask);
	return 0;
}

struct run {
	int fd;
	__u8 *base;
	__u8 *aux;
	int overwrite;
	/* What the data ring's PERF_RECORD_AUX records said. */
	unsigned long aux_records;
	__u64 flags;
	__u64 first_size;
	__u64 aux_bytes;
	__u64 aux_head;
	struct spe_stats st;
	unsigned long in_work, ldst, ld, st_, branch, with_va, with_pa;
	unsigned long with_ts, el0;
	unsigned long lat_below, ev_missing, ev_present;
	/* Times the task was scheduled out while it recorded. */
	long switches;
};

/* What count() checks each record against (0: nothing). */
static __u32 want_latency;
static __u64 want_events;
/* Total latencies of the unfiltered run's records, by value (capped). */
#define LAT_MAX 4096
static unsigned long latencies[LAT_MAX];

static void base_attr(union attr *at)
{
	memset(at, 0, sizeof(*at));
	at->a.size = sizeof(at->a) < PERF_ATTR_SIZE_VER7 ?
		     sizeof(at->a) : PERF_ATTR_SIZE_VER7;
	at->a.type = read_long(PMU_DIR "/type");
	at->a.sample_period = PERIOD;
	at->a.disabled = 1;
	at->a.exclude_kernel = 1;
	at->a.exclude_hv = 1;
	set_format(at, "ts_enable", 1);
}

static int open_run(struct run *r, union attr *at, int overwrite)
{
	struct perf_event_mmap_page *pc;

	memset(r, 0, sizeof(*r));
	r->fd = syscall(__NR_perf_event_open, &at->a, 0, -1, -1, 0);
	if (r->fd < 0)
		return -errno;
	r->base = mmap(NULL, (DATA_PAGES + 1) * page, PROT_READ | PROT_WRITE,
		       MAP_SHARED, r->fd, 0);
	if (r->base == MAP_FAILED)
		goto fail;
	pc = (void *)r->base;
	pc->aux_offset = (DATA_PAGES + 1) * page;
	pc->aux_size = AUX_PAGES * page;
	/* A read-only AUX area is overwrite (snapshot) mode. */
	r->overwrite = overwrite;
	r->aux = mmap(NULL, AUX_PAGES * page,
		      overwrite ? PROT_READ : PROT_READ | PROT_WRITE,
		      MAP_SHARED, r->fd, pc->aux_offset);
	if (r->aux == MAP_FAILED) {
		munmap(r->base, (DATA_PAGES + 1) * page);
		goto fail;
	}
	return 0;
fail:
	close(r->fd);
	return -errno;
}

static void close_run(struct run *r)
{
	munmap(r->aux, AUX_PAGES * page);
	munmap(r->base, (DATA_PAGES + 1) * page);
	close(r->fd);
}

static void count(const struct spe_record *rec, void *arg)
{
	struct run *r = arg;

	if (rec->pc >= (unsigned long)__start_spe_work &&
	    rec->pc < (unsigned long)__stop_spe_work)
		r->in_work++;
	if (rec->el == 0)
		r->el0++;
	if (rec->class == SPE_LDST) {
		r->ldst++;
		if (rec->subclass & 1)
			r->st_++;
		else
			r->ld++;
	}
	if (rec->class == SPE_BRANCH)
		r->branch++;
	if (rec->va)
		r->with_va++;
	if (rec->has_pa)
		r->with_pa++;
	if (rec->has_ts)
		r->with_ts++;
	if (rec->has_total_lat)
		latencies[rec->total_lat < LAT_MAX ? rec->total_lat : LAT_MAX - 1]++;
	if (want_latency && (!rec->has_total_lat ||
			     rec->total_lat < want_latency))
		r->lat_below++;
	if (want_events) {
		if ((rec->events & want_events) == want_events)
			r->ev_present++;
		else
			r->ev_missing++;
	}
}

/* Reads the data ring's PERF_RECORD_AUX records, and decodes the AUX
 * data each one covers.
 */
static void collect(struct run *r)
{
	struct perf_event_mmap_page *pc = (void *)r->base;
	__u64 head = __atomic_load_n(&pc->data_head, __ATOMIC_ACQUIRE);
	__u64 tail = pc->data_tail, size = DATA_PAGES * page;
	__u8 *data = r->base + page;

	r->aux_head = __atomic_load_n(&pc->aux_head, __ATOMIC_ACQUIRE);
	while (tail < head) {
		struct perf_event_header h;
		__u64 rec[3];
		unsigned int i;

		for (i = 0; i < sizeof(h); i++)
			((__u8 *)&h)[i] = data[(tail + i) % size];
		if (h.type == PERF_RECORD_AUX && h.size >= sizeof(h) + 24) {
			for (i = 0; i < sizeof(rec); i++)
				((__u8 *)rec)[i] =
					data[(tail + sizeof(h) + i) % size];
			if (!r->aux_records)
				r->first_size = rec[1];
			r->aux_records++;
			r->aux_bytes += rec[1];
			r->flags |= rec[2];
			if (!r->overwrite && rec[1] &&
			    rec[0] % (AUX_PAGES * page) + rec[1] <=
			    (__u64)AUX_PAGES * page)
				spe_decode(r->aux + rec[0] % (AUX_PAGES * page),
					   rec[1], count, r, &r->st);
		}
		if (!h.size)
			break;
		tail += h.size;
	}
	__atomic_store_n(&pc->data_tail, tail, __ATOMIC_RELEASE);
}

/* Records @iters of the workload with @at. */
/* This thread's context switches so far, voluntary or not. */
static long context_switches(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return 0;
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

static int record(struct run *r, union attr *at, int overwrite,
		  unsigned long iters)
{
	int ret = open_run(r, at, overwrite);

	if (ret)
		return ret;
	r->switches = -context_switches();
	ioctl(r->fd, PERF_EVENT_IOC_ENABLE, 0);
	work(iters);
	ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0);
	r->switches += context_switches();
	collect(r);
	close_run(r);
	return 0;
}

static void test_caps(void)
{
	__u64 pmsidr, interval, count_size;
	static const long intervals[] = { 256, 256, 512, 768, 1024, 1536,
					  2048, 3072 };
	long min_interval = read_long(PMU_DIR "/caps/min_interval");
	long cs = read_long(PMU_DIR "/caps/count_size");
	long arch_inst = read_long(PMU_DIR "/caps/arch_inst");

	if (min_interval < 0 || cs < 0 || arch_inst < 0) {
		ksft_test_result_fail("caps_match_pmsidr: no caps/ files\n");
		return;
	}
	if (!have_ctl) {
		ksft_test_result_skip("caps_match_pmsidr: no guest control port to read PMSIDR_EL1\n");
		return;
	}
	if (spe_ctl_call(&ctl, "query-spu", "{\"vcpu\":0}", reply,
			 sizeof(reply)) ||
	    spe_json_u64(reply, "PMSIDR_EL1", &pmsidr)) {
		ksft_test_result_fail("caps_match_pmsidr: query-spu: %s\n", reply);
		return;
	}
	interval = (pmsidr >> 8) & 0xf;
	count_size = (pmsidr >> 16) & 0xf;
	if (min_interval != (interval < 8 ? intervals[interval] : 4096) ||
	    cs != (count_size == 3 ? 16 : 12) ||
	    arch_inst != (long)((pmsidr >> 3) & 1)) {
		ksft_test_result_fail("caps_match_pmsidr: PMSIDR 0x%llx, caps min_interval %ld count_size %ld arch_inst %ld\n",
				      (unsigned long long)pmsidr, min_interval,
				      cs, arch_inst);
		return;
	}
	ksft_test_result_pass("caps_match_pmsidr\n");
}

static void test_records(void)
{
	union attr at;
	struct run r;
	int ret;

	base_attr(&at);
	ret = record(&r, &at, 0, 2000000);
	if (ret) {
		ksft_test_result_fail("records_decode: perf_event_open: %s\n",
				      strerror(-ret));
		return;
	}
	ksft_print_msg("records %lu in workload %lu ldst %lu branch %lu bad %lu\n",
		       r.st.records, r.in_work, r.ldst, r.branch, r.st.bad);
	if (r.st.records < 100 || r.st.bad || r.in_work * 2 < r.st.records ||
	    r.el0 != r.st.records || r.with_ts != r.st.records)
		ksft_test_result_fail("records_decode\n");
	else
		ksft_test_result_pass("records_decode\n");
}

/* A latency a tenth of the records of the unfiltered run reach. */
static __u32 min_latency(void)
{
	unsigned long total = 0, above = 0;
	int i;

	for (i = 0; i < LAT_MAX; i++)
		total += latencies[i];
	for (i = LAT_MAX - 1; i > 1; i--) {
		above += latencies[i];
		if (above * 10 >= total)
			return i;
	}
	return 2;
}

/* One filter: @check says whether the records obey it. */
struct filter {
	const char *name;
	__u64 val;
	int (*check)(const struct run *r);
};

static int only_loads(const struct run *r)
{
	return r->ld && r->ld == r->st.records;
}

static int only_stores(const struct run *r)
{
	return r->st_ && r->st_ == r->st.records;
}

static int only_branches(const struct run *r)
{
	return r->branch && r->branch == r->st.records;
}

static int latency_above(const struct run *r)
{
	return r->st.records && !r->lat_below;
}

static int events_present(const struct run *r)
{
	return r->st.records && !r->ev_missing;
}

static int events_absent(const struct run *r)
{
	return r->st.records && !r->ev_present;
}

static int with_pa(const struct run *r)
{
	return r->with_pa && r->with_pa == r->with_va;
}

static int any_records(const struct run *r)
{
	return r->st.records > 0 && !r->st.bad;
}

/* Events packet bits: the operation retired; an L1D refill. */
#define EV_RETIRED 0x2ULL
#define EV_L1D_REFILL 0x8ULL

static const struct filter filters[] = {
	{ "load_filter", 1, only_loads },
	{ "store_filter", 1, only_stores },
	{ "branch_filter", 1, only_branches },
	/* The unfiltered run's 90th percentile (see min_latency()). */
	{ "min_latency", 0, latency_above },
	{ "event_filter", EV_RETIRED, events_present },
	{ "inv_event_filter", EV_L1D_REFILL, events_absent },
	{ "pa_enable", 1, with_pa },
	{ "jitter", 1, any_records },
	{ "pct_enable", 1, any_records },
};

static void test_filter(const struct filter *f)
{
	union attr at;
	struct run r;
	int ret;

	__u64 val = f->val ? f->val : min_latency();

	base_attr(&at);
	if (set_format(&at, f->name, val)) {
		ksft_test_result_skip("filter_%s: the kernel has no such format attribute\n",
				      f->name);
		return;
	}
	want_latency = !strcmp(f->name, "min_latency") ? val : 0;
	want_events = strstr(f->name, "event_filter") ? val : 0;
	ret = record(&r, &at, 0, 2000000);
	want_latency = 0;
	want_events = 0;
	if (ret == -EOPNOTSUPP || ret == -EINVAL) {
		/* The driver refuses what PMSIDR says the SPU cannot do. */
		ksft_test_result_skip("filter_%s: refused by the driver (%s)\n",
				      f->name, strerror(-ret));
		return;
	}
	if (ret) {
		ksft_test_result_fail("filter_%s: perf_event_open: %s\n",
				      f->name, strerror(-ret));
		return;
	}
	ksft_print_msg("%s=%llu: records %lu ld %lu st %lu br %lu pa %lu/%lu below latency %lu events %lu/%lu\n",
		       f->name, (unsigned long long)val, r.st.records, r.ld, r.st_, r.branch, r.with_pa,
		       r.with_va, r.lat_below, r.ev_present, r.ev_missing);
	if (f->check(&r))
		ksft_test_result_pass("filter_%s\n", f->name);
	else
		ksft_test_result_fail("filter_%s\n", f->name);
}

static void test_discard(void)
{
	union attr at;
	struct run r;
	int ret;

	base_attr(&at);
	if (set_format(&at, "discard", 1)) {
		ksft_test_result_skip("discard: the kernel has no discard attribute\n");
		return;
	}
	ret = record(&r, &at, 0, 2000000);
	if (ret) {
		ksft_test_result_fail("discard: perf_event_open: %s\n",
				      strerror(-ret));
		return;
	}
	if (r.aux_head || r.aux_bytes)
		ksft_test_result_fail("discard: %llu bytes of AUX data\n",
				      (unsigned long long)r.aux_head);
	else
		ksft_test_result_pass("discard\n");
}

static void test_snapshot(void)
{
	union attr at;
	struct run r;
	int ret;

	base_attr(&at);
	ret = record(&r, &at, 1, 20000000);
	if (ret) {
		ksft_test_result_fail("aux_snapshot: perf_event_open: %s\n",
				      strerror(-ret));
		return;
	}
	ksft_print_msg("aux_snapshot: %lu AUX records, %llu bytes, aux_head %llu, flags 0x%llx\n",
		       r.aux_records, (unsigned long long)r.aux_bytes,
		       (unsigned long long)r.aux_head,
		       (unsigned long long)r.flags);
	/* Snapshots of more than the buffer holds: it wrapped. */
	if (!(r.flags & PERF_AUX_FLAG_OVERWRITE) ||
	    r.aux_bytes <= (__u64)AUX_PAGES * page)
		ksft_test_result_fail("aux_snapshot\n");
	else
		ksft_test_result_pass("aux_snapshot\n");
}

/*
 * What collection does after the fault: the driver restarts it (two
 * pieces of AUX data or more); it stops there (one small piece, the
 * records before the fault); or it goes on unseen (one piece, the whole
 * run: no management event ended one).
 */
enum after { CONTINUES, STOPS, ONE_PIECE };

/* The fault comes after 50 records; a piece with no more than this
 * ended near it.
 */
#define SMALL_PIECE (200 * 64)

struct fault {
	const char *name;
	const char *args;	/* arm-fault's kind and fields */
	__u64 flags;		/* TRUNCATED, PARTIAL, COLLISION: exactly */
	int any_flags;		/* a fatal fault: flags not checked */
	enum after after;
	int irq;		/* 1: more PMBIRQs than events, -1: none */
	const char *wrong;	/* the negative control's fault */
};

#define TRUNC PERF_AUX_FLAG_TRUNCATED
#define PART PERF_AUX_FLAG_PARTIAL
#define COLL PERF_AUX_FLAG_COLLISION
#define FULL "\"kind\":\"buffer-full\""
#define ABORT "\"kind\":\"external-abort\""

static const struct fault faults[] = {
	{ "buffer-full", FULL, 0, 0, CONTINUES, 0, ABORT },
	{ "data-loss", "\"kind\":\"data-loss\"", TRUNC | PART, 0, STOPS, 0, FULL },
	{ "collision", "\"kind\":\"collision\"", COLL, 0, CONTINUES, 0, FULL },
	{ "external-abort", ABORT, 0, 1, STOPS, 0, FULL },
	{ "stage1-translation",
	  "\"kind\":\"stage1\",\"fault\":\"translation\",\"level\":3",
	  0, 1, STOPS, 0, FULL },
	{ "stage1-permission",
	  "\"kind\":\"stage1\",\"fault\":\"permission\",\"level\":2",
	  0, 1, STOPS, 0, FULL },
	{ "stage1-access-flag",
	  "\"kind\":\"stage1\",\"fault\":\"access-flag\",\"level\":3",
	  0, 1, STOPS, 0, FULL },
	{ "stage1-address-size",
	  "\"kind\":\"stage1\",\"fault\":\"address-size\",\"level\":0",
	  0, 1, STOPS, 0, FULL },
	{ "imp-def", "\"kind\":\"imp-def\",\"syndrome\":4660", 0, 1, STOPS, 0,
	  FULL },
	{ "size-too-large", "\"kind\":\"size-too-large\"", 0, 1, STOPS, 0, FULL },
	{ "unknown-bsc", "\"kind\":\"unknown-bsc\",\"bsc\":63", 0, 1, STOPS, 0,
	  FULL },
	{ "unknown-ec", "\"kind\":\"unknown-ec\",\"ec\":42", 0, 1, STOPS, 0, FULL },
	{ "spurious-irq", "\"kind\":\"spurious-irq\"", 0, 0, ONE_PIECE, 1,
	  ABORT },
	{ "lost-irq", "\"kind\":\"lost-irq\"", 0, 0, STOPS, -1, FULL },
	{ "stuck-pointer", "\"kind\":\"stuck-pointer\",\"records\":50", 0, 0,
	  ONE_PIECE, 0, "\"kind\":\"collision\"" },
	/* Refused where the PE cannot have them: skipped with the reason. */
	{ "stage2", "\"kind\":\"stage2\",\"fault\":\"translation\",\"level\":3",
	  0, 1, STOPS, 0, NULL },
	{ "granule-protection", "\"kind\":\"granule-protection\"", 0, 1, STOPS,
	  0, NULL },
};

/* PMBIRQs taken on CPU 0 so far (/proc/interrupts' SPE line). */
static long spe_irqs(void)
{
	char line[512];
	long n = -1;
	FILE *f = fopen("/proc/interrupts", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');

		if (p && strstr(line, "arm_spe")) {
			n = strtol(p + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return n;
}

static void test_fault(const struct fault *f, int wrong)
{
	const char *kind = wrong && f->wrong ? f->wrong : f->args;
	__u64 id, delivered, pmbsr = 0;
	char args[512], *desc;
	long irqs_before, irqs;
	union attr at;
	struct run r;
	int ret, ok, attempts = 0;

	if (!have_ctl) {
		ksft_test_result_skip("fault_%s: no guest control port\n", f->name);
		return;
	}
again:
	snprintf(args, sizeof(args),
		 "{\"vcpu\":0,%s,\"trigger\":\"after-records\",\"count\":50}",
		 kind);
	ret = spe_ctl_call(&ctl, "arm-fault", args, reply, sizeof(reply));
	if (ret == 1) {
		/* The error's "desc", without its quotes. */
		desc = strstr(reply, "\"desc\":\"");
		desc = desc ? desc + 8 : reply;
		ksft_test_result_skip("fault_%s: refused: %.*s\n", f->name,
				      (int)strcspn(desc, "\""), desc);
		return;
	}
	if (ret || spe_json_u64(reply, "id", &id)) {
		ksft_test_result_fail("fault_%s: arm-fault: %s\n", f->name,
				      ret < 0 ? strerror(-ret) : reply);
		return;
	}
	base_attr(&at);
	irqs_before = spe_irqs();
	ret = record(&r, &at, 0, 2000000);
	irqs = spe_irqs() - irqs_before;
	if (ret) {
		ksft_test_result_fail("fault_%s: perf_event_open: %s\n", f->name,
				      strerror(-ret));
		return;
	}
	ret = spe_ctl_wait_fault(&ctl, id, 2000, reply, sizeof(reply));
	if (ret) {
		snprintf(args, sizeof(args), "{\"id\":%llu}",
			 (unsigned long long)id);
		spe_ctl_call(&ctl, "cancel-fault", args, reply, sizeof(reply));
		ksft_test_result_fail("fault_%s: fault %llu not delivered (%s)\n",
				      f->name, (unsigned long long)id,
				      strerror(-ret));
		return;
	}
	spe_json_u64(reply, "delivered", &delivered);
	spe_json_u64(reply, "pmbsr", &pmbsr);
	ksft_print_msg("%s: PMBSR 0x%llx, %lu AUX records (first %llu bytes), flags 0x%llx, %ld PMBIRQs, %lu records, %ld context switches\n",
		       f->name, (unsigned long long)pmbsr, r.aux_records,
		       (unsigned long long)r.first_size,
		       (unsigned long long)r.flags, irqs, r.st.records,
		       r.switches);
	/*
	 * Scheduled in again, the event restarts a buffer that a fault had
	 * stopped: that run cannot tell whether the fault stopped it.
	 */
	if (f->after == STOPS && r.aux_records > 1 && r.switches > 0 &&
	    ++attempts < 3) {
		ksft_print_msg("%s: scheduled out %ld times while recording: collection restarted; again\n",
			       f->name, r.switches);
		goto again;
	}
	ok = delivered;
	if (!f->any_flags)
		ok &= (r.flags & (TRUNC | PART | COLL)) == f->flags;
	else
		ok &= !(r.flags & (PART | COLL));
	switch (f->after) {
	case CONTINUES:
		/* The driver restarted collection after handling it. */
		ok &= r.aux_records >= 2;
		break;
	case STOPS:
		/* Nothing after the piece the fault ended (nothing
		 * restarts the buffer while the task is not scheduled out).
		 */
		ok &= r.aux_records == 1 && r.first_size <= SMALL_PIECE;
		break;
	case ONE_PIECE:
		ok &= r.aux_records == 1 && r.first_size > SMALL_PIECE;
		break;
	}
	if (f->irq > 0)
		ok &= irqs > 0;
	if (f->irq < 0)
		ok &= irqs == 0;
	if (ok)
		ksft_test_result_pass("fault_%s\n", f->name);
	else
		ksft_test_result_fail("fault_%s\n", f->name);
}

int main(void)
{
	int wrong = getenv("SPE_TEST_WRONG_FAULT") != NULL;
	struct sched_param fifo = { .sched_priority = 1 };
	cpu_set_t cpus;
	unsigned int i;
	int ret;

	page = sysconf(_SC_PAGESIZE);
	ksft_print_header();
	if (access(PMU_DIR "/type", R_OK))
		ksft_exit_skip("no arm_spe_0 PMU\n");
	/* vCPU 0 is where the faults are armed. */
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus))
		ksft_exit_skip("cannot run on CPU 0: %s\n", strerror(errno));
	/*
	 * Not preempted while it records: perf restarts a per-task event's
	 * buffer when the task is scheduled in again, which would hide a
	 * fault that stopped collection.
	 */
	if (sched_setscheduler(0, SCHED_FIFO, &fifo))
		ksft_print_msg("no SCHED_FIFO (%s): a fault case may see collection restarted by a reschedule\n",
			       strerror(errno));
	ret = spe_ctl_open(&ctl);
	have_ctl = !ret;
	if (ret)
		ksft_print_msg("no guest control port (%s): fault cases skip\n",
			       strerror(-ret));
	if (wrong)
		ksft_print_msg("SPE_TEST_WRONG_FAULT: each fault case arms another fault\n");
	ksft_set_plan(5 + sizeof(filters) / sizeof(filters[0]) +
		      sizeof(faults) / sizeof(faults[0]));
	if (access(PMU_DIR "/format/ts_enable", R_OK))
		ksft_test_result_fail("pmu_formats: no format/ts_enable\n");
	else
		ksft_test_result_pass("pmu_formats\n");
	test_caps();
	test_records();
	for (i = 0; i < sizeof(filters) / sizeof(filters[0]); i++)
		test_filter(&filters[i]);
	test_discard();
	test_snapshot();
	for (i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		test_fault(&faults[i], wrong);
	if (have_ctl)
		spe_ctl_close(&ctl);
	ksft_finished();
	return 0;
}
