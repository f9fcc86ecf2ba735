// SPDX-License-Identifier: GPL-2.0
/*
 * pmu_snapshot: PMU snapshots (FEAT_PMUv3_SS, Arm ARM D13.9) for user space.
 *
 * A Capture event copies the PMU event counters, the cycle counter and
 * (with FEAT_PMUv3_ICNTR) the instruction counter into the read-only
 * snapshot registers PMEVCNTSVR<n>_EL1, PMCCNTSVR_EL1 and PMICNTSVR_EL1,
 * and sets PMSSCR_EL1.{NC,SS} to {0,0} (captured) or {1,0} (prohibited).
 * Software requests one by writing 1 to PMSSCR_EL1.SS; an IMPLEMENTATION
 * DEFINED external request (a debugger, a hypervisor's host) can too.
 *
 * Each CPU that implements FEAT_PMUv3_SS gets a directory
 * /sys/devices/system/cpu/cpuN/pmu_snapshot/ (see ABI.md):
 *
 *   capture           write 1: capture on this CPU now
 *   seq               number of captures seen on this CPU
 *   source            none, guest (requested here) or host (not requested
 *                     here: an external snapshot request)
 *   nc                PMSSCR_EL1.NC of the latest capture
 *   ccnt, icnt        PMCCNTSVR_EL1, PMICNTSVR_EL1
 *   evcnt<n>          PMEVCNTSVR<n>_EL1, n < PMCR_EL0.N
 *   evtype<n>         PMEVTYPER<n>_EL0 when the capture was taken
 *
 * The driver enables Capture events with PMECR_EL1.SSE (0b11 allowed, or
 * 0b10 prohibited with prohibit=1). When EL2 or EL3 is implemented their
 * MDCR_ELx.PMSSE decides instead, and SSE is then ignored (Table D13-10).
 *
 * The PMU counters themselves belong to the PMU driver (perf): this
 * driver never programs them, it only reads what they held.
 *
 * Captures this driver did not request are found by looking: a read of
 * any attribute compares PMSSCR_EL1 and the snapshot registers with what
 * the driver saw last. An external capture that changes neither (the
 * counters did not move, or a prohibited one after a prohibited one)
 * cannot be told from no capture.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitfield.h>
#include <linux/bits.h>
#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/smp.h>
#include <linux/sysfs.h>
#include <asm/barrier.h>
#include <asm/sysreg.h>

/*
 * The registers, under names of our own: newer kernels generate SYS_*
 * definitions for some of them, older ones have none.
 */
#define PMSNAP_PMSSCR		sys_reg(3, 0, 9, 13, 3)
#define PMSNAP_PMECR		sys_reg(3, 0, 9, 14, 5)
#define PMSNAP_PMCCNTSVR	sys_reg(2, 0, 14, 11, 7)
#define PMSNAP_PMICNTSVR	sys_reg(2, 0, 14, 12, 0)

#define PMSNAP_PMSSCR_SS	BIT_ULL(0)
#define PMSNAP_PMSSCR_NC	BIT_ULL(32)
#define PMSNAP_PMECR_SSE	GENMASK_ULL(4, 3)
#define PMSNAP_SSE_PROHIBITED	0x2ULL
#define PMSNAP_SSE_ALLOWED	0x3ULL

#define PMSNAP_DFR0_PMSS	GENMASK_ULL(19, 16)
#define PMSNAP_DFR1_PMICNTR	GENMASK_ULL(39, 36)
#define PMSNAP_PMCR_N		GENMASK_ULL(15, 11)

#define PMSNAP_MAX_COUNTERS	31
/* Register reads until PMSSCR_EL1.SS clears (each may trap to a model). */
#define PMSNAP_POLL_LIMIT	100000

enum pmsnap_source {
	PMSNAP_NONE,
	PMSNAP_GUEST,
	PMSNAP_HOST,
};

static const char *const pmsnap_source_names[] = {
	[PMSNAP_NONE] = "none",
	[PMSNAP_GUEST] = "guest",
	[PMSNAP_HOST] = "host",
};

