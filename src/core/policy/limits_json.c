/* SPDX-License-Identifier: Apache-2.0 */
/* TransferLimits as JSON, shared by the spec and the declarations loaders. */
#include "core/core.h"
#include "util/json.h"

static const char *const transfer_keys[] = {"max_bytes_per_file", "max_total_bytes", "max_files",
					    NULL};

const char *const *msb_vocab__transfer_limits_keys(void)
{
	return transfer_keys;
}

int msb_vocab__transfer_limits_from_json(json_t *obj, const char *where, msb_transfer_limits *out,
					 msb_error **err)
{
	int r = msb__json_check_keys(obj, transfer_keys, where, err);
	if (r < 0)
		return r;
	/* A field left out keeps its default, as in TransferLimits(max_files=4). */
	msb_transfer_limits t = MSB_DEFAULT_TRANSFER_LIMITS;
	if ((r = msb__json_get_u64(obj, "max_bytes_per_file", where, &t.max_bytes_per_file, NULL,
				   err)) < 0 ||
	    (r = msb__json_get_u64(obj, "max_total_bytes", where, &t.max_total_bytes, NULL, err)) <
		    0 ||
	    (r = msb__json_get_u64(obj, "max_files", where, &t.max_files, NULL, err)) < 0)
		return r;
	*out = t;
	return 0;
}

json_t *msb_vocab__transfer_limits_to_json(const msb_transfer_limits *t)
{
	if (t->max_bytes_per_file > INT64_MAX || t->max_total_bytes > INT64_MAX ||
	    t->max_files > INT64_MAX)
		return NULL;
	return json_pack("{s:I, s:I, s:I}", "max_bytes_per_file", (json_int_t)t->max_bytes_per_file,
			 "max_total_bytes", (json_int_t)t->max_total_bytes, "max_files",
			 (json_int_t)t->max_files);
}
