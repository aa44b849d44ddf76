/* SPDX-License-Identifier: Apache-2.0 */
/*
 * IDENTITY: the host hands a pooled sandbox, made before anyone asked for it,
 * the name a sandbox made for its key is born with (docs/pool.md). The agent
 * is the sandbox's init, in its UTS namespace with the namespace's
 * capabilities: it sets the host name, and for the `host` image rewrites
 * the synthesized /etc/hostname and /etc/hosts in place, in the skeleton
 * below the overlay (etc_fd), so that the root's writable layer stays empty
 * and the files read as they would in a sandbox created with that name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

/* Replace the contents of an existing regular file in the skeleton's /etc.
 * In place (same inode): the overlay keeps the lower file it looked up. */
static int rewrite(int etc, const char *name, const char *text)
{
	int fd = openat(etc, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text);
	int r = 0;
	while (len > 0) {
		ssize_t w = write(fd, text, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			break;
		}
		text += w;
		len -= (size_t)w;
	}
	close(fd);
	return r;
}

void agent_identity(struct agent *a, struct conn *c, const msb_proto_identity *id)
{
	char name[MSB_PROTO_MAX_HOSTNAME + 1], msg[160];
	/* Only a sandbox's init owns the UTS namespace it would change; as an
	 * ordinary process (tests) the host name is the host's own. */
	if (!a->is_init) {
		conn_fail(c, MSB_PROTO_ERR_UNSUPPORTED,
			  "identity: the agent is not a sandbox's init");
		return;
	}
	memcpy(name, id->hostname.ptr, id->hostname.len); /* checked by the decoder */
	name[id->hostname.len] = '\0';
	if (sethostname(name, id->hostname.len) < 0) {
		snprintf(msg, sizeof(msg), "identity: sethostname: %s", strerror(errno));
		conn_fail(c, MSB_PROTO_ERR_INTERNAL, msg);
		return;
	}
	/* Named: what it kept for this goes now (under gVisor, pidns.c). */
	if (pidns_drop_admin(a) < 0) {
		snprintf(msg, sizeof(msg), "identity: %.140s", a->nest_error);
		conn_fail(c, MSB_PROTO_ERR_INTERNAL, msg);
		return;
	}
	if (a->etc_fd >= 0) {
		char line[MSB_PROTO_MAX_HOSTNAME + 2], hosts[256];
		snprintf(line, sizeof(line), "%s\n", name);
		snprintf(hosts, sizeof(hosts), MSB_PROTO_ETC_HOSTS_FMT, name);
		int r = rewrite(a->etc_fd, "hostname", line);
		if (r == 0)
			r = rewrite(a->etc_fd, "hosts", hosts);
		if (r < 0) {
			snprintf(msg, sizeof(msg), "identity: rewrite /etc: %s", strerror(-r));
			conn_fail(c, MSB_PROTO_ERR_INTERNAL, msg);
			return;
		}
	}
	uint8_t buf[32];
	conn_queue(c, buf, msb_proto_enc_identity_ok(buf, sizeof(buf), id->cookie));
}
