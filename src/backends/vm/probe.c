/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the `vm` backend needs on the host, found and proved: qemu, the guest
 * kernel and its modules, mkfs.erofs, the TSC rate a TCG guest is told, and
 * whether hardware-assisted KVM really boots a guest (not whether /dev/kvm
 * opens: on a nested, paravirtual KVM without VT-x it opens and a guest
 * never reaches its init).
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "util/fs.h"
#include "vm_int.h"

#define PROBE_MARKER "msb-vm-probe: init reached"

static char *first_exec(const char *const *cands)
{
	for (size_t i = 0; cands[i]; i++)
		if (access(cands[i], X_OK) == 0)
			return strdup(cands[i]);
	return NULL;
}

/* The newest /boot/vmlinuz-*-cloud-amd64 (any vmlinuz-* when there is no
 * cloud kernel) whose /lib/modules/<version> exists. */
static char *find_kernel(void)
{
	DIR *d = opendir("/boot");
	if (!d)
		return NULL;
	char *best = NULL;
	bool best_cloud = false;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "vmlinuz-", 8) != 0)
			continue;
		_cleanup_free_ char *mods = msb__asprintf("/lib/modules/%s", de->d_name + 8);
		if (!mods || access(mods, R_OK) != 0)
			continue;
		bool cloud = strstr(de->d_name, "-cloud-") != NULL;
		if (best && (best_cloud && !cloud))
			continue;
		if (best && best_cloud == cloud && strverscmp(de->d_name, best) <= 0)
			continue;
		free(best);
		best = strdup(de->d_name);
		best_cloud = cloud;
	}
	closedir(d);
	if (!best)
		return NULL;
	char *path = msb__asprintf("/boot/%s", best);
	free(best);
	return path;
}

static uint64_t measure_tsc_khz(void)
{
#if defined(__x86_64__)
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC_RAW, &a);
	uint64_t t0 = __builtin_ia32_rdtsc();
	struct timespec nap = {0, 20 * 1000 * 1000};
	nanosleep(&nap, NULL);
	clock_gettime(CLOCK_MONOTONIC_RAW, &b);
	uint64_t t1 = __builtin_ia32_rdtsc();
	int64_t ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
	if (ns <= 0 || t1 <= t0)
		return 0;
	/* Rounded to 1 MHz: the kernel only needs it close. */
	uint64_t khz = (uint64_t)((double)(t1 - t0) * 1e6 / (double)ns);
	return (khz + 500) / 1000 * 1000;
#else
	return 0;
#endif
}

void msb_vm__host_clear(msb_vm_host *h)
{
	free(h->qemu);
	free(h->qemu_kvm);
	free(h->kernel);
	free(h->modules_dir);
	free(h->mkfs_erofs);
	memset(h, 0, sizeof(*h));
}

