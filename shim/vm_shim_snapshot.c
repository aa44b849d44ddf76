/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-vm-shim's side of templates (docs/internals/vm.md, "Snapshots"): a
 * template runs in a RAM file of its own and is saved through qemu's
 * monitor with x-ignore-shared (the state file carries the devices, the RAM
 * file is the RAM); a restore maps the template's sealed copy private and
 * gives qemu the state through the monitor (`-incoming defer`).
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "backends/ns/boundary/shim.h"
#include "util/fs.h"
#include "vm_shim.h"

/* A restore's RAM: the template's, in a memfd sealed against writes,
 * growing and shrinking (the library made it), of the guest's size. Never
 * a file the VMM could write: what one VM's VMM wrote there every other VM
 * of the template would read. */
void shim_check_ram(struct shim *s)
{
	const int need = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
	int seals = fcntl(s->ram_fd, F_GET_SEALS);
	struct stat st;
	if (seals < 0 || (seals & need) != need)
		shim_die(s, "the template's RAM (fd %d) is not a sealed memfd", s->ram_fd);
	if (fstat(s->ram_fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != s->memory_mib << 20)
		shim_die(s, "the template's RAM is not %llu MiB",
			 (unsigned long long)s->memory_mib);
	if (fcntl(s->ram_fd, F_SETFD, FD_CLOEXEC) < 0)
		shim_die(s, "the template's RAM: %s", strerror(errno));
}

/* A template runs in a file of its own (the jail's uid may write it, qemu
 * maps it shared): its RAM when saved. */
void shim_make_ram_file(struct shim *s)
{
	s->ram_tmp = msb__asprintf("%s.%d.tmp", s->save_ram_to, (int)getpid());
	if (!s->ram_tmp)
		shim_die(s, "out of memory");
	int fd = open(s->ram_tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		free(s->ram_tmp);
		s->ram_tmp = NULL;
		shim_die(s, "the template's RAM `%s`: %s", s->save_ram_to, strerror(errno));
	}
	s->ram_fd = fd;
	if (ftruncate(fd, (off_t)(s->memory_mib << 20)) < 0 ||
	    fchown(fd, (uid_t)s->jail_uid, (gid_t)s->jail_uid) < 0)
		shim_die(s, "the template's RAM: %s", strerror(errno));
}

/* ---- saving a template (QMP) ---------------------------------------------- */

#define QMP_LINE_MAX 8192
#define SAVE_TIMEOUT_NS (120LL * 1000 * 1000 * 1000)

/* Send `cmd` (one command or `answers` of them back to back; with a
 * descriptor, for getfd); read lines until as many answers, skipping
 * events. true when every one returned; the last answer (or the error) in
 * out. */
static bool qmp_cmds(struct shim *s, int q, const char *cmd, int pass_fd, int answers, char *out,
		     size_t size)
{
	struct iovec iov = {.iov_base = (void *)cmd, .iov_len = strlen(cmd)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (pass_fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	if (sendmsg(q, &m, MSG_NOSIGNAL) != (ssize_t)iov.iov_len)
		shim_die(s, "qmp: send: %s", strerror(errno));
	int64_t until = msb__now_ns() + 10LL * 1000 * 1000 * 1000;
	size_t len = 0;
	for (;;) {
		char *nl = memchr(out, '\n', len);
		if (nl) {
			*nl = '\0';
			if (strstr(out, "\"error\""))
				return false;
			if (strstr(out, "\"return\"") && --answers == 0)
				return true;
			size_t rest = len - (size_t)(nl + 1 - out);
			memmove(out, nl + 1, rest);
			len = rest;
			continue;
		}
		if (len + 1 >= size)
			shim_die(s, "qmp: a line too long");
		struct pollfd p = {.fd = q, .events = POLLIN};
		int64_t left = (until - msb__now_ns()) / 1000000;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			shim_die(s, "qmp: no answer to %s", cmd);
		ssize_t n = read(q, out + len, size - 1 - len);
		if (n <= 0)
			shim_die(s, "qmp: the monitor went away");
		len += (size_t)n;
	}
}

static bool qmp_cmd(struct shim *s, int q, const char *cmd, int pass_fd, char *out, size_t size)
{
	return qmp_cmds(s, q, cmd, pass_fd, 1, out, size);
}

static int qmp_connect(struct shim *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/run/%s", s->state_dir, JAIL_DIR,
			 MSB_VMM_QMP_SOCK);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		shim_die(s, "qmp: the state directory's path is too long");
	/* qemu makes the socket early in its start (a restore connects then). */
	int64_t until = msb__now_ns() + SERIAL_CONNECT_NS;
	for (;;) {
		int q = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (q < 0)
			shim_die(s, "qmp: socket: %s", strerror(errno));
		if (connect(q, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			struct ucred cr;
			socklen_t crlen = sizeof(cr);
			if (getsockopt(q, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 ||
			    cr.pid != s->vmm.pid)
				shim_die(s, "qmp: the monitor socket is not the VMM's");
			return q;
		}
		int e = errno;
		close(q);
		if (shim_vmm_exited(s))
			shim_die_vm(s, "the VMM exited before its monitor socket was there");
		if (msb__now_ns() > until)
			shim_die(s, "qmp: connect: %s", strerror(e));
		shim_drain_console(s);
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

#define QMP_IGNORE_SHARED                                                                          \
	"{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"               \
	"[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n"

/* A restore: the state file carries the devices only (x-ignore-shared, the
 * RAM is the template's, mapped private); qemu waits (`-incoming defer`)
 * until the capability is set, then reads it and runs. */
void shim_restore_incoming(struct shim *s)
{
	_cleanup_close_ int q = qmp_connect(s);
	char ans[QMP_LINE_MAX], cmd[512];
	s->t_qmp = msb__now_ns();
	/* The three at once: one round trip on the critical path, not three. */
	snprintf(cmd, sizeof(cmd),
		 "{\"execute\":\"qmp_capabilities\"}\n" QMP_IGNORE_SHARED
		 "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"fd:%d\"}}\n",
		 s->incoming_fd);
	if (!qmp_cmds(s, q, cmd, -1, 3, ans, sizeof(ans)))
		shim_die(s, "qmp: %s", ans);
}

/* The template's state: the session ends (the pump waits for the next), the
 * running VM is migrated into a file renamed into place once complete. Not
 * stopped first: a running state autostarts on -incoming, no `cont` needed. */
void shim_save_template(struct shim *s)
{
	int64_t t0 = msb__now_ns();
	msb_mux_link_free(s->link);
	s->link = NULL;
	/* The guest may see the hang-up first (a SESSION would do as well). */
	struct timespec ts = {0, 20 * 1000 * 1000};
	nanosleep(&ts, NULL);
	_cleanup_close_ int q = qmp_connect(s);
	char ans[QMP_LINE_MAX];
	/* The greeting (no "return") is skipped with the first answer. */
	if (!qmp_cmd(s, q, "{\"execute\":\"qmp_capabilities\"}\n", -1, ans, sizeof(ans)) ||
	    !qmp_cmd(s, q, QMP_IGNORE_SHARED, -1, ans, sizeof(ans)))
		shim_die(s, "qmp: %s", ans);
	_cleanup_free_ char *tmp = msb__asprintf("%s.%d.tmp", s->save_to, (int)getpid());
	if (!tmp)
		shim_die(s, "out of memory");
	_cleanup_close_ int f =
		open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (f < 0)
		shim_die(s, "save `%s`: %s", tmp, strerror(errno));
	if (!qmp_cmd(s, q, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"state\"}}\n", f, ans,
		     sizeof(ans)) ||
	    !qmp_cmd(s, q, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:state\"}}\n", -1,
		     ans, sizeof(ans))) {
		unlink(tmp);
		shim_die(s, "qmp: %s", ans);
	}
	int64_t until = msb__now_ns() + SAVE_TIMEOUT_NS;
	for (;;) {
		if (!qmp_cmd(s, q, "{\"execute\":\"query-migrate\"}\n", -1, ans, sizeof(ans)))
			break;
		if (strstr(ans, "\"completed\""))
			break;
		if (strstr(ans, "\"failed\"") || msb__now_ns() > until) {
			unlink(tmp);
			shim_die(s, "saving the template failed: %s", ans);
		}
		shim_drain_console(s);
		struct timespec p = {0, 10 * 1000 * 1000};
		nanosleep(&p, NULL);
	}
	if (!strstr(ans, "\"completed\"")) {
		unlink(tmp);
		shim_die(s, "saving the template failed: %s", ans);
	}
	/* The VM stays paused after a completed migration; its RAM is in the
	 * file. The file becomes root's and read-only before it is named. */
	msb_vmm__stop(&s->vmm);
	s->vmm_started = false;
	if (fchown(s->ram_fd, 0, 0) < 0 || fchmod(s->ram_fd, 0400) < 0 || fsync(s->ram_fd) < 0 ||
	    rename(s->ram_tmp, s->save_ram_to) < 0 || fsync(f) < 0 || rename(tmp, s->save_to) < 0) {
		int e = errno;
		unlink(tmp);
		unlink(s->save_ram_to);
		shim_die(s, "saving the template failed: %s", strerror(e));
	}
	free(s->ram_tmp);
	s->ram_tmp = NULL;
	msb_ns__shim_log("msb-vm-shim: `%s` saved to %s in %.3f s", s->name, s->save_to,
			 (double)(msb__now_ns() - t0) / 1e9);
}
