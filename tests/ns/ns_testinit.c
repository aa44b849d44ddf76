/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for msb-agent in the boundary tests: run as PID 1 of a sandbox
 * with fd 3 listening (MSB_AGENT_LISTEN_FD), it accepts connections and
 * answers one line per command line, reporting what it sees from inside.
 * Static, so it runs on any image. Not a protocol implementation.
 *
 *   ping | pid | ppid | uid | hostname | ifaces | sysnet | procpids | nnp |
 *   rlimit | uidmap | cgroup | stat P | read P | write P | statfs P |
 *   mount-nocaps | mount-caps | sleeper | sh CMD | exit N
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LINE_MAX_LEN 4096

static void reply(int fd, const char *s)
{
	size_t len = strlen(s);
	while (len > 0) {
		ssize_t n = write(fd, s, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}

static void replyf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void replyf(int fd, const char *fmt, ...)
{
	char buf[LINE_MAX_LEN + 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf) - 2, fmt, ap);
	va_end(ap);
	size_t n = strlen(buf);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\n')
			buf[i] = '|';
	buf[n] = '\n';
	buf[n + 1] = '\0';
	reply(fd, buf);
}

static const char *ename(int e)
{
	const char *s = strerrorname_np(e);
	return s ? s : "E?";
}

static void read_small(const char *path, char *out, size_t size)
{
	out[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(out, size, "err %s", ename(errno));
		return;
	}
	ssize_t n = read(fd, out, size - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
}

static void list_dir(const char *path, bool numeric_only, char *out, size_t size)
{
	out[0] = '\0';
	DIR *d = opendir(path);
	if (!d) {
		snprintf(out, size, "err %s", ename(errno));
		return;
	}
	struct dirent *de;
	size_t len = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (numeric_only && (de->d_name[0] < '0' || de->d_name[0] > '9'))
			continue;
		int n = snprintf(out + len, size - len, "%s%s", len ? " " : "", de->d_name);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
	closedir(d);
}

/* Drop every capability: bounding set, then effective/permitted/inheritable. */
static int drop_caps(void)
{
	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -1;
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	return (int)syscall(SYS_capset, &h, d);
}

/* Fork a child that tries to mount a tmpfs; returns 0 or its errno. */
static int try_mount(bool caps)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (!caps && drop_caps() < 0)
			_exit(120);
		if (mount("none", "/tmp", "tmpfs", 0, "size=1m") < 0)
			_exit(errno & 0x7f);
		_exit(0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 125;
}

static void run_sh(int fd, const char *cmd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		replyf(fd, "err pipe");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char out[LINE_MAX_LEN];
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(p[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	while (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	replyf(fd, "status %d %s", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out);
}

static void handle(int fd, char *line)
{
	char buf[LINE_MAX_LEN];
	char *arg = strchr(line, ' ');
	if (arg)
		*arg++ = '\0';
	if (strcmp(line, "ping") == 0) {
		replyf(fd, "pong");
	} else if (strcmp(line, "pid") == 0) {
		replyf(fd, "%d", (int)getpid());
	} else if (strcmp(line, "ppid") == 0) {
		replyf(fd, "%d", (int)getppid());
	} else if (strcmp(line, "uid") == 0) {
		replyf(fd, "%d %d", (int)getuid(), (int)getgid());
	} else if (strcmp(line, "hostname") == 0) {
		gethostname(buf, sizeof(buf));
		replyf(fd, "%s", buf);
	} else if (strcmp(line, "ifaces") == 0) {
		struct if_nameindex *ifs = if_nameindex();
		size_t len = 0;
		buf[0] = '\0';
		for (struct if_nameindex *i = ifs; i && i->if_index; i++)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s",
						len ? " " : "", i->if_name);
		if (ifs)
			if_freenameindex(ifs);
		replyf(fd, "%s", buf);
	} else if (strcmp(line, "sysnet") == 0) {
		list_dir("/sys/class/net", false, buf, sizeof(buf));
		replyf(fd, "%s", buf);
	} else if (strcmp(line, "procpids") == 0) {
		list_dir("/proc", true, buf, sizeof(buf));
		replyf(fd, "%s", buf);
	} else if (strcmp(line, "nnp") == 0) {
		replyf(fd, "%d", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	} else if (strcmp(line, "rlimit") == 0) {
		struct rlimit nf, core;
		getrlimit(RLIMIT_NOFILE, &nf);
		getrlimit(RLIMIT_CORE, &core);
		replyf(fd, "nofile %llu %llu core %llu %llu", (unsigned long long)nf.rlim_cur,
		       (unsigned long long)nf.rlim_max, (unsigned long long)core.rlim_cur,
		       (unsigned long long)core.rlim_max);
	} else if (strcmp(line, "uidmap") == 0) {
		read_small("/proc/self/uid_map", buf, sizeof(buf));
		replyf(fd, "%s", buf);
	} else if (strcmp(line, "cgroup") == 0) {
		read_small("/proc/self/cgroup", buf, sizeof(buf));
		replyf(fd, "%s", buf);
	} else if (strcmp(line, "stat") == 0 && arg) {
		struct stat st;
		if (lstat(arg, &st) < 0)
			replyf(fd, "err %s", ename(errno));
		else
			replyf(fd, "ok %o %d %d", (unsigned)st.st_mode, (int)st.st_uid,
			       (int)st.st_gid);
	} else if (strcmp(line, "read") == 0 && arg) {
		read_small(arg, buf, 256);
		replyf(fd, "%s%s", strncmp(buf, "err ", 4) == 0 ? "" : "ok ", buf);
	} else if (strcmp(line, "write") == 0 && arg) {
		int w = open(arg, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (w < 0) {
			replyf(fd, "err %s", ename(errno));
		} else {
			ssize_t n = write(w, "x\n", 2);
			close(w);
			if (n == 2)
				replyf(fd, "ok");
			else
				replyf(fd, "err %s", ename(errno));
		}
	} else if (strcmp(line, "statfs") == 0 && arg) {
		struct statvfs sv;
		if (statvfs(arg, &sv) < 0)
			replyf(fd, "err %s", ename(errno));
		else
			replyf(fd, "%s%s", (sv.f_flag & ST_RDONLY) ? "ro" : "rw",
			       (sv.f_flag & ST_NOSUID) ? " nosuid" : "");
	} else if (strcmp(line, "mount-nocaps") == 0 || strcmp(line, "mount-caps") == 0) {
		int e = try_mount(strcmp(line, "mount-caps") == 0);
		replyf(fd, "%s", e == 0 ? "ok" : e == 120 ? "err dropcaps" : ename(e));
	} else if (strcmp(line, "sleeper") == 0) {
		pid_t pid = fork();
		if (pid == 0) {
			for (;;)
				pause();
		}
		replyf(fd, "%d", (int)pid);
	} else if (strcmp(line, "sh") == 0 && arg) {
		run_sh(fd, arg);
	} else if (strcmp(line, "exit") == 0) {
		_exit(arg ? (int)strtol(arg, NULL, 10) : 0);
	} else {
		replyf(fd, "err unknown command");
	}
}

static void serve(int fd)
{
	char line[LINE_MAX_LEN];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		len += (size_t)n;
		char *nl;
		while ((nl = memchr(line, '\n', len))) {
			*nl = '\0';
			handle(fd, line);
			size_t used = (size_t)(nl - line) + 1;
			memmove(line, nl + 1, len - used);
			len -= used;
		}
		if (len == sizeof(line) - 1)
			return;
	}
}

int main(void)
{
	const char *e = getenv("MSB_AGENT_LISTEN_FD");
	if (!e)
		return 2;
	int lfd = (int)strtol(e, NULL, 10);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		serve(c);
		close(c);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
