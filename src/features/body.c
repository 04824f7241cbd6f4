/* body.c: keeps what Ruby reads of the request body and replays it.
 *
 * Before httpd adds a request's content input filters (the early phases,
 * where mod_proxy and friends read after Ruby), a script reads the client's
 * bytes: the replay filter sits just above HTTP_IN (below the content
 * filters, which therefore see the same bytes whoever reads first), Ruby
 * reads through the filter's next (HTTP_IN), and every byte read is
 * appended to the kept list. Whoever reads the request's input afterwards
 * gets the kept bytes from the filter first, then the rest from the client.
 * These bytes live in the client request's pool, so subrequests and
 * internal redirects (which share that pool) see them; an insert_filter
 * hook adds a filter instance to an internally redirected request.
 *
 * Once content input filters are in place (a content handler, with
 * SetInputFilter and the like), a script that has not read the body yet
 * reads it through them, as any handler would: those bytes are kept apart,
 * for this request (and the one an internal redirect makes of it, which
 * shares its pool), and replayed by an instance of the filter above every
 * content filter, so a later reader does not filter them twice. */

#include "apr_strings.h"
#include "httpd.h"
#include "http_core.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"

#include <string.h>

#include "body.h"
#include "subreq.h"
#include "mod_mruby.h"

#define MM_BODY_KEY          "mod_mruby.body"
#define MM_BODY_FILTERED_KEY "mod_mruby.body.filtered"

#define MM_BODY_FILTER  "MRUBY_BODY_REPLAY"
#define MM_BODY_READ_SZ (64 * 1024)

typedef struct {
    const char *data; /* in the client request's pool */
    apr_size_t len;
} mm_chunk_t;

/* The client's bytes live in the client request's pool, as long as the
 * request; the filtered bytes in the pool of the request that read them. */
struct mm_body {
    request_rec *owner;         /* whose pool holds the bytes */
    int filtered;               /* read through the content input filters */
    apr_array_header_t *chunks; /* of mm_chunk_t, in order */
    apr_off_t total;            /* bytes kept */
    int eos;                    /* the whole body is kept */
    apr_bucket_brigade *bb;     /* for reading */
};

/* One filter instance: how far it has served the kept bytes. */
typedef struct {
    mm_body_t *body;
    apr_off_t served;
    ap_filter_t *rest; /* where the bytes not kept yet come from, if not
                          from the filter's next (an internal redirect in
                          the middle of a filtered body) */
} mm_replay_t;

static ap_filter_rec_t *replay_frec;     /* just above HTTP_IN: the client's bytes */
static ap_filter_rec_t *replay_top_frec; /* above the content filters: filtered bytes */

static request_rec *client_request(request_rec *r)
{
    while (r->main) {
        r = r->main;
    }
    return r;
}

static mm_body_t *lookup_in(apr_pool_t *pool, const char *key)
{
    void *b = NULL;

    apr_pool_userdata_get(&b, key, pool);
    return b;
}

static mm_body_t *lookup(request_rec *r)
{
    return lookup_in(client_request(r)->pool, MM_BODY_KEY);
}

static mm_body_t *make_body(request_rec *owner, const char *key, int filtered)
{
    mm_body_t *b = apr_pcalloc(owner->pool, sizeof *b);

    b->owner = owner;
    b->filtered = filtered;
    b->chunks = apr_array_make(owner->pool, 8, sizeof(mm_chunk_t));
    b->bb = apr_brigade_create(owner->pool, owner->connection->bucket_alloc);
    apr_pool_userdata_setn(b, key, NULL, owner->pool);
    return b;
}

/* A content input filter (not ours) is on r's chain: httpd has run
 * insert_filter for it. */
static int has_content_filters(request_rec *r)
{
    ap_filter_t *f;

    for (f = r->input_filters; f && f->frec->ftype < AP_FTYPE_PROTOCOL; f = f->next) {
        if (f->frec != replay_frec && f->frec != replay_top_frec) {
            return 1;
        }
    }
    return 0;
}