/* PMSSCR_EL1, the snapshot registers and the event types, as read. */
struct pmsnap_regs {
	u64 pmsscr;
	u64 evcnt[PMSNAP_MAX_COUNTERS];
	u64 evtype[PMSNAP_MAX_COUNTERS];
	u64 ccnt;
	u64 icnt;
};

struct pmsnap_cpu {
	/* Serialises the fields below and the CPU's snapshot registers. */
	struct mutex lock;
	bool active;
	bool has_icntr;
	unsigned int counters;
	u64 pmecr_saved;
	/* The latest capture, and what the registers held when last read. */
	struct pmsnap_regs cur;
	struct pmsnap_regs seen;
	u64 seq;
	enum pmsnap_source source;
};

static DEFINE_PER_CPU(struct pmsnap_cpu, pmsnap_cpus);
static enum cpuhp_state pmsnap_hp_state;
static bool pmsnap_ready;

static bool prohibit;

/* PMEVCNTSVR<n>_EL1 and PMEVTYPER<n>_EL0, n = 8 * crm + op2. */
#define PMSNAP_PMEVCNTSVR(crm, op2)	sys_reg(2, 0, 14, 8 + (crm), op2)
#define PMSNAP_PMEVTYPER(crm, op2)	sys_reg(3, 3, 14, 12 + (crm), op2)

/* The MRS encodings are immediates: one per counter. */
static u64 pmsnap_read_evcntsvr(unsigned int n)
{
	switch (n) {
	case 0:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 0));
	case 1:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 1));
	case 2:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 2));
	case 3:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 3));
	case 4:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 4));
	case 5:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 5));
	case 6:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 6));
	case 7:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(0, 7));
	case 8:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 0));
	case 9:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 1));
	case 10:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 2));
	case 11:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 3));
	case 12:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 4));
	case 13:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 5));
	case 14:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 6));
	case 15:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(1, 7));
	case 16:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 0));
	case 17:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 1));
	case 18:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 2));
	case 19:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 3));
	case 20:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 4));
	case 21:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 5));
	case 22:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 6));
	case 23:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(2, 7));
	case 24:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 0));
	case 25:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 1));
	case 26:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 2));
	case 27:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 3));
	case 28:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 4));
	case 29:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 5));
	case 30:
		return read_sysreg_s(PMSNAP_PMEVCNTSVR(3, 6));
	}
	return 0;
}

static u64 pmsnap_read_evtyper(unsigned int n)
{
	switch (n) {
	case 0:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 0));
	case 1:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 1));
	case 2:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 2));
	case 3:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 3));
	case 4:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 4));
	case 5:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 5));
	case 6:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 6));
	case 7:
		return read_sysreg_s(PMSNAP_PMEVTYPER(0, 7));
	case 8:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 0));
	case 9:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 1));
	case 10:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 2));
	case 11:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 3));
	case 12:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 4));
	case 13:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 5));
	case 14:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 6));
	case 15:
		return read_sysreg_s(PMSNAP_PMEVTYPER(1, 7));
	case 16:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 0));
	case 17:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 1));
	case 18:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 2));
	case 19:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 3));
	case 20:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 4));
	case 21:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 5));
	case 22:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 6));
	case 23:
		return read_sysreg_s(PMSNAP_PMEVTYPER(2, 7));
	case 24:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 0));
	case 25:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 1));
	case 26:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 2));
	case 27:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 3));
	case 28:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 4));
	case 29:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 5));
	case 30:
		return read_sysreg_s(PMSNAP_PMEVTYPER(3, 6));
	}
	return 0;
}

/* Runs on the CPU: ID_AA64DFR0_EL1.PMSS, as this CPU reports it. */
static void pmsnap_probe_local(void *info)
{
	bool *found = info;

	if (FIELD_GET(PMSNAP_DFR0_PMSS, read_sysreg(id_aa64dfr0_el1)))
		*found = true;
}

