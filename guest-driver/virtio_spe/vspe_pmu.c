// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_spe: the perf PMU.
 *
 * It is named and laid out as drivers/perf/arm_spe_pmu.c's PMU (name
 * arm_spe_<n>, the same format and caps attributes, AUX data in the
 * same SPE record format), so that unmodified perf finds it, records
 * with it and decodes what it records. The difference is where the
 * registers live: each access is a request on the device's control
 * queue for the vCPU the event runs on, and PMBIRQ arrives on the event
 * queue, on whichever CPU takes the virtio interrupt, and is passed to
 * the CPU it belongs to by an IPI.
 *
 * The buffer registers hold kernel virtual addresses (vmap of the AUX
 * pages); the device translates them through the stage 1 tables whose
 * base the driver sends along with each start.
 *
 * This file has the PMU's callbacks and registration; its AUX buffer is
 * in vspe_aux.c and its sysfs attributes in vspe_sysfs.c.
 */

#include <linux/bitfield.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/slab.h>

#include <asm/sysreg.h>

#include "vspe_pmu.h"

static unsigned int pmu_index;
module_param(pmu_index, uint, 0444);
MODULE_PARM_DESC(pmu_index,
		 "N of the PMU's name arm_spe_N (perf looks for arm_spe_0 first)");

/* The largest batch a start needs: translation + buffer + sampling. */
#define VSPE_START_REGS		14

static u64 vspe_config3(struct perf_event *event)
{
#ifdef VSPE_HAVE_CONFIG3
	return event->attr.config3;
#else
	return 0;
#endif
}

static struct vspe_access rd(u32 reg)
{
	return (struct vspe_access){ .reg = reg, .op = VIRTIO_SPE_OP_READ };
}

static struct vspe_access wr(u32 reg, u64 value)
{
	return (struct vspe_access){
		.reg = reg, .op = VIRTIO_SPE_OP_WRITE, .value = value,
	};
}

/* Runs @n accesses for this CPU; an access the device refused fails it. */
static int vspe_ctrl_local(struct vspe_pmu *p, struct vspe_access *acc,
			   unsigned int n)
{
	unsigned int i;
	int err;

	err = vspe_ctrl(p->v, smp_processor_id(), acc, n);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		if (acc[i].status != VIRTIO_SPE_S_OK) {
			dev_err_ratelimited(&p->v->vdev->dev,
					    "CPU %d: register 0x%04x: status %u\n",
					    smp_processor_id(), acc[i].reg,
					    acc[i].status);
			return -EIO;
		}
	}
	return 0;
}

/* From perf's attributes to register values */

static bool vspe_event_has_cx(struct perf_event *event)
{
	return IS_ENABLED(CONFIG_PID_IN_CONTEXTIDR) && perfmon_capable();
}

static u64 vspe_event_to_pmscr(struct perf_event *event)
{
	struct perf_event_attr *attr = &event->attr;
	u64 reg = 0;

	if (attr->config & CFG_TS_ENABLE)
		reg |= PMSCR_TS;
	if (attr->config & CFG_PA_ENABLE)
		reg |= PMSCR_PA;
	if (attr->config & CFG_PCT_ENABLE)
		reg |= PMSCR_PCT_PHYS;
	if (!attr->exclude_user)
		reg |= PMSCR_E0SPE;
	if (!attr->exclude_kernel)
		reg |= PMSCR_E1SPE;
	if (vspe_event_has_cx(event))
		reg |= PMSCR_CX;
	return reg;
}

static u64 vspe_event_to_pmsfcr(struct perf_event *event)
{
	struct perf_event_attr *attr = &event->attr;
	u64 reg = 0;

	if (attr->config & CFG_LOAD_FILTER)
		reg |= PMSFCR_LD;
	if (attr->config & CFG_STORE_FILTER)
		reg |= PMSFCR_ST;
	if (attr->config & CFG_BRANCH_FILTER)
		reg |= PMSFCR_B;
	if (attr->config & CFG_SIMD_FILTER)
		reg |= PMSFCR_SIMD;
	if (attr->config & CFG_FLOAT_FILTER)
		reg |= PMSFCR_FP;
	if (attr->config & CFG_BRANCH_FILTER_MASK)
		reg |= PMSFCR_BM;
	if (attr->config & CFG_LOAD_FILTER_MASK)
		reg |= PMSFCR_LDM;
	if (attr->config & CFG_STORE_FILTER_MASK)
		reg |= PMSFCR_STM;
	if (attr->config & CFG_SIMD_FILTER_MASK)
		reg |= PMSFCR_SIMDM;
	if (attr->config & CFG_FLOAT_FILTER_MASK)
		reg |= PMSFCR_FPM;
	if (reg)
		reg |= PMSFCR_FT;
	if (attr->config1)
		reg |= PMSFCR_FE;
	if (vspe_config3(event))
		reg |= PMSFCR_FNE;
	if (attr->config2 & CFG2_MIN_LATENCY)
		reg |= PMSFCR_FL;
	return reg;
}

