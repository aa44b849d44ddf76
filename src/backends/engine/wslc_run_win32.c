/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wslc runner on Windows (checklist 21.11, 21.12; docs/windows.md): the
 * same contract as wslc_run.c. One child per invocation, made with
 * CreateProcessW from a command line quoted by the Windows rules
 * (util/winargv.h), inside a job object (its group: a kill ends the child
 * and what it started); pipes on all three standard streams, stdout and
 * stderr read as bytes arrive and counted against the invocation's budget,
 * stdin written by a thread of its own; any abnormal end of waiting - the
 * bound, a cancellation, a sink that has what it wants - terminates the job
 * and waits for the child before returning.
 */
#include <windows.h>

#include <stdio.h>

#include "platform/win32/win32.h"
#include "util/winargv.h"
#include "wslc.h"

/* 128 + SIGKILL, as a killed child's code reads on Linux. */
#define KILLED_CODE 137

void msb_wslc__outcome_clear(wslc_outcome *o)
{
	msb__buf_free(&o->out);
	msb__buf_free(&o->err);
	memset(o, 0, sizeof(*o));
}

static void close_h(HANDLE *h)
{
	if (*h && *h != INVALID_HANDLE_VALUE)
		CloseHandle(*h);
	*h = NULL;
}

struct feeder {
	HANDLE h;
	const wslc_io *io;
};

/* stdin's three parts, then the pipe closed; a child that stops reading
 * fails the write and ends the thread. */
static DWORD WINAPI feed_stdin(void *arg)
{
	struct feeder *f = arg;
	static const uint8_t zeros[4096];
	const wslc_io *io = f->io;
	const struct {
		const uint8_t *p;
		size_t n;
	} parts[] = {{io->in_head, io->in_head_len}, {io->in_data, io->in_data_len}};
	for (size_t i = 0; i < 2; i++)
		for (size_t off = 0; off < parts[i].n;) {
			size_t left = parts[i].n - off;
			DWORD w = 0;
			if (!WriteFile(f->h, parts[i].p + off, left > 65536 ? 65536 : (DWORD)left,
				       &w, NULL))
				goto done;
			off += w;
		}
	for (size_t left = io->in_tail_len; left > 0;) {
		DWORD w = 0;
		if (!WriteFile(f->h, zeros, left > sizeof(zeros) ? sizeof(zeros) : (DWORD)left, &w,
			       NULL))
			break;
		left -= w;
	}
done:
	close_h(&f->h);
	return 0;
}

/* The child's ends: inheritable; ours: not. */
static int make_pipe(HANDLE *ours, HANDLE *theirs, bool theirs_reads)
{
	SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
	HANDLE r, w;
	if (!CreatePipe(&r, &w, &sa, 65536))
		return -1;
	*ours = theirs_reads ? w : r;
	*theirs = theirs_reads ? r : w;
	SetHandleInformation(*ours, HANDLE_FLAG_INHERIT, 0);
	return 0;
}

struct child {
	HANDLE job, proc, in, out, err, feeder;
	struct feeder f;
};

static void child_close(struct child *c)
{
	close_h(&c->out);
	close_h(&c->err);
	if (c->feeder) {
		/* a write the child will never read is cancelled, then joined */
		CancelSynchronousIo(c->feeder);
		WaitForSingleObject(c->feeder, INFINITE);
		close_h(&c->feeder);
	}
	close_h(&c->in);
	close_h(&c->proc);
	close_h(&c->job);
}

static int spawn_failed(const char *prog, DWORD e, msb_error **err)
{
	if (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND || e == ERROR_ACCESS_DENIED)
		return msb__error_errno(err, ENOENT,
					"cannot run `%s` (wslc_path): is WSL 2.9.3 or later "
					"installed?",
					prog);
	return msb_error_set(err, MSB_E_OS, "cannot run `%s`: Windows error %lu", prog,
			     (unsigned long)e);
}