/* Runs on the CPU: read PMSSCR_EL1, the snapshot registers, the types. */
static void pmsnap_read_local(struct pmsnap_cpu *pc, struct pmsnap_regs *r)
{
	unsigned int n;

	r->pmsscr = read_sysreg_s(PMSNAP_PMSSCR);
	/* D13.9: a context synchronization event before the reads. */
	isb();
	for (n = 0; n < pc->counters; n++) {
		r->evcnt[n] = pmsnap_read_evcntsvr(n);
		r->evtype[n] = pmsnap_read_evtyper(n);
	}
	r->ccnt = read_sysreg_s(PMSNAP_PMCCNTSVR);
	r->icnt = pc->has_icntr ? read_sysreg_s(PMSNAP_PMICNTSVR) : 0;
}

/* Whether the registers changed since the driver last read them. */
static bool pmsnap_changed(const struct pmsnap_cpu *pc,
			   const struct pmsnap_regs *r)
{
	unsigned int n;

	if (r->pmsscr != pc->seen.pmsscr || r->ccnt != pc->seen.ccnt ||
	    r->icnt != pc->seen.icnt)
		return true;
	for (n = 0; n < pc->counters; n++)
		if (r->evcnt[n] != pc->seen.evcnt[n])
			return true;
	return false;
}

static void pmsnap_record(struct pmsnap_cpu *pc, const struct pmsnap_regs *r,
			  enum pmsnap_source source)
{
	pc->cur = *r;
	pc->seen = *r;
	pc->seq++;
	pc->source = source;
}

struct pmsnap_op {
	struct pmsnap_cpu *pc;
	bool capture;
	int ret;
	u64 cycles_before;
	u64 cycles_after;
	unsigned int polls;
};

/*
 * Runs on the CPU, interrupts off, with pc->lock held by the caller:
 * notes a capture that happened since the last look (an external
 * request), then, if asked, requests one and waits for it (D13-8).
 */
static void pmsnap_sync_local(void *info)
{
	struct pmsnap_op *op = info;
	struct pmsnap_cpu *pc = op->pc;
	struct pmsnap_regs r;
	unsigned int i;

	pmsnap_read_local(pc, &r);
	if (pmsnap_changed(pc, &r))
		pmsnap_record(pc, &r, PMSNAP_HOST);
	if (!op->capture)
		return;

	op->cycles_before = read_sysreg(pmccntr_el0);
	write_sysreg_s(PMSNAP_PMSSCR_SS, PMSNAP_PMSSCR);
	for (i = 0; i < PMSNAP_POLL_LIMIT; i++) {
		if (!(read_sysreg_s(PMSNAP_PMSSCR) & PMSNAP_PMSSCR_SS))
			break;
		cpu_relax();
	}
	isb();
	op->cycles_after = read_sysreg(pmccntr_el0);
	op->polls = i;
	if (i == PMSNAP_POLL_LIMIT) {
		op->ret = -ETIMEDOUT;
		return;
	}
	pmsnap_read_local(pc, &r);
	pmsnap_record(pc, &r, PMSNAP_GUEST);
}

/* Brings pc up to date on its CPU (and captures); pc->lock is held. */
static int pmsnap_sync(unsigned int cpu, struct pmsnap_cpu *pc, bool capture)
{
	struct pmsnap_op op = { .pc = pc, .capture = capture };
	int ret;

	lockdep_assert_held(&pc->lock);
	if (!pc->active)
		return -ENODEV;
	ret = smp_call_function_single(cpu, pmsnap_sync_local, &op, 1);
	if (ret)
		return ret;
	if (capture && !op.ret)
		pr_debug("cpu%u: capture %llu: PMCCNTR_EL0 %llu before, PMCCNTSVR_EL1 %llu, PMCCNTR_EL0 %llu after (%u polls)\n",
			 cpu, pc->seq, op.cycles_before, pc->cur.ccnt,
			 op.cycles_after, op.polls);
	return op.ret;
}

