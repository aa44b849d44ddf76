/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb conformance --escape BACKEND: the in-sandbox escape suite
 * (docs/security.md). Places msb-escape-probe in a sandbox through the file
 * plane, runs it, and judges every attempt it reports against the outcome
 * expected here - never against what the guest says it expected, since the
 * guest is untrusted - and cross-checks the host: a canary file outside,
 * another sandbox's file, a host process, a host abstract socket and TCP
 * listener, the host's hostname and clock, and the sandbox still serving.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <msb/engine.h>
#include <msb/ns.h>
#include <msb/oci_backend.h>

#include "cli.h"
#include "conformance_cli.h"
#include "escape_expect.h"

#ifndef MSB_LIBEXECDIR
#define MSB_LIBEXECDIR "/usr/local/libexec"
#endif

/*
 * The limits the probed sandbox runs with: small, so the fill probes end
 * fast. The memory limit is below what ns's tmpfs mounts would hold at their
 * configured sizes (the writable layer plus a 64 MiB /dev/shm) on purpose:
 * the backend must size them down so that filling them cannot take the
 * memory limit and the agent with it (docs/ns.md, "Memory covers files in
 * tmpfs").
 */
#define ESC_MEMORY (64ull << 20)
#define ESC_PIDS 64ull
#define ESC_WRITABLE (16ull << 20)

struct host {
	char dir[64];	    /* the canary directory */
	char canary[128];   /* its secret file */
	char canary_w[128]; /* where the guest must not create a file */
	char token[40];	    /* the canary's bytes */
	char neighbour_token[48];
	char abstract[48];
	int abstract_fd, tcp_fd, tcp_port;
	pid_t sleeper;
	char sentinel[128];	 /* a host file the guest's links point at */
	char sentinel_token[48]; /* its bytes */
	char hostname[256];
	double clock_offset; /* realtime - monotonic, seconds */
};

static double clock_offset(void)
{
	struct timespec r, m;
	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return (double)(r.tv_sec - m.tv_sec) + (double)(r.tv_nsec - m.tv_nsec) / 1e9;
}

static int host_setup(struct host *h, msb_error **err)
{
	char tag[17];
	cli_random_hex(tag, 8);
	snprintf(h->dir, sizeof(h->dir), "/tmp/msb-escape-XXXXXX");
	if (!mkdtemp(h->dir))
		return msb_error_set(err, MSB_E_OS, "mkdtemp: %s", strerror(errno));
	snprintf(h->canary, sizeof(h->canary), "%s/secret.txt", h->dir);
	snprintf(h->canary_w, sizeof(h->canary_w), "%s/written-by-guest", h->dir);
	snprintf(h->token, sizeof(h->token), "msb-canary-%s", tag);
	int fd = open(h->canary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, h->token, strlen(h->token)) < 0) {
		if (fd >= 0)
			close(fd);
		return msb_error_set(err, MSB_E_OS, "cannot plant the canary: %s", strerror(errno));
	}
	close(fd);
	/* The link-swap probe aims its links at this file and its directory: a
	 * host syscall that followed one would change its mode, owner or bytes,
	 * or remove it. Root-owned (as msb runs) and 0600, like the one the
	 * issue 15 attack made 0666. */
	cli_random_hex(tag, 8);
	snprintf(h->sentinel, sizeof(h->sentinel), "%s/sentinel", h->dir);
	snprintf(h->sentinel_token, sizeof(h->sentinel_token), "msb-sentinel-%s", tag);
	fd = open(h->sentinel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0600) < 0 ||
	    write(fd, h->sentinel_token, strlen(h->sentinel_token)) < 0) {
		if (fd >= 0)
			close(fd);
		return msb_error_set(err, MSB_E_OS, "cannot plant the sentinel: %s",
				     strerror(errno));
	}
	close(fd);
	cli_random_hex(tag, 8);
	snprintf(h->neighbour_token, sizeof(h->neighbour_token), "msb-neighbour-%s", tag);

	/* A host abstract socket and a loopback TCP listener, never accepted. */
	snprintf(h->abstract, sizeof(h->abstract), "msb-escape-%s", tag);
	h->abstract_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	memcpy(un.sun_path + 1, h->abstract, strlen(h->abstract));
	socklen_t ul =
		(socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(h->abstract));
	if (h->abstract_fd < 0 || bind(h->abstract_fd, (struct sockaddr *)&un, ul) < 0 ||
	    listen(h->abstract_fd, 4) < 0)
		return msb_error_set(err, MSB_E_OS, "host abstract socket: %s", strerror(errno));
	h->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t il = sizeof(in);
	if (h->tcp_fd < 0 || bind(h->tcp_fd, (struct sockaddr *)&in, sizeof(in)) < 0 ||
	    listen(h->tcp_fd, 4) < 0 || getsockname(h->tcp_fd, (struct sockaddr *)&in, &il) < 0)
		return msb_error_set(err, MSB_E_OS, "host TCP listener: %s", strerror(errno));
	h->tcp_port = ntohs(in.sin_port);

	/* A host process for the guest to try to signal. */
	h->sleeper = fork();
	if (h->sleeper == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	if (h->sleeper < 0)
		return msb_error_set(err, MSB_E_OS, "fork: %s", strerror(errno));
	gethostname(h->hostname, sizeof(h->hostname) - 1);
	h->clock_offset = clock_offset();
	return 0;
}

