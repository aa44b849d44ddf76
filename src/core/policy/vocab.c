/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The vocabulary (checklist section 1): one name table per enum, strict
 * parsing, the rank tables every comparison goes through, set formatting,
 * HTTP method tokens and the transfer-limit defaults.
 */
#include <msb/vocab.h>

#include "core/core.h"

struct name_entry {
	int value;
	const char *name;
};

#define TABLE(t) (t), MSB_ARRAY_SIZE(t)

static const char *table_name(const struct name_entry *t, size_t n, int value)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].value == value)
			return t[i].name;
	return NULL;
}

/* "a, b, c": the table's spellings in declaration order. */
static char *table_list(const struct name_entry *t, size_t n)
{
	msb_buf b = MSB_BUF_INIT;
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			msb__buf_puts(&b, ", ");
		msb__buf_puts(&b, t[i].name);
	}
	return msb__buf_steal_str(&b);
}

/*
 * Exact lookup of `s`; anything else is refused with MSB_E_VALUE naming the
 * spelling, `what` it is not, and the members it could have been.
 */
static int table_parse(const struct name_entry *t, size_t n, const char *s, const char *what,
		       int *out, msb_error **err)
{
	if (s) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(t[i].name, s) == 0) {
				*out = t[i].value;
				return 0;
			}
		}
	}
	_cleanup_free_ char *list = table_list(t, n);
	if (!list)
		return msb__error_nomem(err);
	if (!s)
		return msb_error_set(err, MSB_E_VALUE,
				     "a missing value is not %s: expected one of %s", what, list);
	return msb_error_set(err, MSB_E_VALUE, "`%s` is not %s: expected one of %s", s, what, list);
}

/* "exec, files_in" for the bits of `set` in table order; "nothing" if none. */
static char *table_set_format(const struct name_entry *t, size_t n, uint32_t set)
{
	msb_buf b = MSB_BUF_INIT;
	bool first = true;
	for (size_t i = 0; i < n; i++) {
		if (!(set & (uint32_t)t[i].value))
			continue;
		if (!first)
			msb__buf_puts(&b, ", ");
		msb__buf_puts(&b, t[i].name);
		first = false;
	}
	if (first)
		msb__buf_puts(&b, "nothing");
	return msb__buf_steal_str(&b);
}

/* ---- isolation ------------------------------------------------------------ */

static const struct name_entry isolation_names[] = {
	{MSB_ISOLATION_NONE, "none"},
	{MSB_ISOLATION_RUNTIME, "runtime"},
	{MSB_ISOLATION_OS_PROCESS, "os_process"},
	{MSB_ISOLATION_CONTAINER, "container"},
	{MSB_ISOLATION_HARDENED_CONTAINER, "hardened_container"},
	{MSB_ISOLATION_MICROVM, "microvm"},
	{MSB_ISOLATION_VM, "vm"},
};

/*
 * ISOLATION_RANK: the only ordering of the ladder (1.2); every comparison
 * below reads it. Rank numbers are never persisted (1.5).
 */
static const struct {
	msb_isolation rung;
	int rank;
} ISOLATION_RANK[] = {
	{MSB_ISOLATION_NONE, 0},
	{MSB_ISOLATION_RUNTIME, 1},
	{MSB_ISOLATION_OS_PROCESS, 2},
	{MSB_ISOLATION_CONTAINER, 3},
	{MSB_ISOLATION_HARDENED_CONTAINER, 4},
	{MSB_ISOLATION_MICROVM, 5},
	{MSB_ISOLATION_VM, 6},
};

_Static_assert(MSB_ARRAY_SIZE(ISOLATION_RANK) == MSB_ISOLATION_COUNT, "one rank per rung");
_Static_assert(MSB_ARRAY_SIZE(isolation_names) == MSB_ISOLATION_COUNT, "one name per rung");

static const char LADDER[] = "none < runtime < os_process < container < hardened_container < "
			     "microvm < vm";

int msb_isolation_parse(const char *s, msb_isolation *out, msb_error **err)
{
	/* Exact match only: "process" (the retired spelling), "VM" and the
	 * like are refused rather than guessed onto a rung (1.3, 1.4). */
	if (s) {
		for (size_t i = 0; i < MSB_ARRAY_SIZE(isolation_names); i++) {
			if (strcmp(isolation_names[i].name, s) == 0) {
				*out = (msb_isolation)isolation_names[i].value;
				return 0;
			}
		}
		return msb_error_set(err, MSB_E_VALUE,
				     "`%s` is not a rung, not a valid Isolation: the ladder is %s",
				     s, LADDER);
	}
	return msb_error_set(err, MSB_E_VALUE,
			     "a missing value is not a rung, not a valid Isolation: the ladder "
			     "is %s",
			     LADDER);
}

