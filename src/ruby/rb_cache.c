/* rb_cache.c: Apache::Cache, a configured shared cache (cache.c) as Ruby
 * sees it. C checks and converts the arguments and runs each operation in
 * a scratch pool of the VM; the Ruby half (mrblib/cache.rb) composes them
 * into [], []=, set, fetch, incr and the class-level shortcuts for the
 * default cache. Keys and values are copied on the way in and out: nothing
 * points into Ruby memory once a method returns. */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "httpd.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/string.h>

#include "binding.h"
#include "classes.h"
#include "cache.h"
#include "shdict.h"
#include "vm.h"

/* An Apache::Cache object holds the mm_cache_t of its cache. That lives in
 * pconf, which outlives every VM of the process: nothing to free. */
static const mrb_data_type cache_type = {"Apache::Cache", NULL};

static struct RClass *error_class(mrb_state *mrb)
{
    return mrb_class_get_under(mrb, mrb_class_get_under(mrb, mm_binding_apache(mrb), "Cache"), "Error");
}

static mm_cache_t *cache_of(mrb_state *mrb, mrb_value self)
{
    mm_cache_t *c = mrb_data_check_get_ptr(mrb, self, &cache_type);

    if (c == NULL) {
        mrb_raise(mrb, E_TYPE_ERROR, "not an Apache::Cache (use Apache::Cache.named)");
    }
    return c;
}

/* Apache::Cache.__open(name): the configured cache of that name (mrblib's
 * Apache::Cache.named keeps one object per name and VM). */
static mrb_value cache_open(mrb_state *mrb, mrb_value klass)
{
    mm_run_t *run = mm_binding_run(mrb, "Apache::Cache");
    const char *name, *why;
    mm_cache_t *c;

    mrb_get_args(mrb, "z", &name);
    c = mm_cache_find(run->s, name);
    if (c == NULL && strcmp(name, MM_CACHE_DEFAULT_NAME) == 0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR,
                  "no cache is configured: add `mrubyCache PROVIDER:ARGS` to the server configuration");
    }
    if (c == NULL) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "no cache named '%s': add `mrubyCache %s PROVIDER:ARGS`", name,
                   name);
    }
    why = mm_cache_unusable(c);
    if (why) {
        mrb_raisef(mrb, error_class(mrb), "cache '%s' cannot be used here: %s", name, why);
    }
    return mrb_obj_value(mrb_data_object_alloc(mrb, mrb_class_ptr(klass), c, &cache_type));
}

/* A key: a String or a Symbol of 1..MM_CACHE_KEY_MAX bytes. */
static const char *key_of(mrb_state *mrb, mrb_value key, apr_size_t *len)
{
    const char *ptr;
    mrb_int n;

    if (mrb_string_p(key)) {
        ptr = RSTRING_PTR(key);
        n = RSTRING_LEN(key);
    } else if (mrb_symbol_p(key)) {
        ptr = mrb_sym_name_len(mrb, mrb_symbol(key), &n);
    } else {
        mrb_raisef(mrb, E_TYPE_ERROR, "a cache key must be a String or a Symbol, not %s",
                   mrb_obj_classname(mrb, key));
    }
    if (n < 1 || n > MM_CACHE_KEY_MAX) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "a cache key has 1 to %d bytes, not %i", MM_CACHE_KEY_MAX, n);
    }
    *len = (apr_size_t)n;
    return ptr;
}

/* A lifetime: nil (0: none on the dictionary, the longest on the
 * providers) or 1..MM_CACHE_TTL_MAX_SEC seconds. */
static apr_interval_time_t ttl_of(mrb_state *mrb, mrb_value ttl)
{
    double sec;

    if (mrb_nil_p(ttl)) {
        return 0;
    }
    if (mrb_integer_p(ttl)) {
        sec = (double)mrb_integer(ttl);
    } else if (mrb_float_p(ttl)) {
        sec = mrb_float(ttl);
    } else {
        mrb_raisef(mrb, E_TYPE_ERROR, "ttl must be a number of seconds, not %s", mrb_obj_classname(mrb, ttl));
    }
    if (!(sec >= 1 && sec <= MM_CACHE_TTL_MAX_SEC)) { /* NaN too */
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "ttl must be from 1 to %d seconds (30 days)", MM_CACHE_TTL_MAX_SEC);
    }
    return (apr_interval_time_t)(sec * APR_USEC_PER_SEC);
}

