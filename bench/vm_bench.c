/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` backend beside `ns`, in one run (issue 18; run by hand as root,
 * never as a test):
 *
 *   vm_bench [N_BOOTS] [N_EXECS]      (defaults 5 and 30)
 *   vm_bench restore [N] [N_AT_ONCE]  (restores only: defaults 10 and 20)
 *
 *   vm_cold_boot     acquire of a new VM until its agent answers (qemu start,
 *                    kernel boot, guest init, port pump), p50 of N_BOOTS, each
 *                    VM disposed after
 *   vm_warm_exec     exec of /bin/true into one warm VM, p50 of N_EXECS
 *   ns_warm_exec     the same into one warm `ns` sandbox
 *   vm_stat          stat_file of the storage base: a file request (fork and
 *                    confinement in the guest, no execve)
 *   vm_ping          a PING round trip to the warm VM's agent: the channel
 *                    alone (unix socket, shim, mux, virtio-serial, pump)
 *   vm_idle_pss      Pss of the idle VM's qemu plus its shim (smaps_rollup)
 *   vm_restore       acquire of a new VM restored from its template's saved
 *                    state (snapshots on; the template made first, untimed)
 *                    until its agent answers an exec, p50 of N_BOOTS (and
 *                    the acquire alone: the shim reported READY); and the idle
 *                    Pss of a restored VM's qemu and shim with two restored
 *                    VMs up (the template's pages shared between them)
 *   vm_at_once       N_AT_ONCE restores started together (one thread each)
 *                    until every agent answers: the wall time, and the idle
 *                    Pss of all their qemus and shims, total and per VM
 *
 * Environment: MSB_VM_SHIM, MSB_SHIM, MSB_AGENT as for the tests. State goes
 * to a private root under /tmp; the built initramfs and image are cached in
 * /tmp/msb-vm-bench-cache. Prints one JSON object.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>
#include <msb/vm.h>

#include "client/client.h"
#include "util/fs.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double p50(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[n / 2];
}

static void die(const char *what, msb_error *err)
{
	fprintf(stderr, "vm_bench: %s: %s\n", what, err ? msb_error_message(err) : "failed");
	exit(1);
}

static msb_spec *spec(void)
{
	msb_spec_builder *b = msb_spec_builder_new("bench");
	msb_spec_builder_set_requires(b, MSB_CAP_EXEC);
	msb_spec *s = NULL;
	msb_error *err = NULL;
	if (msb_spec_build(b, &s, &err) < 0)
		die("spec", err);
	msb_spec_builder_free(b);
	return s;
}

static msb_sandbox *acquire(msb_backend *be, const char *thread)
{
	msb_key key = {.scope = "bench", .thread_id = thread, .agent_dir = "/a"};
	msb_spec *s = spec();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	if (msb_backend_acquire(be, &key, s, &sb, &err) < 0)
		die("acquire", err);
	msb_spec_unref(s);
	return sb;
}

static void dispose(msb_backend *be, const char *thread)
{
	msb_scope_purge p;
	msb_error *err = NULL;
	if (msb_backend_dispose_scope(be, "bench", thread, &p, &err) < 0)
		die("dispose", err);
}

static double exec_true(msb_sandbox *sb)
{
	static const char *argv[] = {"/bin/true", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	msb_exec_result res;
	msb_error *err = NULL;
	double t = now_ms();
	if (msb_sandbox_exec(sb, &req, &res, &err) < 0 || res.exit_code != 0)
		die("exec", err);
	t = now_ms() - t;
	msb_exec_result_clear(&res);
	return t;
}

static double warm_exec(msb_sandbox *sb, int n)
{
	double *v = calloc((size_t)n, sizeof(*v));
	exec_true(sb); /* connect once */
	for (int i = 0; i < n; i++)
		v[i] = exec_true(sb);
	double r = p50(v, n);
	free(v);
	return r;
}

static long pss_kib(int pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/smaps_rollup", pid);
	FILE *f = fopen(p, "re");
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int read_pid(const char *dir, const char *file)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	FILE *f = fopen(p, "re");
	int pid = 0;
	if (f && fscanf(f, "%d", &pid) != 1)
		pid = 0;
	if (f)
		fclose(f);
	return pid;
}

/* Pss (KiB) of every VM's qemu and shim under <root>/vm; *n the VMs. */
static long total_pss(const char *root, int *n)
{
	char vmroot[128];
	snprintf(vmroot, sizeof(vmroot), "%s/vm", root);
	DIR *d = opendir(vmroot);
	long sum = 0;
	*n = 0;
	for (struct dirent *de; d && (de = readdir(d));) {
		if (strncmp(de->d_name, "msb-", 4) != 0)
			continue;
		char vmdir[256];
		snprintf(vmdir, sizeof(vmdir), "%s/%.40s", vmroot, de->d_name);
		long q = pss_kib(read_pid(vmdir, "init.pid")),
		     s = pss_kib(read_pid(vmdir, "shim.pid"));
		if (q > 0 && s > 0) {
			sum += q + s;
			(*n)++;
		}
	}
	if (d)
		closedir(d);
	return sum;
}

struct at_once {
	msb_backend *be;
	char thread[24];
	msb_sandbox *sb;
};

static void *acquire_one(void *arg)
{
	struct at_once *a = arg;
	a->sb = acquire(a->be, a->thread);
	exec_true(a->sb);
	return NULL;
}

/* Acquires restored from a template (made first, untimed) until the agent
 * answers, p50 of n; then a restored VM's idle Pss with two up; then
 * `together` restores at once. Prints one JSON line. */
static void measure_restores(const msb_vm_options *vo, const char *root, int boots, int together)
{
	msb_error *err = NULL;
	/* Restores: another backend on the same root, snapshots on. */
	msb_vm_options so = *vo;
	so.snapshots = 1;
	msb_backend *snap = NULL;
	if (msb_vm_backend_new(&so, &snap, &err) < 0)
		die("vm backend (snapshots)", err);
	msb_sandbox *tw = acquire(snap, "template");
	msb_sandbox_free(tw);
	dispose(snap, "template");
	double *rest = calloc((size_t)boots, sizeof(*rest));
	double *acq = calloc((size_t)boots, sizeof(*acq));
	for (int i = 0; i < boots; i++) {
		char th[24];
		snprintf(th, sizeof(th), "restore%d", i);
		double t = now_ms();
		msb_sandbox *sb = acquire(snap, th);
		acq[i] = now_ms() - t;
		exec_true(sb);
		rest[i] = now_ms() - t;
		msb_sandbox_free(sb);
		if (i + 2 < boots)
			dispose(snap, th);
	}
	double restore_p50 = p50(rest, boots);
	double restore_min = rest[0];
	double acquire_p50 = p50(acq, boots);
	free(rest);
	free(acq);
	sleep(5);
	/* The last two restored VMs are up. */
	int up = 0;
	long two = total_pss(root, &up);
	for (int i = boots - 2; i < boots; i++) {
		char th[24];
		snprintf(th, sizeof(th), "restore%d", i);
		dispose(snap, th);
	}
	long all = 0;
	int n_all = 0;
	double at_once = 0;
	if (together > 0) {
		struct at_once *v = calloc((size_t)together, sizeof(*v));
		pthread_t *t = calloc((size_t)together, sizeof(*t));
		double t0 = now_ms();
		for (int i = 0; i < together; i++) {
			v[i].be = snap;
			snprintf(v[i].thread, sizeof(v[i].thread), "together%d", i);
			pthread_create(&t[i], NULL, acquire_one, &v[i]);
		}
		for (int i = 0; i < together; i++)
			pthread_join(t[i], NULL);
		at_once = now_ms() - t0;
		sleep(5);
		all = total_pss(root, &n_all);
		for (int i = 0; i < together; i++) {
			msb_sandbox_free(v[i].sb);
			dispose(snap, v[i].thread);
		}
		free(v);
		free(t);
	}
	msb_backend_unref(snap);
	printf("{\"vm_restore_p50_ms\": %.0f, \"vm_restore_min_ms\": %.0f, "
	       "\"vm_restore_acquire_only_p50_ms\": %.0f, \"restores\": %d, "
	       "\"vm_restored_idle_pss_kib_per_vm_of_%d\": %ld, \"vm_at_once\": %d, "
	       "\"vm_at_once_ms\": %.0f, \"vm_at_once_pss_kib_total\": %ld, "
	       "\"vm_at_once_pss_kib_per_vm\": %ld}\n",
	       restore_p50, restore_min, acquire_p50, boots, up, up ? two / up : -1, n_all, at_once,
	       all, n_all ? all / n_all : -1);
}

int main(int argc, char **argv)
{
	char root[] = "/tmp/msb-vm-bench-XXXXXX";
	msb_vm_options vo = MSB_VM_OPTIONS_INIT;
	vo.state_root = root;
	vo.cache_dir = "/tmp/msb-vm-bench-cache";
	vo.snapshots = -1; /* cold boots; measure_restores turns them on */
	if (argc > 1 && strcmp(argv[1], "restore") == 0) {
		int n = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 10;
		int together = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 20;
		if (n < 2 || together < 0 || !mkdtemp(root))
			return 2;
		measure_restores(&vo, root, n, together);
		msb__rm_rf(root);
		return 0;
	}
	int boots = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 5;
	int execs = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 30;
	if (boots < 2 || execs < 1)
		return 2;
	if (!mkdtemp(root))
		return 1;
	msb_backend *vm = NULL;
	msb_error *err = NULL;
	if (msb_vm_backend_new(&vo, &vm, &err) < 0)
		die("vm backend", err);
	msb_ns_options no = MSB_NS_OPTIONS_INIT;
	no.state_root = root;
	msb_backend *ns = NULL;
	if (msb_ns_backend_new(&no, &ns, &err) < 0)
		die("ns backend", err);

	double *boot = calloc((size_t)boots, sizeof(*boot));
	for (int i = 0; i < boots; i++) {
		char th[16];
		snprintf(th, sizeof(th), "cold%d", i);
		double t = now_ms();
		msb_sandbox *sb = acquire(vm, th);
		exec_true(sb);
		boot[i] = now_ms() - t;
		msb_sandbox_free(sb);
		dispose(vm, th);
	}
	double boot_min = boot[0], boot_max = boot[0];
	for (int i = 1; i < boots; i++) {
		boot_min = boot[i] < boot_min ? boot[i] : boot_min;
		boot_max = boot[i] > boot_max ? boot[i] : boot_max;
	}
	double boot_p50 = p50(boot, boots);

	msb_sandbox *w = acquire(vm, "warm");
	double vm_exec = warm_exec(w, execs);
	double *sv = calloc((size_t)execs, sizeof(*sv));
	for (int i = 0; i < execs; i++) {
		bool present;
		msb_entry e;
		double t = now_ms();
		if (msb_sandbox_stat_file(w, ".", ".", &present, &e, &err) < 0)
			die("stat", err);
		sv[i] = now_ms() - t;
		msb_entry_clear(&e);
	}
	double vm_stat = p50(sv, execs);
	free(sv);
	sleep(5); /* idle: free page reporting settles */
	char vmdir[256] = "";
	char vmroot[128];
	snprintf(vmroot, sizeof(vmroot), "%s/vm", root);
	DIR *d = opendir(vmroot);
	for (struct dirent *de; d && (de = readdir(d));)
		if (strncmp(de->d_name, "msb-", 4) == 0)
			snprintf(vmdir, sizeof(vmdir), "%s/%.40s", vmroot, de->d_name);
	if (d)
		closedir(d);
	char sock[300];
	snprintf(sock, sizeof(sock), "%s/agent.sock", vmdir);
	msb_client *c = NULL;
	if (msb_client__connect(sock, 10, &c, &err) < 0)
		die("connect", err);
	double *pv = calloc((size_t)execs, sizeof(*pv));
	for (int i = 0; i < execs; i++) {
		double t = now_ms();
		if (msb_client__ping(c, 10, &err) < 0)
			die("ping", err);
		pv[i] = now_ms() - t;
	}
	double ping = p50(pv, execs);
	free(pv);
	msb_client__free(c);
	long qemu_pss = pss_kib(read_pid(vmdir, "init.pid"));
	long shim_pss = pss_kib(read_pid(vmdir, "shim.pid"));
	msb_sandbox_free(w);
	dispose(vm, "warm");

	msb_sandbox *n = acquire(ns, "warm");
	double ns_exec = warm_exec(n, execs);
	msb_sandbox_free(n);
	dispose(ns, "warm");

	measure_restores(&vo, root, boots, 0);

	double load[1] = {0};
	getloadavg(load, 1);
	printf("{\"vm_cold_boot_p50_ms\": %.0f, \"vm_cold_boot_min_ms\": %.0f, "
	       "\"vm_cold_boot_max_ms\": %.0f, \"boots\": %d, "
	       "\"vm_warm_exec_p50_ms\": %.2f, \"ns_warm_exec_p50_ms\": %.2f, "
	       "\"x_ns\": %.1f, \"vm_ping_p50_ms\": %.2f, \"vm_stat_p50_ms\": %.2f, \"execs\": %d, "
	       "\"vm_idle_qemu_pss_kib\": "
	       "%ld, "
	       "\"vm_idle_shim_pss_kib\": %ld, \"accel\": \"%s\", \"loadavg_1m\": %.1f}\n",
	       boot_p50, boot_min, boot_max, boots, vm_exec, ns_exec, vm_exec / ns_exec, ping,
	       vm_stat, execs, qemu_pss, shim_pss,
	       strcmp(msb_backend_isolation(vm), "microvm") == 0 ? "kvm" : "tcg", load[0]);
	free(boot);
	msb_backend_unref(vm);
	msb_backend_unref(ns);
	msb__rm_rf(root);
	return 0;
}