static void host_teardown(struct host *h)
{
	if (h->sleeper > 0) {
		kill(h->sleeper, SIGKILL);
		waitpid(h->sleeper, NULL, 0);
	}
	if (h->abstract_fd > 0)
		close(h->abstract_fd);
	if (h->tcp_fd > 0)
		close(h->tcp_fd);
	if (h->dir[0] && strncmp(h->dir, "/tmp/msb-escape-", 16) == 0) {
		unlink(h->canary);
		unlink(h->canary_w);
		unlink(h->sentinel);
		rmdir(h->dir);
	}
}

/* ---- sandboxes --------------------------------------------------------------------- */

static int find_probe(char *out, size_t size, msb_error **err)
{
	const char *env = getenv("MSB_ESCAPE_PROBE");
	if (env) {
		snprintf(out, size, "%s", env);
		return 0;
	}
	if (cli_beside_binary("conformance/escape/msb-escape-probe", R_OK, out, size))
		return 0;
	snprintf(out, size, "%s/msb-escape-probe", MSB_LIBEXECDIR);
	if (access(out, R_OK) == 0)
		return 0;
	return msb_error_set(err, MSB_E_NOT_FOUND,
			     "msb-escape-probe not found: set MSB_ESCAPE_PROBE or install it in "
			     "`%s`",
			     MSB_LIBEXECDIR);
}

static int acquire(msb_backend *b, const msb_key *key, const char *kind, bool limited,
		   msb_sandbox **out, msb_error **err)
{
	/* The engines have no writable-layer bound to ask for on their usual
	 * storage (docs/engine.md): the probe fills to four times ESC_WRITABLE
	 * and the expectation says so. */
	bool writable = msb_engine_backend_socket(b) == NULL;
	msb_spec_builder *sb = msb_spec_builder_new(kind);
	msb_spec_builder_set_requires(sb, MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	if (limited) {
		msb_spec_builder_set_memory_bytes(sb, ESC_MEMORY);
		msb_spec_builder_set_pids_max(sb, ESC_PIDS);
		if (writable)
			msb_spec_builder_set_writable_bytes(sb, ESC_WRITABLE);
	}
	msb_spec *spec = NULL;
	int r = msb_spec_build(sb, &spec, err);
	msb_spec_builder_free(sb);
	if (r == 0)
		r = msb_backend_acquire(b, key, spec, out, err);
	msb_spec_unref(spec);
	return r < 0 ? msb_error_wrap(err, "acquiring the `%s` sandbox", kind) : 0;
}

/* The state directory name of the sandbox (key's thread, kind): the
 * labels.json under <root>/<sub>/ that names them (ns, oci). */
static bool sandbox_name(cli_conformance_args *a, const char *thread, const char *kind, char *out,
			 size_t size)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%.4000s/%s", a->state_root, a->state_sub);
	DIR *d = opendir(dir);
	if (!d)
		return false;
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "msb-", 4) != 0)
			continue;
		char path[4400];
		snprintf(path, sizeof(path), "%s/%.64s/labels.json", dir, de->d_name);
		json_t *l = json_load_file(path, 0, NULL);
		const char *t = json_string_value(json_object_get(l, "thread_id"));
		const char *k = json_string_value(json_object_get(l, "kind"));
		if (t && k && strcmp(t, thread) == 0 && strcmp(k, kind) == 0) {
			snprintf(out, size, "%.63s", de->d_name);
			found = true;
		}
		json_decref(l);
	}
	closedir(d);
	return found;
}

/*
 * A container engine's host paths the probe is aimed at: the engine's own
 * socket (what drives the sandbox from outside), the neighbour's secret and
 * this sandbox's storage base under the containers' root filesystems as the
 * engine reports them. 0 when the backend is no engine (nothing written).
 */
static int engine_paths(msb_backend *b, msb_sandbox *sb, msb_sandbox *neighbour, char *shim,
			char *nfile, char *work, msb_error **err)
{
	const char *engine_sock = msb_engine_backend_socket(b);
	if (!engine_sock)
		return 0;
	char *root = NULL, *nroot = NULL;
	if (msb_engine_sandbox_host_root(neighbour, &nroot, err) < 0 ||
	    msb_engine_sandbox_host_root(sb, &root, err) < 0) {
		free(nroot);
		return msb_error_wrap(err, "the sandboxes' host paths");
	}
	snprintf(shim, PATH_MAX, "%.3900s", engine_sock);
	snprintf(nfile, PATH_MAX, "%.3900s%s/neighbour-secret.txt", nroot, MSB_DEFAULT_WORK_DIR);
	snprintf(work, PATH_MAX, "%.3900s%s", root, MSB_DEFAULT_WORK_DIR);
	free(root);
	free(nroot);
	return 1;
}

static int exec_in(msb_sandbox *sb, const char *const *argv, double timeout, msb_exec_result *res,
		   msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = timeout;
	*res = (msb_exec_result){0};
	return msb_sandbox_exec(sb, &req, res, err);
}

/* ---- verdicts --------------------------------------------------------------------------- */

struct verdicts {
	bool json;
	json_t *rows;
	size_t passed, failed;
};

