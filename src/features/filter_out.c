/* filter_out.c: the output filters: `mruby` (the section's
 * mrubyOutputFilter script) and the named ones (mrubyOutputFilterNamed).
 *
 * Buffer mode (the default, mod_mruby's): the response is set aside until
 * EOS and the script runs once over all of it. Stream mode: the script runs
 * once per chunk of at most MM_CHUNK_MAX bytes as the response goes by, and
 * each chunk's output is passed on at once, so memory stays bounded; state
 * between chunks lives in Apache::Filter#ctx. Either way EOS goes down
 * exactly once, Content-Length and ETag are fixed when the body changes,
 * and a failure becomes httpd's error page when nothing has been sent yet,
 * or cuts the connection when the response has begun. */

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

/* Stream mode: the most bytes one run sees. Large enough that a
 * pass-through filter costs little per byte, small enough to bound what a
 * script holds. */
#define MM_CHUNK_MAX (64 * 1024)

/* One output filter on one request; r->pool. */
typedef struct {
    const mm_slot_script_t *slot;
    apr_bucket_brigade *held; /* buffer mode: the response so far, set aside */
    apr_bucket_brigade *work; /* the data of the run in progress */
    apr_bucket_brigade *out;  /* what goes down next */
    int runs;
    int sent;             /* something went down: the headers are out */
    int done;             /* EOS went down, or the filter failed: drop the rest */
    apr_status_t done_rv; /* what later calls return once done */
    mm_filter_state_t state;
} out_ctx_t;

/* Headers that describe the body as the handler made it. known is the new
 * body's length when the whole of it is known, or -1. */
static void fix_headers(request_rec *r, apr_off_t known)
{
    apr_table_unset(r->headers_out, "ETag");
    apr_table_unset(r->headers_out, "Content-MD5");
    if (known >= 0) {
        ap_set_content_length(r, known);
    } else {
        apr_table_unset(r->headers_out, "Content-Length");
        r->clength = 0;
    }
}

static apr_status_t pass_out(ap_filter_t *f, out_ctx_t *ctx)
{
    apr_status_t rv;

    if (APR_BRIGADE_EMPTY(ctx->out)) {
        return APR_SUCCESS;
    }
    if (!ctx->sent && ctx->runs == 0 && !APR_BUCKET_IS_EOS(APR_BRIGADE_LAST(ctx->out))) {
        /* Stream mode, a FLUSH before any data: the headers go now, and the
         * body may yet change. (A body that ends before any run, a bodiless
         * HEAD, keeps the handler's headers.) */
        fix_headers(f->r, -1);
    }
    rv = ap_pass_brigade(f->next, ctx->out);
    ctx->sent = 1;
    apr_brigade_cleanup(ctx->out);
    return rv;
}

static void finish(out_ctx_t *ctx, apr_status_t rv)
{
    ctx->done = 1;
    ctx->done_rv = rv;
    apr_brigade_cleanup(ctx->work);
    if (ctx->held) {
        apr_brigade_cleanup(ctx->held);
    }
}

/* The script failed (or asked for an error status). Before the headers:
 * an error bucket makes httpd answer with its error page for status (so
 * ErrorDocument applies). After: the response cannot change any more, so
 * the connection is cut and the client sees it truncated. */
static apr_status_t fail(ap_filter_t *f, out_ctx_t *ctx, int status)
{
    request_rec *r = f->r;
    conn_rec *c = f->c;
    apr_status_t rv;

    apr_brigade_cleanup(ctx->out);
    if (!ctx->sent) {
        APR_BRIGADE_INSERT_TAIL(ctx->out, ap_bucket_error_create(status, NULL, r->pool, c->bucket_alloc));
        APR_BRIGADE_INSERT_TAIL(ctx->out, apr_bucket_eos_create(c->bucket_alloc));
        rv = ap_pass_brigade(f->next, ctx->out);
        apr_brigade_cleanup(ctx->out);
        finish(ctx, rv == APR_SUCCESS ? AP_FILTER_ERROR : rv);
        return ctx->done_rv;
    }
    ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                  MM_LOGNO(00511) "output filter %s (%s) failed (%d) after the response to %s began: "
                                  "connection aborted",
                  ctx->slot->name, ctx->slot->script->name, status, r->uri);
    c->keepalive = AP_CONN_CLOSE;
    c->aborted = 1;
    finish(ctx, APR_ECONNABORTED);
    return APR_ECONNABORTED;
}

