/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-tool calls over exec (checklist 14.1-14.3, 14.13-14.31): launch
 * behind a start gate, serve request files in id order through the one door,
 * supervise the run's bound, observe and clean up processes, remove the
 * transport's own files.
 *
 * Costs, per host-tool call: one stat that finds the request, one read, one
 * write of the response; per idle poll: two stats (the next request, the exit
 * marker). Per run: one write (launcher), one exec (launcher), one write
 * (gate), up to four bounded process snapshots, one or two signal execs, one
 * exec removing the transport directory.
 */
#include <math.h>
#include <stdio.h>
#include <time.h>

#include <msb/hosttools_exec.h>

#include "core/core.h"
#include "core/hosttools/hosttools_int.h"

#define MAX_OUTPUT_BYTES (64u << 20)
#define PARTIAL_OUTPUT_BYTES (64u << 10)
/* A process snapshot's budget (docs/security.md, "Budgets on guest bytes"):
 * the scan's output is read under SNAPSHOT_BYTES (exec_bounded) and at most
 * MAX_PROCS processes are held; past either the snapshot is incomplete,
 * which marks the cleanup unclean (14.21), never a silent partial view. */
#define SNAPSHOT_BYTES (256u << 10)
#define MAX_PROCS 4096
#define LAUNCH_BOUND 30.0

/* ---- small helpers -------------------------------------------------------------- */

static double remaining(int64_t deadline)
{
	return (double)(deadline - msb__now_ns()) / 1e9;
}

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int sh(msb_sandbox *sb, const char *script, double timeout, bool bounded,
	      msb_exec_result *res, msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = script;
	req.timeout = timeout;
	memset(res, 0, sizeof(*res));
	if (bounded) {
		req.max_output_bytes = SNAPSHOT_BYTES;
		return msb_sandbox_exec_bounded(sb, &req, res, err);
	}
	return msb_sandbox_exec(sb, &req, res, err);
}

static void quote(msb_buf *b, const char *s)
{
	msb__buf_puts(b, "'");
	for (const char *p = s; *p; p++)
		msb__buf_puts(b, *p == '\'' ? "'\\''" : (char[2]){*p, 0});
	msb__buf_puts(b, "'");
}

/* ---- process observations (14.20, 14.21) ---------------------------------------- */

struct proc {
	int64_t pid, ppid, pgid;
	uint64_t start;
	int64_t uid;
	char comm[64];
};

struct snapshot {
	bool available, complete;
	struct proc *p;
	size_t n;
};

/* Reads /proc with shell builtins only (no fork per process): "u <uid> <stat>". */
static const char snapshot_script[] =
	"echo \"self $$\"\n"
	"for p in /proc/[0-9]*; do\n"
	"  s=; u=\n"
	"  read -r s <\"$p/stat\" 2>/dev/null || continue\n"
	"  while read -r k a rest; do case $k in Uid:) u=$a; break;; esac; done <\"$p/status\" "
	"2>/dev/null\n"
	"  echo \"p ${u:--1} $s\"\n"
	"done\n"
	"echo end\n";

static void snapshot_free(struct snapshot *s)
{
	free(s->p);
	memset(s, 0, sizeof(*s));
}