mm_body_t *mm_body_of(request_rec *r)
{
    request_rec *top = client_request(r);
    mm_body_t *raw = lookup(top), *filtered;

    if (raw && raw->total > 0 && !mm_subreq_has_body(r)) {
        return raw; /* the script has seen the client's bytes: go on with them */
    }
    filtered = lookup_in(r->pool, MM_BODY_FILTERED_KEY);
    if (filtered) {
        return filtered;
    }
    /* A subrequest given a body of its own (Request#subrequest's body:)
     * reads it through its own chain, whose bottom serves it. */
    if (has_content_filters(r) || mm_subreq_has_body(r)) {
        return make_body(r, MM_BODY_FILTERED_KEY, 1);
    }
    return raw ? raw : make_body(top, MM_BODY_KEY, 0);
}

apr_off_t mm_body_kept(const mm_body_t *b)
{
    return b->total;
}

int mm_body_complete(const mm_body_t *b)
{
    return b->eos;
}

/* Calls fn for each slice of the kept chunks covering up to len bytes from
 * pos (stopping after the first LF if stop_at_lf); returns the count. */
static apr_size_t walk(const mm_body_t *b, apr_off_t pos, apr_size_t len, int stop_at_lf,
                       void (*fn)(void *ctx, const mm_chunk_t *c, apr_size_t off, apr_size_t n), void *ctx)
{
    const mm_chunk_t *c = (const mm_chunk_t *)b->chunks->elts;
    apr_off_t start = 0;
    apr_size_t done = 0;
    int i;

    for (i = 0; i < b->chunks->nelts && done < len; start += c[i].len, i++) {
        apr_size_t off, n;
        const char *lf;

        if (pos + (apr_off_t)done >= start + (apr_off_t)c[i].len) {
            continue;
        }
        off = (apr_size_t)(pos + (apr_off_t)done - start);
        n = c[i].len - off;
        if (n > len - done) {
            n = len - done;
        }
        lf = stop_at_lf ? memchr(c[i].data + off, '\n', n) : NULL;
        if (lf) {
            n = (apr_size_t)(lf - (c[i].data + off)) + 1;
        }
        fn(ctx, &c[i], off, n);
        done += n;
        if (lf) {
            break;
        }
    }
    return done;
}

static void copy_slice(void *ctx, const mm_chunk_t *c, apr_size_t off, apr_size_t n)
{
    char **dst = ctx;

    memcpy(*dst, c->data + off, n);
    *dst += n;
}

apr_size_t mm_body_copy(const mm_body_t *b, apr_off_t pos, char *dst, apr_size_t len, int stop_at_lf)
{
    return walk(b, pos, len, stop_at_lf, copy_slice, &dst);
}

/* A replayed slice is a pool bucket over the kept chunk: no copy. The chunk
 * lives in the client request's pool; should that pool go while a filter
 * still holds the bucket, the bucket copies itself to the heap. */
typedef struct {
    apr_bucket_brigade *bb;
    apr_pool_t *pool;
} mm_serve_t;

static void serve_slice(void *ctx, const mm_chunk_t *c, apr_size_t off, apr_size_t n)
{
    mm_serve_t *s = ctx;
    apr_bucket *e = apr_bucket_pool_create(c->data, c->len, s->pool, s->bb->bucket_alloc);

    e->start = (apr_off_t)off;
    e->length = n;
    APR_BRIGADE_INSERT_TAIL(s->bb, e);
}

apr_off_t mm_body_find(const mm_body_t *b, apr_off_t from, char c)
{
    const mm_chunk_t *ch = (const mm_chunk_t *)b->chunks->elts;
    apr_off_t start = 0;
    int i;

    for (i = 0; i < b->chunks->nelts; start += ch[i].len, i++) {
        const char *hit;
        apr_size_t off;

        if (from >= start + (apr_off_t)ch[i].len) {
            continue;
        }
        off = from > start ? (apr_size_t)(from - start) : 0;
        hit = memchr(ch[i].data + off, c, ch[i].len - off);
        if (hit) {
            return start + (hit - ch[i].data);
        }
    }
    return -1;
}

