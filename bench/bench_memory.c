/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb_bench's memory cases: one idle sandbox's shim and agent (idle_memory),
 * and M idle sandboxes at once (many). See msb_bench.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>

#include "msb_bench.h"

/* ---- memory --------------------------------------------------------------- */

struct mem {
	long rss_kb;
	long pss_kb;
	long uss_kb; /* Private_Clean + Private_Dirty */
	int procs;
};

static int read_pid_file(const char *path, long *pid)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int r = fscanf(f, "%ld", pid) == 1 && *pid > 0 ? 0 : -1;
	fclose(f);
	return r;
}

static int add_smaps(long pid, struct mem *m)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long v;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Rss: %ld kB", &v) == 1)
			m->rss_kb += v;
		else if (sscanf(line, "Pss: %ld kB", &v) == 1)
			m->pss_kb += v;
		else if (sscanf(line, "Private_Clean: %ld kB", &v) == 1)
			m->uss_kb += v;
		else if (sscanf(line, "Private_Dirty: %ld kB", &v) == 1)
			m->uss_kb += v;
	}
	fclose(f);
	m->procs++;
	return 0;
}

/* The memory cgroup (v1) or unified cgroup (v2) of pid, read from the host. */
static long cgroup_memory_kb(long pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long kb = -1;
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		char file[PATH_MAX];
		*c2 = '\0';
		if (strcmp(c1 + 1, "memory") == 0)
			snprintf(file, sizeof(file),
				 "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", c2 + 1);
		else
			continue;
		FILE *u = fopen(file, "re");
		unsigned long long bytes;
		if (u && fscanf(u, "%llu", &bytes) == 1)
			kb = (long)(bytes / 1024);
		if (u)
			fclose(u);
		break;
	}
	fclose(f);
	return kb;
}

/* Sum the memory of every live sandbox under the state root whose thread
 * starts with prefix; *agent_pid receives one agent's pid. */
static int sandbox_memory(struct bench *b, const char *prefix, struct mem *m, long *agent_pid,
			  int *count)
{
	msb_ns_options no = MSB_NS_OPTIONS_INIT;
	no.state_root = b->state_root;
	msb_ns_entry *e = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	if (msb_ns_list(&no, &e, &n, &err) < 0) {
		msb_error_free(err);
		return -1;
	}
	memset(m, 0, sizeof(*m));
	*count = 0;
	for (size_t i = 0; i < n; i++) {
		if (!e[i].alive || !e[i].thread_id ||
		    strncmp(e[i].thread_id, prefix, strlen(prefix)) != 0)
			continue;
		char path[2 * PATH_MAX];
		long init = 0;
		snprintf(path, sizeof(path), "%s/ns/%s/init.pid", b->state_root, e[i].name);
		if (e[i].shim_pid > 0)
			add_smaps((long)e[i].shim_pid, m);
		if (read_pid_file(path, &init) == 0 && add_smaps(init, m) == 0 && agent_pid)
			*agent_pid = init;
		(*count)++;
	}
	msb_ns_entries_free(e, n);
	return 0;
}

/* The cpuacct (v1) line of /proc/PID/cgroup, for comparing two processes. */
static bool cpuacct_line(const char *pid, char *out, size_t size)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%s/cgroup", pid);
	FILE *f = fopen(path, "re");
	bool found = false;
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':');
		if (c1 && strstr(c1, "cpuacct")) {
			snprintf(out, size, "%s", c1);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Host-wide figures from /proc/meminfo, in KiB (-1 when absent). */
struct meminfo {
	long available;
	long slab;
	long page_tables;
	long kernel_stack;
};

static void read_meminfo(struct meminfo *mi)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	mi->available = mi->slab = mi->page_tables = mi->kernel_stack = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		long v;
		if (sscanf(line, "MemAvailable: %ld kB", &v) == 1)
			mi->available = v;
		else if (sscanf(line, "Slab: %ld kB", &v) == 1)
			mi->slab = v;
		else if (sscanf(line, "PageTables: %ld kB", &v) == 1)
			mi->page_tables = v;
		else if (sscanf(line, "KernelStack: %ld kB", &v) == 1)
			mi->kernel_stack = v;
	}
	fclose(f);
}

static long delta(long before, long after)
{
	return before >= 0 && after >= 0 ? after - before : 0;
}

void case_idle_memory(struct bench *b)
{
	struct key_buf k;
	new_key(b, "mem", false, &k);
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	if (acquire(b, &k, &sb, &err) < 0 || exec_true(sb, &err) < 0) {
		report_error(b, "idle_memory", "acquire+exec", err);
		msb_error_free(err);
		msb_sandbox_free(sb);
		dispose(b, &k, NULL);
		return;
	}
	msb_sandbox_free(sb);
	sleep_ms(500); /* let the exec's child be reaped and the sandbox go idle */
	struct mem m;
	long agent = 0;
	int count = 0;
	if (sandbox_memory(b, "mem-", &m, &agent, &count) < 0 || count != 1 || m.procs != 2) {
		report_error(b, "idle_memory", "could not find the shim and the agent", NULL);
	} else {
		long cg = cgroup_memory_kb(agent);
		char mine[1024], theirs[1024], agent_s[32];
		snprintf(agent_s, sizeof(agent_s), "%ld", agent);
		bool same = cpuacct_line("self", mine, sizeof(mine)) &&
			    cpuacct_line(agent_s, theirs, sizeof(theirs)) && !strcmp(mine, theirs);
		printf("{\"case\":\"idle_memory\",\"procs\":%d,\"pss_kib\":%ld,\"rss_kib\":%ld,"
		       "\"uss_kib\":%ld,\"cgroup_usage_kib\":%ld,\"agent_in_our_cpuacct\":%s,"
		       "\"note\":\"shim + agent of one idle "
		       "sandbox after one exec; Pss and USS (Private_Clean+Private_Dirty) and Rss "
		       "from /proc/PID/smaps_rollup; cgroup_usage = memory.usage_in_bytes of the "
		       "agent's memory cgroup (charged user and kernel pages; -1 when none)\"}\n",
		       m.procs, m.pss_kb, m.rss_kb, m.uss_kb, cg, same ? "true" : "false");
		fflush(stdout);
	}
	if (dispose(b, &k, &err) < 0) {
		report_error(b, "idle_memory", "dispose", err);
		msb_error_free(err);
	}
}