static void parse_snapshot(const char *text, struct snapshot *s)
{
	int64_t self = -1;
	bool end = false, over = false;
	const char *line = text;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		_cleanup_free_ char *l = msb__strndup(line, len);
		line = nl ? nl + 1 : NULL;
		if (!l)
			return;
		if (strncmp(l, "self ", 5) == 0) {
			self = strtoll(l + 5, NULL, 10);
		} else if (strcmp(l, "end") == 0) {
			end = true;
		} else if (strncmp(l, "p ", 2) == 0) {
			struct proc p = {0};
			char *q;
			p.uid = strtoll(l + 2, &q, 10);
			p.pid = strtoll(q, &q, 10);
			char *open = strchr(q, '('), *close = strrchr(q, ')');
			if (!open || !close || close < open)
				continue;
			snprintf(p.comm, sizeof(p.comm), "%.*s", (int)(close - open - 1), open + 1);
			/* A line may end at the ')': nothing is read past its NUL. */
			char *f = close[1] ? close + 2 : close + 1;
			/* fields after comm: state ppid pgrp session ... starttime (20th) */
			char *tok[24];
			size_t nt = 0;
			for (char *sv = NULL, *t = strtok_r(f, " ", &sv); t && nt < 24;
			     t = strtok_r(NULL, " ", &sv))
				tok[nt++] = t;
			/* A zombie runs nothing: it is not a survivor. */
			if (nt < 20 || p.pid == self || tok[0][0] == 'Z' || tok[0][0] == 'X')
				continue;
			p.ppid = strtoll(tok[1], NULL, 10);
			p.pgid = strtoll(tok[2], NULL, 10);
			p.start = strtoull(tok[19], NULL, 10);
			if (s->n >= MAX_PROCS) {
				over = true;
				continue;
			}
			struct proc *g = msb__reallocarray(s->p, s->n + 1, sizeof(*g));
			if (!g)
				return;
			s->p = g;
			s->p[s->n++] = p;
		}
	}
	/* Processes of the scanning exec (its parent chain up to the agent) are
	 * excluded by pid only; an incomplete listing is reported as such. */
	s->complete = end && !over;
}

struct supervisor {
	msb_sandbox *sb;
	const msb_over_exec_options *o;
	msb_logger log;
	int64_t pid, pgid; /* receipts; -1 = none */
	/* Observed lineage: descendants of the recorded pid, by (pid, start). */
	struct proc *desc;
	size_t n_desc;
	bool unclean;
};

static void emit_snapshot(struct supervisor *s, const char *phase, const struct snapshot *snap)
{
	const msb_observer *o = s->o->observer;
	if (!msb_observer__wants(o, processes_observed))
		return;
	_cleanup_free_ msb_ev_process *ps = calloc(snap->n + 1, sizeof(*ps));
	_cleanup_free_ char *names = calloc(snap->n + 1, 64);
	if (!ps || !names)
		return;
	for (size_t i = 0; i < snap->n; i++) {
		ps[i] = (msb_ev_process){snap->p[i].pid, snap->p[i].ppid, snap->p[i].start,
					 snap->p[i].uid, names + 64 * i};
		memcpy(names + 64 * i, snap->p[i].comm, 63);
	}
	msb_ev_processes_observed ev = {s->o->key,	s->o->call, phase,  snap->available,
					snap->complete, ps,	    snap->n};
	msb_observer__processes_observed(o, &s->log, &ev);
}

static bool tracked(const struct supervisor *s, const struct proc *p)
{
	for (size_t i = 0; i < s->n_desc; i++)
		if (s->desc[i].pid == p->pid && s->desc[i].start == p->start)
			return true;
	return false;
}

/* Extend the lineage with every process whose parent chain reaches the
 * recorded pid or an already tracked descendant. */
static void learn_lineage(struct supervisor *s, const struct snapshot *snap)
{
	if (s->pid <= 0)
		return;
	bool grew = true;
	while (grew) {
		grew = false;
		for (size_t i = 0; i < snap->n; i++) {
			const struct proc *p = &snap->p[i];
			if (p->pid == s->pid || tracked(s, p))
				continue;
			bool child = p->ppid == s->pid;
			for (size_t j = 0; !child && j < snap->n; j++)
				child = snap->p[j].pid == p->ppid && tracked(s, &snap->p[j]);
			if (!child)
				continue;
			struct proc *g = msb__reallocarray(s->desc, s->n_desc + 1, sizeof(*g));
			if (!g)
				return;
			s->desc = g;
			s->desc[s->n_desc++] = *p;
			grew = true;
		}
	}
}