static void verdict(struct verdicts *v, const char *probe, const char *outcome,
		    const char *expected, bool ok, const char *detail, const char *why)
{
	if (ok)
		v->passed++;
	else
		v->failed++;
	if (v->json) {
		json_array_append_new(v->rows,
				      json_pack("{s:s, s:s, s:s, s:b, s:s, s:s?}", "probe", probe,
						"outcome", outcome, "expected", expected, "ok", ok,
						"detail", detail ? detail : "", "why", why));
	} else {
		printf("%-24s %-10s %-10s %-4s %s\n", probe, outcome, expected, ok ? "ok" : "FAIL",
		       detail ? detail : "");
	}
}

static bool contains(const uint8_t *hay, size_t n, const char *needle)
{
	size_t l = strlen(needle);
	for (size_t i = 0; l && i + l <= n; i++)
		if (memcmp(hay + i, needle, l) == 0)
			return true;
	return false;
}

static void judge(struct verdicts *v, const msb_exec_result *res, const char *backend,
		  const char *runtime)
{
	json_t **seen = calloc(cli_escape_n_expectations, sizeof(*seen));
	if (!seen) {
		verdict(v, "probe-report", "error", "-", false, "out of memory", NULL);
		return;
	}
	const char *p = (const char *)res->stdout_bytes, *end = p + res->stdout_len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		json_t *o = json_loadb(p, len, 0, NULL);
		p += len + 1;
		const char *name = o ? json_string_value(json_object_get(o, "probe")) : NULL;
		size_t i = 0;
		while (name && i < cli_escape_n_expectations &&
		       strcmp(cli_escape_expectations[i].probe, name) != 0)
			i++;
		if (!name || i == cli_escape_n_expectations || seen[i]) {
			verdict(v, name ? name : "(unreadable line)", "?", "-", false,
				name ? "a probe the host does not expect, or reported twice"
				     : "the guest printed a line that is not a probe report",
				NULL);
			json_decref(o);
			continue;
		}
		seen[i] = o;
	}
	for (size_t i = 0; i < cli_escape_n_expectations; i++) {
		const struct cli_expectation *e = &cli_escape_expectations[i];
		if (!seen[i]) {
			verdict(v, e->probe, "missing", cli_escape_expected_for(backend, e), false,
				"the guest did not report this probe", NULL);
			continue;
		}
		const char *outcome = json_string_value(json_object_get(seen[i], "outcome"));
		const char *detail = json_string_value(json_object_get(seen[i], "detail"));
		const char *why = json_string_value(json_object_get(seen[i], "why"));
		outcome = outcome ? outcome : "?";
		const struct cli_difference *d = cli_escape_difference_of(runtime, e->probe);
		if (d && strcmp(outcome, d->outcome) == 0 && detail &&
		    strcmp(detail, d->detail) == 0) {
			char note[768];
			snprintf(note, sizeof(note), "%s (%s: %s)", detail, d->runtime, d->why);
			verdict(v, e->probe, outcome, d->outcome, true, note, why);
		} else {
			const char *want = cli_escape_expected_for(backend, e);
			verdict(v, e->probe, outcome, want, cli_escape_outcome_ok(want, outcome),
				detail, why);
		}
		json_decref(seen[i]);
	}
	free(seen);
}

/* ---- the listing bomb: the host's budgets on guest bytes ------------------------------ */

/* Where the guest plants it (its storage base), relative to the base. */
#define BOMB_DIR "msb-listing-bomb"
/* What a host may take in from one listing (docs/security.md, "Budgets on
 * guest bytes"), and how far its peak memory may move reading one. */
#define LISTING_BUDGET ((uint64_t)16 << 20)
#define LISTING_PEAK (4 * LISTING_BUDGET)

static uint64_t peak_rss(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? (uint64_t)ru.ru_maxrss * 1024 : 0;
}

/* The guest planted ~26 MB of long names: fingerprint and list_dir must each
 * refuse typed (or hand back no more than the budget), and the host's peak
 * RSS must move by less than LISTING_PEAK while they read. */
static void listing_check(struct verdicts *v, msb_sandbox *sb)
{
	char d[512];
	uint64_t before = peak_rss();
	bool supported = false;
	msb_fingerprint fp = {NULL, NULL};
	msb_error *fe = NULL;
	int fr = msb_sandbox_fingerprint(sb, &supported, &fp, &fe);
	uint64_t took = 0;
	for (size_t i = 0; fr == 0 && fp.changed_paths && fp.changed_paths[i]; i++)
		took += strlen(fp.changed_paths[i]) + 1;
	msb_fingerprint_clear(&fp);
	msb_entry *ents = NULL;
	size_t n = 0;
	msb_error *le = NULL;
	int lr = msb_sandbox_list_dir(sb, BOMB_DIR, NULL, &ents, &n, &le);
	uint64_t listed = 0;
	for (size_t i = 0; lr == 0 && i < n; i++)
		listed += strlen(ents[i].path) + 1;
	if (lr == 0)
		msb_entries_free(ents, n);
	uint64_t grew = peak_rss() - before;
	const char *outcome = "contained";
	if (lr == MSB_E_NOT_FOUND) {
		outcome = "error";
		snprintf(d, sizeof(d), "the guest planted no listing bomb");
	} else if (took > LISTING_BUDGET || listed > LISTING_BUDGET || grew >= LISTING_PEAK) {
		outcome = "escaped";
		snprintf(d, sizeof(d),
			 "the host took in %llu bytes of fingerprint paths and %llu of listing, "
			 "its peak RSS +%llu MiB",
			 (unsigned long long)took, (unsigned long long)listed,
			 (unsigned long long)(grew >> 20));
	} else {
		snprintf(d, sizeof(d), "fingerprint: %.160s; list_dir: %.160s; peak RSS +%llu MiB",
			 fr < 0	      ? msb_error_message(fe)
			 : !supported ? "not served by this backend"
				      : "within the budget",
			 lr < 0 ? msb_error_message(le) : "within the budget",
			 (unsigned long long)(grew >> 20));
	}
	verdict(v, "host:listing-bomb", outcome, "contained", strcmp(outcome, "contained") == 0, d,
		"a guest listing the host reads is refused typed past its budget, in bounded "
		"memory");
	msb_error_free(fe);
	msb_error_free(le);
}

