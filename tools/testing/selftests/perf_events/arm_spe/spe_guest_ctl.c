// SPDX-License-Identifier: GPL-2.0
/*
 * spe_guest_ctl: the guest control port from a shell.
 *
 *   spe_guest_ctl COMMAND [ARGUMENTS]    prints the reply line
 *   spe_guest_ctl wait-fault ID [MS]     prints fault ID's FAULT_DELIVERED
 *
 * Exit status: 0 a reply, 1 an error reply, 2 no port or no reply, 3 a
 * fault not delivered in time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spe_control.h"

int main(int argc, char **argv)
{
	static char reply[SPE_CTL_LINE];
	struct spe_ctl c;
	int ret;

	if (argc < 2 || argc > 4 || !strcmp(argv[1], "--help")) {
		fprintf(stderr,
			"usage: %s COMMAND [ARGUMENTS-JSON]\n"
			"       %s wait-fault ID [MS]\n", argv[0], argv[0]);
		return 2;
	}
	ret = spe_ctl_open(&c);
	if (ret) {
		fprintf(stderr, "%s: no guest control port %s: %s\n", argv[0],
			SPE_CTL_PORT_NAME, strerror(-ret));
		return 2;
	}
	if (!strcmp(argv[1], "wait-fault") && argc >= 3) {
		ret = spe_ctl_wait_fault(&c, strtoul(argv[2], NULL, 0),
					 argc == 4 ? atoi(argv[3]) : 5000,
					 reply, sizeof(reply));
		if (ret == -ETIMEDOUT) {
			fprintf(stderr, "%s: fault %s not delivered\n", argv[0],
				argv[2]);
			return 3;
		}
	} else {
		ret = spe_ctl_call(&c, argv[1], argc > 2 ? argv[2] : NULL,
				   reply, sizeof(reply));
	}
	spe_ctl_close(&c);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", argv[0], strerror(-ret));
		return 2;
	}
	puts(reply);
	return ret;
}