/* Runs on pc's CPU: PMECR_EL1.SSE from the prohibit parameter. */
static void pmsnap_apply_sse(struct pmsnap_cpu *pc)
{
	u64 sse = READ_ONCE(prohibit) ? PMSNAP_SSE_PROHIBITED :
		  PMSNAP_SSE_ALLOWED;
	u64 pmecr;

	if (!pc->active)
		return;
	pmecr = read_sysreg_s(PMSNAP_PMECR) & ~PMSNAP_PMECR_SSE;
	write_sysreg_s(pmecr | FIELD_PREP(PMSNAP_PMECR_SSE, sse),
		       PMSNAP_PMECR);
	isb();
}

static void pmsnap_set_sse_local(void *info)
{
	pmsnap_apply_sse(this_cpu_ptr(&pmsnap_cpus));
}

static int pmsnap_prohibit_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (ret || !READ_ONCE(pmsnap_ready))
		return ret;
	cpus_read_lock();
	on_each_cpu(pmsnap_set_sse_local, NULL, 1);
	cpus_read_unlock();
	return 0;
}

static const struct kernel_param_ops pmsnap_prohibit_ops = {
	.set = pmsnap_prohibit_set,
	.get = param_get_bool,
};

module_param_cb(prohibit, &pmsnap_prohibit_ops, &prohibit, 0644);
MODULE_PARM_DESC(prohibit,
		 "Prohibit Capture events (PMECR_EL1.SSE=0b10): captures complete with PMSSCR_EL1.NC set");

/* sysfs: one directory per CPU, under the CPU's device. */

struct pmsnap_attr {
	struct device_attribute attr;
	int index;
};

#define to_pmsnap_attr(a) container_of(a, struct pmsnap_attr, attr)

enum pmsnap_field {
	PMSNAP_F_SEQ,
	PMSNAP_F_SOURCE,
	PMSNAP_F_NC,
	PMSNAP_F_CCNT,
	PMSNAP_F_ICNT,
	PMSNAP_F_EVCNT,
	PMSNAP_F_EVTYPE,
};

static ssize_t pmsnap_show(struct device *dev, struct device_attribute *attr,
			   char *buf, enum pmsnap_field field)
{
	struct pmsnap_cpu *pc = per_cpu_ptr(&pmsnap_cpus, dev->id);
	int n = to_pmsnap_attr(attr)->index;
	ssize_t ret;

	mutex_lock(&pc->lock);
	ret = pmsnap_sync(dev->id, pc, false);
	if (ret)
		goto out;
	switch (field) {
	case PMSNAP_F_SEQ:
		ret = sysfs_emit(buf, "%llu\n", pc->seq);
		break;
	case PMSNAP_F_SOURCE:
		ret = sysfs_emit(buf, "%s\n", pmsnap_source_names[pc->source]);
		break;
	case PMSNAP_F_NC:
		ret = sysfs_emit(buf, "%d\n",
				 !!(pc->cur.pmsscr & PMSNAP_PMSSCR_NC));
		break;
	case PMSNAP_F_CCNT:
		ret = sysfs_emit(buf, "%llu\n", pc->cur.ccnt);
		break;
	case PMSNAP_F_ICNT:
		ret = sysfs_emit(buf, "%llu\n", pc->cur.icnt);
		break;
	case PMSNAP_F_EVCNT:
		ret = sysfs_emit(buf, "%llu\n", pc->cur.evcnt[n]);
		break;
	case PMSNAP_F_EVTYPE:
		ret = sysfs_emit(buf, "0x%llx\n", pc->cur.evtype[n]);
		break;
	}
out:
	mutex_unlock(&pc->lock);
	return ret;
}

#define PMSNAP_SHOW(name, field)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return pmsnap_show(dev, attr, buf, field);			\
}

PMSNAP_SHOW(seq, PMSNAP_F_SEQ)
PMSNAP_SHOW(source, PMSNAP_F_SOURCE)
PMSNAP_SHOW(nc, PMSNAP_F_NC)
PMSNAP_SHOW(ccnt, PMSNAP_F_CCNT)
PMSNAP_SHOW(icnt, PMSNAP_F_ICNT)
PMSNAP_SHOW(evcnt, PMSNAP_F_EVCNT)
PMSNAP_SHOW(evtype, PMSNAP_F_EVTYPE)

