/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A client of vhost-device-spe's guest control port: the virtio-serial
 * port org.vhost-device-spe.control, through which a guest arms faults on
 * its own profiling buffers and reads what happened. One JSON object per
 * line, as protocol/README.md ("The guest control port") describes.
 */
#ifndef SPE_CONTROL_H
#define SPE_CONTROL_H

#include <stddef.h>
#include <linux/types.h>

#define SPE_CTL_PORT_NAME "org.vhost-device-spe.control"
/* Longer than any reply the backend sends to the guest. */
#define SPE_CTL_LINE 16384

struct spe_ctl {
	int fd;
	unsigned int next_id;
	size_t len;
	char buf[SPE_CTL_LINE];
};

/* 0, or -ENOENT when the VM has no control port, or another -errno. */
int spe_ctl_open(struct spe_ctl *c);
void spe_ctl_close(struct spe_ctl *c);

/*
 * Runs @cmd with @args (a JSON object, or NULL for none) and leaves the
 * reply line in @out: 0 for a "return", 1 for an "error", -errno when
 * no reply came within 5 s or the port failed.
 */
int spe_ctl_call(struct spe_ctl *c, const char *cmd, const char *args,
		 char *out, size_t size);

/*
 * Waits up to @ms for fault @id's FAULT_DELIVERED event (query-events)
 * and leaves the event's JSON in @out: 0, or -ETIMEDOUT, or -errno.
 */
int spe_ctl_wait_fault(struct spe_ctl *c, unsigned int id, int ms,
		       char *out, size_t size);

/*
 * The first value of "@key" in @json: a number, a "0x..." string, true
 * (1) or false (0). 0, or -ENOENT.
 */
int spe_json_u64(const char *json, const char *key, __u64 *val);

#endif