static void observe(struct supervisor *s, const char *phase, double budget, struct snapshot *keep)
{
	struct snapshot snap = {0};
	msb_exec_result r;
	msb_error *e = NULL;
	if (budget > 0 && sh(s->sb, snapshot_script, budget, true, &r, &e) == 0) {
		snap.available = true;
		if (r.exit_code == 0 && !r.truncated)
			parse_snapshot((const char *)r.stdout_bytes, &snap);
		msb_exec_result_clear(&r);
	} else {
		msb__log(&s->log, MSB_LOG_DEBUG, "hosttools",
			 "process observation `%s` unavailable: %s", phase,
			 e ? msb_error_message(e) : "no budget left");
	}
	msb_error_free(e);
	/* 14.21: any incomplete or unavailable snapshot marks cleanup unclean. */
	if (!snap.available || !snap.complete)
		s->unclean = true;
	learn_lineage(s, &snap);
	emit_snapshot(s, phase, &snap);
	if (keep)
		*keep = snap;
	else
		snapshot_free(&snap);
}

/* Signal the recorded group (or pid) and every tracked descendant still
 * alive with the same start ticks. Returns the recorded target's outcome. */
static msb_signal_outcome signal_targets(struct supervisor *s, const char *sig,
					 const struct snapshot *now, size_t *n_targets,
					 double budget)
{
	if (s->pid <= 0)
		return MSB_SIGNAL_UNRECORDED;
	if (budget <= 0)
		return MSB_SIGNAL_UNKNOWN;
	msb_buf b = MSB_BUF_INIT;
	char target[32];
	if (s->pgid > 0)
		snprintf(target, sizeof(target), "-%lld", (long long)s->pgid);
	else
		snprintf(target, sizeof(target), "%lld", (long long)s->pid);
	msb__buf_printf(&b,
			"if kill -0 %s 2>/dev/null; then\n"
			"  if kill -%s %s 2>/dev/null; then echo sent; else echo refused; fi\n"
			"else echo absent; fi\n",
			target, sig, target);
	size_t n = 1;
	for (size_t i = 0; now && i < now->n; i++) {
		if (!tracked(s, &now->p[i]) || (s->pgid > 0 && now->p[i].pgid == s->pgid))
			continue;
		/* An escaped descendant, still the process we saw (same start). */
		msb__buf_printf(&b, "kill -%s %lld 2>/dev/null\n", sig, (long long)now->p[i].pid);
		n++;
	}
	msb__buf_puts(&b, "exit 0\n");
	_cleanup_free_ char *script = msb__buf_steal_str(&b);
	*n_targets = n;
	if (!script)
		return MSB_SIGNAL_UNKNOWN;
	msb_exec_result r;
	msb_error *e = NULL;
	msb_signal_outcome out = MSB_SIGNAL_UNKNOWN;
	if (sh(s->sb, script, budget, false, &r, &e) == 0) {
		const char *t = (const char *)r.stdout_bytes;
		if (t && strncmp(t, "sent", 4) == 0)
			out = MSB_SIGNAL_SENT;
		else if (t && strncmp(t, "refused", 7) == 0)
			out = MSB_SIGNAL_REFUSED;
		else if (t && strncmp(t, "absent", 6) == 0)
			out = MSB_SIGNAL_ABSENT;
		msb_exec_result_clear(&r);
	}
	msb_error_free(e);
	return out;
}

/* A survivor: the recorded process or group, or a tracked descendant. */
static bool survives(const struct supervisor *s, const struct proc *p)
{
	return p->pid == s->pid || (s->pgid > 0 && p->pgid == s->pgid) || tracked(s, p);
}

static bool any_survivor(const struct supervisor *s, const struct snapshot *snap)
{
	for (size_t i = 0; i < snap->n; i++)
		if (survives(s, &snap->p[i]))
			return true;
	return false;
}