/* Sends ctx->work on with the EOS, once: the body ends. */
static apr_status_t end_body(ap_filter_t *f, out_ctx_t *ctx)
{
    apr_status_t rv;

    APR_BRIGADE_CONCAT(ctx->out, ctx->work);
    APR_BRIGADE_INSERT_TAIL(ctx->out, apr_bucket_eos_create(f->c->bucket_alloc));
    rv = pass_out(f, ctx);
    finish(ctx, rv);
    return rv;
}

/* The answer to a HEAD request that came without a body (mod_proxy's, a
 * CGI's that looks at the method): the script would make a body out of
 * nothing, and the length of that would replace the handler's
 * Content-Length. A HEAD that has its body (a static file) is filtered as
 * GET is, so that its headers are GET's. */
static int bodiless_head(request_rec *r, out_ctx_t *ctx, int last)
{
    apr_off_t len = 0;

    return r->header_only && last && ctx->runs == 0 &&
           apr_brigade_length(ctx->work, 1, &len) == APR_SUCCESS && len == 0;
}

/* Runs the script over ctx->work and sends what it leaves there on, with
 * EOS when the body ends. */
static apr_status_t run_chunk(ap_filter_t *f, out_ctx_t *ctx, int last)
{
    mm_filter_run_t run;
    int status;

    if (bodiless_head(f->r, ctx, last)) {
        /* The filter steps aside, as httpd's own do: the headers stay the
         * handler's. */
        return end_body(f, ctx);
    }
    memset(&run, 0, sizeof run);
    run.f = f;
    run.bb = ctx->work;
    run.buffered = !(ctx->slot->options & MM_SLOT_STREAM);
    run.first = ctx->runs++ == 0;
    run.last = last;
    run.state = &ctx->state;
    status = mm_filter_run(&mm_filter_out_kind, ctx->slot, &run);
    if (status) {
        return fail(f, ctx, status);
    }
    last = last || run.ended;
    if (!ctx->sent) {
        /* The headers go with this pass: describe the body as far as it is
         * known. Unchanged and complete, they stay as they are. */
        if (!last) {
            fix_headers(f->r, -1);
        } else if (run.changed) {
            apr_off_t len = 0;

            apr_brigade_length(ctx->work, 1, &len);
            fix_headers(f->r, len);
        }
    }
    if (last) {
        return end_body(f, ctx);
    }
    APR_BRIGADE_CONCAT(ctx->out, ctx->work);
    return pass_out(f, ctx);
}

/* Reads a bucket of data still to come (a CGI's pipe), which makes it a
 * bucket of what came so far. Once the chunk holds data, the read does not
 * wait: when nothing more has come, the chunk ends there, followed by a
 * FLUSH, so that what came reaches the client while the rest is awaited.
 * Returns APR_EAGAIN when the chunk ends. */
static apr_status_t read_pending(apr_bucket_brigade *bb, apr_bucket *e, apr_size_t total)
{
    const char *data;
    apr_size_t len;
    apr_status_t rv = apr_bucket_read(e, &data, &len, total ? APR_NONBLOCK_READ : APR_BLOCK_READ);

    if (total && APR_STATUS_IS_EAGAIN(rv)) {
        APR_BUCKET_INSERT_BEFORE(e, apr_bucket_flush_create(bb->bucket_alloc));
        return APR_EAGAIN;
    }
    return rv;
}

/* Moves the next chunk of bb into ctx->work: data buckets up to
 * MM_CHUNK_MAX bytes, stopping at metadata or at data still to come. *eos
 * is set, and the EOS removed, when the body ends right after the chunk. */
