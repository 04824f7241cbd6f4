/* filter_in.c: the input filters: `mruby` (the section's mrubyInputFilter
 * script) and the named ones (mrubyInputFilterNamed). They transform the
 * request body chunk by chunk as the handler (or mod_proxy) reads it: each
 * read from below is one run of the script, whose output waits in the
 * filter until a reader takes it. Every way of reading a body gets that
 * output and nothing else: a read of bytes (AP_MODE_READBYTES) at most as
 * many as it asked for, a line read (AP_MODE_GETLINE) up to and including
 * the next LF of the output, a peek (AP_MODE_SPECULATIVE) copies that the
 * next read gets again, an exhaustive read (AP_MODE_EXHAUSTIVE) all of it.
 * A script can refuse the body with an HTTP status (error_create), which
 * answers the request the way httpd's own body reader does (an error
 * bucket, then AP_FILTER_ERROR to this and every later reader). */

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
    apr_bucket *e, *next;
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
    /* What holds no bytes (an empty run leaves a bucket) goes: in pending
     * the EOS must come right after the last byte, or a reader of lines
     * or bytes would be handed nothing, never the end. */
    for (e = APR_BRIGADE_FIRST(ctx->work); e != APR_BRIGADE_SENTINEL(ctx->work); e = next) {
        next = APR_BUCKET_NEXT(e);
        if (e->length == 0) {
            apr_bucket_delete(e);
        }
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

/* Hands up at most n bytes of pending (and the EOS, if it comes next). */
static apr_status_t hand_up(in_ctx_t *ctx, apr_bucket_brigade *bb, apr_off_t n)
{
    apr_bucket *after;
    apr_status_t rv = apr_brigade_partition(ctx->pending, n, &after);

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

/* Hands up copies of at most n bytes of pending, which stays as it is.
 * Like httpd's core filter, a peek never gets the EOS: once only the EOS
 * is left, it gets APR_EOF. */
static apr_status_t hand_up_copies(in_ctx_t *ctx, apr_bucket_brigade *bb, apr_off_t n)
{
    apr_bucket *after, *e;
    apr_status_t rv = apr_brigade_partition(ctx->pending, n, &after);

    if (rv != APR_SUCCESS && rv != APR_INCOMPLETE) {
        return rv;
    }
    if (APR_BUCKET_IS_EOS(APR_BRIGADE_FIRST(ctx->pending))) {
        return APR_EOF;
    }
    for (e = APR_BRIGADE_FIRST(ctx->pending); e != after && !APR_BUCKET_IS_EOS(e); e = APR_BUCKET_NEXT(e)) {
        apr_bucket *copy;

        if ((rv = apr_bucket_copy(e, &copy)) != APR_SUCCESS) {
            return rv;
        }
        APR_BRIGADE_INSERT_TAIL(bb, copy);
    }
    return APR_SUCCESS;
}

/* Whether pending holds a whole line: its first LF, max bytes without
 * one, or the last bytes before the EOS; *n is that line's length. */
static int first_line(in_ctx_t *ctx, apr_off_t max, apr_off_t *n)
{
    apr_bucket *e;

    *n = 0;
    for (e = APR_BRIGADE_FIRST(ctx->pending); e != APR_BRIGADE_SENTINEL(ctx->pending);
         e = APR_BUCKET_NEXT(e)) {
        const char *data, *lf;
        apr_size_t len;

        if (APR_BUCKET_IS_EOS(e)) {
            return 1;
        }
        if (apr_bucket_read(e, &data, &len, APR_BLOCK_READ) != APR_SUCCESS) {
            return 1; /* hand_up meets the failure again and says so */
        }
        if ((apr_off_t)len > max - *n) {
            len = (apr_size_t)(max - *n);
        }
        if ((lf = memchr(data, APR_ASCII_LF, len)) != NULL) {
            *n += lf - data + 1;
            return 1;
        }
        if ((*n += (apr_off_t)len) >= max) {
            return 1;
        }
    }
    return 0;
}

/* Whether pending holds what a read of mode wants: a whole line for a
 * line read, the end of the body for an exhaustive one, anything for the
 * others; *n is how much of it that read takes. */
static int enough(in_ctx_t *ctx, ap_input_mode_t mode, apr_off_t readbytes, apr_off_t *n)
{
    *n = readbytes;
    switch (mode) {
    case AP_MODE_GETLINE:
        /* As long a line as httpd's core filter hands up, or as the reader
         * asked for if that is less. */
        return first_line(ctx, readbytes > 0 && readbytes < HUGE_STRING_LEN ? readbytes : HUGE_STRING_LEN, n);
    case AP_MODE_EXHAUSTIVE:
        return ctx->ended;
    default:
        return !APR_BRIGADE_EMPTY(ctx->pending);
    }
}

/* Reads from below and runs the script until pending holds what a read of
 * mode wants, or the body ended. A non-blocking read that runs the script
 * once without getting there answers APR_EAGAIN (the output waits). */
static apr_status_t fill(ap_filter_t *f, in_ctx_t *ctx, ap_input_mode_t mode, apr_read_type_e block,
                         apr_off_t readbytes, apr_off_t *n)
{
    /* A line read usually asks for no size: it reads in httpd's chunks. */
    apr_off_t below = mode == AP_MODE_READBYTES || readbytes > 0 ? readbytes : AP_IOBUFSIZE;

    while (!enough(ctx, mode, readbytes, n) && !ctx->ended) {
        apr_status_t rv;
        int got;

        rv = read_and_run(f, ctx, block, below, &got);
        if (rv != APR_SUCCESS || !got) {
            return rv; /* an error, or nothing from below: say so up */
        }
        if (block == APR_NONBLOCK_READ && !enough(ctx, mode, readbytes, n)) {
            return APR_EAGAIN; /* the script kept it, or not enough yet */
        }
    }
    return APR_SUCCESS;
}

static apr_status_t in_filter(ap_filter_t *f, apr_bucket_brigade *bb, ap_input_mode_t mode,
                              apr_read_type_e block, apr_off_t readbytes, const mm_slot_script_t *slot)
{
    in_ctx_t *ctx = f->ctx;
    request_rec *r = f->r;
    apr_status_t rv;
    apr_off_t n;

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
    /* AP_MODE_EATCRLF and AP_MODE_INIT are not reads of the body: httpd
     * uses them on the connection, between or before requests, so the
     * next filter answers them. */
    if (mode == AP_MODE_EATCRLF || mode == AP_MODE_INIT) {
        return ap_get_brigade(f->next, bb, mode, block, readbytes);
    }
    if (ctx->failed) {
        return ctx->failed_rv;
    }
    rv = fill(f, ctx, mode, block, readbytes, &n);
    if (rv != APR_SUCCESS) {
        return rv;
    }
    if (APR_BRIGADE_EMPTY(ctx->pending)) {
        if (!ctx->ended) {
            return APR_SUCCESS; /* nothing from below: nothing up */
        }
        if (mode == AP_MODE_SPECULATIVE) {
            return APR_EOF;
        }
        /* Asked again after the end: the end again, as httpd's own body
         * reader answers. */
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(f->c->bucket_alloc));
        return APR_SUCCESS;
    }
    switch (mode) {
    case AP_MODE_SPECULATIVE:
        return hand_up_copies(ctx, bb, readbytes);
    case AP_MODE_EXHAUSTIVE:
        APR_BRIGADE_CONCAT(bb, ctx->pending);
        return APR_SUCCESS;
    default:
        return hand_up(ctx, bb, n);
    }
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