/*
 * A signal is delivered when its target next runs: a process just sent
 * SIGKILL is still listed as running until then, longer on a loaded host.
 * Observe again until no survivor is listed or `for_s` (within the grace)
 * has passed; `last` keeps the final observation.
 */
static void settle(struct supervisor *s, const char *phase, double for_s, int64_t grace,
		   struct snapshot *last)
{
	int64_t until = msb__now_ns() + (int64_t)(for_s * 1e9);
	for (;;) {
		snapshot_free(last);
		observe(s, phase, remaining(grace), last);
		if (!last->available || !any_survivor(s, last) || msb__now_ns() >= until ||
		    remaining(grace) <= 0)
			return;
		sleep_s(0.05);
	}
}

/*
 * 14.20, 14.22, 14.23: one shared grace for observations and signals, the
 * pre-signal observation at most a quarter of it. `term` first sends SIGTERM
 * (a run that overran) and gives it a second, then SIGKILL to whatever
 * remains; the final observation waits (within the grace) for the signals
 * to be delivered before it counts survivors.
 */
static msb_signal_outcome cleanup(struct supervisor *s, bool term)
{
	int64_t grace = msb__now_ns() + (int64_t)(MSB_PROCESS_CLEANUP_GRACE * 1e9);
	struct snapshot before = {0}, after = {0};
	observe(s, "before-signal", MSB_PROCESS_CLEANUP_GRACE / 4, &before);
	size_t targets = 0;
	msb_signal_outcome outcome =
		signal_targets(s, term ? "TERM" : "KILL", &before, &targets, remaining(grace));
	if (term && s->pid > 0) {
		struct snapshot mid = {0};
		settle(s, "after-term", 1.0, grace, &mid);
		if (!mid.available || any_survivor(s, &mid)) {
			size_t more = 0;
			signal_targets(s, "KILL", &mid, &more, remaining(grace));
		}
		snapshot_free(&mid);
	}
	if (s->pid > 0)
		settle(s, "after-cleanup", 1.0, grace, &after);
	else
		observe(s, "after-cleanup", remaining(grace), &after);
	/* Survivors: the recorded process or group, and tracked descendants. */
	size_t n_surv = 0;
	_cleanup_free_ msb_ev_process *surv = calloc(after.n + 1, sizeof(*surv));
	for (size_t i = 0; surv && i < after.n; i++) {
		const struct proc *p = &after.p[i];
		if (survives(s, p))
			surv[n_surv++] =
				(msb_ev_process){p->pid, p->ppid, p->start, p->uid, p->comm};
	}
	if (n_surv)
		s->unclean = true;
	if (s->pid > 0 && after.available && after.complete && n_surv == 0 &&
	    outcome != MSB_SIGNAL_SENT && outcome != MSB_SIGNAL_REFUSED)
		outcome = MSB_SIGNAL_ABSENT;
	const msb_observer *o = s->o->observer;
	if (msb_observer__wants(o, process_cleanup)) {
		msb_ev_process_cleanup ev = {s->o->key,
					     s->o->call,
					     outcome,
					     targets,
					     targets - (n_surv < targets ? n_surv : targets),
					     surv,
					     n_surv,
					     s->unclean};
		msb_observer__process_cleanup(o, &s->log, &ev);
	}
	snapshot_free(&before);
	snapshot_free(&after);
	return outcome;
}

/* ---- receipts (14.17-14.19) ------------------------------------------------------- */

static bool parse_int(const char *s, size_t len, int64_t *out)
{
	if (len == 0 || len > 10)
		return false;
	int64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

static bool parse_receipts(const char *text, int64_t *pid, int64_t *pgid)
{
	*pid = *pgid = -1;
	bool end = false;
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		if (end)
			return false; /* nothing may follow the end */
		if (len == 15 && strncmp(line, "msb-receipt end", 15) == 0)
			end = true;
		else if (len > 16 && strncmp(line, "msb-receipt pid=", 16) == 0 && *pid < 0) {
			if (!parse_int(line + 16, len - 16, pid))
				return false;
		} else if (len > 17 && strncmp(line, "msb-receipt pgid=", 17) == 0 && *pgid < 0) {
			if (!parse_int(line + 17, len - 17, pgid))
				return false;
		} else {
			return false;
		}
		line = nl ? nl + 1 : NULL;
	}
	/* pid 1 is the guest's init; a group must be the program's own. */
	return end && *pid > 1 && (*pgid < 0 || *pgid == *pid);
}

