/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ns boundary, driven through the real msb-shim with ns-testinit as the
 * sandbox's PID 1 (env MSB_SHIM, MSB_TESTINIT). Needs root (the
 * unprivileged case drops to nobody itself). Every test checks that nothing
 * is left behind: no process, mount, cgroup, socket or state directory.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "backends/ns/boundary/boundary.h"
#include "util/fs.h"

struct sbx {
	char dir[64];
	char cfg[80];
	pid_t shim;
	pid_t init;
	uint32_t uid_base;
	char cgroups[1024]; /* the record, read after start */
	char ready[512];
};

/* Every sandbox a test starts, so that a failed assertion (which ends the
 * test early) still leaves nothing behind: see cleanup(). */
#define MAX_STARTED 16
static struct started {
	char dir[64];
	char cfg[80];
	pid_t shim;
} started[MAX_STARTED];
static size_t n_started;
static char image_dir[64]; /* dir_image_overlay's image */

static void cleanup(void)
{
	for (size_t i = 0; i < n_started; i++) {
		struct started *s = &started[i];
		/* Our own unreaped child (so its pid cannot have been reused). */
		if (s->shim > 0 && waitpid(s->shim, NULL, WNOHANG) == 0) {
			kill(s->shim, SIGTERM);
			waitpid(s->shim, NULL, 0);
		}
		msb_ns__state_purge(s->dir, true, 2000, NULL);
		rmdir(s->dir);
		unlink(s->cfg);
	}
	n_started = 0;
	if (image_dir[0]) {
		int dfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		msb__rm_rf_at(dfd, image_dir + 5);
		close(dfd);
		image_dir[0] = '\0';
	}
}

static const char *shim_path(void)
{
	const char *p = getenv("MSB_SHIM");
	cr_assert(p, "MSB_SHIM not set");
	return p;
}

static const char *init_path(void)
{
	const char *p = getenv("MSB_TESTINIT");
	cr_assert(p, "MSB_TESTINIT not set");
	return p;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static uint32_t unique_base(void)
{
	return 1100000000u + (uint32_t)(getpid() % 1000) * 65536u;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	cr_assert(f, "fopen %s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

static void read_text(const char *path, char *out, size_t size)
{
	out[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, size - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
}

/* Start msb-shim; `as_uid` >= 0 runs it as that user. Returns true on "ok". */
static bool start_as(struct sbx *s, const char *config, int as_uid)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/msb-nstest-XXXXXX");
	cr_assert(mkdtemp(s->dir));
	cr_assert(n_started < MAX_STARTED);
	struct started *rec = &started[n_started++];
	snprintf(rec->dir, sizeof(rec->dir), "%s", s->dir);
	snprintf(s->cfg, sizeof(s->cfg), "%s.json", s->dir);
	snprintf(rec->cfg, sizeof(rec->cfg), "%s", s->cfg);
	write_text(s->cfg, config);
	if (as_uid >= 0) {
		cr_assert_eq(chown(s->dir, (uid_t)as_uid, (gid_t)as_uid), 0);
		cr_assert_eq(chmod(s->cfg, 0644), 0);
	}
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	s->shim = fork();
	cr_assert(s->shim >= 0);
	rec->shim = s->shim;
	if (s->shim == 0) {
		if (dup2(p[1], 3) < 0)
			_exit(127);
		if (as_uid >= 0 &&
		    (setgroups(0, NULL) < 0 || setresgid(as_uid, as_uid, as_uid) < 0 ||
		     setresuid(as_uid, as_uid, as_uid) < 0))
			_exit(126);
		execl(shim_path(), "msb-shim", "--state", s->dir, "--agent", init_path(),
		      "--config", s->cfg, "--ready-fd", "3", "--remove-state-dir", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], s->ready + len, sizeof(s->ready) - 1 - len)) > 0)
		len += (size_t)n;
	close(p[0]);
	s->ready[len] = '\0';
	if (strcmp(s->ready, "ok\n") != 0)
		return false;
	pid_t pid;
	uint64_t st;
	int dfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	cr_assert_eq(msb_ns__read_pid_file(dfd, MSB_NS_STATE_INIT_PID, &pid, &st), 0);
	s->init = pid;
	cr_assert_eq(msb_ns__read_pid_file(dfd, MSB_NS_STATE_SHIM_PID, &pid, &st), 0);
	cr_assert_eq(pid, s->shim, "shim.pid names the shim");
	close(dfd);
	char path[200];
	snprintf(path, sizeof(path), "%s/%s", s->dir, MSB_NS_STATE_CGROUPS);
	read_text(path, s->cgroups, sizeof(s->cgroups));
	return true;
}

static bool start(struct sbx *s, const char *config)
{
	return start_as(s, config, -1);
}

/* One command line to the init, one answer line back. */
static void ask(const struct sbx *s, const char *cmd, char *out, size_t size)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", s->dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
		     strerror(errno));
	struct timeval tv = {10, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	size_t cl = strlen(cmd);
	cr_assert_eq(write(fd, cmd, cl), (ssize_t)cl);
	cr_assert_eq(write(fd, "\n", 1), 1);
	size_t len = 0;
	while (len < size - 1) {
		ssize_t n = read(fd, out + len, 1);
		if (n <= 0 || out[len] == '\n')
			break;
		len++;
	}
	out[len] = '\0';
	close(fd);
}

