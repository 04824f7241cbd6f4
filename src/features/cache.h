/* cache.h: the shared caches configured with mrubyCache: the shared
 * dictionary (shdict.h, the default) or one of httpd's socache providers
 * (shmcb, memcache, redis, ...): their configuration, their life across
 * starts and restarts, and the operations Apache::Cache builds on.
 * Nothing here knows Ruby (rb_cache.c is the binding). */
#ifndef MM_CACHE_H
#define MM_CACHE_H

#include "apr_errno.h"
#include "apr_tables.h"
#include "apr_pools.h"
#include "apr_time.h"
#include "httpd.h"
#include "http_config.h"

typedef struct mm_cache mm_cache_t;

/* The name of the cache configured without one. */
#define MM_CACHE_DEFAULT_NAME "default"
/* A name is 1..MM_CACHE_NAME_MAX of [A-Za-z0-9_-]: it becomes part of the
 * provider's namespace ("mruby-NAME", at most 16 characters). */
#define MM_CACHE_NAME_MAX 10
/* Keys are 1..MM_CACHE_KEY_MAX bytes, any bytes: memcache and redis allow
 * about 250 characters per key, and they store the key in hexadecimal after
 * the namespace. */
#define MM_CACHE_KEY_MAX 100
/* Values are at most max-value bytes (mrubyCache option): a read needs a
 * buffer that large. */
#define MM_CACHE_VALUE_DEFAULT (64 * 1024)
#define MM_CACHE_VALUE_MAX     (64 * 1024 * 1024)
/* The longest lifetime: memcached reads a larger relative expiry as a date.
 * Entries set without a ttl get this one. */
#define MM_CACHE_TTL_MAX_SEC (30 * 24 * 3600)

/* mrubyCache [NAME] [dict[:FILE][(SIZE)] | PROVIDER[:ARGS]] [max-value=BYTES] */
const char *mm_cache_cmd(cmd_parms *cmd, void *dconf, int argc, char *const argv[]);

/* Hooks (mod_mruby.c calls them). pre_config registers the "mruby-cache"
 * mutex type for the Mutex directive; post_config creates the mutexes and
 * initializes the providers in the parent (they die with pconf: at restart
 * and stop); child_init attaches the mutexes in each child. */
int mm_cache_pre_config(apr_pool_t *pconf, apr_pool_t *plog);
int mm_cache_post_config(apr_pool_t *pconf, apr_pool_t *plog, server_rec *s);
void mm_cache_child_init(apr_pool_t *pchild, server_rec *s);

/* The cache of that name configured for s, or NULL. The caches live in pconf:
 * the pointer is good for as long as the process has this configuration. */
mm_cache_t *mm_cache_find(server_rec *s, const char *name);

/* NULL when the cache can be used in this process, else why not (the parent
 * process, a child whose mutex could not be attached). */
const char *mm_cache_unusable(const mm_cache_t *c);

const char *mm_cache_name(const mm_cache_t *c);
/* Whether it is the dictionary (else a socache provider). */
int mm_cache_is_dict(const mm_cache_t *c);
apr_size_t mm_cache_max_value(const mm_cache_t *c);

/* The operations. Keys and values are binary; the caller checks their
 * sizes (MM_CACHE_KEY_MAX, mm_cache_max_value). Each returns APR_SUCCESS or
 * a status whose text mm_cache_strerror gives; p holds what they allocate
 * (the value read). None of them keeps a pointer to key or value. A ttl of
 * 0 is none: the dictionary keeps the entry until it is removed, the
 * providers for MM_CACHE_TTL_MAX_SEC. What only the dictionary does answers
 * MM_CACHE_ENOTDICT on the providers.
 *
 * get: APR_NOTFOUND when there is no such entry (or it expired). */
apr_status_t mm_cache_get(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_pool_t *p,
                          char **val, apr_size_t *vlen);
typedef enum {
    MM_CACHE_SET,     /* always */
    MM_CACHE_ADD,     /* only if there is no entry: MM_SHDICT_EXISTS (dictionary only) */
    MM_CACHE_REPLACE, /* only if there is one: APR_NOTFOUND (dictionary only) */
} mm_cache_mode_e;

/* set: the entry lives ttl (at most MM_CACHE_TTL_MAX_SEC seconds). On the
 * dictionary, MM_SHDICT_FULL when its live entries leave no room. */
apr_status_t mm_cache_set(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, const char *val,
                          apr_size_t vlen, apr_interval_time_t ttl, mm_cache_mode_e mode, apr_pool_t *p);
/* remove: APR_NOTFOUND when there was nothing to remove. */
apr_status_t mm_cache_remove(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_pool_t *p);
/* incr: adds by to the decimal integer stored at key (init when absent),
 * atomically (the dictionary: one transaction; the providers: under the
 * cache's lock) and stores the sum with ttl (the dictionary: 0 keeps an
 * entry's expiry). MM_CACHE_ENOTINT when the
 * value is not a decimal integer, MM_CACHE_EOVERFLOW when the sum does not
 * fit in 64 bits, MM_CACHE_ETOOLONG when its decimal text is longer than
 * the cache's max-value (nothing is stored then). */
apr_status_t mm_cache_incr(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_int64_t by,
                           apr_int64_t init, apr_interval_time_t ttl, apr_pool_t *p, apr_int64_t *result);

/* The dictionary only. ttl: the entry's expiry time (0: none), APR_NOTFOUND
 * without a live entry. expire: gives a live entry a new ttl. keys: up to
 * limit live keys (0: all), as struct iovec in p. flush_expired: removes up
 * to limit expired entries (0: all). space: the capacity and the bytes the
 * entries leave of it. */
apr_status_t mm_cache_ttl(mm_cache_t *c, const char *key, apr_size_t klen, apr_pool_t *p, apr_time_t *expiry);
apr_status_t mm_cache_expire(mm_cache_t *c, const char *key, apr_size_t klen, apr_interval_time_t ttl);
apr_status_t mm_cache_keys(mm_cache_t *c, apr_size_t limit, apr_pool_t *p, apr_array_header_t **keys);
apr_status_t mm_cache_flush_all(mm_cache_t *c);
apr_status_t mm_cache_flush_expired(mm_cache_t *c, apr_size_t limit, apr_size_t *removed);
apr_status_t mm_cache_space(mm_cache_t *c, apr_uint64_t *capacity, apr_uint64_t *free_bytes);

/* The cache's lock: one httpd global mutex (type "mruby-cache") shared by
 * every thread of every child. A thread that holds it may take it again
 * (incr inside synchronize, nested synchronize); each lock needs its
 * unlock. */
apr_status_t mm_cache_lock(mm_cache_t *c);
apr_status_t mm_cache_unlock(mm_cache_t *c);

/* Statuses of our own (beside APR's and the providers'). */
#define MM_CACHE_ENOTINT   (APR_OS_START_USERERR + 901) /* incr: the value is not an integer */
#define MM_CACHE_EOVERFLOW (APR_OS_START_USERERR + 902) /* incr: the sum does not fit */
#define MM_CACHE_ETOOLONG  (APR_OS_START_USERERR + 903) /* incr: the sum's text exceeds max-value */
#define MM_CACHE_EREFUSED  (APR_OS_START_USERERR + 904) /* set: the cache server answered an error */
#define MM_CACHE_ENOTDICT  (APR_OS_START_USERERR + 905) /* an operation only the dictionary has */

/* Text for a status of the operations above, in buf. */
const char *mm_cache_strerror(const mm_cache_t *c, apr_status_t rv, char *buf, apr_size_t size);

#endif
