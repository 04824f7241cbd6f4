/* cache.c: the caches of mrubyCache, on httpd's socache providers.
 *
 * Life of a cache: the directive looks the provider up and creates its
 * instance in pconf (so a missing provider module fails `apachectl -t`);
 * post_config, in the parent, creates the cache's global mutexes and
 * initializes the instance (shmcb allocates its shared memory there, which
 * the children inherit); child_init attaches the mutexes in each child. The
 * instance belongs to pconf: a restart or stop destroys it, and the next
 * generation makes a new one (entries in shmcb are lost then; memcache and
 * redis keep theirs). The mutexes are kept for the life of httpd (see
 * create_mutex).
 *
 * Every entry's id is a 4-byte hash of the key followed by the key: shmcb
 * wants ids of 4 bytes or more and picks a subcache by the first byte, so
 * keys that share a prefix still spread over all subcaches. */

#include <errno.h>
#include <string.h>

#include "apr_global_mutex.h"
#include "apr_lib.h"
#include "apr_portable.h"
#include "apr_strings.h"
#include "apr_thread_proc.h"
#include "ap_provider.h"
#include "ap_socache.h"
#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "util_mutex.h"

#include "cache.h"
#include "config.h"
#include "mod_mruby.h"
#include "parse.h"

APLOG_USE_MODULE(mruby);

/* The Mutex directive's name for our mutexes: `Mutex fcntl:/var/lock
 * mruby-cache`. */
#define MM_CACHE_MUTEX_TYPE "mruby-cache"

/* memcache and redis count expiry in whole seconds, rounded down: half a
 * second more keeps a ttl of n seconds from becoming n - 1. */
#define MM_CACHE_TTL_SLACK apr_time_from_msec(500)

/* One configured cache. Made by the directive in pconf; the mutexes and
 * the instance's shared state are set up by post_config, in pconf too.
 * Children get a copy of it at fork; the fields below "process-local" are
 * written only by the process (and thread) they describe. */
struct mm_cache {
    const char *name;  /* "default" or the configured name */
    const char *spec;  /* PROVIDER[:ARGS] as configured, for messages */
    const char *cname; /* the provider's namespace: "mruby-NAME" */
    const ap_socache_provider_t *provider;
    ap_socache_instance_t *instance;
    apr_size_t max_value;
    server_rec *s;                  /* the main server, for the provider's logs */
    apr_global_mutex_t *lock;       /* incr and synchronize */
    apr_global_mutex_t *store_lock; /* around each provider call, for providers
                                       that are not safe across processes and
                                       threads (shmcb); NULL for the others */
    /* process-local */
    int unusable;           /* the mutexes could not be attached in this child */
    apr_os_thread_t holder; /* the thread holding lock, or 0 */
    int depth;              /* how often holder took it */
};

/* Set by child_init: caches are used in children only. The parent has no
 * business talking to memcache or redis (its connections would be inherited
 * by every child) and runs no requests. */
static int in_child;

/* ---------------------------------------------------------- configuration */

static int valid_name(const char *name)
{
    size_t n = strlen(name);

    return n >= 1 && n <= MM_CACHE_NAME_MAX &&
           strspn(name, "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789_-") == n;
}

static int is_option(const char *arg)
{
    return strncasecmp(arg, "max-value=", 10) == 0;
}

static const char *parse_option(cmd_parms *cmd, mm_cache_t *c, const char *arg)
{
    apr_uint64_t n;

    if (!is_option(arg)) {
        return apr_psprintf(cmd->pool, "mrubyCache: unknown option '%s' (expected max-value=BYTES)", arg);
    }
    if (mm_parse_size(arg + 10, 1, MM_CACHE_VALUE_MAX, &n) != MM_PARSE_OK) {
        return apr_psprintf(cmd->pool,
                            "mrubyCache: max-value must be a number of bytes from 1 to %d "
                            "(64M), in digits with an optional K, M or G suffix, not '%s'",
                            MM_CACHE_VALUE_MAX, arg + 10);
    }
    c->max_value = (apr_size_t)n;
    return NULL;
}

