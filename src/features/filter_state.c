/* filter_state.c: Apache::Filter#ctx, the state a filter keeps for one
 * request between its runs.
 *
 * The Hash a run sees is made in the VM of that run and copied out of Ruby
 * when the run ends (plain data: nil, true, false, Integer, Float, String,
 * Symbol, and Arrays and Hashes of them), into a buffer of the filter's
 * own; the next run gets a new Hash made from it. No Ruby object outlives
 * its run, so the state does not care which VM the next run has: another
 * thread's, after a script slept (Apache::Async.sleep), or a fresh one,
 * after mrubyMaxRequestsPerVM replaced the VM in the middle of a body. */

#include <stdlib.h>
#include <string.h>

#include "apr_strings.h"
#include "httpd.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/hash.h>
#include <mruby/string.h>

#include "filter.h"

/* Deeper than this is a mistake, or a Hash that contains itself. */
#define MM_STATE_DEPTH_MAX 32
/* The state is copied whole at the end of every run: a filter that keeps
 * a body in it copies all of it again for every chunk. Beyond this size
 * (encoded) it is refused. */
#define MM_STATE_SIZE_MAX (16 * 1024 * 1024)

/* One byte says what follows. */
enum {
    TAG_NIL = 'n',
    TAG_TRUE = 't',
    TAG_FALSE = 'f',
    TAG_INTEGER = 'i', /* mrb_int */
    TAG_FLOAT = 'd',   /* mrb_float */
    TAG_STRING = 's',  /* length (apr_size_t), bytes */
    TAG_SYMBOL = 'y',  /* length (apr_size_t), bytes */
    TAG_ARRAY = 'a',   /* count (apr_size_t), values */
    TAG_HASH = 'h'     /* count (apr_size_t), key and value pairs */
};

static apr_status_t free_buffer(void *data)
{
    mm_filter_state_t *st = data;

    free(st->buf);
    st->buf = NULL;
    st->len = st->cap = 0;
    return APR_SUCCESS;
}

/* ------------------------------------------------------------ encoding */

typedef struct {
    mm_filter_state_t *st;
    mrb_state *mrb;
    const char *error; /* static text */
    int depth;
} writer_t;

static void put(writer_t *w, const void *data, apr_size_t len)
{
    mm_filter_state_t *st = w->st;

    if (w->error) {
        return;
    }
    if (len > MM_STATE_SIZE_MAX - st->len) {
        w->error = "larger than 16 MB";
        return;
    }
    if (st->len + len > st->cap) {
        apr_size_t cap = st->cap ? st->cap : 256;
        char *buf;

        while (cap < st->len + len) {
            cap *= 2;
        }
        buf = realloc(st->buf, cap);
        if (buf == NULL) {
            w->error = "out of memory";
            return;
        }
        st->buf = buf;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, len);
    st->len += len;
}

static void put_tag(writer_t *w, char tag, apr_size_t n)
{
    put(w, &tag, 1);
    put(w, &n, sizeof n);
}

static void put_value(writer_t *w, mrb_value v);

static int put_pair(mrb_state *mrb, mrb_value key, mrb_value val, void *data)
{
    writer_t *w = data;

    put_value(w, key);
    put_value(w, val);
    return w->error != NULL;
}

/* Reads only: nothing is allocated in the VM, so its GC cannot run. */
static void put_value(writer_t *w, mrb_value v)
{
    mrb_state *mrb = w->mrb;
    char tag;

    if (++w->depth > MM_STATE_DEPTH_MAX) {
        w->error = "nested too deeply (a container that contains itself?)";
        return;
    }
    switch (mrb_type(v)) {
    case MRB_TT_FALSE:
        tag = mrb_nil_p(v) ? TAG_NIL : TAG_FALSE;
        put(w, &tag, 1);
        break;
    case MRB_TT_TRUE:
        tag = TAG_TRUE;
        put(w, &tag, 1);
        break;
    case MRB_TT_INTEGER: {
        mrb_int i = mrb_integer(v);

        tag = TAG_INTEGER;
        put(w, &tag, 1);
        put(w, &i, sizeof i);
        break;
    }
    case MRB_TT_FLOAT: {
        mrb_float d = mrb_float(v);

        tag = TAG_FLOAT;
        put(w, &tag, 1);
        put(w, &d, sizeof d);
        break;
    }
    case MRB_TT_STRING:
        put_tag(w, TAG_STRING, (apr_size_t)RSTRING_LEN(v));
        put(w, RSTRING_PTR(v), (apr_size_t)RSTRING_LEN(v));
        break;
    case MRB_TT_SYMBOL: {
        mrb_int len;
        const char *name = mrb_sym_name_len(mrb, mrb_symbol(v), &len);

        put_tag(w, TAG_SYMBOL, (apr_size_t)len);
        put(w, name, (apr_size_t)len);
        break;
    }
    case MRB_TT_ARRAY: {
        mrb_int i, n = RARRAY_LEN(v);

        put_tag(w, TAG_ARRAY, (apr_size_t)n);
        for (i = 0; i < n && !w->error; i++) {
            put_value(w, RARRAY_PTR(v)[i]);
        }
        break;
    }
    case MRB_TT_HASH:
        put_tag(w, TAG_HASH, (apr_size_t)mrb_hash_size(mrb, v));
        mrb_hash_foreach(mrb, mrb_hash_ptr(v), put_pair, w);
        break;
    default:
        w->error = "holds an object that is not plain data (nil, true, false, Integer, Float, String, "
                   "Symbol, Array, Hash)";
        break;
    }
    w->depth--;
}

