/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-agent internals. The agent is a single-threaded poll loop: it accepts
 * host connections on an inherited listening socket, serves the protocol of
 * src/proto on each, runs workloads (agent/exec.c, agent/child.c) and, as
 * PID 1, reaps every process. It links src/proto and nothing else of ours.
 */
#ifndef MSB_AGENT_AGENT_H
#define MSB_AGENT_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto/outq.h"
#include "proto/proto.h"

#define AGENT_DEFAULT_WORK "/maf-sandbox/work"
#define AGENT_MAX_CONNS 256
/* Stop reading a connection and its workloads' pipes while this much is queued. */
#define AGENT_OUTQ_HIGH (256u * 1024)
/* First allocation of a connection's send queue. */
#define AGENT_OUTQ_INITIAL (16u * 1024)
/*
 * The hard maximum of a connection's send queue. Every producer stops at
 * AGENT_OUTQ_HIGH, so the queue passes that mark by what one loop turn adds
 * after the check: one DATA frame per pipe or tunnel, the answers to one
 * receive buffer of host frames, and at worst one whole process snapshot
 * (MSB_PROTO_MAX_PS_ENTRIES entries of at most 34 + 16 + 4096 bytes, about
 * 17 MiB), which is built in one go. A host that queues more than that
 * without reading (several snapshots pipelined into one receive buffer) is
 * dropped, with a log line, rather than allowed to grow the agent's memory.
 */
#define AGENT_OUTQ_MAX (32u * 1024 * 1024)
/* stdin window the agent grants per exec channel. */
#define AGENT_STDIN_WINDOW (64u * 1024)
/* After SIGKILL: rescan /proc this often, give up confirming after this long. */
#define AGENT_KILL_SCAN_NS (5LL * 1000 * 1000)
#define AGENT_KILL_CONFIRM_NS (2LL * 1000 * 1000 * 1000)
/* A connection that is being closed gets this long to take its last frames. */
#define AGENT_CLOSE_LINGER_NS (1LL * 1000 * 1000 * 1000)
/* Sessions/groups remembered while hunting one exec's processes. */
#define AGENT_KILL_IDS 64

struct conn;

/* One exec channel. */
struct exec_ch {
	struct conn *conn;
	uint32_t id;
	pid_t pid; /* the leader (setsid: also its session and group id) */
	bool reaped;
	int status; /* wait status, once reaped */
	int in_fd;  /* -1 when closed */
	int out_fd[2];
	bool eof_sent[2];
	bool tty;	     /* EXEC_TTY: out_fd[0] and in_fd are the pty's master */
	uint8_t veof;	     /* tty: the terminal's end-of-file character */
	bool stdin_expected; /* EXEC_STDIN: the host sends stdin */
	bool stdin_eof;	     /* ... and has said it is done */
	uint8_t *in_buf;     /* stdin received, not yet written (<= AGENT_STDIN_WINDOW) */
	size_t in_len;
	uint32_t in_regrant;	     /* written or dropped since the last CREDIT */
	msb_proto_credit in_credit;  /* granted to the host, not yet received */
	msb_proto_credit out_credit; /* granted by the host, not yet used */
	bool bounded;
	uint64_t budget_left;
	bool truncated;
	int64_t deadline_ns;
	/* the kill (timeout, cancel, lost connection) */
	bool killing;
	bool kill_done;
	bool no_survivor;
	uint8_t kill_reason; /* MSB_PROTO_EXIT_TIMED_OUT or _CANCELLED */
	int64_t kill_deadline_ns;
	int64_t next_scan_ns;
	pid_t kill_ids[AGENT_KILL_IDS]; /* sessions and groups found in the hunt */
	unsigned nkill_ids;
	bool done; /* EXIT queued: free at the end of the loop turn */
	struct exec_ch *next;
};

/* One host connection. */
struct conn {
	int fd;
	msb_proto_reader *rd;
	bool hello_done;
	uint32_t peer_max_payload;
	uint16_t version;      /* negotiated in HELLO */
	uint32_t last_channel; /* highest channel id the host opened */
	msb_proto_outq out;    /* queued frames, at most AGENT_OUTQ_MAX bytes */
	bool out_refused;      /* the queue refused a frame: the connection is dropped */
	struct exec_ch *execs;
	unsigned nchannels;
	bool closing; /* a fatal ERROR is queued: flush, then close */
	int64_t close_deadline_ns;
	bool dead;
	struct conn *next;
};