/* Every operation runs with a scratch pool of the VM's pool (its own
 * allocator, used by the one thread that runs the VM at a time), destroyed
 * before the method returns or raises. */
typedef struct {
    mm_cache_t *c;
    server_rec *s;
    apr_pool_t *p;
    const char *what;
} mm_op_t;

static void op_begin(mrb_state *mrb, mrb_value self, const char *what, mm_op_t *op)
{
    op->c = cache_of(mrb, self);
    op->s = mm_binding_run(mrb, "Apache::Cache")->s;
    op->what = what;
    if (apr_pool_create(&op->p, mm_vm_pool_or_raise(mrb, "Apache::Cache")) != APR_SUCCESS) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Cache: out of memory");
    }
}

/* Ends the operation; raises for a failed status. */
static void op_end(mrb_state *mrb, mm_op_t *op, apr_status_t rv)
{
    char buf[256];
    const char *why = NULL;
    apr_uint64_t *ctr = mm_vm_of(mrb)->ctr;

    if (rv != APR_SUCCESS) {
        why = mm_cache_strerror(op->c, rv, buf, sizeof buf);
    }
    apr_pool_destroy(op->p);
    mm_ctr_add(ctr, MM_CTR_CACHE_OPS, 1);
    mm_ctr_add(ctr, MM_CTR_CACHE_ERRORS, why != NULL);
    if (why == NULL) {
        return;
    }
    if (rv == MM_CACHE_ENOTINT) {
        mrb_raisef(mrb, E_TYPE_ERROR, "Apache::Cache#%s: %s", op->what, why);
    }
    if (rv == MM_CACHE_EOVERFLOW || rv == MM_CACHE_ETOOLONG) {
        mrb_raisef(mrb, E_RANGE_ERROR, "Apache::Cache#%s: %s", op->what, why);
    }
    if (rv == MM_SHDICT_FULL) {
        struct RClass *cache = mrb_class_get_under(mrb, mm_binding_apache(mrb), "Cache");

        mrb_raisef(mrb, mrb_class_get_under(mrb, cache, "Full"), "cache '%s': %s failed: %s",
                   mm_cache_name(op->c), op->what, why);
    }
    mrb_raisef(mrb, error_class(mrb), "cache '%s': %s failed: %s", mm_cache_name(op->c), op->what, why);
}

/* get(key): the value (a new String), or nil. */
static mrb_value cache_get(mrb_state *mrb, mrb_value self)
{
    mrb_value key = mrb_get_arg1(mrb), result = mrb_nil_value();
    apr_size_t klen, vlen;
    const char *k = key_of(mrb, key, &klen);
    char *val;
    mm_op_t op;
    apr_status_t rv;

    op_begin(mrb, self, "get", &op);
    rv = mm_cache_get(op.c, op.s, k, klen, op.p, &val, &vlen);
    if (rv == APR_SUCCESS) {
        result = mrb_str_new(mrb, val, (mrb_int)vlen);
    } else if (APR_STATUS_IS_NOTFOUND(rv)) {
        rv = APR_SUCCESS;
    }
    op_end(mrb, &op, rv);
    return result;
}

/* Stores a copy of the String value at key: __set(key, value, ttl)
 * returns value; __add and __replace (the dictionary) whether it stored. */
static mrb_value store(mrb_state *mrb, mrb_value self, mm_cache_mode_e mode, const char *what)
{
    mrb_value key, value, ttl;
    apr_size_t klen, max = mm_cache_max_value(cache_of(mrb, self));
    const char *k;
    apr_interval_time_t life;
    apr_status_t rv;
    mm_op_t op;

    mrb_get_args(mrb, "ooo", &key, &value, &ttl);
    k = key_of(mrb, key, &klen);
    life = ttl_of(mrb, ttl);
    if (!mrb_string_p(value)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "a cache value must be a String, not %s",
                   mrb_obj_classname(mrb, value));
    }
    if ((apr_size_t)RSTRING_LEN(value) > max) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "a value of %d bytes is larger than the cache's max-value (%d)",
                   (int)RSTRING_LEN(value), (int)max);
    }
    op_begin(mrb, self, what, &op);
    rv = mm_cache_set(op.c, op.s, k, klen, RSTRING_PTR(value), (apr_size_t)RSTRING_LEN(value), life, mode,
                      op.p);
    if (mode != MM_CACHE_SET && (rv == MM_SHDICT_EXISTS || APR_STATUS_IS_NOTFOUND(rv))) {
        op_end(mrb, &op, APR_SUCCESS);
        return mrb_false_value();
    }
    op_end(mrb, &op, rv);
    return mode == MM_CACHE_SET ? value : mrb_true_value();
}