/* Reads [NAME] PROVIDER[:ARGS] [OPTION...] into c. */
static const char *parse_words(cmd_parms *cmd, mm_cache_t *c, int argc, char *const argv[])
{
    const char *err;
    int i = 0;

    if (argc < 1) {
        return "mrubyCache: expected [NAME] PROVIDER[:ARGS] [max-value=BYTES]";
    }
    c->name = MM_CACHE_DEFAULT_NAME;
    c->max_value = MM_CACHE_VALUE_DEFAULT;
    /* Two words before any option: the first is the name. */
    if (argc >= 2 && !is_option(argv[1])) {
        c->name = argv[i++];
        if (!valid_name(c->name)) {
            return apr_psprintf(cmd->pool,
                                "mrubyCache: '%s' is not a cache name (1 to %d letters, digits, '_' or '-')",
                                c->name, MM_CACHE_NAME_MAX);
        }
    }
    c->spec = argv[i++];
    for (; i < argc; i++) {
        if ((err = parse_option(cmd, c, argv[i])) != NULL) {
            return err;
        }
    }
    c->cname = apr_pstrcat(cmd->pool, "mruby-", c->name, NULL);
    return NULL;
}

/* Finds the provider (its module must be loaded already) and has it
 * create the instance, in pconf. */
static const char *create_instance(cmd_parms *cmd, mm_cache_t *c)
{
    const char *sep = ap_strchr_c(c->spec, ':');
    const char *name = sep ? apr_pstrmemdup(cmd->pool, c->spec, sep - c->spec) : c->spec;
    const char *err;

    c->provider = ap_lookup_provider(AP_SOCACHE_PROVIDER_GROUP, name, AP_SOCACHE_PROVIDER_VERSION);
    if (c->provider == NULL) {
        return apr_psprintf(cmd->pool,
                            "mrubyCache: no socache provider '%s': load its module before this line "
                            "(LoadModule socache_%s_module .../mod_socache_%s.so)",
                            name, name, name);
    }
    err = c->provider->create(&c->instance, sep ? sep + 1 : NULL, cmd->temp_pool, cmd->pool);
    return err ? apr_psprintf(cmd->pool, "mrubyCache %s: %s", c->spec, err) : NULL;
}

const char *mm_cache_cmd(cmd_parms *cmd, void *dconf, int argc, char *const argv[])
{
    mm_server_conf_t *sc = ap_get_module_config(cmd->server->module_config, &mruby_module);
    mm_cache_t *c = apr_pcalloc(cmd->pool, sizeof *c);
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    if (err || (err = parse_words(cmd, c, argc, argv)) != NULL) {
        return err;
    }
    if (sc->caches == NULL) {
        sc->caches = apr_array_make(cmd->pool, 2, sizeof(mm_cache_t *));
    }
    if (mm_cache_find(cmd->server, c->name)) {
        return apr_psprintf(cmd->pool, "mrubyCache: the cache '%s' is already configured", c->name);
    }
    if ((err = create_instance(cmd, c)) != NULL) {
        return err;
    }
    APR_ARRAY_PUSH(sc->caches, mm_cache_t *) = c;
    return NULL;
}

static const apr_array_header_t *caches_of(server_rec *s)
{
    const mm_server_conf_t *sc = ap_get_module_config(s->module_config, &mruby_module);

    return sc->caches;
}

/* ------------------------------------------------------------ lifecycle */

