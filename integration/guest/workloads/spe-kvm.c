// SPDX-License-Identifier: GPL-2.0
/*
 * spe-kvm: a VMM of a few hundred lines on /dev/kvm, so that KVM enters
 * a guest while the host profiles: what makes KVM's SPE code run
 * (the buffer's ownership in MDCR_EL2, PMSCR_EL1 around entry and exit,
 * the SPE registers hidden from the guest).
 *
 *   spe-kvm [ITERATIONS]
 *
 * One VM, one vCPU, no interrupt controller, 2 MiB of RAM at GUEST_BASE
 * holding the guest code below (at EL1, MMU off, so its PCs are its
 * IPAs: far from any host PC) and its data. The guest
 *
 *   - reads ID_AA64DFR0_EL1 (PMSVer must read 0: KVM hides SPE);
 *   - reads PMSCR_EL1, PMBLIMITR_EL1 and PMBIDR_EL1 and writes
 *     PMSCR_EL1, its vector table catching what comes back: the ESR of
 *     the exception taken, or ~0 if the access was not trapped (and
 *     PMBIDR_EL1's value, ~0 if it was);
 *   - runs ITERATIONS passes (default 300000000) of a loop of loads, stores
 *     and branches over 64 KiB of its data;
 *
 * and writes each result to a report slot at MMIO_BASE, which exits to
 * this VMM. Results go to stdout as the harness's `SPE-RESULT key=value`
 * lines, with the guest code's PC range and the host's counter around the
 * run, so that the host's records can be checked for guest PCs and told
 * apart by when they were taken, and the PMBIRQs taken meanwhile. The
 * run is bracketed in the kernel's log by "spe-kvm: SPE-KVM-GUEST-RUNNING"
 * and "spe-kvm: SPE-KVM-GUEST-DONE" (the first is the harness's cue to
 * arm faults; the host's messages between the two came while the guest
 * ran). Exits 0 once the guest reported completion, 1 on any other end.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define GUEST_BASE 0x1000000000ULL /* 64 GiB: no host PC is here */
#define GUEST_SIZE (2UL << 20)
#define MMIO_BASE 0x2000000000ULL /* no memslot: accesses exit */

/* Report slots: the guest's `str` at MMIO_BASE + offset. */
enum slot {
	SLOT_DFR0 = 0x00,
	SLOT_PMSCR_READ = 0x08,
	SLOT_PMBLIMITR_READ = 0x10,
	SLOT_PMBIDR_READ = 0x18,
	SLOT_PMSCR_WRITE = 0x20,
	SLOT_DONE = 0x28,
	SLOT_UNEXPECTED = 0x30,
	SLOT_PMBIDR = 0x38,
	SLOTS = 0x40,
};

static const char *const slot_name[SLOTS / 8] = {
	"kvm_dfr0",	     "kvm_pmscr_read_esr", "kvm_pmblimitr_read_esr",
	"kvm_pmbidr_read_esr", "kvm_pmscr_write_esr", "kvm_done",
	"kvm_unexpected_esr", "kvm_pmbidr",
};

/*
 * The guest, position-independent. x21 holds MMIO_BASE, x22 the passes
 * left (x0 at reset), x9 the ESR a trapped access left. SPE registers
 * by encoding (the assembler may not know them): PMSCR_EL1 S3_0_C9_C9_0,
 * PMBLIMITR_EL1 S3_0_C9_C10_0, PMBIDR_EL1 S3_0_C9_C10_7.
 */