static mrb_value cache_set(mrb_state *mrb, mrb_value self)
{
    return store(mrb, self, MM_CACHE_SET, "set");
}

static mrb_value cache_add(mrb_state *mrb, mrb_value self)
{
    return store(mrb, self, MM_CACHE_ADD, "add");
}

static mrb_value cache_replace(mrb_state *mrb, mrb_value self)
{
    return store(mrb, self, MM_CACHE_REPLACE, "replace");
}

/* delete(key): true if there was an entry to remove, false if not. */
static mrb_value cache_delete(mrb_state *mrb, mrb_value self)
{
    apr_size_t klen;
    const char *k = key_of(mrb, mrb_get_arg1(mrb), &klen);
    mm_op_t op;
    apr_status_t rv;
    mrb_bool found = TRUE;

    op_begin(mrb, self, "delete", &op);
    rv = mm_cache_remove(op.c, op.s, k, klen, op.p);
    if (APR_STATUS_IS_NOTFOUND(rv)) {
        found = FALSE;
        rv = APR_SUCCESS;
    }
    op_end(mrb, &op, rv);
    return mrb_bool_value(found);
}

/* __incr(key, by, init, ttl): the new value, as an Integer. */
static mrb_value cache_incr(mrb_state *mrb, mrb_value self)
{
    mrb_value key, by, init, ttl;
    apr_size_t klen;
    const char *k;
    apr_interval_time_t life;
    apr_int64_t n = 0;
    mm_op_t op;

    mrb_get_args(mrb, "oooo", &key, &by, &init, &ttl);
    /* An Integer only: a Float would be truncated (incr by 1.9 adds 1),
     * and decr negates only an Integer, so decr by 1.5 would add 1. */
    if (!mrb_integer_p(by)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "the amount to add must be an Integer, not %s",
                   mrb_obj_classname(mrb, by));
    }
    if (!mrb_nil_p(init) && !mrb_integer_p(init)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "init must be an Integer, not %s", mrb_obj_classname(mrb, init));
    }
    k = key_of(mrb, key, &klen);
    life = ttl_of(mrb, ttl);
    op_begin(mrb, self, "incr", &op);
    op_end(mrb, &op,
           mm_cache_incr(op.c, op.s, k, klen, (apr_int64_t)mrb_integer(by),
                         mrb_nil_p(init) ? 0 : (apr_int64_t)mrb_integer(init), life, op.p, &n));
    return mrb_int_value(mrb, (mrb_int)n);
}

/* A lock a synchronize block holds, on its run's list. A hard stop
 * (mrubyTimeout) jumps from inside the block straight to the run's catch
 * point, past the release below: the harness then releases what the list
 * still holds (mm_cache_release_held), or the cache's lock would stay taken
 * and every incr and synchronize of the server would wait for ever. malloc:
 * the block's C stack is gone by then. */
struct mm_cache_held {
    mm_cache_t *c;
    struct mm_cache_held *next;
};

void mm_cache_release_held(mm_run_t *run)
{
    while (run->held) {
        struct mm_cache_held *h = run->held;

        run->held = h->next;
        mm_cache_unlock(h->c);
        free(h);
    }
}

static mrb_value sync_body(mrb_state *mrb, void *block)
{
    return mrb_yield_argv(mrb, *(mrb_value *)block, 0, NULL);
}

/* synchronize(key) { ... }: runs the block holding the cache's lock, which
 * every thread of every child shares; released however the block ends. */
