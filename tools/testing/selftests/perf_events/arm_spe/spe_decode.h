/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small decoder of SPE records (Arm ARM D17.10, "Statistical Profiling
 * Extension packets"): enough to check what the records say, packet
 * sizes as perf's arm-spe-pkt-decoder reads them.
 */
#ifndef SPE_DECODE_H
#define SPE_DECODE_H

#include <stddef.h>
#include <linux/types.h>

enum spe_class { SPE_OTHER, SPE_LDST, SPE_BRANCH, SPE_NONE };

struct spe_record {
	__u64 pc;		/* address packet index 0, VA */
	int el;			/* its EL */
	__u64 va;		/* index 2, data VA (0: none) */
	int has_pa;		/* index 3, data PA */
	int has_ts;
	enum spe_class class;
	__u8 subclass;	/* the Operation Type payload */
	__u64 events;
	int has_events;
	__u32 total_lat;	/* counter index 0 */
	int has_total_lat;
};

struct spe_stats {
	unsigned long records;
	unsigned long bad;	/* packets no header form matches */
	unsigned long pad;
};

/*
 * Walks @len bytes of AUX data and calls @fn for each record: a record
 * ends at an END or timestamp packet. Returns the records seen.
 */
unsigned long spe_decode(const __u8 *buf, size_t len,
			 void (*fn)(const struct spe_record *r, void *arg),
			 void *arg, struct spe_stats *st);

#endif