/* One egress tunnel: an accepted connection on the proxy port (egress.c). */
struct tunnel {
	uint32_t id; /* even: agent-opened */
	int fd;
	uint8_t *in_buf; /* host -> guest bytes not yet written (<= window) */
	size_t in_head, in_len;
	uint32_t regrant;
	msb_proto_credit in_credit;  /* granted to the host, not yet received */
	msb_proto_credit out_credit; /* granted by the host, not yet used */
	bool eof_sent, eof_received, shut_wr;
	bool done;
	struct tunnel *next;
};

struct egress {
	int listen_fd;
	struct conn *conn; /* the host connection that asked (the shim's) */
	uint32_t listen_ch;
	uint32_t next_id; /* last even id used */
	unsigned max, ntunnels;
	uint32_t window;
	bool ready;
	bool closed; /* its connection is gone: freed by egress_sweep() */
	struct tunnel *tunnels;
};

struct agent {
	int listen_fd; /* -1 with --stdio */
	/* --stdio: the one connection is the agent's own stdin (a stream
	 * socket, e.g. an OCI runtime's init stdio); when it ends, the agent
	 * shuts down as on SIGTERM - nobody can reach it any more. */
	bool stdio;
	/* The `host` image's synthesized /etc, below the overlay (O_PATH, from
	 * MSB_AGENT_ETC_FD): hostname and hosts are rewritten there on IDENTITY,
	 * so that the guest's root stays unchanged. -1 when absent. */
	int etc_fd;
	struct egress *egress; /* NULL until a host asks for EGRESS_LISTEN */
	int sig_fd;
	char *work; /* the guest storage base, absolute */
	bool is_init;
	pid_t self;
	int cap_last;
	/* The agent's bounding set, a bit per capability (all ones: not
	 * known), and the signals whose disposition is not the default
	 * (known once sig_known: learnt while the host finishes its start,
	 * main.c): what an exec's child has to drop and reset (child.c). */
	uint64_t cap_bset;
	uint64_t sig_nondefault;
	bool sig_known;
	/* The procfs of the agent's own pid namespace, opened at start: /proc
	 * itself shows the workloads' namespace once the reaper covers it. */
	int proc_fd;
	/* PID 1: workloads run in a pid namespace of their own (pidns.c). */
	bool nested;
	/* --no-nest: workloads share the agent's pid namespace. Only for a
	 * runtime whose own kernel is the boundary and gives the agent no way
	 * to nest (the oci backend under gVisor); pidns.c says what it costs. */
	bool no_nest;
	/* --no-nest: CAP_SYS_ADMIN and CAP_MKNOD still held (pidns.c): until
	 * the host names the sandbox (IDENTITY: a pooled sandbox's host name)
	 * or the first child starts, whichever is first. */
	bool admin_held;
	/* PR_SET_DUMPABLE 0 took (main.c): children may share its memory
	 * until their execve (child_spawn) */
	bool undumpable;
	int pidns_fd;	      /* the agent's own pid namespace */
	pid_t reaper;	      /* the workloads' namespace's init; 0: none */
	int reaper_ready;     /* its report still to read (the first exec waits); -1 */
	char nest_error[256]; /* why there is none, for the exec refusal */
	struct conn *conns;
	unsigned nconns;
	bool terminating;
};

/* ---- main.c -------------------------------------------------------------- */
int64_t agent_now_ns(void);
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- conn.c -------------------------------------------------------------- */
void conn_accept(struct agent *a);
/* Serve `fd` (a connected, nonblocking, close-on-exec stream socket) as a
 * host connection; takes it (closed on failure). 0 or -ENOMEM. */
int conn_add(struct agent *a, int fd);
/* Read and dispatch what the host sent; may mark the connection dead. */
void conn_on_readable(struct agent *a, struct conn *c);
void conn_flush(struct conn *c);
/* Space for n bytes at the tail of the queue. NULL when the queue refuses
 * (at AGENT_OUTQ_MAX, or no memory): the connection is then logged and
 * closed at once. */
uint8_t *conn_reserve(struct conn *c, size_t n);
void conn_commit(struct conn *c, size_t n);
/* Queue an encoded frame (result of an msb_proto_enc_* into buf). */
void conn_queue(struct conn *c, const uint8_t *frame, int len);
size_t conn_queued(const struct conn *c);
/* Queue a fatal ERROR on channel 0 and close once it is flushed. */
void conn_fail(struct conn *c, uint16_t code, const char *msg);
void conn_close(struct agent *a, struct conn *c);
void conn_free(struct conn *c);

/* ---- identity.c ---------------------------------------------------------- */
/* IDENTITY: the sandbox's host name (and /etc, see etc_fd); answers
 * IDENTITY_OK or fails the connection. */
void agent_identity(struct agent *a, struct conn *c, const msb_proto_identity *id);