const char *msb_isolation_name(msb_isolation v)
{
	return table_name(TABLE(isolation_names), (int)v);
}

int msb_isolation_rank(msb_isolation v)
{
	for (size_t i = 0; i < MSB_ARRAY_SIZE(ISOLATION_RANK); i++)
		if (ISOLATION_RANK[i].rung == v)
			return ISOLATION_RANK[i].rank;
	return -1;
}

bool msb_meets_floor(msb_isolation declared, msb_isolation floor)
{
	int d = msb_isolation_rank(declared);
	int f = msb_isolation_rank(floor);
	if (d < 0 || f < 0)
		return false;
	return d >= f;
}

msb_isolation msb_isolation_stricter(msb_isolation a, msb_isolation b)
{
	return msb_isolation_rank(b) > msb_isolation_rank(a) ? b : a;
}

const char *msb_isolation_ladder(void)
{
	return LADDER;
}

/* ---- capabilities --------------------------------------------------------- */

static const struct name_entry capability_names[] = {
	{MSB_CAP_EXEC, "exec"},
	{MSB_CAP_RUN_CODE, "run_code"},
	{MSB_CAP_HOST_TOOLS, "host_tools"},
	{MSB_CAP_FILES_IN, "files_in"},
	{MSB_CAP_FILES_OUT, "files_out"},
	{MSB_CAP_FILES_LIST, "files_list"},
	{MSB_CAP_FILES_DELETE, "files_delete"},
	{MSB_CAP_SNAPSHOT, "snapshot"},
	{MSB_CAP_RECLAIM, "reclaim"},
	{MSB_CAP_ATTACHED_IDENTITY, "attached_identity"},
	{MSB_CAP_EGRESS_METHODS, "egress_methods"},
};
_Static_assert(MSB_ARRAY_SIZE(capability_names) == MSB_CAPABILITY_COUNT, "eleven capabilities");

int msb_capability_parse(const char *s, msb_capability *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(capability_names), s, "a capability", &v, err);
	if (r < 0)
		return r;
	*out = (msb_capability)v;
	return 0;
}

const char *msb_capability_name(msb_capability v)
{
	return table_name(TABLE(capability_names), (int)v);
}

char *msb_capset_format(msb_capset set)
{
	return table_set_format(TABLE(capability_names), set);
}

int msb_vocab__capset_parse(const char *const *names, size_t n, const char *what, msb_capset *out,
			    msb_error **err)
{
	msb_capset set = 0;
	for (size_t i = 0; i < n; i++) {
		msb_capability c;
		int r = msb_capability_parse(names ? names[i] : NULL, &c, err);
		if (r < 0) {
			if (what)
				msb_error_wrap(err, "%s", what);
			return r;
		}
		set |= (msb_capset)c;
	}
	*out = set;
	return 0;
}

/* ---- egress modes (membership only: nothing ranks them) --------------------- */

static const struct name_entry egress_names[] = {
	{MSB_EGRESS_UNRESTRICTED, "unrestricted"},
	{MSB_EGRESS_ALLOWLIST, "allowlist"},
	{MSB_EGRESS_CLOSED, "closed"},
};

int msb_egress_parse(const char *s, msb_egress *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(egress_names), s, "an egress mode", &v, err);
	if (r < 0)
		return r;
	*out = (msb_egress)v;
	return 0;
}

const char *msb_egress_name(msb_egress v)
{
	return table_name(TABLE(egress_names), (int)v);
}

char *msb_egress_set_format(msb_egress_set set)
{
	return table_set_format(TABLE(egress_names), set);
}

/* ---- OS families ------------------------------------------------------------- */

static const struct name_entry os_family_names[] = {
	{MSB_OS_POSIX, "posix"},
	{MSB_OS_WINDOWS, "windows"},
};

int msb_os_family_parse(const char *s, msb_os_family *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(os_family_names), s, "an os family", &v, err);
	if (r < 0)
		return r;
	*out = (msb_os_family)v;
	return 0;
}

const char *msb_os_family_name(msb_os_family v)
{
	return table_name(TABLE(os_family_names), (int)v);
}

char *msb_os_family_set_format(msb_os_family_set set)
{
	return table_set_format(TABLE(os_family_names), set);
}

/* ---- isolation scopes --------------------------------------------------------- */

static const struct name_entry scope_names[] = {
	{MSB_SCOPE_CONVERSATION, "conversation"},
	{MSB_SCOPE_CALL, "call"},
};

