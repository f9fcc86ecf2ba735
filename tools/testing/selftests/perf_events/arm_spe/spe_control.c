// SPDX-License-Identifier: GPL-2.0
/*
 * The guest control port's client (spe_control.h). The backend writes
 * nothing but its greeting and replies, but a reply can be left over from
 * a program that went before, so a reply is matched by its id.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spe_control.h"

#define CALL_TIMEOUT_MS 5000

static int find_port(char *path, size_t size)
{
	struct dirent *d;
	char name[128];
	DIR *dir;
	int ret = -ENOENT;

	dir = opendir("/sys/class/virtio-ports");
	if (!dir)
		return -ENOENT;
	while ((d = readdir(dir))) {
		char file[300];
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "/sys/class/virtio-ports/%s/name",
			 d->d_name);
		f = fopen(file, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = '\0';
			if (!strcmp(name, SPE_CTL_PORT_NAME)) {
				snprintf(path, size, "/dev/%s", d->d_name);
				ret = 0;
			}
		}
		fclose(f);
		if (!ret)
			break;
	}
	closedir(dir);
	return ret;
}

int spe_ctl_open(struct spe_ctl *c)
{
	char path[300];
	int ret;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	ret = find_port(path, sizeof(path));
	if (ret)
		return ret;
	c->fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	/* Ids no earlier program on this port is likely to have used. */
	c->next_id = (unsigned int)getpid() * 1000u;
	return 0;
}

void spe_ctl_close(struct spe_ctl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* One line into @out (without its newline): 0, or -errno. */
static int read_line(struct spe_ctl *c, char *out, size_t size, long deadline)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		long left;
		ssize_t n;

		if (nl) {
			size_t l = nl - c->buf;

			if (l >= size)
				l = size - 1;
			memcpy(out, c->buf, l);
			out[l] = '\0';
			c->len -= nl + 1 - c->buf;
			memmove(c->buf, nl + 1, c->len);
			return 0;
		}
		if (c->len == sizeof(c->buf))
			c->len = 0;	/* a line longer than any reply: drop it */
		left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&p, 1, left) < 0 && errno != EINTR)
			return -errno;
		n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (n > 0)
			c->len += n;
	}
}

static int write_all(int fd, const char *s, size_t len, long deadline)
{
	while (len) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t n = write(fd, s, len);

		if (n > 0) {
			s += n;
			len -= n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		poll(&p, 1, deadline - now_ms());
	}
	return 0;
}

int spe_ctl_call(struct spe_ctl *c, const char *cmd, const char *args,
		 char *out, size_t size)
{
	long deadline = now_ms() + CALL_TIMEOUT_MS;
	char req[4096], tail[32];
	unsigned int id = ++c->next_id;
	int len, ret;

	len = snprintf(req, sizeof(req),
		       "{\"execute\":\"%s\",\"arguments\":%s,\"id\":%u}\n",
		       cmd, args ? args : "{}", id);
	if (len < 0 || (size_t)len >= sizeof(req))
		return -E2BIG;
	ret = write_all(c->fd, req, len, deadline);
	if (ret)
		return ret;
	/* The backend ends each reply with its "id". */
	snprintf(tail, sizeof(tail), ",\"id\":%u}", id);
	for (;;) {
		size_t l;

		ret = read_line(c, out, size, deadline);
		if (ret)
			return ret;
		l = strlen(out);
		if (l < strlen(tail) || strcmp(out + l - strlen(tail), tail))
			continue;
		if (!strncmp(out, "{\"return\":", 10))
			return 0;
		if (!strncmp(out, "{\"error\":", 9))
			return 1;
	}
}

/*
 * The end of the JSON object or array that starts at @p, or NULL.
 * Braces in strings are skipped.
 */
static const char *json_end(const char *p)
{
	int depth = 0, str = 0;

	for (; *p; p++) {
		if (str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				str = 0;
			continue;
		}
		if (*p == '"')
			str = 1;
		else if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && --depth == 0)
			return p + 1;
	}
	return NULL;
}

/* Whether the event object [@e, @end) is fault @id's FAULT_DELIVERED. */
static int is_fault_event(const char *e, const char *end, unsigned int id)
{
	const char *name = strstr(e, "\"event\":\"FAULT_DELIVERED\"");
	const char *data = strstr(e, "\"data\":{");
	__u64 got;

	if (!name || name >= end || !data || data >= end)
		return 0;
	/* The data object's own "id" (the fault object has none). */
	data += 7;
	end = json_end(data);
	while (data && end && data < end) {
		const char *k = strstr(data, "\"id\":");

		if (!k || k >= end)
			return 0;
		/* Only keys of the data object itself: skip nested objects. */
		got = strtoull(k + 5, NULL, 10);
		if (k[-1] == ',' || k[-1] == '{')
			return got == id;
		data = k + 5;
	}
	return 0;
}

int spe_ctl_wait_fault(struct spe_ctl *c, unsigned int id, int ms,
		       char *out, size_t size)
{
	long deadline = now_ms() + ms;
	char *reply;
	int ret;

	reply = malloc(SPE_CTL_LINE);
	if (!reply)
		return -ENOMEM;
	for (;;) {
		const char *e = NULL, *end;

		ret = spe_ctl_call(c, "query-events", NULL, reply, SPE_CTL_LINE);
		if (ret)
			break;
		e = strstr(reply, "\"events\":[");
		if (e)
			e = strchr(e, '[') + 1;
		while (e && *e == '{' && (end = json_end(e))) {
			if (is_fault_event(e, end, id)) {
				size_t l = end - e;

				if (l >= size)
					l = size - 1;
				memcpy(out, e, l);
				out[l] = '\0';
				goto done;
			}
			e = *end == ',' ? end + 1 : NULL;
		}
		if (!strstr(reply, "\"more\":true")) {
			if (now_ms() >= deadline) {
				ret = -ETIMEDOUT;
				break;
			}
			usleep(20000);
		}
	}
done:
	free(reply);
	return ret;
}

int spe_json_u64(const char *json, const char *key, __u64 *val)
{
	char k[80];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(json, k);
	if (!p)
		return -ENOENT;
	p += strlen(k);
	if (*p == '"')
		p++;
	if (!strncmp(p, "true", 4)) {
		*val = 1;
		return 0;
	}
	if (!strncmp(p, "false", 5)) {
		*val = 0;
		return 0;
	}
	if (*p < '0' || *p > '9')
		return -ENOENT;
	*val = strtoull(p, NULL, 0);
	return 0;
}