int mm_cache_pre_config(apr_pool_t *pconf, apr_pool_t *plog)
{
    apr_status_t rv = ap_mutex_register(pconf, MM_CACHE_MUTEX_TYPE, NULL, APR_LOCK_DEFAULT, 0);

    if (rv != APR_SUCCESS) {
        ap_log_perror(APLOG_MARK, APLOG_CRIT, rv, plog,
                      MM_LOGNO(00900) "cannot register the " MM_CACHE_MUTEX_TYPE " mutex type");
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return OK;
}

/* A pconf cleanup: the generation ends (restart or stop). */
static apr_status_t destroy_instance(void *data)
{
    mm_cache_t *c = data;

    c->provider->destroy(c->instance, c->s);
    return APR_SUCCESS;
}

/* A cache's mutexes outlive the generation that made them: after a
 * graceful restart the old generation's children go on serving requests,
 * with the mutexes they attached. Destroyed with pconf and made anew, the
 * old ones failed in those children ("Invalid argument": a System V
 * semaphore removed under them). So each is made once, in the process's
 * pool, and found again by the cache's name at each restart; the Mutex
 * directive's choice for it is read when it is made (a full stop and start
 * applies a new one). */
static apr_status_t create_mutex(apr_global_mutex_t **mutex, mm_cache_t *c, const char *suffix, server_rec *s,
                                 apr_pool_t *pconf)
{
    const char *id = apr_pstrcat(pconf, c->name, suffix, NULL);
    const char *key = apr_pstrcat(pconf, "mod_mruby cache mutex ", id, NULL);
    apr_global_mutex_t **kept = ap_retained_data_get(key);
    apr_status_t rv;

    if (kept == NULL) {
        kept = ap_retained_data_create(key, sizeof *kept);
    }
    if (*kept) {
        *mutex = *kept;
        return APR_SUCCESS;
    }
    rv = ap_global_mutex_create(kept, NULL, MM_CACHE_MUTEX_TYPE, id, s, s->process->pool, 0);
    if (rv != APR_SUCCESS) {
        *kept = NULL;
        ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                     MM_LOGNO(00901) "cache '%s': cannot create its " MM_CACHE_MUTEX_TYPE " mutex", c->name);
        return rv;
    }
    *mutex = *kept;
    return APR_SUCCESS;
}

int mm_cache_post_config(apr_pool_t *pconf, apr_pool_t *plog, server_rec *s)
{
    /* What shmcb sizes its index by; the other providers ignore it. */
    static const struct ap_socache_hints hints = {32, 128, apr_time_from_sec(30)};
    const apr_array_header_t *caches = caches_of(s);
    int i;

    for (i = 0; caches && i < caches->nelts; i++) {
        mm_cache_t *c = APR_ARRAY_IDX(caches, i, mm_cache_t *);
        apr_status_t rv;

        c->s = s;
        if (create_mutex(&c->lock, c, "", s, pconf) != APR_SUCCESS) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        if ((c->provider->flags & AP_SOCACHE_FLAG_NOTMPSAFE) &&
            create_mutex(&c->store_lock, c, "-store", s, pconf) != APR_SUCCESS) {
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        rv = c->provider->init(c->instance, c->cname, &hints, s, pconf);
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         MM_LOGNO(00902) "cache '%s' (%s): the provider cannot initialize it", c->name,
                         c->spec);
            return HTTP_INTERNAL_SERVER_ERROR;
        }
        apr_pool_cleanup_register(pconf, c, destroy_instance, apr_pool_cleanup_null);
        ap_log_error(APLOG_MARK, APLOG_INFO, 0, s,
                     MM_LOGNO(00904) "cache '%s': %s, values up to %" APR_SIZE_T_FMT " bytes", c->name,
                     c->spec, c->max_value);
    }
    return OK;
}

static apr_status_t attach_mutex(apr_global_mutex_t **mutex, apr_pool_t *pchild)
{
    return *mutex ? apr_global_mutex_child_init(mutex, apr_global_mutex_lockfile(*mutex), pchild)
                  : APR_SUCCESS;
}

void mm_cache_child_init(apr_pool_t *pchild, server_rec *s)
{
    const apr_array_header_t *caches = caches_of(s);
    int i;

    in_child = 1;
    for (i = 0; caches && i < caches->nelts; i++) {
        mm_cache_t *c = APR_ARRAY_IDX(caches, i, mm_cache_t *);
        apr_status_t rv = attach_mutex(&c->lock, pchild);

        if (rv == APR_SUCCESS) {
            rv = attach_mutex(&c->store_lock, pchild);
        }
        if (rv != APR_SUCCESS) {
            ap_log_error(APLOG_MARK, APLOG_CRIT, rv, s,
                         MM_LOGNO(00903) "cache '%s': cannot attach its mutex in this child; "
                                         "Apache::Cache raises here",
                         c->name);
            c->unusable = 1;
        }
    }
}

mm_cache_t *mm_cache_find(server_rec *s, const char *name)
{
    const apr_array_header_t *caches = caches_of(s);
    int i;

    for (i = 0; caches && i < caches->nelts; i++) {
        mm_cache_t *c = APR_ARRAY_IDX(caches, i, mm_cache_t *);

        if (strcmp(c->name, name) == 0) {
            return c;
        }
    }
    return NULL;
}

