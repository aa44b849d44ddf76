/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` file plane against the real backend, through the public API
 * (checklist §9: 9.11-9.18, 9.20-9.27, 9.30; §10: 10.6, 10.8). Hostile layouts
 * are planted from inside the guest with exec; links point at a canary
 * directory on the host (and at /etc), which is what a host that followed
 * them would reach. Needs root, msb-shim and msb-agent (env MSB_SHIM,
 * MSB_AGENT). Each test gets its own state root and canary, and checks at the
 * end that disposal left nothing behind.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <msb/msb.h>
#include <msb/ns.h>

#include "util/fs.h"

#define GUEST_BASE MSB_DEFAULT_WORK_DIR
#define SECRET "CANARY-SECRET-0123456789"
#define CAPS                                                                                       \
	(MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST |                \
	 MSB_CAP_FILES_DELETE | MSB_CAP_RECLAIM)

static char root[64];	/* the private state root */
static char canary[64]; /* a host directory no guest path may reach */
static msb_backend *backend;
static msb_sandbox *sb;
static const char *thread_id = "files";

/* ---- fixture ------------------------------------------------------------------ */

static void write_host(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	cr_assert(f, "fopen %s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
}

static void make_backend(void)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, &err), 0, "%s", msb_error_message(err));
}

static msb_spec *make_spec(msb_capset caps)
{
	msb_spec_builder *b = msb_spec_builder_new("ns-files");
	msb_spec_builder_set_requires(b, caps);
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(b);
	return s;
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msbf-XXXXXX");
	cr_assert(mkdtemp(root));
	snprintf(canary, sizeof(canary), "/tmp/msbf-canary-XXXXXX");
	cr_assert(mkdtemp(canary));
	chmod(canary, 0755);
	char p[128];
	snprintf(p, sizeof(p), "%s/secret", canary);
	write_host(p, SECRET);
	snprintf(p, sizeof(p), "%s/sub", canary);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/sub/secret", canary);
	write_host(p, SECRET);

	make_backend();
	msb_key key = {.scope = "test", .thread_id = thread_id, .agent_dir = "/agent"};
	msb_spec *spec = make_spec(CAPS);
	msb_error *err = NULL;
	int r = msb_backend_acquire(backend, &key, spec, &sb, &err);
	msb_spec_unref(spec);
	if (r < 0) {
		/* .fini does not run after a failed .init: clean up here. */
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", msb_error_message(err));
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
		msb__rm_rf(root);
		msb__rm_rf(canary);
		cr_assert_fail("acquire: %s", msg);
	}
}

/* Nothing left behind: the scope's sandbox disposed, no state directory. */
static void teardown(void)
{
	msb_sandbox_free(sb);
	sb = NULL;
	bool clean = true;
	if (backend) {
		msb_scope_purge purge = {0};
		msb_error *err = NULL;
		int r = msb_backend_dispose_scope(backend, "test", thread_id, &purge, &err);
		clean = r == 0 && purge.undisposed == 0;
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
		char ns[96];
		snprintf(ns, sizeof(ns), "%s/ns", root);
		DIR *d = opendir(ns);
		for (struct dirent *de; d && (de = readdir(d));)
			if (strncmp(de->d_name, "msb-", 4) == 0)
				clean = false;
		if (d)
			closedir(d);
	}
	msb__rm_rf(root);
	msb__rm_rf(canary);
	cr_assert(clean, "disposal left something behind under %s", root);
}

TestSuite(ns_files, .init = setup, .fini = teardown, .timeout = 120);

/* ---- helpers ------------------------------------------------------------------ */

/* Run a shell command in the guest (with $C = the canary's host path) and
 * return its stdout (static buffer). The command must succeed. */
static const char *sh(const char *cmd)
{
	static char out[4096];
	char env_c[96];
	snprintf(env_c, sizeof(env_c), "C=%s", canary);
	const char *env[] = {env_c, NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = cmd;
	req.env = env;
	req.timeout = 60;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "exec `%s`: %s", cmd,
		     msb_error_message(err));
	cr_assert_eq(res.exit_code, 0, "exec `%s` exited %d: %s", cmd, res.exit_code,
		     (char *)res.stderr_bytes);
	snprintf(out, sizeof(out), "%s", (char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	return out;
}

static void expect(int r, msb_error *const *errp, int code, const char *phrase, const char *what)
{
	const msb_error *err = *errp;
	cr_assert_eq(r, code, "%s: got %s (%d) `%s`, want %s", what, msb_code_name(r), r,
		     err ? msb_error_message(err) : "", msb_code_name(code));
	cr_assert(err && msb_error_code(err) == code, "%s: error object code", what);
	cr_assert(strstr(msb_error_message(err), phrase), "%s: `%s` lacks `%s`", what,
		  msb_error_message(err), phrase);
}

static int wr(const char *path, const char *text, const char *wd, msb_error **err)
{
	return msb_sandbox_write_file(sb, path, (const uint8_t *)text, strlen(text), wd, err);
}

static void wr_ok(const char *path, const char *text, const char *wd)
{
	msb_error *err = NULL;
	cr_assert_eq(wr(path, text, wd, &err), 0, "write %s: %s", path, msb_error_message(err));
}

static int rd(const char *path, const char *wd, uint64_t max, char **out, size_t *len,
	      msb_error **err)
{
	uint8_t *d = NULL;
	int r = msb_sandbox_read_file(sb, path, wd, max, &d, len, err);
	*out = (char *)d;
	return r;
}

/* Read a file fully; the result is NUL-terminated (the caller frees). */
static char *rd_ok(const char *path, const char *wd)
{
	char *d = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	cr_assert_eq(rd(path, wd, 1 << 20, &d, &len, &err), 0, "read %s: %s", path,
		     msb_error_message(err));
	char *s = malloc(len + 1);
	memcpy(s, d, len);
	s[len] = '\0';
	free(d);
	return s;
}

/* Everything about the canary a leak would change. */
struct canary_state {
	char listing[512];
	char secret[64];
	char sub_secret[64];
	mode_t mode, sub_mode, etc_mode;
	struct timespec mtime, sub_mtime, etc_mtime;
};

static void canary_snapshot(struct canary_state *s)
{
	memset(s, 0, sizeof(*s));
	char p[128];
	struct stat st;
	cr_assert_eq(stat(canary, &st), 0);
	s->mode = st.st_mode;
	s->mtime = st.st_mtim;
	snprintf(p, sizeof(p), "%s/sub", canary);
	cr_assert_eq(stat(p, &st), 0);
	s->sub_mode = st.st_mode;
	s->sub_mtime = st.st_mtim;
	cr_assert_eq(stat("/etc", &st), 0);
	s->etc_mode = st.st_mode;
	s->etc_mtime = st.st_mtim;
	DIR *d = opendir(canary);
	cr_assert(d);
	for (struct dirent *de; (de = readdir(d));) {
		strncat(s->listing, de->d_name, sizeof(s->listing) - strlen(s->listing) - 2);
		strncat(s->listing, ",", sizeof(s->listing) - strlen(s->listing) - 1);
	}
	closedir(d);
	snprintf(p, sizeof(p), "%s/secret", canary);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, s->secret, sizeof(s->secret) - 1);
		(void)n;
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/sub/secret", canary);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, s->sub_secret, sizeof(s->sub_secret) - 1);
		(void)n;
		close(fd);
	}
}

static void canary_unchanged(const struct canary_state *before)
{
	struct canary_state now;
	canary_snapshot(&now);
	cr_assert_str_eq(now.secret, SECRET, "the canary's secret changed");
	cr_assert_str_eq(now.sub_secret, SECRET, "the canary's sub/secret changed");
	cr_assert(strlen(now.listing) == strlen(before->listing),
		  "the canary's entries changed: `%s` -> `%s`", before->listing, now.listing);
	cr_assert_eq(now.mode, before->mode, "the canary's mode changed");
	cr_assert_eq(now.sub_mode, before->sub_mode, "the canary's sub mode changed");
	cr_assert_eq(now.etc_mode, before->etc_mode, "/etc's mode changed");
	cr_assert(now.mtime.tv_sec == before->mtime.tv_sec &&
			  now.mtime.tv_nsec == before->mtime.tv_nsec,
		  "the canary was written to");
	cr_assert(now.sub_mtime.tv_sec == before->sub_mtime.tv_sec &&
			  now.sub_mtime.tv_nsec == before->sub_mtime.tv_nsec,
		  "the canary's sub was written to");
	cr_assert(now.etc_mtime.tv_sec == before->etc_mtime.tv_sec &&
			  now.etc_mtime.tv_nsec == before->etc_mtime.tv_nsec,
		  "/etc was written to");
}

/* The host directory bound at the guest's work_dir. */
static void host_work(char *out, size_t size)
{
	char ns[96];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	DIR *d = opendir(ns);
	cr_assert(d);
	out[0] = '\0';
	for (struct dirent *de; (de = readdir(d));)
		if (strncmp(de->d_name, "msb-", 4) == 0)
			snprintf(out, size, "%s/%.40s/work", ns, de->d_name);
	closedir(d);
	cr_assert(out[0], "no sandbox under %s", ns);
}

/* ---- declarations (9.30) ------------------------------------------------------- */

Test(ns_files, declares_the_pull_surface_and_ceilings)
{
	const msb_declarations *d = msb_backend_declarations(backend);
	cr_assert_eq(d->capabilities & CAPS, CAPS, "capabilities %#x", d->capabilities);
	cr_assert_eq(d->capabilities & MSB_CAP_RUN_CODE, 0); /* SNAPSHOT: tests/ns_images */
	cr_assert_eq(d->limits.files_out.max_bytes_per_file, 256ull << 20);
	cr_assert_eq(d->limits.files_in.max_total_bytes, 1ull << 30);
	cr_assert_eq(d->limits.files_out.max_files, 4096);

	/* Through a router at the container floor: a spec asking for the whole
	 * surface is served; one asking above the ceiling is refused first. */
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	msb_router *r = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_router_new(&backend, 1, &ro, &r, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder *b = msb_spec_builder_new("ns-files");
	msb_spec_builder_set_requires(b, CAPS);
	msb_transfer_limits big = {256ull << 20, 1ull << 30, 4096};
	msb_spec_builder_set_files_out(b, big);
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &err), 0);
	msb_key key = {.scope = "test", .thread_id = thread_id, .agent_dir = "/agent"};
	msb_sandbox *via = NULL;
	cr_assert_eq(msb_router_acquire(r, &key, s, NULL, &via, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_str_eq(msb_sandbox_instance_id(via), msb_sandbox_instance_id(sb));
	bool present = false;
	msb_entry e = {0};
	cr_assert_eq(msb_sandbox_stat_file(via, ".", NULL, &present, &e, &err), 0);
	cr_assert(present && e.kind == MSB_ENTRY_DIRECTORY);
	msb_entry_clear(&e);
	msb_sandbox_free(via);
	msb_spec_unref(s);

	big.max_bytes_per_file = 512ull << 20;
	msb_spec_builder_set_files_out(b, big);
	cr_assert_eq(msb_spec_build(b, &s, &err), 0);
	via = NULL;
	int rc = msb_router_acquire(r, &key, s, NULL, &via, &err);
	expect(rc, &err, MSB_E_TRANSFER_LIMITS_NOT_PERMITTED, "max_bytes_per_file",
	       "files_out above the ceiling");
	msb_error_free(err);
	msb_spec_unref(s);
	msb_spec_builder_free(b);
	msb_router_free(r);
}

/* ---- write_file (9.11-9.18) ------------------------------------------------------ */

Test(ns_files, write_basics)
{
	/* 9.11: UTF-8 bytes verbatim, binary round trip, replace, parents. */
	wr_ok("u.txt", "\xc3\xbc\x6e\xc3\xaf", NULL);
	char *s = rd_ok("u.txt", NULL);
	cr_assert_str_eq(s, "\xc3\xbc\x6e\xc3\xaf");
	free(s);
	msb_error *err = NULL;
	const uint8_t bin[] = {0x00, 0xff};
	cr_assert_eq(msb_sandbox_write_file(sb, "bin", bin, 2, NULL, &err), 0);
	uint8_t *d = NULL;
	size_t len = 0;
	cr_assert_eq(msb_sandbox_read_file(sb, "bin", NULL, 10, &d, &len, &err), 0);
	cr_assert(len == 2 && d[0] == 0 && d[1] == 0xff);
	free(d);
	wr_ok("ab", "a", NULL);
	wr_ok("ab", "b", NULL);
	s = rd_ok("ab", NULL);
	cr_assert_str_eq(s, "b");
	free(s);
	wr_ok("x/y/z.txt", "deep", NULL);
	/* The guest sees the same bytes, owned by its root, and the parents
	 * are real directories (9.18). */
	cr_assert_str_eq(sh("cat x/y/z.txt; stat -c ' %u:%g %F' x x/y x/y/z.txt"),
			 "deep 0:0 directory\n 0:0 directory\n 0:0 regular file\n");
	cr_assert_str_eq(sh("ls -A x/y"), "z.txt\n", "no temporary file left");
	/* Empty content. */
	cr_assert_eq(msb_sandbox_write_file(sb, "empty", NULL, 0, NULL, &err), 0);
	cr_assert_str_eq(sh("stat -c %s empty"), "0\n");
}

Test(ns_files, write_refusals)
{
	struct canary_state before;
	sh("ln -s \"$C\" out; ln -s /etc etc; ln -s \"$C/secret\" l; echo plain > plain; "
	   "mkfifo fifo; mkdir dir");
	canary_snapshot(&before);
	msb_error *err = NULL;
	char host[160], p[200];
	host_work(host, sizeof(host));

	/* 9.12: escape refused, nothing created outside; absolute inside ok. */
	expect(wr("../outside.txt", "x", NULL, &err), &err, MSB_E_VALUE, "outside", "escape");
	msb_error_free(err), err = NULL;
	snprintf(p, sizeof(p), "%s/../outside.txt", host);
	cr_assert(access(p, F_OK) < 0, "a file landed outside the work dir");
	expect(wr("a/../../x", "x", NULL, &err), &err, MSB_E_VALUE, "outside", "escape via a/..");
	msb_error_free(err), err = NULL;
	expect(wr("/etc/passwd", "x", NULL, &err), &err, MSB_E_VALUE, "outside", "absolute");
	msb_error_free(err), err = NULL;
	wr_ok(GUEST_BASE "/in.txt", "in", NULL);
	cr_assert_str_eq(sh("cat in.txt"), "in");

	/* 9.13 */
	expect(wr("a\\b.txt", "x", NULL, &err), &err, MSB_E_VALUE, "backslash", "backslash");
	msb_error_free(err), err = NULL;

	/* 9.14: a linked parent, including the working directory itself. */
	expect(wr("out/f", "x", NULL, &err), &err, MSB_E_VALUE, "is a link", "linked parent");
	msb_error_free(err), err = NULL;
	expect(wr("out/sub/f", "x", NULL, &err), &err, MSB_E_VALUE, "is a link", "linked parent 2");
	msb_error_free(err), err = NULL;
	expect(wr("etc/msb-f", "x", NULL, &err), &err, MSB_E_VALUE, "is a link", "link to /etc");
	msb_error_free(err), err = NULL;
	expect(wr("f", "x", "out", &err), &err, MSB_E_VALUE, "is a link", "linked wd");
	msb_error_free(err), err = NULL;
	expect(wr("f", "x", GUEST_BASE "/etc", &err), &err, MSB_E_VALUE, "is a link",
	       "linked absolute wd");
	msb_error_free(err), err = NULL;
	cr_assert(access("/etc/msb-f", F_OK) < 0, "a file landed in /etc");

	/* 9.15: the leaf is a link: refused, never followed. */
	expect(wr("l", "pwned", NULL, &err), &err, MSB_E_VALUE, "is a link", "leaf link");
	msb_error_free(err), err = NULL;
	char want[160];
	snprintf(want, sizeof(want), "%s/secret\n", canary);
	cr_assert_str_eq(sh("readlink l"), want, "the link itself is untouched");

	/* 9.16: the working directory itself. */
	expect(wr(".", "x", NULL, &err), &err, MSB_E_VALUE, "working directory itself", "`.`");
	msb_error_free(err), err = NULL;
	expect(wr("", "x", NULL, &err), &err, MSB_E_VALUE, "working directory itself", "``");
	msb_error_free(err), err = NULL;
	expect(wr("dir/..", "x", NULL, &err), &err, MSB_E_VALUE, "working directory itself",
	       "dir/..");
	msb_error_free(err), err = NULL;
	expect(wr("..", "x", "dir", &err), &err, MSB_E_VALUE, "outside", "`..` of a child wd");
	msb_error_free(err), err = NULL;
	expect(wr(".", "x", "dir", &err), &err, MSB_E_VALUE, "working directory itself",
	       "child wd itself");
	msb_error_free(err), err = NULL;

	/* 9.17: a non-directory parent is a trip, not an escape. */
	expect(wr("plain/x", "x", NULL, &err), &err, MSB_E_NOT_DIRECTORY, "not a directory",
	       "file parent");
	msb_error_free(err), err = NULL;
	expect(wr("fifo/x", "x", NULL, &err), &err, MSB_E_NOT_DIRECTORY, "not a directory",
	       "fifo parent");
	msb_error_free(err), err = NULL;
	/* Non-files at the leaf. */
	expect(wr("dir", "x", NULL, &err), &err, MSB_E_IS_DIRECTORY, "is a directory", "dir leaf");
	msb_error_free(err), err = NULL;
	expect(wr("fifo", "x", NULL, &err), &err, MSB_E_OS, "not a regular file", "fifo leaf");
	msb_error_free(err), err = NULL;
	cr_assert_str_eq(sh("cat plain; ls -A dir"), "plain\n");

	canary_unchanged(&before);
}

/* 10.6, 10.8: "." is the base; a relative working directory is a child of it;
 * absolute addressing inside the base still works, outside it is refused. */
Test(ns_files, working_directories)
{
	sh("mkdir -p sub/deeper");
	wr_ok("x", "in-sub", "sub");
	char host[160], p[200];
	host_work(host, sizeof(host));
	snprintf(p, sizeof(p), "%s/sub/x", host);
	cr_assert(access(p, F_OK) == 0, "write_file(x, wd=sub) did not land in base/sub/x");
	cr_assert_str_eq(sh("cat " GUEST_BASE "/sub/x"), "in-sub");
	char *s = rd_ok("sub/x", ".");
	cr_assert_str_eq(s, "in-sub");
	free(s);
	s = rd_ok("x", GUEST_BASE "/sub");
	cr_assert_str_eq(s, "in-sub");
	free(s);
	s = rd_ok(GUEST_BASE "/sub/x", "sub");
	cr_assert_str_eq(s, "in-sub");
	free(s);
	msb_error *err = NULL;
	char *d = NULL;
	size_t len;
	expect(rd("x", "..", 10, &d, &len, &err), &err, MSB_E_VALUE, "working directory",
	       "wd above the base");
	msb_error_free(err), err = NULL;
	expect(rd("passwd", "/etc", 10, &d, &len, &err), &err, MSB_E_VALUE, "working directory",
	       "wd outside the base");
	msb_error_free(err), err = NULL;
	expect(rd("../x", "sub/deeper", 10, &d, &len, &err), &err, MSB_E_VALUE, "outside",
	       "above a child working directory");
	msb_error_free(err);
}

/*
 * Issue 15, finding 6: a writer killed mid-write leaves nothing in the storage
 * base. A child writes 256 MiB through the library and is killed with SIGKILL
 * while the file it writes is partly there (its open fd, seen from the
 * host's /proc, names a file under work/ holding part of the bytes). Before,
 * the bytes went to a named sibling (.msb-write-*), which stayed - seen by
 * the guest and by fingerprints.
 */
static bool partly_written(pid_t pid, const char *work, size_t len)
{
	char fds[64];
	snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(fds);
	if (!d)
		return false;
	bool found = false;
	for (struct dirent *de; !found && (de = readdir(d));) {
		char p[96], target[512];
		snprintf(p, sizeof(p), "%s/%.16s", fds, de->d_name);
		ssize_t n = readlink(p, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		struct stat st;
		found = strncmp(target, work, strlen(work)) == 0 && target[strlen(work)] == '/' &&
			stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > (1 << 20) &&
			(size_t)st.st_size < len;
	}
	closedir(d);
	return found;
}

Test(ns_files, a_writer_killed_mid_write_leaves_nothing, .timeout = 180)
{
	char work[256];
	host_work(work, sizeof(work));
	size_t len = (size_t)256 << 20;
	uint8_t *data = malloc(len);
	cr_assert_not_null(data);
	memset(data, 'x', len);
	bool killed = false;
	for (int attempt = 0; attempt < 8 && !killed; attempt++) {
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			int r = msb_sandbox_write_file(sb, "big.bin", data, len, NULL, NULL);
			_exit(r == 0 ? 0 : 1);
		}
		while (!partly_written(pid, work, len) && waitpid(pid, NULL, WNOHANG) == 0)
			;
		kill(pid, SIGKILL);
		int st = 0;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		killed = WIFSIGNALED(st);
		/* The child won the race and finished: start again. */
		msb_error *err = NULL;
		cr_assert_eq(msb_sandbox_remove(sb, "big.bin", NULL, false, &err), 0, "%s",
			     msb_error_message(err));
	}
	free(data);
	cr_assert(killed, "the writer always finished before it could be killed");
	DIR *d = opendir(work);
	cr_assert_not_null(d);
	for (struct dirent *de; (de = readdir(d));)
		cr_assert(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0,
			  "the killed writer left `%s` in the storage base", de->d_name);
	closedir(d);
}

/* ---- stat_file (9.20) ----------------------------------------------------------- */

static void stat_ok(const char *path, const char *wd, bool want_present, msb_entry *e)
{
	bool present = !want_present;
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_stat_file(sb, path, wd, &present, e, &err), 0, "stat %s: %s", path,
		     msb_error_message(err));
	cr_assert_eq(present, want_present, "stat %s: present", path);
}

Test(ns_files, stat_file)
{
	struct canary_state before;
	sh("printf 12345 > f; ln -s f link-file; ln -s \"$C\" out; ln -s /etc etc; mkdir -p d/e; "
	   "mkfifo fifo; printf abc > d/e/g");
	canary_snapshot(&before);
	msb_entry e = {0};
	stat_ok("f", NULL, true, &e);
	cr_assert_str_eq(e.path, "f");
	cr_assert(e.kind == MSB_ENTRY_FILE && e.size_known && e.size_bytes == 5);
	msb_entry_clear(&e);
	/* lstat-like: a link is described, never followed. */
	stat_ok("link-file", NULL, true, &e);
	cr_assert(e.kind == MSB_ENTRY_SYMLINK && !e.size_known, "link: kind %d", e.kind);
	msb_entry_clear(&e);
	stat_ok("out", NULL, true, &e);
	cr_assert(e.kind == MSB_ENTRY_SYMLINK && !e.size_known);
	msb_entry_clear(&e);
	stat_ok("d", NULL, true, &e);
	cr_assert(e.kind == MSB_ENTRY_DIRECTORY && !e.size_known);
	msb_entry_clear(&e);
	stat_ok("fifo", NULL, true, &e);
	cr_assert(e.kind == MSB_ENTRY_OTHER && !e.size_known);
	msb_entry_clear(&e);
	stat_ok(".", NULL, true, &e);
	cr_assert(e.kind == MSB_ENTRY_DIRECTORY);
	cr_assert_str_eq(e.path, ".");
	msb_entry_clear(&e);
	/* Paths are relative to the working directory. */
	stat_ok("e/g", "d", true, &e);
	cr_assert_str_eq(e.path, "e/g");
	cr_assert(e.kind == MSB_ENTRY_FILE && e.size_bytes == 3);
	msb_entry_clear(&e);
	stat_ok(".", "d/e", true, &e);
	cr_assert_str_eq(e.path, ".");
	msb_entry_clear(&e);
	/* Absent, and below an absent parent. */
	stat_ok("missing", NULL, false, &e);
	stat_ok("missing/deeper/x", NULL, false, &e);

	msb_error *err = NULL;
	bool present;
	expect(msb_sandbox_stat_file(sb, "out/secret", NULL, &present, &e, &err), &err, MSB_E_VALUE,
	       "is a link", "stat through a linked parent");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_stat_file(sb, "etc/hostname", NULL, &present, &e, &err), &err,
	       MSB_E_VALUE, "is a link", "stat through /etc");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_stat_file(sb, "secret", "out", &present, &e, &err), &err, MSB_E_VALUE,
	       "is a link", "stat in a linked wd");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_stat_file(sb, "f/x", NULL, &present, &e, &err), &err,
	       MSB_E_NOT_DIRECTORY, "not a directory", "stat below a file");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_stat_file(sb, "../x", NULL, &present, &e, &err), &err, MSB_E_VALUE,
	       "outside", "stat escape");
	msb_error_free(err);
	canary_unchanged(&before);
}

/* ---- read_file (9.21-9.23) ------------------------------------------------------- */

Test(ns_files, read_file)
{
	sh("printf hello > five; mkdir -p sub; printf world > sub/w");
	char *d = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	cr_assert_eq(rd("five", NULL, 10, &d, &len, &err), 0);
	cr_assert(len == 5 && memcmp(d, "hello", 5) == 0);
	free(d);
	cr_assert_eq(rd("five", NULL, 5, &d, &len, &err), 0, "exactly at the cap");
	free(d);
	cr_assert_eq(rd("w", "sub", 5, &d, &len, &err), 0);
	cr_assert(len == 5 && memcmp(d, "world", 5) == 0);
	free(d);
	sh("touch zero");
	cr_assert_eq(rd("zero", NULL, 0, &d, &len, &err), 0);
	cr_assert_eq(len, 0);
	free(d);
}

Test(ns_files, read_refusals)
{
	struct canary_state before;
	sh("printf inside > f; ln -s f good-link; ln -s \"$C/secret\" bad-link; ln -s \"$C\" out; "
	   "ln -s /etc etc; mkdir dir; mkfifo fifo; "
	   "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'");
	canary_snapshot(&before);
	char *d = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	/* 9.22: a link, whether or not its target is legitimate. */
	expect(rd("good-link", NULL, 100, &d, &len, &err), &err, MSB_E_OS, "is a link",
	       "link inside");
	msb_error_free(err), err = NULL;
	expect(rd("bad-link", NULL, 100, &d, &len, &err), &err, MSB_E_OS, "is a link",
	       "link outside");
	msb_error_free(err), err = NULL;
	expect(rd("dir", NULL, 100, &d, &len, &err), &err, MSB_E_IS_DIRECTORY, "is a directory",
	       "directory");
	msb_error_free(err), err = NULL;
	expect(rd(".", NULL, 100, &d, &len, &err), &err, MSB_E_IS_DIRECTORY, "is a directory",
	       "the base");
	msb_error_free(err), err = NULL;
	expect(rd("missing", NULL, 100, &d, &len, &err), &err, MSB_E_NOT_FOUND, "no such file",
	       "missing");
	msb_error_free(err), err = NULL;
	expect(rd("nodir/missing", NULL, 100, &d, &len, &err), &err, MSB_E_NOT_FOUND,
	       "no such file", "missing parent");
	msb_error_free(err), err = NULL;
	/* A fifo with no writer must not hang the host. */
	expect(rd("fifo", NULL, 100, &d, &len, &err), &err, MSB_E_OS, "not a regular file", "fifo");
	msb_error_free(err), err = NULL;
	expect(rd("sock", NULL, 100, &d, &len, &err), &err, MSB_E_OS, "not a regular file",
	       "socket");
	msb_error_free(err), err = NULL;
	expect(rd("out/secret", NULL, 100, &d, &len, &err), &err, MSB_E_VALUE, "is a link",
	       "linked parent");
	msb_error_free(err), err = NULL;
	expect(rd("etc/passwd", NULL, 100000, &d, &len, &err), &err, MSB_E_VALUE, "is a link",
	       "linked parent to /etc");
	msb_error_free(err), err = NULL;
	expect(rd("secret", "out", 100, &d, &len, &err), &err, MSB_E_VALUE, "is a link",
	       "linked wd");
	msb_error_free(err), err = NULL;
	expect(rd("f/x", NULL, 100, &d, &len, &err), &err, MSB_E_NOT_DIRECTORY, "not a directory",
	       "file parent");
	msb_error_free(err), err = NULL;
	canary_unchanged(&before);
}

/* 9.23: over the cap is a refusal naming the cap and the file. */
Test(ns_files, read_cap)
{
	sh("mkdir sub; printf 01234567890 > sub/eleven");
	char *d = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	expect(rd("eleven", "sub", 10, &d, &len, &err), &err, MSB_E_TRANSFER_CAP_EXCEEDED,
	       "max_bytes_per_file", "11 bytes, cap 10");
	const char *cap = NULL, *file = NULL;
	cr_assert(msb_error_cap(err, &cap, &file));
	cr_assert_str_eq(cap, "max_bytes_per_file");
	cr_assert_str_eq(file, "eleven");
	cr_assert_null(d);
	msb_error_free(err), err = NULL;
	/* Whatever max_bytes says, the host never takes in more than the
	 * declared ceiling: a guest's sparse file costs it nothing to make. */
	sh("truncate -s 300M sub/sparse");
	expect(rd("sparse", "sub", UINT64_MAX, &d, &len, &err), &err, MSB_E_TRANSFER_CAP_EXCEEDED,
	       "268435456", "sparse file over the ceiling");
	msb_error_free(err);
}

/* 9.23: a file that grows while it is read is refused, never truncated. */
struct grower {
	pthread_t thread;
	int rc;
};

static void *grow(void *ud)
{
	struct grower *g = ud;
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "i=0; while [ $i -lt 4000 ]; do printf 0123456789 >> grow; i=$((i+1)); done";
	req.timeout = 60;
	msb_exec_result res = {0};
	g->rc = msb_sandbox_exec(sb, &req, &res, NULL);
	if (g->rc == 0 && res.exit_code != 0)
		g->rc = -1;
	msb_exec_result_clear(&res);
	return NULL;
}

Test(ns_files, read_cap_counts_what_it_reads)
{
	const uint64_t cap = 20000;
	wr_ok("grow", "", NULL);
	struct grower g = {0};
	cr_assert_eq(pthread_create(&g.thread, NULL, grow, &g), 0);
	int reads = 0, refusals = 0;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char *d = NULL;
		size_t len = 0;
		msb_error *err = NULL;
		int r = rd("grow", NULL, cap, &d, &len, &err);
		if (r == 0) {
			cr_assert_leq(len, cap, "read %zu bytes past the cap %" PRIu64, len, cap);
			for (size_t i = 0; i < len; i++)
				cr_assert_eq(d[i], '0' + (char)(i % 10), "byte %zu", i);
			reads++;
		} else {
			cr_assert_eq(r, MSB_E_TRANSFER_CAP_EXCEEDED, "%s", msb_error_message(err));
			refusals++;
		}
		free(d);
		msb_error_free(err);
		struct stat st;
		char host[160], p[200];
		host_work(host, sizeof(host));
		snprintf(p, sizeof(p), "%s/grow", host);
		if (stat(p, &st) == 0 && st.st_size >= 40000)
			break;
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		cr_assert_lt(t.tv_sec - t0.tv_sec, 60, "the writer never finished");
	}
	pthread_join(g.thread, NULL);
	cr_assert_eq(g.rc, 0);
	cr_assert_gt(reads, 0, "never read the file while it was under the cap");
	char *d = NULL;
	size_t len = 0;
	msb_error *err = NULL;
	expect(rd("grow", NULL, cap, &d, &len, &err), &err, MSB_E_TRANSFER_CAP_EXCEEDED,
	       "max_bytes_per_file", "after growth");
	msb_error_free(err);
	(void)refusals;
}

/* ---- list_dir (9.24) ------------------------------------------------------------ */

static const msb_entry *find(const msb_entry *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].path, path) == 0)
			return &v[i];
	return NULL;
}

Test(ns_files, list_dir)
{
	struct canary_state before;
	sh("printf abc > f; ln -s f link-file; ln -s \"$C\" linked-dir; ln -s /etc etc; "
	   "mkdir -p sub/inner; printf xy > sub/a; mkfifo fifo");
	canary_snapshot(&before);
	msb_entry *v = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_list_dir(sb, ".", NULL, &v, &n, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_eq(n, 6, "entries: %zu", n);
	for (size_t i = 1; i < n; i++)
		cr_assert_lt(strcmp(v[i - 1].path, v[i].path), 0, "sorted by name");
	const msb_entry *e = find(v, n, "link-file");
	cr_assert(e && e->kind == MSB_ENTRY_SYMLINK && !e->size_known, "link-file listed as link");
	e = find(v, n, "linked-dir");
	cr_assert(e && e->kind == MSB_ENTRY_SYMLINK, "linked-dir listed as link");
	e = find(v, n, "f");
	cr_assert(e && e->kind == MSB_ENTRY_FILE && e->size_known && e->size_bytes == 3);
	e = find(v, n, "sub");
	cr_assert(e && e->kind == MSB_ENTRY_DIRECTORY);
	e = find(v, n, "fifo");
	cr_assert(e && e->kind == MSB_ENTRY_OTHER);
	msb_entries_free(v, n);

	/* A child: paths stay relative to the working directory. */
	cr_assert_eq(msb_sandbox_list_dir(sb, "sub", NULL, &v, &n, &err), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(v[0].path, "sub/a");
	cr_assert_eq(v[0].size_bytes, 2);
	cr_assert_str_eq(v[1].path, "sub/inner");
	msb_entries_free(v, n);
	cr_assert_eq(msb_sandbox_list_dir(sb, ".", "sub", &v, &n, &err), 0);
	cr_assert(n == 2 && strcmp(v[0].path, "a") == 0);
	msb_entries_free(v, n);
	cr_assert_eq(msb_sandbox_list_dir(sb, "inner", "sub", &v, &n, &err), 0);
	cr_assert_eq(n, 0);
	msb_entries_free(v, n);

	v = NULL;
	expect(msb_sandbox_list_dir(sb, "linked-dir", NULL, &v, &n, &err), &err, MSB_E_VALUE,
	       "is a link", "list a linked dir");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_list_dir(sb, "etc", NULL, &v, &n, &err), &err, MSB_E_VALUE, "is a link",
	       "list a link to /etc");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_list_dir(sb, "linked-dir/sub", NULL, &v, &n, &err), &err, MSB_E_VALUE,
	       "is a link", "list through a linked parent");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_list_dir(sb, ".", "linked-dir", &v, &n, &err), &err, MSB_E_VALUE,
	       "is a link", "list a linked wd");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_list_dir(sb, "f", NULL, &v, &n, &err), &err, MSB_E_NOT_DIRECTORY,
	       "not a directory", "list a file");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_list_dir(sb, "missing", NULL, &v, &n, &err), &err, MSB_E_NOT_FOUND,
	       "no such directory", "list a missing dir");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_list_dir(sb, "..", NULL, &v, &n, &err), &err, MSB_E_VALUE, "outside",
	       "list above the base");
	msb_error_free(err);
	canary_unchanged(&before);
}

/* ---- remove (9.25) -------------------------------------------------------------- */

Test(ns_files, remove)
{
	struct canary_state before;
	sh("printf x > f; ln -s \"$C\" link; ln -s \"$C/secret\" file-link; mkdir emptydir; "
	   "mkdir -p tree/a/b; printf y > tree/a/b/c; ln -s \"$C\" tree/a/out; "
	   "ln -s /etc tree/etc; mkfifo tree/fifo; ln -s \"$C\" out; mkdir keep");
	canary_snapshot(&before);
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_remove(sb, "missing", NULL, false, &err), 0, "missing = success");
	cr_assert_eq(msb_sandbox_remove(sb, "missing/deeper", NULL, true, &err), 0);
	cr_assert_eq(msb_sandbox_remove(sb, "f", NULL, false, &err), 0);
	/* A link is unlinked, never followed. */
	cr_assert_eq(msb_sandbox_remove(sb, "link", NULL, false, &err), 0);
	cr_assert_eq(msb_sandbox_remove(sb, "file-link", NULL, true, &err), 0);
	/* A directory needs recursive, even empty. */
	expect(msb_sandbox_remove(sb, "emptydir", NULL, false, &err), &err, MSB_E_OS,
	       "needs recursive", "empty dir without recursive");
	msb_error_free(err), err = NULL;
	cr_assert_eq(msb_sandbox_remove(sb, "emptydir", NULL, true, &err), 0);
	/* Recursive removal unlinks the links inside, never what they reach. */
	cr_assert_eq(msb_sandbox_remove(sb, "tree", NULL, true, &err), 0, "%s",
		     msb_error_message(err));
	expect(msb_sandbox_remove(sb, ".", NULL, true, &err), &err, MSB_E_VALUE,
	       "working directory", "remove `.`");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_remove(sb, GUEST_BASE, NULL, true, &err), &err, MSB_E_VALUE,
	       "working directory", "remove the base by its absolute path");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_remove(sb, ".", "keep", true, &err), &err, MSB_E_VALUE,
	       "working directory", "remove a child wd itself");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_remove(sb, "../x", NULL, true, &err), &err, MSB_E_VALUE, "outside",
	       "remove ../x");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_remove(sb, "out/secret", NULL, true, &err), &err, MSB_E_VALUE,
	       "is a link", "remove through a linked parent");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_remove(sb, "sub", "out", true, &err), &err, MSB_E_VALUE, "is a link",
	       "remove in a linked wd");
	msb_error_free(err), err = NULL;
	cr_assert_str_eq(sh("ls -A"), "keep\nout\n");
	canary_unchanged(&before);
}

/* ---- reclaim (9.26, 9.27) -------------------------------------------------------- */

Test(ns_files, reclaim)
{
	struct canary_state before;
	sh("mkdir -p call1/x/y; printf z > call1/x/y/z; ln -s \"$C\" call1/out; mkdir call2; "
	   "mkdir -p sub/c; ln -s /etc etc-dir; ln -s \"$C\" out");
	canary_snapshot(&before);
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_reclaim(sb, "call1", NULL, 5, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_eq(msb_sandbox_reclaim(sb, GUEST_BASE "/call2", NULL, 5, &err), 0,
		     "legacy absolute inside");
	cr_assert_eq(msb_sandbox_reclaim(sb, "c", "sub", 5, &err), 0, "relative to a child wd");
	/* Absent: success (e.g. the guest removed it first). */
	cr_assert_eq(msb_sandbox_reclaim(sb, "call1", NULL, 5, &err), 0);
	cr_assert_eq(msb_sandbox_reclaim(sb, "never/was", NULL, 5, &err), 0);
	/* A target replaced by a link: the link goes, its target stays. */
	sh("mkdir call3; rmdir call3; ln -s \"$C\" call3");
	cr_assert_eq(msb_sandbox_reclaim(sb, "call3", NULL, 5, &err), 0);
	cr_assert_eq(msb_sandbox_reclaim(sb, "etc-dir", NULL, 5, &err), 0);
	cr_assert(access("/etc/passwd", F_OK) == 0);
	/* The reach rule. */
	expect(msb_sandbox_reclaim(sb, "..", NULL, 5, &err), &err, MSB_E_VALUE, "outside",
	       "reclaim ..");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_reclaim(sb, "..", "sub", 5, &err), &err, MSB_E_VALUE, "outside",
	       "reclaim .. of a child wd");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_reclaim(sb, ".", NULL, 5, &err), &err, MSB_E_VALUE, "working directory",
	       "reclaim the wd");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_reclaim(sb, GUEST_BASE, NULL, 5, &err), &err, MSB_E_VALUE,
	       "working directory", "reclaim the wd by absolute path");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_reclaim(sb, GUEST_BASE "/sub", "sub", 5, &err), &err, MSB_E_VALUE,
	       "working directory", "reclaim a child wd itself");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_reclaim(sb, "/etc", NULL, 5, &err), &err, MSB_E_VALUE, "outside",
	       "reclaim /etc");
	msb_error_free(err), err = NULL;
	expect(msb_sandbox_reclaim(sb, "out/sub", NULL, 5, &err), &err, MSB_E_VALUE, "is a link",
	       "reclaim through a linked parent");
	msb_error_free(err), err = NULL;
	cr_assert_str_eq(sh("ls -A; ls -A sub"), "out\nsub\n");
	canary_unchanged(&before);
}

/* ---- the race (issue 4, "Done when") --------------------------------------------
 *
 * One exec inside swaps `d` between a real directory and links to the canary
 * and to /etc (and renames a real directory away from under it) as fast as
 * it can, while the host writes, reads, stats, lists, removes and reclaims
 * through `d` in a loop. Nothing may land in, be read from, be listed from,
 * be removed from or be chmod'ed in the canary or /etc.
 */

static const char swapper[] = "import os, shutil, sys\n"
			      "c = sys.argv[1]\n"
			      "os.chdir('/maf-sandbox/work')\n"
			      "def quiet(f, *a):\n"
			      "    try: f(*a)\n"
			      "    except OSError: pass\n"
			      "def real():\n"
			      "    quiet(os.mkdir, 'd')\n"
			      "    try:\n"
			      "        with open('d/secret', 'w') as f: f.write('inside\\n')\n"
			      "    except OSError: pass\n"
			      "def clear():\n"
			      "    quiet(os.unlink, 'd')\n"
			      "    shutil.rmtree('d', ignore_errors=True)\n"
			      "n = 0\n"
			      "while not os.path.exists('stop'):\n"
			      "    for t in (c, '/etc', c + '/sub'):\n"
			      "        real(); clear(); quiet(os.symlink, t, 'd'); clear()\n"
			      "    real(); quiet(os.rename, 'd', 'd2'); quiet(os.symlink, c, 'd')\n"
			      "    clear(); shutil.rmtree('d2', ignore_errors=True)\n"
			      "    n += 1\n"
			      "print(n)\n";

struct swap_thread {
	pthread_t thread;
	int rc;
	int exit_code;
	long rounds;
};

static void *swap_main(void *ud)
{
	struct swap_thread *s = ud;
	const char *argv[] = {"python3", "-c", swapper, canary, NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 110;
	msb_exec_result res = {0};
	s->rc = msb_sandbox_exec(sb, &req, &res, NULL);
	s->exit_code = res.exit_code;
	if (res.stdout_bytes)
		s->rounds = strtol((char *)res.stdout_bytes, NULL, 10);
	msb_exec_result_clear(&res);
	return NULL;
}

static bool refusal_ok(int r)
{
	return r == 0 || r == MSB_E_VALUE || r == MSB_E_NOT_FOUND || r == MSB_E_NOT_DIRECTORY ||
	       r == MSB_E_IS_DIRECTORY || r == MSB_E_OS;
}

Test(ns_files, race_swapping_directories_for_links, .timeout = 240)
{
	struct canary_state before;
	canary_snapshot(&before);
	struct swap_thread sw = {0};
	cr_assert_eq(pthread_create(&sw.thread, NULL, swap_main, &sw), 0);
	int ok = 0, value = 0, other = 0;
	const int iterations = 3000;
	for (int i = 0; i < iterations; i++) {
		msb_error *err = NULL;
		int r;
#define TALLY(call)                                                                                \
	do {                                                                                       \
		r = (call);                                                                        \
		cr_assert(refusal_ok(r), "iteration %d: %s -> %s: %s", i, #call, msb_code_name(r), \
			  msb_error_message(err));                                                 \
		if (r == 0)                                                                        \
			ok++;                                                                      \
		else if (r == MSB_E_VALUE)                                                         \
			value++;                                                                   \
		else                                                                               \
			other++;                                                                   \
		msb_error_free(err);                                                               \
		err = NULL;                                                                        \
	} while (0)

		TALLY(wr("d/msb-race-f", "host", NULL, &err));
		TALLY(wr("msb-race-f", "host", "d", &err));
		TALLY(wr("sub/msb-race-f", "host", "d", &err));
		char *d = NULL;
		size_t len = 0;
		TALLY(rd("d/secret", NULL, 4096, &d, &len, &err));
		if (r == 0)
			cr_assert(len == 0 || (len == 7 && memcmp(d, "inside\n", 7) == 0),
				  "read something that is not the guest's own file");
		free(d);
		d = NULL;
		TALLY(rd("sub/secret", "d", 4096, &d, &len, &err));
		cr_assert_neq(r, 0, "read through d/sub: only the canary has a sub/secret");
		free(d);
		bool present = false;
		msb_entry e = {0};
		TALLY(msb_sandbox_stat_file(sb, "d/secret", NULL, &present, &e, &err));
		if (r == 0 && present)
			/* 0 while the guest's write is under way, never the canary's 24. */
			cr_assert(e.kind == MSB_ENTRY_FILE &&
					  (e.size_bytes == 0 || e.size_bytes == 7),
				  "stat reached a file that is not the guest's");
		msb_entry_clear(&e);
		TALLY(msb_sandbox_stat_file(sb, "d/sub/secret", NULL, &present, &e, &err));
		cr_assert(r != 0 || !present, "stat reached the canary's sub/secret");
		msb_entry_clear(&e);
		msb_entry *v = NULL;
		size_t n = 0;
		TALLY(msb_sandbox_list_dir(sb, "d", NULL, &v, &n, &err));
		for (size_t k = 0; r == 0 && k < n; k++)
			cr_assert(strcmp(v[k].path, "d/secret") == 0 ||
					  strcmp(v[k].path, "d/msb-race-f") == 0 ||
					  (strcmp(v[k].path, "d/sub") == 0 &&
					   v[k].kind == MSB_ENTRY_DIRECTORY),
				  "listed `%s`: not the guest's directory", v[k].path);
		msb_entries_free(v, n);
		TALLY(msb_sandbox_remove(sb, "d/secret", NULL, false, &err));
		TALLY(msb_sandbox_remove(sb, "d/sub", NULL, true, &err));
		if (i % 8 == 0)
			TALLY(msb_sandbox_remove(sb, "d", NULL, true, &err));
		if (i % 8 == 4)
			TALLY(msb_sandbox_reclaim(sb, "d", NULL, 5, &err));
#undef TALLY
	}
	wr_ok("stop", "", NULL);
	pthread_join(sw.thread, NULL);
	cr_assert_eq(sw.rc, 0, "the swapper's exec failed");
	cr_assert_eq(sw.exit_code, 0, "the swapper failed");
	cr_assert_gt(sw.rounds, 10, "the swapper hardly ran (%ld rounds)", sw.rounds);
	/* The race was real: both outcomes happened. */
	cr_assert_gt(ok, 0, "no call ever succeeded");
	cr_assert_gt(value, 0, "no call ever met a link");
	cr_log_info("race: %d ok, %d ValueError, %d other refusals; swapper %ld rounds", ok, value,
		    other, sw.rounds);
	cr_assert(access("/etc/msb-race-f", F_OK) < 0, "a file landed in /etc");
	cr_assert(access("/etc/sub", F_OK) < 0, "a directory landed in /etc");
	canary_unchanged(&before);
}
