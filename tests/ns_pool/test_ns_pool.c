/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `ns` warm pool against real sandboxes (issue 17, docs/pool.md): a
 * sandbox claimed from the pool is indistinguishable to a workload from one
 * made for its key (host name, /etc, labels, empty storage base and writable
 * layer, no process left from the pool's own checks), also after a reset;
 * two processes claiming at once get two different sandboxes; a pooled
 * sandbox gone stale (its shim killed, its agent killed) or made from
 * another template is never handed out; refills happen after a claim; a
 * drain leaves nothing. Needs root (cgroups) or unprivileged user namespaces.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msb/msb.h>

static char root[64];

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msb-pool-%d", (int)getpid());
	mkdir(root, 0700);
}

static msb_backend *backend(unsigned pool_size, uint64_t memory)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.pool_size = pool_size;
	o.memory_bytes = memory;
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &err), 0, "%s", msb_error_message(err));
	return b;
}

static msb_spec *spec_of(uint64_t memory)
{
	msb_spec_builder *sb = msb_spec_builder_new("codeact");
	msb_spec_builder_set_isolation_scope(sb, MSB_SCOPE_CONVERSATION);
	if (memory)
		msb_spec_builder_set_memory_bytes(sb, memory);
	msb_spec *spec = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(sb, &spec, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder_free(sb);
	return spec;
}

static void teardown(void)
{
	msb_backend *b = backend(0, 0);
	msb_scope_purge p = {0};
	msb_backend_dispose_scope(b, "tenant", "pool-a", &p, NULL);
	msb_backend_dispose_scope(b, "tenant", "pool-b", &p, NULL);
	msb_backend_dispose_scope(b, "tenant", "pool-c", &p, NULL);
	msb_ns_pool_drain(b, NULL, NULL, NULL);
	msb_backend_unref(b);
	char ns[96];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	rmdir(ns);
	rmdir(root);
}

TestSuite(pool, .init = setup, .fini = teardown, .timeout = 240);

/* ---- helpers ---------------------------------------------------------------- */

/* Alive and not a zombie (a reparented process may wait to be reaped). */
static bool alive(int64_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* How many pooled sandboxes are in `state` (any: NULL); 9999 when the list
 * fails. No assertion inside: it is called within assertions. */
static unsigned pooled(msb_backend *b, const char *state, int64_t *shim)
{
	msb_ns_pool_entry *e = NULL;
	size_t n = 0;
	if (msb_ns_pool_list(b, &e, &n, NULL) < 0)
		return 9999;
	unsigned k = 0;
	for (size_t i = 0; i < n; i++)
		if (!state || strcmp(e[i].state, state) == 0) {
			if (shim)
				*shim = e[i].shim_pid;
			k++;
		}
	msb_ns_pool_entries_free(e, n);
	return k;
}

static msb_sandbox *acquire(msb_backend *b, const char *thread, const msb_spec *spec)
{
	msb_key key = {"tenant", thread, "pooltest", NULL};
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_acquire(b, &key, spec, &sb, &err), 0, "%s",
		     msb_error_message(err));
	return sb;
}

static void dispose(msb_backend *b, const char *thread)
{
	msb_key key = {"tenant", thread, "pooltest", NULL};
	msb_disposal_failure *f = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_dispose(b, &key, NULL, NULL, &f, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_null(f);
}

/* What `msb ls` knows of the key: its name and shim. */
static void entry_of(const char *thread, char *name, size_t size, int64_t *shim, char *instance,
		     size_t isize)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_ns_entry *e = NULL;
	size_t n = 0;
	cr_assert_eq(msb_ns_list(&o, &e, &n, NULL), 0);
	bool found = false;
	for (size_t i = 0; i < n; i++)
		if (e[i].thread_id && strcmp(e[i].thread_id, thread) == 0) {
			cr_assert_str_eq(e[i].scope, "tenant");
			cr_assert_str_eq(e[i].agent_dir, "pooltest");
			cr_assert_str_eq(e[i].kind, "codeact");
			cr_assert(e[i].alive);
			snprintf(name, size, "%s", e[i].name);
			if (shim)
				*shim = e[i].shim_pid;
			if (instance)
				snprintf(instance, isize, "%s", e[i].instance_id);
			found = true;
		}
	msb_ns_entries_free(e, n);
	cr_assert(found, "no sandbox labelled for `%s`", thread);
}

static char *run(msb_sandbox *sb, const char *shell)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = shell;
	req.timeout = 30;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(res.exit_code, 0, "`%s`: %s", shell, (char *)res.stderr_bytes);
	char *out = strdup((char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	return out;
}

/* Replace every `name` in s with NAME. */
static void mask(char *s, const char *name)
{
	size_t n = strlen(name);
	for (char *p = strstr(s, name); p; p = strstr(p, name)) {
		memcpy(p, "NAME", 4);
		memmove(p + 4, p + n, strlen(p + n) + 1);
	}
}

/* Nothing changed and nothing runs: what a fresh sandbox shows. */
static void assert_pristine(msb_sandbox *sb)
{
	bool supported = false;
	msb_fingerprint fp = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert(supported);
	cr_assert(!fp.changed_paths || !fp.changed_paths[0], "changed: %s", fp.changed_paths[0]);
	cr_assert(!fp.running_programs || !fp.running_programs[0], "running: %s",
		  fp.running_programs[0]);
	msb_fingerprint_clear(&fp);
}

/* What a workload sees of its sandbox's identity and emptiness, one line
 * each; the sandbox's own name is masked by the caller. (Processes are the
 * fingerprint's: a count from inside would count the probe's own.) */
#define PROBE                                                                                      \
	"hostname; cat /etc/hostname; cat /etc/hosts; ls -A /maf-sandbox/work | wc -l; "           \
	"cat /proc/sys/kernel/hostname; uname -n; id -u; "                                         \
	"cat /proc/self/cgroup; ls -A /tmp /var/tmp /dev/shm | tr '\\n' ' '; echo; "               \
	"env | grep -v '^_=' | sort"

static bool wait_ready(msb_backend *b, unsigned want)
{
	for (int i = 0; i < 400; i++) {
		if (pooled(b, "ready", NULL) >= want)
			return true;
		struct timespec ts = {0, 25 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return false;
}

/* ---- a claimed sandbox is a fresh one ------------------------------------------ */

Test(pool, claimed_is_indistinguishable_from_fresh)
{
	msb_backend *b = backend(0, 0);
	msb_spec *spec = spec_of(0);
	msb_error *err = NULL;

	/* Fresh, made for its key: there is no pool. */
	msb_sandbox *fresh = acquire(b, "pool-a", spec);
	char fresh_name[64];
	entry_of("pool-a", fresh_name, sizeof(fresh_name), NULL, NULL, 0);
	assert_pristine(fresh);
	char *want = run(fresh, PROBE);
	mask(want, fresh_name);

	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, spec, 1, &made, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(made, 1);
	int64_t pool_shim = 0;
	cr_assert_eq(pooled(b, "ready", &pool_shim), 1);
	cr_assert_gt(pool_shim, 0);

	msb_sandbox *sb = acquire(b, "pool-b", spec);
	/* It is the pooled one (its shim), under the key's name, labels and a
	 * new instance, and the pool is empty (this backend keeps none). */
	char name[64], instance[64];
	int64_t shim = 0;
	entry_of("pool-b", name, sizeof(name), &shim, instance, sizeof(instance));
	cr_assert_eq(shim, pool_shim, "not the pooled sandbox");
	cr_assert_str_eq(instance, msb_sandbox_instance_id(sb));
	cr_assert_eq(pooled(b, NULL, NULL), 0);
	cr_assert_str_neq(name, fresh_name);

	/* Nothing from the pool's own checks: nothing changed, nothing runs. */
	assert_pristine(sb);
	char *got = run(sb, PROBE);
	mask(got, name);
	cr_assert_str_eq(got, want, "pooled:\n%s\nfresh:\n%s", got, want);
	cr_assert(strstr(want, "NAME\nNAME\n127.0.0.1\tlocalhost NAME\n"), "%s", want);
	free(got);

	/* A reset makes it again under its own name, not the pool's. */
	cr_assert_eq(msb_sandbox_reset(sb, 30, &err), 0, "%s", msb_error_message(err));
	got = run(sb, PROBE);
	mask(got, name);
	cr_assert_str_eq(got, want, "after reset:\n%s\nfresh:\n%s", got, want);
	free(got);

	/* The same handle semantics: warm reuse of the key finds it. */
	msb_sandbox *again = acquire(b, "pool-b", spec);
	cr_assert_str_eq(msb_sandbox_instance_id(again), msb_sandbox_instance_id(sb));
	msb_sandbox_free(again);

	free(want);
	msb_sandbox_free(sb);
	msb_sandbox_free(fresh);
	dispose(b, "pool-a");
	dispose(b, "pool-b");
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

/* ---- two processes claiming at once get two sandboxes ------------------------- */

#define CLAIMERS 4

Test(pool, concurrent_claims_get_different_sandboxes)
{
	msb_backend *b = backend(0, 0);
	msb_spec *spec = spec_of(0);
	msb_error *err = NULL;
	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, spec, CLAIMERS, &made, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_eq(made, CLAIMERS);
	msb_ns_pool_entry *e = NULL;
	size_t n = 0;
	cr_assert_eq(msb_ns_pool_list(b, &e, &n, NULL), 0);
	cr_assert_eq(n, CLAIMERS);
	int64_t shims[CLAIMERS];
	for (size_t i = 0; i < n; i++)
		shims[i] = e[i].shim_pid;
	msb_ns_pool_entries_free(e, n);

	/* CLAIMERS processes, released at once, each claiming for its own key. */
	int go[2];
	cr_assert_eq(pipe(go), 0);
	pid_t kids[CLAIMERS];
	char threads[CLAIMERS][16];
	for (int i = 0; i < CLAIMERS; i++) {
		snprintf(threads[i], sizeof(threads[i]), "pool-k%d", i);
		kids[i] = fork();
		cr_assert_geq(kids[i], 0);
		if (kids[i] == 0) {
			close(go[1]);
			char c;
			if (read(go[0], &c, 1) != 0)
				_exit(3);
			msb_backend *cb = backend(0, 0);
			msb_key key = {"tenant", threads[i], "pooltest", NULL};
			msb_sandbox *sb = NULL;
			int r = msb_backend_acquire(cb, &key, spec, &sb, NULL);
			msb_sandbox_free(sb);
			msb_backend_unref(cb);
			_exit(r == 0 ? 0 : 1);
		}
	}
	close(go[0]);
	close(go[1]); /* all start */
	for (int i = 0; i < CLAIMERS; i++) {
		int st = 0;
		cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "claimer %d failed", i);
	}
	int64_t got[CLAIMERS];
	for (int i = 0; i < CLAIMERS; i++) {
		char name[64];
		entry_of(threads[i], name, sizeof(name), &got[i], NULL, 0);
		bool from_pool = false;
		for (int k = 0; k < CLAIMERS; k++)
			from_pool |= got[i] == shims[k];
		cr_assert(from_pool, "claimer %d did not get a pooled sandbox", i);
		for (int k = 0; k < i; k++)
			cr_assert_neq(got[i], got[k],
				      "one pooled sandbox went to claimers %d and %d", k, i);
		/* Each serves under its own name. */
		msb_sandbox *sb = acquire(b, threads[i], spec);
		char *h = run(sb, "hostname");
		cr_assert_eq(strncmp(h, name, strlen(name)), 0, "%s vs %s", h, name);
		free(h);
		msb_sandbox_free(sb);
		dispose(b, threads[i]);
	}
	cr_assert_eq(pooled(b, NULL, NULL), 0);
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

/* A claim in progress holds the pooled sandbox's lock: another passes it
 * over rather than wait for it or take it too. */
Test(pool, a_locked_pooled_sandbox_is_passed_over)
{
	msb_backend *b = backend(0, 0);
	msb_spec *spec = spec_of(0);
	msb_error *err = NULL;
	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, spec, 2, &made, &err), 0, "%s", msb_error_message(err));
	msb_ns_pool_entry *e = NULL;
	size_t n = 0;
	cr_assert_eq(msb_ns_pool_list(b, &e, &n, NULL), 0);
	cr_assert_eq(n, 2);
	char path[256];
	snprintf(path, sizeof(path), "%s/ns/pool/%s/%s", root, e[0].template_id, e[0].name);
	int64_t held_shim = e[0].shim_pid, other_shim = e[1].shim_pid;
	msb_ns_pool_entries_free(e, n);
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0, "%s", path);
	cr_assert_eq(flock(fd, LOCK_EX), 0);

	msb_sandbox *sb = acquire(b, "pool-a", spec);
	char name[64];
	int64_t shim = 0;
	entry_of("pool-a", name, sizeof(name), &shim, NULL, 0);
	cr_assert_eq(shim, other_shim, "the locked pooled sandbox was taken (or none)");
	msb_sandbox_free(sb);

	close(fd);
	sb = acquire(b, "pool-b", spec);
	entry_of("pool-b", name, sizeof(name), &shim, NULL, 0);
	cr_assert_eq(shim, held_shim, "once unlocked, it is claimed");
	msb_sandbox_free(sb);
	dispose(b, "pool-a");
	dispose(b, "pool-b");
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

/* ---- stale pooled sandboxes are never handed out --------------------------------- */

static void kill_pid_of(const char *file_in_slot, int sig)
{
	/* The only pooled sandbox's pid file. */
	char dir[160];
	snprintf(dir, sizeof(dir), "%s/ns/pool", root);
	DIR *d = opendir(dir);
	cr_assert_not_null(d);
	struct dirent *t;
	bool done = false;
	while (!done && (t = readdir(d))) {
		if (t->d_name[0] == '.')
			continue;
		char tdir[512];
		snprintf(tdir, sizeof(tdir), "%s/%s", dir, t->d_name);
		DIR *dd = opendir(tdir);
		struct dirent *s;
		while (dd && !done && (s = readdir(dd))) {
			if (strncmp(s->d_name, "msb-", 4) != 0)
				continue;
			char path[1024];
			snprintf(path, sizeof(path), "%s/%s/%s", tdir, s->d_name, file_in_slot);
			FILE *f = fopen(path, "r");
			cr_assert_not_null(f, "%s", path);
			long pid = 0;
			cr_assert_eq(fscanf(f, "%ld", &pid), 1);
			fclose(f);
			cr_assert_eq(kill((pid_t)pid, sig), 0);
			done = true;
		}
		if (dd)
			closedir(dd);
	}
	closedir(d);
	cr_assert(done);
}

static void never_handed_out_after(const char *victim)
{
	msb_backend *b = backend(0, 0);
	msb_spec *spec = spec_of(0);
	msb_error *err = NULL;
	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, spec, 1, &made, &err), 0, "%s", msb_error_message(err));
	int64_t pool_shim = 0;
	cr_assert_eq(pooled(b, "ready", &pool_shim), 1);
	kill_pid_of(victim, SIGKILL);
	/* Let the shim record the agent's death, or the kernel take the shim. */
	for (int i = 0; i < 200 && pooled(b, "ready", NULL) == 1; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(pooled(b, "ready", NULL), 0);
	msb_sandbox *sb = acquire(b, "pool-c", spec);
	char name[64];
	int64_t shim = 0;
	entry_of("pool-c", name, sizeof(name), &shim, NULL, 0);
	cr_assert_neq(shim, pool_shim, "the stale pooled sandbox was handed out");
	char *h = run(sb, "hostname");
	cr_assert_eq(strncmp(h, name, strlen(name)), 0);
	free(h);
	/* The stale one was discarded on the way, processes and all. */
	cr_assert_eq(pooled(b, NULL, NULL), 0);
	cr_assert(!alive(pool_shim), "the stale pooled sandbox's shim still runs");
	msb_sandbox_free(sb);
	dispose(b, "pool-c");
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

Test(pool, killed_shim_is_never_handed_out)
{
	never_handed_out_after("shim.pid");
}

Test(pool, killed_agent_is_never_handed_out)
{
	never_handed_out_after("init.pid");
}

Test(pool, another_template_is_never_handed_out)
{
	/* Pooled with a 256 MiB memory limit ... */
	msb_backend *b = backend(0, 512ull << 20);
	msb_spec *big = spec_of(256ull << 20), *small = spec_of(128ull << 20);
	msb_error *err = NULL;
	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, big, 1, &made, &err), 0, "%s", msb_error_message(err));
	int64_t pool_shim = 0;
	cr_assert_eq(pooled(b, "ready", &pool_shim), 1);
	/* ... is not what a spec asking for 128 MiB gets, */
	msb_sandbox *sb = acquire(b, "pool-a", small);
	int64_t shim = 0;
	char name[64];
	entry_of("pool-a", name, sizeof(name), &shim, NULL, 0);
	cr_assert_neq(shim, pool_shim);
	cr_assert_eq(pooled(b, "ready", NULL), 1);
	msb_sandbox_free(sb);
	/* nor what a backend with other defaults gets for the same spec, */
	msb_backend *other = backend(0, 384ull << 20);
	msb_spec *plain = spec_of(0);
	sb = acquire(other, "pool-b", plain);
	entry_of("pool-b", name, sizeof(name), &shim, NULL, 0);
	cr_assert_neq(shim, pool_shim);
	cr_assert_eq(pooled(b, "ready", NULL), 1);
	msb_sandbox_free(sb);
	/* while the template it was made from does get it. */
	sb = acquire(b, "pool-c", big);
	entry_of("pool-c", name, sizeof(name), &shim, NULL, 0);
	cr_assert_eq(shim, pool_shim);
	msb_sandbox_free(sb);
	dispose(b, "pool-a");
	dispose(b, "pool-b");
	dispose(b, "pool-c");
	msb_spec_unref(big);
	msb_spec_unref(small);
	msb_spec_unref(plain);
	msb_backend_unref(other);
	msb_backend_unref(b);
}

/* A rebuilt or reinstalled agent (or shim) is another template: a sandbox
 * pooled with the old binary is never what an acquire gets afterwards. */
/* A copy of the file `from` at `to` (a new inode, made beside and renamed
 * over it), executable. */
static void install_copy(const char *from, const char *to)
{
	char tmp[160];
	snprintf(tmp, sizeof(tmp), "%s.new", to);
	int in = open(from, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(in, 0, "%s", from);
	int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	cr_assert_geq(out, 0, "%s", tmp);
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		cr_assert_eq(write(out, buf, (size_t)n), n);
	cr_assert_eq(n, 0);
	close(in);
	cr_assert_eq(close(out), 0);
	cr_assert_eq(rename(tmp, to), 0);
}

Test(pool, a_replaced_agent_binary_is_never_handed_out)
{
	const char *agent = getenv("MSB_AGENT");
	cr_assert_not_null(agent, "MSB_AGENT is set by meson test");
	char copy[128];
	snprintf(copy, sizeof(copy), "%s/msb-agent-copy", root);
	install_copy(agent, copy);
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	o.agent_path = copy;
	msb_backend *b = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &err), 0, "%s", msb_error_message(err));
	msb_spec *spec = spec_of(0);
	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, spec, 1, &made, &err), 0, "%s", msb_error_message(err));
	int64_t pool_shim = 0;
	cr_assert_eq(pooled(b, "ready", &pool_shim), 1);
	/* The same path, another binary (a reinstall: new inode and mtime). */
	install_copy(agent, copy);
	msb_sandbox *sb = acquire(b, "pool-a", spec);
	char name[64];
	int64_t shim = 0;
	entry_of("pool-a", name, sizeof(name), &shim, NULL, 0);
	cr_assert_neq(shim, pool_shim, "a sandbox of the old agent binary was handed out");
	msb_sandbox_free(sb);
	dispose(b, "pool-a");
	msb_spec_unref(spec);
	msb_backend_unref(b);
	unlink(copy);
}

