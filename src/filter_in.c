/* filter_in.c: the input filters: `mruby` (the section's mrubyInputFilter
 * script) and the named ones (mrubyInputFilterNamed). They transform the
 * request body chunk by chunk as the handler (or mod_proxy) reads it: each
 * read from below is one run of the script, whose output is handed up in
 * pieces no larger than the reader asked for. A script can refuse the body
 * with an HTTP status (error_create), which answers the request the way
 * httpd's own body reader does (an error bucket, then AP_FILTER_ERROR to
 * the reader). */

#include <string.h>

#include "apr_strings.h"
#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"

#include "config.h"
#include "filter.h"
#include "mod_mruby.h"

APLOG_USE_MODULE(mruby);

/* One input filter on one request; r->pool. */
typedef struct {
    const mm_slot_script_t *slot;
    apr_bucket_brigade *raw;     /* the last read from below */
    apr_bucket_brigade *work;    /* the data of the run in progress */
    apr_bucket_brigade *pending; /* output not yet handed up (set aside) */
    int runs;
    int ended;  /* EOS is in pending or was handed up */
    int failed; /* the body was refused: every read fails */
    apr_status_t failed_rv;
    mm_filter_state_t state;
} in_ctx_t;

/* The script refused the body. The rest of it is not read, so the
 * connection cannot be kept alive. While the response has not begun,
 * httpd answers with status (ErrorDocument applies). */
static apr_status_t refuse(ap_filter_t *f, in_ctx_t *ctx, int status)
{
    request_rec *r = f->r;
    conn_rec *c = f->c;

    ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r,
                  MM_LOGNO(00521) "input filter %s (%s) refused the request body of %s with %d",
                  ctx->slot->name, ctx->slot->script->name, r->uri, status);
    ctx->failed = 1;
    ctx->failed_rv = AP_FILTER_ERROR;
    apr_brigade_cleanup(ctx->work);
    apr_brigade_cleanup(ctx->pending);
    c->keepalive = AP_CONN_CLOSE;
    if (!r->eos_sent && !r->sent_bodyct) {
        apr_bucket_brigade *bb = apr_brigade_create(r->pool, c->bucket_alloc);

        APR_BRIGADE_INSERT_TAIL(bb, ap_bucket_error_create(status, NULL, r->pool, c->bucket_alloc));
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(c->bucket_alloc));
        ap_pass_brigade(r->output_filters, bb);
        apr_brigade_cleanup(bb);
    }
    return AP_FILTER_ERROR;
}

/* Moves what came from below into ctx->work; returns whether the body
 * ended with it. */
static int take_raw(in_ctx_t *ctx)
{
    int eos = 0;

    while (!APR_BRIGADE_EMPTY(ctx->raw)) {
        apr_bucket *e = APR_BRIGADE_FIRST(ctx->raw);

        if (eos || APR_BUCKET_IS_METADATA(e)) {
            eos = eos || APR_BUCKET_IS_EOS(e);
            apr_bucket_delete(e);
        } else {
            APR_BUCKET_REMOVE(e);
            APR_BRIGADE_INSERT_TAIL(ctx->work, e);
        }
    }
    return eos;
}

/* Reads once from below and runs the script over what came; *got is 0
 * when nothing came. */
static apr_status_t read_and_run(ap_filter_t *f, in_ctx_t *ctx, apr_read_type_e block, apr_off_t readbytes,
                                 int *got)
{
    request_rec *r = f->r;
    mm_filter_run_t run;
    apr_status_t rv;
    int status;

    rv = ap_get_brigade(f->next, ctx->raw, AP_MODE_READBYTES, block, readbytes);
    *got = rv == APR_SUCCESS && !APR_BRIGADE_EMPTY(ctx->raw);
    if (!*got) {
        apr_brigade_cleanup(ctx->raw);
        return rv;
    }
    memset(&run, 0, sizeof run);
    run.f = f;
    run.bb = ctx->work;
    run.input = 1;
    run.first = ctx->runs++ == 0;
    run.last = take_raw(ctx);
    run.state = &ctx->state;
    status = mm_filter_run(&mm_filter_in_kind, ctx->slot, &run);
    if (status) {
        return refuse(f, ctx, status);
    }
    if (run.changed) {
        /* Readers to come must not trust the client's length (mod_proxy
         * already does not while an input filter is present). */
        apr_table_unset(r->headers_in, "Content-Length");
        apr_table_unset(r->headers_in, "Content-MD5");
    }
    /* Buckets from below may point into the connection's buffers: they
     * are set aside before the reader's next call can reuse them. */
    rv = ap_save_brigade(f, &ctx->pending, &ctx->work, r->pool);
    apr_brigade_cleanup(ctx->work);
    if (run.last || run.ended) {
        if (run.ended && !run.last) {
            /* The script ended the body early: the client's rest is never
             * read, so the connection cannot serve another request. */
            f->c->keepalive = AP_CONN_CLOSE;
        }
        APR_BRIGADE_INSERT_TAIL(ctx->pending, apr_bucket_eos_create(f->c->bucket_alloc));
        ctx->ended = 1;
    }
    return rv;
}

