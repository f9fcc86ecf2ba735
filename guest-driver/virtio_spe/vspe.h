/* SPDX-License-Identifier: GPL-2.0 */
/*
 * virtio_spe: internal interfaces between the virtio transport
 * (vspe_core.c) and the perf PMU (vspe_pmu.c, with vspe_aux.c and
 * vspe_sysfs.c; what those share is in vspe_pmu.h).
 */
#ifndef VSPE_H
#define VSPE_H

#include <linux/bits.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/virtio.h>

#include "virtio_spe.h"

/* Register fields the driver programs (Arm ARM DDI0487, D24.6/D24.7). */
#define PMSCR_E0SPE		BIT_ULL(0)
#define PMSCR_E1SPE		BIT_ULL(1)
#define PMSCR_CX		BIT_ULL(3)
#define PMSCR_PA		BIT_ULL(4)
#define PMSCR_TS		BIT_ULL(5)
#define PMSCR_PCT_PHYS		BIT_ULL(6)

#define PMSFCR_FE		BIT_ULL(0)
#define PMSFCR_FT		BIT_ULL(1)
#define PMSFCR_FL		BIT_ULL(2)
#define PMSFCR_FNE		BIT_ULL(3)
#define PMSFCR_B		BIT_ULL(16)
#define PMSFCR_LD		BIT_ULL(17)
#define PMSFCR_ST		BIT_ULL(18)
#define PMSFCR_FP		BIT_ULL(19)
#define PMSFCR_SIMD		BIT_ULL(20)
#define PMSFCR_BM		BIT_ULL(48)
#define PMSFCR_LDM		BIT_ULL(49)
#define PMSFCR_STM		BIT_ULL(50)
#define PMSFCR_FPM		BIT_ULL(51)
#define PMSFCR_SIMDM		BIT_ULL(52)

#define PMSIRR_RND		BIT_ULL(0)
#define PMSIRR_INTERVAL		GENMASK_ULL(31, 8)
#define PMSLATFR_MINLAT		GENMASK_ULL(11, 0)

#define PMSIDR_FE		BIT_ULL(0)
#define PMSIDR_FT		BIT_ULL(1)
#define PMSIDR_FL		BIT_ULL(2)
#define PMSIDR_ARCHINST		BIT_ULL(3)
#define PMSIDR_LDS		BIT_ULL(4)
#define PMSIDR_ERND		BIT_ULL(5)
#define PMSIDR_FNE		BIT_ULL(6)
#define PMSIDR_INTERVAL		GENMASK_ULL(11, 8)
#define PMSIDR_MAXSIZE		GENMASK_ULL(15, 12)
#define PMSIDR_COUNTSIZE	GENMASK_ULL(19, 16)
#define PMSIDR_EFT		BIT_ULL(26)

#define PMBLIMITR_E		BIT_ULL(0)
#define PMBLIMITR_FM_DISCARD	(2ULL << 1)

#define PMBSR_COLL		BIT_ULL(16)
#define PMBSR_S			BIT_ULL(17)
#define PMBSR_DL		BIT_ULL(19)
#define PMBSR_EC		GENMASK_ULL(31, 26)
#define PMBSR_BSC		GENMASK_ULL(5, 0)
#define PMBSR_EC_BUF		0x00
#define PMBSR_EC_FAULT_S1	0x24
#define PMBSR_EC_FAULT_S2	0x25
#define PMBSR_BSC_FULL		0x01

#define PMBIDR_ALIGN		GENMASK_ULL(3, 0)
#define PMBIDR_P		BIT_ULL(4)

#define DFR0_PMSVER		GENMASK_ULL(35, 32)
#define DFR0_PMSVER_V1P2	3

/* One register access of a control-queue batch. */
struct vspe_access {
	u32 reg;
	u8 op;
	u8 status;
	u64 value;
};

struct vspe_pmu;

struct vspe_dev {
	struct virtio_device *vdev;
	struct virtqueue *ctrl_vq;
	struct virtqueue *event_vq;

	/* The config space, read once at probe. */
	u32 num_vcpus;
	u32 features;
	u64 pmsidr;
	u64 pmbidr;
	u64 id_aa64dfr0;
	u32 max_batch;

	/*
	 * Control requests are synchronous: perf calls the PMU with
	 * interrupts off, so the driver polls for the reply. One batch is
	 * with the device at a time.
	 */
	raw_spinlock_t ctrl_lock;
	struct virtio_spe_ctrl_req *req;
	struct virtio_spe_ctrl_resp *resp;
	/* A batch timed out and the device still owns req/resp. */
	bool ctrl_busy;
	bool removing;

	/* Serialises the event queue's completions and reposts. */
	spinlock_t event_lock;
	struct virtio_spe_event *events;
	unsigned int nr_events;

	struct vspe_pmu *pmu;
};

int vspe_ctrl(struct vspe_dev *v, unsigned int vcpu,
	      struct vspe_access *acc, unsigned int n);

int vspe_pmu_probe(struct vspe_dev *v);
void vspe_pmu_remove(struct vspe_dev *v);
void vspe_pmu_pmbirq(struct vspe_dev *v, unsigned int vcpu, u64 pmbsr);

#endif /* VSPE_H */
