/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Budgets on guest bytes (docs/security.md, issue 15 finding 4) against the
 * real `ns` backend: the guest plants listing bombs - many entries, long
 * names, paths past PATH_MAX, processes with long command lines - and each
 * budget the host reads them under refuses with its typed error, before the
 * host holds more than the budget: the test process's peak RSS
 * (getrusage ru_maxrss) grows by less than twice the budget. Checklist
 * 18.12-18.15 (fingerprint), 9.24 (list_dir). Needs root, msb-shim and
 * msb-agent (env MSB_SHIM, MSB_AGENT).
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>

/* AddressSanitizer's allocator keeps freed memory in quarantine and adds
 * redzones, so a sanitized build's peak RSS moves by a few times more for the
 * same allocations: the bounds below stay bounds, with that room. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_SLACK 4
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_SLACK 4
#endif
#endif
#ifndef RSS_SLACK
#define RSS_SLACK 1
#endif

#include "backends/ns/ns_snapshot.h"
#include "util/fs.h"

#define CAPS (MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST)

static char root[64];
static msb_backend *backend;
static msb_sandbox *sb;

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msbb-XXXXXX");
	cr_assert(mkdtemp(root));
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	/* The bombs' dentries and inodes are charged to the sandbox. */
	o.memory_bytes = (uint64_t)2 << 30;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder *b = msb_spec_builder_new("ns-budgets");
	msb_spec_builder_set_requires(b, CAPS);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(b);
	msb_key key = {.scope = "test", .thread_id = "budgets", .agent_dir = "/agent"};
	int r = msb_backend_acquire(backend, &key, spec, &sb, &err);
	msb_spec_unref(spec);
	if (r < 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", msb_error_message(err));
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
		msb__rm_rf(root);
		cr_assert_fail("acquire: %s", msg);
	}
}

static void teardown(void)
{
	msb_sandbox_free(sb);
	sb = NULL;
	bool clean = true;
	if (backend) {
		msb_scope_purge purge = {0};
		msb_error *err = NULL;
		int r = msb_backend_dispose_scope(backend, "test", "budgets", &purge, &err);
		clean = r == 0 && purge.undisposed == 0;
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
	}
	msb__rm_rf(root);
	cr_assert(clean, "disposal left something behind under %s", root);
}

TestSuite(ns_budgets, .init = setup, .fini = teardown, .timeout = 600);

/* ---- helpers ------------------------------------------------------------------ */

/* Creates, under guest directory argv[1], a chain of `depth` directories
 * named with `dlen` letters, and in the last one `files` empty files named
 * with `flen` characters. Names are relative: the chain may pass PATH_MAX. */
static const char planter[] = "import os, sys\n"
			      "where, depth, files, dlen, flen = sys.argv[1], *map(int, "
			      "sys.argv[2:6])\n"
			      "os.makedirs(where, exist_ok=True)\n"
			      "os.chdir(where)\n"
			      "for _ in range(depth):\n"
			      "    os.mkdir('d' * dlen)\n"
			      "    os.chdir('d' * dlen)\n"
			      "for i in range(files):\n"
			      "    os.close(os.open(str(i).rjust(flen, 'f'), os.O_CREAT | "
			      "os.O_WRONLY, 0o644))\n";

static void plant(const char *where, int depth, int files, int dlen, int flen)
{
	char a[4][16];
	snprintf(a[0], sizeof(a[0]), "%d", depth);
	snprintf(a[1], sizeof(a[1]), "%d", files);
	snprintf(a[2], sizeof(a[2]), "%d", dlen);
	snprintf(a[3], sizeof(a[3]), "%d", flen);
	const char *argv[] = {"python3", "-c", planter, where, a[0], a[1], a[2], a[3], NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 300;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "plant: %s",
		     msb_error_message(err));
	cr_assert_eq(res.exit_code, 0, "plant: %s", (char *)res.stderr_bytes);
	msb_exec_result_clear(&res);
}

static void sh_ok(const char *cmd)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = cmd;
	req.timeout = 60;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "`%s`: %s", cmd,
		     msb_error_message(err));
	cr_assert_eq(res.exit_code, 0, "`%s`: %s", cmd, (char *)res.stderr_bytes);
	msb_exec_result_clear(&res);
}