/* The owner, on the host, of a file the guest's root makes in the storage
 * base: never host root (the sandbox's user namespace maps it elsewhere). */
static void owner_check(struct verdicts *v, msb_sandbox *sb, const char *work, const char *backend)
{
	const char *want = cli_escape_expected_for_probe(backend, "host:guest-root-unprivileged");
	want = want ? want : "blocked";
	char detail[PATH_MAX + 96];
	if (strcmp(backend, "vm") == 0) {
		/* The guest's files are in the guest: what holds guest root on
		 * the host is the VMM, which must not be host root. */
		uid_t uid = 0;
		bool seen = cli_escape_vmm_uid(work, &uid, detail, sizeof(detail));
		const char *outcome = !seen ? "error" : uid ? "blocked" : "escaped";
		verdict(v, "host:guest-root-unprivileged", outcome, "blocked", seen && uid, detail,
			"guest root is the guest kernel's; what holds the guest on the host must "
			"not be host root");
		return;
	}
	const char *mk[] = {"/bin/sh", "-c", ": > msb-owner-check", NULL};
	msb_exec_result r;
	msb_error *err = NULL;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%.4000s/msb-owner-check", work);
	struct stat st;
	if (exec_in(sb, mk, 30, &r, &err) < 0 || r.exit_code != 0 || lstat(path, &st) < 0) {
		snprintf(detail, sizeof(detail), "no file to look at: %s",
			 err ? msb_error_message(err) : strerror(errno));
		verdict(v, "host:guest-root-unprivileged", "error", want, false, detail, NULL);
	} else {
		snprintf(detail, sizeof(detail), "the guest's root makes files as host uid %u",
			 (unsigned)st.st_uid);
		const char *outcome = st.st_uid ? "blocked" : "escaped";
		verdict(v, "host:guest-root-unprivileged", outcome, want,
			cli_escape_outcome_ok(want, outcome), detail,
			"guest root must not be host root: its files say whose it is");
	}
	if (err == NULL)
		msb_exec_result_clear(&r);
	msb_error_free(err);
}

static void host_checks(struct verdicts *v, struct host *h, const msb_exec_result *res,
			msb_sandbox *sb)
{
	bool leak = contains(res->stdout_bytes, res->stdout_len, h->token) ||
		    contains(res->stderr_bytes, res->stderr_len, h->token);
	verdict(v, "host:canary-unread", leak ? "escaped" : "blocked", "blocked", !leak,
		leak ? "the canary's bytes came back from the guest" : "no canary byte came back",
		"a host file's content must never cross");
	leak = contains(res->stdout_bytes, res->stdout_len, h->neighbour_token) ||
	       contains(res->stderr_bytes, res->stderr_len, h->neighbour_token);
	verdict(v, "host:neighbour-unread", leak ? "escaped" : "blocked", "blocked", !leak,
		leak ? "the other sandbox's secret came back" : "the other sandbox's file stayed",
		"another sandbox's content must never cross");
	struct stat st;
	bool made = lstat(h->canary_w, &st) == 0;
	verdict(v, "host:canary-uncreated", made ? "escaped" : "blocked", "blocked", !made,
		made ? "the guest created a file in the host's canary directory" : h->canary_w,
		"nothing the guest does may create a host file");
	char now[256] = "";
	gethostname(now, sizeof(now) - 1);
	bool same = strcmp(now, h->hostname) == 0;
	verdict(v, "host:hostname-unchanged", same ? "blocked" : "escaped", "blocked", same, now,
		"a hostname change must not leak out of the UTS namespace");
	double drift = clock_offset() - h->clock_offset;
	bool steady = drift > -2 && drift < 2;
	char d[64];
	snprintf(d, sizeof(d), "realtime moved %+.3f s against monotonic", drift);
	verdict(v, "host:clock-unchanged", steady ? "blocked" : "escaped", "blocked", steady, d,
		"the clock is not namespaced: a guest change would move the host's");
	bool alive = waitpid(h->sleeper, NULL, WNOHANG) == 0 && kill(h->sleeper, 0) == 0;
	verdict(v, "host:process-unsignalled", alive ? "blocked" : "escaped", "blocked", alive,
		alive ? "the host sleeper lives" : "the host sleeper was killed",
		"a guest must not signal a process outside");
	const char *tr[] = {"true", NULL};
	msb_exec_result r2;
	msb_error *err = NULL;
	int rc = exec_in(sb, tr, 30, &r2, &err);
	bool serves = rc == 0 && r2.exit_code == 0;
	verdict(v, "host:sandbox-still-serves", serves ? "contained" : "broken", "contained",
		serves, serves ? "exec after the probes works" : msb_error_message(err),
		"the fills, kill-pid1 and signal-pid1 must leave the sandbox serving");
	msb_exec_result_clear(&r2);
	msb_error_free(err);
}

