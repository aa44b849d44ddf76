/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A JSON-lines recorder for the ten events. One event is one line written
 * with one write(2), so concurrent callers never interleave; a short write
 * is retried for the remainder under a mutex.
 */
#include <pthread.h>

#include <msb/spec.h>

#include "core/core.h"
#include "util/json.h"

struct msb_jsonl_recorder {
	int fd;
	pthread_mutex_t lock;
};

static json_t *jstr(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *jkey(const msb_key *k)
{
	if (!k)
		return json_null();
	return json_pack("{s:o, s:o, s:o, s:o}", "scope", jstr(k->scope), "thread_id",
			 jstr(k->thread_id), "agent_dir", jstr(k->agent_dir), "call_id",
			 jstr(k->call_id));
}

static json_t *jspec(const msb_spec *s)
{
	if (!s)
		return json_null();
	char *text = NULL;
	if (msb_spec_to_json(s, &text, NULL) < 0)
		return json_null();
	json_t *v = json_loads(text, 0, NULL);
	free(text);
	return v ? v : json_null();
}

static json_t *jprocs(const msb_ev_process *p, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a,
				      json_pack("{s:I, s:I, s:I, s:I, s:o}", "pid",
						(json_int_t)p[i].pid, "ppid", (json_int_t)p[i].ppid,
						"start_ticks", (json_int_t)p[i].start_ticks, "uid",
						(json_int_t)p[i].uid, "argv", jstr(p[i].argv)));
	return a;
}

static int write_line(msb_jsonl_recorder *rec, const char *event, json_t *obj)
{
	if (!obj)
		return -ENOMEM;
	json_object_set_new(obj, "event", json_string(event));
	char *line = msb__json_dump(obj);
	json_decref(obj);
	if (!line)
		return -ENOMEM;
	size_t len = strlen(line);
	line[len] = '\n';
	len++;
	int r = 0;
	pthread_mutex_lock(&rec->lock);
	for (size_t off = 0; off < len;) {
		ssize_t n = write(rec->fd, line + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		off += (size_t)n;
	}
	pthread_mutex_unlock(&rec->lock);
	free(line);
	return r;
}

static int on_acquired(void *ud, const msb_ev_sandbox_acquired *ev)
{
	return write_line(ud, "SandboxAcquired",
			  json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "key", jkey(ev->key), "spec",
				    jspec(ev->spec), "refusal", jstr(ev->refusal), "call",
				    jstr(ev->call), "backend", jstr(ev->backend), "instance_id",
				    jstr(ev->instance_id)));
}

static int on_disposed(void *ud, const msb_ev_sandbox_disposed *ev)
{
	json_t *results = json_array();
	for (size_t i = 0; results && i < ev->n_results; i++) {
		const msb_ev_disposal_result *r = &ev->results[i];
		json_array_append_new(
			results,
			json_pack("{s:o, s:b, s:o}", "backend", jstr(r->backend), "failed",
				  r->failed, "code",
				  r->failed ? jstr(msb_disposal_code_name(r->code)) : json_null()));
	}
	return write_line(ud, "SandboxDisposed",
			  json_pack("{s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "key", jkey(ev->key),
				    "kind", jstr(ev->kind), "instance_id", jstr(ev->instance_id),
				    "disposed", ev->disposed, "results", results, "origin",
				    jstr(ev->origin), "call", jstr(ev->call)));
}

static int on_scope(void *ud, const msb_ev_scope_disposed *ev)
{
	return write_line(ud, "ScopeDisposed",
			  json_pack("{s:o, s:o, s:I, s:I, s:n}", "scope", jstr(ev->scope),
				    "thread_id", jstr(ev->thread_id), "disposed",
				    (json_int_t)ev->disposed, "undisposed",
				    (json_int_t)ev->undisposed, "call"));
}

static int on_egress(void *ud, const msb_ev_egress_observed *ev)
{
	const struct msb_egress_record *r = ev->record;
	return write_line(ud, "EgressObserved",
			  json_pack("{s:o, s:I, s:s, s:o, s:i, s:o, s:o, s:I, s:I, s:n}", "key",
				    jkey(ev->key), "time_ns", (json_int_t)r->time_ns, "decision",
				    r->decision == MSB_EGRESS_ALLOW ? "ALLOW" : "DENY", "host",
				    jstr(r->host), "port", (int)r->port, "method", jstr(r->method),
				    "reason", jstr(r->reason), "bytes_up", (json_int_t)r->bytes_up,
				    "bytes_down", (json_int_t)r->bytes_down, "call"));
}

