// SPDX-License-Identifier: GPL-2.0-only
/*
 * Requests PMU snapshots (FEAT_PMUv3_SS) with Capture events disabled,
 * prohibited and allowed, and prints what PMSSCR_EL1 and the snapshot
 * registers hold afterwards, for the integration harness to check.
 *
 * The kernel runs at EL1 without EL2 or EL3, so PMECR_EL1.SSE alone
 * controls the Capture events: 0b00 disabled, 0b10 prohibited, 0b11
 * allowed. The scenario unloads the module again (busybox insmod would
 * retry a failed finit_module() with init_module(), capturing twice).
 */

#include <linux/bits.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/smp.h>
#include <asm/barrier.h>
#include <asm/cpufeature.h>
#include <asm/sysreg.h>

#define SYS_PMSSCR_EL1		sys_reg(3, 0, 9, 13, 3)
#define SYS_PMECR_EL1		sys_reg(3, 0, 9, 14, 5)
#define SYS_PMEVCNTSVR0_EL1	sys_reg(2, 0, 14, 8, 0)
#define SYS_PMCCNTSVR_EL1	sys_reg(2, 0, 14, 11, 7)

#define PMSSCR_SS		BIT_ULL(0)
#define PMECR_SSE_SHIFT		3
#define PMECR_SSE_MASK		(3ULL << PMECR_SSE_SHIFT)

#define PMCR_E			BIT(0)
#define PMCR_P			BIT(1)
#define PMCR_C			BIT(2)
#define PMCR_LC			BIT(6)
#define PMCNTEN_C		BIT(31)
#define PMCNTEN_P0		BIT(0)
#define EVENT_CPU_CYCLES	0x11

#define ID_AA64DFR0_PMSS_SHIFT	16
#define POLL_LIMIT		1000

static void pmu_snapshot_capture(unsigned int sse)
{
	u64 pmecr, pmsscr, ccnt_before, ccntsvr, evcntsvr0;
	int i;

	pmecr = read_sysreg_s(SYS_PMECR_EL1) & ~PMECR_SSE_MASK;
	write_sysreg_s(pmecr | ((u64)sse << PMECR_SSE_SHIFT), SYS_PMECR_EL1);
	isb();
	ccnt_before = read_sysreg(pmccntr_el0);
	write_sysreg_s(PMSSCR_SS, SYS_PMSSCR_EL1);
	for (i = 0; i < POLL_LIMIT; i++) {
		if (!(read_sysreg_s(SYS_PMSSCR_EL1) & PMSSCR_SS))
			break;
	}
	isb();
	pmsscr = read_sysreg_s(SYS_PMSSCR_EL1);
	ccntsvr = read_sysreg_s(SYS_PMCCNTSVR_EL1);
	evcntsvr0 = read_sysreg_s(SYS_PMEVCNTSVR0_EL1);
	pr_info("SPE-SNAPSHOT sse=%u pmsscr=0x%llx pmccntsvr=%llu pmccntr_before=%llu pmevcntsvr0=%llu polls=%d\n",
		sse, pmsscr, ccntsvr, ccnt_before, evcntsvr0, i);
}

static int __init pmu_snapshot_init(void)
{
	static const unsigned int sse[] = { 0, 2, 3 };
	u64 dfr0 = read_sysreg(id_aa64dfr0_el1);
	unsigned int i;

	if (!((dfr0 >> ID_AA64DFR0_PMSS_SHIFT) & 0xf)) {
		pr_err("SPE-SNAPSHOT no FEAT_PMUv3_SS (ID_AA64DFR0_EL1 0x%llx)\n",
		       dfr0);
		return -ENODEV;
	}

	get_cpu();
	write_sysreg(0, pmccfiltr_el0);
	write_sysreg(EVENT_CPU_CYCLES, pmevtyper0_el0);
	write_sysreg(PMCNTEN_C | PMCNTEN_P0, pmcntenset_el0);
	write_sysreg(PMCR_E | PMCR_P | PMCR_C | PMCR_LC, pmcr_el0);
	isb();
	for (i = 0; i < ARRAY_SIZE(sse); i++)
		pmu_snapshot_capture(sse[i]);
	write_sysreg(PMCNTEN_C | PMCNTEN_P0, pmcntenclr_el0);
	write_sysreg_s(read_sysreg_s(SYS_PMECR_EL1) & ~PMECR_SSE_MASK,
		       SYS_PMECR_EL1);
	isb();
	put_cpu();
	return 0;
}

static void __exit pmu_snapshot_exit(void)
{
}

module_init(pmu_snapshot_init);
module_exit(pmu_snapshot_exit);

MODULE_DESCRIPTION("FEAT_PMUv3_SS capture test for vhost-device-spe");
MODULE_LICENSE("GPL");