static bool pid_alive(pid_t pid)
{
	char path[32];
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return access(path, F_OK) == 0;
}

static bool wait_gone(pid_t pid, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (!pid_alive(pid))
			return true;
		sleep_ms(1);
	}
	return !pid_alive(pid);
}

/* Any process whose uid lies in [base, base + 65536)? */
static pid_t process_with_uid_in(uint32_t base)
{
	DIR *d = opendir("/proc");
	cr_assert(d);
	struct dirent *de;
	pid_t found = 0;
	while ((de = readdir(d)) && !found) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		read_text(path, buf, sizeof(buf));
		char *u = strstr(buf, "\nUid:");
		if (!u)
			continue;
		unsigned long uid = strtoul(u + 5, NULL, 10);
		if (uid >= base && uid < (unsigned long)base + 65536)
			found = (pid_t)strtol(de->d_name, NULL, 10);
	}
	closedir(d);
	return found;
}

static int mounts_mentioning(const char *needle)
{
	char *buf = malloc(1 << 20);
	read_text("/proc/self/mountinfo", buf, 1 << 20);
	int n = 0;
	for (char *p = buf; (p = strstr(p, needle)); p++)
		n++;
	free(buf);
	return n;
}

/* After the shim is gone: nothing of the sandbox remains. */
static void assert_nothing_left(const struct sbx *s)
{
	cr_assert(wait_gone(s->init, 2000), "init %d still alive", (int)s->init);
	cr_assert(wait_gone(s->shim, 2000), "shim %d still alive", (int)s->shim);
	if (s->uid_base)
		cr_assert_eq(process_with_uid_in(s->uid_base), 0, "a sandbox process survived");
	struct stat st;
	cr_assert(stat(s->dir, &st) < 0 && errno == ENOENT, "state dir `%s` remains", s->dir);
	cr_assert_eq(mounts_mentioning("msb-nstest"), 0, "a mount leaked into the host");
	char rec[1024];
	snprintf(rec, sizeof(rec), "%s", s->cgroups);
	for (char *p = rec; *p;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (*p)
			cr_assert(stat(p, &st) < 0 && errno == ENOENT, "cgroup `%s` remains", p);
		if (!nl)
			break;
		p = nl + 1;
	}
}

/* The init died unasked (issue 15 finding 2): the shim took the sandbox
 * down but kept its storage base and recorded why, so the host can tell a
 * dead sandbox from a disposed one; a purge then removes all of it. */