static u64 vspe_event_to_pmsirr(struct perf_event *event)
{
	u64 reg = event->hw.sample_period & PMSIRR_INTERVAL;

	if (event->attr.config & CFG_JITTER)
		reg |= PMSIRR_RND;
	return reg;
}

/* The PMU's callbacks */

static int vspe_event_init(struct perf_event *event)
{
	struct vspe_pmu *p = to_vspe_pmu(event->pmu);
	struct perf_event_attr *attr = &event->attr;
	u64 pmsidr = p->v->pmsidr;
	u64 period, reg;

	if (attr->type != event->pmu->type)
		return -ENOENT;
	if (event->cpu >= 0 && !cpumask_test_cpu(event->cpu, &p->supported_cpus))
		return -ENOENT;
	if (attr->config1 & ~p->pmsevfr_mask)
		return -EOPNOTSUPP;
	if (vspe_config3(event) & ~p->pmsevfr_mask)
		return -EOPNOTSUPP;
	if (has_branch_stack(event) || attr->exclude_idle)
		return -EOPNOTSUPP;
	if ((attr->config & CFG_DISCARD) && p->pmsver < DFR0_PMSVER_V1P2)
		return -EOPNOTSUPP;
	if ((attr->config & CFG_EFT) && !(pmsidr & PMSIDR_EFT))
		return -EOPNOTSUPP;

	reg = vspe_event_to_pmsfcr(event);
	if (((reg & PMSFCR_FE) && !(pmsidr & PMSIDR_FE)) ||
	    ((reg & PMSFCR_FT) && !(pmsidr & PMSIDR_FT)) ||
	    ((reg & PMSFCR_FL) && !(pmsidr & PMSIDR_FL)) ||
	    ((reg & PMSFCR_FNE) && !(pmsidr & PMSIDR_FNE)))
		return -EOPNOTSUPP;

	reg = vspe_event_to_pmscr(event);
	if (!perfmon_capable() && (reg & (PMSCR_PA | PMSCR_PCT_PHYS)))
		return -EACCES;

	/* Frequency mode would need the interval counter's state. */
	if (attr->freq)
		return -EINVAL;
	period = event->hw.sample_period;
	period = clamp_t(u64, period, p->min_period, FIELD_MAX(PMSIRR_INTERVAL) << 8);
	event->hw.sample_period = period & PMSIRR_INTERVAL;
	local64_set(&event->hw.period_left, event->hw.sample_period);
	return 0;
}

/* The translation registers, so the device can walk this CPU's tables. */
static unsigned int vspe_translation(struct vspe_access *acc)
{
	acc[0] = wr(VIRTIO_SPE_REG_SCTLR_EL1, read_sysreg(sctlr_el1));
	acc[1] = wr(VIRTIO_SPE_REG_TCR_EL1, read_sysreg(tcr_el1));
	acc[2] = wr(VIRTIO_SPE_REG_TTBR0_EL1, read_sysreg(ttbr0_el1));
	acc[3] = wr(VIRTIO_SPE_REG_TTBR1_EL1, read_sysreg(ttbr1_el1));
	return 4;
}