void case_many(struct bench *b)
{
	int m = b->many;
	struct key_buf *keys = calloc((size_t)m, sizeof(*keys));
	msb_sandbox **sbs = calloc((size_t)m, sizeof(*sbs));
	double *t = calloc((size_t)m, sizeof(*t));
	if (!keys || !sbs || !t)
		goto out;
	struct meminfo mi0, mi1;
	read_meminfo(&mi0);
	int up = 0, served = 0, gone = 0;
	char first_error[512] = "";
	double t0 = now_ms();
	for (int i = 0; i < m; i++) {
		msb_error *err = NULL;
		new_key(b, "many", false, &keys[i]);
		double a = now_ms();
		if (acquire(b, &keys[i], &sbs[i], &err) < 0) {
			if (!first_error[0])
				snprintf(first_error, sizeof(first_error), "acquire %d: %s", i,
					 msb_error_message(err));
			msb_error_free(err);
			continue;
		}
		t[up++] = now_ms() - a;
	}
	double t_up = now_ms() - t0;
	sleep_ms(1000);
	struct mem mm;
	long agent = 0;
	int alive = 0;
	sandbox_memory(b, "many-", &mm, &agent, &alive);
	read_meminfo(&mi1);
	double t1 = now_ms();
	for (int i = 0; i < m; i++) {
		msb_error *err = NULL;
		if (!sbs[i])
			continue;
		if (exec_true(sbs[i], &err) == 0)
			served++;
		else if (!first_error[0])
			snprintf(first_error, sizeof(first_error), "exec %d: %s", i,
				 msb_error_message(err));
		msb_error_free(err);
	}
	double t_exec = now_ms() - t1;
	for (int i = 0; i < m; i++) {
		msb_sandbox_free(sbs[i]);
		sbs[i] = NULL;
	}
	double t2 = now_ms();
	for (int i = 0; i < m; i++) {
		msb_error *err = NULL;
		if (dispose(b, &keys[i], &err) == 0)
			gone++;
		else if (!first_error[0])
			snprintf(first_error, sizeof(first_error), "dispose %d: %s", i,
				 msb_error_message(err));
		msb_error_free(err);
	}
	double t_down = now_ms() - t2;
	double p50 = 0, p90 = 0, p99 = 0;
	if (up > 0) {
		qsort(t, (size_t)up, sizeof(*t), cmp_double);
		p50 = pct(t, up, .5);
		p90 = pct(t, up, .9);
		p99 = pct(t, up, .99);
	}
	if (up != m || served != m || gone != m)
		b->failures++;
	printf("{\"case\":\"many\",\"n\":%d,\"acquired\":%d,\"alive_after_1s\":%d,\"procs\":%d,"
	       "\"served_exec\":%d,\"disposed\":%d,\"acquire_all_ms\":%.1f,"
	       "\"acquire_p50_ms\":%.3f,\"acquire_p90_ms\":%.3f,\"acquire_p99_ms\":%.3f,"
	       "\"exec_all_ms\":%.1f,\"dispose_all_ms\":%.1f,\"pss_kib\":%ld,\"rss_kib\":%ld,"
	       "\"uss_kib\":%ld,\"memavailable_drop_kib\":%ld,\"slab_growth_kib\":%ld,"
	       "\"pagetables_growth_kib\":%ld,\"kernelstack_growth_kib\":%ld,"
	       "\"first_error\":",
	       m, up, alive, mm.procs, served, gone, t_up, p50, p90, p99, t_exec, t_down, mm.pss_kb,
	       mm.rss_kb, mm.uss_kb, -delta(mi0.available, mi1.available),
	       delta(mi0.slab, mi1.slab), delta(mi0.page_tables, mi1.page_tables),
	       delta(mi0.kernel_stack, mi1.kernel_stack));
	json_str(first_error);
	printf(",\"note\":\"M sandboxes acquired one after another and held at once; Pss/Rss/USS "
	       "summed over every shim and agent after 1 s idle; the *_drop/*_growth figures are "
	       "host-wide /proc/meminfo differences from before the first acquire to then "
	       "(kernel memory included; other work on a shared machine moves them too); then "
	       "one exec of /bin/true in each, then dispose of all\"}\n");
	fflush(stdout);
out:
	if (sbs)
		for (int i = 0; i < m; i++)
			msb_sandbox_free(sbs[i]);
	free(keys);
	free(sbs);
	free(t);
}
