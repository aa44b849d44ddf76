/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` backend: what it declares (from what the host proved), get-or-
 * create under flock on the key-derived state directory, a per-sandbox
 * msb-vm-shim started detached, disposal selected from labels on disk. The
 * naming, labels and purge are the `ns` backend's (ns_state.h, the ns
 * boundary's state.c): a VM's state directory has the same shape.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <jansson.h>

#include <msb/spec.h>

#include "backends/ns/boundary/boundary.h"
#include "backends/ns/ns_int.h"
#include "backends/ns/ns_state.h"
#include "backends/ns/ns_sweep.h"
#include "backends/types.h"
#include "egress/egress.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/sha256.h"
#include "util/syscalls.h"
#include "vm_backend.h"

#ifndef MSB_LIBEXECDIR
#define MSB_LIBEXECDIR "/usr/local/libexec/msb"
#endif

#define VM_JAIL_ID_BASE 900000000u /* + 16 bits of the name: the VMM's uid and gid */
#define VM_DEFAULT_MEMORY (256ull << 20)
#define VM_DEFAULT_WRITABLE (64ull << 20)
#define VM_VMM_OVERHEAD (192ull << 20) /* the VMM's own memory beside the guest's RAM */
/* Guest RAM beside a spec's memory_bytes: the guest's kernel, init and page
 * tables (the cloud kernel does not reach its init in 64 MiB of RAM). */
#define VM_GUEST_OVERHEAD (64ull << 20)

static const msb_declarations vm_declarations = {
	.version = MSB_DECLARATIONS_VERSION,
	/* The file plane is served by the agent inside the guest (vm_files.c);
	 * reset boots the VM anew; the fingerprint is taken inside the guest
	 * (vm_fingerprint.c). */
	.capabilities = MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST |
			MSB_CAP_FILES_DELETE | MSB_CAP_RECLAIM | MSB_CAP_SNAPSHOT,
	/* Per file: MSB_VM_MAX_FILE_BYTES (vm_files.h). */
	.limits = {{256u << 20, 1u << 30, 4096}, {256u << 20, 1u << 30, 4096}},
	/* The VM has no network device at all; allowlist: the guest agent's
	 * proxy port relayed over the serial mux to the shim's proxy, as on
	 * `ns` (docs/vm.md "Egress"); method tokens are the verbs it enforces. */
	.egress_modes = MSB_EGRESS_CLOSED | MSB_EGRESS_ALLOWLIST,
	.egress_method_tokens = msb_egress__method_tokens,
	.n_egress_method_tokens = MSB_EGRESS_N_METHOD_TOKENS,
	.observes_egress = true,
	.os_families = MSB_OS_POSIX,
	.isolation_scopes = MSB_SCOPE_CONVERSATION | MSB_SCOPE_CALL,
};

/* Programs of the default `host` image. */
static const char *const default_programs[] = {
	"/bin/sh",   "sh",	 "bash",    "env",  "true", "false",	"echo",	   "printf",
	"cat",	     "ls",	 "cp",	    "mv",   "rm",   "mkdir",	"rmdir",   "ln",
	"touch",     "head",	 "tail",    "wc",   "sort", "uniq",	"cut",	   "tr",
	"tee",	     "grep",	 "sed",	    "stat", "id",   "uname",	"date",	   "sleep",
	"dd",	     "find",	 "xargs",   "test", "expr", "basename", "dirname", "readlink",
	"realpath",  "chmod",	 "pwd",	    "kill", "yes",  "mkfifo",	"seq",	   "md5sum",
	"sha256sum", "hostname", "python3", NULL};

static char *pick_path(const char *given, const char *env, const char *installed)
{
	if (given && *given)
		return strdup(given);
	const char *e = getenv(env);
	if (e && *e)
		return strdup(e);
	return msb__asprintf("%s/%s", MSB_LIBEXECDIR, installed);
}

void msb_vm__backend_clear(vm_backend *b)
{
	free(b->name);
	free(b->state_root);
	free(b->state_dir);
	free(b->cache_dir);
	free(b->shim_path);
	free(b->agent_path);
	free(b->initramfs);
	free(b->disk);
	free(b->accel_why);
	free(b->egress_config);
	msb_vm__host_clear(&b->host);
	if (b->ram_fd >= 0)
		close(b->ram_fd);
	pthread_mutex_destroy(&b->ram_lock);
	memset(b, 0, sizeof(*b));
	b->ram_fd = -1;
}

/* <root>/vm and <root>/vm-cache, the root resolved as on `ns`. */
static int state_dirs(const msb_vm_options *o, vm_backend *b, msb_error **err)
{
	_cleanup_free_ char *ns = NULL;
	int r = msb_ns__state_dir(o->state_root, &ns, err);
	if (r < 0)
		return r;
	size_t len = strlen(ns);
	ns[len - 3] = '\0'; /* strip "/ns" */
	b->state_dir = msb__asprintf("%s/vm", ns);
	b->state_root = strdup(ns);
	b->cache_dir = o->cache_dir ? strdup(o->cache_dir) : msb__asprintf("%s/vm-cache", ns);
	if (!b->state_dir || !b->state_root || !b->cache_dir)
		return msb__error_nomem(err);
	if (o->cache_dir && o->cache_dir[0] != '/')
		return msb_error_set(err, MSB_E_VALUE, "vm: cache_dir `%s` must be absolute",
				     o->cache_dir);
	return 0;
}

int msb_vm__backend_init(vm_backend *b, const msb_vm_options *opts, bool build, msb_error **err)
{
	msb_vm_options defaults = MSB_VM_OPTIONS_INIT;
	const msb_vm_options *o = opts ? opts : &defaults;
	if (o->version != MSB_VM_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "vm options: unsupported version %u",
				     o->version);
	memset(b, 0, sizeof(*b));
	b->ram_fd = -1;
	pthread_mutex_init(&b->ram_lock, NULL);
	int r = 0;
	b->name = strdup(o->name ? o->name : "vm");
	b->shim_path = pick_path(o->shim_path, "MSB_VM_SHIM", "msb-vm-shim");
	b->agent_path = pick_path(o->agent_path, "MSB_AGENT", "msb-agent");
	if (!b->name || !b->shim_path || !b->agent_path)
		r = msb__error_nomem(err);
	if (r == 0)
		r = state_dirs(o, b, err);
	const char *image = o->image ? o->image : "host";
	if (r == 0 && strcmp(image, "host") != 0 && strncmp(image, "dir:/", 5) != 0 &&
	    strncmp(image, "oci:", 4) != 0)
		r = msb_error_set(
			err, MSB_E_VALUE,
			"vm image `%s`: expected `host`, `dir:/PATH` or `oci:/PATH[:TAG]`", image);
	const char *accel = o->accel ? o->accel : "auto";
	if (r == 0 && strcmp(accel, "auto") && strcmp(accel, "kvm") && strcmp(accel, "tcg"))
		r = msb_error_set(err, MSB_E_VALUE,
				  "vm: accel `%s`: expected `auto`, `kvm` or `tcg`", accel);
	b->memory_bytes = o->memory_bytes ? o->memory_bytes : VM_DEFAULT_MEMORY;
	b->vcpus = o->vcpus ? o->vcpus : 1;
	b->writable_bytes = o->writable_bytes ? o->writable_bytes : VM_DEFAULT_WRITABLE;
	b->pids_max = o->pids_max ? o->pids_max : 64;
	b->cpu_millis = o->cpu_millis ? o->cpu_millis : 1000ull * b->vcpus;
	b->start_timeout = o->start_timeout > 0 ? o->start_timeout : 120.0;
	b->snapshots = o->snapshots >= 0; /* on unless turned off */
	if (r == 0 && o->egress_config) {
		r = msb_ns__egress_check_config(o->egress_config, err);
		if (r < 0)
			msb_error_wrap(err, "vm");
		else if (!(b->egress_config = strdup(o->egress_config)))
			r = msb__error_nomem(err);
	}
	double probe_timeout = o->kvm_probe_timeout > 0 ? o->kvm_probe_timeout : 5.0;
	if (r == 0 && (b->memory_bytes < (64ull << 20) || b->memory_bytes > (1ull << 40)))
		r = msb_error_set(err, MSB_E_VALUE, "vm: memory_bytes must be 64 MiB..1 TiB");
	if (r == 0 && b->vcpus > 64)
		r = msb_error_set(err, MSB_E_VALUE, "vm: vcpus must be 1..64");
	if (r == 0 && b->writable_bytes < (1ull << 20))
		r = msb_error_set(err, MSB_E_VALUE, "vm: writable_bytes must be at least 1 MiB");
	if (r == 0)
		r = msb_vm__host_find(o, &b->host, err);
	if (r == 0 && build && msb_vm__tsc_khz(b->cache_dir, &b->host.tsc_khz) < 0)
		r = msb__error_nomem(err);
	if (r == 0 && build)
		r = msb_vm__initramfs(b->cache_dir, b->agent_path, b->host.modules_dir,
				      &b->initramfs, err);
	if (r == 0 && build && strncmp(image, "oci:", 4) == 0) {
		r = msb_vm__oci_image(b->cache_dir, b->host.mkfs_erofs, image, &b->disk, &b->layers,
				      err);
	} else if (r == 0 && build && strncmp(image, "dir:", 4) == 0) {
		r = msb_vm__dir_image(b->cache_dir, b->host.mkfs_erofs, image + 4, &b->disk, err);
	} else if (r == 0 && build) {
		char *const *progs =
			(char *const *)(o->host_programs ? o->host_programs : default_programs);
		r = msb_vm__host_image(b->cache_dir, b->host.mkfs_erofs, progs, &b->disk, err);
	}
	/* The rung: from a probe, never from configuration. */
	if (r == 0 && build && strcmp(accel, "tcg") != 0) {
		bool ok = false;
		r = msb_vm__kvm_probe(&b->host, b->cache_dir, b->initramfs, probe_timeout, &ok,
				      &b->accel_why, err);
		if (r == 0) {
			b->kvm = ok;
			if (!ok && strcmp(accel, "kvm") == 0)
				r = msb_error_set(err, MSB_E_VALUE,
						  "vm: accel `kvm` asked, but KVM does not work "
						  "here: %s",
						  b->accel_why);
		}
	} else if (r == 0 && build) {
		b->accel_why = strdup("accel `tcg` configured");
		if (!b->accel_why)
			r = msb__error_nomem(err);
	}
	if (r < 0) {
		msb_vm__backend_clear(b);
		return r;
	}
	return 0;
}

static int random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t buf[32];
	if (nbytes > sizeof(buf))
		return -EINVAL;
	size_t got = 0;
	while (got < nbytes) {
		ssize_t n = getrandom(buf + got, nbytes - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hex[buf[i] >> 4];
		out[2 * i + 1] = hex[buf[i] & 15];
	}
	out[2 * nbytes] = '\0';
	return 0;
}

/* The limits a sandbox of this spec runs with; MSB_E_VALUE past the
 * backend's. */
static int resolve_limits(const vm_backend *b, const msb_spec *spec, uint64_t *memory,
			  uint64_t *memory_max, uint64_t *writable, msb_error **err)
{
	uint64_t m = msb_spec_memory_bytes(spec), w = msb_spec_writable_bytes(spec);
	if (m > b->memory_bytes)
		return msb_error_set(err, MSB_E_VALUE,
				     "resources.memory_bytes: the spec asks for %llu but the `%s` "
				     "backend allows at most %llu",
				     (unsigned long long)m, b->name,
				     (unsigned long long)b->memory_bytes);
	if (w > b->writable_bytes)
		return msb_error_set(err, MSB_E_VALUE,
				     "resources.writable_bytes: the spec asks for %llu but the "
				     "`%s` backend allows at most %llu",
				     (unsigned long long)w, b->name,
				     (unsigned long long)b->writable_bytes);
	if (msb_spec_cpu_millis(spec) > 1000ull * b->vcpus)
		return msb_error_set(err, MSB_E_VALUE,
				     "resources.cpu_millis: the spec asks for %llu but the `%s` "
				     "backend's VMs have %u vCPU(s)",
				     (unsigned long long)msb_spec_cpu_millis(spec), b->name,
				     b->vcpus);
	/* A spec's memory is the guest cgroup's memory.max around the agent
	 * and every workload (as on `ns`); the guest's RAM adds its kernel's
	 * share. Without one the workloads have the whole RAM. */
	*memory_max = m;
	*memory = m ? m + VM_GUEST_OVERHEAD : b->memory_bytes;
	if (*memory < (128ull << 20))
		*memory = 128ull << 20;
	*writable = w ? w : b->writable_bytes;
	/* The layer is a tmpfs in guest RAM: at most half of it. */
	if (*writable > *memory / 2)
		*writable = *memory / 2;
	return 0;
}

int msb_vm__shim_config(const vm_backend *b, const msb_spec *spec, const char *work_dir,
			const char *name, char **out, msb_error **err)
{
	uint64_t memory = 0, memory_max = 0, writable = 0;
	int r = resolve_limits(b, spec, &memory, &memory_max, &writable, err);
	if (r < 0)
		return r;
	char tsc[96] = "";
	if (!b->kvm && b->host.tsc_khz)
		/* TCG: the guest's TSC runs at the host's rate; telling it
		 * spares a calibration that fails on a loaded host. */
		snprintf(tsc, sizeof(tsc), " tsc_early_khz=%llu tsc=reliable",
			 (unsigned long long)b->host.tsc_khz);
	/* pids_max, cpu_millis and memory: the guest's own cgroup around its
	 * agent and workloads (vm_init.c); 0 = none. */
	_cleanup_free_ char *cmdline = msb__asprintf(
		"console=ttyS0 quiet panic=-1%s -- --vm --work %s --hostname %s "
		"--writable-bytes %llu --layers %zu --pids-max %llu --cpu-millis %llu "
		"--memory-max %llu",
		tsc, work_dir, name, (unsigned long long)writable, b->layers,
		(unsigned long long)msb_spec_pids_max(spec),
		(unsigned long long)msb_spec_cpu_millis(spec), (unsigned long long)memory_max);
	if (!cmdline)
		return msb__error_nomem(err);
	if (strlen(cmdline) >= 2000 || strchr(work_dir, ' ') || strchr(work_dir, '"'))
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: work_dir `%s` does not fit the guest's command line",
				     work_dir);
	/* The VMM's uid: one of 65536 by the name, so two VMMs rarely share one. */
	char idhex[5] = {name[4], name[5], name[6], name[7], '\0'};
	unsigned jail = VM_JAIL_ID_BASE + (unsigned)strtoul(idhex, NULL, 16);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:f}",
			      "qemu", b->kvm ? b->host.qemu_kvm : b->host.qemu, "kernel",
			      b->host.kernel, "initrd", b->initramfs, "disk", b->disk, "cmdline",
			      cmdline, "memory_mib", (json_int_t)(memory >> 20), "vcpus",
			      (json_int_t)b->vcpus, "kvm", b->kvm, "jail_uid", (json_int_t)jail,
			      "memory_max", (json_int_t)(memory + VM_VMM_OVERHEAD), "pids_max",
			      (json_int_t)b->pids_max, "cpu_quota_us",
			      (json_int_t)(b->cpu_millis * MSB_NS_CPU_PERIOD_US / 1000),
			      "ready_timeout", b->start_timeout);
	if (!o)
		return msb__error_nomem(err);
	char *text = msb__json_dump(o);
	json_decref(o);
	if (!text)
		return msb__error_nomem(err);
	*out = text;
	return 0;
}

/* Start msb-vm-shim detached (never our zombie); it reports "ok\n" once the
 * guest agent listens, or "error: REASON\n". */
int msb_vm__start_shim(const vm_backend *b, const char *dir, double timeout, const char *restore,
		       int ram_fd, msb_error **err)
{
	_cleanup_free_ char *cfg = msb__asprintf("%s/shim.json", dir);
	_cleanup_free_ char *log = msb__asprintf("%s/shim.log", dir);
	if (!cfg || !log)
		return msb__error_nomem(err);
	const char *debug = getenv("MSB_VM_SHIM_LOG");
	const char *argv[14] = {b->shim_path, "--state", dir, "--config", cfg, "--ready-fd", "3"};
	size_t ac = 7;
	if (restore) {
		argv[ac++] = "--restore";
		argv[ac++] = restore;
		argv[ac++] = "--ram-fd";
		argv[ac++] = "4";
	}
	if (debug) {
		argv[ac++] = "--log";
		argv[ac++] = debug;
	}
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return msb__error_errno(err, errno, "vm: cannot start the shim");
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t child = fork();
	if (child == 0) {
		if (fork() != 0)
			_exit(0);
		/* The template's RAM becomes fd 4, out of the way of fd 3 first. */
		int rfd = restore ? fcntl(ram_fd, F_DUPFD, 10) : -1;
		if (restore && rfd < 0)
			_exit(127);
		if (pipefd[1] == 3) {
			int fl = fcntl(3, F_GETFD);
			fcntl(3, F_SETFD, fl & ~FD_CLOEXEC);
		} else if (dup2(pipefd[1], 3) < 0) {
			_exit(127);
		}
		if (rfd >= 0 && dup2(rfd, 4) < 0)
			_exit(127);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		/* Nothing else of the caller's outlives it in the shim. */
		msb__sys_close_range(rfd >= 0 ? 5 : 4, ~0U, 0);
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		for (int s = 1; s < 65; s++)
			sigaction(s, &dfl, NULL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		extern char **environ;
		execve(b->shim_path, (char *const *)argv, environ);
		_exit(127);
	}
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(pipefd[1]);
	if (child < 0) {
		close(pipefd[0]);
		return msb__error_errno(err, fork_errno, "vm: cannot start the shim");
	}
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	char buf[1024];
	size_t got = 0;
	/* The shim has its own deadline for the guest; give it a margin. */
	int64_t deadline = msb__now_ns() + (int64_t)((timeout + 10) * 1e9);
	while (got < sizeof(buf) - 1) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0)
			break;
		struct pollfd pfd = {.fd = pipefd[0], .events = POLLIN};
		int r = poll(&pfd, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		ssize_t n = read(pipefd[0], buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(buf, '\n', got))
			break;
	}
	close(pipefd[0]);
	buf[got] = '\0';
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = '\0';
	if (strcmp(buf, "ok") == 0)
		return 0;
	if (strncmp(buf, "error: ", 7) == 0)
		return msb_error_set(err, MSB_E_RUNTIME, "vm sandbox not created: %s", buf + 7);
	if (got == 0 && msb__now_ns() >= deadline)
		return msb_error_set(err, MSB_E_TIMEOUT,
				     "vm sandbox not created: the shim did not report within %g s",
				     timeout + 10);
	return msb_error_set(err, MSB_E_RUNTIME,
			     "vm sandbox not created: the shim `%s` exited without reporting",
			     b->shim_path);
}

int msb_vm__purge(const char *dir, bool remove_dir, msb_error **err)
{
	int r = msb_ns__state_purge(dir, false, 5000, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0) {
		int q = msb__rm_rf_at(dfd, "jail");
		if (q < 0)
			return msb__error_errno(err, q, "purge `%s`: remove jail/", dir);
	}
	if (remove_dir && rmdir(dir) < 0 && errno != ENOENT)
		return msb__error_errno(err, -errno, "purge: remove `%s`", dir);
	return 0;
}

static int purge_sandbox(const vm_backend *b, const char *name, msb_error **err)
{
	_cleanup_free_ char *dir = msb__asprintf("%s/%s", b->state_dir, name);
	if (!dir)
		return msb__error_nomem(err);
	return msb_vm__purge(dir, false, err);
}

static int clear_dir(int dfd)
{
	int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0)
		return -errno;
	DIR *d = fdopendir(dup);
	if (!d) {
		close(dup);
		return -errno;
	}
	rewinddir(d);
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			int q = msb__rm_rf_at(dfd, de->d_name);
			if (q < 0 && r == 0)
				r = q;
		}
	closedir(d);
	return r;
}

/* The warm VM runs with the configuration this spec would get, or it is
 * refused (one sandbox, one set of limits). How long a start may take is not
 * part of what a VM is. */
static int config_match(int dfd, const char *name, const char *want, msb_error **err)
{
	_cleanup_free_ char *have = NULL;
	size_t len = 0;
	if (msb__read_file_at(dfd, "shim.json", 64 * 1024, &have, &len) < 0)
		return 0;
	json_t *a = json_loadb(have, len, 0, NULL), *b = json_loads(want, 0, NULL);
	bool same = a && b;
	if (same) {
		json_object_del(a, "ready_timeout");
		json_object_del(b, "ready_timeout");
		same = json_equal(a, b);
	}
	json_decref(a);
	json_decref(b);
	if (same)
		return 0;
	return msb_error_set(err, MSB_E_VALUE,
			     "the warm VM `%s` for this key and kind runs with another "
			     "configuration (memory, writable layer, limits, kernel, image or "
			     "accelerator): dispose it first",
			     name);
}

/* The same for the egress proxy's configuration (none for `closed`). */
static int egress_match(int dfd, const char *name, const char *want, msb_error **err)
{
	_cleanup_free_ char *have = NULL;
	int r = msb__read_file_at(dfd, MSB_NS_EGRESS_CONFIG, 1u << 20, &have, NULL);
	if (r < 0 && r != -ENOENT)
		return msb__error_errno(err, r, "vm: cannot read `%s`'s egress configuration",
					name);
	if (msb__streq_null(have, want))
		return 0;
	return msb_error_set(
		err, MSB_E_VALUE,
		"vm: the warm VM `%s` runs with another egress configuration than this "
		"spec asks for; dispose it first",
		name);
}

/* A new VM: restored from its template when snapshots are on (the template
 * made first if need be), else - or when the restore fails: a stale or
 * broken state file is removed - booted. */
static int start_vm(vm_backend *b, const msb_spec *spec, const char *work_dir, const char *dir,
		    msb_error **err)
{
	if (b->snapshots) {
		_cleanup_free_ char *state = NULL;
		msb_error *e = NULL;
		int ram = -1;
		pthread_mutex_lock(&b->ram_lock);
		int r = msb_vm__template(b, spec, work_dir, &state, &ram, &e);
		/* Our own copy: racing acquires start their shims at once. */
		_cleanup_close_ int mine = r == 0 ? fcntl(ram, F_DUPFD_CLOEXEC, 3) : -1;
		pthread_mutex_unlock(&b->ram_lock);
		if (r == 0 && mine < 0)
			r = msb__error_errno(&e, errno, "vm: the template's RAM");
		if (r == 0)
			r = msb_vm__start_shim(b, dir, b->start_timeout, state, mine, &e);
		if (r == 0)
			return 0;
		if (state) {
			msb_vm__template_remove(state);
			pthread_mutex_lock(&b->ram_lock);
			if (b->ram_fd >= 0)
				close(b->ram_fd);
			b->ram_fd = -1;
			pthread_mutex_unlock(&b->ram_lock);
		}
		msb_error_free(e);
	}
	return msb_vm__start_shim(b, dir, b->start_timeout, NULL, -1, err);
}

static int vm_acquire(void *impl, const msb_key *key, const msb_spec *spec, msb_sandbox **out,
		      msb_error **err)
{
	vm_backend *b = impl;
	const char *kind = msb_spec_kind(spec);
	const char *work_dir = msb_spec_work_dir(spec);
	if (!work_dir)
		work_dir = MSB_DEFAULT_WORK_DIR;
	if (work_dir[0] != '/')
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: work_dir `%s` must be an absolute guest path", work_dir);
	/* allowlist: the proxy's configuration, in the state directory for
	 * the shim (egress.json); closed: none, and no proxy. */
	_cleanup_free_ char *egress = NULL;
	if (msb_spec_egress(spec) == MSB_EGRESS_ALLOWLIST) {
		int q = msb_backends__egress_rules(b->egress_config, "vm options.egress_config",
						   "vm", spec, &egress, err);
		if (q < 0)
			return q;
	} else if (msb_spec_egress(spec) != MSB_EGRESS_CLOSED) {
		return msb_error_set(err, MSB_E_VALUE,
				     "vm: egress `closed` or `allowlist` only (the VM has no "
				     "network device; allowlist goes through the proxy)");
	}
	char name[37];
	msb_ns__name(key, kind, name);
	_cleanup_free_ char *cfg = NULL;
	int r = msb_vm__shim_config(b, spec, work_dir, name, &cfg, err);
	if (r < 0)
		return r;
	if ((r = msb__mkdir_p(b->state_dir, 0700)) < 0)
		return msb__error_errno(err, r, "vm: cannot create the state directory `%s`",
					b->state_dir);
	_cleanup_close_ int statefd = open(b->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0)
		return msb__error_errno(err, errno, "vm: cannot open `%s`", b->state_dir);

	for (int attempt = 0; attempt < 8; attempt++) {
		if (mkdirat(statefd, name, 0700) < 0 && errno != EEXIST)
			return msb__error_errno(err, errno, "vm: cannot create `%s`", name);
		_cleanup_close_ int dfd =
			openat(statefd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0) {
			if (errno == ENOENT)
				continue;
			return msb__error_errno(err, errno, "vm: cannot open `%s`", name);
		}
		while (flock(dfd, LOCK_EX) < 0)
			if (errno != EINTR)
				return msb__error_errno(err, errno, "vm: cannot lock `%s`", name);
		struct stat st;
		if (fstat(dfd, &st) < 0)
			return msb__error_errno(err, errno, "vm: cannot stat `%s`", name);
		if (st.st_nlink == 0)
			continue;
		int64_t pid = 0;
		msb_ns__shim_alive(dfd, &pid, NULL);
		msb_ns_labels labels = {0};
		if (pid > 0 && msb_ns__labels_read(dfd, &labels, NULL) == 0 &&
		    msb__streq_null(labels.kind, kind)) {
			r = config_match(dfd, name, cfg, err);
			if (r == 0)
				r = egress_match(dfd, name, egress, err);
			if (r == 0)
				r = msb_vm__sandbox_new(b, name, &labels, out, err);
			msb_ns__labels_clear(&labels);
			return r;
		}
		msb_ns__labels_clear(&labels);
		r = purge_sandbox(b, name, err);
		if (r < 0)
			return msb_error_wrap(err, "vm: cannot clear the stale sandbox `%s`", name);
		if ((r = clear_dir(dfd)) < 0)
			return msb__error_errno(err, r, "vm: cannot clear stale state in `%s`",
						name);
		char instance[33];
		if (random_hex(instance, 16) < 0)
			return msb__error_errno(err, errno, "vm: no randomness for an instance id");
		msb_ns_labels nl = {
			.scope = (char *)key->scope,
			.thread_id = (char *)key->thread_id,
			.agent_dir = (char *)key->agent_dir,
			.kind = (char *)kind,
			.call_id = (char *)key->call_id,
			.instance_id = instance,
			.work_dir = (char *)work_dir,
			.created_ns = msb__realtime_ns(),
		};
		if ((r = msb_ns__labels_write(dfd, &nl, err)) < 0)
			return r;
		r = msb__write_file_atomic_at(dfd, "shim.json", cfg, strlen(cfg), 0600);
		if (r < 0)
			return msb__error_errno(err, r, "vm: cannot write the shim configuration");
		if (egress && (r = msb__write_file_atomic_at(dfd, MSB_NS_EGRESS_CONFIG, egress,
							     strlen(egress), 0600)) < 0)
			return msb__error_errno(err, r,
						"vm: cannot write the egress configuration");
		_cleanup_free_ char *dir = msb__asprintf("%s/%s", b->state_dir, name);
		if (!dir)
			return msb__error_nomem(err);
		r = start_vm(b, spec, work_dir, dir, err);
		if (r < 0) {
			purge_sandbox(b, name, NULL);
			clear_dir(dfd);
			unlinkat(statefd, name, AT_REMOVEDIR);
			return r;
		}
		return msb_vm__sandbox_new(b, name, &nl, out, err);
	}
	return msb_error_set(err, MSB_E_RUNTIME, "vm: `%s` kept disappearing during acquire", name);
}

/* The sweep's teardown of one sandbox (backends/ns/ns_sweep.c). */
static int sweep_purge(void *ctx, const char *name, int dfd, const msb_ns_labels *l,
		       msb_error **err)
{
	vm_backend *b = ctx;
	int r = purge_sandbox(b, name, err);
	/* The shim and its proxy are down: the records of the tunnels it
	 * closed are in; report them before the directory goes. */
	msb_vm__egress_drain(dfd, l, &b->reporter);
	return r;
}

void msb_vm__egress_drain(int dfd, const msb_ns_labels *l, const msb_egress_reporter *rep)
{
	if (!rep || !rep->report || !l)
		return;
	msb_key key = {l->scope, l->thread_id, l->agent_dir, l->call_id};
	msb_ns__egress_drain(dfd, &key, rep);
}

static int vm_dispose(void *impl, const msb_key *key, const char *kind, const char *instance_id,
		      msb_disposal_failure **failure, msb_error **err)
{
	vm_backend *b = impl;
	return msb_ns__dispose(b->state_dir, sweep_purge, b, key, kind, instance_id, failure, err);
}

static int vm_dispose_scope(void *impl, const char *scope, const char *thread_id,
			    msb_scope_purge *out, msb_error **err)
{
	vm_backend *b = impl;
	return msb_ns__dispose_scope(b->state_dir, "vm", sweep_purge, b, scope, thread_id, out,
				     err);
}

static void vm_set_egress_reporter(void *impl, const msb_egress_reporter *reporter)
{
	vm_backend *b = impl;
	if (reporter)
		b->reporter = *reporter;
}

static void vm_free(void *impl)
{
	vm_backend *b = impl;
	if (!b)
		return;
	msb_vm__backend_clear(b);
	free(b);
}

static const msb_backend_ops vm_ops = {
	.version = MSB_BACKEND_OPS_VERSION,
	.acquire = vm_acquire,
	.dispose = vm_dispose,
	.dispose_scope = vm_dispose_scope,
	.set_egress_reporter = vm_set_egress_reporter,
	.free = vm_free,
};

int msb_vm_backend_new(const msb_vm_options *opts, msb_backend **out, msb_error **err)
{
	vm_backend *b = calloc(1, sizeof(*b));
	if (!b)
		return msb__error_nomem(err);
	int r = msb_vm__backend_init(b, opts, true, err);
	if (r < 0) {
		free(b);
		return r;
	}
	msb_backend_info info = {
		.version = MSB_BACKEND_INFO_VERSION,
		.name = b->name,
		/* microvm only on a probed, working KVM; TCG makes no promise. */
		.isolation = b->kvm ? "microvm" : "container",
		.declarations = &vm_declarations,
	};
	return msb_backend_new(&vm_ops, &info, b, out, err);
}

const char *msb_vm_backend_state_root(const msb_backend *b)
{
	const vm_backend *vb = msb_backend_impl(b, &vm_ops);
	return vb ? vb->state_root : NULL;
}

int msb_vm_list(const msb_vm_options *opts, msb_ns_entry **entries, size_t *n, msb_error **err)
{
	vm_backend b;
	int r = msb_vm__backend_init(&b, opts, false, err);
	if (r < 0)
		return r;
	*entries = NULL;
	*n = 0;
	int statefd = open(b.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (statefd < 0) {
		msb_vm__backend_clear(&b);
		return errno == ENOENT ? 0 : msb__error_errno(err, errno, "vm: cannot list");
	}
	DIR *d = fdopendir(statefd);
	if (!d) {
		close(statefd);
		msb_vm__backend_clear(&b);
		return msb__error_errno(err, errno, "vm: cannot list");
	}
	msb_ns_entry *v = NULL;
	size_t count = 0;
	struct dirent *de;
	r = 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "msb-", 4) != 0)
			continue;
		_cleanup_close_ int dfd = openat(dirfd(d), de->d_name,
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		msb_ns_labels l = {0};
		if (msb_ns__labels_read(dfd, &l, NULL) < 0)
			continue;
		msb_ns_entry *nv = msb__reallocarray(v, count + 1, sizeof(*v));
		if (!nv) {
			msb_ns__labels_clear(&l);
			r = msb__error_nomem(err);
			break;
		}
		v = nv;
		msb_ns_entry *e = &v[count++];
		memset(e, 0, sizeof(*e));
		e->name = strdup(de->d_name);
		e->scope = TAKE_PTR(l.scope);
		e->thread_id = TAKE_PTR(l.thread_id);
		e->agent_dir = TAKE_PTR(l.agent_dir);
		e->kind = TAKE_PTR(l.kind);
		e->call_id = TAKE_PTR(l.call_id);
		e->instance_id = TAKE_PTR(l.instance_id);
		msb_ns__labels_clear(&l);
		msb_ns__shim_alive(dfd, &e->shim_pid, NULL);
		e->alive = e->shim_pid > 0;
	}
	closedir(d);
	msb_vm__backend_clear(&b);
	if (r < 0) {
		msb_ns_entries_free(v, count);
		return r;
	}
	*entries = v;
	*n = count;
	return 0;
}