/* ---- link swaps in the storage base (issue 15) ------------------------------------------
 *
 * The guest's link-swap-storage-base probe swaps every name the host is about
 * to use in the storage base for a link to the sentinel (or its directory)
 * for SWAP_SECONDS, in an exec of its own. Meanwhile the host does what it
 * does there while a sandbox runs: starts and stops the native host-tool
 * socket, writes, reads and removes files and trees through the file plane.
 * Then, and again after the disposal has removed what the guest left (links
 * out, a closed directory), the sentinel must be as it was.
 */
#define SWAP_SECONDS "4"

struct sentinel_state {
	bool present;
	mode_t mode, dir_mode;
	uid_t uid;
	gid_t gid;
	off_t size;
	struct timespec mtime;
	char bytes[64];
	int dir_entries;
};

static void sentinel_read(const struct host *h, struct sentinel_state *s)
{
	memset(s, 0, sizeof(*s));
	struct stat st;
	if (lstat(h->sentinel, &st) < 0)
		return;
	s->present = true;
	s->mode = st.st_mode;
	s->uid = st.st_uid;
	s->gid = st.st_gid;
	s->size = st.st_size;
	s->mtime = st.st_mtim;
	int fd = open(h->sentinel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, s->bytes, sizeof(s->bytes) - 1);
		(void)n;
		close(fd);
	}
	if (lstat(h->dir, &st) == 0)
		s->dir_mode = st.st_mode;
	DIR *d = opendir(h->dir);
	for (struct dirent *de; d && (de = readdir(d));)
		s->dir_entries += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	if (d)
		closedir(d);
}

/* "" when unchanged, else what changed (static buffer). */
static const char *sentinel_change(const struct sentinel_state *was,
				   const struct sentinel_state *now)
{
	static char why[160];
	why[0] = '\0';
	if (!now->present)
		snprintf(why, sizeof(why), "the sentinel is gone");
	else if (now->mode != was->mode)
		snprintf(why, sizeof(why), "the sentinel's mode went from %o to %o",
			 was->mode & 07777, now->mode & 07777);
	else if (now->uid != was->uid || now->gid != was->gid)
		snprintf(why, sizeof(why), "the sentinel's owner went from %d:%d to %d:%d",
			 (int)was->uid, (int)was->gid, (int)now->uid, (int)now->gid);
	else if (now->size != was->size || strcmp(now->bytes, was->bytes) != 0 ||
		 now->mtime.tv_sec != was->mtime.tv_sec || now->mtime.tv_nsec != was->mtime.tv_nsec)
		snprintf(why, sizeof(why), "the sentinel's bytes were written");
	else if (now->dir_mode != was->dir_mode)
		snprintf(why, sizeof(why), "the sentinel's directory's mode went from %o to %o",
			 was->dir_mode & 07777, now->dir_mode & 07777);
	else if (now->dir_entries != was->dir_entries)
		snprintf(why, sizeof(why), "the sentinel's directory went from %d entries to %d",
			 was->dir_entries, now->dir_entries);
	return why;
}

struct swap_exec {
	msb_sandbox *sb;
	const char *const *argv;
	msb_exec_result res;
	int rc;
	msb_error *err;
	volatile int done;
};

static void *swap_exec_main(void *arg)
{
	struct swap_exec *x = arg;
	x->rc = exec_in(x->sb, x->argv, 120, &x->res, &x->err);
	x->done = 1;
	return NULL;
}

struct swap_work {
	unsigned starts, writes, reads, removals;
	bool read_sentinel; /* a read came back with the sentinel's bytes */
};

/* The host's side, until the guest's exec ends. Refusals are expected (the
 * guest's links are refused, never followed): what counts is the sentinel. */
static void swap_host_work(msb_sandbox *sb, const struct host *h, struct swap_exec *x,
			   struct swap_work *w)
{
	msb_host_tool_registry_options ro = MSB_HOST_TOOL_REGISTRY_OPTIONS_INIT;
	msb_host_tool_registry *reg = NULL;
	msb_host_tool_run *run = NULL;
	if (msb_host_tool_registry_new(&ro, &reg, NULL) == 0)
		msb_host_tool_run_new(reg, NULL, NULL, &run, NULL);
	static const char text[] = "written by the host during the link-swap probe\n";
	while (!x->done) {
		msb_native_server *srv = NULL;
		if (run && msb_ns_host_tools_attach(sb, run, NULL, NULL, &srv, NULL) == 0) {
			w->starts++;
			msb_native_server_stop(srv);
		}
		w->writes += msb_sandbox_write_file(sb, "swap-target.txt", (const uint8_t *)text,
						    sizeof(text) - 1, NULL, NULL) == 0;
		uint8_t *got = NULL;
		size_t n = 0;
		if (msb_sandbox_read_file(sb, "swap-target.txt", NULL, 4096, &got, &n, NULL) == 0) {
			w->reads++;
			w->read_sentinel |= contains(got, n, h->sentinel_token);
			free(got);
		}
		w->removals += msb_sandbox_remove(sb, "swap-tree", NULL, true, NULL) == 0;
		w->removals += msb_sandbox_reclaim(sb, "swap-tree", NULL, 5, NULL) == 0;
	}
	msb_host_tool_run_free(run);
	msb_host_tool_registry_unref(reg);
}