/* ---- exec.c -------------------------------------------------------------- */
void exec_open(struct agent *a, struct conn *c, uint32_t id, const msb_proto_exec_open *m);
void exec_on_data(struct exec_ch *e, const msb_proto_data *d);
void exec_on_eof(struct exec_ch *e, uint8_t stream);
void exec_on_credit(struct exec_ch *e, uint32_t bytes);
void exec_on_winsize(struct exec_ch *e, const msb_proto_winsize *ws);
void exec_start_kill(struct agent *a, struct exec_ch *e, uint8_t reason);
/* poll plumbing: which events each fd wants */
short exec_out_events(const struct exec_ch *e, int stream);
short exec_in_events(const struct exec_ch *e);
void exec_on_output(struct exec_ch *e, int stream);
void exec_on_stdin_writable(struct exec_ch *e);
/* Timers and completion; returns the next deadline of interest (or INT64_MAX). */
int64_t exec_tick(struct agent *a, struct exec_ch *e, int64_t now);
/* A child was reaped. Returns true when it was an exec leader. */
bool exec_reaped(struct agent *a, pid_t pid, int status);
/* Kill an exec's processes without reporting (connection gone, agent exits). */
void exec_abandon(struct agent *a, struct exec_ch *e);
void exec_free(struct exec_ch *e);

/* ---- egress.c ------------------------------------------------------------ */
void egress_listen(struct agent *a, struct conn *c, uint32_t id, const msb_proto_egress_listen *l);
void egress_on_frame(struct agent *a, struct conn *c, const msb_proto_msg *m);
void egress_accept(struct agent *a);
short egress_listen_events(const struct agent *a);
short egress_tunnel_events(const struct agent *a, const struct tunnel *t);
void egress_on_tunnel(struct agent *a, struct tunnel *t, short revents);
void egress_sweep(struct agent *a);
void egress_conn_closed(struct agent *a, struct conn *c);
/* HTTP(S)_PROXY and NO_PROXY for workloads, NULL-terminated; NULL when off. */
const char *const *egress_env(struct agent *a);

/* ---- vm_init.c, vm_pump.c (the guest's init in a `vm` sandbox) ---------- */
/* The port pump's uid and gid inside the guest: not root, so workloads
 * (guest root without capabilities) cannot signal it. */
#define AGENT_VM_PUMP_ID 65533
/* `/init --vm ...`: set up the guest (mounts, modules, root, port pump) and
 * return the agent's listening socket; *work may be set from the arguments.
 * Powers the guest off on any failure. */
int vm_init(int argc, char **argv, const char **work);
/* The pump's loop (in its own process): returns its exit status. */
int vm_pump_run(int port, const char *sock_path, int id_req, int id_ack);
/* vm_identity.c: applies each host session's identity (entropy, host name,
 * instance id) sent on req by the pump, one answer byte on ack ('y'). */
int vm_identity_run(int req, int ack, int rootfd);

/* ---- layer.c (the fingerprint of a `vm` guest) ---------------------------- */
#define VM_LAYER_BASE_MAX 256
#define VM_LAYER_ID_FILE "msb-instance-id"
/* What the identity helper last wrote into the guest's root (vm_identity.c):
 * the inodes of /run and /run/msb-instance-id, in a page it shares with the
 * agent (0: nothing yet). */
struct vm_layer_marks {
	uint64_t run_ino, id_ino;
};
struct vm_layer {
	int upper_fd; /* the overlay's upper directory; -1 when not a vm guest */
	/* What the init made in it while building the root (path, inode). */
	struct {
		uint64_t ino;
		char *path;
	} base[VM_LAYER_BASE_MAX];
	size_t n_base;
	bool base_overflow; /* not all recorded: the fingerprint is refused */
	struct vm_layer_marks *marks;
};
extern struct vm_layer vm_layer;
/* vm_init.c, before the chroot: open the upper directory, record what is in
 * it, map the marks' page (before the identity helper forks). -errno. */
int vm_layer_setup(const char *upper);
/* The request `layer`, in the forked child: the exit status (AGENT_FILE_*). */
int layer_serve(const struct vm_layer *l, int proc_fd, int cap_last);