static mrb_value cache_synchronize(mrb_state *mrb, mrb_value self)
{
    mm_cache_t *c = cache_of(mrb, self);
    mm_run_t *run = mm_binding_run(mrb, "Apache::Cache");
    mrb_value key, block, result;
    apr_size_t klen;
    apr_status_t rv;
    mrb_bool raised = FALSE;
    struct mm_cache_held *held;
    char buf[256];

    mrb_get_args(mrb, "o&", &key, &block);
    key_of(mrb, key, &klen);
    if (mrb_nil_p(block)) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::Cache#synchronize needs a block");
    }
    held = malloc(sizeof *held);
    if (held == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Cache: out of memory");
    }
    rv = mm_cache_lock(c);
    if (rv != APR_SUCCESS) {
        free(held);
        mrb_raisef(mrb, error_class(mrb), "cache '%s': synchronize failed: %s", mm_cache_name(c),
                   mm_cache_strerror(c, rv, buf, sizeof buf));
    }
    held->c = c;
    held->next = run->held;
    run->held = held;
    /* Whatever ends the block (a value, an exception, break), the lock is
     * released before it goes on. A Fiber cannot switch inside the block:
     * mruby refuses to yield across this C call (Apache::Async.sleep blocks
     * instead), so a suspended request never holds the lock, and the thread
     * that took it is the one that releases it. */
    result = mrb_protect_error(mrb, sync_body, &block, &raised);
    /* Blocks nest: this one's entry is the first of the list again. */
    run->held = held->next;
    free(held);
    mm_cache_unlock(c);
    if (raised) {
        mrb_exc_raise(mrb, result);
    }
    return result;
}

/* ttl(key): the seconds the entry has left (a Float), 0 when it never
 * expires, nil when there is none. */
static mrb_value cache_ttl(mrb_state *mrb, mrb_value self)
{
    apr_size_t klen;
    const char *k = key_of(mrb, mrb_get_arg1(mrb), &klen);
    apr_time_t expiry = 0;
    mrb_value result = mrb_nil_value();
    apr_status_t rv;
    mm_op_t op;

    op_begin(mrb, self, "ttl", &op);
    rv = mm_cache_ttl(op.c, k, klen, op.p, &expiry);
    if (rv == APR_SUCCESS) {
        apr_time_t left = expiry ? expiry - apr_time_now() : 0;

        result = mrb_float_value(mrb, expiry ? (left > 0 ? (mrb_float)left / APR_USEC_PER_SEC : 1e-6) : 0);
    } else if (APR_STATUS_IS_NOTFOUND(rv)) {
        rv = APR_SUCCESS;
    }
    op_end(mrb, &op, rv);
    return result;
}

/* __expire(key, ttl): a new lifetime for the entry (nil: none); whether
 * there was one. */
static mrb_value cache_expire(mrb_state *mrb, mrb_value self)
{
    mrb_value key, ttl;
    apr_size_t klen;
    const char *k;
    apr_interval_time_t life;
    apr_status_t rv;
    mm_op_t op;

    mrb_get_args(mrb, "oo", &key, &ttl);
    k = key_of(mrb, key, &klen);
    life = ttl_of(mrb, ttl);
    op_begin(mrb, self, "expire", &op);
    rv = mm_cache_expire(op.c, k, klen, life);
    if (APR_STATUS_IS_NOTFOUND(rv)) {
        op_end(mrb, &op, APR_SUCCESS);
        return mrb_false_value();
    }
    op_end(mrb, &op, rv);
    return mrb_true_value();
}

/* A count argument: 0 or more (0: no limit). */
static apr_size_t limit_of(mrb_state *mrb, mrb_int n)
{
    if (n < 0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "the limit must be 0 (none) or more");
    }
    return (apr_size_t)n;
}

/* keys(limit = 1024): up to limit live keys (0: all), as Strings. */
static mrb_value cache_keys(mrb_state *mrb, mrb_value self)
{
    mrb_int n = 1024;
    apr_array_header_t *keys = NULL;
    apr_size_t limit;
    apr_status_t rv;
    mm_op_t op;
    mrb_value result;
    int i;

    mrb_get_args(mrb, "|i", &n);
    limit = limit_of(mrb, n);
    op_begin(mrb, self, "keys", &op);
    rv = mm_cache_keys(op.c, limit, op.p, &keys);
    if (rv != APR_SUCCESS) {
        op_end(mrb, &op, rv);
    }
    /* Made after the store's transaction ended: a String that cannot be
     * made raises with nothing of the store held. */
    result = mrb_ary_new_capa(mrb, keys->nelts);
    for (i = 0; i < keys->nelts; i++) {
        struct iovec *k = &APR_ARRAY_IDX(keys, i, struct iovec);

        mrb_ary_push(mrb, result, mrb_str_new(mrb, k->iov_base, (mrb_int)k->iov_len));
    }
    op_end(mrb, &op, APR_SUCCESS);
    return result;
}

