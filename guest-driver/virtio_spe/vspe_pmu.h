/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio_spe: what the perf PMU's files share: the PMU (vspe_pmu.c), its
 * AUX buffer (vspe_aux.c) and its sysfs attributes (vspe_sysfs.c).
 */
#ifndef VSPE_PMU_H
#define VSPE_PMU_H

#include <linux/bits.h>
#include <linux/cpumask.h>
#include <linux/perf_event.h>
#include <linux/smp.h>
#include <linux/sysfs.h>
#include <linux/types.h>

#include "vspe.h"

/* perf's attr.config layout: the one of arm_spe_pmu. */
#define CFG_TS_ENABLE		BIT_ULL(0)
#define CFG_PA_ENABLE		BIT_ULL(1)
#define CFG_PCT_ENABLE		BIT_ULL(2)
#define CFG_JITTER		BIT_ULL(16)
#define CFG_BRANCH_FILTER	BIT_ULL(32)
#define CFG_LOAD_FILTER		BIT_ULL(33)
#define CFG_STORE_FILTER	BIT_ULL(34)
#define CFG_DISCARD		BIT_ULL(35)
#define CFG_BRANCH_FILTER_MASK	BIT_ULL(36)
#define CFG_LOAD_FILTER_MASK	BIT_ULL(37)
#define CFG_STORE_FILTER_MASK	BIT_ULL(38)
#define CFG_SIMD_FILTER		BIT_ULL(39)
#define CFG_SIMD_FILTER_MASK	BIT_ULL(40)
#define CFG_FLOAT_FILTER	BIT_ULL(41)
#define CFG_FLOAT_FILTER_MASK	BIT_ULL(42)
/* The type filters that need FEAT_SPE_EFT. */
#define CFG_EFT			GENMASK_ULL(42, 36)
#define CFG2_MIN_LATENCY	GENMASK_ULL(11, 0)

struct vspe_buf {
	int nr_pages;
	bool snapshot;
	void *base;
};

struct vspe_cpu {
	struct perf_output_handle handle;
	call_single_data_t csd;
	struct vspe_pmu *pmu;
};

struct vspe_pmu {
	struct pmu pmu;
	struct vspe_dev *v;
	cpumask_t supported_cpus;
	struct vspe_cpu __percpu *cpus;
	char name[16];
	int pmsver;
	u32 min_period;
	u32 counter_sz;
	u32 max_record_sz;
	u32 align;
	u64 pmsevfr_mask;
	/* PMBIRQ calls queued to CPUs and not yet finished. */
	atomic_t irq_pending;
};

#define to_vspe_pmu(p) container_of(p, struct vspe_pmu, pmu)

/* What vspe_fault_act() makes of a management event. */
enum vspe_fault_act {
	VSPE_ACT_SPURIOUS,
	VSPE_ACT_FATAL,
	VSPE_ACT_OK,
};

/* vspe_aux.c */
bool vspe_aux_output_begin(struct perf_output_handle *handle,
			   struct perf_event *event, u64 *pmbptr,
			   u64 *pmblimitr);
void vspe_aux_output_end(struct perf_output_handle *handle, u64 pmbptr);
enum vspe_fault_act vspe_fault_act(struct perf_output_handle *handle,
				   u64 pmbsr, u64 pmbptr, u64 pmblimitr);
void *vspe_setup_aux(struct perf_event *event, void **pages,
		     int nr_pages, bool snapshot);
void vspe_free_aux(void *aux);

/* vspe_sysfs.c */
extern const struct attribute_group *vspe_attr_groups[];

#endif /* VSPE_PMU_H */