static ssize_t capture_store(struct device *dev, struct device_attribute *attr,
			     const char *buf, size_t count)
{
	struct pmsnap_cpu *pc = per_cpu_ptr(&pmsnap_cpus, dev->id);
	bool req;
	int ret;

	ret = kstrtobool(buf, &req);
	if (ret)
		return ret;
	if (!req)
		return -EINVAL;
	mutex_lock(&pc->lock);
	ret = pmsnap_sync(dev->id, pc, true);
	mutex_unlock(&pc->lock);
	return ret ? ret : count;
}

#define PMSNAP_ATTR(_name, _mode, _show, _store, _index)		\
	static struct pmsnap_attr pmsnap_attr_##_name = {		\
		.attr = __ATTR(_name, _mode, _show, _store),		\
		.index = _index,					\
	}

PMSNAP_ATTR(capture, 0200, NULL, capture_store, 0);
PMSNAP_ATTR(seq, 0444, seq_show, NULL, 0);
PMSNAP_ATTR(source, 0444, source_show, NULL, 0);
PMSNAP_ATTR(nc, 0444, nc_show, NULL, 0);
PMSNAP_ATTR(ccnt, 0444, ccnt_show, NULL, 0);
PMSNAP_ATTR(icnt, 0444, icnt_show, NULL, 0);