/* ---- refill, drain --------------------------------------------------------------- */

Test(pool, refilled_after_a_claim)
{
	msb_spec *spec = spec_of(0);
	/* A miss: made cold, and the pool starts filling behind it. */
	msb_backend *b = backend(1, 0);
	msb_sandbox *sb = acquire(b, "pool-a", spec);
	msb_sandbox_free(sb);
	msb_backend_unref(b); /* waits for the refill to have started its shim */
	b = backend(1, 0);
	cr_assert(wait_ready(b, 1), "the pool was not refilled");
	int64_t pool_shim = 0;
	cr_assert_eq(pooled(b, "ready", &pool_shim), 1);
	/* A hit, and a refill again. */
	sb = acquire(b, "pool-b", spec);
	char name[64];
	int64_t shim = 0;
	entry_of("pool-b", name, sizeof(name), &shim, NULL, 0);
	cr_assert_eq(shim, pool_shim);
	msb_sandbox_free(sb);
	cr_assert(wait_ready(b, 1), "the pool was not refilled after the claim");
	cr_assert_eq(pooled(b, NULL, NULL), 1, "a refill overfilled the pool");
	dispose(b, "pool-a");
	dispose(b, "pool-b");
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

static unsigned processes_naming(const char *what)
{
	unsigned n = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < len; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[len] = '\0';
		if (strstr(buf, what))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

Test(pool, drain_leaves_nothing)
{
	msb_spec *spec = spec_of(0);
	msb_backend *b = backend(2, 0);
	msb_error *err = NULL;
	unsigned made = 0;
	cr_assert_eq(msb_ns_pool_fill(b, spec, 0, &made, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(made, 2);
	/* A claim, and its refill still starting while the drain comes. */
	msb_sandbox *sb = acquire(b, "pool-a", spec);
	msb_sandbox_free(sb);
	dispose(b, "pool-a");
	msb_backend_unref(b); /* the refill's shim is on its way */
	b = backend(0, 0);
	size_t removed = 0;
	cr_assert_eq(msb_ns_pool_drain(b, NULL, &removed, &err), 0, "%s", msb_error_message(err));
	cr_assert_geq(removed, 1);
	cr_assert_eq(pooled(b, NULL, NULL), 0);
	char path[128];
	snprintf(path, sizeof(path), "%s/ns/pool", root);
	struct stat st;
	cr_assert(stat(path, &st) < 0 && errno == ENOENT, "%s is still there", path);
	snprintf(path, sizeof(path), "--state %s/ns/", root);
	cr_assert_eq(processes_naming(path), 0, "a shim of this state root still runs");
	msb_spec_unref(spec);
	msb_backend_unref(b);
}