static apr_status_t take_chunk(out_ctx_t *ctx, apr_bucket_brigade *bb, int *eos)
{
    apr_size_t total = 0;

    *eos = 0;
    while (!APR_BRIGADE_EMPTY(bb)) {
        apr_bucket *e = APR_BRIGADE_FIRST(bb);

        if (APR_BUCKET_IS_EOS(e)) {
            *eos = 1;
            apr_brigade_cleanup(bb); /* nothing follows EOS */
            return APR_SUCCESS;
        }
        if (APR_BUCKET_IS_METADATA(e)) {
            return APR_SUCCESS;
        }
        if (e->length == (apr_size_t)-1) {
            apr_status_t rv = read_pending(bb, e, total);

            if (rv != APR_SUCCESS) {
                return APR_STATUS_IS_EAGAIN(rv) ? APR_SUCCESS : rv;
            }
        }
        if (total + e->length > MM_CHUNK_MAX) {
            /* Splitting a file bucket does not read it. */
            apr_status_t rv = apr_bucket_split(e, MM_CHUNK_MAX - total);

            if (rv != APR_SUCCESS) {
                return rv;
            }
            APR_BUCKET_REMOVE(e);
            APR_BRIGADE_INSERT_TAIL(ctx->work, e);
            return APR_SUCCESS;
        }
        total += e->length;
        APR_BUCKET_REMOVE(e);
        APR_BRIGADE_INSERT_TAIL(ctx->work, e);
    }
    return APR_SUCCESS;
}

static apr_status_t stream(ap_filter_t *f, out_ctx_t *ctx, apr_bucket_brigade *bb)
{
    apr_status_t rv = APR_SUCCESS;

    while (!APR_BRIGADE_EMPTY(bb) && !ctx->done) {
        apr_bucket *e = APR_BRIGADE_FIRST(bb);
        int eos;

        if (APR_BUCKET_IS_METADATA(e) && !APR_BUCKET_IS_EOS(e)) {
            /* FLUSH and the like keep their place between chunks. */
            APR_BUCKET_REMOVE(e);
            APR_BRIGADE_INSERT_TAIL(ctx->out, e);
            rv = pass_out(f, ctx);
        } else {
            rv = take_chunk(ctx, bb, &eos);
            if (rv == APR_SUCCESS) {
                rv = run_chunk(f, ctx, eos);
            } else {
                apr_brigade_cleanup(ctx->work);
            }
        }
        if (rv != APR_SUCCESS) {
            break;
        }
    }
    apr_brigade_cleanup(bb);
    return rv;
}

/* An error bucket from upstream: the response is already an error; the
 * filter steps aside and lets it through with what was held. */
static int has_error_bucket(apr_bucket_brigade *bb)
{
    apr_bucket *e;

    for (e = APR_BRIGADE_FIRST(bb); e != APR_BRIGADE_SENTINEL(bb); e = APR_BUCKET_NEXT(e)) {
        if (AP_BUCKET_IS_ERROR(e)) {
            return 1;
        }
    }
    return 0;
}

static apr_status_t buffer(ap_filter_t *f, out_ctx_t *ctx, apr_bucket_brigade *bb)
{
    apr_bucket *e, *next;
    apr_status_t rv;
    int eos = 0;

    if (has_error_bucket(bb)) {
        if (ctx->held) {
            APR_BRIGADE_PREPEND(bb, ctx->held);
        }
        finish(ctx, APR_SUCCESS);
        ap_remove_output_filter(f);
        return ap_pass_brigade(f->next, bb);
    }
    for (e = APR_BRIGADE_FIRST(bb); e != APR_BRIGADE_SENTINEL(bb); e = next) {
        next = APR_BUCKET_NEXT(e);
        if (eos || APR_BUCKET_IS_EOS(e) || APR_BUCKET_IS_FLUSH(e)) {
            /* Nothing leaves before the end, so a FLUSH means nothing; EOS
             * is sent by us, once, after the script. */
            eos = eos || APR_BUCKET_IS_EOS(e);
            apr_bucket_delete(e);
        }
    }
    rv = ap_save_brigade(f, &ctx->held, &bb, f->r->pool);
    apr_brigade_cleanup(bb);
    if (rv != APR_SUCCESS || !eos) {
        return rv;
    }
    APR_BRIGADE_CONCAT(ctx->work, ctx->held);
    return run_chunk(f, ctx, 1);
}