PMSNAP_ATTR(evcnt0, 0444, evcnt_show, NULL, 0);
PMSNAP_ATTR(evtype0, 0444, evtype_show, NULL, 0);
PMSNAP_ATTR(evcnt1, 0444, evcnt_show, NULL, 1);
PMSNAP_ATTR(evtype1, 0444, evtype_show, NULL, 1);
PMSNAP_ATTR(evcnt2, 0444, evcnt_show, NULL, 2);
PMSNAP_ATTR(evtype2, 0444, evtype_show, NULL, 2);
PMSNAP_ATTR(evcnt3, 0444, evcnt_show, NULL, 3);
PMSNAP_ATTR(evtype3, 0444, evtype_show, NULL, 3);
PMSNAP_ATTR(evcnt4, 0444, evcnt_show, NULL, 4);
PMSNAP_ATTR(evtype4, 0444, evtype_show, NULL, 4);
PMSNAP_ATTR(evcnt5, 0444, evcnt_show, NULL, 5);
PMSNAP_ATTR(evtype5, 0444, evtype_show, NULL, 5);
PMSNAP_ATTR(evcnt6, 0444, evcnt_show, NULL, 6);
PMSNAP_ATTR(evtype6, 0444, evtype_show, NULL, 6);
PMSNAP_ATTR(evcnt7, 0444, evcnt_show, NULL, 7);
PMSNAP_ATTR(evtype7, 0444, evtype_show, NULL, 7);
PMSNAP_ATTR(evcnt8, 0444, evcnt_show, NULL, 8);
PMSNAP_ATTR(evtype8, 0444, evtype_show, NULL, 8);
PMSNAP_ATTR(evcnt9, 0444, evcnt_show, NULL, 9);
PMSNAP_ATTR(evtype9, 0444, evtype_show, NULL, 9);
PMSNAP_ATTR(evcnt10, 0444, evcnt_show, NULL, 10);
PMSNAP_ATTR(evtype10, 0444, evtype_show, NULL, 10);
PMSNAP_ATTR(evcnt11, 0444, evcnt_show, NULL, 11);
PMSNAP_ATTR(evtype11, 0444, evtype_show, NULL, 11);
PMSNAP_ATTR(evcnt12, 0444, evcnt_show, NULL, 12);
PMSNAP_ATTR(evtype12, 0444, evtype_show, NULL, 12);
PMSNAP_ATTR(evcnt13, 0444, evcnt_show, NULL, 13);
PMSNAP_ATTR(evtype13, 0444, evtype_show, NULL, 13);
PMSNAP_ATTR(evcnt14, 0444, evcnt_show, NULL, 14);
PMSNAP_ATTR(evtype14, 0444, evtype_show, NULL, 14);
PMSNAP_ATTR(evcnt15, 0444, evcnt_show, NULL, 15);
PMSNAP_ATTR(evtype15, 0444, evtype_show, NULL, 15);
PMSNAP_ATTR(evcnt16, 0444, evcnt_show, NULL, 16);
PMSNAP_ATTR(evtype16, 0444, evtype_show, NULL, 16);
PMSNAP_ATTR(evcnt17, 0444, evcnt_show, NULL, 17);
PMSNAP_ATTR(evtype17, 0444, evtype_show, NULL, 17);
PMSNAP_ATTR(evcnt18, 0444, evcnt_show, NULL, 18);
PMSNAP_ATTR(evtype18, 0444, evtype_show, NULL, 18);
PMSNAP_ATTR(evcnt19, 0444, evcnt_show, NULL, 19);
PMSNAP_ATTR(evtype19, 0444, evtype_show, NULL, 19);
PMSNAP_ATTR(evcnt20, 0444, evcnt_show, NULL, 20);
PMSNAP_ATTR(evtype20, 0444, evtype_show, NULL, 20);
PMSNAP_ATTR(evcnt21, 0444, evcnt_show, NULL, 21);
PMSNAP_ATTR(evtype21, 0444, evtype_show, NULL, 21);
PMSNAP_ATTR(evcnt22, 0444, evcnt_show, NULL, 22);
PMSNAP_ATTR(evtype22, 0444, evtype_show, NULL, 22);
PMSNAP_ATTR(evcnt23, 0444, evcnt_show, NULL, 23);
PMSNAP_ATTR(evtype23, 0444, evtype_show, NULL, 23);
PMSNAP_ATTR(evcnt24, 0444, evcnt_show, NULL, 24);
PMSNAP_ATTR(evtype24, 0444, evtype_show, NULL, 24);
PMSNAP_ATTR(evcnt25, 0444, evcnt_show, NULL, 25);
PMSNAP_ATTR(evtype25, 0444, evtype_show, NULL, 25);
PMSNAP_ATTR(evcnt26, 0444, evcnt_show, NULL, 26);
PMSNAP_ATTR(evtype26, 0444, evtype_show, NULL, 26);
PMSNAP_ATTR(evcnt27, 0444, evcnt_show, NULL, 27);
PMSNAP_ATTR(evtype27, 0444, evtype_show, NULL, 27);
PMSNAP_ATTR(evcnt28, 0444, evcnt_show, NULL, 28);
PMSNAP_ATTR(evtype28, 0444, evtype_show, NULL, 28);
PMSNAP_ATTR(evcnt29, 0444, evcnt_show, NULL, 29);
PMSNAP_ATTR(evtype29, 0444, evtype_show, NULL, 29);
PMSNAP_ATTR(evcnt30, 0444, evcnt_show, NULL, 30);
PMSNAP_ATTR(evtype30, 0444, evtype_show, NULL, 30);