/* ---- the run ------------------------------------------------------------------------- */

static int present(msb_sandbox *sb, const char *path, bool *yes, msb_error **err)
{
	msb_entry e = {0};
	int rc = msb_sandbox_stat_file(sb, path, NULL, yes, &e, err);
	msb_entry_clear(&e);
	return rc;
}

static int answer_one(msb_sandbox *sb, msb_host_tool_run *run, const msb_guest_run_layout *l,
		      unsigned n, bool *abandoned, msb_error **err)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "/%04u.request.json", n);
	_cleanup_free_ char *req_path = msb__asprintf("%s%s", l->calls, rel);
	snprintf(rel, sizeof(rel), "/%04u.response.json", n);
	_cleanup_free_ char *resp_path = msb__asprintf("%s%s", l->calls, rel);
	if (!req_path || !resp_path)
		return msb__error_nomem(err);
	_cleanup_free_ uint8_t *data = NULL;
	size_t len = 0;
	msb_error *re = NULL;
	int rc = msb_sandbox_read_file(sb, req_path, NULL, MSB_HOSTTOOLS_MAX_REQUEST_BYTES, &data,
				       &len, &re);
	bool too_big = rc == MSB_E_TRANSFER_CAP_EXCEEDED;
	if (rc < 0 && !too_big)
		return msb__error_propagate(err, re);
	msb_error_free(re);
	*abandoned = false;
	if (!too_big) {
		json_t *j = json_loadb((const char *)data, len, 0, NULL);
		*abandoned =
			j && json_is_object(j) && json_is_true(json_object_get(j, "abandoned"));
		json_decref(j);
		if (*abandoned)
			return 0; /* 14.14: skipped, nothing to answer */
	}
	msb_host_tool_result res = {NULL, NULL};
	rc = too_big ? msb_hosttools__refuse_request(run, MSB_HOSTTOOLS_TOO_LARGE,
						     MSB_HOSTTOOLS_FRAMING_BYTES, &res, err)
		     : msb_host_tool_run_call_request(run, (const char *)data, len,
						      MSB_HOSTTOOLS_FRAMING_BYTES, &res, err);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *body = msb_hosttools__response_body(&res);
	if (!body)
		return msb__error_nomem(err);
	return msb_sandbox_write_file(sb, resp_path, (const uint8_t *)body, strlen(body), NULL,
				      err);
}

static void remove_transport(msb_sandbox *sb, const msb_guest_run_layout *l, const msb_logger *lg)
{
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, "rm -rf -- ");
	quote(&b, l->transport);
	_cleanup_free_ char *script = msb__buf_steal_str(&b);
	msb_exec_result r;
	msb_error *e = NULL;
	/* 14.29: best effort, logged only. */
	if (!script || sh(sb, script, MSB_RECLAIM_GRACE, false, &r, &e) < 0 || r.exit_code != 0)
		msb__log(lg, MSB_LOG_WARNING, "hosttools",
			 "the transport directory `%s` was not removed%s%s: its request and "
			 "response files stay readable in the guest",
			 l->transport, e ? ": " : "", e ? msb_error_message(e) : "");
	if (!e)
		msb_exec_result_clear(&r);
	msb_error_free(e);
}

static int read_capped(msb_sandbox *sb, const char *path, uint64_t cap, uint8_t **data, size_t *len)
{
	msb_error *e = NULL;
	int rc = msb_sandbox_read_file(sb, path, NULL, cap, data, len, &e);
	msb_error_free(e);
	return rc;
}

