/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `oci` row's doctor: which runtimes this host has, which version, and
 * what they do here - by running a container with each (the host's root,
 * read only, /bin/true), never by comparing versions. For runsc, every
 * gVisor platform is tried (ptrace, kvm, systrap), and one known refusal of
 * this runsc is probed (statx with AT_NO_AUTOMOUNT, which coreutils' ls -l
 * and stat use). Each trial runs in a private temporary directory, with the
 * runtime's --root there, and is removed; nothing outlives the call.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <jansson.h>

#include "backends/oci/oci_int.h"
#include "backends/oci/oci_rootfs.h"
#include "backends/types.h"
#include "util/fs.h"
#include "util/json.h"

#define TRIAL_TIMEOUT_MS 20000
/* A platform other than ptrace that hangs here (kvm without VT-x) is given
 * up on sooner. */
#define OTHER_PLATFORM_MS 3000
#define OUTPUT_MAX 4096

struct probes {
	msb_probe *v;
	size_t n;
};

static int add(struct probes *p, const char *name, bool ok, const char *reason, msb_error **err)
{
	msb_probe *v = msb__reallocarray(p->v, p->n + 1, sizeof(*v));
	if (!v)
		return msb__error_nomem(err);
	p->v = v;
	v[p->n] = (msb_probe){strdup(name), ok, strdup(reason ? reason : "")};
	if (!v[p->n].name || !v[p->n].reason) {
		free(v[p->n].name);
		free(v[p->n].reason);
		return msb__error_nomem(err);
	}
	p->n++;
	return 0;
}

/*
 * Run argv (stdin /dev/null), capture stdout+stderr (at most OUTPUT_MAX
 * bytes), wait at most timeout_ms (then SIGKILL its process group). With
 * `private_mounts`, the child first enters a mount namespace of its own and
 * hides a hybrid cgroup2 hierarchy, as msb-oci-shim does for crun.
 * Returns the wait status, or -1 (could not run, or timed out).
 */
static int run_capture(char *const argv[], bool private_mounts, int timeout_ms, char *out,
		       size_t size)
{
	out[0] = '\0';
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		setpgid(0, 0);
		char why[128];
		if (private_mounts) {
			if (oci_rootfs_private(why, sizeof(why)) < 0)
				_exit(126);
			oci_rootfs_hide_hybrid_cgroup2();
		}
		/* guest-names: ok - /dev/null */
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(126);
		extern char **environ;
		execve(argv[0], argv, environ);
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	int64_t deadline = msb__now_ns() + (int64_t)timeout_ms * 1000000;
	bool timed_out = false;
	for (;;) {
		int64_t left = (deadline - msb__now_ns()) / 1000000;
		if (left <= 0) {
			timed_out = true;
			break;
		}
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		int r = poll(&pf, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			timed_out = r == 0;
			break;
		}
		char buf[512];
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size_t k = (size_t)n < size - 1 - got ? (size_t)n : size - 1 - got;
		memcpy(out + got, buf, k);
		got += k;
	}
	close(p[0]);
	out[got] = '\0';
	if (timed_out)
		kill(-pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return timed_out ? -1 : status;
}

/* The last non-empty line of `text`, printable, in place. */
static const char *last_line(char *text)
{
	size_t n = strlen(text);
	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
		text[--n] = '\0';
	char *nl = strrchr(text, '\n');
	char *line = nl ? nl + 1 : text;
	for (char *c = line; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = ' ';
	if (strlen(line) > 240)
		line[240] = '\0';
	return line;
}

static char *version_of(const char *path)
{
	const char *argv[] = {path, "--version", NULL};
	char out[OUTPUT_MAX];
	int st = run_capture((char *const *)argv, false, TRIAL_TIMEOUT_MS, out, sizeof(out));
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return NULL;
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = '\0';
	/* "runsc version X", "crun version X", "runc version X" */
	const char *v = strstr(out, "version ");
	return strdup(v ? v + 8 : out);
}

/* A bundle in a fresh directory: a root of the host's programs (its /usr
 * and /bin, /lib... as the host has them, bound read only), `args`. */
static char *make_bundle(const char *const *args, msb_error **err)
{
	char tmpl[] = "/tmp/msb-oci-doctor-XXXXXX";
	if (!mkdtemp(tmpl)) {
		msb__error_errno(err, errno, "oci doctor: mkdtemp");
		return NULL;
	}
	_cleanup_close_ int dfd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = dfd < 0 ? -errno : 0;
	_cleanup_close_ int rootfd = -1;
	if (r == 0 && (mkdirat(dfd, "rootfs", 0755) < 0 ||
		       (rootfd = openat(dfd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
		       mkdirat(rootfd, "proc", 0555) < 0 || mkdirat(rootfd, "usr", 0755) < 0 ||
		       mkdirat(rootfd, "dev", 0755) < 0))
		r = -errno;
	json_t *mounts = json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:[s,s]}]", "destination",
				   "/proc", "type", "proc", "source", "proc", "destination", "/usr",
				   "type", "bind", "source", "/usr", "options", "rbind", "ro");
	static const char *const top[] = {"bin", "sbin", "lib", "lib64", "lib32", "libx32", NULL};
	for (size_t i = 0; r == 0 && mounts && top[i]; i++) {
		char src[16], target[256];
		snprintf(src, sizeof(src), "/%s", top[i]);
		struct stat st;
		/* guest-names: ok - the host's own top directories */
		if (lstat(src, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			/* guest-names: ok - the host's own top directories */
			ssize_t n = readlink(src, target, sizeof(target) - 1);
			if (n < 0 || (target[n] = '\0', symlinkat(target, rootfd, top[i]) < 0))
				r = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdirat(rootfd, top[i], 0755) < 0)
				r = -errno;
			else
				json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s,s]}",
									"destination", src, "type",
									"bind", "source", src,
									"options", "rbind", "ro"));
		}
	}
	json_t *argv = json_array();
	for (size_t i = 0; argv && args[i]; i++)
		json_array_append_new(argv, json_string(args[i]));
	json_t *doc = json_pack(
		"{s:s, s:{s:b, s:{s:i, s:i}, s:o, s:[s], s:s, s:b}, s:{s:s, s:b}, s:s, s:o, "
		"s:{s:[{s:s},{s:s},{s:s},{s:s},{s:s}]}}",
		"ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", 0, "gid", 0, "args",
		argv, "env", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "cwd", "/", "noNewPrivileges", 1,
		"root", "path", "rootfs", "readonly", 1, "hostname", "msb-doctor", "mounts", mounts,
		"linux", "namespaces", "type", "pid", "type", "network", "type", "ipc", "type",
		"uts", "type", "mount");
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (r == 0)
		r = text ? msb__write_file_atomic_at(dfd, "config.json", text, strlen(text), 0600)
			 : -ENOMEM;
	free(text);
	if (r < 0) {
		msb__rm_rf(tmpl);
		msb__error_errno(err, r, "oci doctor: write a bundle");
		return NULL;
	}
	return strdup(tmpl);
}