int msb_isolation_scope_parse(const char *s, msb_isolation_scope *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(scope_names), s, "an isolation scope", &v, err);
	if (r < 0)
		return r;
	*out = (msb_isolation_scope)v;
	return 0;
}

const char *msb_isolation_scope_name(msb_isolation_scope v)
{
	return table_name(TABLE(scope_names), (int)v);
}

msb_isolation_scope msb_isolation_scope_stricter(msb_isolation_scope a, msb_isolation_scope b)
{
	/* Only two rungs, conversation < call. A value outside the enum is
	 * read as the stricter one: a scope floor never weakens by accident. */
	if (a == MSB_SCOPE_CONVERSATION && b == MSB_SCOPE_CONVERSATION)
		return MSB_SCOPE_CONVERSATION;
	return MSB_SCOPE_CALL;
}

char *msb_scope_set_format(msb_scope_set set)
{
	return table_set_format(TABLE(scope_names), set);
}

/* ---- identities ----------------------------------------------------------------- */

static const struct name_entry identity_names[] = {
	{MSB_IDENTITY_APP, "app"},
	{MSB_IDENTITY_USER, "user"},
};

int msb_identity_parse(const char *s, msb_identity *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(identity_names), s, "an identity", &v, err);
	if (r < 0)
		return r;
	*out = (msb_identity)v;
	return 0;
}

const char *msb_identity_name(msb_identity v)
{
	return table_name(TABLE(identity_names), (int)v);
}

char *msb_identity_set_format(msb_identity_set set)
{
	return table_set_format(TABLE(identity_names), set);
}

/* ---- cleanup rungs: strength is data ----------------------------------------------- */

static const struct name_entry cleanup_names[] = {
	{MSB_CLEANUP_RECLAIM, "reclaim"},
	{MSB_CLEANUP_RESET, "reset"},
	{MSB_CLEANUP_DISPOSE, "dispose"},
};

static const struct {
	msb_cleanup rung;
	int strength;
} CLEANUP_STRENGTH[] = {
	{MSB_CLEANUP_RECLAIM, 0},
	{MSB_CLEANUP_RESET, 1},
	{MSB_CLEANUP_DISPOSE, 2},
};

static int cleanup_strength(msb_cleanup v)
{
	for (size_t i = 0; i < MSB_ARRAY_SIZE(CLEANUP_STRENGTH); i++)
		if (CLEANUP_STRENGTH[i].rung == v)
			return CLEANUP_STRENGTH[i].strength;
	return -1;
}

int msb_cleanup_parse(const char *s, msb_cleanup *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(cleanup_names), s, "a cleanup rung", &v, err);
	if (r < 0)
		return r;
	*out = (msb_cleanup)v;
	return 0;
}

const char *msb_cleanup_name(msb_cleanup v)
{
	return table_name(TABLE(cleanup_names), (int)v);
}

msb_cleanup msb_cleanup_strongest(msb_cleanup a, msb_cleanup b)
{
	int sa = cleanup_strength(a), sb = cleanup_strength(b);
	/* A value outside the enum asks for the strongest rung. */
	if (sa < 0 || sb < 0)
		return MSB_CLEANUP_DISPOSE;
	return sb > sa ? b : a;
}

/* ---- failed-reclaim policy, selection ----------------------------------------------- */

static const struct name_entry failed_reclaim_names[] = {
	{MSB_FAILED_RECLAIM_DISPOSE, "dispose"},
	{MSB_FAILED_RECLAIM_KEEP, "keep"},
};

int msb_failed_reclaim_policy_parse(const char *s, msb_failed_reclaim_policy *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(failed_reclaim_names), s, "a failed-reclaim policy", &v, err);
	if (r < 0)
		return r;
	*out = (msb_failed_reclaim_policy)v;
	return 0;
}

const char *msb_failed_reclaim_policy_name(msb_failed_reclaim_policy v)
{
	return table_name(TABLE(failed_reclaim_names), (int)v);
}

static const struct name_entry selection_names[] = {
	{MSB_SELECTION_FIXED, "fixed"},
	{MSB_SELECTION_PER_SPEC, "per_spec"},
};

int msb_selection_parse(const char *s, msb_selection *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(selection_names), s, "a selection", &v, err);
	if (r < 0)
		return r;
	*out = (msb_selection)v;
	return 0;
}

const char *msb_selection_name(msb_selection v)
{
	return table_name(TABLE(selection_names), (int)v);
}

/* ---- source integrity ------------------------------------------------------------------ */