static void assert_dead_then_purge(const struct sbx *s, const char *why)
{
	char path[128], text[256] = "";
	snprintf(path, sizeof(path), "%s/%s", s->dir, MSB_NS_STATE_DEAD);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "no death record in %s", s->dir);
	cr_assert_gt(read(fd, text, sizeof(text) - 1), 0);
	close(fd);
	cr_assert(strstr(text, why), "death record: %s", text);
	snprintf(path, sizeof(path), "%s/work/kept", s->dir);
	cr_assert_eq(access(path, F_OK), 0, "the storage base was wiped");
	snprintf(path, sizeof(path), "%s/%s", s->dir, MSB_NS_STATE_SHIM_PID);
	cr_assert(access(path, F_OK) < 0, "shim.pid outlived the teardown");
	cr_assert(wait_gone(s->init, 2000), "init %d still alive", (int)s->init);
	msb_error *e = NULL;
	cr_assert_eq(msb_ns__state_purge(s->dir, true, 2000, &e), 0, "purge: %s",
		     msb_error_message(e));
	assert_nothing_left(s);
}

/* A file in the storage base, from the host. */
static void keep_a_file(const struct sbx *s)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/work/kept", s->dir);
	write_text(path, "x");
}

static void stop(struct sbx *s)
{
	kill(s->shim, SIGTERM);
	int status = 0;
	cr_assert_eq(waitpid(s->shim, &status, 0), s->shim);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "shim exit status 0x%x", status);
	unlink(s->cfg);
}

static char *config_with_base(struct sbx *s, const char *extra)
{
	s->uid_base = unique_base();
	return msb__asprintf("{\"image\":\"host\",\"hostname\":\"nstest\",\"uid_base\":%u%s%s}",
			     s->uid_base, extra[0] ? "," : "", extra);
}

TestSuite(ns, .timeout = 60, .fini = cleanup);

