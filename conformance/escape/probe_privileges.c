/* SPDX-License-Identifier: Apache-2.0 */
/* msb-escape-probe's probes of devices, privileges, time and hostname (docs/security.md). */
#include "probe.h"

/* ---- devices, privileges --------------------------------------------------------------- */

void p_mknod(const struct ctx *c, struct res *r)
{
	long rc = mknod("/tmp/msb-escape-sda", S_IFBLK | 0600, makedev(8, 0));
	if (rc == 0)
		unlink("/tmp/msb-escape-sda");
	must_fail(r, rc, "mknod a block device");
}

void p_dev_nodes(const struct ctx *c, struct res *r)
{
	const char *nodes[] = {"/dev/mem",     "/dev/kmem",    "/dev/port", "/dev/sda",
			       "/dev/vda",     "/dev/nvme0n1", "/dev/kvm",  "/dev/fuse",
			       "/dev/net/tun", "/dev/dm-0"};
	char opened[512] = "";
	size_t len = 0;
	/* Every node is tried, so that the host sees all that open. */
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		int fd = open(nodes[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		close(fd);
		int w = snprintf(opened + len, sizeof(opened) - len, "%s`%s`", len ? ", " : "",
				 nodes[i]);
		if (w > 0 && (size_t)w < sizeof(opened) - len)
			len += (size_t)w;
	}
	if (len)
		set(r, "escaped", "opened %s", opened);
	else
		set(r, "blocked", "no host device node opens (/dev/mem, disks, kvm, fuse, tun)");
}

bool status_field(const char *key, char *out, size_t size)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	size_t kl = strlen(key);
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			char *v = line + kl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, size, "%s", v);
			found = true;
		}
	}
	fclose(f);
	return found;
}

void p_caps(const struct ctx *c, struct res *r)
{
	const char *keys[] = {"CapEff", "CapPrm", "CapBnd", "CapAmb", "CapInh"};
	for (size_t i = 0; i < 5; i++) {
		char v[64] = "";
		if (!status_field(keys[i], v, sizeof(v)) && strcmp(keys[i], "CapAmb") == 0) {
			/* A kernel whose status has no ambient set (gVisor's): ask it
			 * one capability at a time. */
			for (int cap = 0; cap < 64; cap++) {
				int set_ = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
				if (set_ < 0)
					break; /* past the last capability */
				if (set_ == 1) {
					set(r, "escaped", "ambient capability %d is set", cap);
					return;
				}
			}
			continue;
		}
		if (!v[0]) {
			set(r, "error", "no %s in /proc/self/status", keys[i]);
			return;
		}
		if (strspn(v, "0") != strlen(v)) {
			set(r, "escaped", "%s is %s", keys[i], v);
			return;
		}
	}
	set(r, "blocked", "every capability set is empty, the bounding set included");
}

void p_nnp(const struct ctx *c, struct res *r)
{
	int v = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (v == 1)
		set(r, "blocked", "no_new_privs is set: a setuid binary gains nothing");
	else
		set(r, "escaped", "no_new_privs is %d: a setuid binary would raise privileges", v);
}

void p_setuid_bin(const struct ctx *c, struct res *r)
{
	/* Make a setuid copy of ourselves and check the kernel does not grant it. */
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		set(r, "error", "readlink /proc/self/exe: %s", errname(errno));
		return;
	}
	self[n] = '\0';
	if (chmod(self, 04755) < 0) {
		set(r, "blocked", "chmod u+s: %s", errname(errno));
		return;
	}
	int pipefd[2];
	if (pipe(pipefd) < 0) {
		set(r, "error", "pipe: %s", errname(errno));
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(pipefd[1], 1);
		char *argv[] = {self, (char *)"--caps-only", NULL};
		execv(self, argv);
		_exit(127);
	}
	close(pipefd[1]);
	char buf[128] = {0};
	ssize_t got = read(pipefd[0], buf, sizeof(buf) - 1);
	close(pipefd[0]);
	waitpid(pid, NULL, 0);
	chmod(self, 0755);
	if (got <= 0)
		set(r, "error", "the setuid copy printed nothing");
	else if (strspn(buf, "0\n") == strlen(buf))
		set(r, "blocked", "a setuid-root binary ran with no capabilities");
	else
		set(r, "escaped", "a setuid-root binary ran with CapEff %s", buf);
}

void p_seccomp(const struct ctx *c, struct res *r)
{
	char v[16] = "";
	if (status_field("Seccomp", v, sizeof(v)) && strcmp(v, "2") == 0)
		set(r, "blocked", "a seccomp filter is installed");
	else
		set(r, "escaped", "Seccomp is `%s`: no filter", v);
}

/* ---- time and hostname ------------------------------------------------------------------ */

void p_settimeofday(const struct ctx *c, struct res *r)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	tv.tv_sec += 3600;
	must_fail(r, settimeofday(&tv, NULL), "settimeofday(+1 h)");
}

void p_clock_settime(const struct ctx *c, struct res *r)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3600;
	must_fail(r, clock_settime(CLOCK_REALTIME, &ts), "clock_settime(+1 h)");
}

void p_adjtimex(const struct ctx *c, struct res *r)
{
	struct timex tx = {0};
	tx.modes = ADJ_SETOFFSET;
	tx.time.tv_sec = 3600;
	must_fail(r, adjtimex(&tx), "adjtimex(ADJ_SETOFFSET +1 h)");
}

void p_sethostname(const struct ctx *c, struct res *r)
{
	must_fail(r, sethostname("msb-escaped", 11), "sethostname");
}

void p_setdomainname(const struct ctx *c, struct res *r)
{
	must_fail(r, setdomainname("msb-escaped", 11), "setdomainname");
}