/* Run the bundle under `rt`; 0 with *ok and a one-line reason. */
static int trial(oci_runtime rt, const char *path, const char *platform, const char *const *args,
		 int timeout_ms, bool *ok, char *reason, size_t size, msb_error **err)
{
	_cleanup_free_ char *dir = make_bundle(args, err);
	if (!dir)
		return msb_error_code(*err);
	_cleanup_free_ char *root = msb__asprintf("%s/rt", dir);
	const char *argv[24];
	size_t n = 0;
	argv[n++] = path;
	argv[n++] = "--root";
	argv[n++] = root;
	if (rt == OCI_RUNSC) {
		argv[n++] = "--network";
		argv[n++] = "none";
		argv[n++] = "--ignore-cgroups";
		argv[n++] = "--platform";
		argv[n++] = (char *)platform;
	} else if (rt == OCI_CRUN) {
		argv[n++] = "--cgroup-manager=disabled";
	}
	argv[n++] = "run";
	argv[n++] = "--bundle";
	argv[n++] = dir;
	/* Our own id: gVisor names a sandbox's control socket after it in the
	 * host's abstract namespace, so two doctors at once with one fixed id
	 * collided ("address already in use"). */
	char id[40];
	snprintf(id, sizeof(id), "msb-doctor-%d", (int)getpid());
	argv[n++] = id;
	argv[n] = NULL;
	char out[OUTPUT_MAX];
	int st = root ? run_capture((char *const *)argv, rt == OCI_CRUN, timeout_ms, out,
				    sizeof(out))
		      : -1;
	msb__rm_rf(dir);
	*ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (*ok)
		snprintf(reason, size, "runs a container here");
	else if (st < 0)
		snprintf(reason, size, "no answer within %d s (killed)", timeout_ms / 1000);
	else
		snprintf(reason, size, "%s", last_line(out)[0] ? last_line(out) : "it failed");
	return 0;
}

static const char *const true_args[] = {"/bin/true", NULL};