extern const char guest_start[];
extern const uint64_t guest_size; /* by the assembler: C may not subtract */
asm(".pushsection .rodata.spe_kvm_guest, \"a\"\n"
    ".balign 2048\n"
    /*
     * Global: the C code's GOT references to a local label would be
     * section-relative, and ld drops a GOT reference's addend.
     */
    ".globl guest_start, guest_size\n"
    "guest_start:\n"
    "	mov x22, x0\n"
    "	movz x21, #0x20, lsl #32\n"
    "	adr x1, guest_vectors\n"
    "	msr vbar_el1, x1\n"
    "	isb\n"
    "	mrs x0, id_aa64dfr0_el1\n"
    "	str x0, [x21, #0x00]\n"
    "	mov x9, #-1\n"
    "	mrs x0, s3_0_c9_c9_0\n"
    "	str x9, [x21, #0x08]\n"
    "	mov x9, #-1\n"
    "	mrs x0, s3_0_c9_c10_0\n"
    "	str x9, [x21, #0x10]\n"
    "	mov x9, #-1\n"
    "	mov x0, #-1\n"
    "	mrs x0, s3_0_c9_c10_7\n"
    "	str x9, [x21, #0x18]\n"
    "	str x0, [x21, #0x38]\n"
    "	mov x9, #-1\n"
    "	msr s3_0_c9_c9_0, xzr\n"
    "	str x9, [x21, #0x20]\n"
    /* The data: 1 MiB above the code. */
    "	adr x2, guest_start\n"
    "	add x2, x2, #0x100000\n"
    "	mov x4, #0\n"
    "	cbz x22, 2f\n"
    "1:	ldr x3, [x2, x4]\n"
    "	add x3, x3, #1\n"
    "	str x3, [x2, x4]\n"
    "	tbz x3, #0, 3f\n"
    "	add x5, x5, x3\n"
    "3:	add x4, x4, #64\n"
    "	and x4, x4, #0xffff\n"
    "	subs x22, x22, #1\n"
    "	b.ne 1b\n"
    "2:	mov x0, #1\n"
    "	str x0, [x21, #0x28]\n"
    "	b 2b\n"
    /* A trapped access: its ESR in x9, on past it. */
    ".balign 2048\n"
    "guest_vectors:\n"
    ".rept 4\n"
    "	mrs x0, esr_el1\n"
    "	str x0, [x21, #0x30]\n"
    "	b .\n"
    "	.balign 128\n"
    ".endr\n"
    /* Current EL with SP_ELx, synchronous: the one expected. */
    "	mrs x9, esr_el1\n"
    "	mrs x10, elr_el1\n"
    "	add x10, x10, #4\n"
    "	msr elr_el1, x10\n"
    "	eret\n"
    "	.balign 128\n"
    ".rept 11\n"
    "	mrs x0, esr_el1\n"
    "	str x0, [x21, #0x30]\n"
    "	b .\n"
    "	.balign 128\n"
    ".endr\n"
    "guest_end:\n"
    ".balign 8\n"
    "guest_size: .quad guest_end - guest_start\n"
    ".popsection\n");

static void die(const char *what)
{
	printf("SPE-RESULT kvm_error=%s errno=%d\n", what, errno);
	perror(what);
	exit(1);
}

/* PMBIRQs so far: the SPE PPI's line of /proc/interrupts, every CPU. */
static unsigned long spe_irqs(void)
{
	FILE *f = fopen("/proc/interrupts", "r");
	unsigned long n = 0;
	char line[512];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');

		if (!p || !strstr(line, "spe"))
			continue;
		for (p++;;) {
			char *end;
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			n += v;
			p = end;
		}
		break;
	}
	fclose(f);
	return n;
}

static int set_reg(int vcpu, uint64_t id, uint64_t value)
{
	struct kvm_one_reg reg = { .id = id, .addr = (uintptr_t)&value };

	return ioctl(vcpu, KVM_SET_ONE_REG, &reg);
}

#define CORE_REG(name)                                              \
	(KVM_REG_ARM64 | KVM_REG_SIZE_U64 | KVM_REG_ARM_CORE |      \
	 KVM_REG_ARM_CORE_REG(name))

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/*
 * The host's counter, for the records' timestamps: before, during or
 * after the guest ran (the host's virtual offset is 0).
 */
static uint64_t count(void)
{
	uint64_t c;

	asm volatile("isb; mrs %0, cntvct_el0" : "=r"(c));
	return c;
}

/*
 * A line in the kernel's log and on the console (where the harness
 * watches for it: the kernel's own console level is too quiet for it).
 */