static int spawn_child(char *const *argv, const wslc_io *io, struct child *c, msb_error **err)
{
	_cleanup_free_ char *line = msb__win_cmdline((const char *const *)argv);
	if (!line)
		return errno == ENOMEM
			       ? msb__error_nomem(err)
			       : msb_error_set(err, MSB_E_VALUE,
					       "cannot quote `%s` as a Windows program name",
					       argv[0]);
	_cleanup_free_ wchar_t *wline = msb__win_wide(line);
	if (!wline)
		return msb_error_set(err, MSB_E_VALUE, "`%s`: an argument is not UTF-8", argv[0]);
	HANDLE child_in = NULL, child_out = NULL, child_err = NULL;
	SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
	int pr = io->has_stdin ? make_pipe(&c->in, &child_in, true) : 0;
	if (!io->has_stdin) {
		child_in = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE,
				       &sa, OPEN_EXISTING, 0, NULL);
		pr = child_in == INVALID_HANDLE_VALUE ? -1 : 0;
	}
	if (pr < 0 || make_pipe(&c->out, &child_out, false) < 0 ||
	    make_pipe(&c->err, &child_err, false) < 0) {
		close_h(&child_in), close_h(&child_out), close_h(&child_err);
		return msb_error_set(err, MSB_E_OS, "cannot make pipes for `%s`", argv[0]);
	}
	c->job = CreateJobObjectW(NULL, NULL);
	JOBOBJECT_EXTENDED_LIMIT_INFORMATION lim = {0};
	lim.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
	if (c->job)
		SetInformationJobObject(c->job, JobObjectExtendedLimitInformation, &lim,
					sizeof(lim));
	STARTUPINFOW si = {0};
	si.cb = sizeof(si);
	si.dwFlags = STARTF_USESTDHANDLES;
	si.hStdInput = child_in;
	si.hStdOutput = child_out;
	si.hStdError = child_err;
	PROCESS_INFORMATION pi = {0};
	BOOL ok = CreateProcessW(NULL, wline, NULL, NULL, TRUE,
				 CREATE_SUSPENDED | CREATE_NO_WINDOW | CREATE_UNICODE_ENVIRONMENT,
				 NULL, NULL, &si, &pi);
	DWORD e = ok ? 0 : GetLastError();
	close_h(&child_in), close_h(&child_out), close_h(&child_err);
	if (!ok)
		return spawn_failed(argv[0], e, err);
	if (!c->job || !AssignProcessToJobObject(c->job, pi.hProcess)) {
		TerminateProcess(pi.hProcess, KILLED_CODE);
		WaitForSingleObject(pi.hProcess, INFINITE);
		CloseHandle(pi.hThread);
		CloseHandle(pi.hProcess);
		return msb_error_set(err, MSB_E_OS, "`%s`: cannot put the child in a job object",
				     argv[0]);
	}
	c->proc = pi.hProcess;
	ResumeThread(pi.hThread);
	CloseHandle(pi.hThread);
	if (io->has_stdin) {
		c->f = (struct feeder){c->in, io};
		c->in = NULL; /* the feeder's now */
		c->feeder = CreateThread(NULL, 0, feed_stdin, &c->f, 0, NULL);
		if (!c->feeder)
			close_h(&c->f.h);
	}
	return 0;
}

/* Keep n bytes of stream s (0 stdout, 1 stderr) by the io's rules. */
static int take(const wslc_io *io, wslc_outcome *out, int s, const uint8_t *buf, size_t n,
		const char *prog, bool *kill_it, msb_error **err)
{
	msb_buf *b = s == 0 ? &out->out : &out->err;
	uint64_t max = s == 0 ? io->max_out : io->max_err;
	if (s == 0 && io->sink) {
		int q = io->sink(io->sink_ud, buf, n, err);
		if (q == WSLC_SINK_DONE)
			out->stopped = *kill_it = true;
		return q < 0 ? q : 0;
	}
	size_t keep = n;
	if (b->len + keep > max) {
		keep = b->len < max ? (size_t)(max - b->len) : 0;
		if (s == 0 && io->bounded)
			out->truncated = true;
		else if (s == 0)
			return msb_error_set(err, MSB_E_RUNTIME, "`%s` wrote more than %llu bytes",
					     prog, (unsigned long long)max);
	}
	return keep && msb__buf_append(b, buf, keep) < 0 ? msb__error_nomem(err) : 0;
}

/* Read what is waiting on pipe *h without blocking; 1 when something was. */
static int drain(HANDLE *h, const wslc_io *io, wslc_outcome *out, int s, const char *prog,
		 bool *kill_it, int *rc, msb_error **err)
{
	uint8_t buf[16384];
	DWORD avail = 0;
	if (!*h)
		return 0;
	if (!PeekNamedPipe(*h, NULL, 0, NULL, &avail, NULL)) {
		close_h(h); /* broken: every writer is gone */
		return 1;
	}
	if (avail == 0)
		return 0;
	DWORD n = 0;
	if (!ReadFile(*h, buf, avail > sizeof(buf) ? sizeof(buf) : avail, &n, NULL)) {
		close_h(h);
		return 1;
	}
	int q = take(io, out, s, buf, n, prog, kill_it, err);
	if (q < 0)
		*rc = q;
	return 1;
}

int msb_wslc__spawn(void *ud, char *const *argv, const wslc_io *io, wslc_outcome *out,
		    msb_error **err)
{
	memset(out, 0, sizeof(*out));
	out->out = (msb_buf)MSB_BUF_INIT;
	out->err = (msb_buf)MSB_BUF_INIT;
	struct child c = {0};
	int rc = spawn_child(argv, io, &c, err);
	if (rc < 0) {
		child_close(&c);
		return rc;
	}
	int64_t deadline = msb__now_ns() + (int64_t)(io->timeout * 1e9);
	bool kill_it = false;
	while (c.out || c.err) {
		if (io->cancel && msb_cancel_requested(io->cancel)) {
			out->cancelled = kill_it = true;
			break;
		}
		if (msb__now_ns() >= deadline) {
			out->timed_out = kill_it = true;
			break;
		}
		int got = drain(&c.out, io, out, 0, argv[0], &kill_it, &rc, err);
		if (rc == 0 && !kill_it)
			got |= drain(&c.err, io, out, 1, argv[0], &kill_it, &rc, err);
		if (rc < 0 || kill_it) {
			kill_it = true;
			break;
		}
		if (!got)
			Sleep(1);
	}
	/* Both pipes closed: the child is exiting; one that lingers is still
	 * bounded by the deadline. */
	while (!kill_it && WaitForSingleObject(c.proc, 1) == WAIT_TIMEOUT)
		if (msb__now_ns() >= deadline)
			out->timed_out = kill_it = true;
	if (kill_it)
		TerminateJobObject(c.job, KILLED_CODE);
	WaitForSingleObject(c.proc, INFINITE);
	DWORD code = (DWORD)-1;
	GetExitCodeProcess(c.proc, &code);
	out->exit_code = (int)code;
	child_close(&c);
	if (rc < 0)
		msb_wslc__outcome_clear(out);
	return rc;
}