/* Write and run the launcher, check its receipts, open the gate. 0 with the
 * program running (s->pid set); 1 when the launcher failed (14.28: *out
 * filled, nothing started); or an error, after the cleanup it needs. */
static int launch(struct supervisor *s, const msb_guest_run_layout *l, const char *interp,
		  int64_t deadline, msb_exec_result *out, msb_error **err)
{
	msb_sandbox *sb = s->sb;
	_cleanup_free_ char *launcher = NULL, *start = NULL;
	/* Launch observations share the run's timeout (14.23). */
	observe(s, "before-launch", fmin(remaining(deadline), MSB_PROCESS_CLEANUP_GRACE / 4), NULL);
	if (msb_hosttools__launcher(l, interp, fmin(s->o->timeout, LAUNCH_BOUND), &launcher) < 0)
		return msb__error_nomem(err);
	int rc = msb_sandbox_write_file(sb, l->launcher, (const uint8_t *)launcher,
					strlen(launcher), NULL, err);
	if (rc < 0)
		return rc;
	{
		msb_buf b = MSB_BUF_INIT;
		msb__buf_puts(&b, "sh ");
		quote(&b, l->launcher);
		start = msb__buf_steal_str(&b);
	}
	if (!start)
		return msb__error_nomem(err);
	msb_exec_result lr;
	msb_error *le = NULL;
	rc = sh(sb, start, fmax(fmin(remaining(deadline), LAUNCH_BOUND), 0.001), false, &lr, &le);
	if (rc == MSB_E_TIMEOUT) {
		msb_error_free(le);
		/* The launcher backgrounds the program before it reports the pid: a
		 * launch that expires may have left one running with no pid known. */
		rc = msb_error_set(err, MSB_E_PROGRAM_TIMEOUT,
				   "the launcher did not report within the run's bound, so the "
				   "program's start could not be established and no signal was "
				   "sent");
		msb__error_set_timeout(err, MSB_SIGNAL_UNRECORDED, NULL, 0);
		s->unclean = true;
		return rc;
	}
	if (rc < 0) {
		msb__error_propagate(err, le);
		return rc;
	}
	if (lr.exit_code != 0) {
		/* 14.28 */
		out->exit_code = lr.exit_code;
		out->stdout_bytes = (uint8_t *)msb__strdup("");
		msb_buf b = MSB_BUF_INIT;
		msb__buf_append(&b, lr.stderr_bytes, lr.stderr_len);
		msb__buf_puts(&b, "\nlauncher did not start the program\n");
		out->stderr_len = b.len;
		out->stderr_bytes = (uint8_t *)msb__buf_steal_str(&b);
		msb_exec_result_clear(&lr);
		return 1;
	}
	bool valid = parse_receipts((const char *)lr.stdout_bytes, &s->pid, &s->pgid);
	msb_exec_result_clear(&lr);
	if (!valid) {
		/* 14.18: refused, no program released, cleanup unclean. */
		s->pid = s->pgid = -1;
		s->unclean = true;
		rc = msb_error_set(err, MSB_E_RUNTIME,
				   "the launcher's receipts are missing or invalid, so the program "
				   "was not started");
		cleanup(s, false);
		return rc;
	}
	observe(s, "after-launch", fmin(remaining(deadline), MSB_PROCESS_CLEANUP_GRACE / 4), NULL);
	rc = msb_sandbox_write_file(sb, l->gate, (const uint8_t *)"", 0, NULL, err);
	if (rc < 0)
		cleanup(s, true);
	return rc;
}

/* Serve requests in id order, one at a time (14.13, 14.14), until the exit
 * marker lands (*finished) or the deadline passes. */