Test(ns, inside_the_boundary)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	char out[4096], marker[64];

	ask(&s, "pid", out, sizeof(out));
	cr_assert_str_eq(out, "1", "the init is PID 1");
	ask(&s, "ppid", out, sizeof(out));
	cr_assert_str_eq(out, "0");
	ask(&s, "ifaces", out, sizeof(out));
	cr_assert_str_eq(out, "lo", "egress closed: only loopback");
	ask(&s, "sysnet", out, sizeof(out));
	cr_assert_str_eq(out, "lo");
	ask(&s, "sh cat /sys/class/net/lo/operstate /sys/class/net/lo/flags", out, sizeof(out));
	cr_assert(strstr(out, "0x9"), "lo is up: %s", out);
	ask(&s, "hostname", out, sizeof(out));
	cr_assert_str_eq(out, "nstest");
	ask(&s, "read /etc/hostname", out, sizeof(out));
	cr_assert_str_eq(out, "ok nstest|");

	/* / is not the host's. */
	snprintf(marker, sizeof(marker), "/tmp/msb-host-marker-%d", (int)getpid());
	write_text(marker, "host\n");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "stat %s", marker);
	ask(&s, cmd, out, sizeof(out));
	cr_assert_str_eq(out, "err ENOENT", "host marker visible inside: %s", out);
	unlink(marker);
	ask(&s, "stat /etc/shadow", out, sizeof(out));
	cr_assert_str_eq(out, "err ENOENT");
	ask(&s, "sh find /home /root /run /var -mindepth 1 | tr '\\n' ' '", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 /var/tmp ", "nothing of the host's: %s", out);

	/* /usr read-only, the root and /tmp writable. */
	ask(&s, "statfs /usr", out, sizeof(out));
	cr_assert_str_eq(out, "ro nosuid");
	ask(&s, "write /usr/lib/msb-x", out, sizeof(out));
	cr_assert_str_eq(out, "err EROFS");
	ask(&s, "write /tmp/x", out, sizeof(out));
	cr_assert_str_eq(out, "ok");
	ask(&s, "statfs /", out, sizeof(out));
	cr_assert_str_eq(out, "rw nosuid");

	/* /proc: fresh, masked, partly read-only; no host process visible. */
	ask(&s, "procpids", out, sizeof(out));
	cr_assert_str_eq(out, "1", "only the sandbox's processes in /proc: %s", out);
	snprintf(cmd, sizeof(cmd), "stat /proc/%d", (int)getpid());
	ask(&s, cmd, out, sizeof(out));
	cr_assert_str_eq(out, "err ENOENT");
	ask(&s, "stat /proc/keys", out, sizeof(out));
	cr_assert(strncmp(out, "ok 20", 5) == 0, "/proc/keys is /dev/null: %s", out);
	ask(&s, "read /proc/timer_list", out, sizeof(out));
	cr_assert_str_eq(out, "ok ", "/proc/timer_list masked: %s", out);
	ask(&s, "sh ls -A /proc/acpi /sys/firmware | wc -l", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 3");
	ask(&s, "write /proc/sys/kernel/hostname", out, sizeof(out));
	cr_assert_str_eq(out, "err EROFS");
	ask(&s, "statfs /sys", out, sizeof(out));
	cr_assert_str_eq(out, "ro nosuid");

	/* /dev: minimal. */
	ask(&s, "sh ls /dev | tr '\\n' ' '", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 fd full null ptmx pts random shm stderr stdin stdout tty "
			      "urandom zero ");
	ask(&s, "sh echo hi > /dev/null && head -c 4 /dev/zero | wc -c", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 4");

	/* Ids: guest root is the unprivileged host range. */
	ask(&s, "uid", out, sizeof(out));
	cr_assert_str_eq(out, "0 0");
	ask(&s, "uidmap", out, sizeof(out));
	char want[64];
	snprintf(want, sizeof(want), "0 %u 65536", base);
	char squeezed[128];
	size_t k = 0;
	for (char *p = out; *p && k < sizeof(squeezed) - 1; p++)
		if (!(*p == ' ' && (k == 0 || squeezed[k - 1] == ' ')) && *p != '|')
			squeezed[k++] = *p;
	squeezed[k] = '\0';
	cr_assert_str_eq(squeezed, want);
	ask(&s, "nnp", out, sizeof(out));
	cr_assert_str_eq(out, "1", "no_new_privs set for the init");
	ask(&s, "rlimit", out, sizeof(out));
	cr_assert(strstr(out, "core 0 0"), "%s", out);
	cr_assert(strstr(out, "nofile 4096 4096"), "%s", out);

	/* mount: refused once capabilities are dropped; with them, confined. */
	int before = mounts_mentioning("tmpfs");
	ask(&s, "mount-nocaps", out, sizeof(out));
	cr_assert_str_eq(out, "EPERM");
	ask(&s, "mount-caps", out, sizeof(out));
	cr_assert_str_eq(out, "ok");
	cr_assert_eq(mounts_mentioning("tmpfs"), before, "the guest's mount reached the host");

	/* The work dir is the host's <state>/work, owned by the guest's root. */
	ask(&s, "write /maf-sandbox/work/hello", out, sizeof(out));
	cr_assert_str_eq(out, "ok");
	char path[256];
	snprintf(path, sizeof(path), "%s/work/hello", s.dir);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_uid, base);
	cr_assert_eq(st.st_size, 2);

	/* The init holds only 0-2, the listening socket (3), the synthesized
	 * /etc below the overlay (4, MSB_AGENT_ETC_FD: the `host` image), this
	 * connection (5) and the pipe of this very command (6). */
	ask(&s, "sh ls /proc/1/fd | tr '\\n' ' '", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 0 1 2 3 4 5 6 ", "no fd leaked into the sandbox: %s", out);
	ask(&s, "sh echo $MSB_AGENT_ETC_FD", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 4", "%s", out);

	/* The host's programs run. */
	ask(&s, "sh /bin/echo ok && python3 -c 'print(6*7)'", out, sizeof(out));
	cr_assert_str_eq(out, "status 0 ok|42");

	stop(&s);
	assert_nothing_left(&s);
}

Test(ns, cgroup_limits_applied_and_removed)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "\"memory_bytes\":67108864,\"pids_max\":64,"
					 "\"cpu_millis\":500");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	cr_assert(s.cgroups[0], "a cgroup record is written");
	bool v2 = strstr(s.cgroups, "/unified/") != NULL;
	char rec[1024], val[128], file[1200];
	snprintf(rec, sizeof(rec), "%s", s.cgroups);
	int seen = 0;
	for (char *p = rec; *p;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		char pid[24];
		snprintf(pid, sizeof(pid), "%d\n", (int)s.init);
		snprintf(file, sizeof(file), "%s/cgroup.procs", p);
		read_text(file, val, sizeof(val));
		cr_assert(strstr(val, pid), "init in %s: %s", p, val);
		if (!v2 && strstr(p, "/memory/")) {
			snprintf(file, sizeof(file), "%s/memory.limit_in_bytes", p);
			read_text(file, val, sizeof(val));
			cr_assert_str_eq(val, "67108864\n");
			seen++;
		} else if (!v2 && strstr(p, "/pids/")) {
			snprintf(file, sizeof(file), "%s/pids.max", p);
			read_text(file, val, sizeof(val));
			cr_assert_str_eq(val, "64\n");
			seen++;
		} else if (!v2 && strstr(p, "/cpu/")) {
			snprintf(file, sizeof(file), "%s/cpu.cfs_quota_us", p);
			read_text(file, val, sizeof(val));
			cr_assert_str_eq(val, "50000\n");
			seen++;
		} else if (v2) {
			snprintf(file, sizeof(file), "%s/memory.max", p);
			read_text(file, val, sizeof(val));
			cr_assert_str_eq(val, "67108864\n");
			snprintf(file, sizeof(file), "%s/pids.max", p);
			read_text(file, val, sizeof(val));
			cr_assert_str_eq(val, "64\n");
			seen = 3;
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	cr_assert_eq(seen, 3, "memory, pids and cpu limits read back: %s", s.cgroups);

	/* Inside, the cgroup namespace is rooted at the sandbox's cgroups. */
	char out[4096];
	ask(&s, "cgroup", out, sizeof(out));
	cr_assert(strstr(out, ":pids:/|") && strstr(out, ":memory:/|"), "%s", out);
	/* The pids limit holds: 64 processes at most. */
	ask(&s,
	    "sh python3 -c \"import os,signal;exec('n=0\\nwhile n<100:\\n try: p=os.fork()\\n "
	    "except OSError: break\\n if p==0: os.close(1);os.close(2);signal.pause()\\n "
	    "n+=1\\nprint(n)')\"",
	    out, sizeof(out));
	int n = (int)strtol(out + 9, NULL, 10);
	cr_assert(strncmp(out, "status 0 ", 9) == 0 && n > 10 && n < 64, "pids.max holds: %s", out);

	stop(&s);
	assert_nothing_left(&s);
}

Test(ns, cgroup_v2_clone_into_cgroup)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "\"cgroup\":\"v2\"");
	uint32_t base = s.uid_base;
	bool ok = start(&s, cfg);
	free(cfg);
	if (!ok) {
		unlink(s.cfg);
		rmdir(s.dir);
		waitpid(s.shim, NULL, 0);
		cr_skip_test("no usable cgroup v2 here: %s", s.ready);
	}
	s.uid_base = base;
	cr_assert(s.cgroups[0]);
	char file[1200], val[256], out[1024];
	char rec[1024];
	snprintf(rec, sizeof(rec), "%s", s.cgroups);
	char *nl = strchr(rec, '\n');
	if (nl)
		*nl = '\0';
	snprintf(file, sizeof(file), "%s/cgroup.procs", rec);
	read_text(file, val, sizeof(val));
	char pid[24];
	snprintf(pid, sizeof(pid), "%d\n", (int)s.init);
	cr_assert(strstr(val, pid), "CLONE_INTO_CGROUP placed the init: %s", val);
	ask(&s, "cgroup", out, sizeof(out));
	cr_assert(strstr(out, "0::/|"), "%s", out);
	stop(&s);
	assert_nothing_left(&s);
}

Test(ns, init_exit_makes_the_shim_clean_up)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "\"pids_max\":32");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	char out[256];
	ask(&s, "sleeper", out, sizeof(out));
	cr_assert(strtol(out, NULL, 10) > 1);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", s.dir);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	keep_a_file(&s);
	cr_assert_eq(write(fd, "exit 3\n", 7), 7);
	close(fd);
	int status = 0;
	cr_assert_eq(waitpid(s.shim, &status, 0), s.shim);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(s.cfg);
	assert_dead_then_purge(&s, "exited with status 3");
}