static void vspe_start(struct perf_event *event, int flags)
{
	struct vspe_pmu *p = to_vspe_pmu(event->pmu);
	struct vspe_cpu *c = this_cpu_ptr(p->cpus);
	struct hw_perf_event *hwc = &event->hw;
	struct vspe_access acc[VSPE_START_REGS];
	u64 pmbptr, pmblimitr;
	unsigned int n;

	hwc->state = 0;
	if (!vspe_aux_output_begin(&c->handle, event, &pmbptr, &pmblimitr)) {
		acc[0] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, 0);
		vspe_ctrl_local(p, acc, 1);
		return;
	}
	n = vspe_translation(acc);
	if (!(event->attr.config & CFG_DISCARD))
		acc[n++] = wr(VIRTIO_SPE_REG_PMBPTR_EL1, pmbptr);
	acc[n++] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, pmblimitr);
	acc[n++] = wr(VIRTIO_SPE_REG_PMSFCR_EL1, vspe_event_to_pmsfcr(event));
	acc[n++] = wr(VIRTIO_SPE_REG_PMSEVFR_EL1, event->attr.config1);
	if (p->v->pmsidr & PMSIDR_FNE)
		acc[n++] = wr(VIRTIO_SPE_REG_PMSNEVFR_EL1,
			      vspe_config3(event));
	acc[n++] = wr(VIRTIO_SPE_REG_PMSLATFR_EL1,
		      event->attr.config2 & CFG2_MIN_LATENCY);
	acc[n++] = wr(VIRTIO_SPE_REG_PMSIRR_EL1, vspe_event_to_pmsirr(event));
	acc[n++] = wr(VIRTIO_SPE_REG_PMSICR_EL1, local64_read(&hwc->period_left));
	acc[n++] = wr(VIRTIO_SPE_REG_PMSCR_EL1, vspe_event_to_pmscr(event));

	if (vspe_ctrl_local(p, acc, n)) {
		/* The device is gone or refused: no data from here on. */
		hwc->state |= PERF_HES_STOPPED;
		if (perf_get_aux(&c->handle)) {
			perf_aux_output_flag(&c->handle,
					     PERF_AUX_FLAG_TRUNCATED);
			perf_aux_output_end(&c->handle, 0);
		}
	}
}

static void vspe_stop(struct perf_event *event, int flags)
{
	struct vspe_pmu *p = to_vspe_pmu(event->pmu);
	struct perf_output_handle *handle = &this_cpu_ptr(p->cpus)->handle;
	struct hw_perf_event *hwc = &event->hw;
	struct vspe_access acc[6];
	u64 pmbsr, pmbptr, pmblimitr;

	if (hwc->state & PERF_HES_STOPPED)
		return;
	hwc->state |= PERF_HES_STOPPED;

	/* Disable and drain: the device completes writes in order. */
	acc[0] = rd(VIRTIO_SPE_REG_PMBLIMITR_EL1);
	acc[1] = wr(VIRTIO_SPE_REG_PMSCR_EL1, 0);
	acc[2] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, 0);
	acc[3] = rd(VIRTIO_SPE_REG_PMBSR_EL1);
	acc[4] = rd(VIRTIO_SPE_REG_PMBPTR_EL1);
	acc[5] = rd(VIRTIO_SPE_REG_PMSICR_EL1);
	if (vspe_ctrl_local(p, acc, 6)) {
		if (perf_get_aux(handle)) {
			perf_aux_output_flag(handle, PERF_AUX_FLAG_TRUNCATED);
			perf_aux_output_end(handle, 0);
		}
		return;
	}
	pmblimitr = acc[0].value;
	pmbsr = acc[3].value;
	pmbptr = acc[4].value;
	if (!(flags & PERF_EF_UPDATE))
		return;
	if (perf_get_aux(handle)) {
		if (vspe_fault_act(handle, pmbsr, pmbptr, pmblimitr) ==
		    VSPE_ACT_SPURIOUS) {
			vspe_aux_output_end(handle, pmbptr);
		} else {
			acc[0] = wr(VIRTIO_SPE_REG_PMBSR_EL1, 0);
			vspe_ctrl_local(p, acc, 1);
		}
	}
	local64_set(&hwc->period_left, acc[5].value);
	hwc->state |= PERF_HES_UPTODATE;
}

static int vspe_add(struct perf_event *event, int flags)
{
	struct vspe_pmu *p = to_vspe_pmu(event->pmu);
	struct hw_perf_event *hwc = &event->hw;
	int cpu = event->cpu == -1 ? smp_processor_id() : event->cpu;

	if (!cpumask_test_cpu(cpu, &p->supported_cpus))
		return -ENOENT;
	hwc->state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
	if (flags & PERF_EF_START) {
		vspe_start(event, PERF_EF_RELOAD);
		if (hwc->state & PERF_HES_STOPPED)
			return -EINVAL;
	}
	return 0;
}

static void vspe_del(struct perf_event *event, int flags)
{
	vspe_stop(event, PERF_EF_UPDATE);
}

static void vspe_read(struct perf_event *event)
{
}

/* PMBIRQ: on the CPU whose buffer it is, as a per-CPU PPI would be */