static mrb_value cache_flush_all(mrb_state *mrb, mrb_value self)
{
    mm_op_t op;

    op_begin(mrb, self, "flush_all", &op);
    op_end(mrb, &op, mm_cache_flush_all(op.c));
    return mrb_nil_value();
}

/* flush_expired(limit = 0): how many expired entries it removed. */
static mrb_value cache_flush_expired(mrb_state *mrb, mrb_value self)
{
    mrb_int n = 0;
    apr_size_t limit, removed = 0;
    mm_op_t op;

    mrb_get_args(mrb, "|i", &n);
    limit = limit_of(mrb, n);
    op_begin(mrb, self, "flush_expired", &op);
    op_end(mrb, &op, mm_cache_flush_expired(op.c, limit, &removed));
    return mrb_int_value(mrb, (mrb_int)removed);
}

/* capacity, free_space: bytes. */
static mrb_value space(mrb_state *mrb, mrb_value self, int free_part)
{
    apr_uint64_t capacity = 0, free_bytes = 0;
    mm_op_t op;

    op_begin(mrb, self, free_part ? "free_space" : "capacity", &op);
    op_end(mrb, &op, mm_cache_space(op.c, &capacity, &free_bytes));
    return mrb_int_value(mrb, (mrb_int)(free_part ? free_bytes : capacity));
}

static mrb_value cache_capacity(mrb_state *mrb, mrb_value self)
{
    return space(mrb, self, 0);
}

static mrb_value cache_free_space(mrb_state *mrb, mrb_value self)
{
    return space(mrb, self, 1);
}

static mrb_value cache_name(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, mm_cache_name(cache_of(mrb, self)));
}

static mrb_value cache_max_value(mrb_state *mrb, mrb_value self)
{
    return mrb_int_value(mrb, (mrb_int)mm_cache_max_value(cache_of(mrb, self)));
}

void mm_cache_init(mrb_state *mrb)
{
    struct RClass *cache = mrb_define_class_under(mrb, mm_binding_apache(mrb), "Cache", mrb->object_class);

    MRB_SET_INSTANCE_TT(cache, MRB_TT_DATA);
    struct RClass *error = mrb_define_class_under(mrb, cache, "Error", mrb->eStandardError_class);

    mrb_define_class_under(mrb, cache, "Full", error);
    mrb_undef_class_method(mrb, cache, "new");
    mrb_define_class_method(mrb, cache, "__open", cache_open, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cache, "get", cache_get, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cache, "__set", cache_set, MRB_ARGS_REQ(3));
    mrb_define_method(mrb, cache, "delete", cache_delete, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cache, "__add", cache_add, MRB_ARGS_REQ(3));
    mrb_define_method(mrb, cache, "__replace", cache_replace, MRB_ARGS_REQ(3));
    mrb_define_method(mrb, cache, "__incr", cache_incr, MRB_ARGS_REQ(4));
    mrb_define_method(mrb, cache, "ttl", cache_ttl, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cache, "__expire", cache_expire, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, cache, "keys", cache_keys, MRB_ARGS_OPT(1));
    mrb_define_method(mrb, cache, "flush_all", cache_flush_all, MRB_ARGS_NONE());
    mrb_define_method(mrb, cache, "flush_expired", cache_flush_expired, MRB_ARGS_OPT(1));
    mrb_define_method(mrb, cache, "capacity", cache_capacity, MRB_ARGS_NONE());
    mrb_define_method(mrb, cache, "free_space", cache_free_space, MRB_ARGS_NONE());
    mrb_define_method(mrb, cache, "synchronize", cache_synchronize, MRB_ARGS_REQ(1) | MRB_ARGS_BLOCK());
    mrb_define_method(mrb, cache, "name", cache_name, MRB_ARGS_NONE());
    mrb_define_method(mrb, cache, "max_value", cache_max_value, MRB_ARGS_NONE());
}