static int probe_runsc(struct probes *p, bool *ok, msb_buf *summary, msb_error **err)
{
	*ok = false;
	_cleanup_free_ char *path = msb_oci__find_in_path("runsc");
	if (!path)
		return add(p, "oci.runsc", false, "not in PATH (Debian package `runsc`)", err);
	_cleanup_free_ char *ver = version_of(path);
	char line[400];
	snprintf(line, sizeof(line), "%s, version %s", path, ver ? ver : "unknown");
	int r = add(p, "oci.runsc", true, line, err);
	static const char *const platforms[] = {"ptrace", "kvm", "systrap", NULL};
	_cleanup_free_ char *works = NULL;
	for (size_t i = 0; r == 0 && platforms[i]; i++) {
		char name[40], reason[300];
		snprintf(name, sizeof(name), "oci.runsc.%s", platforms[i]);
		bool pok = false;
		if (strcmp(platforms[i], "kvm") == 0 && access("/dev/kvm", R_OK | W_OK) != 0) {
			snprintf(reason, sizeof(reason), "/dev/kvm: %s", strerror(errno));
		} else if ((r = trial(OCI_RUNSC, path, platforms[i], true_args,
				      i == 0 ? TRIAL_TIMEOUT_MS : OTHER_PLATFORM_MS, &pok, reason,
				      sizeof(reason), err)) < 0) {
			break;
		}
		if (pok && !works && !(works = strdup(platforms[i])))
			r = msb__error_nomem(err);
		if (r == 0)
			r = add(p, name, pok, reason, err);
	}
	if (r < 0)
		return r;
	if (works) {
		/* A refusal of this runsc that guests meet (coreutils ls -l, stat). */
		static const char *const statx_args[] = {"/usr/bin/stat", "-c", "%n", "/", NULL};
		bool sok = false;
		char reason[300];
		if ((r = trial(OCI_RUNSC, path, works, statx_args, TRIAL_TIMEOUT_MS, &sok, reason,
			       sizeof(reason), err)) < 0)
			return r;
		if (!sok) {
			char more[420];
			snprintf(more, sizeof(more),
				 "statx with AT_NO_AUTOMOUNT is refused (%s): coreutils' ls -l "
				 "and stat fail in the guest; stat(2) and lstat(2) work",
				 reason);
			r = add(p, "oci.runsc.statx", false, more, err);
		} else {
			r = add(p, "oci.runsc.statx", true, "statx works", err);
		}
		*ok = true;
		msb__buf_printf(summary, "runsc %s on %s (hardened_container)", ver ? ver : "",
				works);
	}
	return r;
}

static int probe_kernel_runtime(struct probes *p, oci_runtime rt, bool *ok, msb_buf *summary,
				msb_error **err)
{
	*ok = false;
	const char *name = msb_oci__runtime_name(rt);
	char pname[32];
	snprintf(pname, sizeof(pname), "oci.%s", name);
	_cleanup_free_ char *path = msb_oci__find_in_path(name);
	if (!path) {
		char why[80];
		snprintf(why, sizeof(why), "not in PATH (Debian package `%s`)", name);
		return add(p, pname, false, why, err);
	}
	_cleanup_free_ char *ver = version_of(path);
	char reason[300], line[700];
	int r = trial(rt, path, NULL, true_args, TRIAL_TIMEOUT_MS, ok, reason, sizeof(reason), err);
	if (r < 0)
		return r;
	snprintf(line, sizeof(line), "%s, version %s: %s", path, ver ? ver : "unknown", reason);
	if (*ok)
		msb__buf_printf(summary, "%s%s %s (container)", summary->len ? "; " : "", name,
				ver ? ver : "");
	return add(p, pname, *ok, line, err);
}

int msb_oci__doctor(msb_backend_probe *out, msb_error **err)
{
	if (geteuid() != 0)
		return msb_backends__verdict(out, false, "the OCI runtimes run as root: not root",
					     err);
	struct probes p = {0};
	msb_buf summary = MSB_BUF_INIT;
	bool runsc = false, crun = false, runc = false;
	int r = probe_runsc(&p, &runsc, &summary, err);
	if (r == 0)
		r = probe_kernel_runtime(&p, OCI_CRUN, &crun, &summary, err);
	if (r == 0)
		r = probe_kernel_runtime(&p, OCI_RUNC, &runc, &summary, err);
	_cleanup_free_ char *text = msb__buf_steal_str(&summary);
	if (r == 0)
		r = msb_backends__verdict(
			out, runsc || crun || runc,
			text && text[0] ? text : "no OCI runtime runs a container here", err);
	out->details = p.v;
	out->n_details = p.n;
	return r;
}