/* Parseable levels only: "unestablished" is the fold's value for no label. */
static const struct name_entry integrity_names[] = {
	{MSB_INTEGRITY_UNTRUSTED, "untrusted"},
	{MSB_INTEGRITY_TRUSTED, "trusted"},
};

/* INTEGRITY_RANK: the one ordering, unestablished below every level (1.10). */
static const struct {
	msb_integrity level;
	int rank;
} INTEGRITY_RANK[] = {
	{MSB_INTEGRITY_UNESTABLISHED, 0},
	{MSB_INTEGRITY_UNTRUSTED, 1},
	{MSB_INTEGRITY_TRUSTED, 2},
};

int msb_integrity_parse(const char *s, msb_integrity *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(integrity_names), s, "an integrity level", &v, err);
	if (r < 0)
		return r;
	*out = (msb_integrity)v;
	return 0;
}

const char *msb_integrity_name(msb_integrity v)
{
	if (v == MSB_INTEGRITY_UNESTABLISHED)
		return "unestablished";
	return table_name(TABLE(integrity_names), (int)v);
}

int msb_integrity_rank(msb_integrity v)
{
	for (size_t i = 0; i < MSB_ARRAY_SIZE(INTEGRITY_RANK); i++)
		if (INTEGRITY_RANK[i].level == v)
			return INTEGRITY_RANK[i].rank;
	return -1;
}

msb_integrity msb_integrity_weakest(msb_integrity a, msb_integrity b)
{
	int ra = msb_integrity_rank(a), rb = msb_integrity_rank(b);
	/* A value outside the enum establishes nothing. */
	if (ra < 0 || rb < 0)
		return MSB_INTEGRITY_UNESTABLISHED;
	return rb < ra ? b : a;
}

/* ---- entry kinds, outputs ------------------------------------------------------------------ */

static const struct name_entry entry_kind_names[] = {
	{MSB_ENTRY_FILE, "file"},
	{MSB_ENTRY_DIRECTORY, "directory"},
	{MSB_ENTRY_SYMLINK, "symlink"},
	{MSB_ENTRY_OTHER, "other"},
};

int msb_entry_kind_parse(const char *s, msb_entry_kind *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(entry_kind_names), s, "an entry kind", &v, err);
	if (r < 0)
		return r;
	*out = (msb_entry_kind)v;
	return 0;
}

const char *msb_entry_kind_name(msb_entry_kind v)
{
	return table_name(TABLE(entry_kind_names), (int)v);
}

static const struct name_entry disposition_names[] = {
	{MSB_DISPOSITION_LAND, "land"},
	{MSB_DISPOSITION_CONSUME, "consume"},
};

int msb_output_disposition_parse(const char *s, msb_output_disposition *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(disposition_names), s, "an output disposition", &v, err);
	if (r < 0)
		return r;
	*out = (msb_output_disposition)v;
	return 0;
}

const char *msb_output_disposition_name(msb_output_disposition v)
{
	return table_name(TABLE(disposition_names), (int)v);
}

static const struct name_entry normalization_names[] = {
	{MSB_NORMALIZATION_NFC, "nfc"},
	{MSB_NORMALIZATION_NONE, "none"},
};

int msb_name_normalization_parse(const char *s, msb_name_normalization *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(normalization_names), s, "a name normalization", &v, err);
	if (r < 0)
		return r;
	*out = (msb_name_normalization)v;
	return 0;
}

const char *msb_name_normalization_name(msb_name_normalization v)
{
	return table_name(TABLE(normalization_names), (int)v);
}

/* ---- disposal codes ------------------------------------------------------------------------ */

static const struct name_entry disposal_names[] = {
	{MSB_DISPOSAL_UNREACHABLE, "unreachable"}, {MSB_DISPOSAL_TIMEOUT, "timeout"},
	{MSB_DISPOSAL_REFUSED, "refused"},	   {MSB_DISPOSAL_UNLISTED, "unlisted"},
	{MSB_DISPOSAL_UNKNOWN, "unknown"},
};

/* Most actionable first (DESIGN 9.18): higher wins when folding. */
static const struct {
	msb_disposal_code code;
	int precedence;
} DISPOSAL_PRECEDENCE[] = {
	{MSB_DISPOSAL_REFUSED, 4},  {MSB_DISPOSAL_UNREACHABLE, 3}, {MSB_DISPOSAL_TIMEOUT, 2},
	{MSB_DISPOSAL_UNLISTED, 1}, {MSB_DISPOSAL_UNKNOWN, 0},
};

int msb_disposal_code_parse(const char *s, msb_disposal_code *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(disposal_names), s, "a disposal code", &v, err);
	if (r < 0)
		return r;
	*out = (msb_disposal_code)v;
	return 0;
}