/* Run the probe alone with the host at work; its report goes into *res. */
static void link_swap_phase(msb_sandbox *sb, const struct host *h, const char *const *base_argv,
			    size_t n_base, msb_exec_result *res, struct swap_work *w, char *failure,
			    size_t fsize)
{
	const char *argv[64];
	size_t k = 0;
	for (size_t i = 0; i < n_base && k < 40; i++)
		argv[k++] = base_argv[i];
	argv[k++] = "--only";
	argv[k++] = "link-swap-storage-base";
	argv[k++] = "--swap-base";
	argv[k++] = MSB_DEFAULT_WORK_DIR;
	argv[k++] = "--swap-target";
	argv[k++] = h->sentinel;
	argv[k++] = "--swap-dir";
	argv[k++] = h->dir;
	argv[k++] = "--swap-seconds";
	argv[k++] = SWAP_SECONDS;
	argv[k] = NULL;
	struct swap_exec x = {.sb = sb, .argv = argv};
	pthread_t t;
	failure[0] = '\0';
	if (pthread_create(&t, NULL, swap_exec_main, &x) != 0) {
		snprintf(failure, fsize, "no thread for the probe");
		return;
	}
	swap_host_work(sb, h, &x, w);
	pthread_join(t, NULL);
	if (x.rc < 0)
		snprintf(failure, fsize, "the probe's exec failed: %s", msb_error_message(x.err));
	msb_error_free(x.err);
	*res = x.res;
}

static void swap_verdict(struct verdicts *v, const char *probe, const struct sentinel_state *was,
			 const struct host *h, const char *when, bool read_sentinel,
			 const char *why)
{
	struct sentinel_state now;
	sentinel_read(h, &now);
	const char *change = sentinel_change(was, &now);
	bool ok = !*change && !read_sentinel;
	char detail[512];
	if (read_sentinel)
		snprintf(detail, sizeof(detail),
			 "a read in the storage base returned the sentinel");
	else if (*change)
		snprintf(detail, sizeof(detail), "%s %s", change, when);
	else
		snprintf(detail, sizeof(detail), "the sentinel kept its mode, owner and bytes %s",
			 when);
	verdict(v, probe, ok ? "blocked" : "escaped", "blocked", ok, detail, why);
}

/* stdout and stderr of two runs, one after the other (for the judge). */
static int join_results(const msb_exec_result *a, const msb_exec_result *b, msb_exec_result *out)
{
	*out = (msb_exec_result){0};
	out->stdout_bytes = malloc(a->stdout_len + b->stdout_len + 1);
	out->stderr_bytes = malloc(a->stderr_len + b->stderr_len + 1);
	if (!out->stdout_bytes || !out->stderr_bytes) {
		free(out->stdout_bytes);
		free(out->stderr_bytes);
		*out = (msb_exec_result){0};
		return -1;
	}
	if (a->stdout_len)
		memcpy(out->stdout_bytes, a->stdout_bytes, a->stdout_len);
	if (b->stdout_len)
		memcpy(out->stdout_bytes + a->stdout_len, b->stdout_bytes, b->stdout_len);
	out->stdout_len = a->stdout_len + b->stdout_len;
	out->stdout_bytes[out->stdout_len] = 0;
	if (a->stderr_len)
		memcpy(out->stderr_bytes, a->stderr_bytes, a->stderr_len);
	if (b->stderr_len)
		memcpy(out->stderr_bytes + a->stderr_len, b->stderr_bytes, b->stderr_len);
	out->stderr_len = a->stderr_len + b->stderr_len;
	out->stderr_bytes[out->stderr_len] = 0;
	out->exit_code = a->exit_code;
	return 0;
}

/* The probe's command line, against what the host planted; the strings it
 * points into live in the struct. */
struct probe_argv {
	char port[16], pid[16], mem[32], pids[32], wr[32];
	const char *argv[32];
	size_t n_main; /* the main run's arguments, less --only and the NULL */
};

static void probe_argv(struct probe_argv *pa, const struct host *h, const char *shim,
		       const char *nfile, const char *backend)
{
	snprintf(pa->port, sizeof(pa->port), "%d", h->tcp_port);
	snprintf(pa->pid, sizeof(pa->pid), "%d", (int)h->sleeper);
	snprintf(pa->mem, sizeof(pa->mem), "%llu", ESC_MEMORY);
	snprintf(pa->pids, sizeof(pa->pids), "%llu", ESC_PIDS);
	snprintf(pa->wr, sizeof(pa->wr), "%llu", ESC_WRITABLE);
	const char *v[] = {MSB_DEFAULT_WORK_DIR "/msb-escape-probe",
			   "--canary",
			   h->canary,
			   "--canary-write",
			   h->canary_w,
			   "--neighbour",
			   nfile,
			   "--shim-sock",
			   shim,
			   "--abstract",
			   h->abstract,
			   "--tcp-port",
			   pa->port,
			   "--host-pid",
			   pa->pid,
			   "--memory",
			   pa->mem,
			   "--pids",
			   pa->pids,
			   "--writable",
			   pa->wr,
			   "--bomb",
			   MSB_DEFAULT_WORK_DIR "/" BOMB_DIR,
			   "--init",
			   cli_escape_init_for(backend),
			   getenv("MSB_ESCAPE_ONLY") ? "--only" : NULL,
			   getenv("MSB_ESCAPE_ONLY"),
			   NULL};
	_Static_assert(sizeof(v) / sizeof(v[0]) <= sizeof(pa->argv) / sizeof(pa->argv[0]),
		       "probe argv fits");
	memcpy(pa->argv, v, sizeof(v));
	pa->n_main = sizeof(v) / sizeof(v[0]) - 3;
}

