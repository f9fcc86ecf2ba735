// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "spe_decode.h"

static __u64 le(const __u8 *p, unsigned int n)
{
	__u64 v = 0;

	while (n--)
		v = (v << 8) | p[n];
	return v;
}

/* A VA of an address packet: bits 55:0, sign-extended from bit 55. */
static __u64 va_of(__u64 payload)
{
	__u64 va = payload & ((1ULL << 56) - 1);

	if (va & (1ULL << 55))
		va |= 0xffULL << 56;
	return va;
}

unsigned long spe_decode(const __u8 *buf, size_t len,
			 void (*fn)(const struct spe_record *r, void *arg),
			 void *arg, struct spe_stats *st)
{
	struct spe_record r;
	unsigned long n = 0;
	size_t i = 0;
	int open = 0;

	memset(&r, 0, sizeof(r));
	r.class = SPE_NONE;
	while (i < len) {
		__u8 h = buf[i], h2 = 0;
		unsigned int hlen = 1, size, idx;
		__u64 v;

		if (h == 0x00) {		/* padding */
			st->pad++;
			i++;
			continue;
		}
		if (h == 0x01) {		/* END */
			i++;
			goto end_record;
		}
		if ((h & 0xfc) == 0x20) {	/* extended header */
			if (i + 1 >= len)
				break;
			h2 = buf[i + 1];
			hlen = 2;
		}
		size = 1u << (((hlen == 2 ? h2 : h) >> 4) & 3);
		if (i + hlen + size > len)
			break;
		v = le(buf + i + hlen, size);
		i += hlen + size;
		open = 1;
		if (hlen == 2) {
			idx = ((h & 3) << 3) | (h2 & 7);
			if ((h2 & 0xf8) == 0xb0)
				goto address;
			if ((h2 & 0xf8) == 0x98)
				goto counter;
			st->bad++;
			continue;
		}
		idx = h & 7;
		if (h == 0x71) {		/* timestamp: ends the record */
			r.has_ts = 1;
			goto end_record;
		}
		if ((h & 0xf8) == 0xb0)
			goto address;
		if ((h & 0xf8) == 0x98)
			goto counter;
		if ((h & 0xcf) == 0x42) {
			r.events = v;
			r.has_events = 1;
		} else if ((h & 0xcf) == 0x43 || (h & 0xfc) == 0x64) {
			/* data source, context */
		} else if ((h & 0xfc) == 0x48) {
			r.class = (enum spe_class)(h & 3);
			r.subclass = v;
		} else {
			st->bad++;
		}
		continue;
address:
		if (idx == 0) {
			r.pc = va_of(v);
			r.el = (v >> 61) & 3;
		} else if (idx == 2) {
			r.va = va_of(v);
		} else if (idx == 3) {
			r.has_pa = 1;
		}
		continue;
counter:
		if (idx == 0) {
			r.total_lat = v & 0xffff;
			r.has_total_lat = 1;
		}
		continue;
end_record:
		if (open) {
			n++;
			st->records++;
			if (fn)
				fn(&r, arg);
		}
		memset(&r, 0, sizeof(r));
		r.class = SPE_NONE;
		open = 0;
	}
	return n;
}