int msb_vm__host_find(const msb_vm_options *o, msb_vm_host *h, msb_error **err)
{
	_cleanup_free_ char *dep = NULL; /* before any goto: clang checks the jumps */
	memset(h, 0, sizeof(*h));
	static const char *const qemus[] = {"/usr/bin/qemu-system-x86_64",
					    "/usr/local/bin/qemu-system-x86_64", NULL};
	static const char *const mkfs[] = {"/usr/bin/mkfs.erofs", "/usr/sbin/mkfs.erofs",
					   "/sbin/mkfs.erofs", NULL};
	h->qemu = o->qemu_path ? strdup(o->qemu_path) : first_exec(qemus);
	if (!h->qemu || access(h->qemu, X_OK) != 0) {
		msb_vm__host_clear(h);
		return msb_error_set(
			err, MSB_E_VALUE,
			"vm: no qemu-system-x86_64 (install Debian's qemu-system-x86)");
	}
	/* Debian's smaller qemu-system-x86_64-microvm is built without seccomp
	 * (`-sandbox` is refused): the full binary serves KVM too. */
	if (!(h->qemu_kvm = strdup(h->qemu)))
		goto nomem;
	h->kernel = o->kernel_path ? strdup(o->kernel_path) : find_kernel();
	if (!h->kernel || access(h->kernel, R_OK) != 0) {
		msb_vm__host_clear(h);
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: no guest kernel (install Debian's "
				     "linux-image-cloud-amd64, or name one)");
	}
	if (o->modules_dir) {
		h->modules_dir = strdup(o->modules_dir);
	} else {
		const char *base = strrchr(h->kernel, '/');
		base = base ? base + 1 : h->kernel;
		if (strncmp(base, "vmlinuz-", 8) != 0) {
			msb_vm__host_clear(h);
			return msb_error_set(err, MSB_E_VALUE,
					     "vm: cannot tell the version of kernel `%s`: name its "
					     "modules directory",
					     o->kernel_path);
		}
		h->modules_dir = msb__asprintf("/lib/modules/%s", base + 8);
	}
	if (!h->modules_dir)
		goto nomem;
	dep = msb__asprintf("%s/modules.dep", h->modules_dir);
	if (!dep)
		goto nomem;
	if (access(dep, R_OK) != 0) {
		msb_error_set(err, MSB_E_VALUE, "vm: no `%s` for the guest kernel `%s`", dep,
			      h->kernel);
		msb_vm__host_clear(h);
		return MSB_E_VALUE;
	}
	h->mkfs_erofs = first_exec(mkfs);
	if (!h->mkfs_erofs) {
		msb_vm__host_clear(h);
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: no mkfs.erofs (install Debian's erofs-utils)");
	}
	return 0;
nomem:
	msb_vm__host_clear(h);
	return msb__error_nomem(err);
}

/* "dev:ino:size:mtime" of a file: what the cached answer is valid for. */
static void file_id(const char *path, char *out, size_t size)
{
	struct stat st;
	if (stat(path, &st) < 0)
		snprintf(out, size, "absent");
	else
		snprintf(out, size, "%llu:%llu:%lld:%lld", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino, (long long)st.st_size,
			 (long long)st.st_mtime);
}

static char *probe_key(const msb_vm_host *h, const char *initramfs)
{
	_cleanup_free_ char *boot = NULL;
	msb__read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &boot, NULL);
	if (boot && strchr(boot, '\n'))
		*strchr(boot, '\n') = '\0';
	char q[128], k[128], i[128];
	file_id(h->qemu_kvm, q, sizeof(q));
	file_id(h->kernel, k, sizeof(k));
	file_id(initramfs, i, sizeof(i));
	return msb__asprintf("boot %s qemu %s kernel %s initramfs %s", boot ? boot : "?", q, k, i);
}

/* Boot the probe guest under KVM; true when its marker shows in time. */
static bool boot_probe(const msb_vm_host *h, const char *initramfs, double deadline, char *why,
		       size_t size)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0) {
		snprintf(why, size, "/dev/kvm: %s", strerror(errno));
		return false;
	}
	close(kvm);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, size, "pipe: %s", strerror(errno));
		return false;
	}
	const char *argv[] = {
		h->qemu_kvm,
		"-M",
		"microvm",
		"-accel",
		"kvm",
		"-cpu",
		"host",
		"-m",
		"128M",
		"-no-user-config",
		"-nodefaults",
		"-display",
		"none",
		"-serial",
		"stdio",
		"-no-reboot",
		"-kernel",
		h->kernel,
		"-initrd",
		(char *)initramfs,
		"-append",
		"console=ttyS0 quiet panic=-1 -- --vm --probe",
		"-sandbox",
		"on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		NULL};
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		snprintf(why, size, "fork: %s", strerror(errno));
		return false;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(p[1], 1);
		dup2(p[1], 2);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		extern char **environ;
		execve(argv[0], (char *const *)argv, environ);
		_exit(127);
	}
	close(p[1]);
	char buf[8192];
	size_t len = 0;
	bool ok = false;
	int64_t until = msb__now_ns() + (int64_t)(deadline * 1e9);
	while (!ok) {
		int64_t left = (until - msb__now_ns()) / 1000000;
		if (left <= 0)
			break;
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		if (poll(&pf, 1, (int)left) <= 0)
			continue;
		if (len == sizeof(buf) - 1) {
			memmove(buf, buf + len / 2, len - len / 2);
			len -= len / 2;
		}
		ssize_t n = read(p[0], buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		ok = strstr(buf, PROBE_MARKER) != NULL;
	}
	close(p[0]);
	kill(pid, SIGKILL);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (ok)
		snprintf(why, size, "a guest booted to its init under accel=kvm");
	else if (msb__now_ns() >= until)
		snprintf(why, size,
			 "/dev/kvm opens, but a guest did not reach its init within %g s under "
			 "accel=kvm (no hardware virtualisation: nested or emulated KVM)",
			 deadline);
	else
		snprintf(why, size,
			 "qemu under accel=kvm exited before the guest's init (status "
			 "0x%x)",
			 (unsigned)status);
	return ok;
}