/* Hands up at most readbytes of pending (and the EOS, if it comes next). */
static apr_status_t hand_up(in_ctx_t *ctx, apr_bucket_brigade *bb, apr_off_t readbytes)
{
    apr_bucket *after;
    apr_status_t rv = apr_brigade_partition(ctx->pending, readbytes, &after);

    if (rv != APR_SUCCESS && rv != APR_INCOMPLETE) {
        return rv;
    }
    while (APR_BRIGADE_FIRST(ctx->pending) != after) {
        apr_bucket *e = APR_BRIGADE_FIRST(ctx->pending);

        APR_BUCKET_REMOVE(e);
        APR_BRIGADE_INSERT_TAIL(bb, e);
    }
    if (!APR_BRIGADE_EMPTY(ctx->pending) && APR_BUCKET_IS_EOS(APR_BRIGADE_FIRST(ctx->pending))) {
        apr_bucket *e = APR_BRIGADE_FIRST(ctx->pending);

        APR_BUCKET_REMOVE(e);
        APR_BRIGADE_INSERT_TAIL(bb, e);
    }
    return APR_SUCCESS;
}

static apr_status_t in_filter(ap_filter_t *f, apr_bucket_brigade *bb, ap_input_mode_t mode,
                              apr_read_type_e block, apr_off_t readbytes, const mm_slot_script_t *slot)
{
    in_ctx_t *ctx = f->ctx;
    request_rec *r = f->r;

    if (ctx == NULL) {
        /* A request without a body (a GET, whose empty body httpd still
         * reads to discard it) is not the script's business. */
        if (slot == NULL || r == NULL || !ap_request_has_body(r)) {
            if (slot == NULL && r) {
                ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r,
                              MM_LOGNO(00520) "the mruby input filter is set for %s, but no "
                                              "mrubyInputFilter applies there: passing the body as is",
                              r->uri);
            }
            ap_remove_input_filter(f);
            return ap_get_brigade(f->next, bb, mode, block, readbytes);
        }
        f->ctx = ctx = apr_pcalloc(r->pool, sizeof *ctx);
        ctx->slot = slot;
        ctx->raw = apr_brigade_create(r->pool, f->c->bucket_alloc);
        ctx->work = apr_brigade_create(r->pool, f->c->bucket_alloc);
        ctx->pending = apr_brigade_create(r->pool, f->c->bucket_alloc);
    }
    /* Only body reads are transformed; peeks and line reads of a body are
     * not something a request handler does. */
    if (mode != AP_MODE_READBYTES) {
        return ap_get_brigade(f->next, bb, mode, block, readbytes);
    }
    if (ctx->failed) {
        return ctx->failed_rv;
    }
    while (APR_BRIGADE_EMPTY(ctx->pending)) {
        apr_status_t rv;
        int got;

        if (ctx->ended) {
            /* Asked again after the end: the end again, as httpd's own
             * body reader answers. */
            APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(f->c->bucket_alloc));
            return APR_SUCCESS;
        }
        rv = read_and_run(f, ctx, block, readbytes, &got);
        if (rv != APR_SUCCESS || !got) {
            return rv; /* an error, or nothing from below: say so up */
        }
        if (APR_BRIGADE_EMPTY(ctx->pending) && block == APR_NONBLOCK_READ) {
            return APR_EAGAIN; /* the script kept it all; come back */
        }
    }
    return hand_up(ctx, bb, readbytes);
}

/* `mruby`: the script of the request's section. */
static apr_status_t section_filter(ap_filter_t *f, apr_bucket_brigade *bb, ap_input_mode_t mode,
                                   apr_read_type_e block, apr_off_t readbytes)
{
    const mm_dir_conf_t *dc = f->r ? ap_get_module_config(f->r->per_dir_config, &mruby_module) : NULL;

    return in_filter(f, bb, mode, block, readbytes, dc ? dc->slots[MM_SLOT_INPUT_FILTER] : NULL);
}

/* The named filters, one function each (see filter_out.c). Written while
 * the configuration is read, read-only after. */
static const mm_slot_script_t *named[MM_NAMED_FILTERS_MAX];
static int named_count;

#define MM_NAMED_IN(i)                                                                                       \
    static apr_status_t named_in_##i(ap_filter_t *f, apr_bucket_brigade *bb, ap_input_mode_t mode,           \
                                     apr_read_type_e block, apr_off_t readbytes)                             \
    {                                                                                                        \
        return in_filter(f, bb, mode, block, readbytes, named[i]);                                           \
    }
MM_FOR_NAMED_FILTERS(MM_NAMED_IN)
#define MM_NAMED_IN_REF(i) named_in_##i,
static ap_in_filter_func const named_funcs[MM_NAMED_FILTERS_MAX] = {MM_FOR_NAMED_FILTERS(MM_NAMED_IN_REF)};

const char *mm_filter_in_register_named(cmd_parms *cmd, const mm_slot_script_t *s)
{
    const char *err =
        mm_filter_check_named(cmd, s, ap_get_input_filter_handle(s->name) != NULL, named_count, "input");

    if (err == NULL) {
        named[named_count] = s;
        ap_register_input_filter(s->name, named_funcs[named_count++], NULL, MM_INPUT_FILTER_TYPE);
    }
    return err;
}

void mm_filter_in_register(apr_pool_t *p)
{
    ap_register_input_filter("mruby", section_filter, NULL, MM_INPUT_FILTER_TYPE);
}

void mm_filter_in_pre_config(void)
{
    named_count = 0;
}