const char *msb_disposal_code_name(msb_disposal_code v)
{
	return table_name(TABLE(disposal_names), (int)v);
}

int msb_disposal_code_precedence(msb_disposal_code v)
{
	for (size_t i = 0; i < MSB_ARRAY_SIZE(DISPOSAL_PRECEDENCE); i++)
		if (DISPOSAL_PRECEDENCE[i].code == v)
			return DISPOSAL_PRECEDENCE[i].precedence;
	return -1;
}

/* ---- file refusals, signal outcomes, reclaim disposal, source channels --------------------- */

static const struct name_entry file_refusal_names[] = {
	{MSB_FILE_REFUSAL_NOT_FOUND, "not_found"},
	{MSB_FILE_REFUSAL_IS_DIRECTORY, "is_directory"},
	{MSB_FILE_REFUSAL_PERMISSION_DENIED, "permission_denied"},
	{MSB_FILE_REFUSAL_INVALID_PATH, "invalid_path"},
};

int msb_file_refusal_parse(const char *s, msb_file_refusal *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(file_refusal_names), s, "a file refusal", &v, err);
	if (r < 0)
		return r;
	*out = (msb_file_refusal)v;
	return 0;
}

const char *msb_file_refusal_name(msb_file_refusal v)
{
	return table_name(TABLE(file_refusal_names), (int)v);
}

static const struct name_entry signal_names[] = {
	{MSB_SIGNAL_SENT, "sent"},	 {MSB_SIGNAL_REFUSED, "refused"},
	{MSB_SIGNAL_ABSENT, "absent"},	 {MSB_SIGNAL_UNRECORDED, "unrecorded"},
	{MSB_SIGNAL_UNKNOWN, "unknown"},
};

int msb_signal_outcome_parse(const char *s, msb_signal_outcome *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(signal_names), s, "a signal outcome", &v, err);
	if (r < 0)
		return r;
	*out = (msb_signal_outcome)v;
	return 0;
}

const char *msb_signal_outcome_name(msb_signal_outcome v)
{
	return table_name(TABLE(signal_names), (int)v);
}

static const struct name_entry reclaim_disposal_names[] = {
	{MSB_RECLAIM_DISPOSED, "disposed"},
	{MSB_RECLAIM_FAILED, "failed"},
	{MSB_RECLAIM_KEPT, "kept"},
};

int msb_reclaim_disposal_parse(const char *s, msb_reclaim_disposal *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(reclaim_disposal_names), s, "a reclaim disposal", &v, err);
	if (r < 0)
		return r;
	*out = (msb_reclaim_disposal)v;
	return 0;
}

const char *msb_reclaim_disposal_name(msb_reclaim_disposal v)
{
	return table_name(TABLE(reclaim_disposal_names), (int)v);
}

static const struct name_entry source_channel_names[] = {
	{MSB_SOURCE_FILE_STORE, "file_store"},
};

int msb_source_channel_parse(const char *s, msb_source_channel *out, msb_error **err)
{
	int v;
	int r = table_parse(TABLE(source_channel_names), s, "a source channel", &v, err);
	if (r < 0)
		return r;
	*out = (msb_source_channel)v;
	return 0;
}

const char *msb_source_channel_name(msb_source_channel v)
{
	return table_name(TABLE(source_channel_names), (int)v);
}

/* ---- HTTP method tokens ---------------------------------------------------------------------- */

/* RFC 9110 5.6.2 tchar, minus the lowercase letters: a rule names a verb,
 * not a spelling (3.7). */
static bool method_char(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return true;
	if (c >= '0' && c <= '9')
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool msb_http_method_valid(const char *s)
{
	if (!s || !*s)
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (!method_char(*p))
			return false;
	return true;
}

/* ---- transfer limits ----------------------------------------------------------------------------
 */

const msb_transfer_limits MSB_DEFAULT_TRANSFER_LIMITS = MSB_DEFAULT_TRANSFER_LIMITS_INIT;
const msb_sandbox_limits MSB_DEFAULT_SANDBOX_LIMITS = MSB_DEFAULT_SANDBOX_LIMITS_INIT;

bool msb_transfer_limits_within(const msb_transfer_limits *ask, const msb_transfer_limits *ceiling)
{
	if (!ask || !ceiling)
		return false;
	return ask->max_bytes_per_file <= ceiling->max_bytes_per_file &&
	       ask->max_total_bytes <= ceiling->max_total_bytes &&
	       ask->max_files <= ceiling->max_files;
}