static struct attribute *pmsnap_attrs[] = {
	&pmsnap_attr_capture.attr.attr,
	&pmsnap_attr_seq.attr.attr,
	&pmsnap_attr_source.attr.attr,
	&pmsnap_attr_nc.attr.attr,
	&pmsnap_attr_ccnt.attr.attr,
	&pmsnap_attr_icnt.attr.attr,
	&pmsnap_attr_evcnt0.attr.attr,
	&pmsnap_attr_evtype0.attr.attr,
	&pmsnap_attr_evcnt1.attr.attr,
	&pmsnap_attr_evtype1.attr.attr,
	&pmsnap_attr_evcnt2.attr.attr,
	&pmsnap_attr_evtype2.attr.attr,
	&pmsnap_attr_evcnt3.attr.attr,
	&pmsnap_attr_evtype3.attr.attr,
	&pmsnap_attr_evcnt4.attr.attr,
	&pmsnap_attr_evtype4.attr.attr,
	&pmsnap_attr_evcnt5.attr.attr,
	&pmsnap_attr_evtype5.attr.attr,
	&pmsnap_attr_evcnt6.attr.attr,
	&pmsnap_attr_evtype6.attr.attr,
	&pmsnap_attr_evcnt7.attr.attr,
	&pmsnap_attr_evtype7.attr.attr,
	&pmsnap_attr_evcnt8.attr.attr,
	&pmsnap_attr_evtype8.attr.attr,
	&pmsnap_attr_evcnt9.attr.attr,
	&pmsnap_attr_evtype9.attr.attr,
	&pmsnap_attr_evcnt10.attr.attr,
	&pmsnap_attr_evtype10.attr.attr,
	&pmsnap_attr_evcnt11.attr.attr,
	&pmsnap_attr_evtype11.attr.attr,
	&pmsnap_attr_evcnt12.attr.attr,
	&pmsnap_attr_evtype12.attr.attr,
	&pmsnap_attr_evcnt13.attr.attr,
	&pmsnap_attr_evtype13.attr.attr,
	&pmsnap_attr_evcnt14.attr.attr,
	&pmsnap_attr_evtype14.attr.attr,
	&pmsnap_attr_evcnt15.attr.attr,
	&pmsnap_attr_evtype15.attr.attr,
	&pmsnap_attr_evcnt16.attr.attr,
	&pmsnap_attr_evtype16.attr.attr,
	&pmsnap_attr_evcnt17.attr.attr,
	&pmsnap_attr_evtype17.attr.attr,
	&pmsnap_attr_evcnt18.attr.attr,
	&pmsnap_attr_evtype18.attr.attr,
	&pmsnap_attr_evcnt19.attr.attr,
	&pmsnap_attr_evtype19.attr.attr,
	&pmsnap_attr_evcnt20.attr.attr,
	&pmsnap_attr_evtype20.attr.attr,
	&pmsnap_attr_evcnt21.attr.attr,
	&pmsnap_attr_evtype21.attr.attr,
	&pmsnap_attr_evcnt22.attr.attr,
	&pmsnap_attr_evtype22.attr.attr,
	&pmsnap_attr_evcnt23.attr.attr,
	&pmsnap_attr_evtype23.attr.attr,
	&pmsnap_attr_evcnt24.attr.attr,
	&pmsnap_attr_evtype24.attr.attr,
	&pmsnap_attr_evcnt25.attr.attr,
	&pmsnap_attr_evtype25.attr.attr,
	&pmsnap_attr_evcnt26.attr.attr,
	&pmsnap_attr_evtype26.attr.attr,
	&pmsnap_attr_evcnt27.attr.attr,
	&pmsnap_attr_evtype27.attr.attr,
	&pmsnap_attr_evcnt28.attr.attr,
	&pmsnap_attr_evtype28.attr.attr,
	&pmsnap_attr_evcnt29.attr.attr,
	&pmsnap_attr_evtype29.attr.attr,
	&pmsnap_attr_evcnt30.attr.attr,
	&pmsnap_attr_evtype30.attr.attr,
	NULL,
};

/* Only the counters this CPU has, and icnt with FEAT_PMUv3_ICNTR. */
static umode_t pmsnap_is_visible(struct kobject *kobj, struct attribute *a,
				 int i)
{
	struct device *dev = kobj_to_dev(kobj);
	struct pmsnap_cpu *pc = per_cpu_ptr(&pmsnap_cpus, dev->id);
	struct pmsnap_attr *pa;

	pa = to_pmsnap_attr(container_of(a, struct device_attribute, attr));
	if (a == &pmsnap_attr_icnt.attr.attr && !pc->has_icntr)
		return 0;
	if ((pa->attr.show == evcnt_show || pa->attr.show == evtype_show) &&
	    pa->index >= pc->counters)
		return 0;
	return a->mode;
}