static int serve(msb_sandbox *sb, msb_host_tool_run *run, const msb_guest_run_layout *l,
		 const msb_over_exec_options *opts, int64_t deadline, bool *finished,
		 msb_error **err)
{
	unsigned next = 1;
	int rc = 0;
	*finished = false;
	while (!*finished) {
		/* 14.24: the deadline is checked before a call starts, never during. */
		if (msb__now_ns() >= deadline)
			break;
		char rel[64];
		snprintf(rel, sizeof(rel), "/%04u.request.json", next);
		_cleanup_free_ char *req = msb__asprintf("%s%s", l->calls, rel);
		if (!req) {
			rc = msb__error_nomem(err);
			break;
		}
		bool yes = false;
		rc = present(sb, req, &yes, err);
		if (rc < 0)
			break;
		if (yes) {
			bool abandoned = false;
			rc = answer_one(sb, run, l, next, &abandoned, err);
			if (rc < 0)
				break;
			next++;
			continue;
		}
		rc = present(sb, l->exit_code, finished, err);
		if (rc < 0 || *finished)
			break;
		sleep_s(fmin(opts->poll_interval, remaining(deadline)));
	}
	return rc;
}

/* The run did not finish in time: stop it, and refuse with the partial
 * output and what the signal did. */
static int timed_out(struct supervisor *s, const msb_guest_run_layout *l, msb_error **err)
{
	msb_signal_outcome outcome = cleanup(s, true);
	_cleanup_free_ uint8_t *partial = NULL;
	size_t plen = 0;
	if (read_capped(s->sb, l->output, PARTIAL_OUTPUT_BYTES, &partial, &plen) < 0)
		plen = 0;
	int rc = msb_error_set(err, MSB_E_PROGRAM_TIMEOUT,
			       "the program did not finish within %g s; %s", s->o->timeout,
			       outcome == MSB_SIGNAL_SENT      ? "its process group was signalled "
								 "(SIGTERM, then SIGKILL)"
			       : outcome == MSB_SIGNAL_REFUSED ? "signalling it was refused"
			       : outcome == MSB_SIGNAL_ABSENT  ? "no recorded process remained "
								 "to signal"
							       : "whether it was signalled is "
								 "unknown");
	msb__error_set_timeout(err, (int)outcome, partial, plen);
	return rc;
}

/* Completed: the recorded exit code and the captured output into *res. */
static int completed(struct supervisor *s, const msb_guest_run_layout *l, msb_exec_result *res,
		     msb_error **err)
{
	_cleanup_free_ uint8_t *code = NULL;
	size_t clen = 0;
	int rc = msb_sandbox_read_file(s->sb, l->exit_code, NULL, 64, &code, &clen, err);
	if (rc < 0) {
		cleanup(s, false);
		return rc;
	}
	int64_t ec = -1;
	while (clen && (code[clen - 1] == '\n' || code[clen - 1] == ' '))
		clen--;
	if (!parse_int((const char *)code, clen, &ec) || ec > 255)
		ec = 255;
	uint8_t *output = NULL;
	size_t olen = 0;
	if (read_capped(s->sb, l->output, MAX_OUTPUT_BYTES, &output, &olen) < 0) {
		output = NULL;
		olen = 0;
	}
	/* ExecResult's bytes are NUL-terminated for convenience. */
	uint8_t *term = realloc(output, olen + 1);
	if (!term) {
		free(output);
		rc = msb__error_nomem(err);
		cleanup(s, false);
		return rc;
	}
	term[olen] = 0;
	output = term;
	cleanup(s, false);
	res->exit_code = (int)ec;
	res->stdout_bytes = output;
	res->stdout_len = olen;
	res->stderr_bytes = (uint8_t *)msb__strdup("");
	return 0;
}