int msb_vm__kvm_probe(const msb_vm_host *h, const char *cache, const char *initramfs,
		      double deadline, bool *ok, char **why, msb_error **err)
{
	_cleanup_free_ char *key = probe_key(h, initramfs);
	_cleanup_free_ char *path = msb__asprintf("%s/kvm-probe", cache);
	if (!key || !path)
		return msb__error_nomem(err);
	_cleanup_free_ char *cached = NULL;
	if (msb__read_file_at(AT_FDCWD, path, 4096, &cached, NULL) == 0) {
		/* "KEY\nok|no\nWHY" */
		size_t kl = strlen(key);
		if (strncmp(cached, key, kl) == 0 && cached[kl] == '\n') {
			const char *rest = cached + kl + 1;
			const char *nl = strchr(rest, '\n');
			if (nl) {
				*ok = strncmp(rest, "ok", 2) == 0;
				*why = msb__asprintf("%s (probed earlier this boot)", nl + 1);
				return *why ? 0 : msb__error_nomem(err);
			}
		}
	}
	char reason[512];
	*ok = boot_probe(h, initramfs, deadline, reason, sizeof(reason));
	_cleanup_free_ char *text = msb__asprintf("%s\n%s\n%s", key, *ok ? "ok" : "no", reason);
	if (!text || !(*why = strdup(reason)))
		return msb__error_nomem(err);
	int r = msb__mkdir_p(cache, 0755);
	if (r == 0) {
		_cleanup_close_ int dfd = open(cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0)
			msb__write_file_atomic_at(dfd, "kvm-probe", text, strlen(text), 0644);
	}
	return 0;
}

int msb_vm__tsc_khz(const char *cache, uint64_t *out)
{
	/* Measured once per host boot and kept: the rate is part of a VM's
	 * configuration, and a warm VM is reused only with the same one. */
	_cleanup_free_ char *boot = NULL;
	msb__read_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", 64, &boot, NULL);
	if (boot && strchr(boot, '\n'))
		*strchr(boot, '\n') = '\0';
	_cleanup_free_ char *path = msb__asprintf("%s/tsc-khz", cache);
	if (!path)
		return -ENOMEM;
	_cleanup_free_ char *text = NULL;
	if (boot && msb__read_file_at(AT_FDCWD, path, 256, &text, NULL) == 0) {
		size_t bl = strlen(boot);
		if (strncmp(text, boot, bl) == 0 && text[bl] == ' ') {
			char *end;
			unsigned long long v = strtoull(text + bl + 1, &end, 10);
			if (end != text + bl + 1) {
				*out = v;
				return 0;
			}
		}
	}
	*out = measure_tsc_khz();
	if (boot && msb__mkdir_p(cache, 0755) == 0) {
		_cleanup_free_ char *line =
			msb__asprintf("%s %llu\n", boot, (unsigned long long)*out);
		_cleanup_close_ int dfd = open(cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (line && dfd >= 0)
			msb__write_file_atomic_at(dfd, "tsc-khz", line, strlen(line), 0644);
	}
	return 0;
}