static void vspe_pmbirq_local(struct vspe_cpu *c)
{
	struct perf_output_handle *handle = &c->handle;
	struct vspe_pmu *p = c->pmu;
	struct vspe_access acc[3];
	struct perf_event *event;
	u64 pmbptr, pmblimitr;

	if (!perf_get_aux(handle))
		return;
	event = handle->event;
	acc[0] = rd(VIRTIO_SPE_REG_PMBSR_EL1);
	acc[1] = rd(VIRTIO_SPE_REG_PMBPTR_EL1);
	acc[2] = rd(VIRTIO_SPE_REG_PMBLIMITR_EL1);
	if (vspe_ctrl_local(p, acc, 3))
		return;

	switch (vspe_fault_act(handle, acc[0].value, acc[1].value,
			       acc[2].value)) {
	case VSPE_ACT_SPURIOUS:
		return;
	case VSPE_ACT_FATAL:
		/* Leaving the buffer enabled after a fault invites another. */
		acc[0] = wr(VIRTIO_SPE_REG_PMSCR_EL1, 0);
		acc[1] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, 0);
		acc[2] = wr(VIRTIO_SPE_REG_PMBSR_EL1, 0);
		vspe_ctrl_local(p, acc, 3);
		return;
	case VSPE_ACT_OK:
		break;
	}
	/* Full: go on in the next stretch unless perf lost data. */
	if (!(handle->aux_flags & PERF_AUX_FLAG_TRUNCATED) &&
	    vspe_aux_output_begin(handle, event, &pmbptr, &pmblimitr)) {
		acc[0] = wr(VIRTIO_SPE_REG_PMBPTR_EL1, pmbptr);
		acc[1] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, pmblimitr);
		acc[2] = wr(VIRTIO_SPE_REG_PMBSR_EL1, 0);
		vspe_ctrl_local(p, acc, 3);
	} else {
		acc[0] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, 0);
		acc[1] = wr(VIRTIO_SPE_REG_PMBSR_EL1, 0);
		vspe_ctrl_local(p, acc, 2);
	}
}

static void vspe_pmbirq_ipi(void *info)
{
	struct vspe_cpu *c = info;

	vspe_pmbirq_local(c);
	atomic_dec(&c->pmu->irq_pending);
}

void vspe_pmu_pmbirq(struct vspe_dev *v, unsigned int vcpu, u64 pmbsr)
{
	struct vspe_pmu *p = v->pmu;

	if (!p || vcpu >= nr_cpu_ids ||
	    !cpumask_test_cpu(vcpu, &p->supported_cpus) || !cpu_online(vcpu)) {
		dev_warn_ratelimited(&v->vdev->dev,
				     "PMBIRQ for vCPU %u, which has no PMU\n",
				     vcpu);
		return;
	}
	/* -EBUSY: a call is already on its way, and it reads PMBSR afresh. */
	atomic_inc(&p->irq_pending);
	if (smp_call_function_single_async(vcpu, &per_cpu_ptr(p->cpus, vcpu)->csd))
		atomic_dec(&p->irq_pending);
}

/* Probe */

static u32 vspe_min_period(u64 pmsidr)
{
	static const u32 interval[] = {
		[0] = 256, [2] = 512, [3] = 768, [4] = 1024,
		[5] = 1536, [6] = 2048, [7] = 3072, [8] = 4096,
	};
	u32 i = FIELD_GET(PMSIDR_INTERVAL, pmsidr);

	if (i >= ARRAY_SIZE(interval) || !interval[i])
		return 4096;
	return interval[i];
}

/* The CPU-reset sequence of arm_spe_pmu, and the PMSEVFR_EL1 mask. */
static int vspe_reset_vcpus(struct vspe_pmu *p)
{
	struct vspe_access acc[6];
	unsigned int cpu;
	int err;

	for_each_cpu(cpu, &p->supported_cpus) {
		acc[0] = wr(VIRTIO_SPE_REG_PMSCR_EL1, 0);
		acc[1] = wr(VIRTIO_SPE_REG_PMBLIMITR_EL1, 0);
		acc[2] = wr(VIRTIO_SPE_REG_PMBPTR_EL1, 0);
		acc[3] = wr(VIRTIO_SPE_REG_PMBSR_EL1, 0);
		acc[4] = wr(VIRTIO_SPE_REG_PMSEVFR_EL1, ~0ULL);
		acc[5] = rd(VIRTIO_SPE_REG_PMSEVFR_EL1);
		err = vspe_ctrl(p->v, cpu, acc, 6);
		if (err)
			return err;
		p->pmsevfr_mask = acc[5].value;
		acc[0] = wr(VIRTIO_SPE_REG_PMSEVFR_EL1, 0);
		err = vspe_ctrl(p->v, cpu, acc, 1);
		if (err)
			return err;
	}
	return 0;
}