static ap_filter_t *find_filter(ap_filter_t *f, ap_filter_rec_t *frec)
{
    while (f && f->frec != frec) {
        f = f->next;
    }
    return f;
}

/* The replay filter of b on r's input chain, added if missing. */
static ap_filter_t *replay_filter_of(request_rec *r, mm_body_t *b)
{
    ap_filter_rec_t *frec = b->filtered ? replay_top_frec : replay_frec;
    ap_filter_t *f = find_filter(r->input_filters, frec), *ours;
    mm_replay_t *ctx;

    if (f) {
        return f;
    }
    /* A new instance (a new request: an internal redirect, a subrequest)
     * replays from the start: the bytes kept so far were taken from the
     * client before it existed. */
    ctx = apr_pcalloc(r->pool, sizeof *ctx);
    ctx->body = b;
    if (b->filtered && r != b->owner && (ours = find_filter(b->owner->input_filters, frec)) != NULL) {
        /* A request internally redirected after a script read part of the
         * body through its request's content filters: the rest goes
         * through those same filters (whose state is in the middle of the
         * body), not through this request's own. */
        ctx->rest = ours->next;
    }
    return ap_add_input_filter_handle(frec, ctx, r, r->connection);
}

/* Where replay filter f reads what is not kept yet. */
static ap_filter_t *rest_of(ap_filter_t *f)
{
    mm_replay_t *ctx = f->ctx;

    return ctx->rest ? ctx->rest : f->next;
}

static void keep(mm_body_t *b, const char *data, apr_size_t len)
{
    mm_chunk_t *c = apr_array_push(b->chunks);

    c->data = apr_pmemdup(b->owner->pool, data, len);
    c->len = len;
    b->total += (apr_off_t)len;
}

int mm_body_fill(request_rec *r, mm_body_t *b, apr_off_t upto, apr_off_t limit, const char **why)
{
    ap_filter_t *below;
    apr_off_t max_req = ap_get_limit_req_body(r);
    const char *cl = apr_table_get(r->headers_in, "Content-Length");
    apr_off_t len;
    char *end;

    if (b->eos || b->total > upto) {
        return OK;
    }
    /* A declared length over a limit: refuse before reading anything (httpd
     * would answer 413 itself in the middle of our read). */
    if (b->total == 0 && cl && apr_strtoff(&len, cl, &end, 10) == APR_SUCCESS && *end == '\0' &&
        ((max_req > 0 && len > max_req) || (limit > 0 && len > limit))) {
        *why = (max_req > 0 && len > max_req) ? "the request body is larger than LimitRequestBody"
                                              : "the request body is larger than mrubyRequestBodyLimit";
        return HTTP_REQUEST_ENTITY_TOO_LARGE;
    }
    below = rest_of(replay_filter_of(r, b));
    while (!b->eos && b->total <= upto) {
        apr_status_t rv;
        apr_bucket *e;

        if (limit > 0 && b->total > limit) {
            *why = "the request body is larger than mrubyRequestBodyLimit";
            return HTTP_REQUEST_ENTITY_TOO_LARGE;
        }
        rv = ap_get_brigade(below, b->bb, AP_MODE_READBYTES, APR_BLOCK_READ, MM_BODY_READ_SZ);
        if (rv != APR_SUCCESS) {
            apr_brigade_cleanup(b->bb);
            *why = rv == AP_FILTER_ERROR ? "httpd refused the request body"
                                         : "the request body could not be read";
            return ap_map_http_request_error(rv, HTTP_BAD_REQUEST);
        }
        for (e = APR_BRIGADE_FIRST(b->bb); e != APR_BRIGADE_SENTINEL(b->bb); e = APR_BUCKET_NEXT(e)) {
            const char *data;
            apr_size_t n;

            if (APR_BUCKET_IS_EOS(e)) {
                b->eos = 1;
                break;
            }
            if (APR_BUCKET_IS_METADATA(e)) {
                continue;
            }
            if (apr_bucket_read(e, &data, &n, APR_BLOCK_READ) != APR_SUCCESS) {
                apr_brigade_cleanup(b->bb);
                *why = "the request body could not be read";
                return HTTP_BAD_REQUEST;
            }
            if (n > 0) {
                keep(b, data, n);
            }
        }
        apr_brigade_cleanup(b->bb);
    }
    if (limit > 0 && b->total > limit) {
        *why = "the request body is larger than mrubyRequestBodyLimit";
        return HTTP_REQUEST_ENTITY_TOO_LARGE;
    }
    return OK;
}