static const struct attribute_group pmsnap_group = {
	.name = "pmu_snapshot",
	.attrs = pmsnap_attrs,
	.is_visible = pmsnap_is_visible,
};

/* CPU hotplug: runs on the CPU coming online. */
static int pmsnap_cpu_online(unsigned int cpu)
{
	struct pmsnap_cpu *pc = per_cpu_ptr(&pmsnap_cpus, cpu);
	struct device *dev = get_cpu_device(cpu);
	int ret;

	if (!dev ||
	    !FIELD_GET(PMSNAP_DFR0_PMSS, read_sysreg(id_aa64dfr0_el1)))
		return 0;

	mutex_lock(&pc->lock);
	pc->counters = min_t(unsigned int, PMSNAP_MAX_COUNTERS,
			     FIELD_GET(PMSNAP_PMCR_N, read_sysreg(pmcr_el0)));
	pc->has_icntr =
		!!FIELD_GET(PMSNAP_DFR1_PMICNTR, read_sysreg(id_aa64dfr1_el1));
	pc->pmecr_saved = read_sysreg_s(PMSNAP_PMECR);
	pc->active = true;
	pmsnap_apply_sse(pc);
	/*
	 * What the registers hold now (an earlier capture, or the reset
	 * values) is no capture of ours: seen, not counted.
	 */
	local_irq_disable();
	pmsnap_read_local(pc, &pc->seen);
	local_irq_enable();
	mutex_unlock(&pc->lock);

	ret = sysfs_create_group(&dev->kobj, &pmsnap_group);
	if (ret) {
		mutex_lock(&pc->lock);
		pc->active = false;
		write_sysreg_s(pc->pmecr_saved, PMSNAP_PMECR);
		isb();
		mutex_unlock(&pc->lock);
	}
	return ret;
}

/* CPU hotplug: runs on the CPU going offline (and at module unload). */
static int pmsnap_cpu_offline(unsigned int cpu)
{
	struct pmsnap_cpu *pc = per_cpu_ptr(&pmsnap_cpus, cpu);
	struct device *dev = get_cpu_device(cpu);

	if (!pc->active)
		return 0;
	/* Waits for the readers and writers of the files to finish. */
	sysfs_remove_group(&dev->kobj, &pmsnap_group);
	mutex_lock(&pc->lock);
	pc->active = false;
	write_sysreg_s(pc->pmecr_saved, PMSNAP_PMECR);
	isb();
	mutex_unlock(&pc->lock);
	return 0;
}

static int __init pmsnap_init(void)
{
	bool found = false;
	unsigned int cpu;
	int ret;

	for_each_possible_cpu(cpu) {
		struct pmsnap_cpu *pc = per_cpu_ptr(&pmsnap_cpus, cpu);

		mutex_init(&pc->lock);
	}

	cpus_read_lock();
	for_each_online_cpu(cpu)
		smp_call_function_single(cpu, pmsnap_probe_local, &found, 1);
	cpus_read_unlock();
	if (!found) {
		pr_err("no CPU implements FEAT_PMUv3_SS (ID_AA64DFR0_EL1.PMSS is 0): no PMU snapshots\n");
		return -ENODEV;
	}

	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "perf/pmu_snapshot:online",
				pmsnap_cpu_online, pmsnap_cpu_offline);
	if (ret < 0)
		return ret;
	pmsnap_hp_state = ret;
	WRITE_ONCE(pmsnap_ready, true);
	pr_info("PMU snapshots on CPUs with FEAT_PMUv3_SS, Capture events %s\n",
		prohibit ? "prohibited" : "allowed");
	return 0;
}

static void __exit pmsnap_exit(void)
{
	WRITE_ONCE(pmsnap_ready, false);
	cpuhp_remove_state(pmsnap_hp_state);
}

module_init(pmsnap_init);
module_exit(pmsnap_exit);

MODULE_DESCRIPTION("Arm PMU snapshots (FEAT_PMUv3_SS) through sysfs");
MODULE_LICENSE("GPL");
