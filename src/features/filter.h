/* filter.h: what the output filters (filter_out.c), the input filters
 * (filter_in.c), their state (filter_state.c) and Apache::Filter
 * (rb_filter.c) share: the record of one script run over one piece of a
 * body, and what a filter keeps for the length of a request. */
#ifndef MM_FILTER_H
#define MM_FILTER_H

#include "apr_buckets.h"
#include "httpd.h"
#include "http_config.h"
#include "util_filter.h"

#include <mruby.h>

#include "phase.h"
#include "slots.h"
#include "vm.h"

/* What a filter keeps for one request between its runs (filter_state.c):
 * Apache::Filter#ctx, copied out of Ruby at the end of each run. */
typedef struct {
    char *buf; /* malloc: the encoded Hash; freed with the request's pool */
    apr_size_t len, cap;
    int cleanup_registered; /* on the request pool */
} mm_filter_state_t;

/* One run of a filter script: what Apache::Filter sees and changes. Lives
 * on the C stack of the filter function for the duration of the run. */
typedef struct {
    ap_filter_t *f;
    apr_bucket_brigade *bb;   /* the data the script sees and edits (the
                                 filter's own brigade, r->pool) */
    int input;                /* an input filter run */
    int buffered;             /* bb is the whole body (Filter#body works) */
    int first;                /* the first run of this filter for the request */
    int last;                 /* the body ends after bb */
    int changed;              /* the script changed bb */
    int ended;                /* the script ended the body (insert_eos) */
    int error_status;         /* error_create(status), or 0 */
    mm_filter_state_t *state; /* what the filter keeps for the request */
    mm_vm_t *ctx_vm;          /* the VM of ctx, once the script asked for it */
    mrb_value ctx;            /* Filter#ctx in this run (kept from the GC) */
} mm_filter_run_t;

/* The kinds of run of filter scripts (for the harness and Apache::Filter). */
extern const mm_phase_t mm_filter_out_kind;
extern const mm_phase_t mm_filter_in_kind;

/* Runs the script of slot over run->bb and keeps its Filter#ctx. Returns
 * 0 when the data may go on, or the HTTP status the body fails with:
 * error_create, Apache.return of an error status, or 500 for an exception
 * (logged by the harness) or a ctx that cannot be kept. */
int mm_filter_run(const mm_phase_t *kind, const mm_slot_script_t *slot, mm_filter_run_t *run);

/* Filter#ctx: the state as a Hash of this run, in mrb's VM, made on the
 * first call of the run. */
mrb_value mm_filter_state_load(mrb_state *mrb, mm_filter_run_t *run);

/* After the run: copies the Hash back into the state if keep (an error
 * text, and the state emptied, if it holds what cannot be copied) and lets
 * it go. pool (the request's) frees the copy when it goes. */
const char *mm_filter_state_store(mm_filter_run_t *run, apr_pool_t *pool, int keep);

/* How many named filters of each direction a configuration may define:
 * each gets a filter function of its own (so that mod_filter, which calls
 * providers with its own filter record, still reaches the right script). */
#define MM_NAMED_FILTERS_MAX 32
/* clang-format off */
#define MM_FOR_NAMED_FILTERS(X)                                                 \
    X(0)  X(1)  X(2)  X(3)  X(4)  X(5)  X(6)  X(7)  X(8)  X(9)  X(10) X(11)     \
    X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)     \
    X(24) X(25) X(26) X(27) X(28) X(29) X(30) X(31)
/* clang-format on */

/* Checks a new named filter for its direction ("output", "input"):
 * exists is whether httpd knows the name already, count how many named
 * filters the direction has. NULL or the directive's error. */
const char *mm_filter_check_named(cmd_parms *cmd, const mm_slot_script_t *s, int exists, int count,
                                  const char *direction);

/* Output filters run after mod_include and mod_substitute (AP_FTYPE_RESOURCE)
 * and before mod_deflate (AP_FTYPE_CONTENT_SET), whatever order they were
 * added in. Input filters see the body after mod_deflate inflated it. */
#define MM_OUTPUT_FILTER_TYPE ((ap_filter_type)(AP_FTYPE_CONTENT_SET - 1))
#define MM_INPUT_FILTER_TYPE  AP_FTYPE_RESOURCE

/* register_hooks and pre_config of each direction (slots.c calls them). */
void mm_filter_out_register(apr_pool_t *p);
void mm_filter_out_pre_config(void);
void mm_filter_in_register(apr_pool_t *p);
void mm_filter_in_pre_config(void);

#endif