int msb_host_tool_calls_over_exec(msb_sandbox *sb, msb_host_tool_run *run,
				  const msb_guest_run_layout *l, const msb_over_exec_options *opts,
				  msb_exec_result *out, msb_error **err)
{
	static const msb_over_exec_options defaults = MSB_OVER_EXEC_OPTIONS_INIT;
	if (!sb || !run || !l || !out)
		return msb_error_set(err, MSB_E_VALUE, "host_tool_calls_over_exec: NULL argument");
	if (!opts)
		opts = &defaults;
	if (opts->version != MSB_OVER_EXEC_OPTIONS_VERSION)
		return msb_error_set(err, MSB_E_VALUE, "over-exec options: unknown version %u",
				     opts->version);
	/* 14.3: before anything starts. */
	int rc = msb__check_timeout(opts->timeout, "timeout", err);
	if (rc == 0)
		rc = msb__check_timeout(opts->poll_interval, "poll_interval", err);
	if (rc < 0)
		return rc;
	const char *interp = opts->interpreter ? opts->interpreter : "python3";
	int64_t deadline = msb__now_ns() + (int64_t)(opts->timeout * 1e9);
	struct supervisor s = {sb, opts, {opts->log, opts->log_userdata}, -1, -1, NULL, 0, false};
	msb_exec_result res = {0};

	rc = launch(&s, l, interp, deadline, out, err);
	if (rc == 1) {
		rc = 0; /* the launcher failed: *out says so */
		goto out_removed;
	}
	if (rc < 0)
		goto out_removed;
	bool finished = false;
	rc = serve(sb, run, l, opts, deadline, &finished, err);
	if (rc < 0) {
		cleanup(&s, true);
		goto out_removed;
	}
	if (!finished) {
		/* 14.27: a marker that landed at the deadline is a completed run. */
		bool yes = false;
		msb_error *e = NULL;
		if (present(sb, l->exit_code, &yes, &e) == 0 && yes)
			finished = true;
		msb_error_free(e);
	}
	if (!finished) {
		rc = timed_out(&s, l, err);
		goto out_removed;
	}
	rc = completed(&s, l, &res, err);
	if (rc < 0)
		goto out_removed;
	remove_transport(sb, l, &s.log);
	free(s.desc);
	*out = res;
	return 0;
out_removed:
	remove_transport(sb, l, &s.log);
	free(s.desc);
	return rc;
}

/* ---- reclaim_run (14.31) ---------------------------------------------------------- */

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return path && strncmp(path, dir, n) == 0 && path[n] == '/';
}

int msb_reclaim_run(msb_sandbox *sb, const msb_guest_run_layout *l, double timeout, bool *removed,
		    msb_error **err)
{
	int rc = msb__check_timeout(timeout, "timeout", err);
	if (rc < 0)
		return rc;
	if (!sb || !l || !removed || !l->directory)
		return msb_error_set(err, MSB_E_VALUE, "reclaim_run: NULL argument");
	*removed = false;
	const char *d = l->directory;
	size_t comps = 0;
	for (const char *p = d; *p; p++)
		if (*p == '/' && p[1] && p[1] != '/')
			comps++;
	const char *paths[] = {l->work,	 l->transport, l->program,   l->shim, l->launcher,
			       l->calls, l->output,    l->exit_code, l->pid,  l->gate};
	bool ok = d[0] == '/' && comps >= 2 && !strstr(d, "/../") && !strstr(d, "/./");
	for (size_t i = 0; ok && i < MSB_ARRAY_SIZE(paths); i++)
		ok = under(paths[i], d) && !strstr(paths[i], "/..");
	if (!ok)
		return 0;
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, "rm -rf -- ");
	quote(&b, d);
	msb__buf_puts(&b, " && ! test -e ");
	quote(&b, d);
	_cleanup_free_ char *script = msb__buf_steal_str(&b);
	if (!script)
		return msb__error_nomem(err);
	msb_exec_result r;
	msb_error *e = NULL;
	if (sh(sb, script, timeout, false, &r, &e) == 0) {
		*removed = r.exit_code == 0;
		msb_exec_result_clear(&r);
	}
	msb_error_free(e);
	return 0;
}