Test(ns, killing_init_from_the_host)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	char out[256];
	ask(&s, "sleeper", out, sizeof(out));
	keep_a_file(&s);
	cr_assert_eq(kill(s.init, SIGKILL), 0);
	int status = 0;
	cr_assert_eq(waitpid(s.shim, &status, 0), s.shim);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(s.cfg);
	assert_dead_then_purge(&s, "was killed by signal 9");
}

Test(ns, sigkill_of_the_shim_then_purge)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "\"memory_bytes\":67108864");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	char out[256];
	ask(&s, "sleeper", out, sizeof(out));
	cr_assert_eq(kill(s.shim, SIGKILL), 0);
	cr_assert_eq(waitpid(s.shim, NULL, 0), s.shim);
	/* The parent-death signal takes the pid namespace down with the shim. */
	cr_assert(wait_gone(s.init, 2000), "the init outlived a SIGKILLed shim");
	cr_assert_eq(mounts_mentioning("msb-nstest"), 0);
	/* What remains on disk (socket, work, cgroups) is for purge. */
	msb_error *e = NULL;
	int r = msb_ns__state_purge(s.dir, true, 2000, &e);
	cr_assert_eq(r, 0, "purge: %s", msb_error_message(e));
	unlink(s.cfg);
	assert_nothing_left(&s);
}