const char *mm_cache_unusable(const mm_cache_t *c)
{
    if (!in_child) {
        return "caches are only available in child processes (requests, ChildInit), not in the parent";
    }
    if (c->unusable || c->lock == NULL) {
        return "its mutex could not be attached in this process (see MRB00903 in the error log)";
    }
    return NULL;
}

const char *mm_cache_name(const mm_cache_t *c)
{
    return c->name;
}

apr_size_t mm_cache_max_value(const mm_cache_t *c)
{
    return c->max_value;
}

/* ------------------------------------------------------------- locking */

apr_status_t mm_cache_lock(mm_cache_t *c)
{
    apr_os_thread_t self = apr_os_thread_current();
    apr_status_t rv;

    /* Only the holder ever stores itself here, so reading our own id means
     * we hold the lock. */
    if (__atomic_load_n(&c->holder, __ATOMIC_ACQUIRE) == self) {
        c->depth++;
        return APR_SUCCESS;
    }
    rv = apr_global_mutex_lock(c->lock);
    if (rv == APR_SUCCESS) {
        __atomic_store_n(&c->holder, self, __ATOMIC_RELEASE);
        c->depth = 1;
    }
    return rv;
}

apr_status_t mm_cache_unlock(mm_cache_t *c)
{
    if (--c->depth > 0) {
        return APR_SUCCESS;
    }
    __atomic_store_n(&c->holder, (apr_os_thread_t)0, __ATOMIC_RELEASE);
    return apr_global_mutex_unlock(c->lock);
}

/* ----------------------------------------------------------- operations */

/* The entry's id: FNV-1a hash of the key (4 bytes), then the key. */
static unsigned char *make_id(apr_pool_t *p, const char *key, apr_size_t klen, unsigned int *idlen)
{
    unsigned char *id = apr_palloc(p, klen + 4);
    apr_uint32_t h = 2166136261u;
    apr_size_t i;

    for (i = 0; i < klen; i++) {
        h = (h ^ (unsigned char)key[i]) * 16777619u;
    }
    id[0] = (unsigned char)(h >> 24);
    id[1] = (unsigned char)(h >> 16);
    id[2] = (unsigned char)(h >> 8);
    id[3] = (unsigned char)h;
    memcpy(id + 4, key, klen);
    *idlen = (unsigned int)(klen + 4);
    return id;
}

/* Serializes one provider call when the provider needs it. */
static apr_status_t store_lock(mm_cache_t *c)
{
    return c->store_lock ? apr_global_mutex_lock(c->store_lock) : APR_SUCCESS;
}

static void store_unlock(mm_cache_t *c)
{
    if (c->store_lock) {
        apr_global_mutex_unlock(c->store_lock);
    }
}

apr_status_t mm_cache_get(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_pool_t *p,
                          char **val, apr_size_t *vlen)
{
    unsigned int idlen, len = (unsigned int)c->max_value;
    unsigned char *id = make_id(p, key, klen, &idlen);
    unsigned char *buf = apr_palloc(p, c->max_value);
    apr_status_t rv = store_lock(c);

    if (rv != APR_SUCCESS) {
        return rv;
    }
    rv = c->provider->retrieve(c->instance, s, id, idlen, buf, &len, p);
    store_unlock(c);
    if (rv == APR_SUCCESS) {
        *val = (char *)buf;
        *vlen = len;
    }
    return rv;
}

apr_status_t mm_cache_set(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, const char *val,
                          apr_size_t vlen, apr_interval_time_t ttl, apr_pool_t *p)
{
    unsigned int idlen;
    unsigned char *id = make_id(p, key, klen, &idlen);
    /* The provider's own copy: store() takes a non-const buffer. */
    unsigned char *data = apr_pmemdup(p, val, vlen ? vlen : 1);
    apr_time_t expiry = apr_time_now() + ttl + MM_CACHE_TTL_SLACK;
    apr_status_t rv = store_lock(c);

    if (rv != APR_SUCCESS) {
        return rv;
    }
    rv = c->provider->store(c->instance, s, id, idlen, expiry, data, (unsigned int)vlen, p);
    store_unlock(c);
    /* memcache answers NOTFOUND when no server is up: for a store, that is
     * a failure, not an absent entry. The memcache and redis clients answer
     * EGENERAL when the server replied with an error (memcached: an item
     * larger than -I, out of memory; redis: maxmemory), whose text would be
     * APR's "Internal error". */
    if (APR_STATUS_IS_NOTFOUND(rv)) {
        return APR_ECONNREFUSED;
    }
    return rv == APR_EGENERAL ? MM_CACHE_EREFUSED : rv;
}