int vspe_pmu_probe(struct vspe_dev *v)
{
	struct device *dev = &v->vdev->dev;
	struct vspe_pmu *p;
	unsigned int cpu;
	int err;

	p = devm_kzalloc(dev, sizeof(*p), GFP_KERNEL);
	if (!p)
		return -ENOMEM;
	p->v = v;
	p->pmsver = FIELD_GET(DFR0_PMSVER, v->id_aa64dfr0);
	if (!p->pmsver) {
		dev_err(dev, "device has no SPE (ID_AA64DFR0_EL1.PMSVer 0)\n");
		return -ENODEV;
	}
	if (v->pmbidr & PMBIDR_P) {
		dev_err(dev, "profiling buffer owned by a higher exception level\n");
		return -EPERM;
	}
	p->align = 1 << FIELD_GET(PMBIDR_ALIGN, v->pmbidr);
	p->max_record_sz = 1 << FIELD_GET(PMSIDR_MAXSIZE, v->pmsidr);
	if (p->max_record_sz < 16 || p->max_record_sz > SZ_2K ||
	    p->align > SZ_2K) {
		dev_err(dev, "unsupported record size %u or alignment %u\n",
			p->max_record_sz, p->align);
		return -ENXIO;
	}
	p->min_period = vspe_min_period(v->pmsidr);
	p->counter_sz = FIELD_GET(PMSIDR_COUNTSIZE, v->pmsidr) == 3 ? 16 : 12;

	/* The device numbers vCPUs as Linux numbers the virt machine's CPUs. */
	for_each_possible_cpu(cpu)
		if (cpu < v->num_vcpus)
			cpumask_set_cpu(cpu, &p->supported_cpus);
	if (cpumask_empty(&p->supported_cpus))
		return -ENODEV;

	p->cpus = alloc_percpu(struct vspe_cpu);
	if (!p->cpus)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		struct vspe_cpu *c = per_cpu_ptr(p->cpus, cpu);

		c->pmu = p;
		INIT_CSD(&c->csd, vspe_pmbirq_ipi, c);
	}
	err = vspe_reset_vcpus(p);
	if (err)
		goto out_free;

	p->pmu = (struct pmu) {
		.module		= THIS_MODULE,
		.capabilities	= PERF_PMU_CAP_EXCLUSIVE | PERF_PMU_CAP_ITRACE,
		.attr_groups	= vspe_attr_groups,
		/* Task events migrate with their task, as arm_spe_pmu's do. */
		.task_ctx_nr	= perf_sw_context,
		.event_init	= vspe_event_init,
		.add		= vspe_add,
		.del		= vspe_del,
		.start		= vspe_start,
		.stop		= vspe_stop,
		.read		= vspe_read,
		.setup_aux	= vspe_setup_aux,
		.free_aux	= vspe_free_aux,
	};
	snprintf(p->name, sizeof(p->name), "arm_spe_%u", pmu_index);
	v->pmu = p;
	err = perf_pmu_register(&p->pmu, p->name, -1);
	if (err) {
		dev_err(dev, "cannot register PMU %s: %d\n", p->name, err);
		v->pmu = NULL;
		goto out_free;
	}
	dev_info(dev, "%s: SPEv1.%d for CPUs %*pbl [max_record_sz %u, align %u, min_interval %u, features 0x%llx]\n",
		 p->name, p->pmsver - 1, cpumask_pr_args(&p->supported_cpus),
		 p->max_record_sz, p->align, p->min_period,
		 v->pmsidr & (PMSIDR_FE | PMSIDR_FT | PMSIDR_FL |
			      PMSIDR_ARCHINST | PMSIDR_LDS | PMSIDR_ERND |
			      PMSIDR_FNE));
	return 0;

out_free:
	free_percpu(p->cpus);
	return err;
}

void vspe_pmu_remove(struct vspe_dev *v)
{
	struct vspe_pmu *p = v->pmu;

	if (!p)
		return;
	perf_pmu_unregister(&p->pmu);
	v->pmu = NULL;
	/* The device is reset: no call is queued after this. */
	while (atomic_read(&p->irq_pending))
		usleep_range(1000, 2000);
	free_percpu(p->cpus);
}