Test(ns, purge_takes_down_a_live_sandbox)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "\"pids_max\":32");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	char out[256];
	ask(&s, "sleeper", out, sizeof(out));
	/* Another process (not the shim's parent) purges: the shim gets SIGTERM,
	 * tears down, and purge removes the rest, directory included. */
	pid_t child = fork();
	if (child == 0) {
		int r = msb_ns__state_purge(s.dir, true, 2000, NULL);
		_exit(r == 0 ? 0 : 1);
	}
	int status = 0;
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "purge failed");
	cr_assert_eq(waitpid(s.shim, &status, 0), s.shim);
	unlink(s.cfg);
	assert_nothing_left(&s);
}

Test(ns, survives_its_starter)
{
	/* The orphaned shim is re-parented to us, so that we can reap it. */
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	struct sbx s;
	memset(&s, 0, sizeof(s));
	snprintf(s.dir, sizeof(s.dir), "/tmp/msb-nstest-XXXXXX");
	cr_assert(mkdtemp(s.dir));
	cr_assert(n_started < MAX_STARTED);
	struct started *rec = &started[n_started++];
	snprintf(rec->dir, sizeof(rec->dir), "%s", s.dir);
	snprintf(s.cfg, sizeof(s.cfg), "%s.json", s.dir);
	snprintf(rec->cfg, sizeof(rec->cfg), "%s", s.cfg);
	s.uid_base = unique_base();
	char *cfg = msb__asprintf("{\"uid_base\":%u}", s.uid_base);
	write_text(s.cfg, cfg);
	free(cfg);
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t starter = fork();
	if (starter == 0) {
		/* Start the shim, wait for its verdict, and go away. */
		pid_t shim = fork();
		if (shim == 0) {
			dup2(p[1], 3);
			execl(shim_path(), "msb-shim", "--state", s.dir, "--agent", init_path(),
			      "--config", s.cfg, "--ready-fd", "3", "--remove-state-dir",
			      (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		char b[8] = "";
		ssize_t n = read(p[0], b, 3);
		_exit(n == 3 && strncmp(b, "ok\n", 3) == 0 ? 0 : 1);
	}
	close(p[1]);
	int status = 0;
	cr_assert_eq(waitpid(starter, &status, 0), starter);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the shim did not report ok");
	close(p[0]);
	int dfd = open(s.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t st;
	cr_assert_eq(msb_ns__read_pid_file(dfd, MSB_NS_STATE_SHIM_PID, &s.shim, &st), 0);
	cr_assert_eq(msb_ns__read_pid_file(dfd, MSB_NS_STATE_INIT_PID, &s.init, &st), 0);
	close(dfd);
	rec->shim = s.shim;
	char out[64];
	ask(&s, "ping", out, sizeof(out));
	cr_assert_str_eq(out, "pong", "the sandbox outlived the process that started it");
	stop(&s);
	assert_nothing_left(&s);
}

Test(ns, unprivileged_one_id_mapping)
{
	struct sbx s;
	cr_assert(start_as(&s, "{\"image\":\"host\"}", 65534), "shim as nobody: %s", s.ready);
	char out[1024];
	ask(&s, "uid", out, sizeof(out));
	cr_assert_str_eq(out, "0 0");
	ask(&s, "uidmap", out, sizeof(out));
	cr_assert(strstr(out, " 0 ") && strstr(out, "65534") && strstr(out, " 1|"), "%s", out);
	ask(&s, "ifaces", out, sizeof(out));
	cr_assert_str_eq(out, "lo");
	ask(&s, "write /maf-sandbox/work/f", out, sizeof(out));
	cr_assert_str_eq(out, "ok");
	char path[256];
	snprintf(path, sizeof(path), "%s/work/f", s.dir);
	struct stat st;
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_uid, 65534u);
	ask(&s, "sh mkdir -p /maf-sandbox/work/d/e && chmod 000 /maf-sandbox/work/d", out,
	    sizeof(out));
	cr_assert_str_eq(out, "status 0 ");
	stop(&s);
	s.uid_base = 0;
	assert_nothing_left(&s);
}

Test(ns, unprivileged_limits_fail_closed)
{
	struct sbx s;
	bool ok = start_as(&s, "{\"image\":\"host\",\"pids_max\":16}", 65534);
	waitpid(s.shim, NULL, 0);
	cr_assert_not(ok, "limits without a delegated cgroup must refuse");
	cr_assert(strncmp(s.ready, "error: ", 7) == 0 && strstr(s.ready, "cgroup"), "%s", s.ready);
	unlink(s.cfg);
	rmdir(s.dir);
	cr_assert(access(s.dir, F_OK) < 0);
}

Test(ns, dir_image_overlay)
{
	char img[] = "/tmp/msb-nstest-img-XXXXXX";
	cr_assert(mkdtemp(img));
	snprintf(image_dir, sizeof(image_dir), "%s", img);
	cr_assert_eq(chmod(img, 0755), 0);
	char path[256];
	snprintf(path, sizeof(path), "%s/image-marker", img);
	write_text(path, "from-image\n");
	struct sbx s;
	char *cfg = msb__asprintf("{\"image\":\"dir:%s\",\"uid_base\":%u}", img, unique_base());
	uint32_t base = unique_base();
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	char out[1024];
	ask(&s, "read /image-marker", out, sizeof(out));
	cr_assert_str_eq(out, "ok from-image|");
	ask(&s, "stat /usr", out, sizeof(out));
	cr_assert_str_eq(out, "err ENOENT", "the host's /usr is not in a dir image");
	ask(&s, "write /new-file", out, sizeof(out));
	cr_assert_str_eq(out, "ok");
	ask(&s, "procpids", out, sizeof(out));
	cr_assert_str_eq(out, "1");
	ask(&s, "ifaces", out, sizeof(out));
	cr_assert_str_eq(out, "lo");
	snprintf(path, sizeof(path), "%s/new-file", img);
	cr_assert(access(path, F_OK) < 0, "writes land in the upper layer, not the image");
	stop(&s);
	assert_nothing_left(&s);
	snprintf(path, sizeof(path), "%s/image-marker", img);
	char buf[64];
	read_text(path, buf, sizeof(buf));
	cr_assert_str_eq(buf, "from-image\n");
	unlink(path);
	rmdir(img);
}

static void expect_refusal(const char *config, const char *phrase)
{
	struct sbx s;
	bool ok = start(&s, config);
	waitpid(s.shim, NULL, 0);
	cr_assert_not(ok, "%s should be refused", config);
	cr_assert(strncmp(s.ready, "error: ", 7) == 0 && strstr(s.ready, phrase),
		  "%s -> %s (want `%s`)", config, s.ready, phrase);
	unlink(s.cfg);
	rmdir(s.dir);
}

Test(ns, config_is_strict)
{
	expect_refusal("{\"image\":\"host\",\"colour\":1}", "unknown key `colour`");
	expect_refusal("{\"image\":\"oci:/x\"}", "oci images are not supported");
	expect_refusal("{\"image\":\"dir:relative\"}", "absolute");
	expect_refusal("{\"image\":\"dir:/\"}", "use the `host` image");
	expect_refusal("{\"egress\":\"allowlist\"}", "cannot enforce the `allowlist` egress");
	expect_refusal("{\"hostname\":\"bad name\"}", "not a valid host name");
	expect_refusal("{\"work_dir\":\"/usr/w\"}", "which the boundary owns");
	expect_refusal("{\"memory_bytes\":\"lots\"}", "must be an integer");
	expect_refusal("{\"cgroup\":\"v3\"}", "not one of auto, v1, v2, none");
	expect_refusal("{\"rlimits\":{\"nofile\":-1}}", "must not be negative");
	expect_refusal("[1]", "must be a JSON object");
}

Test(ns, one_shim_per_state_dir)
{
	struct sbx s;
	char *cfg = config_with_base(&s, "");
	uint32_t base = s.uid_base;
	cr_assert(start(&s, cfg), "shim: %s", s.ready);
	s.uid_base = base;
	free(cfg);
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t second = fork();
	if (second == 0) {
		dup2(p[1], 3);
		execl(shim_path(), "msb-shim", "--state", s.dir, "--agent", init_path(), "--config",
		      s.cfg, "--ready-fd", "3", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[512] = "";
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	waitpid(second, NULL, 0);
	buf[n > 0 ? n : 0] = '\0';
	cr_assert(strstr(buf, "already holds"), "%s", buf);
	char out[64];
	ask(&s, "ping", out, sizeof(out));
	cr_assert_str_eq(out, "pong", "the first sandbox is untouched");
	stop(&s);
	assert_nothing_left(&s);
}

Test(ns, doctor_reports_this_host)
{
	msb_ns_doctor *d = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_ns__doctor(&d, &e), 0);
	const char *want[] = {"clone3",		  "pidfd",	  "openat2",
			      "mount_api",	  "userns.root",  "userns.unprivileged",
			      "overlayfs.userns", "sandbox.host", "cgroup.v2",
			      "cgroup.v1",	  "seccomp",	  "seccomp.user_notif",
			      "landlock"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		bool found = false;
		for (size_t j = 0; j < d->n_probes; j++)
			if (strcmp(d->probes[j].name, want[i]) == 0) {
				found = true;
				cr_assert(d->probes[j].reason && d->probes[j].reason[0]);
			}
		cr_assert(found, "probe %s", want[i]);
	}
	/* Only the ns verdict: other backends' are their own types' doctors. */
	cr_assert(d->ok, "the ns backend works on this host: %s", d->reason);
	cr_assert(d->reason && strstr(d->reason, "container rung"), "%s", d->reason);
	for (size_t j = 0; j < d->n_probes; j++)
		cr_assert_str_neq(d->probes[j].name, "kvm", "no probe for a backend ns is not");
	msb_ns__doctor_free(d);
	cr_assert_eq(mounts_mentioning("msb-doctor"), 0);
}

/* Issue 15 finding 5: a zombie is dead. A killed shim that its parent has
 * not reaped keeps its pid and start time; liveness must not call it
 * alive. */
Test(ns, a_zombie_is_not_alive)
{
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	uint64_t start = 0;
	cr_assert_eq(msb_ns__proc_start_time(child, &start), 0);
	int fd = msb_ns__pidfd_if_same(child, start);
	cr_assert_geq(fd, 0, "a live child is alive");
	close(fd);
	cr_assert_eq(msb_ns__pidfd_if_same(child, start + 1), -ESRCH, "another start time");
	cr_assert_eq(kill(child, SIGKILL), 0);
	siginfo_t si;
	/* Wait until it is a zombie, without reaping it. */
	cr_assert_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
	char state = 0;
	cr_assert_eq(msb_ns__proc_stat(child, &state, &start), 0);
	cr_assert_eq(state, 'Z');
	cr_assert_eq(msb_ns__pidfd_if_same(child, start), -ESRCH, "a zombie counts as alive");
	waitpid(child, NULL, 0);
}