const char *mm_filter_state_store(mm_filter_run_t *run, apr_pool_t *pool, int keep)
{
    mm_vm_t *vm = run->ctx_vm;
    mm_filter_state_t *st = run->state;
    writer_t w = {st, NULL, NULL, 0};

    if (vm == NULL) {
        return NULL; /* the script did not use ctx: it stays as it was */
    }
    /* Right after the run, in its thread: the VM is there (it is replaced
     * only when the thread asks for it again), and its lock keeps out a
     * thread that resumes a sleeping script in it. */
    mm_vm_lock(vm);
    st->len = 0;
    if (keep) {
        if (!st->cleanup_registered) {
            apr_pool_cleanup_register(pool, st, free_buffer, apr_pool_cleanup_null);
            st->cleanup_registered = 1;
        }
        w.mrb = vm->mrb;
        put_value(&w, run->ctx);
        if (w.error) {
            st->len = 0;
        }
    }
    mrb_gc_unregister(vm->mrb, run->ctx);
    mm_vm_unlock(vm);
    run->ctx_vm = NULL;
    return w.error;
}

/* ------------------------------------------------------------ decoding */

typedef struct {
    const char *p, *end;
} reader_t;

static void take(mrb_state *mrb, reader_t *rd, void *out, apr_size_t len)
{
    if ((apr_size_t)(rd->end - rd->p) < len) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter#ctx: the saved state is damaged");
    }
    memcpy(out, rd->p, len);
    rd->p += len;
}

static apr_size_t take_size(mrb_state *mrb, reader_t *rd)
{
    apr_size_t n;

    take(mrb, rd, &n, sizeof n);
    return n;
}

static const char *take_bytes(mrb_state *mrb, reader_t *rd, apr_size_t len)
{
    const char *p = rd->p;

    if ((apr_size_t)(rd->end - rd->p) < len) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter#ctx: the saved state is damaged");
    }
    rd->p += len;
    return p;
}

/* Each element is made, put in its container, and let go of the GC arena:
 * the container (in the arena of its caller) keeps it. */
static mrb_value take_value(mrb_state *mrb, reader_t *rd)
{
    char tag;
    apr_size_t i, n;

    take(mrb, rd, &tag, 1);
    switch (tag) {
    case TAG_NIL:
        return mrb_nil_value();
    case TAG_TRUE:
        return mrb_true_value();
    case TAG_FALSE:
        return mrb_false_value();
    case TAG_INTEGER: {
        mrb_int v;

        take(mrb, rd, &v, sizeof v);
        return mrb_int_value(mrb, v);
    }
    case TAG_FLOAT: {
        mrb_float v;

        take(mrb, rd, &v, sizeof v);
        return mrb_float_value(mrb, v);
    }
    case TAG_STRING:
        n = take_size(mrb, rd);
        return mrb_str_new(mrb, take_bytes(mrb, rd, n), (mrb_int)n);
    case TAG_SYMBOL:
        n = take_size(mrb, rd);
        return mrb_symbol_value(mrb_intern(mrb, take_bytes(mrb, rd, n), n));
    case TAG_ARRAY: {
        mrb_value ary;

        n = take_size(mrb, rd);
        ary = mrb_ary_new_capa(mrb, (mrb_int)n);
        for (i = 0; i < n; i++) {
            int ai = mrb_gc_arena_save(mrb);

            mrb_ary_push(mrb, ary, take_value(mrb, rd));
            mrb_gc_arena_restore(mrb, ai);
        }
        return ary;
    }
    case TAG_HASH: {
        mrb_value hash;

        n = take_size(mrb, rd);
        hash = mrb_hash_new_capa(mrb, (mrb_int)n);
        for (i = 0; i < n; i++) {
            int ai = mrb_gc_arena_save(mrb);
            mrb_value key = take_value(mrb, rd);

            mrb_hash_set(mrb, hash, key, take_value(mrb, rd));
            mrb_gc_arena_restore(mrb, ai);
        }
        return hash;
    }
    default:
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter#ctx: the saved state is damaged");
        return mrb_nil_value();
    }
}

mrb_value mm_filter_state_load(mrb_state *mrb, mm_filter_run_t *run)
{
    mm_filter_state_t *st = run->state;
    mrb_value hash;

    if (run->ctx_vm) {
        return run->ctx;
    }
    if (st->len == 0) {
        hash = mrb_hash_new(mrb);
    } else {
        reader_t rd = {st->buf, st->buf + st->len};

        hash = take_value(mrb, &rd);
    }
    /* Kept from the GC until mm_filter_state_store, after the run. */
    mrb_gc_register(mrb, hash);
    run->ctx = hash;
    run->ctx_vm = mm_vm_of(mrb);
    return hash;
}