static int on_host_tool(void *ud, const msb_ev_host_tool_called *ev)
{
	return write_line(ud, "HostToolCalled",
			  json_pack("{s:o, s:b, s:o, s:o, s:I, s:o, s:o, s:o}", "tool",
				    jstr(ev->tool), "tool_guest_influenced",
				    ev->tool_guest_influenced, "sink", jstr(ev->sink), "outcome",
				    jstr(ev->outcome), "response_bytes",
				    (json_int_t)ev->response_bytes, "refusal", jstr(ev->refusal),
				    "key", jkey(ev->key), "call", jstr(ev->call)));
}

static int on_processes(void *ud, const msb_ev_processes_observed *ev)
{
	return write_line(ud, "ProcessesObserved",
			  json_pack("{s:o, s:o, s:o, s:b, s:b, s:o}", "key", jkey(ev->key), "call",
				    jstr(ev->call), "phase", jstr(ev->phase), "available",
				    ev->available, "complete", ev->complete, "processes",
				    jprocs(ev->processes, ev->n_processes)));
}

static int on_cleanup(void *ud, const msb_ev_process_cleanup *ev)
{
	return write_line(
		ud, "ProcessCleanup",
		json_pack("{s:o, s:o, s:o, s:I, s:I, s:o, s:b}", "key", jkey(ev->key), "call",
			  jstr(ev->call), "signal", jstr(msb_signal_outcome_name(ev->signal)),
			  "targets_signalled", (json_int_t)ev->targets_signalled, "confirmations",
			  (json_int_t)ev->confirmations, "survivors",
			  jprocs(ev->survivors, ev->n_survivors), "unclean", ev->unclean));
}

static int on_store_read(void *ud, const msb_ev_store_file_read *ev)
{
	return write_line(ud, "StoreFileRead",
			  json_pack("{s:o, s:o, s:o, s:o, s:o}", "path", jstr(ev->path), "outcome",
				    jstr(ev->outcome), "integrity",
				    ev->integrity == MSB_INTEGRITY_UNESTABLISHED
					    ? json_string("unestablished")
					    : jstr(msb_integrity_name(ev->integrity)),
				    "key", jkey(ev->key), "call", jstr(ev->call)));
}

static int on_outputs(void *ud, const msb_ev_outputs_collected *ev)
{
	json_t *landed = json_array();
	for (size_t i = 0; landed && i < ev->n_landed; i++)
		json_array_append_new(landed, jstr(ev->landed[i]));
	return write_line(ud, "OutputsCollected",
			  json_pack("{s:o, s:o, s:o, s:I, s:o}", "key", jkey(ev->key), "call",
				    jstr(ev->call), "landed", landed, "bytes",
				    (json_int_t)ev->bytes, "refusal", jstr(ev->refusal)));
}

static int on_call_ended(void *ud, const msb_ev_tool_call_ended *ev)
{
	json_t *keys = json_array();
	for (size_t i = 0; keys && i < ev->n_keys; i++)
		json_array_append_new(keys, jkey(ev->keys[i]));
	json_t *fed = json_null();
	if (ev->fed)
		fed = json_pack("{s:o, s:I}", "weakest_integrity",
				ev->fed_weakest == MSB_INTEGRITY_UNESTABLISHED
					? json_string("unestablished")
					: jstr(msb_integrity_name(ev->fed_weakest)),
				"count", (json_int_t)ev->fed_count);
	return write_line(ud, "ToolCallEnded",
			  json_pack("{s:o, s:o, s:o, s:o}", "call", jstr(ev->call), "keys", keys,
				    "outcome", jstr(ev->outcome), "fed", fed));
}

int msb_jsonl_recorder_new(int fd, msb_jsonl_recorder **rec, msb_observer *out, msb_error **err)
{
	if (fd < 0 || !rec || !out)
		return msb_error_set(err, MSB_E_VALUE, "jsonl recorder: fd and outputs required");
	msb_jsonl_recorder *r = calloc(1, sizeof(*r));
	if (!r)
		return msb__error_nomem(err);
	r->fd = fd;
	pthread_mutex_init(&r->lock, NULL);
	msb_observer o = MSB_OBSERVER_INIT;
	o.userdata = r;
	o.sandbox_acquired = on_acquired;
	o.sandbox_disposed = on_disposed;
	o.scope_disposed = on_scope;
	o.egress_observed = on_egress;
	o.host_tool_called = on_host_tool;
	o.processes_observed = on_processes;
	o.process_cleanup = on_cleanup;
	o.store_file_read = on_store_read;
	o.outputs_collected = on_outputs;
	o.tool_call_ended = on_call_ended;
	*out = o;
	*rec = r;
	return 0;
}

void msb_jsonl_recorder_free(msb_jsonl_recorder *rec)
{
	if (!rec)
		return;
	pthread_mutex_destroy(&rec->lock);
	free(rec);
}