/* Serves the kept bytes this instance has not served yet, then EOS if the
 * body is complete, else whatever the client sends next. */
static apr_status_t replay_in(ap_filter_t *f, apr_bucket_brigade *bb, ap_input_mode_t mode,
                              apr_read_type_e block, apr_off_t readbytes)
{
    mm_replay_t *ctx = f->ctx;
    mm_body_t *b = ctx->body;
    apr_off_t avail = b->total - ctx->served;

    if (mode == AP_MODE_INIT || mode == AP_MODE_EATCRLF) {
        return rest_of(f) ? ap_get_brigade(rest_of(f), bb, mode, block, readbytes) : APR_SUCCESS;
    }
    if (avail > 0) {
        apr_size_t n =
            (apr_size_t)((mode == AP_MODE_EXHAUSTIVE || readbytes <= 0 || readbytes > avail) ? avail
                                                                                             : readbytes);
        mm_serve_t serve;

        if (n > MM_BODY_READ_SZ && mode != AP_MODE_EXHAUSTIVE) {
            n = MM_BODY_READ_SZ;
        }
        serve.bb = bb;
        serve.pool = b->owner->pool;
        n = walk(b, ctx->served, n, mode == AP_MODE_GETLINE, serve_slice, &serve);
        if (mode != AP_MODE_SPECULATIVE) {
            ctx->served += (apr_off_t)n;
        }
        return APR_SUCCESS;
    }
    if (b->eos || rest_of(f) == NULL) {
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(f->c->bucket_alloc));
        return APR_SUCCESS;
    }
    return ap_get_brigade(rest_of(f), bb, mode, block, readbytes);
}

/* An internally redirected request gets a fresh input chain: give it the
 * kept bytes too, the client's or, if a script read them through the
 * content filters of the request before, those (shared by the requests of
 * an internal redirect, which share a pool), which this request's readers
 * get as the script did. */
static void insert_replay(request_rec *r)
{
    mm_body_t *b;

    if (r->prev == NULL) {
        return;
    }
    if ((b = lookup(r)) != NULL && b->total > 0) {
        replay_filter_of(r, b);
    } else if ((b = lookup_in(r->pool, MM_BODY_FILTERED_KEY)) != NULL && b->total > 0) {
        replay_filter_of(r, b);
    }
}

void mm_body_register_hooks(apr_pool_t *p)
{
    /* Just above HTTP_IN (AP_FTYPE_PROTOCOL), below every content filter. */
    replay_frec =
        ap_register_input_filter(MM_BODY_FILTER, replay_in, NULL, (ap_filter_type)(AP_FTYPE_PROTOCOL - 1));
    /* Above every content filter (AP_FTYPE_RESOURCE is the highest). */
    replay_top_frec = ap_register_input_filter(MM_BODY_FILTER "_FILTERED", replay_in, NULL,
                                               (ap_filter_type)(AP_FTYPE_RESOURCE - 1));

    ap_hook_insert_filter(insert_replay, NULL, NULL, APR_HOOK_FIRST);
}