static apr_status_t out_filter(ap_filter_t *f, apr_bucket_brigade *bb, const mm_slot_script_t *slot)
{
    out_ctx_t *ctx = f->ctx;
    request_rec *r = f->r;

    if (ctx == NULL) {
        /* A subrequest's own response (an SSI include) is part of its main
         * request's response, which the main request's filter sees: run
         * once, not twice. Bodiless statuses have nothing to filter. */
        if (slot == NULL || r == NULL || r->main || AP_STATUS_IS_HEADER_ONLY(r->status)) {
            if (slot == NULL && r) {
                ap_log_rerror(APLOG_MARK, APLOG_WARNING, 0, r,
                              MM_LOGNO(00510) "the mruby output filter is set for %s, but no "
                                              "mrubyOutputFilter applies there: passing the response as is",
                              r->uri);
            }
            ap_remove_output_filter(f);
            return ap_pass_brigade(f->next, bb);
        }
        f->ctx = ctx = apr_pcalloc(r->pool, sizeof *ctx);
        ctx->slot = slot;
        ctx->work = apr_brigade_create(r->pool, f->c->bucket_alloc);
        ctx->out = apr_brigade_create(r->pool, f->c->bucket_alloc);
    }
    if (ctx->done) {
        apr_brigade_cleanup(bb);
        return ctx->done_rv;
    }
    return (ctx->slot->options & MM_SLOT_STREAM) ? stream(f, ctx, bb) : buffer(f, ctx, bb);
}

/* `mruby`: the script of the request's section. */
static apr_status_t section_filter(ap_filter_t *f, apr_bucket_brigade *bb)
{
    const mm_dir_conf_t *dc = f->r ? ap_get_module_config(f->r->per_dir_config, &mruby_module) : NULL;

    return out_filter(f, bb, dc ? dc->slots[MM_SLOT_OUTPUT_FILTER] : NULL);
}

/* The named filters: one function each, so that each knows its script
 * without looking at f->frec (which is mod_filter's own under
 * FilterProvider). Written while the configuration is read, read-only
 * after. */
static const mm_slot_script_t *named[MM_NAMED_FILTERS_MAX];
static int named_count;

#define MM_NAMED_OUT(i)                                                                                      \
    static apr_status_t named_out_##i(ap_filter_t *f, apr_bucket_brigade *bb)                                \
    {                                                                                                        \
        return out_filter(f, bb, named[i]);                                                                  \
    }
MM_FOR_NAMED_FILTERS(MM_NAMED_OUT)
#define MM_NAMED_OUT_REF(i) named_out_##i,
static ap_out_filter_func const named_funcs[MM_NAMED_FILTERS_MAX] = {MM_FOR_NAMED_FILTERS(MM_NAMED_OUT_REF)};

const char *mm_filter_out_register_named(cmd_parms *cmd, const mm_slot_script_t *s)
{
    const char *err =
        mm_filter_check_named(cmd, s, ap_get_output_filter_handle(s->name) != NULL, named_count, "output");

    if (err == NULL) {
        named[named_count] = s;
        ap_register_output_filter(s->name, named_funcs[named_count++], NULL, MM_OUTPUT_FILTER_TYPE);
    }
    return err;
}

void mm_filter_out_register(apr_pool_t *p)
{
    ap_register_output_filter("mruby", section_filter, NULL, MM_OUTPUT_FILTER_TYPE);
}

void mm_filter_out_pre_config(void)
{
    named_count = 0;
}