apr_status_t mm_cache_remove(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_pool_t *p)
{
    unsigned int idlen;
    unsigned char *id = make_id(p, key, klen, &idlen);
    apr_status_t rv = store_lock(c);

    if (rv != APR_SUCCESS) {
        return rv;
    }
    rv = c->provider->remove(c->instance, s, id, idlen, p);
    store_unlock(c);
    return rv;
}

/* The decimal integer in val[0..vlen), or MM_CACHE_ENOTINT. */
static apr_status_t parse_int(const char *val, apr_size_t vlen, apr_int64_t *n)
{
    char digits[24], *end;

    if (vlen == 0 || vlen >= sizeof digits || memchr(val, '\0', vlen)) {
        return MM_CACHE_ENOTINT;
    }
    memcpy(digits, val, vlen);
    digits[vlen] = '\0';
    if (!(apr_isdigit(digits[0]) || (digits[0] == '-' && apr_isdigit(digits[1])))) {
        return MM_CACHE_ENOTINT; /* no blanks or '+' */
    }
    errno = 0;
    *n = apr_strtoi64(digits, &end, 10);
    return (errno || *end) ? MM_CACHE_ENOTINT : APR_SUCCESS;
}

apr_status_t mm_cache_incr(mm_cache_t *c, server_rec *s, const char *key, apr_size_t klen, apr_int64_t by,
                           apr_interval_time_t ttl, apr_pool_t *p, apr_int64_t *result)
{
    apr_status_t rv = mm_cache_lock(c);
    apr_int64_t n = 0;
    char *val, text[24];
    apr_size_t vlen;

    if (rv != APR_SUCCESS) {
        return rv;
    }
    rv = mm_cache_get(c, s, key, klen, p, &val, &vlen);
    if (rv == APR_SUCCESS) {
        rv = parse_int(val, vlen, &n);
    } else if (APR_STATUS_IS_NOTFOUND(rv)) {
        rv = APR_SUCCESS;
    }
    if (rv == APR_SUCCESS && ((by > 0 && n > APR_INT64_MAX - by) || (by < 0 && n < APR_INT64_MIN - by))) {
        rv = MM_CACHE_EOVERFLOW;
    }
    if (rv == APR_SUCCESS) {
        n += by;
        vlen = (apr_size_t)apr_snprintf(text, sizeof text, "%" APR_INT64_T_FMT, n);
        /* A max-value below 20 bytes cannot hold every 64-bit number: a
         * longer one would be stored, but no read could take it back
         * (shmcb answers that there is no entry, the others fail), and the
         * next incr would start again from 0. The entry stays as it was. */
        rv = vlen > c->max_value ? MM_CACHE_ETOOLONG : mm_cache_set(c, s, key, klen, text, vlen, ttl, p);
    }
    mm_cache_unlock(c);
    *result = n;
    return rv;
}

const char *mm_cache_strerror(const mm_cache_t *c, apr_status_t rv, char *buf, apr_size_t size)
{
    switch (rv) {
    case MM_CACHE_ENOTINT:
        return "the value is not a decimal integer";
    case MM_CACHE_EOVERFLOW:
        return "the sum does not fit in 64 bits";
    case MM_CACHE_ETOOLONG:
        apr_snprintf(buf, size,
                     "the sum has more digits than the cache's max-value (%" APR_SIZE_T_FMT " bytes)",
                     c->max_value);
        return buf;
    case APR_ENOSPC:
        return "no room for the entry (shmcb: key and value must fit in one of its subcaches)";
    case APR_ENOMEM:
        apr_snprintf(buf, size, "the value is larger than the cache's max-value (%" APR_SIZE_T_FMT " bytes)",
                     c->max_value);
        return buf;
    case APR_ECONNREFUSED:
        return "no server of the cache is reachable";
    case MM_CACHE_EREFUSED:
        return "the cache server refused to store it (too large for it, or out of memory: "
               "see memcached -I, redis maxmemory)";
    default:
        return apr_strerror(rv, buf, size);
    }
}
