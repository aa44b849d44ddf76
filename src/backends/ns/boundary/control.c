/* SPDX-License-Identifier: Apache-2.0 */
/* A shim's answer on its control socket: one line and, with it, descriptors
 * (boundary.h). Shared by msb-shim and msb-oci-shim. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "backends/ns/boundary/boundary.h"

int msb_ns__send_fds(int conn, const char *line, const int *fds, size_t n)
{
	if (n > 2)
		return -EINVAL;
	struct iovec iov = {.iov_base = (void *)line, .iov_len = strlen(line)};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	ssize_t w;
	do
		w = sendmsg(conn, &msg, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)iov.iov_len ? 0 : -EIO;
}