/* The disposal removes what the guest left in the storage base: links to
 * the sentinel and its directory, a closed directory. Judged against the
 * sentinel as the swaps left it (`sentinel`), so that each check tells its
 * own finding. */
static void disposal_check(struct verdicts *v, msb_backend *b, const msb_key *key,
			   const struct sentinel_state *sentinel, const struct host *h)
{
	msb_disposal_failure *df = NULL;
	msb_error *derr = NULL;
	int drc = msb_backend_dispose(b, key, "escape", NULL, &df, &derr);
	if (drc < 0 || df)
		verdict(v, "host:disposal-sentinel", "error", "blocked", false,
			df && df->detail ? df->detail
			: derr		 ? msb_error_message(derr)
					 : "the disposal failed",
			"removing the storage base must never walk outside it");
	else
		swap_verdict(v, "host:disposal-sentinel", sentinel, h,
			     "after the disposal removed the guest's links", false,
			     "removing the storage base must never walk outside it");
	msb_disposal_failure_free(df);
	msb_error_free(derr);
}

/* The verdicts as JSON or a table's summary line; the exit status. */
static int report(struct verdicts *v, const cli_conformance_args *a)
{
	if (a->json) {
		json_t *top =
			json_pack("{s:s, s:o, s:I, s:I}", "backend", a->backend, "probes", v->rows,
				  "passed", (json_int_t)v->passed, "failed", (json_int_t)v->failed);
		v->rows = NULL;
		char *text = top ? json_dumps(top, JSON_COMPACT) : NULL;
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(top);
	} else {
		printf("\n%s escape suite: %zu passed, %zu failed\n", a->backend, v->passed,
		       v->failed);
	}
	return v->failed ? msb_code_exit_status(MSB_E_CONFORMANCE_FAILURE) : 0;
}

/* The probed sandbox and its neighbour: disposed, or a warning. */
static void dispose_both(msb_backend *b, const msb_key *key)
{
	const char *kinds[] = {"escape", "escape-neighbour"};
	for (size_t i = 0; i < 2; i++) {
		msb_disposal_failure *f = NULL;
		msb_error *derr = NULL;
		if (msb_backend_dispose(b, key, kinds[i], NULL, &f, &derr) < 0 || f)
			fprintf(stderr, "msb: warning: the %s sandbox was not disposed: %s\n",
				kinds[i],
				f && f->detail ? f->detail
				: derr	       ? msb_error_message(derr)
					       : "");
		msb_disposal_failure_free(f);
		msb_error_free(derr);
	}
}

/* The probed sandbox's shim socket, the neighbour's file and the probed
 * sandbox's storage base by their host paths (PATH_MAX each), and the probe
 * made executable. */
static int locate_and_chmod(cli_conformance_args *a, const char *thread, msb_backend *b,
			    msb_sandbox *sb, msb_sandbox *neighbour, char *shim, char *nfile,
			    char *work, msb_error **err)
{
	char name[64] = "", nname[64] = "";
	int e = engine_paths(b, sb, neighbour, shim, nfile, work, err);
	if (e < 0)
		return e;
	if (e == 0 && (!sandbox_name(a, thread, "escape", name, sizeof(name)) ||
		       !sandbox_name(a, thread, "escape-neighbour", nname, sizeof(nname))))
		return msb_error_set(err, MSB_E_RUNTIME,
				     "the sandboxes are not recorded under the state root `%s`",
				     a->state_root);
	if (e == 0) {
		snprintf(shim, PATH_MAX, "%.3900s/%s/%.64s/shim.sock", a->state_root, a->state_sub,
			 name);
		snprintf(nfile, PATH_MAX, "%.3900s/%s/%.64s/work/neighbour-secret.txt",
			 a->state_root, a->state_sub, nname);
		snprintf(work, PATH_MAX, "%.3900s/%s/%.64s/work", a->state_root, a->state_sub,
			 name);
	}
	const char *chmod_argv[] = {"chmod", "0755", "msb-escape-probe", NULL};
	msb_exec_result res = {0};
	int rc = exec_in(sb, chmod_argv, 30, &res, err);
	if (rc == 0 && res.exit_code != 0)
		rc = msb_error_set(err, MSB_E_RUNTIME, "chmod of the probe exited %d",
				   res.exit_code);
	msb_exec_result_clear(&res);
	return rc < 0 ? rc : 0;
}