/* ---- child.c ------------------------------------------------------------- */
struct spawn {
	const char *file; /* searched in path_env when it has no '/' */
	char **argv;
	char **envp;
	const char *path_env; /* PATH value used to search argv[0] */
	int cwd_fd;	      /* -1: cwd_error says why the directory cannot be used */
	int cwd_error;	      /* errno */
	const char *cwd;      /* the logical working directory, for that message */
	int stdio[3];
	bool ctty; /* stdin is a terminal: make it the controlling one */
	int cap_last;
	uint64_t cap_bset;  /* capabilities in the bounding set to drop */
	uint64_t sig_reset; /* signals to set back to their default (bit sig - 1) */
	int proc_fd;
	bool file_op; /* MSB_PROTO_EXEC_FILE: files_serve(argv), not execve */
	/* The file request `layer` in a vm guest: layer_serve(), which keeps
	 * the upper directory and CAP_DAC_READ_SEARCH (layer.c). */
	const struct vm_layer *layer;
	/* The shell's argv when the file has no #! line: room for argv's
	 * count plus 3 pointers, filled by the child. */
	char **sh_argv;
};
_Noreturn void child_run(const struct spawn *sp);
/* The child of an exec, running child_run(sp): its pid, or -1 with errno.
 * shared_vm: the agent's memory is not dumpable, so the child may run in it
 * until its execve (child.c says when and why). */
pid_t child_spawn(const struct spawn *sp, bool shared_vm);

/* ---- pidns.c ------------------------------------------------------------- */
/* PID 1: make the workloads' pid namespace (nothing otherwise): its reaper
 * is started, and the first exec waits for its report (pidns_ensure).
 * -errno, with the reason in a->nest_error. */
int pidns_init(struct agent *a);
/* Before a workload forks: the namespace exists and its reaper lives, or a
 * new one is made. -errno with the reason in a->nest_error. */
int pidns_ensure(struct agent *a);
/* --no-nest: give up CAP_SYS_ADMIN and CAP_MKNOD if still held. -errno
 * with the reason in a->nest_error. */
int pidns_drop_admin(struct agent *a);
/* A child was reaped: true when it was the reaper (its namespace is gone). */
bool pidns_reaped(struct agent *a, pid_t pid);

/* ---- files.c ------------------------------------------------------------- */
/* Serve one file-plane request (argv) in the confined child, relative to the
 * working directory (the storage base); returns the exit status
 * (AGENT_FILE_*). */
int files_serve(char **argv);
/* `specials ROOT...` (specials.c): the sockets, fifos and device nodes below each root. */
int files_specials(char **roots);
#define AGENT_FILE_OK 0
#define AGENT_FILE_VALUE 2 /* a link on the way or at the leaf; the base itself */
#define AGENT_FILE_NOT_FOUND 3
#define AGENT_FILE_NOT_DIR 4
#define AGENT_FILE_IS_DIR 5
#define AGENT_FILE_OS 6	 /* another kind of file, or the system refused */
#define AGENT_FILE_CAP 7 /* read: larger than the cap */
#define AGENT_FILE_PERMISSION 8
#define AGENT_FILE_USAGE 9

/* ---- seccomp.c ----------------------------------------------------------- */
/* Install the workload filter (no_new_privs must already be set). -errno. */
int seccomp_install(void);

/* ---- path.c -------------------------------------------------------------- */
/* The logical working directory of `cwd`: absolute as given, relative
 * joined onto base, normalised lexically (malloc()ed). -errno. */
int workdir_resolve(const char *base, const msb_proto_str *cwd, char **logical);
/* Open it as a directory (O_PATH), following no magic link. fd or -errno. */
int workdir_open(const char *path);

/* ---- procs.c ------------------------------------------------------------- */
struct pstat {
	pid_t pid, ppid, pgrp, sid;
	char state;
	uint64_t start_ticks;
	char comm[MSB_PROTO_MAX_COMM + 1];
	size_t comm_len;
};
int procs_read_stat(const struct agent *a, pid_t pid, struct pstat *out);
/* SIGKILL every live process of the exec (its group or session, any
 * descendant, anything remembered from earlier hunts) that descends from the
 * agent. Returns how many were still alive (not zombies), or -errno. */
int procs_hunt(struct agent *a, struct exec_ch *e);
/* SIGKILL every live process below the agent (shutdown when not PID 1).
 * Returns how many were alive, or -errno. */
int procs_kill_descendants(struct agent *a);
/* Answer a PS_REQUEST on channel `id`: every process but the workloads'
 * reaper, as the agent's own namespace numbers them. */
void procs_snapshot(const struct agent *a, struct conn *c, uint32_t id,
		    const msb_proto_ps_request *q);

/* `msb-agent file ...` (agent/file.c): one confined file operation. */
int agent_file_main(int argc, char **argv);

/* --engine (engine_relay.c): fork; the child returns 0 and is the agent on
 * a socket as its stdin, the parent relays the engine's pipes and exits. */
int engine_relay_start(void);
/* --engine: workloads start from the agent's own environment (the
 * container's, as the engine's exec gave it) instead of PATH and HOME, and
 * keep the capabilities and seccomp profile the engine gave the agent. */
extern bool agent_engine_exec;

#endif