/* The peak resident set of this test process so far, in bytes. */
static uint64_t peak_rss(void)
{
	struct rusage ru;
	cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return (uint64_t)ru.ru_maxrss * 1024;
}

static void expect(int r, msb_error *err, int code, const char *phrase, const char *what)
{
	cr_assert_eq(r, code, "%s: got %s (%d) `%s`, want %s", what, msb_code_name(r), r,
		     err ? msb_error_message(err) : "", msb_code_name(code));
	cr_assert(err && msb_error_code(err) == code, "%s: error object code", what);
	cr_assert(strstr(msb_error_message(err), phrase), "%s: `%s` lacks `%s`", what,
		  msb_error_message(err), phrase);
}

/* The sandbox's agent socket: <root>/ns/<the one sandbox>/agent.sock. */
static void sock_path(char *out, size_t size)
{
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/ns", root);
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	out[0] = '\0';
	for (struct dirent *de; (de = readdir(d));)
		if (strncmp(de->d_name, "msb-", 4) == 0)
			snprintf(out, size, "%s/%s/agent.sock", dir, de->d_name);
	closedir(d);
	cr_assert(out[0], "no sandbox under %s", dir);
}

static int fingerprint_within(const msb_ns_fingerprint_budget *b, msb_fingerprint *fp,
			      msb_error **err)
{
	char sock[512];
	sock_path(sock, sizeof(sock));
	*strrchr(sock, '/') = '\0'; /* the sandbox's state directory */
	int dfd = open(sock, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cr_assert_geq(dfd, 0, "%s", sock);
	bool supported = false;
	int r = msb_ns__snapshot_fingerprint_within(dfd, sock, MSB_DEFAULT_WORK_DIR, b, &supported,
						    fp, err);
	close(dfd);
	return r;
}

static size_t strv_len(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

/* ---- fingerprint -------------------------------------------------------------- */

/* Issue 15 finding 4: 255,000 long names made `msb serve` peak at 2.2 GB.
 * 300,000 entries of 240-byte names are ~75 MB of paths: each leg of the
 * budget refuses first, and the host holds no more than that leg. */
Test(ns_budgets, fingerprint_listing_bomb_is_refused_within_the_budget)
{
	plant("/tmp/bomb", 0, 300000, 0, 240);
	msb_fingerprint fp = {NULL, NULL};
	msb_error *err = NULL;

	/* A small byte budget: refused, and the host's peak barely moves. */
	msb_ns_fingerprint_budget small = MSB_NS_FINGERPRINT_BUDGET_INIT;
	small.max_path_bytes = 1 << 20;
	uint64_t before = peak_rss();
	int r = fingerprint_within(&small, &fp, &err);
	uint64_t grew = peak_rss() - before;
	expect(r, err, MSB_E_RUNTIME, "cannot attest: more than 1048576 bytes of changed paths",
	       "small byte budget");
	cr_assert_lt(grew, RSS_SLACK * ((uint64_t)2 << 20), "peak RSS grew by %" PRIu64 " bytes",
		     grew);
	msb_error_free(err);
	err = NULL;

	/* A small count budget. */
	msb_ns_fingerprint_budget few = MSB_NS_FINGERPRINT_BUDGET_INIT;
	few.max_paths = 1000;
	r = fingerprint_within(&few, &fp, &err);
	expect(r, err, MSB_E_RUNTIME, "cannot attest: more than 1000 changed paths",
	       "small count budget");
	msb_error_free(err);
	err = NULL;

	/* The default, through the public API: the byte leg (16 MiB) refuses
	 * before the count leg (262,144) is reached. */
	bool supported = false;
	before = peak_rss();
	r = msb_sandbox_fingerprint(sb, &supported, &fp, &err);
	grew = peak_rss() - before;
	expect(r, err, MSB_E_RUNTIME, "cannot attest: more than 16777216 bytes of changed paths",
	       "default budget");
	cr_assert_lt(grew, RSS_SLACK * 2 * (uint64_t)MSB_NS_FINGERPRINT_MAX_PATH_BYTES,
		     "peak RSS grew by %" PRIu64 " bytes", grew);
	msb_error_free(err);
}

/* Fewer entries, each near PATH_MAX: ~20 MB of paths in 5,000 entries, far
 * below the count leg - the byte leg alone refuses. */
Test(ns_budgets, fingerprint_long_paths_meet_the_byte_budget)
{
	plant("/tmp", 15, 5000, 250, 200);
	msb_fingerprint fp = {NULL, NULL};
	msb_error *err = NULL;
	bool supported = false;
	uint64_t before = peak_rss();
	int r = msb_sandbox_fingerprint(sb, &supported, &fp, &err);
	uint64_t grew = peak_rss() - before;
	expect(r, err, MSB_E_RUNTIME, "more than 16777216 bytes of changed paths", "long paths");
	cr_assert_lt(grew, RSS_SLACK * 2 * (uint64_t)MSB_NS_FINGERPRINT_MAX_PATH_BYTES,
		     "peak RSS grew by %" PRIu64 " bytes", grew);
	msb_error_free(err);
}

/* One path past PATH_MAX (made by relative mkdir/chdir) is refused by the
 * per-path leg; below it the same tree is attested. */
Test(ns_budgets, fingerprint_refuses_a_path_past_path_max)
{
	plant("/tmp/ok", 15, 1, 250, 200);
	msb_fingerprint fp = {NULL, NULL};
	msb_error *err = NULL;
	bool supported = false;
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	size_t ok = 0;
	for (size_t i = 0; i < strv_len(fp.changed_paths); i++)
		ok += strncmp(fp.changed_paths[i], "/tmp/ok", 7) == 0;
	cr_assert_eq(ok, 17, "/tmp/ok, 15 directories, 1 file");
	msb_fingerprint_clear(&fp);

	plant("/tmp/deep", 16, 1, 250, 250);
	int r = msb_sandbox_fingerprint(sb, &supported, &fp, &err);
	expect(r, err, MSB_E_RUNTIME, "one of the changed paths is longer than 4096 bytes",
	       "past PATH_MAX");
	msb_error_free(err);
}

static size_t programs_with(const msb_fingerprint *fp, const char *needle)
{
	size_t n = 0;
	for (size_t i = 0; fp->running_programs && fp->running_programs[i]; i++)
		n += strstr(fp->running_programs[i], needle) != NULL;
	return n;
}

/* The process legs: four survivors with ~500-byte command lines. */
Test(ns_budgets, fingerprint_process_budgets)
{
	char cmd[2048];
	char pad[501];
	memset(pad, 'p', 500);
	pad[500] = '\0';
	snprintf(cmd, sizeof(cmd),
		 "for i in 1 2 3 4; do setsid python3 -c 'import time; time.sleep(300)' %s "
		 "</dev/null >/dev/null 2>&1 & done",
		 pad);
	sh_ok(cmd);

	/* Under the default budget they are attested (once all four run python). */
	msb_fingerprint fp = {NULL, NULL};
	msb_error *err = NULL;
	size_t seen = 0;
	for (int i = 0; i < 1000 && seen < 4; i++) {
		cr_assert_eq(fingerprint_within(NULL, &fp, &err), 0, "%s",
			     err ? msb_error_message(err) : "");
		seen = programs_with(&fp, pad);
		msb_fingerprint_clear(&fp);
		if (seen < 4)
			usleep(10000);
	}
	cr_assert_eq(seen, 4, "the four survivors");

	msb_ns_fingerprint_budget few = MSB_NS_FINGERPRINT_BUDGET_INIT;
	few.max_procs = 2;
	int r = fingerprint_within(&few, &fp, &err);
	expect(r, err, MSB_E_RUNTIME, "cannot attest: more than 2 processes", "process count");
	msb_error_free(err);
	err = NULL;

	msb_ns_fingerprint_budget small = MSB_NS_FINGERPRINT_BUDGET_INIT;
	small.max_proc_bytes = 1024;
	r = fingerprint_within(&small, &fp, &err);
	expect(r, err, MSB_E_RUNTIME, "cannot attest: more than 1024 bytes of processes",
	       "process bytes");
	msb_error_free(err);
}

/* ---- list_dir ----------------------------------------------------------------- */

Test(ns_budgets, list_dir_entry_budget)
{
	plant(MSB_DEFAULT_WORK_DIR "/many", 0, 65537, 0, 8);
	msb_entry *v = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	int r = msb_sandbox_list_dir(sb, "many", NULL, &v, &n, &err);
	expect(r, err, MSB_E_OS, "has more than 65536 entries", "65537 entries");
	msb_error_free(err);
	err = NULL;
	sh_ok("rm " MSB_DEFAULT_WORK_DIR "/many/fffff123");
	cr_assert_eq(msb_sandbox_list_dir(sb, "many", NULL, &v, &n, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(n, 65536);
	msb_entries_free(v, n);
}

/* 5,000 entries whose paths (relative to the working directory) are ~4,000
 * bytes each: the byte leg refuses, within its budget. */
Test(ns_budgets, list_dir_byte_budget)
{
	plant(MSB_DEFAULT_WORK_DIR, 15, 5000, 250, 200);
	char dir[15 * 251];
	char *p = dir;
	for (int i = 0; i < 15; i++) {
		memset(p, 'd', 250);
		p[250] = i < 14 ? '/' : '\0';
		p += 251;
	}
	msb_entry *v = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	uint64_t before = peak_rss();
	int r = msb_sandbox_list_dir(sb, dir, NULL, &v, &n, &err);
	uint64_t grew = peak_rss() - before;
	expect(r, err, MSB_E_OS, "more than 16777216 bytes of entry paths", "long paths");
	cr_assert_lt(grew, RSS_SLACK * ((uint64_t)32 << 20), "peak RSS grew by %" PRIu64 " bytes",
		     grew);
	msb_error_free(err);
	err = NULL;
	/* The same directory listed from inside it: short paths, within budget. */
	cr_assert_eq(msb_sandbox_list_dir(sb, ".", dir, &v, &n, &err), 0, "%s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(n, 5000);
	msb_entries_free(v, n);
}

/* ---- descriptors (issue 15 finding 9) ------------------------------------------- */

static unsigned open_fds(void)
{
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d);
	for (struct dirent *de; (de = readdir(d));)
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

/* In a child whose RLIMIT_NOFILE leaves `spare` descriptors free, acquire a
 * fresh key; the child writes the outcome ("ok" or the message) to out. */
static int acquire_with_spare(unsigned spare, char *out, size_t size)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		msb_spec_builder *b = msb_spec_builder_new("ns-fds");
		msb_spec_builder_set_requires(b, MSB_CAP_EXEC);
		msb_spec *spec = NULL;
		msb_spec_build(b, &spec, NULL);
		msb_spec_builder_free(b);
		msb_key key = {.scope = "test", .thread_id = "fds", .agent_dir = "/agent"};
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = open_fds() + spare;
		setrlimit(RLIMIT_NOFILE, &rl);
		msb_sandbox *s = NULL;
		msb_error *err = NULL;
		int r = msb_backend_acquire(backend, &key, spec, &s, &err);
		const char *m = r == 0 ? "ok" : msb_error_message(err);
		ssize_t w = write(p[1], m, strlen(m));
		(void)w;
		_exit(r == 0 ? 0 : r == MSB_E_OS ? 1 : 2);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t n;
	while (got < size - 1 && (n = read(p[0], out + got, size - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	int st = 0;
	waitpid(pid, &st, 0);
	msb_scope_purge purge = {0};
	msb_backend_dispose_scope(backend, "test", "fds", &purge, NULL);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A process out of descriptors is told so - not that a fresh key's sandbox
 * is stale, nor that work/ is not a directory - whichever descriptor the
 * acquire would have run out at; with enough free it succeeds. */
Test(ns_budgets, out_of_file_descriptors_is_said_as_such)
{
	static const unsigned spare[] = {0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 63};
	char msg[1024];
	for (size_t i = 0; i < sizeof(spare) / sizeof(spare[0]); i++) {
		int st = acquire_with_spare(spare[i], msg, sizeof(msg));
		cr_assert_eq(st, 1, "%u spare: exit %d: %s", spare[i], st, msg);
		cr_assert(strstr(msg, "out of file descriptors"), "%u spare: %s", spare[i], msg);
		cr_assert_null(strstr(msg, "stale"), "%u spare: %s", spare[i], msg);
		cr_assert_null(strstr(msg, "must be a directory"), "%u spare: %s", spare[i], msg);
	}
	cr_assert_eq(acquire_with_spare(96, msg, sizeof(msg)), 0, "%s", msg);
}