int cli_escape(cli_conformance_args *a)
{
	msb_error *err = NULL;
	msb_backend *b = NULL;
	if (cli_conformance_backend(a, &b, &err) < 0)
		return cli_fail(err);
	msb_isolation iso;
	if (msb_isolation_parse(msb_backend_isolation(b), &iso, NULL) < 0 ||
	    msb_isolation_rank(iso) <= msb_isolation_rank(MSB_ISOLATION_NONE)) {
		msb_error_set(&err, MSB_E_NOT_IMPLEMENTED,
			      "backend `%s` declares isolation `%s`: it has no boundary, so the "
			      "escape suite does not apply",
			      a->backend, msb_backend_isolation(b));
		msb_backend_unref(b);
		return cli_fail(err);
	}
	char probe_path[PATH_MAX];
	char *bin = NULL;
	size_t bin_len = 0;
	if (find_probe(probe_path, sizeof(probe_path), &err) < 0 ||
	    cli_read_file(probe_path, &bin, &bin_len, &err) < 0) {
		msb_backend_unref(b);
		return cli_fail(err);
	}

	struct host h = {0};
	int status = 0;
	char tag[17], thread[40];
	cli_random_hex(tag, 8);
	snprintf(thread, sizeof(thread), "escape-%s", tag);
	msb_key key = {"conformance", thread, "conformance", NULL};
	msb_sandbox *neighbour = NULL, *sb = NULL;
	msb_exec_result res = {0}, swap_res = {0};
	struct verdicts v = {.json = a->json, .rows = json_array()};
	if (host_setup(&h, &err) < 0 ||
	    acquire(b, &key, "escape-neighbour", false, &neighbour, &err) < 0 ||
	    msb_sandbox_write_file(neighbour, "neighbour-secret.txt",
				   (const uint8_t *)h.neighbour_token, strlen(h.neighbour_token),
				   NULL, &err) < 0 ||
	    acquire(b, &key, "escape", true, &sb, &err) < 0 ||
	    msb_sandbox_write_file(sb, "msb-escape-probe", (const uint8_t *)bin, bin_len, NULL,
				   &err) < 0) {
		status = cli_fail(err);
		goto out;
	}
	char shim[PATH_MAX] = "", nfile[PATH_MAX] = "", base[PATH_MAX] = "";
	if (locate_and_chmod(a, thread, b, sb, neighbour, shim, nfile, base, &err) < 0) {
		status = cli_fail(err);
		goto out;
	}
	struct probe_argv pa;
	probe_argv(&pa, &h, shim, nfile, a->backend);
	const char *const *argv = pa.argv;
	if (!a->json)
		printf("%-24s %-10s %-10s %-4s %s\n", "PROBE", "OUTCOME", "EXPECTED", "OK",
		       "DETAIL");
	/* First, on a fresh sandbox, the link swaps with the host at work. */
	struct sentinel_state sentinel;
	sentinel_read(&h, &sentinel);
	struct swap_work work = {0};
	char swap_failure[512];
	/* The main run's argv, less its --only and the NULL. */
	link_swap_phase(sb, &h, argv, pa.n_main, &swap_res, &work, swap_failure,
			sizeof(swap_failure));
	if (swap_failure[0])
		verdict(&v, "link-swap-run", "broken", "completed", false, swap_failure,
			"the link-swap probe must run while the host works");
	char when[160];
	snprintf(when, sizeof(when),
		 "through %u native starts, %u writes, %u reads and %u removals under the "
		 "swaps",
		 work.starts, work.writes, work.reads, work.removals);

	/* A run the sandbox did not survive is itself the finding: every probe
	 * it did not report is missing, and the host is still checked. */
	int run_rc = exec_in(sb, argv, 300, &res, &err);
	if (run_rc < 0) {
		verdict(&v, "probe-run", "broken", "completed", false, msb_error_message(err),
			"the probe run must end with a report, not take the sandbox down");
		msb_error_free(err);
		err = NULL;
		msb_exec_result_clear(&res);
	}
	msb_exec_result all = {0};
	if (join_results(&res, &swap_res, &all) < 0) {
		msb_error_set(&err, MSB_E_NOMEM, "out of memory");
		status = cli_fail(err);
		goto out;
	}
	judge(&v, &all, a->backend, msb_oci_backend_runtime(b));
	host_checks(&v, &h, &all, sb);
	owner_check(&v, sb, base, a->backend);
	msb_exec_result_clear(&all);
	listing_check(&v, sb);
	if (run_rc == 0 && res.exit_code != 0)
		verdict(&v, "probe-exit-status", "error", "0", false, "the probe binary failed",
			NULL);
	swap_verdict(&v, "host:link-swap-sentinel", &sentinel, &h, when, work.read_sentinel,
		     "a host syscall on a name the guest swapped for a link must not follow it");
	/* Then the disposal removes what the guest left in the storage base:
	 * links to the sentinel and its directory, a closed directory. Judged
	 * against the sentinel as the swaps left it, so that each check tells
	 * its own finding. */
	sentinel_read(&h, &sentinel);
	msb_sandbox_free(sb);
	sb = NULL;
	disposal_check(&v, b, &key, &sentinel, &h);
	status = report(&v, a);
out:
	json_decref(v.rows);
	msb_exec_result_clear(&res);
	msb_exec_result_clear(&swap_res);
	msb_sandbox_free(sb);
	msb_sandbox_free(neighbour);
	dispose_both(b, &key);
	host_teardown(&h);
	free(bin);
	msb_backend_unref(b);
	return status;
}
