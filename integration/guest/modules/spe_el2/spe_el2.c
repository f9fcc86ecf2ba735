// SPDX-License-Identifier: GPL-2.0-only
/*
 * Writes and reads PMSCR through its three names from a kernel that runs
 * at EL2 with HCR_EL2.E2H set (VHE), and prints what each holds, for the
 * integration harness to check the E2H redirection: PMSCR_EL1 there is
 * PMSCR_EL2, and PMSCR_EL12 is the EL1 register.
 *
 * Only the E0 and E1/E2 enable bits are written. The profiling buffer
 * is not enabled (PMBLIMITR_EL1.E is 0), so nothing is sampled, and
 * both registers get their old values back.
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <asm/barrier.h>
#include <asm/sysreg.h>
#include <asm/virt.h>

#define SYS_PMSCR_EL1_ENC	sys_reg(3, 0, 9, 9, 0)
#define SYS_PMSCR_EL2_ENC	sys_reg(3, 4, 9, 9, 0)
#define SYS_PMSCR_EL12_ENC	sys_reg(3, 5, 9, 9, 0)

/* PMSCR_EL2.E0HSPE, and PMSCR_EL1.E1SPE */
#define PMSCR_BIT0		BIT_ULL(0)
#define PMSCR_BIT1		BIT_ULL(1)

static int __init spe_el2_init(void)
{
	u64 old_el2, old_el12, el1, el2, el12;

	if (!is_kernel_in_hyp_mode()) {
		pr_err("SPE-EL2 vhe=0: the kernel does not run at EL2\n");
		return -ENODEV;
	}

	old_el2 = read_sysreg_s(SYS_PMSCR_EL2_ENC);
	old_el12 = read_sysreg_s(SYS_PMSCR_EL12_ENC);
	write_sysreg_s(0, SYS_PMSCR_EL2_ENC);
	write_sysreg_s(0, SYS_PMSCR_EL12_ENC);
	write_sysreg_s(PMSCR_BIT0, SYS_PMSCR_EL1_ENC);
	write_sysreg_s(PMSCR_BIT1, SYS_PMSCR_EL12_ENC);
	isb();
	el1 = read_sysreg_s(SYS_PMSCR_EL1_ENC);
	el2 = read_sysreg_s(SYS_PMSCR_EL2_ENC);
	el12 = read_sysreg_s(SYS_PMSCR_EL12_ENC);
	write_sysreg_s(old_el2, SYS_PMSCR_EL2_ENC);
	write_sysreg_s(old_el12, SYS_PMSCR_EL12_ENC);
	isb();
	pr_info("SPE-EL2 vhe=1 pmscr_el1=0x%llx pmscr_el2=0x%llx pmscr_el12=0x%llx\n",
		el1, el2, el12);
	return 0;
}

static void __exit spe_el2_exit(void)
{
}

module_init(spe_el2_init);
module_exit(spe_el2_exit);

MODULE_DESCRIPTION("PMSCR E2H redirection test for vhost-device-spe");
MODULE_LICENSE("GPL");