static void kmsg(const char *line)
{
	const char *const dev[] = { "/dev/kmsg", "/dev/console" };

	for (unsigned int i = 0; i < 2; i++) {
		int fd = open(dev[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);

		if (fd < 0)
			continue;
		if (write(fd, line, strlen(line)) < 0)
			perror(dev[i]);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	uint64_t iterations = argc > 1 ? strtoull(argv[1], NULL, 0) : 300000000;
	uint64_t got[SLOTS / 8], seen = 0;
	struct kvm_vcpu_init init;
	struct kvm_run *run;
	unsigned long exits = 0;
	int kvm, vm, vcpu, done = 0;
	size_t code = guest_size;
	unsigned long irqs;
	uint64_t c0;
	double t0;
	long run_size;
	void *ram;

	kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("open_dev_kvm");
	if (ioctl(kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
		die("kvm_api_version");
	vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		die("create_vm");

	ram = mmap(NULL, GUEST_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ram == MAP_FAILED)
		die("mmap_ram");
	memcpy(ram, guest_start, code);
	struct kvm_userspace_memory_region region = {
		.slot = 0,
		.guest_phys_addr = GUEST_BASE,
		.memory_size = GUEST_SIZE,
		.userspace_addr = (uintptr_t)ram,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region))
		die("set_user_memory_region");

	vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		die("create_vcpu");
	if (ioctl(vm, KVM_ARM_PREFERRED_TARGET, &init))
		die("arm_preferred_target");
	if (ioctl(vcpu, KVM_ARM_VCPU_INIT, &init))
		die("arm_vcpu_init");
	if (set_reg(vcpu, CORE_REG(regs.pc), GUEST_BASE) ||
	    set_reg(vcpu, CORE_REG(regs.regs[0]), iterations))
		die("set_one_reg");
	run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < (long)sizeof(*run))
		die("vcpu_mmap_size");
	run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		die("mmap_run");

	printf("SPE-RESULT kvm_guest_pc_lo=%#llx kvm_guest_pc_hi=%#llx kvm_iterations=%llu\n",
	       GUEST_BASE, GUEST_BASE + code, (unsigned long long)iterations);
	fflush(stdout);
	kmsg("spe-kvm: SPE-KVM-GUEST-RUNNING\n");
	t0 = now();
	irqs = spe_irqs();
	c0 = count();
	while (!done) {
		if (ioctl(vcpu, KVM_RUN, 0)) {
			if (errno == EINTR)
				continue;
			die("kvm_run");
		}
		exits++;
		if (run->exit_reason != KVM_EXIT_MMIO) {
			printf("SPE-RESULT kvm_exit_reason=%u\n", run->exit_reason);
			break;
		}
		uint64_t off = run->mmio.phys_addr - MMIO_BASE, v = 0;

		if (!run->mmio.is_write || run->mmio.len != 8 || off >= SLOTS ||
		    off % 8) {
			printf("SPE-RESULT kvm_bad_mmio=%#llx\n",
			       (unsigned long long)run->mmio.phys_addr);
			break;
		}
		memcpy(&v, run->mmio.data, 8);
		got[off / 8] = v;
		seen |= 1ULL << (off / 8);
		done = off == SLOT_DONE || off == SLOT_UNEXPECTED;
	}
	kmsg("spe-kvm: SPE-KVM-GUEST-DONE\n");
	printf("SPE-RESULT kvm_count_start=%llu kvm_count_end=%llu kvm_exits=%lu kvm_seconds=%.2f kvm_spe_irqs_during=%lu",
	       (unsigned long long)c0, (unsigned long long)count(), exits,
	       now() - t0, spe_irqs() - irqs);
	for (unsigned int i = 0; i < SLOTS / 8; i++)
		if (seen & 1ULL << i)
			printf(" %s=%#llx", slot_name[i], (unsigned long long)got[i]);
	if (seen & 1ULL << (SLOT_DFR0 / 8))
		printf(" kvm_pmsver=%llu",
		       (unsigned long long)(got[SLOT_DFR0 / 8] >> 32 & 0xf));
	printf("\n");
	return seen & 1ULL << (SLOT_DONE / 8) ? 0 : 1;
}
